"""Scenario 2 (bursts) and the concurrency part of scenario 4.

A burst is ``events`` pushes spread round-robin over ``overlays`` overlays of the monorepo, all put
on the queue at once while the local sensor is already polling; the sensor runs ``concurrency``
workflows at a time (``imagebump run --local`` defaults to 4). Every overlay's writers are
serialised by the template's mutex; all overlays push to the same ``main`` branch, so commit-pr's
rebase-and-retry is exercised for real. Reported: time to drain (last workflow done − first
event sent), per-event latency p50/p95/max, events/s, outcomes, step retries, and the push races:
``lost_races`` (pushes the remote rejected because another writer got there first; commit-pr logs
each with the fields ``push_lost`` and ``backoff_s``), ``push_retries`` (of those, the ones retried in
the step after a fetch; the rest ended the attempt) and ``backoff_s`` (seconds slept before retries).

And the profile that explains a drain (issue 33): ``cpu`` (the machine's CPU seconds, busy and idle,
from the first event sent to the last workflow done, and the bench process's own: the bursts are
CPU-bound on a small machine, so a drain is its CPU) and ``steps_s`` (each step's time summed over
the burst, per timed phase, from the steps' ``step-timings`` records), with ``history_fetches``:
the edit-kustomize runs that fetched deeper history than their clone brought (a file unchanged in
the clone's commits; commit mode, so no proposal branch is fetched).
"""

from __future__ import annotations

import time
from typing import Any

from bench.sensor_loop import SensorLoop
from bench.stats import cpu_clock, cpu_spent, summary
from bench.testbed import World


def run_burst(
    world: World, executor_factory: Any, *, events: int, overlays: int, concurrency: int
) -> dict[str, Any]:
    """Send ``events`` at once over ``overlays`` overlays; wait until all are done."""
    overlays = min(overlays, len(world.apps))
    batch = [world.event_for(f"mono/{world.apps[i % overlays]}") for i in range(events)]
    records: list[dict[str, Any]] = []
    executor = executor_factory(records.append)
    with SensorLoop(world, executor, concurrency=concurrency) as loop:
        time.sleep(0.2)  # the sensor is polling before the burst arrives
        before = cpu_clock()
        loop.send(batch)
        done = loop.wait([e["id"] for e in batch], timeout=1800)
        cpu = cpu_spent(before, cpu_clock())
    first_sent = min(c.sent for c in done)
    last_done = max(c.done for c in done)
    drain = last_done - first_sent
    outcomes: dict[str, int] = {}
    for c in done:
        outcomes[c.outcome] = outcomes.get(c.outcome, 0) + 1
    return {
        "events": events,
        "overlays": overlays,
        "concurrency": concurrency,
        "drain_s": round(drain, 3),
        "events_per_s": round(events / drain, 3) if drain > 0 else None,
        "latency_s": summary([c.latency for c in done]),
        "workflow_s": summary([c.duration for c in done]),
        "outcomes": outcomes,
        "failed": sum(1 for c in done if c.phase != "Succeeded"),
        "step_retries": sum(1 for r in records if r.get("event") == "attempt-failed"),
        **push_races(records),
        "mutex_waits": sum(1 for r in records if r.get("event") == "mutex-waiting"),
        "cpu": cpu,
        **step_phases(records),
    }


def median_pair(
    runs: list[tuple[dict[str, Any], dict[str, Any] | None]],
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The (ours, plain git) pair whose drain ratio is the median of ``runs`` (the lower middle of an
    even count): its ratio is the burst's, and its profile explains that ratio."""
    paired = [(o, f) for o, f in runs if f is not None]
    if not paired:
        return runs[-1]
    ranked = sorted(paired, key=lambda p: p[0]["drain_s"] / p[1]["drain_s"])  # type: ignore[index]
    return ranked[(len(ranked) - 1) // 2]


def step_phases(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Each step's time summed over a burst, in total and per timed phase (seconds, the largest
    first), and how many edit-kustomize runs fetched (``history_fetches``), from the steps'
    ``step-timings`` records."""
    sums: dict[str, dict[str, float]] = {}
    fetches = 0
    for r in records:
        if r.get("event") != "step-timings":
            continue
        step = str(r.get("step") or r.get("template") or "?")
        into = sums.setdefault(step, {"total": 0.0})
        into["total"] += float(r.get("seconds") or 0)
        for phase, seconds in (r.get("phases") or {}).items():
            if isinstance(seconds, (int, float)):
                into[phase] = into.get(phase, 0.0) + seconds
        if step == "edit-kustomize" and "git fetch" in (r.get("phases") or {}):
            fetches += 1
    return {
        "steps_s": {
            step: {k: round(v, 2) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])}
            for step, phases in sums.items()
        },
        "history_fetches": fetches,
    }


def push_races(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Lost push races, in-step retries and seconds of backoff, from the steps' forwarded records."""
    lost = [r for r in records if isinstance(r.get("push_lost"), int)]
    return {
        "lost_races": len(lost),
        "push_retries": len(lost),  # every logged loss is retried in the step (the last one raises)
        "backoff_s": round(sum(float(r.get("backoff_s") or 0) for r in lost), 3),
    }


def run_concurrency(
    world: World, executor_factory: Any, *, levels: tuple[int, ...], events: int
) -> list[dict[str, Any]]:
    """The same burst (``events`` over as many overlays) at each concurrency level."""
    return [run_burst(world, executor_factory, events=events, overlays=events, concurrency=c) for c in levels]

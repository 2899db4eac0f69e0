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
"""

from __future__ import annotations

import time
from typing import Any

from bench.sensor_loop import SensorLoop
from bench.stats import summary
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
        loop.send(batch)
        done = loop.wait([e["id"] for e in batch], timeout=1800)
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

"""``python -m bench``: run every benchmark scenario, write results.json / results.png, print a table.

``--quick`` runs the same scenarios at smoke sizes (about two minutes); ``--only`` picks scenarios.
Nothing here asserts on time: it measures and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import (
    api_commits,
    burst,
    chart,
    coldstart,
    e2e,
    floor,
    growth,
    reconcile,
    report,
    waste,
)
from bench.stats import loadavg, machine
from bench.testbed import PROJECT_ROOT, open_world

#: The overlay of the cold events (and of waste's before/after): not the single event's, whose history
#: the floor's interleaved commits share.
COLD_REPOSITORY = "mono/app03"
SCENARIOS = ("single", "bursts", "floor", "growth", "waste", "sweep", "coldstart", "api_commits")


@dataclass(frozen=True)
class Sizes:
    """How big each scenario is. ``FULL`` is the issue's sizes; ``QUICK`` a smoke run."""

    apps: int = 27
    monorepo_files: int = 5000
    repo_sizes: tuple[int, ...] = (500, 5000, 50000)
    single_runs: int = 20
    pr_runs: int = 5
    probe_reps: int = 5
    bursts: tuple[tuple[int, int], ...] = ((27, 27), (200, 20))  # (events, overlays)
    burst_concurrency: int = 4
    #: interleaved (ours, plain git) pairs per burst, the 200-event one too (it ran once until
    #: 2026-12-08 and read 0.95-1.39x with the same steps): the ratio is the median pair's, so one
    #: pair's load does not decide the verdict
    burst_pairs: int = 3
    floor_runs: int = 20
    rule_counts: tuple[int, ...] = (10, 1000, 10000)
    size_reps: int = 3
    size_workflow_reps: int = 2
    concurrency_levels: tuple[int, ...] = (1, 2, 4, 8)
    concurrency_events: int = 8
    import_reps: int = 5
    before_after_runs: int = 5
    sweep_repositories: tuple[int, ...] = (10, 100, 1000)  # ECR repositories, two overlays each
    sweep_reps: int = 2
    #: (ECR repositories, images each) of reconcile's memory axis: peak RSS of the reconcile step
    sweep_memory: tuple[tuple[int, int], ...] = reconcile.MEMORY_SHAPES
    coldstart_runs: int = 7  # per step and runner (bench.coldstart)
    coldstart_event_runs: int = 7  # events per runner with fresh processes
    api_burst: int = 27  # bench.api_commits: pushes into as many overlays, mode pr, per commitMethod


FULL = Sizes(
    pr_runs=3, probe_reps=3, concurrency_events=6, size_workflow_reps=1, import_reps=3, before_after_runs=4
)
QUICK = Sizes(
    apps=6,
    monorepo_files=5000,
    repo_sizes=(500, 5000),
    single_runs=2,
    pr_runs=1,
    probe_reps=2,
    bursts=((6, 6),),
    burst_pairs=1,
    floor_runs=2,
    rule_counts=(10, 1000),
    size_reps=1,
    size_workflow_reps=1,
    concurrency_levels=(1, 2),
    concurrency_events=2,
    import_reps=2,
    before_after_runs=1,
    sweep_repositories=(10, 50),
    sweep_reps=1,
    sweep_memory=((10, 1000),),
    coldstart_runs=2,
    coldstart_event_runs=2,
    api_burst=6,
)


def _values_vs_kustomize(results: dict[str, Any], quick: bool, log: Any) -> None:
    """Issue 34: a values-file edit vs a kustomization edit, same run (:mod:`bench.values`)."""
    from bench import values as values_bench

    log("[growth] a values-file edit vs a kustomization edit …")
    found = values_bench.run(3 if quick else 15)
    results["growth"]["values_vs_kustomize"] = found
    results["ratios"]["values_edit_vs_kustomize"] = found["ratio_p50"]


def _interleaved_bursts(
    world: Any, factory: Any, sizes: Sizes, events: int, overlays: int, *, with_floor: bool, log: Any
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One burst, ours and (``with_floor``) plain git's; ``sizes.burst_pairs``
    pairs of them, interleaved (ours first, then plain git first, …). Returns the median pair
    (:func:`bench.burst.median_pair`), ours listing every pair's drains and ratio in ``pairs``."""
    c = sizes.burst_concurrency
    pairs = sizes.burst_pairs if with_floor else 1
    log(
        f"[bursts] {events} events over {overlays} overlays, concurrency {c}"
        + (f", {pairs} pairs with plain git interleaved …" if pairs > 1 else " …")
    )

    def ours() -> dict[str, Any]:
        b = burst.run_burst(world, factory, events=events, overlays=overlays, concurrency=c)
        log(f"[bursts] drained in {b['drain_s']:.1f}s ({b['events_per_s']:.2f}/s), load {loadavg()}")
        return b

    def plain(k: int) -> dict[str, Any] | None:
        if not with_floor:
            return None
        fb = floor.run_burst(world, events=events, overlays=overlays, concurrency=c, round_=k)
        log(f"[bursts] plain git drained in {fb['drain_s']:.1f}s, load {loadavg()}")
        return fb

    runs: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for k in range(pairs):
        if k % 2 == 0:  # ours first, then plain git first: a drifting load favours neither
            b = ours()
            runs.append((b, plain(k)))
        else:
            fb = plain(k)
            runs.append((ours(), fb))
    b, fb = burst.median_pair(runs)
    if fb is not None:
        b["pairs"] = [
            {"ours_s": o["drain_s"], "floor_s": f["drain_s"], "ratio": round(o["drain_s"] / f["drain_s"], 2)}
            for o, f in runs
            if f is not None
        ]
    return b, fb


def run(
    sizes: Sizes, only: Sequence[str], quick: bool, log: Any = print, checkpoint: Any = None
) -> dict[str, Any]:
    """Run the chosen scenarios; ``checkpoint(results)`` is called after each one (partial results).

    The 200-event burst goes last: it is the longest, and everything else is already saved when it runs.
    """
    started = time.monotonic()
    results: dict[str, Any] = {
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": quick,
        "complete": False,
        "machine": machine(),
        "sizes": dict(sizes.__dict__),
        "ratios": {},
    }

    def save() -> None:
        results["duration_s"] = round(time.monotonic() - started, 1)
        results["loadavg_at_end"] = loadavg()
        if checkpoint is not None:
            checkpoint(results)

    if "coldstart" in only:  # no world: first, before the big world loads the machine
        log(f"[coldstart] exec → first line per step, {sizes.coldstart_runs} runs per runner …")
        results["cold_start"] = coldstart.run(sizes.coldstart_runs, event=False, log=log)
        save()
    if "api_commits" in only:  # its own world: a git remote and the GitHub fake, in-process
        results["api_commits"] = api_commits.run(sizes.api_burst, sizes.burst_concurrency, log=log)
        save()
        if list(only) == ["api_commits"]:
            results["complete"] = True
            save()
            return results
    if "sweep" in only:  # its own world: ECR repositories and GitOps repositories of each size
        log(f"[sweep] reconcile runs at {list(sizes.sweep_repositories)} ECR repositories …")
        results["sweep"] = reconcile.run_sizes(sizes.sweep_repositories, reps=sizes.sweep_reps, log=log)
        save()
        log(
            f"[sweep-memory] the reconcile step's peak RSS at {list(sizes.sweep_memory)} (repositories, images) …"
        )
        results["sweep_memory"] = reconcile.run_memory(sizes.sweep_memory, log=log)
        save()
        if list(only) == ["sweep"]:
            results["complete"] = True
            save()
            return results
    cache_root = waste.new_cache_root()
    world_sizes = sizes.repo_sizes if "growth" in only else ()
    with open_world(
        apps=sizes.apps, monorepo_files=sizes.monorepo_files, sizes=world_sizes, log=log
    ) as world:

        def factory(sink: Any) -> Any:
            return world.executor(log=sink)

        def one_burst(events: int, overlays: int) -> None:
            b, fb = _interleaved_bursts(
                world, factory, sizes, events, overlays, with_floor="floor" in only, log=log
            )
            if fb is not None:
                results.setdefault("floor", {}).setdefault("bursts", []).append(fb)
                results["ratios"][f"burst_{events}"] = round(b["drain_s"] / fb["drain_s"], 2)
            results.setdefault("bursts", []).append(b)
            save()

        if "single" in only:
            floor_one = floor.interleaved(world) if "floor" in only else None
            log(
                f"[single] {sizes.single_runs} sequential events → commit"
                + (
                    ", each followed by one plain-git commit (the floor, interleaved) …"
                    if floor_one
                    else " …"
                )
            )
            single = e2e.run_sequential(
                world, world.executor(), "mono/app00", sizes.single_runs, between=floor_one
            )
            if floor_one is not None:
                results.setdefault("floor", {})["single"] = {**floor_one.summary(), "interleaved": True}
            log(f"[single] p50 {single['latency_s']['p50']:.2f}s; {sizes.pr_runs} events → PR branch …")
            single["pr_mode"] = e2e.run_sequential(world, world.executor(), "prmode/pr00", sizes.pr_runs)
            log("[single] probing the phases inside the steps …")
            probes = e2e.probe_phases(world, reps=sizes.probe_reps)
            single["probes"] = probes
            single["breakdown"] = e2e.breakdown(single)
            single["other_s"] = e2e.other_times(single)
            commit_pr = single["steps_s"]["commit-pr"].get("p50")
            pr_commit = single["pr_mode"]["steps_s"]["commit-pr"].get("p50")
            if commit_pr and pr_commit:
                single["pr_step_extra_s"] = round(pr_commit - commit_pr, 3)
            results["single_event"] = single
            save()
        if "floor" in only:
            if "single" not in results.get("floor", {}):
                log(f"[floor] {sizes.floor_runs} plain-git commits …")
                results.setdefault("floor", {})["single"] = floor.run_sequential(world, sizes.floor_runs)
            if "single_event" in results:
                ours = results["single_event"].get("to_commit_s") or results["single_event"]["latency_s"]
                results["ratios"]["single_p50"] = round(  # push → commit landed, as plain git's push
                    ours["p50"] / results["floor"]["single"]["total_s"]["p50"],
                    2,
                )
            save()
        if "coldstart" in only:  # a whole event with fresh processes: the same world as the single event
            log(f"[coldstart] {sizes.coldstart_event_runs} events → commit with a new Python per step …")
            results["cold_start"]["event"] = coldstart.run_event(
                sizes.coldstart_event_runs, log, world=world, repository=COLD_REPOSITORY
            )
            save()
        later = []
        if "bursts" in only:
            for events, overlays in sizes.bursts:
                if events > 100:
                    later.append((events, overlays))
                else:
                    one_burst(events, overlays)
        if "growth" in only:
            log(f"[growth] rules {list(sizes.rule_counts)} …")
            g: dict[str, Any] = {"rules": growth.run_rules(sizes.rule_counts)}
            results["growth"] = g
            log(f"[growth] repository sizes {list(sizes.repo_sizes)} …")
            g["repo_sizes"] = growth.run_repo_sizes(
                world, reps=sizes.size_reps, workflow_reps=sizes.size_workflow_reps
            )
            save()
            log(
                f"[growth] concurrency {list(sizes.concurrency_levels)} "
                f"({sizes.concurrency_events} events each) …"
            )
            g["concurrency"] = burst.run_concurrency(
                world, factory, levels=sizes.concurrency_levels, events=sizes.concurrency_events
            )
            save()
            _values_vs_kustomize(results, quick, log)
            save()
        if "waste" in only:
            log("[waste] imports per step process …")
            w: dict[str, Any] = {"imports": waste.run_imports(sizes.import_reps, cache_root)}
            results["waste"] = w
            log(f"[waste] before/after, {sizes.before_after_runs} events each …")
            cold_event = results.get("cold_start", {}).get("event")
            w["before_after"] = waste.run_before_after(world, runs=sizes.before_after_runs, before=cold_event)
            save()
        for events, overlays in later:
            one_burst(events, overlays)
    results["complete"] = True
    save()
    return results


def merge(previous: dict[str, Any], new: dict[str, Any], command: str) -> dict[str, Any]:
    """``previous`` with the scenarios ``new`` ran replaced (bursts matched by their event count)."""
    out = json.loads(json.dumps(previous))
    for key in ("single_event", "growth", "waste", "sweep", "sweep_memory", "cold_start", "api_commits"):
        if key in new:
            out[key] = new[key]
    for key in ("bursts",):
        if key in new:
            kept = [b for b in out.get(key, []) if b["events"] not in {n["events"] for n in new[key]}]
            out[key] = sorted(kept + new[key], key=lambda b: b["events"])
    if "floor" in new:
        floor_out = out.setdefault("floor", {})
        if "single" in new["floor"]:
            floor_out["single"] = new["floor"]["single"]
        if "bursts" in new["floor"]:
            done = {n["events"] for n in new["floor"]["bursts"]}
            floor_out["bursts"] = sorted(
                [b for b in floor_out.get("bursts", []) if b["events"] not in done] + new["floor"]["bursts"],
                key=lambda b: b["events"],
            )
    out.setdefault("ratios", {}).update(new.get("ratios", {}))
    out.setdefault("merged_runs", []).append(
        {
            "command": command,
            "timestamp": new["timestamp"],
            "duration_s": new.get("duration_s"),
            "loadavg_at_end": new.get("loadavg_at_end"),
            "complete": new.get("complete"),
        }
    )
    out["complete"] = bool(previous.get("complete", True) or new.get("complete"))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke sizes (about two minutes)")
    parser.add_argument(
        "--only", nargs="+", choices=SCENARIOS, default=list(SCENARIOS), help="scenarios to run"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=PROJECT_ROOT / "bench",
        help="where results.json and results.png go (default bench/)",
    )
    parser.add_argument(
        "--docs",
        type=Path,
        default=PROJECT_ROOT / "docs" / "benchmarks.md",
        help="the Markdown summary to write (default docs/benchmarks.md; '-' for none)",
    )
    parser.add_argument(
        "--burst",
        action="append",
        metavar="EVENTS:OVERLAYS",
        help="bursts to run instead of the default ones (repeatable), e.g. 200:20",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="merge into the existing OUT/results.json instead of replacing it "
        "(re-run one scenario, e.g. --only bursts --burst 200:20 --merge)",
    )
    parser.add_argument(
        "--render",
        action="store_true",
        help="run nothing: redraw results.png, the docs and the table from OUT/results.json",
    )
    args = parser.parse_args(argv)
    if args.render:
        results = json.loads((args.out / "results.json").read_text())
        chart.draw(results, args.out / "results.png")
        if str(args.docs) != "-":
            report.write_markdown(args.docs, results, results.get("command", "python -m bench"))
        print(report.table(results))
        return 0
    sizes = QUICK if args.quick else FULL
    if args.burst:
        try:
            chosen = tuple((int(e), int(o)) for e, o in (b.split(":") for b in args.burst))
        except ValueError:
            parser.error("--burst takes EVENTS:OVERLAYS, e.g. 200:20")
        sizes = replace(sizes, bursts=chosen)
    command = (
        "python -m bench"
        + (" --quick" if args.quick else "")
        + (f" --only {' '.join(args.only)}" if list(args.only) != list(SCENARIOS) else "")
        + "".join(f" --burst {b}" for b in args.burst or ())
    )
    previous = None
    if args.merge and (args.out / "results.json").is_file():
        previous = json.loads((args.out / "results.json").read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    drew = False

    def write(results: dict[str, Any]) -> None:
        nonlocal drew
        if previous is not None:
            results = merge(previous, results, command)
        else:
            results["command"] = command
        (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        drew = chart.draw(results, args.out / "results.png")
        if str(args.docs) != "-":
            report.write_markdown(args.docs, results, results.get("command", command))

    results = run(sizes, args.only, args.quick, checkpoint=write)
    print()
    print(report.table(results))
    print()
    print(
        f"wrote {args.out / 'results.json'}"
        + (
            f", {args.out / 'results.png'}"
            if drew
            else " (no chart: pip install -e '.[bench]' for matplotlib)"
        )
        + ("" if str(args.docs) == "-" else f", {args.docs}")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

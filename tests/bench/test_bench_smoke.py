"""Smoke test of the benchmark code (``python -m bench``): every scenario function at its smallest.

It checks shapes, never times: the point is that the benchmark cannot rot while the code it
measures changes. Workflows run through the real executor and template, steps forked from the
executor's warm interpreter as ``imagebump run --local`` starts them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import burst, e2e, floor, growth, report, waste
from bench.__main__ import FULL, QUICK
from bench.stats import machine, percentile, summary
from bench.testbed import World, open_world

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with open_world(apps=2, monorepo_files=40, sizes=(30,), log=lambda *_: None) as w:
        yield w


@pytest.fixture(scope="module")
def fast_executor(world: World):
    def make(sink=None):
        return world.executor(log=sink)

    return make


def test_percentile_and_summary() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0], 95) == pytest.approx(1.95)
    assert set(summary([1.0, 2.0])) == {"n", "p50", "p95", "max", "min", "mean"}
    assert summary([]) == {"n": 0}
    assert {"python", "cpus", "git"} <= set(machine())


def test_single_event_and_breakdown(world: World, fast_executor) -> None:
    single = e2e.run_sequential(world, fast_executor(), "mono/app00", 1)
    assert single["outcomes"] == {"committed": 1}, single
    assert {"latency_s", "workflow_s", "queue_and_sensor_s", "steps_s", "latencies"} <= set(single)
    assert set(single["steps_s"]) == set(e2e.STEPS)
    # each step process accounts for its own time (steps.runtime.timing), read from its last log record
    acc = single["accounting"]
    assert set(acc) == set(e2e.STEPS) and all({"node", "outside", "other"} <= set(v) for v in acc.values())
    # edit-kustomize's ECR call runs beside its history read: its thread's time and the wait for it
    assert {"git clone", "ecr call (background)", "ecr call (waited for)"} <= set(acc["edit-kustomize"])
    assert "git push" in acc["commit-pr"]
    probes = e2e.probe_phases(world, reps=1, steps=("commit-pr",))
    assert {
        "clone",
        "edit",
        "commit",
        "push",
        "pr_branch_push",
        "ecr_describe",
        "clone_objects",
        "edit_commit_objects",
        "path_objects",
        "seed",
        "edit_commit_seeded",
        "push_lease",
    } == set(probes["phases_s"])
    assert set(probes["forked_imports_s"]) == {"commit-pr"} and probes["forked_start_s"]["n"] == 1
    assert probes["ecr_lookup_forked_s"] >= probes["ecr_call_forked_s"] > 0
    # where the time goes = the same account: one 'other' per step, PR mode's commit-pr beside it
    single["pr_mode"] = e2e.run_sequential(world, fast_executor(), "prmode/pr00", 1)
    parts = e2e.breakdown(single)
    assert set(parts) == {*e2e.STEPS, "commit-pr (PR)"}
    assert parts["commit-pr"]["total"] == acc["commit-pr"]["node"]
    assert parts["commit-pr"]["other"] == acc["commit-pr"]["other"]
    assert not any(k.endswith("(background)") for row in parts.values() for k in row)
    assert e2e.other_times(single)["commit-pr (PR)"] == single["pr_mode"]["accounting"]["commit-pr"]["other"]
    shown = report.table(
        {"timestamp": "t", "machine": machine(), "single_event": {**single, "breakdown": parts}}
    )
    assert "as each step process accounts for it" in shown and "commit-pr (PR)" in shown


def test_the_world_runs_the_template_as_run_local_without_argo_cd(world: World) -> None:
    """No Argo CD in the world: verify-live is off, as ``imagebump run --local`` sets it without
    ``--argocd-context`` (verify-live and notify-verifying are skipped, not run to say so)."""
    from imagebump.local.live import live_parameters

    params = world.executor().workflow_parameters
    assert params["verify-live"] == live_parameters(None)["verify-live"] == "false"


def test_burst_shape(world: World, fast_executor) -> None:
    result = burst.run_burst(world, fast_executor, events=2, overlays=2, concurrency=2)
    assert result["failed"] == 0, result
    assert {"drain_s", "events_per_s", "latency_s", "outcomes", "step_retries", "mutex_waits"} <= set(result)
    # the profile a miss is explained by: the machine's CPU over the drain, the steps' summed phases
    assert result["cpu"] is None or result["cpu"]["busy_s"] > 0
    assert result["steps_s"]["edit-kustomize"]["git clone"] > 0
    assert result["steps_s"]["commit-pr"]["total"] > 0
    assert 0 <= result["history_fetches"] <= 2


def test_a_burst_measured_in_interleaved_pairs(world: World, fast_executor) -> None:
    """Issue 33: the burst's ratio comes from pairs of (ours, plain git) run one after the other,
    and the pair it reports is one of them, with its own profile."""
    from dataclasses import replace

    from bench.__main__ import _interleaved_bursts

    b, fb = _interleaved_bursts(
        world, fast_executor, replace(QUICK, burst_pairs=2), 2, 2, with_floor=True, log=lambda *_: None
    )
    assert fb is not None and b["failed"] == 0, b
    assert len(b["pairs"]) == 2
    assert {"ours_s": b["drain_s"], "floor_s": fb["drain_s"]}.items() <= next(
        p for p in b["pairs"] if p["ours_s"] == b["drain_s"]
    ).items()
    assert b["steps_s"]["commit-pr"]["total"] > 0 and "cpu" in fb


def test_the_floors_commits_read_as_imagebumps_own() -> None:
    """The floor's commits stay in the world the next scenario runs in: they carry imagebump's
    trailer, so they do not read as a person's edits (which make every later event read the history)."""
    from steps.domain.intent import by_imagebump

    assert by_imagebump(floor.floor_message("apps/app00/overlays/prod", "8.0.1"))


def test_floor_shape(world: World) -> None:
    single = floor.run_sequential(world, 1)
    assert {"total_s", "clone_s", "edit_commit_s", "push_s"} <= set(single)
    result = floor.run_burst(world, events=2, overlays=2, concurrency=2)
    assert {"drain_s", "events_per_s", "latency_s", "push_retries", "cpu"} <= set(result)


def test_growth_shapes(world: World) -> None:
    (rules,) = growth.run_rules((10,), number=5)
    assert rules["targets_for_hit"] == 1
    assert {"load_ms", "match_hit_us", "match_miss_us"} <= set(rules)
    (size,) = growth.run_repo_sizes(world, reps=1, workflow_reps=0)
    assert size["files"] == 30
    assert {"our_git_s", "floor_partial_s", "floor_full_clone_s", "workflow_edit_s"} <= set(size)


def test_values_vs_kustomize_shape() -> None:
    """Issue 34's line (``bench.values``), both kinds measured the same number of rounds."""
    from bench import values

    r = values.run(2)
    assert {"kustomize", "values", "ratio_p50", "edit_ratio_p50"} <= set(r)
    assert r["values"]["edit_s"]["n"] == r["kustomize"]["edit_s"]["n"] == 2
    assert r["values"]["with_clone_s"]["p50"] >= r["values"]["edit_s"]["p50"] > 0


def test_waste_imports(tmp_path: Path) -> None:
    result = waste.run_imports(1, tmp_path, steps=("edit-kustomize",))
    assert set(result["steps"]["edit-kustomize"]) == {
        "as_shipped_image_s",
        "fresh_process_s",
        "precompiled_s",
        "precompiled_no_hera_runner_s",
    }


def test_before_after_runs_both_ways(world: World) -> None:
    result = waste.run_before_after(world, runs=1, repository="mono/app01")
    assert result["before"]["failed"] == result["after"]["failed"] == 0, result
    assert result["before"]["outcomes"] == result["after"]["outcomes"] == {"committed": 1}
    assert result["p50_speedup"] is not None


def test_cold_events_in_the_world_are_the_before_figure(world: World) -> None:
    """One figure for "a whole event with fresh processes": the cold events run in the benchmark's
    world are what before/after reports as its before."""
    from bench import coldstart

    cold = coldstart.run_event(1, lambda *_: None, world=world, repository="mono/app01")
    assert cold["outcomes"] == {"hera": {"committed": 1}, "entry": {"committed": 1}, "warm": {"committed": 1}}
    assert {"entry", "warm"} <= set(cold["to_commit_s"])  # cold / warm from the same rounds
    result = waste.run_before_after(world, runs=1, repository="mono/app01", before=cold)
    assert result["before"]["latency_s"] == cold["latency_s"]["entry"]
    assert result["after"]["outcomes"] == {"committed": 1}


def test_report_renders_from_partial_results(tmp_path: Path) -> None:
    results = {
        "timestamp": "t",
        "quick": True,
        "machine": machine(),
        "ratios": {},
        "duration_s": 1.0,
        "growth": {"rules": [{"rules": 10, "load_ms": 1.0, "match_hit_us": 2.0, "match_miss_us": 1.0}]},
    }
    assert "rules matching" in report.table(results)
    assert "| measure | result |" in report.markdown(results, "python -m bench")
    json.dumps(results)
    assert QUICK.single_runs < FULL.single_runs


def test_sweep_shape_and_cost() -> None:
    """The reconcile sweep scenario at its smallest: ECR calls = listing + one per repository, one clone."""
    from bench import reconcile

    (row,) = reconcile.run_sizes((3,), reps=1, log=lambda *_: None)
    assert (row["repositories"], row["overlays"]) == (3, 6)
    assert row["ecr_calls"] == 1 + 3 and row["git_clones"] == 1
    assert row["states"] == {"behind": 2, "current": 4}  # svc0000's two overlays hold the older tag
    assert "reconcile run" in report.table({"timestamp": "t", "machine": machine(), "sweep": [row]})
    assert QUICK.sweep_repositories[-1] <= 100 < FULL.sweep_repositories[-1] == 1000


def test_sweep_memory_axis_measures_the_reconcile_step_in_a_child() -> None:
    """The images-per-repository axis at its smallest: the reconcile step runs as its pod runs it
    against the synthetic paged ECR, reads every page, and its peak RSS is reported."""
    from bench import reconcile

    (row,) = reconcile.run_memory(((2, 1500),), log=lambda *_: None)
    assert (row["repositories"], row["images_per_repository"], row["overlays"]) == (2, 1500, 4)
    assert row["ecr_calls"] == 1 + 2 * 2  # one listing page; two DescribeImages pages per repository
    assert row["states"]["behind"] == 2 and row["states"]["current"] == 2  # svc0000 holds the older image
    assert 0 < row["peak_rss_mib"] < row["budget_mib"]
    assert "peak RSS" in report.table({"timestamp": "t", "machine": machine(), "sweep_memory": [row]})

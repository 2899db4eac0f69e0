"""Where a step's time goes (steps.runtime.timing): phases summed per process, one ``step-timings`` record
at the end of a step process — the numbers the benchmark uses to account for every step's time."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from steps.runtime import timing
from tests.steps.commit_pr.support import kustomization, target
from tests.steps.runtime.test_runtime import _records, _runner


def test_phases_are_summed_named_by_thread_and_taken_once() -> None:
    timing.take()
    for _ in range(2):
        with timing.timed("git clone"):
            pass

    def background() -> None:
        with timing.timed("ecr client"):
            pass

    worker = threading.Thread(target=background)
    worker.start()
    worker.join()
    phases = timing.take()
    assert set(phases) == {"git clone", "ecr client (background)"}
    assert all(seconds >= 0 for seconds in phases.values())
    assert timing.take() == {}


def test_a_phase_counts_only_its_own_time_not_the_phases_timed_within_it(monkeypatch) -> None:
    """``history`` wraps its ``git fetch``: the fetch is counted once, under ``git fetch``. The
    clock is injected (the module's ``time``), so a loaded machine cannot move the figures."""
    now = [100.0]
    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    timing.take()
    with timing.timed("history"):
        now[0] += 0.02
        with timing.timed("git fetch"):
            now[0] += 0.1
        now[0] += 0.005
    phases = timing.take()
    assert phases == {"git fetch": pytest.approx(0.1), "history": pytest.approx(0.025)}


def test_git_phase_is_the_subcommand() -> None:
    assert timing.git_phase(["clone", "--quiet", "url"]) == "git clone"
    assert (
        timing.git_phase(["-c", "user.name=x", "-c", "core.abbrev=no", "commit", "-F", "-"]) == "git commit"
    )
    assert timing.git_phase(["-C", "dir", "push"]) == "git push"
    assert timing.git_phase([]) == "git"


def test_a_step_process_ends_with_its_timings(make_remote, git_token, tmp_path) -> None:
    """edit-kustomize in its own process: the last record says how long the step took and where
    the time went (the clone, the objects read for the plan, the outputs)."""
    remote = make_remote({"overlays/prod/kustomization.yaml": kustomization("1.0.0")})
    tgt = target(remote.url, order="semver")
    proc = _runner(
        "edit_kustomize.step",
        {"target": tgt.model_dump_json()},
        tmp_path,
        {"IMAGEBUMP_GIT_READ_TOKEN": git_token},
    )
    assert proc.returncode == 0, proc.stderr
    last = _records(proc.stderr)[-1]
    assert last["event"] == "step-timings" and last["message"].startswith("edit-kustomize took ")
    assert {"git clone", "git cat-file", "outputs"} <= set(last["phases"])
    assert last["seconds"] >= sum(last["phases"].values())
    assert git_token not in proc.stderr

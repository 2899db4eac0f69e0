"""Issue 33: a lost push race costs one fetch into the same repository (no fresh clone), and the
backoff runs on an injected clock, sleep and random source (no real sleep in a test).

Against a real ``git http-backend`` remote (``make_remote``).
"""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steps.commit_pr.commit_mode import land_commit
from steps.commit_pr.retry import BACKOFF_BASE_MAX, BACKOFF_CAP, Pacer, backoff
from steps.commit_pr.settings import CommitPrSettings
from steps.git import GitAuth
from tests.steps.commit_pr.support import kustomization, overlay_files, plan, target
from tests.steps.commit_pr.test_carried_plan import _env, seeded  # noqa: F401 - the autouse fixture

FILE = "overlays/prod/kustomization.yaml"


class FakeTime:
    """A clock that moves only when slept on, and records every sleep."""

    def __init__(self) -> None:
        self.now, self.slept = 100.0, []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def land(remote, p, tmp_path, fake: FakeTime):
    """commit-pr's ``mode: commit`` for plan ``p`` on ``remote``'s main, its retries on ``fake``'s clock."""
    return land_commit(
        target(remote.url),
        p,
        CommitPrSettings.from_env(),
        GitAuth.from_env(write=True),
        "main",
        tmp_path,
        pacer=Pacer(clock=fake.clock, sleep=fake.sleep, rng=random.Random(1)),
    )


@pytest.fixture()
def no_real_sleep(monkeypatch):
    def refuse(_seconds: float) -> None:
        raise AssertionError("a real sleep in a push retry")

    monkeypatch.setattr(time, "sleep", refuse)


def test_the_pacer_waits_on_the_injected_sleep_only(no_real_sleep) -> None:
    fake = FakeTime()
    pacer = Pacer(clock=fake.clock, sleep=fake.sleep, rng=random.Random(7))
    pacer.started()
    assert pacer.lost("push to main", 1, 5) == 0.0  # the first retry at once
    assert fake.slept == []
    pacer.started()
    fake.now += 0.2  # the rejected push took 0.2 s
    delays = [pacer.lost("push to main", n, 5) for n in (2, 3, 4)]
    assert fake.slept == [d for d in delays if d > 0]
    assert all(
        0.0 <= d <= min(BACKOFF_CAP, 0.2 * 2 ** (n - 2)) for d, n in zip(delays, (2, 3, 4), strict=True)
    )


@given(attempt=st.integers(1, 50), base=st.floats(0, 100, allow_nan=False), seed=st.integers(0, 2**32))
def test_backoff_never_exceeds_its_cap_nor_goes_negative(attempt: int, base: float, seed: int) -> None:
    delay = backoff(attempt, base=base, rng=random.Random(seed))
    assert 0.0 <= delay <= min(BACKOFF_CAP, BACKOFF_BASE_MAX * 2 ** max(0, attempt - 2))
    assert delay == backoff(attempt, base=base, rng=random.Random(seed))  # the injected source decides


def test_a_lost_race_from_the_plans_base_fetches_into_the_same_repository(make_remote, tmp_path):
    """The plan's base (seeded, no fetch) loses to someone else's commit: commit-pr moves that same
    repository to the newest base with one fetch and lands there; no second clone is made."""
    paths = ["overlays/prod", "overlays/dev"]
    remote = make_remote(overlay_files(*paths))
    p = seeded(remote, plan(), kustomization("1.0.0"))
    remote.commit_files({"overlays/dev/kustomization.yaml": kustomization("2.0.0")}, "someone else")
    before = remote.server.read_sessions(remote.name)
    fake = FakeTime()

    out = land(remote, p, tmp_path, fake)

    assert out.action == "committed"
    assert remote.read(FILE) == kustomization("1.1.0")
    assert remote.read("overlays/dev/kustomization.yaml") == kustomization("2.0.0")  # nobody's commit lost
    assert remote.server.read_sessions(remote.name) - before == 1  # one fetch, no blob
    assert not (tmp_path / "repo").exists()  # no fresh clone
    assert fake.slept == []  # the first retry goes at once


def test_a_lost_race_lands_the_same_commit_with_one_git_process_after_the_fetch(make_remote, tmp_path):
    """After the fetch, the retry reads the newest base's trees above the file with one ``cat-file``
    and writes its commit as loose objects (no ``rev-parse``, ``update-ref``, ``ls-tree`` nor
    ``fast-import``): the remote holds exactly the newest base with the one file replaced, whole.
    Its only other git processes ask whether a commit since the plan's base touched the file (the
    same bytes may be a change and its rollback): ``merge-base`` and ``rev-list``, on the commits the
    fetch brought."""
    from steps.runtime import timing

    paths = ["overlays/prod", "overlays/dev"]
    remote = make_remote(overlay_files(*paths))
    p = seeded(remote, plan(), kustomization("1.0.0"))
    remote.commit_files({"overlays/dev/kustomization.yaml": kustomization("2.0.0")}, "someone else")
    newest = remote.git("rev-parse", "main").strip()
    fake = FakeTime()
    timing.take()

    out = land(remote, p, tmp_path, fake)

    git_phases = {k for k in timing.take() if k.startswith("git ")}
    assert out.action == "committed"
    assert git_phases == {
        "git seed",
        "git push",
        "git fetch",
        "git cat-file",
        "git merge-base",
        "git rev-list",
    }, git_phases
    assert remote.git("rev-parse", f"{out.commit_sha}^").strip() == newest
    changed = remote.git("diff-tree", "--no-commit-id", "--name-only", "-r", newest, out.commit_sha).split()
    assert changed == [FILE]
    assert remote.read(FILE) == kustomization("1.1.0")
    assert remote.git("fsck", "--no-dangling").strip() == ""


def test_a_base_that_moved_before_the_clone_is_not_fetched_to_vouch_for_it(make_remote, tmp_path):
    """The plan's base had a clean history, but main moved before commit-pr cloned it (no lost race):
    the plan's base is not in the clone, and nothing fetches it to ask whether the file was touched
    since (a partial clone fetches a commit it lacks as soon as git is asked about it). One read of
    the remote, the clone; the commit says nothing of a base nobody checked."""
    from steps.domain.intent import HISTORY_KEY

    paths = ["overlays/prod", "overlays/dev"]
    remote = make_remote(overlay_files(*paths))
    p = seeded(remote, plan(), kustomization("1.0.0"))
    p = p.model_copy(update={"base_objects": [], "history_clean": True})  # text carried, no objects: a clone
    remote.commit_files({"overlays/dev/kustomization.yaml": kustomization("2.0.0")}, "someone else")
    before = remote.server.read_sessions(remote.name)

    out = land(remote, p, tmp_path, FakeTime())

    assert out.action == "committed"
    assert remote.server.read_sessions(remote.name) - before == 1  # the clone; no fetch of the old base
    assert HISTORY_KEY not in remote.git("log", "-1", "--format=%B", "main")

"""The rollback promise as properties (issue 30): imagebump never writes an image a person rolled
back until an image newer than the rolled-back one is pushed after the rollback, or a person moves
the entry forward.

Pure and fast: a Hypothesis state machine plays pushes (in any order of versions), imagebump's
writes (its commits merged every way GitHub merges: a merge commit, a rebase, a squash with the
message, a squash with the title only), people's rollbacks and hand edits forward, under each
``order``. After every step the entry's whole history is judged as the steps judge it
(:func:`steps.domain.intent.standing_rollbacks` + :func:`steps.domain.intent.held_by_standing`)
and compared with an independent oracle that tracks the rollbacks step by step.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from steps.domain.intent import (
    ImageChange,
    by_imagebump,
    held_by_standing,
    older,
    standing_rollbacks,
    trailer,
)
from steps.domain.models import ImagesEntry
from steps.domain.version_order import compare_semver, parse_semver

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
TAGS = ["1.0.0", "1.1.0", "1.1.1", "1.2.0", "2.0.0"]  # few: sequences meet often
T0 = datetime(2026, 1, 1, tzinfo=UTC)
MERGES = ["merge-commit", "rebase", "squash-with-message", "squash-title-only"]


def _entry(tag: str) -> ImagesEntry:
    return ImagesEntry(name=IMAGE, newTag=tag)


def _imagebump_message(old: str, new: str, merge: str, number: int) -> tuple[str, str]:
    """(message, via_pull_request) of imagebump's change as it lands on the base branch."""
    subject = f"imagebump(prod): api {old} → {new} in apps/api/overlays/prod"
    line = trailer(IMAGE, new, None)
    if merge in ("merge-commit", "rebase"):
        return f"{subject}\n\n{line}\n", ""
    if merge == "squash-with-message":  # GitHub: title, the description, then co-authors
        return f"{subject} (#{number})\n\n{line}\n\nCo-authored-by: Ann <ann@example.com>\n", ""
    # title only: no trailer; the history reader identifies it by refs/pull/N/head (git-backed tests)
    return f"{subject} (#{number})\n", f"squash merge of imagebump's pull request #{number}"


class Rollbacks(RuleBasedStateMachine):
    """One entry, one ECR repository, one order; a clock that moves 10 s per step."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = T0
        self.pushed: dict[str, datetime] = {}
        self.history: list[ImageChange] = []  # newest first, as the history reader returns it
        self.current = ""
        self.order = "semver"
        self.active: list[tuple[ImagesEntry, datetime]] = []  # the oracle: (rolled back, when)
        self.prs = 0

    def tick(self) -> datetime:
        self.clock += timedelta(seconds=10)
        return self.clock

    def pushed_at(self, entry: ImagesEntry) -> datetime | None:
        return self.pushed.get(entry.newTag or "")

    @initialize(order=st.sampled_from(["semver", "push-time", "none"]), first=st.sampled_from(TAGS))
    def start(self, order: str, first: str) -> None:
        self.order = order
        self.pushed[first] = self.tick()
        self.current = first

    # --- the oracle ---------------------------------------------------------------------------

    def newer(self, a: ImagesEntry, b: ImagesEntry) -> bool:
        """``a`` newer than ``b`` by the order (the oracle's own comparison)."""
        if self.order == "semver":
            va, vb = parse_semver(a.newTag), parse_semver(b.newTag)
            return compare_semver(va, vb) > 0  # type: ignore[arg-type]
        if self.order == "push-time":
            return self.pushed[a.newTag or ""] > self.pushed[b.newTag or ""]
        return a.newTag != b.newTag

    def oracle_allows(self, tag: str) -> bool:
        new = _entry(tag)
        for rolled_back, when in self.active:
            if self.pushed[tag] <= when:
                return False  # pushed before the rollback (a redelivery, an older image)
            if (
                self.order == "semver"
                and not self.newer(new, rolled_back)
                and not self.newer(rolled_back, new)
            ):
                return False  # the rolled-back version itself again
        return True

    def judged(self, tag: str) -> str | None:
        standing = standing_rollbacks(self.history, self.order, self.pushed_at)  # type: ignore[arg-type]
        return held_by_standing(standing, _entry(tag), self.pushed[tag], self.order)  # type: ignore[arg-type]

    # --- the steps ----------------------------------------------------------------------------

    @rule(tag=st.sampled_from(TAGS))
    def push(self, tag: str) -> None:
        if tag not in self.pushed:
            self.pushed[tag] = self.tick()

    @rule(tag=st.sampled_from(TAGS), merge=st.sampled_from(MERGES))
    def imagebump_event(self, tag: str, merge: str) -> None:
        """An event, a redelivery, a resubmit or a sweep for ``tag``: imagebump writes it only when
        it is an upgrade (never a downgrade) and no standing rollback holds it."""
        if tag not in self.pushed or tag == self.current:
            return
        if self.order != "none" and not self.newer(_entry(tag), _entry(self.current)):
            return  # never a downgrade: not imagebump's to write, held or not
        why = self.judged(tag)
        assert (why is None) == self.oracle_allows(tag), (why, tag, self.active)
        if why is not None:
            return
        self.prs += 1
        message, via = _imagebump_message(self.current, tag, merge, self.prs)
        change = ImageChange(
            f"{len(self.history):040x}",
            "imagebump <ib@x>",
            self.tick(),
            message,
            _entry(self.current),
            _entry(tag),
            via,
        )
        assert change.by_imagebump, message  # every way GitHub merges keeps it imagebump's
        self.history.insert(0, change)
        if self.order == "none":
            self.active = []
        else:
            self.active = [
                (b, t) for b, t in self.active if self.newer(b, _entry(tag))
            ]  # a hotfix lifts nothing
        self.current = tag

    @rule(tag=st.sampled_from(TAGS))
    def person_edits(self, tag: str) -> None:
        """A person's commit: a revert, a hand edit back (a rollback) or forward."""
        if tag not in self.pushed or tag == self.current:
            return
        before, after = _entry(self.current), _entry(tag)
        when = self.tick()
        change = ImageChange(f"{len(self.history):040x}", "Ann <ann@x>", when, f"api: {tag}\n", before, after)
        assert not by_imagebump(change.message)
        self.history.insert(0, change)
        if self.order == "none":
            self.active = [(before, when)]
        elif older(before, after, self.order, self.pushed_at):  # type: ignore[arg-type]
            self.active.append((before, when))
        else:
            self.active = []  # a person moved it forward: people decide
        self.current = tag

    @precondition(lambda self: bool(self.current))
    @invariant()
    def never_a_rolled_back_image(self) -> None:
        """Whatever imagebump would be asked to write now, the judgement agrees with the oracle."""
        for tag in self.pushed:
            if tag != self.current:
                assert (self.judged(tag) is None) == self.oracle_allows(tag), (tag, self.active)


Rollbacks.TestCase.settings = settings(
    max_examples=150, stateful_step_count=20, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestRollbacks = Rollbacks.TestCase


@given(
    rolled_back=st.sampled_from(TAGS),
    hotfix=st.sampled_from(TAGS),
    pushed_after=st.booleans(),
)
@settings(max_examples=80, deadline=None)
def test_semver_a_hotfix_below_the_rolled_back_version_never_lifts_it(
    rolled_back, hotfix, pushed_after
) -> None:
    """A rollback of ``rolled_back``, then imagebump lands ``hotfix``: the rolled-back version stays
    out unless the hotfix is that version or newer (then it was written because it lifted it)."""
    t = T0 + timedelta(hours=1)
    back = ImageChange("a" * 40, "Ann <ann@x>", t, "back\n", _entry(rolled_back), _entry("1.0.0"))
    if parse_semver(rolled_back) <= parse_semver("1.0.0"):  # type: ignore[operator]
        return
    land = ImageChange(
        "b" * 40,
        "imagebump <ib@x>",
        t + timedelta(minutes=1),
        f"x\n\n{trailer(IMAGE, hotfix, None)}\n",
        _entry("1.0.0"),
        _entry(hotfix),
    )
    standing = standing_rollbacks([land, back], "semver", lambda e: None)
    again = held_by_standing(
        standing,
        _entry(rolled_back),
        t + (timedelta(hours=1) if pushed_after else -timedelta(hours=1)),
        "semver",
    )
    lifted = compare_semver(parse_semver(hotfix), parse_semver(rolled_back)) >= 0  # type: ignore[arg-type]
    assert (again is None) == (lifted or False), (rolled_back, hotfix, again)


@pytest.mark.parametrize("merge", MERGES)
def test_every_merge_shape_of_imagebumps_pr_stays_imagebumps(merge) -> None:
    message, via = _imagebump_message("1.0.0", "1.1.0", merge, 7)
    change = ImageChange("c" * 40, "x", T0, message, _entry("1.0.0"), _entry("1.1.0"), via)
    assert change.by_imagebump


# --- the history's parsing: no commit text forges a field, no date raises (issue 31 items 2, 3) ------


@given(seconds=st.integers(min_value=-(10**30), max_value=10**30) | st.text(max_size=40))
@settings(max_examples=200, deadline=None)
def test_any_commit_date_reads_as_a_date(seconds) -> None:
    from steps.git.history import when

    at = when(str(seconds))
    assert 1 <= at.year <= 9999 and at.tzinfo is not None


@given(
    message=st.binary(max_size=300), name=st.text(max_size=20).filter(lambda s: "<" not in s and ">" not in s)
)
@settings(max_examples=200, deadline=None)
def test_a_commit_message_is_the_message_whatever_bytes_it_holds(message, name) -> None:
    from steps.git.history import Object, parse_commit

    header = (
        b"tree " + b"4" * 40 + b"\nauthor " + name.replace("\n", " ").encode() + b" <a@x> 1 +0000\n"
        b"committer C <c@x> 1700000000 +0000\n\n"
    )
    raw = header + message
    info = parse_commit(Object("commit", len(raw), raw))
    assert info.message == message.decode("utf-8", "replace")
    assert info.committed_at == datetime.fromtimestamp(1700000000, UTC)


@given(out=st.binary(max_size=400))
@settings(max_examples=200, deadline=None)
def test_any_log_output_parses_to_object_ids_only(out) -> None:
    from steps.git.history import is_oid, parse_log_raw

    for touch in parse_log_raw(out):
        assert is_oid(touch.commit) and is_oid(touch.old) and is_oid(touch.new)

"""The promotion gate's pure core (issue 35): its promises as Hypothesis properties over generated
timelines of the environment before, and the acceptance cases as examples."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from steps.gate.decide import Fact, decide

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SOAK = timedelta(minutes=30)
NEW, OLD, NEWER = "sha256:" + "a" * 64, "sha256:" + "b" * 64, "sha256:" + "c" * 64


def _decide(facts, now, digest=NEW):
    return decide("app:2", digest, "staging", SOAK, facts, now)


def test_a_soak_that_passes_promotes_and_waits_before():
    facts = [Fact(T0, OLD), Fact(T0 + timedelta(minutes=5), NEW)]
    waiting = _decide(facts, T0 + timedelta(minutes=20))
    assert (waiting.state, waiting.env, waiting.time_left) == ("waiting", "staging", timedelta(minutes=15))
    assert waiting.live_since == T0 + timedelta(minutes=5)
    assert _decide(facts, T0 + timedelta(minutes=35)).state == "promoted"


def test_degraded_during_the_soak_blocks_for_good():
    facts = [
        Fact(T0, NEW),
        Fact(T0 + timedelta(minutes=10), NEW, health="Degraded"),
        Fact(T0 + timedelta(minutes=11), NEW),
    ]
    got = _decide(facts, T0 + timedelta(hours=5))
    assert (got.state, got.reason) == ("blocked", "degraded")


def test_a_rollback_or_hold_during_the_soak_blocks():
    assert (
        _decide(
            [Fact(T0, NEW), Fact(T0 + timedelta(minutes=3), OLD, rolled_back=True)], T0 + timedelta(hours=1)
        ).reason
        == "rolled-back"
    )
    assert (
        _decide(
            [Fact(T0, NEW), Fact(T0 + timedelta(minutes=3), NEW, held=True)], T0 + timedelta(hours=1)
        ).reason
        == "held"
    )


def test_a_newer_push_blocks_the_older_and_starts_its_own_clock():
    newer_at = T0 + timedelta(minutes=10)
    facts = [Fact(T0, NEW), Fact(newer_at, NEWER)]
    now = T0 + timedelta(minutes=35)
    assert _decide(facts, now).state == "blocked"
    own = _decide(facts, now, digest=NEWER)
    assert (own.state, own.live_since, own.time_left) == ("waiting", newer_at, timedelta(minutes=5))


def test_not_synced_is_a_mismatch_and_progressing_restarts_the_clock():
    assert _decide([Fact(T0, NEW, synced=False)], T0 + timedelta(hours=1)).reason == "mismatch"
    facts = [
        Fact(T0, NEW),
        Fact(T0 + timedelta(minutes=20), NEW, health="Progressing"),
        Fact(T0 + timedelta(minutes=25), NEW),
    ]
    got = _decide(facts, T0 + timedelta(minutes=40))
    assert (got.state, got.live_since) == ("waiting", T0 + timedelta(minutes=25))


_fact = st.builds(
    lambda minute, digest, health, synced, held, back: Fact(
        T0 + timedelta(minutes=minute), digest, health, synced, held, back
    ),
    st.integers(0, 200),
    st.sampled_from([NEW, OLD, NEWER, None]),
    st.sampled_from(["Healthy", "Healthy", "Progressing", "Degraded", "Missing"]),
    st.booleans() | st.just(True),
    st.booleans().filter(lambda b: not b) | st.booleans(),
    st.booleans().filter(lambda b: not b) | st.booleans(),
)


def _good(f: Fact) -> bool:
    return f.digest == NEW and f.health == "Healthy" and f.synced and not f.held and not f.rolled_back


@settings(max_examples=300)
@given(st.lists(_fact, max_size=12, unique_by=lambda f: f.at), st.integers(0, 300))
def test_never_promoted_before_the_soak_elapsed_continuously_healthy_with_the_same_digest(facts, minute):
    now = T0 + timedelta(minutes=minute)
    got = _decide(facts, now)
    if got.state != "promoted":
        return
    start = got.live_since
    assert start is not None and now - start >= SOAK
    window = [f for f in sorted(facts, key=lambda f: f.at) if start <= f.at < start + SOAK]
    assert window and all(_good(f) for f in window)  # every fact of the soak: same digest, synced, Healthy
    before = [f for f in facts if f.at <= start]
    assert _good(max(before, key=lambda f: f.at))


@settings(max_examples=300)
@given(st.lists(_fact, max_size=12, unique_by=lambda f: f.at), st.integers(0, 300), st.integers(0, 300))
def test_never_promoted_after_a_block(facts, minute, later):
    first = _decide(facts, T0 + timedelta(minutes=minute))
    if first.state == "blocked":
        assert _decide(facts, T0 + timedelta(minutes=minute + later)).state == "blocked"


@settings(max_examples=300)
@given(st.lists(_fact, max_size=12, unique_by=lambda f: f.at), st.integers(0, 300))
def test_a_persons_hold_or_rollback_during_the_soak_is_a_decision(facts, minute):
    now = T0 + timedelta(minutes=minute)
    got = _decide(facts, now)
    if got.state == "promoted":
        assert not any(
            (f.held or f.rolled_back) and got.live_since <= f.at < got.live_since + SOAK for f in facts
        )

"""The gate over generated health timelines (issue 35): whatever the environment before did between
two evaluations, an image is never promoted unless that environment ran it, with the same digest,
continuously Healthy, for the whole soak, as Argo CD observed it.

Each case is a timeline of what Argo CD observed (deploys of images, health changes) and a few
evaluation times. At each evaluation the Application is what Argo CD records at that moment, and
no more: ``status.history`` (one entry per sync, the newest ``revisionHistoryLimit``),
``status.health.status`` now and its ``lastTransitionTime`` (set only when the status changes,
argo-cd ``controller/health.go``). A ``Degraded`` that recovered before the next evaluation is
therefore seen only as the time of the recovery.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from steps.gate.decide import DEGRADED, HEALTHY
from steps.gate.evaluate import EnvTarget, combine

T0 = datetime(2026, 12, 1, tzinfo=UTC)
SOAK = timedelta(minutes=30)
WANTED = "wanted"  # the gated image as the environment's overlay renders it
IMAGES = (WANTED, ":1.0.0", ":3.0.0")
HEALTHS = (HEALTHY, HEALTHY, DEGRADED, "Progressing", "Missing")
HISTORY_LIMIT = 10  # Argo CD's default revisionHistoryLimit

#: (minute, "deploy", image) or (minute, "health", status); before the first: 1.0.0, Healthy, at T0
Event = tuple[int, str, str]


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def observed(events: list[Event], now: datetime, *, transition_time: bool = True) -> tuple[dict, dict]:
    """The Application as Argo CD records it at ``now`` (and the image at each revision)."""
    history = [{"id": 0, "revision": f"{0:040x}", "deployedAt": _stamp(T0)}]
    images = {history[0]["revision"]: ":1.0.0"}
    health, changed = HEALTHY, T0
    for minute, kind, value in sorted(events):
        if _at(minute) > now:
            break
        if kind == "deploy":
            revision = f"{len(images):040x}"
            images[revision] = value
            history.append({"id": len(images) - 1, "revision": revision, "deployedAt": _stamp(_at(minute))})
        elif value != health:  # lastTransitionTime moves only when the status changes
            health, changed = value, _at(minute)
    status: dict = {
        "history": history[-HISTORY_LIMIT:],
        "sync": {"status": "Synced", "revision": history[-1]["revision"]},
        "health": {"status": health},
        "summary": {"images": [images[history[-1]["revision"]]]},  # Pods run what was synced
    }
    if transition_time:
        status["health"]["lastTransitionTime"] = _stamp(changed)
    return {"status": status}, images


def truth(events: list[Event], t: datetime) -> tuple[str, str]:
    """The image the environment ran and its health at ``t``, as Argo CD observed them."""
    image, health = ":1.0.0", HEALTHY
    for minute, kind, value in sorted(events):
        if _at(minute) > t:
            break
        if kind == "deploy":
            image = value
        else:
            health = value
    return image, health


def gate(events: list[Event], now: datetime, *, transition_time: bool = True):
    app, images = observed(events, now, transition_time=transition_time)
    staging = EnvTarget("deploy/overlays/staging", [("argocd/api-staging", None, app)], images.get)
    return combine("api:2.0.0", WANTED, "staging", SOAK, [staging], now)


_event = st.one_of(
    st.tuples(st.integers(1, 200), st.just("deploy"), st.sampled_from(IMAGES)),
    st.tuples(st.integers(1, 200), st.just("health"), st.sampled_from(HEALTHS)),
)
timelines = st.lists(_event, max_size=14, unique_by=lambda e: e[0])
evaluations = st.lists(st.integers(0, 260), min_size=1, max_size=5)


def _healthy_with_it_throughout(events: list[Event], start: datetime, end: datetime) -> bool:
    """Did the environment run the gated image, Healthy, at every moment of ``[start, end)``?"""
    moments = [start] + [_at(m) for m, _, _ in events if start < _at(m) < end]
    return all(truth(events, t) == (WANTED, HEALTHY) for t in moments)


@settings(max_examples=400, deadline=None)
@given(timelines, evaluations)
# a Degraded that recovered between two evaluations, during the soak (the clock restarts at the
# recovery; before lastTransitionTime was read, the evaluation at minute 31 promoted)
@example([(1, "deploy", WANTED), (10, "health", DEGRADED), (12, "health", HEALTHY)], [5, 31, 41, 42])
# the soak passed before another image replaced it, but a Degraded spell came and went before that
@example(
    [(1, "deploy", WANTED), (5, "health", DEGRADED), (8, "health", HEALTHY), (40, "deploy", ":3.0.0")],
    [50],
)
def test_never_promoted_unless_the_env_ran_it_healthy_with_the_same_digest_for_the_whole_soak(
    events: list[Event], minutes: list[int]
) -> None:
    for minute in sorted(minutes):
        now = _at(minute)
        got = gate(events, now)
        if got.state != "promoted":
            continue
        assert got.live_since is not None and now - got.live_since >= SOAK
        assert _healthy_with_it_throughout(events, got.live_since, got.live_since + SOAK)


@settings(max_examples=200, deadline=None)
@given(timelines, st.integers(0, 260))
def test_a_recovery_restarts_the_clock_at_the_time_health_last_became_healthy(
    events: list[Event], minute: int
) -> None:
    now = _at(minute)
    got = gate(events, now)
    if got.state != "waiting" or got.live_since is None:
        return
    app, _ = observed(events, now)
    changed = datetime.fromisoformat(app["status"]["health"]["lastTransitionTime"].replace("Z", "+00:00"))
    assert got.live_since >= changed  # the clock never runs from before the health's last transition
    assert got.time_left == SOAK - (now - got.live_since)


def test_without_last_transition_time_the_clock_runs_from_the_deploy() -> None:
    """Argo CD before 2.14 records no ``lastTransitionTime``: the gate sees only the health now, so
    the clock starts at the deploy (a spell of Degraded between two evaluations is not seen)."""
    events = [(1, "deploy", WANTED), (10, "health", DEGRADED), (12, "health", HEALTHY)]
    older = gate(events, _at(31), transition_time=False)
    assert (older.state, older.live_since) == ("promoted", _at(1))
    newer = gate(events, _at(31))
    assert (newer.state, newer.live_since, newer.time_left) == ("waiting", _at(12), timedelta(minutes=11))
    assert gate(events, _at(42)).state == "promoted"

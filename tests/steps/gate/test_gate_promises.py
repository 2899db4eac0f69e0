"""The gate's promises over generated histories of the environment before, as Argo CD shows them to
successive evaluations (issue 35, and the audit that found them broken):

(a) never ``promoted`` unless the environment ran the digest (any tag of it), its Pods ran it, synced
    and continuously ``Healthy`` for the soak, and no person's hold holds now;
(b) once blocked (by what Argo CD may later forget: ``Degraded``, a mismatch, a newer image), that
    image is never promoted;
(c) a staging that runs the digest Healthy for the soak, with only benign shapes (re-syncs of the same
    revision, a trimmed history, another tag of the digest, no ``lastTransitionTime``), is promoted.

Each evaluation sees only what Argo CD records at that moment: ``status.history`` (one entry per
successful sync, a re-sync of the same revision too, trimmed to ``revisionHistoryLimit``:
controller/state.go persistRevisionHistory), ``health.status`` and, on Argo CD 2.14+,
``lastTransitionTime`` (moved only when the status changes: controller/health.go),
``summary.images`` (Pods now) and ``reconciledAt``; and what earlier evaluations recorded
(:class:`steps.gate.decide.Seen`, kept by :mod:`steps.gate.memory`). No clock sleeps.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from steps.domain.models import PromoteAfter, Target
from steps.gate.decide import STICKY, Seen
from steps.gate.evaluate import EnvTarget, combine
from steps.gate.read import same_image

T0 = datetime(2026, 12, 1, tzinfo=UTC)
SOAK = timedelta(minutes=30)
REPO = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
DIGEST = "sha256:" + "d" * 64
#: the gated digest under two tags (staging's commit tag, production's semver); two other images
WANTED_TAGS = ("2.0.0", "abc1234")
TAGS = (*WANTED_TAGS, "1.0.0", "3.0.0")
HEALTHS = ("Healthy", "Healthy", "Degraded", "Progressing", "Suspended", "Missing")
PRODUCTION = Target(
    rule=1,
    repo_url="https://git.example/deploy",
    path="overlays/production",
    env="production",
    image=REPO,
    tag="2.0.0",
    digest=DIGEST,
    promote_after=PromoteAfter(env="staging", soak_seconds=int(SOAK.total_seconds())),
)
SAME = same_image(PRODUCTION, {"abc1234"})


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class Staging:
    """Staging's truth and what Argo CD records of it."""

    def __init__(self, limit: int, transition_time: bool) -> None:
        self.limit, self.transition_time = limit, transition_time
        self.now = T0
        self.refs = {"r0": f"{REPO}:1.0.0"}
        self.revision = "r0"
        self.history = [{"id": 0, "revision": "r0", "deployedAt": _stamp(T0)}]
        self.health, self.changed = "Healthy", T0
        self.pods = "follow"  # follow: Pods run what was synced; none: scaled to zero; old: 1.0.0
        self.held = False
        #: (time, good) each time the truth changed: the digest, synced, Healthy (Pods: at evaluations)
        self.truth: list[tuple[datetime, bool]] = [(T0, False)]

    def _record(self) -> None:
        good = SAME(self.refs[self.revision]) and self.health == "Healthy"
        self.truth.append((self.now, good))

    def deploy(self, tag: str | None) -> None:
        """A sync: of a new commit setting ``tag``, or (None) a re-sync of the same revision."""
        if tag is not None:
            self.revision = f"r{len(self.refs)}"
            self.refs[self.revision] = f"{REPO}:{tag}"
        entry = {
            "id": self.history[-1]["id"] + 1 if self.history else len(self.refs),
            "revision": self.revision,
        }
        self.history = (
            (self.history + [{**entry, "deployedAt": _stamp(self.now)}])[-self.limit :] if self.limit else []
        )
        self._record()

    def set_health(self, health: str) -> None:
        if health != self.health:
            self.health, self.changed = health, self.now
        self._record()

    def pods_run(self) -> list[str]:
        return {"follow": [self.refs[self.revision]], "none": [], "old": [f"{REPO}:1.0.0"]}[self.pods]

    def application(self) -> dict:
        health = {"status": self.health}
        if self.transition_time:
            health["lastTransitionTime"] = _stamp(self.changed)
        return {
            "status": {
                "history": list(self.history),
                "sync": {"status": "Synced", "revision": self.revision},
                "health": health,
                "summary": {"images": self.pods_run()},
                "reconciledAt": _stamp(self.now),
            }
        }

    def good_throughout(self, start: datetime, end: datetime) -> bool:
        """Did staging run the digest, Healthy, at every moment of ``[start, end)``?"""
        states = [good for at, good in self.truth if at <= start][-1:]
        states += [good for at, good in self.truth if start < at < end]
        return bool(states) and all(states)

    def evaluate(self, memory: dict[str, Seen]):
        target = EnvTarget(
            "staging",
            [("argocd/api-staging", None, self.application())],
            self.refs.get,
            "held" if self.held else None,
            same=SAME,
        )
        return combine("api:2.0.0", "wanted", "staging", SOAK, [target], self.now, memory=memory)


class GatePromises(RuleBasedStateMachine):
    """Any order of deploys, re-syncs, health changes, Pods, holds and evaluations."""

    @initialize(limit=st.sampled_from([0, 1, 3, 10]), transition_time=st.booleans())
    def start(self, limit: int, transition_time: bool) -> None:
        self.staging = Staging(limit, transition_time)
        self.memory: dict[str, Seen] = {}
        self.blocked_for_good = False
        self.evaluations: list[tuple[datetime, bool]] = []  # (time, what it saw was good incl. Pods)

    @rule(minutes=st.integers(1, 12))
    def time_passes(self, minutes: int) -> None:
        self.staging.now += timedelta(minutes=minutes)

    @rule(tag=st.sampled_from(TAGS) | st.none())
    def sync(self, tag: str | None) -> None:
        self.staging.deploy(tag)

    @rule(health=st.sampled_from(HEALTHS))
    def health(self, health: str) -> None:
        self.staging.set_health(health)

    @rule(pods=st.sampled_from(["follow", "follow", "none", "old"]))
    def pods(self, pods: str) -> None:
        self.staging.pods = pods

    @rule(held=st.sampled_from([False, False, False, True]))
    def hold(self, held: bool) -> None:
        self.staging.held = held

    @precondition(lambda self: hasattr(self, "staging"))
    @rule()
    def evaluate(self) -> None:
        s = self.staging
        got = s.evaluate(self.memory)
        saw_good = s.truth[-1][1] and s.pods == "follow"
        self.evaluations.append((s.now, saw_good))
        if got.state == "blocked" and got.reason in STICKY:
            self.blocked_for_good = True
        if got.state != "promoted":
            return
        # (b) once blocked, never promoted
        assert not self.blocked_for_good, "promoted after a block"
        # (a) a person's hold now blocks; the digest ran, Pods and all, Healthy for the whole soak
        assert not s.held
        assert got.live_since is not None and got.live_since + SOAK <= s.now
        end = got.live_since + SOAK
        window = [good for at, good in self.evaluations if got.live_since < at < end]
        assert all(window), "an evaluation during the soak saw it not live (Pods, health or image)"
        if s.transition_time and s.limit:
            # Argo CD says when the health changed: no spell in the soak goes unseen. (Without
            # lastTransitionTime, or with no history kept, a spell between two evaluations is not
            # recorded anywhere: docs/promotion.md says so.)
            assert s.good_throughout(got.live_since, end)


GatePromises.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestGatePromises = GatePromises.TestCase


@settings(max_examples=150, deadline=None)
@given(
    limit=st.sampled_from([0, 1, 2, 10]),
    transition_time=st.booleans(),
    tag=st.sampled_from(WANTED_TAGS),
    resyncs=st.lists(st.integers(1, 60), max_size=12),
    interval=st.integers(1, 5),
)
def test_live_and_healthy_for_the_soak_with_benign_shapes_is_promoted(
    limit, transition_time, tag, resyncs, interval
) -> None:
    """(c) Staging deploys the digest (under either tag) at minute 1 and stays Healthy, its Pods
    running it; Argo CD re-syncs the same revision now and then (self-heal), trimming the history.
    Evaluated every ``interval`` minutes: promoted by one interval after the soak's end."""
    staging = Staging(limit, transition_time)
    memory: dict[str, Seen] = {}
    staging.now = T0 + timedelta(minutes=1)
    staging.deploy(tag)
    resync_at = set(resyncs)
    got = None
    for minute in range(1, 31 + 2 * interval + 1):
        staging.now = T0 + timedelta(minutes=minute)
        if minute in resync_at:
            staging.deploy(None)
        if minute % interval == 0 or minute == 1:
            got = staging.evaluate(memory)
            assert got.state != "blocked"
    assert got is not None and got.state == "promoted", got


def _at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def test_without_transition_time_a_degraded_an_evaluation_saw_blocks_for_good() -> None:
    """Argo CD before 2.14 (or 3.x by default) records no lastTransitionTime: once staging is Healthy
    again nothing in Argo CD shows the Degraded an evaluation saw (before: promoted at 31)."""
    staging, memory = Staging(10, transition_time=False), {}
    staging.now = _at(1)
    staging.deploy("2.0.0")
    for minute, health in ((5, None), (20, "Degraded"), (29, "Healthy"), (31, None), (90, None)):
        staging.now = _at(minute)
        if health:
            staging.set_health(health)
        got = staging.evaluate(memory)
        if minute >= 20:
            assert (got.state, got.reason) == ("blocked", "degraded")


def test_without_transition_time_a_progressing_an_evaluation_saw_restarts_the_clock() -> None:
    """A slow rollout seen Progressing at 25, Healthy at 30: the clock restarts at the first evaluation
    that saw it Healthy again, 30 (before: promoted at 31, counting the Progressing as soak)."""
    staging, memory = Staging(10, transition_time=False), {}
    staging.now = _at(1)
    staging.deploy("2.0.0")
    for minute, health in ((5, None), (25, "Progressing"), (30, "Healthy"), (31, None), (59, None)):
        staging.now = _at(minute)
        if health:
            staging.set_health(health)
        assert staging.evaluate(memory).state == "waiting"
    staging.now = _at(60)
    got = staging.evaluate(memory)
    assert (got.state, got.live_since) == ("promoted", _at(30))

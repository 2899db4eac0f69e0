"""The promotion gate against the SIMULATED Argo CD (imagebump.local.argocd_sim, on the Kubernetes API
fake over HTTP, read through the real adapter) and a real ``git http-backend`` remote (issue 35).

The clock is injected: the simulator stamps ``deployedAt`` and ``health.lastTransitionTime`` with it
and the gate decides at a given ``now``; nothing sleeps. Each decision reads afresh through a new
reader, so every one is what an evaluator restarted at that moment decides.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from imagebump.local.argocd_sim import ArgoCDSimulator, application, kubectl_available
from steps.domain.models import PromoteAfter, Target
from steps.gate.apply import decide_target
from steps.gate.memory import FileMemory
from steps.gate.read import ArgoGitReader
from steps.kube.client import KubernetesApi
from tests.fakes.kube import FakeKube, FakeKubeServer

pytestmark = pytest.mark.skipif(not kubectl_available(), reason="the simulated Argo CD renders with kubectl")

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
SOAK = timedelta(minutes=30)
STAGING = "overlays/staging"


def kustomization(tag: str) -> str:
    return (
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- deployment.yaml\n"
        f'images:\n- name: {IMAGE}\n  newTag: "{tag}"\n'
    )


DEPLOYMENT = (
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  selector:\n"
    "    matchLabels: {app: api}\n  template:\n    metadata:\n      labels: {app: api}\n    spec:\n"
    f"      containers:\n      - name: api\n        image: {IMAGE}:latest\n"
)


class World:
    """Staging deployed by the simulated Argo CD; production gated on it."""

    def __init__(self, kube_store: FakeKube, api: KubernetesApi, sim: ArgoCDSimulator, remote, tmp: Path):
        self.kube, self.api, self.sim, self.remote, self.tmp = kube_store, api, sim, remote, tmp
        self.now = T0
        sim.clock = lambda: self.now
        self.readers = 0
        self.memory = None  # what earlier evaluations saw (steps.gate.memory), when a test keeps it

    def at(self, minutes: float) -> datetime:
        self.now = T0 + timedelta(minutes=minutes)
        return self.now

    def staging_gets(self, tag: str, minutes: float, *, person: bool = False) -> None:
        """A commit sets staging's tag (imagebump's, or a person's); Argo CD syncs it at ``minutes``."""
        self.remote.commit_files({f"{STAGING}/kustomization.yaml": kustomization(tag)})
        self.at(minutes)
        self.sim.refresh("argocd", "api-staging")

    def degrade(self, minutes: float, on: bool = True) -> None:
        self.at(minutes)
        (self.sim.degraded.add if on else self.sim.degraded.discard)("argocd/api-staging")
        self.sim.reconcile_once()

    def gate(self, tag: str, minutes: float, person: str | None = None):
        """The decision for production's ``tag`` at ``minutes``, by a freshly started evaluator."""
        self.readers += 1
        reader = ArgoGitReader(self.api, "argocd", self.tmp / f"reader-{self.readers}")
        reader.memory = self.memory
        try:
            return decide_target(
                production(self.remote, tag), [(staging(self.remote, tag), person)], reader, self.at(minutes)
            )
        finally:
            reader.close()


def staging(remote, tag: str) -> Target:
    return Target(
        rule=0, repo_url=remote.url, path=STAGING, env="staging", image=IMAGE, tag=tag, mode="commit"
    )


def production(remote, tag: str) -> Target:
    return Target(
        rule=1,
        repo_url=remote.url,
        path="overlays/production",
        env="production",
        image=IMAGE,
        tag=tag,
        digest="sha256:" + hashlib.sha256(tag.encode()).hexdigest(),  # one digest per tag here
        promote_after=PromoteAfter(env="staging", soak_seconds=int(SOAK.total_seconds())),
    )


@pytest.fixture()
def world(tmp_path: Path, git_token: str, git_env, make_remote):
    files = {}
    for env in ("staging", "production"):
        files[f"overlays/{env}/deployment.yaml"] = DEPLOYMENT
        files[f"overlays/{env}/kustomization.yaml"] = kustomization("1.0.0")
    remote = make_remote(files)
    kube_store = FakeKube()
    with FakeKubeServer(kube_store) as server:
        api = KubernetesApi.from_config(kubeconfig=str(server.write_kubeconfig(tmp_path / "kubeconfig")))
        sim = ArgoCDSimulator(kube_store, git_token=git_token, git_poll=None)
        w = World(kube_store, api, sim, remote, tmp_path)
        kube_store.seed(application("api-staging", remote.url, STAGING, target_revision="main"))
        kube_store.objects[("applications", "argocd", "api-staging")].pop("status", None)
        sim.reconcile_once()  # staging runs 1.0.0 since T0
        yield w


def test_a_soak_that_passes_promotes_and_until_then_waits_with_the_time_left(world: World) -> None:
    world.staging_gets("2.0.0", 1)
    waiting = world.gate("2.0.0", 11)
    assert (waiting.state, waiting.env) == ("waiting", "staging")
    assert waiting.time_left == timedelta(minutes=20) and waiting.live_since == T0 + timedelta(minutes=1)
    assert world.gate("2.0.0", 30.5).state == "waiting"
    promoted = world.gate("2.0.0", 31)
    assert promoted.state == "promoted" and promoted.live_since == T0 + timedelta(minutes=1)


def test_nothing_live_yet_waits_the_whole_soak(world: World) -> None:
    got = world.gate("2.0.0", 100)  # staging never got 2.0.0
    assert (got.state, got.time_left) == ("waiting", SOAK)


def test_degraded_during_the_soak_blocks_and_is_never_promoted(world: World) -> None:
    world.staging_gets("2.0.0", 1)
    world.degrade(10)
    for minutes in (10, 40, 200):
        got = world.gate("2.0.0", minutes)
        assert (got.state, got.reason) == ("blocked", "degraded")


def test_a_degraded_spell_between_two_evaluations_restarts_the_clock_at_the_recovery(world: World) -> None:
    """Argo CD keeps no health history, but ``health.lastTransitionTime`` says since when it is
    Healthy again: the soak's clock restarts there, and nothing is promoted early."""
    world.staging_gets("2.0.0", 1)
    assert world.gate("2.0.0", 5).live_since == T0 + timedelta(minutes=1)
    world.degrade(10)
    world.degrade(12, on=False)  # recovered before the next evaluation looked
    got = world.gate("2.0.0", 31)
    assert (got.state, got.live_since, got.time_left) == (
        "waiting",
        T0 + timedelta(minutes=12),
        timedelta(minutes=11),
    )
    assert world.gate("2.0.0", 41.5).state == "waiting"
    assert world.gate("2.0.0", 42).state == "promoted"


def test_the_simulator_moves_last_transition_time_only_when_the_health_changes(world: World) -> None:
    def health() -> dict:
        return world.kube.objects[("applications", "argocd", "api-staging")]["status"]["health"]

    since = health()["lastTransitionTime"]
    world.staging_gets("2.0.0", 1)  # a sync that stays Healthy: no transition
    assert health() == {"status": "Healthy", "lastTransitionTime": since}
    world.degrade(10)
    assert health() == {"status": "Degraded", "lastTransitionTime": "2026-12-01T10:10:00Z"}
    world.at(11)
    world.sim.reconcile_once()
    assert health()["lastTransitionTime"] == "2026-12-01T10:10:00Z"


def test_a_rollback_of_staging_during_the_soak_blocks(world: World) -> None:
    world.staging_gets("2.0.0", 1)
    world.staging_gets("1.0.0", 10, person=True)  # a person moved staging back
    got = world.gate("2.0.0", 45, person="rolled-back")
    assert (got.state, got.reason) == ("blocked", "rolled-back")


def test_a_hold_on_staging_during_the_soak_blocks(world: World) -> None:
    world.staging_gets("2.0.0", 1)
    got = world.gate("2.0.0", 10, person="held")
    assert (got.state, got.reason) == ("blocked", "held")


def test_a_newer_push_during_the_soak_the_older_is_never_promoted_the_newer_has_its_own_clock(
    world: World,
) -> None:
    world.staging_gets("2.0.0", 1)
    world.staging_gets("3.0.0", 20)
    for minutes in (31, 60, 120):
        older = world.gate("2.0.0", minutes)
        assert older.state == "blocked" and older.reason == "superseded"
    newer = world.gate("3.0.0", 31)
    assert newer.state == "waiting" and newer.live_since == T0 + timedelta(minutes=20)
    assert newer.time_left == timedelta(minutes=19)
    assert world.gate("3.0.0", 50).state == "promoted"


def test_a_restart_mid_soak_neither_loses_nor_restarts_the_clock(world: World) -> None:
    """Every decision here comes from a new reader (an evaluator started afresh): the clock is
    Argo CD's ``deployedAt``, not a memory of when the evaluator first saw it."""
    world.staging_gets("2.0.0", 1)
    first = world.gate("2.0.0", 16)
    again = world.gate("2.0.0", 16)
    assert first == again and first.time_left == timedelta(minutes=15)
    assert world.gate("2.0.0", 31).state == "promoted"


def test_no_application_deploys_staging_waits(world: World) -> None:
    world.kube.objects.pop(("applications", "argocd", "api-staging"))
    got = world.gate("2.0.0", 100)
    assert got.state == "waiting" and "no Argo CD Application" in got.note


# -- what an audit found (each failed before its fix) ------------------------------------------------


def test_staging_pods_running_another_image_than_git_is_a_mismatch_through_the_real_reader(
    world: World,
) -> None:
    """Staging's repo server hands back a render that runs 1.0.0 while Git holds 2.0.0: Argo CD records
    the sync, Synced and Healthy, but ``summary.images`` (its Pods) say 1.0.0. The reader hands the
    facts the full rendered reference, so the Pods' images are compared with it: blocked, never
    promoted (before: the reader's ``:2.0.0`` token never matched a Pod image, and 2.0.0 was promoted)."""
    world.sim.stale["argocd/api-staging"] = [f"{IMAGE}:1.0.0"]
    world.staging_gets("2.0.0", 1)
    for minutes in (5, 40, 300):
        got = world.gate("2.0.0", minutes)
        assert (got.state, got.reason) == ("blocked", "mismatch")


def test_staging_scaled_to_zero_never_ran_it_live_and_waits_idle(world: World) -> None:
    """No Pod runs the image (``replicas: 0``; KEDA idle): Argo CD lists no image, so nothing proves
    staging ran it. The gate waits, saying so (before: promoted after the soak)."""
    world.remote.commit_files(
        {
            f"{STAGING}/deployment.yaml": DEPLOYMENT.replace(
                "spec:\n  selector", "spec:\n  replicas: 0\n  selector"
            )
        }
    )
    world.staging_gets("2.0.0", 1)
    for minutes in (40, 300):
        got = world.gate("2.0.0", minutes)
        assert (got.state, got.wait) == ("waiting", "idle")


def test_the_same_digest_under_another_tag_in_staging_is_the_same_image(world: World) -> None:
    """Staging's rules allow commit tags, production's semver: staging runs the digest as ``abc1234``,
    production gates it as ``2.0.0``. Reconcile's tags of the digest make it the same image (before:
    waiting for ever, ``:2.0.0`` never equal to ``:abc1234``)."""
    world.staging_gets("abc1234", 1)
    world.readers += 1
    reader = ArgoGitReader(world.api, "argocd", world.tmp / f"reader-{world.readers}")
    try:
        got = decide_target(
            production(world.remote, "2.0.0"),
            [(staging(world.remote, "abc1234"), None)],
            reader,
            world.at(31),
            tags={"abc1234", "2.0.0"},
        )
    finally:
        reader.close()
    assert (got.state, got.live_since) == ("promoted", T0 + timedelta(minutes=1))


@pytest.mark.parametrize("person", ["held", "rolled-back"])
def test_a_persons_hold_or_rollback_after_the_soak_passed_still_blocks(world: World, person: str) -> None:
    """A person holds or rolls staging back after the soak's end (production's pull request still open,
    ``gate: check``): what holds now is a decision, whatever its time (before: ``promoted``)."""
    world.staging_gets("2.0.0", 1)
    assert world.gate("2.0.0", 35).state == "promoted"
    if person == "rolled-back":
        world.staging_gets("1.0.0", 38, person=True)
    got = world.gate("2.0.0", 40, person=person)
    assert (got.state, got.reason) == ("blocked", person)


def test_a_block_an_evaluation_saw_stands_after_staging_recovers(world: World) -> None:
    """Degraded seen at minute 11, Healthy again at 14: Argo CD no longer shows the spell, but the
    gate's record of what evaluations saw keeps the block (before: waiting at 15, promoted at 44)."""
    world.memory = FileMemory(world.tmp / "gate-memory")
    world.staging_gets("2.0.0", 1)
    assert world.gate("2.0.0", 5).state == "waiting"
    world.degrade(10)
    assert (world.gate("2.0.0", 11).state, world.gate("2.0.0", 11).reason) == ("blocked", "degraded")
    world.degrade(14, on=False)
    for minutes in (15, 44, 300):
        got = world.gate("2.0.0", minutes)
        assert (got.state, got.reason) == ("blocked", "degraded")
    world.staging_gets("3.0.0", 320)  # a newer image is judged afresh
    assert world.gate("3.0.0", 351).state == "promoted"


def test_no_history_kept_is_promoted_from_the_first_evaluation_that_saw_it_live(world: World) -> None:
    """``revisionHistoryLimit: 0``: Argo CD keeps no ``status.history``, yet says staging is Synced and
    Healthy with its Pods running 2.0.0. Argo CD's comparison then (``reconciledAt``, minute 1), as
    the first evaluation saw it, starts the clock (before: "not live with it yet" for ever)."""
    world.memory = FileMemory(world.tmp / "gate-memory")
    app = world.kube.objects[("applications", "argocd", "api-staging")]
    app["spec"]["revisionHistoryLimit"] = 0
    world.staging_gets("2.0.0", 1)
    assert world.kube.objects[("applications", "argocd", "api-staging")]["status"]["history"] == []
    first = world.gate("2.0.0", 2)
    assert first.state == "waiting" and first.wait != "not-live"
    for minutes in range(5, 32, 3):
        world.at(minutes)
        world.sim.refresh("argocd", "api-staging")  # Argo CD compares again (reconciledAt moves)
        assert world.gate("2.0.0", minutes).state == "waiting"
    world.at(33)
    world.sim.refresh("argocd", "api-staging")
    got = world.gate("2.0.0", 33)
    assert (got.state, got.live_since) == ("promoted", T0 + timedelta(minutes=1))


def test_a_wrong_render_at_sync_is_recorded_as_a_sync_and_blocked_as_a_mismatch(world: World) -> None:
    """The repo server hands the sync operation the previous revision's render: Argo CD records the
    sync (history entry, Synced at the new revision), and its Pods run 1.0.0."""
    world.sim.wrong_manifest = True
    world.staging_gets("2.0.0", 1)
    status = world.kube.objects[("applications", "argocd", "api-staging")]["status"]
    assert status["history"][-1]["revision"] == status["sync"]["revision"]
    assert status["summary"]["images"] == [f"{IMAGE}:1.0.0"]
    got = world.gate("2.0.0", 40)
    assert (got.state, got.reason) == ("blocked", "mismatch")


def test_suspended_staging_waits_as_suspended(world: World) -> None:
    world.sim.health_of["argocd/api-staging"] = "Suspended"
    world.staging_gets("2.0.0", 1)
    got = world.gate("2.0.0", 300)
    assert (got.state, got.wait) == ("waiting", "suspended")


def test_without_transition_time_a_degraded_seen_blocks_after_recovery(world: World) -> None:
    """Argo CD without ``lastTransitionTime``: an evaluation saw Degraded at 20; at 31 Argo CD shows
    Healthy and nothing else (before: promoted at 31, the spell counted as soak)."""
    world.memory = FileMemory(world.tmp / "gate-memory")
    world.sim.transition_time = False
    world.staging_gets("2.0.0", 1)
    assert (
        "lastTransitionTime"
        not in world.kube.objects[("applications", "argocd", "api-staging")]["status"]["health"]
    )
    assert world.gate("2.0.0", 5).state == "waiting"
    world.degrade(20)
    assert world.gate("2.0.0", 20).reason == "degraded"
    world.degrade(29, on=False)
    got = world.gate("2.0.0", 31)
    assert (got.state, got.reason) == ("blocked", "degraded")


def test_re_syncs_that_trim_the_arrival_from_a_short_history_do_not_restart_the_clock(world: World) -> None:
    """``revisionHistoryLimit: 1`` and self-heal re-syncs of the same revision every few minutes:
    each appends a history entry (as Argo CD does), so the arrival's entry is gone; the evaluations'
    unbroken run of seeing it live keeps the clock (before: it restarted at every re-sync)."""
    world.memory = FileMemory(world.tmp / "gate-memory")
    world.kube.objects[("applications", "argocd", "api-staging")]["spec"]["revisionHistoryLimit"] = 1
    world.staging_gets("2.0.0", 1)
    for minutes in range(2, 31):
        if minutes % 3 == 0:
            world.at(minutes)
            world.sim.resync("argocd", "api-staging")
        assert world.gate("2.0.0", minutes).state == "waiting"
    history = world.kube.objects[("applications", "argocd", "api-staging")]["status"]["history"]
    assert len(history) == 1 and history[0]["id"] > 5  # every re-sync appended an entry
    got = world.gate("2.0.0", 32)
    assert (got.state, got.live_since) == ("promoted", T0 + timedelta(minutes=1))


def test_the_simulator_records_every_sync_and_a_sync_that_takes_time(world: World) -> None:
    world.staging_gets("2.0.0", 1)
    world.at(5)
    world.sim.resync("argocd", "api-staging")
    status = world.kube.objects[("applications", "argocd", "api-staging")]["status"]
    last, before = status["history"][-1], status["history"][-2]
    assert last["revision"] == before["revision"] and last["id"] == before["id"] + 1
    assert last["deployStartedAt"] < last["deployedAt"] == status["operationState"]["finishedAt"]


def test_staging_deployed_through_the_source_hydrator_says_so(world: World) -> None:
    """An Argo CD 3.x Application with ``spec.sourceHydrator`` whose ``drySource`` is staging's overlay:
    not selected (its history holds hydrated commits), so the gate says that, not "no Application" or
    "not live yet" for ever."""
    world.kube.objects.pop(("applications", "argocd", "api-staging"))
    hydrated = application("api-staging-hydrated", world.remote.url, STAGING, target_revision="main")
    spec = hydrated["spec"]
    spec["sourceHydrator"] = {
        "drySource": spec.pop("source"),
        "syncSource": {"targetBranch": "environments/staging", "path": "staging"},
    }
    world.kube.seed(hydrated)
    got = world.gate("2.0.0", 100)
    assert (got.state, got.wait) == ("waiting", "hydrated")

"""The promotion gate end to end (issue 35): ECR push (moto) → SQS → the local sensor and the rendered
image-update → a real git remote → the SIMULATED Argo CD; then the rendered image-reconcile sweep,
which `imagebump run --local` runs every IMAGEBUMP_GATE_INTERVAL, evaluates the gate.

No sleep: time passing is Argo CD's recorded ``deployedAt`` moved into the past (what a soak that
has run for that long looks like to any reader). Each sweep is a fresh executor and fresh step
processes: a restart of ``run --local`` between two sweeps.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from imagebump.local.argocd_sim import ArgoCDSimulator, application
from imagebump.local.demo_repo import STAGING_PATH, default_rules
from imagebump.local.drive import push_image, run_until_done
from imagebump.local.outcome import target_results
from imagebump.local.reconciler import run_reconcile
from imagebump.local.world import World, build_world
from tests.fakes.kube import FakeKube, FakeKubeServer

pytestmark = pytest.mark.slow


def gated_rules(world: World) -> str:
    rules = default_rules(world.git.base_url, world.registry, repository=world.repository)
    return rules + "  promoteAfter: {env: staging, soak: 30m}\n"


@pytest.fixture()
def gate_world(moto, tmp_path: Path):
    kube = FakeKube()
    with build_world(tmp_path, moto=moto, rules=gated_rules) as world, FakeKubeServer(kube) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig", context="sim")
        world.set_live("sim", "60s", kubeconfig=str(kubeconfig))
        world.set_env_config({"IMAGEBUMP_LIVE_POLL_SECONDS": "0.1"})
        kube.seed(application("api-staging", world.manifests_url, STAGING_PATH))
        sim = ArgoCDSimulator(kube, git_token=world.token, poll=0.05)
        sim.reconcile_once()
        world.sim, world.kube = sim, kube
        yield world


def soaked(world: World, minutes: float) -> None:
    """Staging's newest deploy happened ``minutes`` ago (as Argo CD's history records it)."""
    app = world.kube.objects[("applications", "argocd", "api-staging")]
    history = app["status"]["history"]
    for back, entry in enumerate(reversed(history)):  # the earlier deploys earlier still, in order
        at = datetime.now(UTC) - timedelta(minutes=minutes, hours=back)
        entry["deployedAt"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    app["status"]["health"]["lastTransitionTime"] = history[0]["deployedAt"]


def production_row(world: World) -> dict:
    sweep = run_reconcile(world.reconcile_executor(), apply=True)  # a fresh executor: a restarted run --local
    return next(row for row in sweep.summary()["targets"] if row["env"] == "production"), sweep


def test_wait_gate_production_gets_nothing_until_the_soak_passed_across_restarts(gate_world: World) -> None:
    with gate_world.sim:
        push_image(gate_world, "1.4.2")
        report = run_until_done(gate_world, 1, timeout=120, visibility_timeout=5)
    (outcome,) = report.outcomes
    envs = {t.env for t in target_results(outcome.result)}
    assert envs == {"staging"}  # gate: wait: no production commit or PR from the push
    assert gate_world.branches() == ["main"]

    soaked(gate_world, 10)
    row, _ = production_row(gate_world)
    assert row["state"] == "waiting" and row["gate"]["env"] == "staging"
    assert 19 * 60 <= row["gate"]["time_left"] <= 20 * 60  # the clock runs from deployedAt, not from zero
    assert row["gate"]["reason"] == "soaking"  # why it waits: live and Healthy, the clock running
    assert ":1.4.2" in row["gate"]["image"] or "1.4.2" in row["gate"]["image"]
    assert gate_world.branches() == ["main"]

    soaked(gate_world, 31)
    row, sweep = production_row(gate_world)  # restarted again: the soak has passed
    assert row["state"] == "promoted", row
    assert [u["outcome"] for u in sweep.updates] and len(gate_world.branches()) == 2  # the PR branch


def test_degraded_staging_blocks_production(gate_world: World) -> None:
    with gate_world.sim:
        push_image(gate_world, "1.4.2")
        run_until_done(gate_world, 1, timeout=120, visibility_timeout=5)
    soaked(gate_world, 10)
    gate_world.sim.degraded.add("argocd/api-staging")
    gate_world.sim.reconcile_once()
    soaked_app = gate_world.kube.objects[("applications", "argocd", "api-staging")]
    assert soaked_app["status"]["health"]["status"] == "Degraded"
    row, sweep = production_row(gate_world)
    assert row["state"] == "blocked" and row["gate"]["reason"] == "degraded"
    assert not sweep.updates and gate_world.branches() == ["main"]

"""Push → live end to end: ECR push (moto) → SQS → local sensor → the rendered image-update template
(verify-live included) → a real git remote → a SIMULATED Argo CD: the Kubernetes API fake
(tests/fakes/kube.py, over HTTP, reached through a kubeconfig context as `--argocd-context` does)
and :class:`imagebump.local.argocd_sim.ArgoCDSimulator`, which renders the overlay with the real
``kubectl kustomize``. No Argo CD runs here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from imagebump.local.argocd_sim import ArgoCDApiServer, ArgoCDSimulator, application
from imagebump.local.demo_repo import STAGING_PATH
from imagebump.local.drive import push_image, run_until_done
from imagebump.local.outcome import target_outcome, target_results
from imagebump.local.world import World, build_world
from tests.fakes.kube import FakeKube, FakeKubeServer

pytestmark = pytest.mark.slow


@pytest.fixture()
def live_world(moto, tmp_path: Path):
    kube = FakeKube()
    with (
        build_world(tmp_path, moto=moto) as world,
        FakeKubeServer(kube) as server,
        ArgoCDApiServer(kube) as argocd_api,
    ):
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig", context="sim")
        world.set_live("sim", "60s", kubeconfig=str(kubeconfig))
        world.set_env_config({"IMAGEBUMP_LIVE_POLL_SECONDS": "0.1"})
        world.set_argocd_api(argocd_api.url, argocd_api.token)
        world.argocd_api = argocd_api
        kube.seed(application("api-staging", world.manifests_url, STAGING_PATH))
        sim = ArgoCDSimulator(kube, git_token=world.token, poll=0.05)
        sim.reconcile_once()  # synced at the first commit, before any push
        world.sim, world.kube, world.api_server = sim, kube, server
        yield world


def staging(world: World, result):
    (target,) = [t for t in target_results(result) if t.env == "staging"]
    return target


def test_push_to_live_in_commit_mode_with_timings(live_world: World) -> None:
    with live_world.sim:
        push_image(live_world, "1.4.2")
        report = run_until_done(live_world, 1, timeout=120, visibility_timeout=5)
    (outcome,) = report.outcomes
    result = outcome.result
    assert result.phase == "Succeeded", [(n.name, n.message) for n in result.nodes if n.phase != "Succeeded"]
    target = staging(live_world, result)
    assert target.action == "committed" and target.live == "live"
    out = target.live_outputs
    committed, synced, healthy = (
        float(out["seconds-push-to-committed"]),
        float(out["seconds-push-to-synced"]),
        float(out["seconds-push-to-healthy"]),
    )
    assert 0 < committed <= healthy and synced <= healthy + 1
    assert ":1.4.2" in out["image"]
    # the one line `imagebump run --local` prints for the target names push → committed → live
    index = next(i for i, t in enumerate(target_results(result)) if t.env == "staging")
    assert "→ live" in target_outcome(result, index)
    # verify-live wrote nothing to Kubernetes; it asked Argo CD's API server for the refresh
    assert [r for r in live_world.api_server.requests if r.method != "GET"] == []
    calls = live_world.argocd_api.calls
    assert calls and all(c.status == 200 and c.query.get("refresh") == ["normal"] for c in calls)


def test_mismatch_fails_the_workflow_naming_application_revision_git_and_cluster(live_world: World) -> None:
    live_world.sim.wrong_manifest = True
    with live_world.sim:
        push_image(live_world, "1.4.2")
        report = run_until_done(live_world, 1, timeout=120, visibility_timeout=5)
    result = report.outcomes[0].result
    assert result.phase == "Failed"
    target = staging(live_world, result)
    assert target.action == "committed" and target.live == "mismatch"
    message = target.message
    assert "argocd/api-staging" in message and target.commit_sha in message
    assert "Git holds" in message and ":1.4.2" in message and ":1.4.1" in message  # what Git holds, what runs


def test_sweep_reports_live_states_and_a_mismatch_on_an_overlay_nobody_pushed_to(live_world: World) -> None:
    from imagebump.local.drive import put_image
    from imagebump.local.reconciler import run_reconcile
    from steps.live_states.decide import LiveState
    from steps.live_states.step import render_live_table

    put_image(live_world, "1.4.1")  # what staging holds is the newest allowed: current; production is behind
    sweep = run_reconcile(live_world.reconcile_executor(), apply=False)
    rows = {row["env"]: row for row in sweep.summary()["targets"]}
    assert rows["staging"]["state"] == "current"
    assert rows["staging"]["live"]["state"] == "live", rows["staging"]["live"]
    assert "live" not in rows["production"]  # behind: only current targets get a live state
    assert [a["name"] for a in rows["staging"]["live"]["applications"]] == ["api-staging"]

    # nobody pushes; Argo CD's repo server starts handing back a wrong render, and its next poll syncs it
    live_world.sim.stale["argocd/api-staging"] = [f"{live_world.image_uri}:1.3.9"]
    live_world.sim.refresh("argocd", "api-staging")
    sweep = run_reconcile(live_world.reconcile_executor(), apply=False)
    staging = next(row for row in sweep.summary()["targets"] if row["env"] == "staging")
    assert staging["live"]["state"] == "mismatch"
    assert ":1.4.1" in staging["live"]["reason"] and ":1.3.9" in staging["live"]["reason"]
    table = render_live_table([LiveState(**s) for s in sweep.live])
    assert table.splitlines()[1].startswith("mismatch  staging")
    assert "1 mismatch" in table


def test_an_idle_overlay_is_idle_not_an_alarm_in_the_run_and_the_sweep(live_world: World) -> None:
    """Issue 30 item 7 end to end: the Deployment scaled to zero (KEDA/HPA idle) — Argo CD lists no
    image. verify-live's outcome is ``idle`` (the Workflow succeeds, the progress line says so) and
    the sweep's live state is ``idle`` in its JSON and its table."""
    from imagebump.local.demo_repo import APP, MANIFESTS_REPO
    from imagebump.local.reconciler import run_reconcile
    from steps.live_states.decide import LiveState
    from steps.live_states.step import render_live_table

    base = f"apps/{APP}/base/deployment.yaml"
    scaled = live_world.read(base).replace("replicas: 1", "replicas: 0")
    live_world.git.commit_files(MANIFESTS_REPO, {base: scaled}, "scale to zero for the night\n")
    live_world.sim.refresh("argocd", "api-staging")
    with live_world.sim:
        push_image(live_world, "1.4.2")
        report = run_until_done(live_world, 1, timeout=120, visibility_timeout=5)
    result = report.outcomes[0].result
    assert result.phase == "Succeeded", [(n.name, n.message) for n in result.nodes if n.phase != "Succeeded"]
    target = staging(live_world, result)
    assert target.action == "committed" and target.live == "idle", target.live_outputs
    index = next(i for i, t in enumerate(target_results(result)) if t.env == "staging")
    assert "→ idle" in target_outcome(result, index)

    sweep = run_reconcile(live_world.reconcile_executor(), apply=False)
    row = next(row for row in sweep.summary()["targets"] if row["env"] == "staging")
    assert row["live"]["state"] == "idle", row["live"]
    table = render_live_table([LiveState(**s) for s in sweep.live])
    assert table.splitlines()[1].startswith("idle") and "1 idle" in table


def test_a_commit_argo_cd_renders_the_same_leaves_the_overlay_live(live_world: World) -> None:
    """A person's comment (a note, a hold marker) changes no manifest: Argo CD compares, finds it Synced at the
    new commit and starts no sync (argo-cd controller/appcontroller.go autoSync: "Skipping auto-sync:
    application status is Synced"), so no sync operation carries that commit. The overlay is still
    live, not "syncing" until the next image."""
    from imagebump.local.demo_repo import MANIFESTS_REPO, STAGING_PATH
    from imagebump.local.drive import put_image
    from imagebump.local.reconciler import run_reconcile
    from steps.kube import api as kube

    put_image(live_world, "1.4.1")
    file = f"{STAGING_PATH}/kustomization.yaml"
    text = live_world.read(file)
    commented = text + "# reviewed by Ann: staging stays on this image over the weekend\n"
    commit = live_world.git.commit_files(MANIFESTS_REPO, {file: commented}, "staging: a note\n")
    live_world.sim.refresh("argocd", "api-staging")
    app = live_world.sim.store.get(kube.APPLICATION, "argocd", "api-staging")
    assert app["status"]["sync"]["revision"] == commit  # compared at the hold commit …
    assert app["status"]["operationState"]["syncResult"]["revision"] != commit  # … and no sync for it
    sweep = run_reconcile(live_world.reconcile_executor(), apply=False)
    staging = next(row for row in sweep.summary()["targets"] if row["env"] == "staging")
    assert staging["live"]["state"] == "live", staging["live"]

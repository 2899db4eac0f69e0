"""verify-live against a SIMULATED Argo CD: the Kubernetes API fake (tests/fakes/kube.py, over HTTP,
read through the real adapter) with :class:`imagebump.local.argocd_sim.ArgoCDSimulator` playing the
application controller (it renders the overlay at the branch head with the real ``kubectl
kustomize`` and takes images from the Pods a cluster would have) and
:class:`~imagebump.local.argocd_sim.ArgoCDApiServer` answering the refresh call; Git is a real ``git
http-backend`` remote. Nothing of Argo CD itself runs here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from imagebump.local.argocd_sim import ArgoCDApiServer, ArgoCDSimulator
from steps.domain.errors import ConfigError, PermissionDeniedError
from steps.domain.models import ImagesEntry, Plan, Target
from steps.kube import api as kube_api
from steps.kube.client import KubernetesApi
from steps.verify_live import step as verify_live
from steps.verify_live.revisions import History
from tests.fakes.kube import FakeKube, FakeKubeServer

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
OVERLAY = "overlays/prod"
FILE = f"{OVERLAY}/kustomization.yaml"
_APPS = kube_api.APPLICATION
DEPLOYMENT = f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  selector:
    matchLabels: {{app: api}}
  template:
    metadata:
      labels: {{app: api}}
    spec:
      containers:
      - name: api
        image: {IMAGE}:latest
      - name: sidecar
        image: docker.io/library/busybox:1.36
"""


CRONJOB = f"""apiVersion: batch/v1
kind: CronJob
metadata:
  name: report
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: report
            image: {IMAGE}:latest
"""


def kustomization(tag: str, resources: str = "deployment.yaml") -> str:
    return (
        f"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {resources}\n"
        f'images:\n- name: {IMAGE}\n  newTag: "{tag}"\n'
    )


def application(
    name: str,
    repo_url: str,
    *,
    namespace: str = "argocd",
    path: str = OVERLAY,
    revision: str = "main",
    automated: bool = True,
    multi: bool = False,
) -> dict:
    source = {"repoURL": repo_url, "path": path, "targetRevision": revision}
    spec: dict = {"project": "default", "destination": {"server": "https://kubernetes.default.svc"}}
    if multi:
        spec["sources"] = [
            {"repoURL": "https://charts.example.com", "chart": "redis", "targetRevision": "18.0.0"},
            source,
        ]
    else:
        spec["source"] = source
    if automated:
        spec["syncPolicy"] = {"automated": {"prune": True}}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


class Cluster:
    """The fake API server, the simulated controller and the adapter verify-live uses."""

    def __init__(self, tmp_path: Path, token: str) -> None:
        self.kube = FakeKube()
        self.server = FakeKubeServer(self.kube)
        # no Git poll: a refresh comes only through the API server (a test turns the poll on)
        self.sim = ArgoCDSimulator(self.kube, git_token=token, poll=0.02, git_poll=None)
        self.argocd_api = ArgoCDApiServer(self.kube, wait=10)
        self.tmp = tmp_path
        self._render_chart = self.sim._render

    def api(self) -> KubernetesApi:
        return KubernetesApi.from_config(
            kubeconfig=str(self.server.write_kubeconfig(self.tmp / "kubeconfig"))
        )

    def seed(self, *apps: dict) -> None:
        for app in apps:
            self.kube.seed(app)
            self.kube.objects[("applications", app["metadata"]["namespace"], app["metadata"]["name"])].pop(
                "status"
            )
        self.sim.reconcile_once()  # the state before the push: synced at the first commit

    def writes(self) -> list:
        return [r for r in self.server.requests if r.method not in ("GET",)]


@pytest.fixture()
def remote(make_remote, git_env):
    return make_remote({f"{OVERLAY}/deployment.yaml": DEPLOYMENT, FILE: kustomization("1.0.0")})


@pytest.fixture()
def cluster(tmp_path, git_token, monkeypatch):
    monkeypatch.setenv("IMAGEBUMP_LIVE_POLL_SECONDS", "0.05")
    c = Cluster(tmp_path, git_token)
    c.argocd_api.__enter__()
    monkeypatch.setenv("IMAGEBUMP_ARGOCD_REFRESH", "api")
    monkeypatch.setenv("IMAGEBUMP_ARGOCD_SERVER", c.argocd_api.url)
    monkeypatch.setenv("IMAGEBUMP_ARGOCD_TOKEN", c.argocd_api.token)
    # a chart source (multi-source Applications) renders nothing here: only the overlay's images count
    original = c.sim._render

    def render(source):
        if source.get("chart"):
            return "18.0.0", []
        return original(source)

    c.sim._render = render
    with c.server:
        yield c
    c.sim.__exit__(None, None, None) if c.sim._thread.is_alive() else None
    c.argocd_api.__exit__(None, None, None)


def push(
    remote, tag: str = "1.1.0", pushed_seconds_ago: float = 30.0, resources: str = "deployment.yaml"
) -> tuple[Target, Plan, str]:
    sha = remote.commit_files({FILE: kustomization(tag, resources)}, message=f"imagebump(prod): api {tag}")
    target = Target(
        rule=0,
        repo_url=remote.url,
        path=OVERLAY,
        env="prod",
        image=IMAGE,
        tag=tag,
        pushed_at=datetime.now(UTC) - timedelta(seconds=pushed_seconds_ago),
        mode="commit",
        base_branch="main",
    )
    plan = Plan(
        changed=True,
        decision="update",
        file=FILE,
        image_name=IMAGE,
        new=ImagesEntry(name=IMAGE, newTag=tag),
        base_branch="main",
    )
    return target, plan, sha


def verify(
    cluster: Cluster,
    target: Target,
    plan: Plan,
    sha: str,
    timeout: float = 20.0,
    committed: str = "12.5",
    **clock: Any,
):
    return verify_live.verify(
        target,
        plan,
        sha,
        committed,
        timeout,
        cluster.api(),
        lambda branch: History(
            target.repo_url, branch, sha, plan.file, plan.image_name, cluster.tmp / "history"
        ),
        **clock,
    )


class _Clock:
    """The watch's time, injected: ``sleep`` moves it on at once (no real wait, no wall-clock window)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_live_in_commit_mode_with_timings(cluster: Cluster, remote) -> None:
    cluster.seed(application("api-prod", remote.url))
    target, plan, sha = push(remote)
    with cluster.sim:
        out = verify(cluster, target, plan, sha)
    assert out.result == "live", out.message
    assert out.image == f"{IMAGE}:1.1.0"
    (app,) = out.applications
    assert (app.namespace, app.name, app.state, app.revision) == ("argocd", "api-prod", "live", sha)
    assert f"{IMAGE}:1.1.0" in app.images
    committed, synced, healthy = (
        float(out.seconds_push_to_committed),
        float(out.seconds_push_to_synced),
        float(out.seconds_push_to_healthy),
    )
    # pushed 30 s ago: Argo CD synced and the image ran after that, and not before the commit
    assert committed == 12.5
    assert 29 <= synced <= healthy and 30 <= healthy < 60


def test_the_timings_never_go_backwards_with_whole_second_timestamps() -> None:
    """Argo CD's finishedAt has whole seconds: push → synced is never reported shorter than push →
    committed, nor push → healthy shorter than push → synced."""
    from steps.verify_live.step import not_before

    assert not_before("1.000", "1.400") == "1.400"
    assert not_before("2.000", "1.400") == "2.000"
    assert not_before("", "1.400") == "" and not_before("1.000", "") == "1.000"


def test_refresh_through_argocd_api_server_and_nothing_written_to_kubernetes(
    cluster: Cluster, remote
) -> None:
    """Issue 30 item 12: verify-live writes nothing to any Application; it asks Argo CD's API server
    (``GET /api/v1/applications/{name}?refresh=normal``, an account with ``applications, get``)."""
    cluster.seed(
        application("api-prod", remote.url), application("unrelated", "http://127.0.0.1:9/team/other")
    )
    target, plan, sha = push(remote)
    with cluster.sim:
        assert verify(cluster, target, plan, sha).result == "live"
    assert cluster.writes() == []
    calls = cluster.argocd_api.calls
    assert calls and all(c.status == 200 and c.authorized for c in calls)
    assert {c.path for c in calls} == {"/api/v1/applications/api-prod"}
    assert all(c.query == {"refresh": ["normal"], "appNamespace": ["argocd"]} for c in calls)


def test_no_refresh_by_default_argocd_polls_git(cluster: Cluster, remote, monkeypatch) -> None:
    """``IMAGEBUMP_ARGOCD_REFRESH`` unset (``none``): no call at all; Argo CD's own poll syncs."""
    monkeypatch.delenv("IMAGEBUMP_ARGOCD_REFRESH")
    cluster.seed(application("api-prod", remote.url))
    cluster.sim.git_poll_seconds = 0.2
    target, plan, sha = push(remote)
    with cluster.sim:
        assert verify(cluster, target, plan, sha).result == "live"
    assert cluster.writes() == [] and cluster.argocd_api.calls == []


def test_an_account_without_applications_get_is_a_clear_error(cluster: Cluster, remote) -> None:
    cluster.argocd_api.accounts = {cluster.argocd_api.token: {"projects, get"}}
    cluster.seed(application("api-prod", remote.url))
    target, plan, sha = push(remote)
    with cluster.sim, pytest.raises(PermissionDeniedError, match="applications, get") as caught:
        verify(cluster, target, plan, sha)
    assert cluster.argocd_api.token not in str(caught.value)
    assert [c.status for c in cluster.argocd_api.calls] == [403]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "none"),
        ({"IMAGEBUMP_ARGOCD_REFRESH": "none"}, "none"),
        ({"IMAGEBUMP_ARGOCD_REFRESH": "patch"}, "IMAGEBUMP_ARGOCD_REFRESH"),
        ({"IMAGEBUMP_ARGOCD_REFRESH": "api"}, "IMAGEBUMP_ARGOCD_SERVER"),
        (
            {"IMAGEBUMP_ARGOCD_REFRESH": "api", "IMAGEBUMP_ARGOCD_SERVER": "argocd-server"},
            "IMAGEBUMP_ARGOCD_SERVER",
        ),
        (
            {"IMAGEBUMP_ARGOCD_REFRESH": "api", "IMAGEBUMP_ARGOCD_SERVER": "https://argocd.example"},
            "IMAGEBUMP_ARGOCD_TOKEN",
        ),
        (
            {
                "IMAGEBUMP_ARGOCD_REFRESH": "api",
                "IMAGEBUMP_ARGOCD_SERVER": "https://argocd.example",
                "IMAGEBUMP_ARGOCD_TOKEN_FILE": "/nonexistent/token",
            },
            "IMAGEBUMP_ARGOCD_TOKEN",
        ),
        (
            {
                "IMAGEBUMP_ARGOCD_REFRESH": "API",
                "IMAGEBUMP_ARGOCD_SERVER": "https://argocd.example/",
                "IMAGEBUMP_ARGOCD_TOKEN": "t0ken",
            },
            "api",
        ),
    ],
    ids=[
        "unset",
        "none",
        "unknown-mode",
        "api-no-server",
        "api-bad-url",
        "api-no-token",
        "api-no-file",
        "api",
    ],
)
def test_refresh_settings_are_validated(env: dict, expected: str) -> None:
    from steps.verify_live.argocd import Refresher

    if expected in ("none", "api"):
        refresher = Refresher.from_env(env)
        assert refresher.mode == expected
        assert "t0ken" not in repr(refresher)
        return
    with pytest.raises(ConfigError) as info:
        Refresher.from_env(env)
    assert info.value.field == expected  # the setting to fix


def test_application_in_another_namespace(cluster: Cluster, remote) -> None:
    cluster.kube.seed(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "argocd-cmd-params-cm", "namespace": "argocd"},
            "data": {"application.namespaces": "team-a, team-b"},
        }
    )
    cluster.seed(
        application("api-prod", remote.url, namespace="team-b"),
        application("api-elsewhere", remote.url, namespace="not-enabled"),
    )
    target, plan, sha = push(remote)
    with cluster.sim:
        out = verify(cluster, target, plan, sha)
    assert out.result == "live", out.message
    assert [(a.namespace, a.name) for a in out.applications] == [("team-b", "api-prod")]


def test_application_namespaces_from_the_setting_with_the_rendered_rights(
    cluster: Cluster, remote, monkeypatch
) -> None:
    """verify-live's Role reads no ConfigMap: ``IMAGEBUMP_ARGOCD_APPLICATION_NAMESPACES`` (Argo CD's
    ``application.namespaces``, a glob here) says where else to look; the ConfigMap is not read."""
    monkeypatch.setenv("IMAGEBUMP_ARGOCD_APPLICATION_NAMESPACES", "team-*")
    cluster.kube.forbid("get", "configmaps")
    cluster.seed(
        application("api-prod", remote.url, namespace="team-b"),
        application("api-elsewhere", remote.url, namespace="not-enabled"),
    )
    target, plan, sha = push(remote)
    with cluster.sim:
        out = verify(cluster, target, plan, sha)
    assert out.result == "live", out.message
    assert [(a.namespace, a.name) for a in out.applications] == [("team-b", "api-prod")]
    assert not [c for c in cluster.kube.calls if c[1] == "configmaps"]


def test_multi_source_application_and_url_spellings(cluster: Cluster, remote) -> None:
    spelled = remote.url + "/"  # (case, .git and ssh spellings: test_repository_urls_normalise)
    cluster.seed(application("api-multi", spelled, multi=True, path=f"./{OVERLAY}/"))
    target, plan, sha = push(remote)
    with cluster.sim:
        out = verify(cluster, target, plan, sha)
    assert out.result == "live", out.message
    (app,) = out.applications
    assert app.revision == sha  # status.sync.revisions[1], the overlay's source


def test_two_applications_on_one_overlay(cluster: Cluster, remote) -> None:
    cluster.seed(
        application("api-prod-eu", remote.url), application("api-prod-us", remote.url, revision="HEAD")
    )
    target, plan, sha = push(remote)
    target = target.with_settings(base_branch=None)  # HEAD follows the default branch
    with cluster.sim:
        out = verify(cluster, target, plan, sha)
    assert out.result == "live", out.message
    assert [(a.name, a.state) for a in out.applications] == [("api-prod-eu", "live"), ("api-prod-us", "live")]


def test_no_application_is_not_an_error(cluster: Cluster, remote) -> None:
    cluster.seed(
        application("other-branch", remote.url, revision="release"),
        application("other-path", remote.url, path="overlays/stg"),
    )
    target, plan, sha = push(remote)
    out = verify(cluster, target, plan, sha)
    assert out.result == "no-application"
    assert remote.url in out.message and OVERLAY in out.message
    assert cluster.writes() == []


def test_timeout(cluster: Cluster, remote) -> None:
    cluster.seed(application("api-prod", remote.url))
    cluster.sim.stuck.add("argocd/api-prod")  # its comparison fails from now on (repo server down)
    target, plan, sha = push(remote)
    clock = _Clock()
    with cluster.sim:
        out = verify(cluster, target, plan, sha, timeout=1.0, clock=clock, sleep=clock.sleep)
    assert out.result == "timeout"
    assert clock.now == pytest.approx(1.0)  # it waited exactly its timeout, then stopped
    assert clock.slept and sum(clock.slept) == pytest.approx(1.0)
    assert "argocd/api-prod" in out.message and out.seconds_push_to_healthy == ""


def test_manual_sync_reports_at_once(cluster: Cluster, remote) -> None:
    cluster.seed(application("api-prod", remote.url, automated=False))
    target, plan, sha = push(remote)
    with cluster.sim:
        out = verify(cluster, target, plan, sha, timeout=600)
    assert out.result == "manual-sync"


def test_mismatch_names_application_revision_git_and_cluster(cluster: Cluster, remote) -> None:
    cluster.seed(application("api-prod", remote.url))
    cluster.sim.wrong_manifest = True  # the repo server hands back the old manifests
    target, plan, sha = push(remote)
    with cluster.sim:
        out = verify(cluster, target, plan, sha)
    assert out.result == "mismatch"
    assert "argocd/api-prod" in out.message and sha in out.message
    assert f"Git holds {IMAGE}:1.1.0" in out.message and f"{IMAGE}:1.0.0" in out.message


def test_rolling_update_listing_both_images_is_not_a_mismatch(cluster: Cluster, remote) -> None:
    cluster.seed(application("api-prod", remote.url))
    cluster.sim.progressing_seconds = 0.5
    target, plan, sha = push(remote)
    with cluster.sim:
        out = verify(cluster, target, plan, sha)
    assert out.result == "live", out.message


def test_superseded_by_a_newer_commit(cluster: Cluster, remote) -> None:
    cluster.seed(application("api-prod", remote.url))
    target, plan, sha = push(remote, "1.1.0")
    push(remote, "1.2.0")  # a newer push landed before Argo CD synced ours
    with cluster.sim:
        out = verify(cluster, target, plan, sha)
    assert out.result == "superseded"
    assert "1.2.0" in out.message


@pytest.mark.parametrize("value", ["15", "soon", "10 m", ""], ids=["no-unit-ok", "word", "space", "empty"])
def test_live_timeout_is_validated(value: str) -> None:
    if value == "15":
        assert verify_live.parse_duration(value) == 15.0
        return
    with pytest.raises(ConfigError) as info:
        verify_live.parse_duration(value)
    assert (info.value.reason, info.value.field) == ("invalid-duration", "live-timeout")


@pytest.mark.parametrize(
    "spelling",
    [
        "https://github.com/Team/Manifests",
        "https://github.com/team/manifests.git",
        "https://github.com/team/manifests/",
        "git@github.com:team/manifests.git",
        "ssh://git@github.com/team/manifests",
        "ssh://git@GitHub.com:22/team/manifests.git/",
    ],
)
def test_repository_urls_normalise(spelling: str) -> None:
    from steps.verify_live.argocd import normalise_repo_url

    assert normalise_repo_url(spelling) == normalise_repo_url("https://github.com/team/manifests")


def test_another_repository_or_branch_does_not_match() -> None:
    from steps.verify_live.argocd import deploys

    app = application("a", "https://github.com/team/manifests-old")
    assert deploys(app, "https://github.com/team/manifests", OVERLAY, "main", True) is False
    app = application("a", "https://github.com/team/manifests", revision="release")
    assert deploys(app, "https://github.com/team/manifests", OVERLAY, "main", True) is False
    app = application("a", "https://github.com/team/manifests", revision="HEAD")
    assert deploys(app, "https://github.com/team/manifests", OVERLAY, "release", False) is False


def test_a_live_timeout_longer_than_a_pod_may_wait_ends_in_timeout_not_a_killed_pod(
    cluster: Cluster, remote, monkeypatch
) -> None:
    """``live-timeout=1h`` on an Application that never goes live: the step's wait ends in the
    outcome ``timeout`` (counted, reported) with time left before its pod's rendered deadline, never
    a pod killed mid-wait and retried. The step's clock is injected: no real wait."""
    import yaml

    from steps.verify_live import argocd

    root = Path(__file__).resolve().parents[3]
    rendered = yaml.safe_load((root / "manifests" / "workflows" / "image-update.yaml").read_text())
    (template,) = [t for t in rendered["spec"]["templates"] if t["name"] == "verify-live"]
    cluster.seed(application("api-prod", remote.url))
    cluster.sim.stuck.add("argocd/api-prod")  # its comparison fails from now on: never live
    target, plan, sha = push(remote)
    clock = _Clock()
    monkeypatch.setattr(verify_live, "CLOCK", clock)
    monkeypatch.setattr(verify_live, "SLEEP", clock.sleep)
    monkeypatch.setattr(argocd, "configured", lambda environ=None: True)
    monkeypatch.setattr(argocd, "connect", lambda context=None: cluster.api())
    monkeypatch.setenv("IMAGEBUMP_LIVE_POLL_SECONDS", "60")  # fewer reads of the simulated Argo CD
    with cluster.sim:
        out = verify_live.run.__wrapped__(target, plan, sha, live_timeout="1h")  # type: ignore[attr-defined]
    assert out.result == "timeout"
    assert 0 < clock.now <= template["activeDeadlineSeconds"] - 30  # time left to write the outputs


def test_a_deployment_scaled_to_zero_is_idle_not_a_mismatch(cluster: Cluster, make_remote, git_env) -> None:
    """Issue 30 item 7: Argo CD lists images of Pods only; ``replicas: 0`` shows none. Synced and
    healthy at the commit: ``idle``, the Workflow succeeds."""
    idle_deployment = DEPLOYMENT.replace("spec:\n  selector:", "spec:\n  replicas: 0\n  selector:")
    remote = make_remote({f"{OVERLAY}/deployment.yaml": idle_deployment, FILE: kustomization("1.0.0")})
    cluster.seed(application("api-prod", remote.url))
    assert cluster.kube.get_raw(_APPS, "argocd", "api-prod")["status"]["summary"]["images"] == []
    target, plan, sha = push(remote)
    with cluster.sim:
        out = verify(cluster, target, plan, sha)
    assert out.result == "idle", out.message
    (app,) = out.applications
    assert (app.state, app.revision, app.images) == ("idle", sha, [])
    assert out.seconds_push_to_synced and out.seconds_push_to_healthy == ""


def test_a_cronjob_shows_its_last_run_until_the_next_one_idle_then_live(
    cluster: Cluster, make_remote, git_env
) -> None:
    """Only a CronJob uses the image: after the sync Argo CD still lists the last run's completed
    Pod (the old image) — ``idle``, not ``mismatch``; after its next run the new image is listed."""
    remote = make_remote({f"{OVERLAY}/cronjob.yaml": CRONJOB, FILE: kustomization("1.0.0", "cronjob.yaml")})
    cluster.seed(application("report-prod", remote.url))
    target, plan, sha = push(remote, "1.1.0", resources="cronjob.yaml")
    with cluster.sim:
        out = verify(cluster, target, plan, sha)
    assert out.result == "idle", out.message
    (app,) = out.applications
    assert app.images == [f"{IMAGE}:1.0.0"]  # the completed Pod of the run before the sync
    cluster.sim.run_cronjobs("argocd", "report-prod")
    with cluster.sim:
        out = verify(cluster, target, plan, sha)
    assert out.result == "live", out.message


def test_outputs_stay_bounded_whatever_argocd_lists(cluster: Cluster, remote) -> None:
    """Issue 31 item 8: 20,000 images in ``summary.images`` → outputs far below Argo's ~1 MB."""
    import json

    cluster.seed(application("api-prod", remote.url))
    many = [f"{IMAGE}:old-{i:05d}" for i in range(20_000)]
    cluster.sim.stale["argocd/api-prod"] = many
    target, plan, sha = push(remote)
    with cluster.sim:
        out = verify(cluster, target, plan, sha)
    assert out.result == "mismatch"
    size = len(json.dumps(out.model_dump()))
    assert size < 64_000, size
    (app,) = out.applications
    assert len(app.images) <= verify_live.MAX_IMAGES + 1 and "19980 more" in app.images[-1]


def test_imagebump_run_local_mounts_the_argocd_token_as_its_secret_never_as_a_variable() -> None:
    from imagebump.commands.run import local_secrets, step_environment

    token = "argocd-account-token-for-the-test"
    secrets = local_secrets(
        {"IMAGEBUMP_GIT_TOKEN": "git-write-token-for-the-test", "IMAGEBUMP_ARGOCD_TOKEN": token}
    )
    assert secrets["imagebump-argocd"] == {"token": token}
    env = step_environment({"IMAGEBUMP_ARGOCD_TOKEN": token, "IMAGEBUMP_ARGOCD_REFRESH": "api"}, None, None)
    assert "IMAGEBUMP_ARGOCD_TOKEN" not in env and env["IMAGEBUMP_ARGOCD_REFRESH"] == "api"

"""The sweep's live states (:mod:`steps.live_states`) against the Kubernetes API fake over HTTP
(read through the real adapter), the SIMULATED Argo CD controller (imagebump.local.argocd_sim, Pods
as a cluster has them) and real ``git http-backend`` remotes.

Issue 30 item 8: the cost is O(1) per sweep in the API server (one Application list) and O(1) per
repository in Git (its default branch, one fetch of its branches, one fetch of the overlay files),
whatever the number of targets. Issue 31 item 8: a hostile status or repository costs only its rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from imagebump.local.argocd_sim import ArgoCDSimulator, application
from steps.domain.models import Target
from steps.git import PartialClone
from steps.kube import api as kube
from steps.kube.client import KubernetesApi
from steps.live_states import step as states
from tests.fakes.kube import FakeKube, FakeKubeServer

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
OVERLAYS = ("overlays/a", "overlays/b", "overlays/c")


def deployment(replicas: int = 1) -> str:
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n"
        f"  replicas: {replicas}\n  selector:\n    matchLabels: {{app: api}}\n  template:\n"
        "    metadata:\n      labels: {app: api}\n    spec:\n      containers:\n"
        f"      - name: api\n        image: {IMAGE}:latest\n"
    )


def kustomization(tag: str) -> str:
    return (
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- deployment.yaml\n"
        f'images:\n- name: {IMAGE}\n  newTag: "{tag}"\n'
    )


def overlay_files(replicas: int = 1) -> dict[str, str]:
    files = {}
    for path in OVERLAYS:
        files[f"{path}/deployment.yaml"] = deployment(replicas)
        files[f"{path}/kustomization.yaml"] = kustomization("1.0.0")
    return files


def target(remote, path: str) -> Target:
    return Target(rule=0, repo_url=remote.url, path=path, env="prod", image=IMAGE, tag="1.0.0", mode="pr")


@pytest.fixture()
def argocd(tmp_path: Path, git_token: str):
    kube_store = FakeKube()
    with FakeKubeServer(kube_store) as server:
        api = KubernetesApi.from_config(kubeconfig=str(server.write_kubeconfig(tmp_path / "kubeconfig")))
        sim = ArgoCDSimulator(kube_store, git_token=git_token, git_poll=None)
        yield kube_store, server, api, sim


def seed(kube_store: FakeKube, sim: ArgoCDSimulator, remote, prefix: str) -> None:
    for path in OVERLAYS:
        kube_store.seed(
            application(f"{prefix}-{path.rsplit('/', 1)[1]}", remote.url, path, target_revision="main")
        )
        kube_store.objects[("applications", "argocd", f"{prefix}-{path.rsplit('/', 1)[1]}")].pop("status")
    sim.reconcile_once()


def list_requests(server: FakeKubeServer) -> int:
    return sum(1 for r in server.requests if r.method == "GET" and r.path.endswith("/applications"))


def test_one_application_list_per_sweep_and_one_history_read_per_repository(
    argocd, make_remote, git_env, git_server, tmp_path: Path
) -> None:
    kube_store, server, api, sim = argocd
    first, second = make_remote(overlay_files()), make_remote(overlay_files())
    seed(kube_store, sim, first, "one")
    seed(kube_store, sim, second, "two")
    for i in range(30):  # Applications of other repositories, listed but not read further
        kube_store.seed(application(f"other-{i}", "https://git.example.com/o/r", "x"))
    targets = [target(r, p) for r in (first, second) for p in OVERLAYS]

    def sweep(ts: list[Target], where: str) -> tuple[states.LiveStatesOutput, int, dict[str, int]]:
        lists, sessions = (
            list_requests(server),
            {r.name: git_server.read_sessions(r.name) for r in (first, second)},
        )
        out = states.check(ts, api, "argocd", tmp_path / where)
        return (
            out,
            list_requests(server) - lists,
            {r.name: git_server.read_sessions(r.name) - sessions[r.name] for r in (first, second)},
        )

    out, lists, sessions = sweep(targets, "six")
    assert [s.state for s in out.states] == ["live"] * 6, [s.reason for s in out.states]
    assert lists == 1
    # per repository: its default branch (ls-remote), its branches (fetch), the overlay files (fetch)
    assert all(n <= 3 for n in sessions.values()), sessions
    _, lists_one, sessions_one = sweep([targets[0], targets[3]], "two")
    assert lists_one == 1 and sessions_one == sessions  # the same cost for one target per repository


def test_idle_targets_are_their_own_state_in_the_rows_counts_and_table(
    argocd, make_remote, git_env, tmp_path: Path
) -> None:
    kube_store, _server, api, sim = argocd
    remote = make_remote(overlay_files(replicas=0))
    seed(kube_store, sim, remote, "idle")
    out = states.check([target(remote, p) for p in OVERLAYS], api, "argocd", tmp_path / "w")
    assert [s.state for s in out.states] == ["idle"] * 3, [s.reason for s in out.states]
    assert out.mismatches == 0
    assert {(c.state, c.count) for c in out.counts} >= {("idle", 3), ("mismatch", 0), ("live", 0)}
    table = states.render_live_table(out.states)
    assert table.splitlines()[1].startswith("idle") and "3 idle" in table


def test_a_hostile_status_or_repository_costs_only_its_rows(
    argocd, make_remote, git_env, tmp_path: Path
) -> None:
    """A 200 KB ``status.sync.revision`` (never handed to git: no ``Argument list too long``) and
    a repository that cannot be read make their rows ``unknown`` with a reason; the rest is live."""
    kube_store, _server, api, sim = argocd
    good, hostile = make_remote(overlay_files()), make_remote(overlay_files())
    seed(kube_store, sim, good, "good")
    seed(kube_store, sim, hostile, "bad")
    app = kube_store.objects[("applications", "argocd", "bad-a")]
    app["status"]["sync"]["revision"] = "f" * 200_000
    app = kube_store.objects[("applications", "argocd", "bad-b")]
    app["status"]["summary"] = "not-an-object"
    gone = target(good, "overlays/a").model_copy(update={"repo_url": good.url + "-missing"})
    out = states.check(
        [target(good, "overlays/a"), target(hostile, "overlays/a"), target(hostile, "overlays/b"), gone],
        api,
        "argocd",
        tmp_path / "w",
    )
    by = [(s.state, s.reason) for s in out.states]
    assert by[0][0] == "live", by[0]
    assert by[1][0] == "unknown" and "status.sync.revision" in by[1][1] and len(by[1][1]) < 2000
    assert by[2][0] == "unknown" and "status.summary" in by[2][1]
    assert by[3][0] == "unknown" and "missing" in by[3][1]


def test_a_revision_not_on_the_branch_is_fetched_for_once(
    make_remote, git_env, git_server, tmp_path: Path
) -> None:
    """Issue 31 item 8: verify-live polls every 5 s; a revision Argo CD reports that is not on the
    branch costs one fetch, then it is remembered."""
    remote = make_remote(overlay_files())
    clone = PartialClone(remote.url, ["main"], tmp_path / "c")
    before = git_server.read_sessions(remote.name)
    for _ in range(50):
        assert clone.known("e" * 40) is False
    assert clone.known(remote.rev()) is True
    assert git_server.read_sessions(remote.name) - before == 1
    assert clone.known("x" * 200_000) is False  # not a commit id: never reaches git


def test_apps_listed_once_even_when_the_list_fails(argocd, make_remote, git_env, tmp_path: Path) -> None:
    kube_store, _server, api, _sim = argocd
    kube_store.forbid("list", kube.APPLICATION.plural)
    remote = make_remote(overlay_files())
    out = states.check([target(remote, p) for p in OVERLAYS], api, "argocd", tmp_path / "w")
    assert [s.state for s in out.states] == ["unknown"] * 3
    assert all("applications" in s.reason for s in out.states)

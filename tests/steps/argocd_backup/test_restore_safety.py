"""restore's safety rails: ``--prune`` deletes only what the archive's producer would have taken,
a restore into a cluster without the target namespaces is refused before any write, pruned
ApplicationSets lose their finalizers first, and a replace leaves no stale last-applied copy.

The Kubernetes side is the FAKE API server of :mod:`tests.fakes.kube` (no API server runs here;
kmock 0.8 lacks paging, selectors and finalizers), reached over HTTP through the real adapter
(:class:`steps.kube.client.KubernetesApi`). Archives are written to ``tmp_path`` (no S3 needed).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from imagebump.cli import main
from steps.argocd_backup import archive, object_diff, restore, restore_plan
from steps.argocd_backup import export as backup_export
from steps.domain.errors import ConfigError
from steps.kube import api as kube
from steps.kube import client as kube_client
from tests.fakes.kube import APP_FINALIZER, SYSTEM_NAMESPACES, FakeKube, FakeKubeServer, seeded
from tests.steps.argocd_backup.test_restore import _argocd_export

FROZEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
APP_NAMESPACES = ("team-a", "team-b")

#: What upstream's export selects (cmd/argocd/commands/admin/admin.go isArgoCDSecret, v2.14.21 and
#: v3.5.1): ``argocd-secret``, any secret-type label, the managed-by annotation. It does NOT take
#: argocd-notifications-secret or Secrets labelled only ``app.kubernetes.io/part-of: argocd``, so a
#: restore of its export must never prune those.
NOT_SELECTED_BY_UPSTREAM = ("argocd-notifications-secret", "oidc-client")
#: What a v1 imagebump archive held of the Secrets (steps/argocd_backup/export.py at format v1): five
#: secret-type values, argocd-secret, argocd-notifications-secret; Argo CD's namespace only.
NOT_SELECTED_BY_V1 = (
    "repository-write-one",
    "scm-creds-one",
    "future-type-one",
    "managed-by-only",
    "oidc-client",
)


class Cluster:
    def __init__(self, fake: FakeKube, api: kube_client.KubernetesApi) -> None:
        self.fake, self.api = fake, api
        self.factory_calls = 0

    def factory(self) -> kube_client.KubernetesApi:
        self.factory_calls += 1
        return self.api


@pytest.fixture()
def cluster_of(tmp_path) -> Iterator[Callable[[FakeKube], Cluster]]:
    servers: list[FakeKubeServer] = []

    def make(fake: FakeKube) -> Cluster:
        server = FakeKubeServer(fake).__enter__()
        servers.append(server)
        kubeconfig = server.write_kubeconfig(tmp_path / f"kc-{len(servers)}")
        return Cluster(fake, kube_client.KubernetesApi.from_config(kubeconfig=str(kubeconfig)))

    yield make
    for server in servers:
        server.__exit__(None, None, None)


def _fleet() -> FakeKube:
    return seeded("argocd", apps=4, app_namespaces=APP_NAMESPACES)


def _write_archive(
    tmp_path: Path, docs: list[dict], *, fmt: str | None = archive.FORMAT, name: str = "030405Z"
) -> Path:
    """An imagebump archive of ``docs`` with its index beside it (``fmt`` None: no index)."""
    data = archive.build_archive(docs)
    path = tmp_path / f"{name}.yaml.gz"
    path.write_bytes(data)
    if fmt is not None:
        index = archive.make_index(data, docs, cluster="c", namespace="argocd", created=FROZEN, version="t")
        index["format"] = fmt
        (tmp_path / f"{name}.index.json").write_bytes(archive.json_bytes(index))
    return path


def _backup(cluster: Cluster, tmp_path: Path, **kw) -> Path:
    """What backup-export takes from the cluster now, as a local archive of the current format."""
    return _write_archive(tmp_path, backup_export.collect(cluster.api, "argocd"), **kw)


def _seed_late(fake: FakeKube) -> None:
    """Objects created after the backup, each of which the producer of any archive would select."""
    fake.seed(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "late-repo",
                "namespace": "argocd",
                "labels": {archive.SECRET_TYPE_LABEL: "repository"},
            },
            "data": {"password": base64.b64encode(b"late").decode()},
        }
    )
    fake.seed(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "late-app", "namespace": "argocd", "finalizers": [APP_FINALIZER]},
            "spec": {"project": "default"},
        }
    )


def _would_delete(report: str) -> list[str]:
    return sorted(
        line.split("  ", 2)[-1].split(" (")[0].strip()
        for line in report.splitlines()
        if line.strip().startswith(("would delete", "deleted"))
    )


# --- 1. --prune deletes only what the archive's producer would have taken ---------------------------
def test_a_plain_export_with_prune_keeps_what_upstream_never_exports(cluster_of, tmp_path):
    fake = _fleet()
    export = tmp_path / "argocd-export.yaml"
    export.write_text(_argocd_export(fake))
    _seed_late(fake)
    cluster = cluster_of(fake)

    _, report = restore.restore(str(export), api_factory=cluster.factory, prune=True)
    assert fake.writes() == []
    assert _would_delete(report) == ["Application/late-app -n argocd", "Secret/late-repo -n argocd"], report

    restore.restore(str(export), api_factory=cluster.factory, prune=True, do_apply=True)
    for name in NOT_SELECTED_BY_UPSTREAM:
        assert fake.stored("Secret", "argocd", name) is not None, f"{name} is not upstream's to prune"
    assert fake.stored("Secret", "argocd", "late-repo") is None, "upstream's export would have held it"
    assert fake.stored("Application", "argocd", "late-app") is None
    assert fake.cascaded == []


def test_a_plain_export_of_argocd_namespace_only_never_prunes_other_namespaces(cluster_of, tmp_path):
    """Upstream exports other namespaces only when told to: an export holding none prunes none there."""
    fake = _fleet()
    docs = _argocd_export(fake).split("---\n")
    export = tmp_path / "argocd-export.yaml"
    export.write_text("---\n".join(d for d in docs if "namespace: team-" not in d))
    cluster = cluster_of(fake)

    plan, report = restore.restore(str(export), api_factory=cluster.factory, prune=True, do_apply=True)
    assert plan.count(restore.DELETE) == 0, report
    assert fake.stored("Application", "team-a", "team-a-app-0") is not None
    assert fake.stored("ApplicationSet", "team-a", "tenants") is not None


def _v1_archive(fake: FakeKube, tmp_path: Path) -> Path:
    """What a format-v1 imagebump backup held of this cluster."""
    docs = []
    for obj in fake.in_namespace("argocd"):
        meta = obj["metadata"]
        if obj["kind"] == "Secret" and not (
            meta["name"] in ("argocd-secret", "argocd-notifications-secret")
            or (meta.get("labels") or {}).get(archive.SECRET_TYPE_LABEL) in restore_plan.V1_SECRET_TYPES
        ):
            continue
        if obj["kind"] == "ConfigMap" and meta["name"] not in archive.CONFIG_MAPS:
            continue
        docs.append(archive.sanitise(obj))
    return _write_archive(tmp_path, docs, fmt=archive.FORMAT_V1)


def test_an_old_format_archive_prunes_only_what_that_format_held(cluster_of, tmp_path):
    fake = _fleet()
    path = _v1_archive(fake, tmp_path)
    _seed_late(fake)
    cluster = cluster_of(fake)

    _, report = restore.restore(str(path), api_factory=cluster.factory, prune=True)
    assert _would_delete(report) == ["Application/late-app -n argocd", "Secret/late-repo -n argocd"], report

    restore.restore(str(path), api_factory=cluster.factory, prune=True, do_apply=True)
    for name in NOT_SELECTED_BY_V1:
        assert fake.stored("Secret", "argocd", name) is not None, f"a v1 archive never held {name}"
    for ns in APP_NAMESPACES:
        assert fake.names("Application", ns), f"a v1 archive never held Applications of {ns}"
    assert fake.stored("ApplicationSet", "team-a", "tenants") is not None
    assert fake.stored("Secret", "argocd", "late-repo") is None


@pytest.mark.parametrize(
    ("fmt", "why"),
    [
        (
            "imagebump.argocd-backup/v9",
            "its index names format .imagebump.argocd-backup/v9., which this version",
        ),
        (None, "it has no index"),
    ],
    ids=["newer-format", "no-index"],
)
def test_prune_is_refused_when_the_archives_producer_is_unknown(cluster_of, tmp_path, fmt, why):
    fake = _fleet()
    cluster = cluster_of(fake)
    path = _write_archive(tmp_path, backup_export.collect(cluster.api, "argocd"), fmt=fmt)
    fake.calls.clear()
    with pytest.raises(ConfigError, match=f"--prune refused for archive {path}: {why}") as info:
        restore.restore(str(path), api_factory=cluster.factory, prune=True, do_apply=True, verify=False)
    assert "Restore without --prune" in str(info.value)
    assert cluster.factory_calls == 0 and fake.calls == [], "refused before the cluster is contacted"

    plan, _ = restore.restore(str(path), api_factory=cluster.factory, verify=False)
    assert plan.count(restore.CHANGE) == 0, "without --prune it restores as before"


def test_prune_refusal_exits_2_at_the_command_line(tmp_path, capsys):
    path = _write_archive(tmp_path, [], fmt="imagebump.argocd-backup/v9")
    assert main(["restore", "--from", str(path), "--prune"]) == 2
    assert "--prune refused" in capsys.readouterr().err


@pytest.mark.parametrize("source", ["current", "plain", "v1"])
def test_argocd_secret_is_never_pruned(cluster_of, tmp_path, source):
    fake = _fleet()
    cluster = cluster_of(fake)
    if source == "current":
        docs = [
            d
            for d in backup_export.collect(cluster.api, "argocd")
            if d["metadata"]["name"] != "argocd-secret"
        ]
        path = _write_archive(tmp_path, docs)
    elif source == "plain":
        path = tmp_path / "export.yaml"
        path.write_text(
            "---\n".join(d for d in _argocd_export(fake).split("---\n") if "name: argocd-secret" not in d)
        )
    else:
        docs = archive.read_archive(_v1_archive(fake, tmp_path).read_bytes(), "v1")
        path = _write_archive(
            tmp_path, [d for d in docs if d["metadata"]["name"] != "argocd-secret"], fmt=archive.FORMAT_V1
        )
    plan, report = restore.restore(str(path), api_factory=cluster.factory, prune=True, do_apply=True)
    assert fake.stored("Secret", "argocd", "argocd-secret") is not None
    assert "argocd-secret" not in report and plan.count(restore.DELETE) == 0


def test_decide_never_prunes_argocd_secret():
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "argocd-secret", "namespace": "argocd"},
    }
    assert restore_plan.plan_restore({}, {}, [secret], prune=True) == []


# --- 2. target namespaces --------------------------------------------------------------------------
def test_restore_into_a_cluster_without_the_namespaces_is_refused_before_any_write(cluster_of, tmp_path):
    path = _backup(cluster_of(_fleet()), tmp_path)
    fresh = FakeKube.fresh()
    target = cluster_of(fresh)

    plan, report = restore.restore(str(path), api_factory=target.factory)
    assert plan.missing_namespaces == ["argocd", "team-a", "team-b"]
    for ns in ("argocd", "team-a", "team-b"):
        assert (
            f"missing namespace {ns}: --apply will refuse; create it first (kubectl create namespace {ns})"
            in (report)
        )
    assert report.splitlines()[-1].startswith("dry run: "), "the summary stays last"

    with pytest.raises(ConfigError) as info:
        restore.restore(str(path), api_factory=target.factory, do_apply=True)
    message = str(info.value)
    assert "namespaces argocd, team-a, team-b not found on this cluster; nothing was applied" in message
    assert "kubectl create namespace team-b" in message and "--namespace" in message
    assert fresh.writes() == [], "refused before the first write"

    for ns in ("argocd", "team-a", "team-b"):
        fresh.create_namespace(ns)
    plan, _ = restore.restore(str(path), api_factory=target.factory, do_apply=True)
    assert plan.missing_namespaces == [] and fresh.names("Application", "team-b")


def test_namespace_retarget_names_only_the_namespaces_still_missing(cluster_of, tmp_path):
    path = _backup(cluster_of(_fleet()), tmp_path)
    fresh = FakeKube(namespaces={*SYSTEM_NAMESPACES, "argocd-dr", "team-a"})
    target = cluster_of(fresh)
    with pytest.raises(ConfigError, match=r"namespace team-b not found on this cluster") as info:
        restore.restore(str(path), api_factory=target.factory, do_apply=True, namespace="argocd-dr")
    assert "--namespace" not in str(info.value), "Argo CD's own namespace is there"
    assert fresh.writes() == []


def test_a_namespace_that_may_not_be_read_is_not_called_missing(cluster_of, tmp_path):
    path = _backup(cluster_of(_fleet()), tmp_path)
    fake = FakeKube()
    fake.forbid("get", "namespaces")
    plan, report = restore.restore(str(path), api_factory=cluster_of(fake).factory, do_apply=True)
    assert plan.missing_namespaces == [] and "missing namespace" not in report
    assert fake.names("Application", "team-a")


def test_a_create_in_a_missing_namespace_is_told_from_a_missing_crd(cluster_of):
    fake = FakeKube.fresh()
    api = cluster_of(fake).api
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-cm", "namespace": "argocd"}}
    with pytest.raises(ConfigError) as info:
        api.create(kube.CONFIG_MAP, "argocd", cm)
    assert "namespace argocd does not exist on this cluster; create it first" in str(info.value)
    assert "CRD" not in str(info.value)

    fake.create_namespace("argocd")
    fake.fail("create", "applications", 404)
    app = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "a"}}
    with pytest.raises(ConfigError, match=r"is Argo CD installed \(its CRDs\)"):
        api.create(kube.APPLICATION, "argocd", app)


# --- 4. a pruned ApplicationSet loses its finalizers first --------------------------------------------
def test_pruning_an_applicationset_removes_its_finalizers_first(cluster_of, tmp_path):
    """With progressive sync's deletionOrder Reverse, the ApplicationSet controller puts Argo CD's
    resources finalizer on the set and, once it is deleted, deletes the set's Applications itself
    (applicationset/controllers/applicationset_controller.go, v3.5.1)."""
    fake = seeded("argocd", apps=4)
    cluster = cluster_of(fake)
    path = _backup(cluster, tmp_path)
    late = fake.seed(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "ApplicationSet",
            "metadata": {"name": "late-set", "namespace": "argocd", "finalizers": [APP_FINALIZER]},
            "spec": {"generators": [], "strategy": {"type": "RollingSync", "deletionOrder": "Reverse"}},
        }
    )
    fake.calls.clear()

    restore.restore(str(path), api_factory=cluster.factory, prune=True, do_apply=True)
    assert fake.stored("ApplicationSet", "argocd", "late-set") is None, "deleted, not left terminating"
    assert fake.cascaded_sets == [], "its controller was never asked to delete its Applications"
    writes = [(c[0], c[1], c[3]["name"]) for c in fake.writes()]
    assert writes == [("update", "applicationsets", "late-set"), ("delete", "applicationsets", "late-set")]
    assert fake.writes()[0][3]["obj"]["metadata"]["finalizers"] == []
    assert fake.writes()[1][3]["uid"] == late["metadata"]["uid"]


# --- 5. a replaced object equals the archive -----------------------------------------------------------
def test_a_replace_drops_the_stale_last_applied_copy(cluster_of, tmp_path):
    fake = seeded("argocd", apps=2)
    cluster = cluster_of(fake)
    path = _backup(cluster, tmp_path)
    secret = fake.objects[("secrets", "argocd", "repository-one")]
    assert archive.LAST_APPLIED in secret["metadata"]["annotations"], "the seed was kubectl-applied"
    secret["data"]["password"] = base64.b64encode(b"rotated-later").decode()

    restore.restore(str(path), api_factory=cluster.factory, do_apply=True)
    after = fake.stored("Secret", "argocd", "repository-one")
    assert archive.LAST_APPLIED not in (after["metadata"].get("annotations") or {})
    archived = next(
        d for d in archive.read_archive(path.read_bytes(), "a") if d["metadata"]["name"] == "repository-one"
    )
    assert archive.sanitise(after) == archived, "the object equals the archive"


def test_replacement_keeps_server_fields_but_not_last_applied():
    live = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "argocd-cm",
            "namespace": "argocd",
            "resourceVersion": "7",
            "uid": "u-1",
            "annotations": {archive.LAST_APPLIED: '{"data": {"old": "copy"}}'},
        },
        "data": {"old": "copy"},
    }
    desired = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "argocd-cm", "namespace": "argocd"},
    }
    out = object_diff.replacement(desired, live)
    assert out["metadata"] == {
        "name": "argocd-cm",
        "namespace": "argocd",
        "resourceVersion": "7",
        "uid": "u-1",
    }


# --- the prune scope, pure ----------------------------------------------------------------------------
def _secret(name: str, labels: dict | None = None, annotations: dict | None = None) -> dict:
    meta = {"name": name, "namespace": "argocd", "labels": labels or {}, "annotations": annotations or {}}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta}


def _app(namespace: str, kind: str = "Application") -> dict:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": namespace},
    }


TYPE = archive.SECRET_TYPE_LABEL
#: (producer, live object the archive lacks, whether --prune may delete it, why). Upstream facts:
#: cmd/argocd/commands/admin/admin.go isArgoCDSecret (v2.14.21, v3.5.1) and backup.go export (other
#: namespaces only with --application-namespaces / argocd-cmd-params-cm).
SCOPE = [
    ("plain", _secret("s", {TYPE: "scm-creds"}), True, "upstream: any secret-type label"),
    ("plain", _secret("s", annotations={"managed-by": "argocd.argoproj.io"}), True, "upstream: annotation"),
    ("plain", _secret("argocd-notifications-secret"), False, "upstream never exports it"),
    ("plain", _secret("oidc", {"app.kubernetes.io/part-of": "argocd"}), False, "upstream never exports it"),
    ("plain", _secret("argocd-secret"), False, "never argocd-secret"),
    ("plain", _app("argocd"), True, "Argo CD's namespace"),
    (
        "plain",
        {**_app("team-a"), "metadata": {"name": "y", "namespace": "team-a"}},
        True,
        "it holds team-a's",
    ),
    ("plain", _app("team-b"), False, "the export holds none of team-b"),
    ("plain", _app("team-a", "ApplicationSet"), False, "it holds no ApplicationSet of team-a"),
    ("v1", _secret("s", {TYPE: "repository"}), True, "a v1 type"),
    ("v1", _secret("s", {TYPE: "repository-write"}), False, "v1 never held it"),
    ("v1", _secret("s", annotations={"managed-by": "argocd.argoproj.io"}), False, "v1 never held it"),
    ("v1", _secret("argocd-notifications-secret"), True, "v1 held it by name"),
    ("v1", _app("team-a"), False, "v1: Argo CD's namespace only"),
    ("v2", _secret("s", {TYPE: "scm-creds"}), True, "v2: any secret-type label"),
    ("v2", _secret("legacy"), False, "v2 did not follow argocd-cm references"),
    ("v2", _app("team-b"), True, "enabled by the archive's argocd-cmd-params-cm"),
    ("v2", _app("elsewhere"), False, "not enabled"),
    ("v3", _secret("legacy"), True, "named by the archive's argocd-cm repositories"),
    ("v3", _secret("argocd-secret", {TYPE: "x"}), False, "never argocd-secret"),
]


@pytest.mark.parametrize(("producer", "obj", "covered", "why"), SCOPE, ids=[w for *_, w in SCOPE])
def test_prune_scope_follows_the_archives_producer(producer, obj, covered, why):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-cm", "namespace": "argocd"}}
    cm["data"] = {"repositories": "- url: https://g/x\n  passwordSecret: {name: legacy, key: p}\n"}
    params = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-cmd-params-cm"}}
    params["metadata"]["namespace"] = "argocd"
    params["data"] = {"application.namespaces": "team-a, team-b"}
    held = [cm, params, _app("team-a")] if producer == "plain" else [cm, params]
    desired = {archive.key(o): o for o in held}
    formats = {"v1": archive.FORMAT_V1, "v2": archive.FORMAT_V2, "v3": archive.FORMAT}
    index = None if producer == "plain" else {"format": formats[producer]}
    loaded = restore_plan.Loaded(objects=held, index=index, source="a", plain=producer == "plain")
    scope = restore_plan.prune_scope(loaded, "argocd", desired)
    assert scope is not None
    entries = restore_plan.plan_restore(desired, {}, [obj], prune=True, scope=scope, namespace="argocd")
    assert [e.key for e in entries if e.action == restore_plan.DELETE] == (
        [archive.key(obj)] if covered else []
    ), why

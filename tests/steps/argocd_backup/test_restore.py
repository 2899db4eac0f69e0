"""restore: archives from moto's S3 server (or disk) back into a FAKE Kubernetes API over HTTP.

The Kubernetes side is :mod:`tests.fakes.kube` (an in-memory fake of list/get/create/replace/
delete with finalizers, owner references and RBAC, served on 127.0.0.1 and reached through the
real official-client adapter — or the real kubectl) because no API server runs here and kmock 0.8
lacks paging, selectors and server-side apply. S3 is moto's server.
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from steps.argocd_backup import archive, object_diff, restore
from steps.argocd_backup import export as backup_export
from steps.aws import s3 as s3io
from steps.domain.errors import ConfigError, PermissionDeniedError
from steps.kube import api as kube
from steps.kube import client as kube_client
from tests.fakes.kube import BACKED_UP_SECRETS, SECRET_VALUES, FakeKube, FakeKubeServer, seeded

FROZEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
TOTAL = (
    7 + len(BACKED_UP_SECRETS) + 4 + 3 + 60
)  # ConfigMaps, Secrets, AppProjects, ApplicationSets, Applications


class Cluster:
    """A fake API server plus a real adapter pointed at it."""

    def __init__(self, fake: FakeKube, server: FakeKubeServer, api: kube_client.KubernetesApi) -> None:
        self.fake, self.server, self.api = fake, server, api
        self.factory_calls = 0

    def factory(self) -> kube_client.KubernetesApi:
        self.factory_calls += 1
        return self.api

    def patches(self) -> list[tuple[str, str, str, dict]]:
        """Every write (create, update, delete) the cluster received."""
        return self.fake.writes()


def _cluster(fake: FakeKube, tmp_path: Path, name: str) -> Iterator[Cluster]:
    with FakeKubeServer(fake) as server:
        api = kube_client.KubernetesApi.from_config(
            kubeconfig=str(server.write_kubeconfig(tmp_path / f"kc-{name}"))
        )
        yield Cluster(fake, server, api)


@pytest.fixture()
def source(tmp_path) -> Iterator[Cluster]:
    yield from _cluster(seeded("argocd", apps=60), tmp_path, "source")


@pytest.fixture()
def empty(tmp_path) -> Iterator[Cluster]:
    yield from _cluster(FakeKube(), tmp_path, "empty")


@pytest.fixture()
def s3(moto):
    return moto.client("s3")


@pytest.fixture()
def backup(source, s3, request) -> backup_export.BackupExportOutput:
    bucket = f"restore-{abs(hash(request.node.nodeid)) % 10**10}"
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    return backup_export.export_backup(api=source.api, s3=s3, bucket=bucket, now=lambda: FROZEN, page_size=25)


def _key(url: str) -> tuple[str, str]:
    return s3io.split_url(url)


def _backed_up(fake: FakeKube) -> list[dict]:
    """The source objects a backup should contain (by the export rules), sanitised."""
    names = {("ConfigMap", n) for n in archive.CONFIG_MAPS} | {("Secret", n) for n in BACKED_UP_SECRETS}
    out = []
    for obj in fake.in_namespace("argocd"):
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind in ("Application", "ApplicationSet", "AppProject") or (kind, name) in names:
            out.append(archive.sanitise(obj))
    return sorted(out, key=archive.sort_key)


@pytest.mark.parametrize("target", [None, "argocd-dr"], ids=["same-namespace", "other-namespace"])
def test_round_trip_into_an_empty_namespace_yields_the_same_objects(
    source, empty, backup, s3, target, capsys
):
    plan, report = restore.restore(
        backup.url, api_factory=empty.factory, s3=s3, do_apply=True, namespace=target
    )

    ns = target or "argocd"
    assert plan.count(restore.CREATE) == TOTAL and plan.count(restore.CHANGE) == 0
    expected = [archive.retarget(o, ns) for o in _backed_up(source.fake)]
    restored = sorted((archive.sanitise(o) for o in empty.fake.in_namespace(ns)), key=archive.sort_key)
    assert len(restored) == TOTAL
    assert restored == expected
    app = empty.fake.stored("Application", ns, "app-001")
    assert app["spec"]["destination"] == {
        "server": "https://kubernetes.default.svc",
        "namespace": "ns-app-001",
    }
    assert report.endswith(f"applied: {TOTAL} created, 0 changed, 0 unchanged in namespace {ns}")

    again, report = restore.restore(
        backup.url, api_factory=empty.factory, s3=s3, namespace=target, prune=True
    )
    assert again.count(restore.UNCHANGED) == TOTAL, "restoring what is there changes nothing"
    assert again.count(restore.DELETE) == 0


def test_apply_order_is_configmaps_and_secrets_then_projects_then_sets_and_apps(empty, backup, s3):
    restore.restore(backup.url, api_factory=empty.factory, s3=s3, do_apply=True)
    order = [plural for verb, plural, _, _ in empty.patches() if verb == "create"]
    rank = {"configmaps": 0, "secrets": 0, "appprojects": 1, "applicationsets": 2, "applications": 2}
    assert [rank[p] for p in order] == sorted(rank[p] for p in order)
    assert order.index("appprojects") > max(i for i, p in enumerate(order) if p in ("configmaps", "secrets"))


def test_dry_run_applies_nothing_and_says_what_it_would_do(empty, backup, s3):
    _, report = restore.restore(backup.url, api_factory=empty.factory, s3=s3)
    assert empty.patches() == []
    assert "would create  Application/app-059 -n argocd" in report
    assert report.splitlines()[-1] == (
        f"dry run: {TOTAL} to create, 0 to change, 0 unchanged in namespace argocd; pass --apply to apply"
    )


def test_dry_run_diff_against_live_masks_secret_values(source, backup, s3, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    live = source.fake
    secret = live.objects[("secrets", "argocd", "repository-one")]
    secret["data"]["password"] = base64.b64encode(b"a-new-live-password").decode()
    secret["data"]["extra"] = base64.b64encode(b"only-live-value").decode()
    live.objects[("configmaps", "argocd", "argocd-cm")]["data"]["timeout.reconciliation"] = "999s"
    live.objects[("applications", "argocd", "app-004")]["spec"]["source"]["targetRevision"] = "v2"
    live.objects[("applications", "argocd", "app-005")]["metadata"]["labels"]["added-by"] = "controller"

    plan, report = restore.restore(backup.url, api_factory=source.factory, s3=s3)
    print(report)
    out = capsys.readouterr().out

    changed = {(e.kind, e.name) for e in plan.entries if e.action == restore.CHANGE}
    assert changed == {
        ("Secret", "repository-one"),
        ("ConfigMap", "argocd-cm"),
        ("Application", "app-004"),
        ("Application", "app-005"),
    }
    assert plan.count(restore.UNCHANGED) == TOTAL - 4
    assert "-  timeout.reconciliation: 999s" in out and "+  timeout.reconciliation: 180s" in out
    assert "-    targetRevision: v2" in out and "+    targetRevision: main" in out
    assert "-  password: '***'" in out and "+  password: '*** (changed)'" in out
    assert "-  extra: '***'" in out, "a key only the live object has is a removal, shown masked"
    assert "-    added-by: controller" in out, "so is a label"
    leaks = [*SECRET_VALUES, "a-new-live-password", "only-live-value"]
    leaks += [base64.b64encode(v.encode()).decode() for v in leaks]
    for value in leaks:
        assert value not in out and value not in caplog.text
    assert source.patches() == []

    restore.restore(backup.url, api_factory=source.factory, s3=s3, do_apply=True)
    assert "extra" not in live.stored("Secret", "argocd", "repository-one")["data"], "equal to the archive"
    assert "added-by" not in live.stored("Application", "argocd", "app-005")["metadata"]["labels"]
    again, _ = restore.restore(backup.url, api_factory=source.factory, s3=s3)
    assert again.count(restore.UNCHANGED) == TOTAL


def test_tampered_archive_is_refused_and_nothing_is_applied(empty, backup, s3):
    bucket, key = _key(backup.url)
    docs = archive.read_archive(s3.get_object(Bucket=bucket, Key=key)["Body"].read(), "x")
    docs[0]["data"]["url"] = "https://evil.example.com"
    s3.put_object(Bucket=bucket, Key=key, Body=archive.build_archive(docs))  # a valid archive, other bytes

    with pytest.raises(ConfigError, match="does not match its index.*nothing was applied"):
        restore.restore(backup.url, api_factory=empty.factory, s3=s3, do_apply=True)
    assert empty.factory_calls == 0 and empty.fake.calls == [] and empty.server.requests == []


def _write(
    tmp_path: Path, name: str, data: bytes, *, index: bool = True, index_name: str | None = None
) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    if index:
        idx = archive.make_index(data, [], cluster="c", namespace="argocd", created=FROZEN, version="t")
        (tmp_path / (index_name or restore.index_candidates(name)[0])).write_bytes(archive.json_bytes(idx))
    return path


@pytest.mark.parametrize(
    ("data", "text"),
    [
        pytest.param(b"this is not gzip at all", "is corrupt: not a readable gzip file", id="not-gzip"),
        pytest.param(gzip.compress(b"x" * 100)[:-9], "is corrupt: not a readable gzip file", id="truncated"),
        pytest.param(
            gzip.compress(b"kind: ConfigMap\n  bad: [indent\n"), "is corrupt: invalid YAML", id="bad-yaml"
        ),
        pytest.param(
            gzip.compress(b"---\nkind: Pod\nmetadata: {name: p}\n"),
            "document 1 is not a ConfigMap",
            id="foreign-kind",
        ),
    ],
)
def test_corrupt_archive_is_refused_and_nothing_is_applied(empty, tmp_path, data, text):
    path = _write(tmp_path, "030405Z.yaml.gz", data)  # the index matches: corruption predates it
    with pytest.raises(ConfigError, match=text) as info:
        restore.restore(str(path), api_factory=empty.factory, do_apply=True)
    assert "nothing was applied" in str(info.value)
    assert empty.factory_calls == 0 and empty.fake.calls == []


def test_local_file_with_index_beside_it(empty, backup, s3, tmp_path):
    bucket, key = _key(backup.url)
    data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    index = s3.get_object(Bucket=bucket, Key=_key(backup.index_url)[1])["Body"].read()
    (tmp_path / "copy.yaml.gz").write_bytes(data)
    (tmp_path / "copy.yaml.gz.index.json").write_bytes(index)  # the other accepted name
    plan, _ = restore.restore(str(tmp_path / "copy.yaml.gz"), api_factory=empty.factory, do_apply=True)
    assert plan.count(restore.CREATE) == TOTAL and len(empty.patches()) == TOTAL


def test_missing_index_is_refused_unless_no_verify(empty, backup, s3, tmp_path):
    bucket, key = _key(backup.url)
    path = tmp_path / "lone.yaml.gz"
    path.write_bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    with pytest.raises(ConfigError, match="no index beside archive .*pass --no-verify"):
        restore.restore(str(path), api_factory=empty.factory)
    assert empty.factory_calls == 0
    plan, _ = restore.restore(str(path), api_factory=empty.factory, verify=False)
    assert plan.count(restore.CREATE) == TOTAL


def test_missing_s3_object_is_named(empty, backup, s3):
    bucket, _ = _key(backup.url)
    with pytest.raises(ConfigError, match=f"cannot read s3://{bucket}/nope.yaml.gz: no such object"):
        restore.restore(f"s3://{bucket}/nope.yaml.gz", api_factory=empty.factory, s3=s3)


def test_forbidden_apply_names_verb_and_resource(empty, backup, s3):
    empty.fake.forbid("create", "secrets")
    with pytest.raises(
        PermissionDeniedError, match=r"cannot create secrets '[\w-]+' in namespace argocd: forbidden"
    ):
        restore.restore(backup.url, api_factory=empty.factory, s3=s3, do_apply=True)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(
            "a/030405Z.yaml.gz", ["a/030405Z.index.json", "a/030405Z.yaml.gz.index.json"], id="archive"
        ),
        pytest.param("dump.bin", ["dump.bin.index.json"], id="other-name"),
    ],
)
def test_index_candidates(name, expected):
    assert restore.index_candidates(name) == expected


def test_diff_objects_masks_secrets_and_is_empty_for_equal_objects():
    live = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "uid": "1", "resourceVersion": "9"},
        "data": {"k": "c2VjcmV0"},
    }
    assert object_diff.diff_objects(live, {**live, "metadata": {"name": "s"}}) == []
    lines = object_diff.diff_objects(live, {**live, "data": {"k": "b3RoZXI="}})
    assert "-  k: '***'" in lines and "+  k: '*** (changed)'" in lines
    assert not any("c2VjcmV0" in x or "b3RoZXI=" in x for x in lines)


def test_index_json_is_stable(backup, s3):
    bucket, key = _key(backup.index_url)
    index = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert index["sha256"] == backup.sha256 and index["counts"]["Application"] == 60
    assert index["format"] == archive.FORMAT


# --- the round trip the issue asks for -------------------------------------------------------------
APP_NAMESPACES = ("team-a", "team-b")


@pytest.fixture()
def fleet(tmp_path) -> Iterator[Cluster]:
    """Argo CD managing Applications in argocd, team-a and team-b (ApplicationSets in argocd, team-a)."""
    yield from _cluster(seeded("argocd", apps=6, app_namespaces=APP_NAMESPACES), tmp_path, "fleet")


@pytest.fixture()
def fleet_backup(fleet, s3, request) -> backup_export.BackupExportOutput:
    bucket = f"fleet-{abs(hash(request.node.nodeid)) % 10**10}"
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    return backup_export.export_backup(api=fleet.api, s3=s3, bucket=bucket, now=lambda: FROZEN, page_size=4)


def test_round_trip_three_namespaces_every_secret_kind_prune_only_with_apply(fleet, fleet_backup, s3, capsys):
    fake = fleet.fake
    archived = {archive.key(o) for o in restore.load(fleet_backup.url, s3=s3).objects}
    assert {ns for kind, ns, _ in archived if kind == "Application"} == {"argocd", *APP_NAMESPACES}
    assert {name for kind, _, name in archived if kind == "Secret"} == set(BACKED_UP_SECRETS)

    # After the backup: a live key, a live label, and an Application the backup never saw.
    fake.objects[("secrets", "argocd", "repository-one")]["data"]["extra"] = base64.b64encode(
        b"later"
    ).decode()
    fake.objects[("applications", "team-a", "team-a-app-0")]["metadata"]["labels"]["added"] = "later"
    fake.seed(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {
                "name": "late",
                "namespace": "team-b",
                "finalizers": ["resources-finalizer.argocd.argoproj.io"],
            },
            "spec": {"project": "team-b", "destination": {"server": "https://kubernetes.default.svc"}},
        }
    )

    plan, report = restore.restore(fleet_backup.url, api_factory=fleet.factory, s3=s3)
    assert fake.writes() == [], "a dry run writes nothing"
    assert {(e.key, e.action) for e in plan.entries if e.action != restore.UNCHANGED} == {
        (("Secret", "argocd", "repository-one"), restore.CHANGE),
        (("Application", "team-a", "team-a-app-0"), restore.CHANGE),
        (("Application", "team-b", "late"), restore.EXTRA),
    }
    assert "-  extra: '***'" in report and "-    added: later" in report
    assert "not in archive  Application/late -n team-b (kept; --prune deletes it)" in report

    restore.restore(fleet_backup.url, api_factory=fleet.factory, s3=s3, do_apply=True)
    assert "extra" not in fake.stored("Secret", "argocd", "repository-one")["data"], "the live key is gone"
    assert "added" not in fake.stored("Application", "team-a", "team-a-app-0")["metadata"]["labels"]
    assert fake.stored("Application", "team-b", "late") is not None, "no prune without --prune"
    assert not [c for c in fake.writes() if c[0] == "delete"]

    fake.calls.clear()
    plan, report = restore.restore(fleet_backup.url, api_factory=fleet.factory, s3=s3, prune=True)
    assert fake.writes() == [], "--prune without --apply only lists"
    assert (
        "would delete  Application/late -n team-b (finalizers resources-finalizer.argocd.argoproj.io "
        "removed first: its resources stay)"
    ) in report
    assert report.splitlines()[-1] == (
        f"dry run: 0 to create, 0 to change, {len(archived)} unchanged, 1 to delete in namespace argocd "
        "(and team-a, team-b); pass --apply to apply"
    )

    plan, report = restore.restore(
        fleet_backup.url, api_factory=fleet.factory, s3=s3, prune=True, do_apply=True
    )
    assert fake.stored("Application", "team-b", "late") is None
    writes = [(c[0], c[1], c[2], c[3]["name"]) for c in fake.writes()]
    assert writes == [
        ("update", "applications", "team-b", "late"),
        ("delete", "applications", "team-b", "late"),
    ]
    update = next(c for c in fake.writes() if c[0] == "update")
    assert update[3]["obj"]["metadata"]["finalizers"] == [], "the finalizer goes before the delete"
    assert fake.cascaded == [], "Argo CD was never asked to delete the workloads"
    assert fake.stored("Application", "not-managed", "stray") is not None, "outside Argo CD's namespaces"
    assert "deleted  Application/late -n team-b" in report

    again, _ = restore.restore(fleet_backup.url, api_factory=fleet.factory, s3=s3, prune=True)
    assert again.count(restore.UNCHANGED) == len(archived) and again.count(restore.DELETE) == 0


def test_restore_into_an_empty_cluster_puts_each_object_in_its_own_namespace(fleet_backup, empty, s3):
    plan, _ = restore.restore(
        fleet_backup.url, api_factory=empty.factory, s3=s3, do_apply=True, namespace="argocd-dr"
    )
    assert plan.namespace == "argocd-dr"
    assert {archive.key(o)[1] for o in empty.fake.everything() if o["kind"] == "Application"} == {
        "argocd-dr",
        *APP_NAMESPACES,
    }, "--namespace moves only Argo CD's own namespace"
    assert {archive.key(o)[1] for o in empty.fake.everything() if o["kind"] != "Application"} == {
        "argocd-dr",
        "team-a",
    }
    assert empty.fake.stored("Application", "team-b", "team-b-app-1") is not None


# --- project tokens ----------------------------------------------------------------------------------
def project_token_accepted(fake: FakeKube, namespace: str, token: str) -> bool:
    """Argo CD's check of a project role token, on what the cluster holds now (no server restart).

    util/session/sessionmanager.go Parse (v3.5.1; the same in v2.14.21): HS256 with argocd-secret's
    ``server.secretkey``; the subject ``proj:PROJECT:ROLE`` (server/rbacpolicy GetProjectRoleFromSubject);
    then AppProject.GetJWTToken (pkg/apis/application/v1alpha1/app_project_types.go), which looks in
    ``status.jwtTokensByRole[ROLE].items`` only — by ``jti`` (id), else by ``iat``.
    """
    import re

    import jwt

    secret = fake.stored("Secret", namespace, "argocd-secret")
    if secret is None:
        return False
    try:
        claims = jwt.decode(token, base64.b64decode(secret["data"]["server.secretkey"]), algorithms=["HS256"])
    except jwt.InvalidTokenError:
        return False
    m = re.fullmatch(r"proj:([^:]+):(.+)", claims.get("sub", ""))
    project = fake.stored("AppProject", namespace, m.group(1)) if m else None
    if project is None:
        return False
    items = (((project.get("status") or {}).get("jwtTokensByRole") or {}).get(m.group(2)) or {}).get(
        "items"
    ) or []
    jti, iat = claims.get("jti", ""), claims.get("iat")
    return any((jti and t.get("id") == jti) or t.get("iat") == iat for t in items)


def _project_token(key: str, *, jti: str | None = None) -> str:
    import jwt

    from tests.fakes.kube import PROJECT_TOKEN

    claims = {
        "iss": "argocd",
        "sub": f"proj:{PROJECT_TOKEN['project']}:{PROJECT_TOKEN['role']}",
        "iat": PROJECT_TOKEN["iat"] if jti is None else PROJECT_TOKEN["iat"] + 1,
        "nbf": PROJECT_TOKEN["iat"],
        "jti": jti or PROJECT_TOKEN["id"],
    }
    return jwt.encode(claims, key.encode(), algorithm="HS256")


def test_a_project_token_is_valid_right_after_restore(source, empty, backup, s3):
    token = _project_token(SECRET_VALUES[5])
    assert project_token_accepted(source.fake, "argocd", token), "valid on the source cluster"
    assert not project_token_accepted(source.fake, "argocd", _project_token(SECRET_VALUES[5], jti="revoked"))
    assert not project_token_accepted(
        source.fake, "argocd", _project_token("another-server-key-0123456789-xx")
    )
    assert not project_token_accepted(empty.fake, "argocd", token), "nothing restored yet"

    restore.restore(backup.url, api_factory=empty.factory, s3=s3, do_apply=True)
    assert project_token_accepted(empty.fake, "argocd", token), "accepted at once, no argocd-server restart"


def test_project_tokens_are_rebuilt_from_spec_when_an_archive_lacks_the_status(empty, tmp_path):
    """An archive made before status was kept (or a hand-made one): restore completes the status."""
    docs = [
        archive.sanitise(o)
        for o in seeded("argocd", apps=1).everything()
        if o["kind"] in ("AppProject", "Secret") and archive.is_argocd_secret(o) or o["kind"] == "AppProject"
    ]
    for doc in docs:
        doc.pop("status", None)
    path = tmp_path / "old.yaml.gz"
    path.write_bytes(archive.build_archive(docs))
    restore.restore(str(path), api_factory=empty.factory, do_apply=True, verify=False)
    assert project_token_accepted(empty.fake, "argocd", _project_token(SECRET_VALUES[5]))


# --- prune safety ------------------------------------------------------------------------------------
def test_pruning_an_applicationset_orphans_its_applications(source, backup, s3):
    fake = source.fake
    owned = fake.objects[("applications", "argocd", "app-010")]
    late = fake.seed(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "ApplicationSet",
            "metadata": {"name": "late-set", "namespace": "argocd"},
            "spec": {"generators": []},
        }
    )
    owned["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "ApplicationSet",
            "name": "late-set",
            "uid": late["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]

    restore.restore(backup.url, api_factory=source.factory, s3=s3, prune=True, do_apply=True)
    assert fake.stored("ApplicationSet", "argocd", "late-set") is None
    assert fake.stored("Application", "argocd", "app-010") is not None, "not garbage-collected with its set"
    assert fake.cascaded == []
    delete = next(c for c in fake.writes() if c[0] == "delete")
    assert delete[3] == {"name": "late-set", "uid": late["metadata"]["uid"], "propagation": "Orphan"}


#: The order --prune deletes in. Upstream (cmd/argocd/commands/admin/backup.go NewImportCommand,
#: v3.5.1 and v2.14.21) prunes Secrets, AppProjects, Applications and ApplicationSets in map order
#: and removes an Application's finalizers right before deleting it; it never prunes ConfigMaps
#: (log.Fatalf "Unexpected kind"). Ours: sets first (they would re-create the Applications),
#: each Application's finalizers removed first, then projects, then Secrets; ConfigMaps never.
PRUNE_ORDER = ("ApplicationSet", "Application", "AppProject", "Secret")


def test_prune_order_and_kinds(source, backup, s3):
    fake = source.fake
    for obj in (
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "late-repo",
                "namespace": "argocd",
                "labels": {archive.SECRET_TYPE_LABEL: "repository"},
            },
        },
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AppProject",
            "metadata": {"name": "late-project", "namespace": "argocd"},
            "spec": {},
        },
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {
                "name": "late-app",
                "namespace": "argocd",
                "finalizers": ["resources-finalizer.argocd.argoproj.io"],
            },
            "spec": {"project": "late-project"},
        },
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "ApplicationSet",
            "metadata": {"name": "late-set", "namespace": "argocd"},
            "spec": {"generators": []},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "argocd-late-cm",
                "namespace": "argocd",
                "labels": {"app.kubernetes.io/part-of": "argocd"},
            },
        },
    ):
        fake.seed(obj)
    fake.calls.clear()
    restore.restore(backup.url, api_factory=source.factory, s3=s3, prune=True, do_apply=True)
    kind_of = {r.plural: r.kind for r in kube.RESOURCES.values()}
    deleted = [kind_of[c[1]] for c in fake.writes() if c[0] == "delete"]
    assert deleted == list(PRUNE_ORDER) == list(archive.PRUNE_ORDER)
    assert fake.stored("ConfigMap", "argocd", "argocd-late-cm") is not None, "ConfigMaps are never pruned"
    assert fake.cascaded == []


def test_replace_keeps_what_a_backup_never_holds(source, backup, s3):
    fake = source.fake
    app = fake.objects[("applications", "argocd", "app-001")]
    app["spec"]["source"]["targetRevision"] = "changed-live"
    app["status"] = {"sync": {"status": "OutOfSync"}}
    app["operation"] = {"sync": {"revision": "in-flight"}}
    owner = app["metadata"]["ownerReferences"]
    restore.restore(backup.url, api_factory=source.factory, s3=s3, do_apply=True)
    after = fake.stored("Application", "argocd", "app-001")
    assert after["spec"]["source"]["targetRevision"] == "main"
    assert after["status"] == {"sync": {"status": "OutOfSync"}}, "server state stays"
    assert after["operation"] == {"sync": {"revision": "in-flight"}}, (
        "restore neither starts nor cancels a sync"
    )
    assert after["metadata"]["ownerReferences"] == owner


def test_an_object_changed_between_plan_and_apply_is_read_again(source, backup, s3, monkeypatch):
    waited: list[float] = []
    monkeypatch.setattr(restore, "_sleep", waited.append)  # a short backoff, never slept here
    loaded = restore.load(backup.url, s3=s3)
    result = restore.plan(source.api, loaded)
    assert result.count(restore.CHANGE) == 0
    cm = source.fake.objects[("configmaps", "argocd", "argocd-cm")]
    cm["data"]["late"] = "x"
    entry = next(e for e in result.entries if e.key == ("ConfigMap", "argocd", "argocd-cm"))
    entry.action, entry.live = restore.CHANGE, source.fake.stored("ConfigMap", "argocd", "argocd-cm")
    cm["metadata"]["resourceVersion"] = "99999"  # someone wrote it after we read it
    restore.apply(source.api, result)
    assert "late" not in source.fake.stored("ConfigMap", "argocd", "argocd-cm")["data"]
    updates = [c for c in source.fake.writes() if c[0] == "update"]
    assert len(updates) == 2, "the first replace hit 409, the object was read again and replaced"
    assert waited == [restore.CONFLICT_BACKOFF_SECONDS]


# --- a plain `argocd admin export` file ----------------------------------------------------------------
def _argocd_export(fake: FakeKube, namespace: str = "argocd") -> str:
    """What `argocd admin export` writes for this cluster (cmd/argocd/commands/admin/backup.go, v3.5.1).

    Upstream's ``export()`` keeps only name, finalizers, labels and annotations of the metadata (the
    namespace only outside Argo CD's), keeps ``status`` and ``operation``, and ends each document
    with ``---``. It takes argocd-cm, argocd-rbac-cm, argocd-ssh-known-hosts-cm, argocd-tls-certs-cm,
    the Secrets isArgoCDSecret selects, every AppProject, and the Applications/ApplicationSets of
    the enabled namespaces.
    """
    upstream_cms = ("argocd-cm", "argocd-rbac-cm", "argocd-ssh-known-hosts-cm", "argocd-tls-certs-cm")
    out = []
    for obj in fake.everything():
        meta = obj["metadata"]
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        if obj["kind"] == "ConfigMap" and meta["name"] not in upstream_cms:
            continue
        if obj["kind"] == "Secret" and not (
            meta["name"] == "argocd-secret"
            or archive.SECRET_TYPE_LABEL in labels
            or annotations.get("managed-by") == "argocd.argoproj.io"
        ):
            continue
        if meta["namespace"] == "not-managed":
            continue
        doc = {k: v for k, v in obj.items() if k != "metadata"}
        doc["metadata"] = {k: meta[k] for k in ("name", "finalizers", "labels", "annotations") if k in meta}
        if meta["namespace"] != namespace:
            doc["metadata"]["namespace"] = meta["namespace"]
        if obj["kind"] == "Application":
            doc["status"] = {"sync": {"status": "OutOfSync"}, "reconciledAt": "2026-01-01T00:00:00Z"}
        out.append(yaml.safe_dump(doc) + "---\n")
    return "".join(out)


def test_a_plain_argocd_export_file_is_restored_unverified_and_sanitised(empty, tmp_path):
    fake = seeded("argocd", apps=8, app_namespaces=APP_NAMESPACES)
    export = tmp_path / "argocd-export.yaml"
    export.write_text(_argocd_export(fake))
    assert "operation:" in export.read_text() and "reconciledAt" in export.read_text()

    plan, report = restore.restore(str(export), api_factory=empty.factory, do_apply=True)
    assert report.splitlines()[0].startswith(f"unverified: {export} is a plain `argocd admin export` file")
    created = [c[3]["obj"] for c in empty.fake.writes() if c[0] == "create"]
    assert created and all("operation" not in o for o in created), "an in-flight sync is never applied"
    assert not [o for o in created if o["kind"] in ("Application", "ApplicationSet") and "status" in o]
    assert empty.fake.stored("Application", "argocd", "app-007") is not None
    assert empty.fake.stored("Application", "team-b", "team-b-app-1") is not None, "kept in its own namespace"
    assert project_token_accepted(empty.fake, "argocd", _project_token(SECRET_VALUES[5]))
    assert plan.count(restore.CREATE) == len(created)


def test_a_file_that_is_neither_is_refused_naming_both(empty, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some notes\n")
    with pytest.raises(
        ConfigError,
        match="is not a plain `argocd admin export` file: document 1 is not a "
        "ConfigMap, Secret, AppProject, ApplicationSet or Application",
    ):
        restore.restore(str(path), api_factory=empty.factory, do_apply=True)
    assert empty.factory_calls == 0


# --- restoring without imagebump: the documented kubectl command ----------------------------------------
def _strict_validator():
    """Strict field validation as the API server does it: Argo CD v3.5.1's CRD schemas, Kubernetes' own."""
    import jsonschema
    import kubernetes_validate

    from tests.workflows.schemas import SCHEMAS, strict

    crds = {}
    for plural in ("applications", "applicationsets", "appprojects"):
        raw = json.loads((SCHEMAS / "argo-cd-v3.5.1" / f"{plural}.crd-schema.json").read_text())
        crds[raw["kind"]] = jsonschema.Draft7Validator(strict(raw["openAPIV3Schema"]))

    def validate(obj: dict) -> list[str]:
        if obj.get("kind") in crds:
            return [
                f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:200]}"
                for e in crds[obj["kind"]].iter_errors(obj)
            ]
        try:
            kubernetes_validate.validate(obj, "1.33.0", strict=True)
        except kubernetes_validate.ValidationError as exc:
            return [
                f"{obj.get('kind')}: {'.'.join(map(str, exc.path))} invalid"
            ]  # never the value: a Secret's
        return []

    return validate


def _documented_restore_block() -> str:
    """The shell block of docs/backup-restore.md that restores an archive with kubectl alone."""
    from tests.test_readme import shell_blocks

    (block,) = [b for b in shell_blocks() if "kubectl apply --server-side" in b.text]
    assert block.path == "docs/backup-restore.md" and block.skip, block
    return block.text


def test_the_documented_kubectl_command_restores_an_archive(fleet_backup, s3, tmp_path):
    """docs/backup-restore.md's `aws s3 cp … - | gunzip -c | kubectl apply --server-side …`, as written.

    The block runs verbatim with the real kubectl; only `aws` is a shell function that writes the
    archive (already fetched from moto's S3) to stdout, as `aws s3 cp s3://… -` would.

    Against the FAKE API server: discovery, OpenAPI v3 (so kubectl asks for strict server-side
    field validation, done here with Argo CD's CRD schemas and Kubernetes' own) and server-side
    apply. Proves kubectl maps every kind, sends every object unchanged to its own namespace and
    that every document passes strict validation; not a real API server's merge or admission.
    """
    bucket, key = _key(fleet_backup.url)
    path = tmp_path / "030405Z.yaml.gz"
    path.write_bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    archived = archive.read_archive(path.read_bytes(), str(path))
    validate = _strict_validator()
    assert [archive.key(d) for d in archived if validate(d)] == [], "every document passes strict validation"

    documented = _documented_restore_block()

    target = FakeKube()
    with FakeKubeServer(target, validator=validate, anonymous=True) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kc-kubectl")
        run = subprocess.run(
            ["bash", "-c", 'aws() { cat "$ARCHIVE"; }\nset -o pipefail\n' + documented],
            env={**os.environ, "KUBECONFIG": str(kubeconfig), "ARCHIVE": str(path)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        strict_patches = [r for r in server.requests if r.method == "PATCH"]
        assert len(strict_patches) == len(archived)
        assert all(r.query.get("fieldValidation") == ["Strict"] for r in strict_patches)
    for doc in archived:
        kind, ns, name = archive.key(doc)
        stored = target.stored(kind, ns, name)
        assert stored is not None and archive.sanitise(stored) == doc, archive.show(archive.key(doc))
    assert {archive.key(o)[1] for o in target.everything()} == {"argocd", *APP_NAMESPACES}

    # The validation is real: a misspelled field is refused, and kubectl fails.
    bad = [dict(d) for d in archived if d["kind"] == "Application"][:1]
    bad[0]["spec"] = {**bad[0]["spec"], "projekt": "x"}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump_all(bad))
    with FakeKubeServer(FakeKube(), validator=validate, anonymous=True) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kc-bad")
        run = subprocess.run(
            ["kubectl", "apply", "--server-side", "-f", str(tmp_path / "bad.yaml")],
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert run.returncode != 0 and "projekt" in run.stderr


def test_imagebump_restore_writes_strictly_and_refuses_a_field_the_cluster_does_not_know(
    fleet_backup, s3, tmp_path
):
    """Every write asks for strict field validation: an API server without it drops a field its CRD
    does not know (an archive from a newer Argo CD) and only warns, so the restore would report
    "created" for an object it did not restore whole. The fleet's archive passes (Argo CD's CRD
    schemas and Kubernetes' own); a field the schema lacks is refused, named, and not written."""
    from steps.domain.errors import ConfigError

    validate = _strict_validator()
    target = FakeKube()
    with FakeKubeServer(target, validator=validate, anonymous=True) as server:
        api = kube_client.KubernetesApi.from_config(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc")))
        restore.restore(fleet_backup.url, api_factory=lambda: api, s3=s3, do_apply=True)
        writes = [r for r in server.requests if r.method in ("POST", "PUT")]
        assert writes and all(r.query.get("fieldValidation") == ["Strict"] for r in writes)

    bucket, key = _key(fleet_backup.url)
    docs = archive.read_archive(s3.get_object(Bucket=bucket, Key=key)["Body"].read(), key)
    app = next(d for d in docs if d["kind"] == "Application")
    app["spec"] = {**app["spec"], "futureField": "x"}  # what a newer Argo CD's CRD would hold
    newer = tmp_path / "newer.yaml"
    newer.write_text(yaml.safe_dump_all(docs))
    fresh = FakeKube()
    with FakeKubeServer(fresh, validator=validate, anonymous=True) as server:
        api = kube_client.KubernetesApi.from_config(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc2")))
        with pytest.raises(ConfigError) as refused:
            restore.restore(str(newer), api_factory=lambda: api, s3=s3, do_apply=True, verify=False)
    assert refused.value.reason == "unknown-field" and "futureField" in str(refused.value)
    assert (
        fresh.stored("Application", app["metadata"].get("namespace", "argocd"), app["metadata"]["name"])
        is None
    )

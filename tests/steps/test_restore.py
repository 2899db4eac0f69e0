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
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from steps import archive, backup_export, kube, restore
from steps.errors import ConfigError, PermissionDeniedError
from tests.fakes.kube import BACKED_UP_SECRETS, SECRET_VALUES, FakeKube, FakeKubeServer, seeded

FROZEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
TOTAL = 7 + len(BACKED_UP_SECRETS) + 4 + 3 + 60  # ConfigMaps, Secrets, AppProjects, ApplicationSets, Applications


class Cluster:
    """A fake API server plus a real adapter pointed at it."""

    def __init__(self, fake: FakeKube, server: FakeKubeServer, api: kube.KubernetesApi) -> None:
        self.fake, self.server, self.api = fake, server, api
        self.factory_calls = 0

    def factory(self) -> kube.KubernetesApi:
        self.factory_calls += 1
        return self.api

    def patches(self) -> list[tuple[str, str, str, dict]]:
        """Every write (create, update, delete) the cluster received."""
        return self.fake.writes()


def _cluster(fake: FakeKube, tmp_path: Path, name: str) -> Iterator[Cluster]:
    with FakeKubeServer(fake) as server:
        api = kube.KubernetesApi.from_config(kubeconfig=str(server.write_kubeconfig(tmp_path / f"kc-{name}")))
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
    return restore.split_s3_url(url)


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
def test_round_trip_into_an_empty_namespace_yields_the_same_objects(source, empty, backup, s3, target, capsys):
    plan, report = restore.restore(backup.url, api_factory=empty.factory, s3=s3, do_apply=True, namespace=target)

    ns = target or "argocd"
    assert plan.count(restore.CREATE) == TOTAL and plan.count(restore.CHANGE) == 0
    expected = [archive.retarget(o, ns) for o in _backed_up(source.fake)]
    restored = sorted((archive.sanitise(o) for o in empty.fake.in_namespace(ns)), key=archive.sort_key)
    assert len(restored) == TOTAL
    assert restored == expected
    app = empty.fake.stored("Application", ns, "app-001")
    assert app["spec"]["destination"] == {"server": "https://kubernetes.default.svc", "namespace": "ns-app-001"}
    assert report.endswith(f"applied: {TOTAL} created, 0 changed, 0 unchanged in namespace {ns}")

    again, report = restore.restore(backup.url, api_factory=empty.factory, s3=s3, namespace=target, prune=True)
    assert again.count(restore.UNCHANGED) == TOTAL, "restoring what is there changes nothing"
    assert again.count(restore.DELETE) == 0


def test_apply_order_is_configmaps_and_secrets_then_projects_then_sets_and_apps(empty, backup, s3):
    restore.restore(backup.url, api_factory=empty.factory, s3=s3, do_apply=True)
    order = [plural for verb, plural, _, _ in empty.patches() if verb == "create"]
    rank = {"configmaps": 0, "secrets": 0, "appprojects": 1, "applicationsets": 2, "applications": 2}
    assert [rank[p] for p in order] == sorted(rank[p] for p in order)
    assert order.index("appprojects") > max(i for i, p in enumerate(order) if p in ("configmaps", "secrets"))


def test_dry_run_applies_nothing_and_says_what_it_would_do(empty, backup, s3):
    plan, report = restore.restore(backup.url, api_factory=empty.factory, s3=s3)
    assert empty.patches() == []
    assert "would create  Application/app-059 -n argocd" in report
    assert report.splitlines()[-1] == (
        f"dry run: {TOTAL} to create, 0 to change, 0 unchanged in namespace argocd; pass --apply to apply")


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
    assert changed == {("Secret", "repository-one"), ("ConfigMap", "argocd-cm"), ("Application", "app-004"),
                       ("Application", "app-005")}
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


def _write(tmp_path: Path, name: str, data: bytes, *, index: bool = True, index_name: str | None = None) -> Path:
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
        pytest.param(gzip.compress(b"kind: ConfigMap\n  bad: [indent\n"), "is corrupt: invalid YAML", id="bad-yaml"),
        pytest.param(gzip.compress(b"---\nkind: Pod\nmetadata: {name: p}\n"), "document 1 is not a ConfigMap",
                     id="foreign-kind"),
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
    bucket, key = _key(backup.url)
    with pytest.raises(ConfigError, match=f"cannot read s3://{bucket}/nope.yaml.gz: no such object"):
        restore.restore(f"s3://{bucket}/nope.yaml.gz", api_factory=empty.factory, s3=s3)


def test_forbidden_apply_names_verb_and_resource(empty, backup, s3):
    empty.fake.forbid("create", "secrets")
    with pytest.raises(PermissionDeniedError, match=r"cannot create secrets '[\w-]+' in namespace argocd: forbidden"):
        restore.restore(backup.url, api_factory=empty.factory, s3=s3, do_apply=True)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("a/030405Z.yaml.gz", ["a/030405Z.index.json", "a/030405Z.yaml.gz.index.json"], id="archive"),
        pytest.param("dump.bin", ["dump.bin.index.json"], id="other-name"),
    ],
)
def test_index_candidates(name, expected):
    assert restore.index_candidates(name) == expected


def test_diff_objects_masks_secrets_and_is_empty_for_equal_objects():
    live = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "uid": "1", "resourceVersion": "9"},
            "data": {"k": "c2VjcmV0"}}
    assert archive.diff_objects(live, {**live, "metadata": {"name": "s"}}) == []
    lines = archive.diff_objects(live, {**live, "data": {"k": "b3RoZXI="}})
    assert "-  k: '***'" in lines and "+  k: '*** (changed)'" in lines
    assert not any("c2VjcmV0" in x or "b3RoZXI=" in x for x in lines)


def test_index_json_is_stable(backup, s3):
    bucket, key = _key(backup.index_url)
    index = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert index["sha256"] == backup.sha256 and index["counts"]["Application"] == 60
    assert index["format"] == archive.FORMAT

"""Backups you can bet the cluster on: retention touches only this cluster's archives, a backup of
no Argo CD writes nothing, a far smaller one is marked suspect, and the good archives survive.

Kubernetes is the FAKE API of :mod:`tests.fakes.kube` (no real API server runs here), in memory
or over HTTP through the real adapter when a message must name the context; S3 is moto's server.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from steps.argocd_backup import export as backup_export
from steps.argocd_backup import restore, retention
from steps.domain.errors import EXIT_CONFIG, ConfigError
from steps.kube import client as kube_client
from tests.fakes.kube import FakeKube, FakeKubeServer, seeded

DAY0 = datetime(2026, 1, 1, 3, 0, 0, tzinfo=UTC)


def at(day: int):
    return lambda: DAY0 + timedelta(days=day)


@pytest.fixture()
def s3(moto):
    return moto.client("s3")


@pytest.fixture()
def bucket(s3) -> str:
    name = f"keep-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    return name


def _keys(s3, bucket: str) -> set[str]:
    return {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}


def _index(s3, bucket: str, url: str) -> dict:
    key = retention.index_key(url.split("/", 3)[3])
    return json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())


def _with_index(url: str) -> set[str]:
    key = url.split("/", 3)[3]
    return {key, retention.index_key(key)}


# --- 1. retention deletes nothing but this cluster's own archives ------------------------------------
def test_prod_retention_leaves_prod_eu_alone(s3, bucket):
    api = seeded("argocd", apps=3)
    eu = backup_export.export_backup(api=api, s3=s3, bucket=bucket, cluster="prod/eu", now=at(0))
    for day in (1, 2, 3):
        out = backup_export.export_backup(api=api, s3=s3, bucket=bucket, cluster="prod", keep=1, now=at(day))
    assert _with_index(eu.url) <= _keys(s3, bucket), "prod's retention deleted prod/eu's archive or index"
    assert _with_index(out.url) <= _keys(s3, bucket)
    own = {k for k in _keys(s3, bucket) if k.startswith("argocd-backups/prod/2026/")}
    assert own == _with_index(out.url), "prod's own older archives did expire"


def test_a_second_install_nested_under_the_prefix_and_a_kept_copy_survive(s3, bucket):
    api = seeded("argocd", apps=3)
    nested = backup_export.export_backup(
        api=api, s3=s3, bucket=bucket, prefix="argocd-backups/prod/dr", now=at(0)
    )
    copy_key = "argocd-backups/prod/keep/2026/01/01/000000Z.yaml.gz"
    s3.put_object(Bucket=bucket, Key=copy_key, Body=b"a copy someone kept")
    s3.put_object(Bucket=bucket, Key=retention.index_key(copy_key), Body=b"{}")
    for day in (1, 2, 3):
        backup_export.export_backup(api=api, s3=s3, bucket=bucket, cluster="prod", keep=1, now=at(day))
    keys = _keys(s3, bucket)
    assert _with_index(nested.url) <= keys
    assert {copy_key, retention.index_key(copy_key)} <= keys


def test_retention_deletes_an_archives_index_with_it(s3, bucket):
    api = seeded("argocd", apps=3)
    first = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=at(0))
    out = backup_export.export_backup(api=api, s3=s3, bucket=bucket, keep=1, now=at(1))
    assert out.deleted == [first.url]
    assert not _with_index(first.url) & _keys(s3, bucket), "the archive and its index are both gone"


# --- 2. a backup of no Argo CD writes nothing; a far smaller one is marked ---------------------------
@pytest.fixture()
def clusters(tmp_path: Path) -> Iterator[tuple[FakeKube, Path]]:
    """Argo CD's cluster (context ``prod``) and one without Argo CD (context ``staging``), both in
    one kubeconfig."""
    argocd, other = seeded("argocd", apps=6, model_namespaces=True), FakeKube.fresh()
    with FakeKubeServer(argocd) as a, FakeKubeServer(other) as b:
        ka = a.write_kubeconfig(tmp_path / "kc-prod", context="prod")
        kb = b.write_kubeconfig(tmp_path / "kc-staging", context="staging")
        yield argocd, Path(f"{ka}:{kb}")


def _api(kubeconfig: Path, context: str) -> kube_client.KubernetesApi:
    return kube_client.KubernetesApi.from_config(context=context, kubeconfig=str(kubeconfig))


def test_three_good_backups_survive_three_backups_of_no_argo_cd_and_three_of_an_emptied_one(
    s3, bucket, clusters, caplog
):
    argocd, kubeconfig = clusters
    prod = _api(kubeconfig, "prod")
    good = [
        backup_export.export_backup(api=prod, s3=s3, bucket=bucket, keep=3, now=at(day)).url
        for day in (0, 1, 2)
    ]
    before = _keys(s3, bucket)

    # wrong namespace, wrong context, an Argo CD whose objects were all deleted: refused, nothing written
    runs = [
        (prod, "argo-cd", "namespace argo-cd is missing", "context prod"),
        (_api(kubeconfig, "staging"), "argocd", "namespace argocd is missing", "context staging"),
    ]
    for api, namespace, missing, where in runs:
        with pytest.raises(ConfigError) as info:
            backup_export.export_backup(api=api, s3=s3, bucket=bucket, namespace=namespace, keep=3, now=at(3))
        assert info.value.exit_code == EXIT_CONFIG
        assert (
            missing in str(info.value)
            and where in str(info.value)
            and "nothing was written" in str(info.value)
        )
    for key in [k for k in argocd.objects if k[0] in ("configmaps", "secrets")]:
        argocd.objects.pop(key)
    with pytest.raises(ConfigError, match="ConfigMap argocd-cm and Secret argocd-secret are missing"):
        backup_export.export_backup(api=prod, s3=s3, bucket=bucket, keep=3, now=at(4))
    assert _keys(s3, bucket) == before, "a refused backup writes nothing and deletes nothing"

    # Argo CD still there but its Applications and projects deleted: written, marked, good ones kept
    argocd_again = seeded("argocd", apps=0)
    for day in (5, 6, 7):
        with caplog.at_level(logging.WARNING, logger="steps.argocd_backup.export"):
            out = backup_export.export_backup(api=argocd_again, s3=s3, bucket=bucket, keep=3, now=at(day))
        assert out.suspect and "no Applications where" in out.suspect_reason
        index = _index(s3, bucket, out.url)
        assert index["suspect"] is True and index["suspect_reason"] == out.suspect_reason
        assert out.deleted == []
    assert all(_with_index(url) <= _keys(s3, bucket) for url in good), "the good archives survive"
    assert sum("suspect backup" in r.getMessage() for r in caplog.records) == 3
    assert "suspect" not in _index(s3, bucket, good[0]), "a healthy archive's index is unmarked"

    # restoring a suspect archive warns before anything else
    _, report = restore.restore(out.url, api_factory=FakeKube, s3=s3)
    assert report.startswith(
        f"suspect archive: {out.url} was marked suspect when it was written (no Applications"
    )


def test_once_keep_healthy_backups_follow_a_suspect_one_the_old_archives_expire(s3, bucket):
    big, small = seeded("argocd", apps=40), seeded("argocd", apps=0)
    old = backup_export.export_backup(api=big, s3=s3, bucket=bucket, keep=2, now=at(0)).url
    suspect = backup_export.export_backup(api=small, s3=s3, bucket=bucket, keep=2, now=at(1))
    assert suspect.suspect
    accepted = backup_export.export_backup(
        api=small, s3=s3, bucket=bucket, keep=2, now=at(2), accept_shrink=True
    )
    assert not accepted.suspect and old.split("/", 3)[3] in _keys(s3, bucket)
    last = backup_export.export_backup(api=small, s3=s3, bucket=bucket, keep=2, now=at(3))
    assert not last.suspect, "the accepted size is the yardstick now"
    assert set(last.deleted) == {old, suspect.url}


def test_the_retention_rule_is_pure_its_s3_side_apart() -> None:
    """retention.py holds the rule only: it imports no S3, kube or logging; retention_s3 does the I/O."""
    import ast
    from pathlib import Path

    source = Path(retention.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert not {m for m in imported if m.startswith(("steps.aws", "steps.kube", "boto", "logging"))}
    from steps.argocd_backup import retention_s3

    assert (
        callable(retention_s3.delete) and callable(retention_s3.listing) and callable(retention_s3.read_index)
    )

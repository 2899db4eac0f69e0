"""backup-export against moto's S3 server and a FAKE Kubernetes API served over HTTP.

The Kubernetes side is :mod:`tests.fakes.kube` — an in-memory fake of the narrow surface we use
(paged list, get, server-side apply), served on 127.0.0.1 so the real adapter
(:class:`steps.kube.KubernetesApi`, the official client loaded from a kubeconfig) does the
talking. A fake because no API server runs here and kmock 0.8 lacks paging, label selectors and
server-side apply. S3 is moto's real server (conditional puts, SSE headers, listing, deletes).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from botocore.exceptions import ClientError

from imagebump import __version__
from steps import archive, backup_export, kube
from steps.errors import ConfigError, PermissionDeniedError, TransientError
from tests.fakes.kube import SECRET_VALUES, FakeKube, FakeKubeServer, seeded

ROOT = Path(__file__).resolve().parents[2]
EXPECTED_COUNTS = {"ConfigMap": 7, "Secret": 7, "AppProject": 4, "ApplicationSet": 3, "Application": 60}
FROZEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def frozen(at: datetime = FROZEN):
    return lambda: at


@pytest.fixture()
def s3(moto):
    return moto.client("s3")


@pytest.fixture()
def bucket(s3) -> str:
    name = f"backups-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    return name


@pytest.fixture()
def argocd() -> FakeKube:
    return seeded("argocd", apps=60)


@pytest.fixture()
def kube_server(argocd: FakeKube) -> Iterator[FakeKubeServer]:
    with FakeKubeServer(argocd) as server:
        yield server


@pytest.fixture()
def kubeconfig(kube_server: FakeKubeServer, tmp_path: Path) -> Path:
    return kube_server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture()
def api(kubeconfig: Path) -> kube.KubernetesApi:
    return kube.KubernetesApi.from_config(kubeconfig=str(kubeconfig))


def _objects(s3, bucket: str, key: str) -> list[dict]:
    return list(yaml.safe_load_all(gzip.decompress(s3.get_object(Bucket=bucket, Key=key)["Body"].read())))


def _keys(s3, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def test_backup_writes_sanitised_archive_and_index(api, argocd, s3, bucket):
    out = backup_export.export_backup(api=api, s3=s3, bucket=bucket, cluster="prod-eu", now=frozen(),
                                      page_size=7)

    key = "argocd-backups/prod-eu/2026/01/02/030405Z.yaml.gz"
    assert out.url == f"s3://{bucket}/{key}"
    assert out.counts == EXPECTED_COUNTS
    assert out.deleted == []
    data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert archive.sha256(data) == out.sha256
    head = s3.head_object(Bucket=bucket, Key=key)
    assert head["ServerSideEncryption"] == "AES256"

    index = json.loads(s3.get_object(Bucket=bucket, Key="argocd-backups/prod-eu/2026/01/02/030405Z.index.json")
                       ["Body"].read())
    assert index == {
        "format": archive.FORMAT, "archive": "030405Z.yaml.gz", "sha256": out.sha256, "size": len(data),
        "counts": EXPECTED_COUNTS, "created": "2026-01-02T03:04:05Z", "cluster": "prod-eu",
        "namespace": "argocd", "tool": "imagebump", "version": __version__,
    }

    docs = _objects(s3, bucket, key)
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == sorted(
        ((d["kind"], d["metadata"]["name"]) for d in docs), key=lambda kn: (list(kube.RESOURCES).index(kn[0]), kn[1]))
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("Secret", "argocd-redis") not in names, "unlabelled secrets are not Argo CD configuration"
    assert ("Secret", "weird") not in names, "unknown secret-type label values are not taken"
    assert ("ConfigMap", "unrelated-cm") not in names
    assert {n for k, n in names if k == "ConfigMap"} == set(archive.CONFIG_MAPS)
    assert {n for k, n in names if k == "Secret"} == {f"{t}-one" for t in archive.SECRET_TYPES} | set(
        archive.NAMED_SECRETS)
    for doc in docs:
        meta = doc["metadata"]
        assert "status" not in doc and "operation" not in doc
        assert not set(meta) & {"uid", "resourceVersion", "managedFields", "creationTimestamp", "generation",
                                "selfLink", "ownerReferences"}, meta
        assert archive.LAST_APPLIED not in meta.get("annotations", {})
    app = next(d for d in docs if d["metadata"]["name"] == "app-000")
    assert app["metadata"]["finalizers"] == ["resources-finalizer.argocd.argoproj.io"]
    assert app["metadata"]["annotations"] == {"notifications.argoproj.io/subscribe.on-sync-failed.slack": "alerts"}

    # Lists are paged: 60 Applications in pages of 7 means 9 list calls following continue tokens.
    app_lists = [c for c in argocd.calls if c[:2] == ("list", "applications")]
    assert len(app_lists) == 9
    assert app_lists[0][3]["continue"] is None and all(c[3]["continue"] for c in app_lists[1:])
    secret_lists = [c for c in argocd.calls if c[:2] == ("list", "secrets")]
    assert secret_lists[0][3]["labelSelector"] == (
        "argocd.argoproj.io/secret-type in (repository,repo-creds,cluster,repo-write,repo-write-creds)")


def test_archive_bytes_are_deterministic(api, s3, bucket):
    first = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())
    second = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())
    assert first.sha256 == second.sha256, "same state → same bytes, whatever the paging or time"


def test_kms_key_is_used_when_given(api, s3, bucket, moto):
    key_id = moto.client("kms").create_key(Description="argocd backups")["KeyMetadata"]["KeyId"]
    out = backup_export.export_backup(api=api, s3=s3, bucket=bucket, kms_key_id=key_id, now=frozen())
    for key in (out.url.split("/", 3)[3], out.index_url.split("/", 3)[3]):
        head = s3.head_object(Bucket=bucket, Key=key)
        assert head["ServerSideEncryption"] == "aws:kms"
        assert key_id in head["SSEKMSKeyId"]


def test_moto_refuses_a_conditional_put_over_an_existing_key(s3, bucket):
    """The never-overwrite guarantee rests on S3's If-None-Match; prove moto enforces it too."""
    s3.put_object(Bucket=bucket, Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket=bucket, Key="k", Body=b"2", IfNoneMatch="*")
    assert info.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"1"


def test_second_backup_in_the_same_second_does_not_overwrite_the_first(api, argocd, s3, bucket):
    first = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())
    argocd.seed({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                 "metadata": {"name": "late-app", "namespace": "argocd"}, "spec": {"project": "default"}})
    second = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())
    third = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())

    base = f"s3://{bucket}/argocd-backups/in-cluster/2026/01/02/030405Z"
    assert [first.url, second.url, third.url] == [f"{base}.yaml.gz", f"{base}-1.yaml.gz", f"{base}-2.yaml.gz"]
    assert first.counts["Application"] == 60 and second.counts["Application"] == 61
    first_key = first.url.split("/", 3)[3]
    assert archive.sha256(s3.get_object(Bucket=bucket, Key=first_key)["Body"].read()) == first.sha256
    assert len(_objects(s3, bucket, first_key)) == 81
    index_1 = json.loads(s3.get_object(Bucket=bucket, Key=second.index_url.split("/", 3)[3])["Body"].read())
    assert index_1["sha256"] == second.sha256 and index_1["archive"] == "030405Z-1.yaml.gz"


def test_retention_keeps_the_newest_n_and_their_indexes(api, s3, bucket):
    urls = [
        backup_export.export_backup(api=api, s3=s3, bucket=bucket, keep=0,
                                    now=frozen(datetime(2026, 1, day, 3, 0, 0, tzinfo=timezone.utc))).url
        for day in (1, 2, 3, 4)
    ]
    out = backup_export.export_backup(api=api, s3=s3, bucket=bucket, keep=2,
                                      now=frozen(datetime(2026, 1, 5, 3, 0, 0, tzinfo=timezone.utc)))
    assert out.deleted == urls[:3]
    keys = _keys(s3, bucket)
    assert keys == [
        "argocd-backups/in-cluster/2026/01/04/030000Z.index.json",
        "argocd-backups/in-cluster/2026/01/04/030000Z.yaml.gz",
        "argocd-backups/in-cluster/2026/01/05/030000Z.index.json",
        "argocd-backups/in-cluster/2026/01/05/030000Z.yaml.gz",
    ]


def test_retention_never_deletes_the_archive_just_written(api, s3, bucket):
    """A clock that went backwards makes the new archive the 'oldest'; it still stays."""
    later = backup_export.export_backup(api=api, s3=s3, bucket=bucket,
                                        now=frozen(datetime(2026, 3, 1, tzinfo=timezone.utc)))
    out = backup_export.export_backup(api=api, s3=s3, bucket=bucket, keep=1,
                                      now=frozen(datetime(2026, 1, 1, tzinfo=timezone.utc)))
    assert out.deleted == []
    assert {later.url.split("/", 3)[3], out.url.split("/", 3)[3]} <= set(_keys(s3, bucket))


def test_retention_leaves_other_clusters_alone(api, s3, bucket):
    other = backup_export.export_backup(api=api, s3=s3, bucket=bucket, cluster="other", now=frozen())
    backup_export.export_backup(api=api, s3=s3, bucket=bucket, keep=1,
                                now=frozen(datetime(2026, 2, 1, tzinfo=timezone.utc)))
    assert other.url.split("/", 3)[3] in _keys(s3, bucket)


NOW = datetime(2026, 1, 31, 12, 0, 0, tzinfo=timezone.utc)
KEYS = [f"p/c/2026/01/{d:02d}/120000Z.yaml.gz" for d in (1, 10, 20, 30)] + [
    "p/c/2026/01/30/120000Z-1.yaml.gz", "p/c/2026/01/30/120000Z-2.yaml.gz", "p/c/notes.txt",
    "p/c/2026/01/30/120000Z.index.json"]


@pytest.mark.parametrize(
    ("keep", "keep_days", "protect", "expected"),
    [
        pytest.param(0, 0, "", [], id="both-off-keeps-all"),
        pytest.param(2, 0, "", KEYS[:4], id="count-orders-same-second-by-suffix"),
        pytest.param(0, 15, "", KEYS[:2], id="days-only"),
        pytest.param(1, 15, "", KEYS[:2], id="either-rule-keeps"),
        pytest.param(1, 0, KEYS[0], KEYS[1:5], id="protected-is-never-expired"),
    ],
)
def test_select_expired(keep, keep_days, protect, expected):
    got = backup_export.select_expired(KEYS, keep=keep, keep_days=keep_days, now=NOW, protect=protect)
    assert sorted(got) == sorted(expected)


def test_secret_values_never_in_logs_or_outputs(api, s3, bucket, caplog, outputs_dir):
    caplog.set_level(logging.DEBUG)
    out = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())
    text = caplog.text + out.model_dump_json()
    assert "wrote s3://" in caplog.text
    for value in SECRET_VALUES:
        assert value not in text
    # ...but they are in the (encrypted) archive, or a restore would be useless.
    raw = gzip.decompress(s3.get_object(Bucket=bucket, Key=out.url.split("/", 3)[3])["Body"].read()).decode()
    assert SECRET_VALUES[7] in raw  # stringData is kept as is


def test_forbidden_list_names_verb_resource_namespace_and_grantee(api, argocd, s3, bucket):
    argocd.forbid("list", "secrets")
    with pytest.raises(PermissionDeniedError) as info:
        backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())
    assert str(info.value) == (
        "cannot list secrets in namespace argocd: forbidden; grant get/list on secrets in namespace argocd "
        "to 'system:serviceaccount:argocd:imagebump' (a Role + RoleBinding)")
    assert _keys(s3, bucket) == [], "nothing written when the export is incomplete"


def test_forbidden_custom_resource_names_its_group(api, argocd, s3, bucket):
    argocd.forbid("list", "applicationsets")
    with pytest.raises(PermissionDeniedError, match=r"cannot list applicationsets\.argoproj\.io in namespace argocd"):
        backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())


def test_missing_bucket_is_named(api, s3):
    with pytest.raises(ConfigError, match=r"bucket 'no-such-bucket-f6' does not exist \(NoSuchBucket\)"):
        backup_export.export_backup(api=api, s3=s3, bucket="no-such-bucket-f6", now=frozen())


def _client_error(code: str, message: str = "", status: int = 400) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")


@pytest.mark.parametrize(
    ("error", "kms", "kind", "text"),
    [
        pytest.param(_client_error("NoSuchBucket", status=404), "", ConfigError, "bucket 'b' does not exist",
                     id="no-bucket"),
        pytest.param(_client_error("AccessDenied", "Access Denied", 403), "", PermissionDeniedError,
                     "grant s3:PutObject on bucket 'b'", id="access-denied"),
        pytest.param(_client_error("KMS.NotFoundException", "Invalid keyId k1"), "k1", PermissionDeniedError,
                     "KMS key 'k1' is not usable (KMS.NotFoundException)", id="kms-not-found"),
        pytest.param(_client_error("AccessDenied", "User is not authorized to perform kms:GenerateDataKey", 403),
                     "k1", PermissionDeniedError, "KMS key 'k1' is not usable", id="kms-access-denied"),
        pytest.param(_client_error("SlowDown", status=503), "", TransientError, "retry later", id="slow-down"),
    ],
)
def test_s3_errors_name_bucket_or_key(error, kms, kind, text):
    exc = backup_export.s3_error(error, bucket="b", key="x/y.yaml.gz", action="write", kms_key_id=kms)
    assert type(exc) is kind
    assert text in str(exc)


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        pytest.param({"bucket": "B!"}, "not a valid S3 bucket name", id="bucket"),
        pytest.param({"namespace": "Argo CD"}, "not a valid Kubernetes namespace", id="namespace"),
        pytest.param({"cluster": "../x"}, "cluster '../x' is not a usable", id="cluster-escape"),
        pytest.param({"keep": -1}, "must be 0 (off) or positive", id="keep"),
    ],
)
def test_bad_input_is_refused_before_any_io(kwargs, text):
    params = {"bucket": "ok-bucket", **kwargs}
    with pytest.raises(ConfigError, match=text.replace("(", r"\(").replace(")", r"\)")):
        backup_export.export_backup(api=None, s3=None, **params)  # type: ignore[arg-type]


def test_runs_under_heras_runner(kubeconfig, moto, bucket, tmp_path):
    """The step as its pod runs it: `python -m hera.workflows.runner -e steps.backup_export:run`."""
    args = tmp_path / "args.json"
    args.write_text(json.dumps([
        {"name": "bucket", "value": bucket}, {"name": "prefix", "value": "argocd-backups"},
        {"name": "cluster", "value": "ci"}, {"name": "namespace", "value": "argocd"},
        {"name": "kms_key_id", "value": ""}, {"name": "keep", "value": "30"}, {"name": "keep_days", "value": "0"},
    ]))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "AWS_PROFILE"))}
    env.update(PYTHONPATH=str(ROOT), KUBECONFIG=str(kubeconfig), AWS_ENDPOINT_URL=moto.endpoint_url,
               AWS_REGION="us-west-2", hera__outputs_directory=str(tmp_path / "out"))
    proc = subprocess.run([sys.executable, "-m", "hera.workflows.runner", "-e", "steps.backup_export:run",
                           str(args)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    params = tmp_path / "out" / "parameters"
    url = (params / "url").read_text()
    assert url.startswith(f"s3://{bucket}/argocd-backups/ci/") and url.endswith("Z.yaml.gz")
    assert json.loads((params / "counts").read_text()) == EXPECTED_COUNTS
    assert json.loads((params / "deleted").read_text()) == []
    assert len((params / "sha256").read_text()) == 64
    for value in SECRET_VALUES:
        assert value not in proc.stdout + proc.stderr


def test_step_exit_code_on_forbidden(kubeconfig, argocd, moto, bucket, monkeypatch, outputs_dir, capsys):
    argocd.forbid("get", "configmaps")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    with pytest.raises(SystemExit) as info:
        backup_export.run(bucket=bucket)
    assert info.value.code == 2
    assert "cannot get configmaps 'argocd-cm' in namespace argocd: forbidden" in capsys.readouterr().err

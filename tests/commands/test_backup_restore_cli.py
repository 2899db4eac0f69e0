"""``imagebump backup`` and ``imagebump restore`` through ``imagebump.cli.main``.

Kubernetes is the FAKE API server of :mod:`tests.fakes.kube` (no real one runs here; kmock 0.8
lacks paging, selectors and server-side apply), reached through a kubeconfig and ``--context``
exactly as on a workstation; S3 is moto's server through boto3's own ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagebump.cli import main
from tests.fakes.kube import BACKED_UP_SECRETS, SECRET_VALUES, FakeKube, FakeKubeServer, seeded

TOTAL = 7 + len(BACKED_UP_SECRETS) + 4 + 3 + 55


@pytest.fixture()
def source() -> Iterator[FakeKubeServer]:
    with FakeKubeServer(seeded("argocd", apps=55)) as server:
        yield server


@pytest.fixture()
def target() -> Iterator[FakeKubeServer]:
    with FakeKubeServer(FakeKube()) as server:
        yield server


@pytest.fixture()
def env(moto, monkeypatch, tmp_path, source, target) -> Path:
    """KUBECONFIG with two contexts' files (source, target) and boto3 pointed at moto."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    a = source.write_kubeconfig(tmp_path / "kc-source", context="source")
    b = target.write_kubeconfig(tmp_path / "kc-target", context="target")
    monkeypatch.setenv("KUBECONFIG", f"{a}:{b}")
    return tmp_path


@pytest.fixture()
def bucket(moto) -> str:
    name = f"cli-{uuid.uuid4().hex[:12]}"
    moto.client("s3").create_bucket(
        Bucket=name, CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )
    return name


def _no_secrets(text: str) -> None:
    for value in SECRET_VALUES:
        assert value not in text


def test_backup_then_restore_dry_run_and_apply(env, bucket, source, target, capsys):
    assert (
        main(["backup", "--bucket", bucket, "--cluster", "prod", "--context", "source", "--keep", "5"]) == 0
    )
    out = capsys.readouterr()
    _no_secrets(out.out + out.err)
    lines = out.out.splitlines()
    url = lines[0].removeprefix("wrote ")
    assert url.startswith(f"s3://{bucket}/argocd-backups/prod/") and url.endswith("Z.yaml.gz")
    assert (
        f"counts ConfigMap=7, Secret={len(BACKED_UP_SECRETS)}, AppProject=4, ApplicationSet=3, Application=55"
        in lines
    )

    assert main(["restore", "--from", url, "--context", "target", "--namespace", "argocd-dr"]) == 0
    out = capsys.readouterr()
    _no_secrets(out.out + out.err)
    assert "would create  Secret/repository-one -n argocd-dr" in out.out
    assert out.out.rstrip().endswith(
        f"dry run: {TOTAL} to create, 0 to change, 0 unchanged in namespace argocd-dr; pass --apply to apply"
    )
    assert target.fake.in_namespace("argocd-dr") == []

    assert main(["restore", "--from", url, "--context", "target", "--namespace", "argocd-dr", "--apply"]) == 0
    out = capsys.readouterr()
    _no_secrets(out.out + out.err)
    assert f"applied: {TOTAL} created, 0 changed, 0 unchanged in namespace argocd-dr" in out.out
    assert len(target.fake.in_namespace("argocd-dr")) == TOTAL
    assert source.fake.calls and not source.fake.writes()

    # Later: an Application appears that the backup does not hold. --prune lists it; --apply deletes it.
    target.fake.seed(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {
                "name": "late",
                "namespace": "argocd-dr",
                "finalizers": ["resources-finalizer.argocd.argoproj.io"],
            },
            "spec": {"project": "default"},
        }
    )
    argv = ["restore", "--from", url, "--context", "target", "--namespace", "argocd-dr", "--prune"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "would delete  Application/late -n argocd-dr" in out
    assert target.fake.stored("Application", "argocd-dr", "late") is not None
    assert main([*argv, "--apply"]) == 0
    assert (
        f"applied: 0 created, 0 changed, {TOTAL} unchanged, 1 deleted in namespace argocd-dr"
        in capsys.readouterr().out
    )
    assert target.fake.stored("Application", "argocd-dr", "late") is None and target.fake.cascaded == []


def test_restore_refuses_a_corrupt_file(env, target, capsys):
    path = env / "bad.yaml.gz"
    path.write_bytes(b"\x1f\x8b garbage")
    assert main(["restore", "--from", str(path), "--context", "target", "--apply", "--no-verify"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"imagebump restore: error: archive {path} is corrupt: not a readable gzip file")
    assert target.fake.calls == []


def test_restore_takes_a_plain_argocd_export_file(env, target, capsys):
    path = env / "export.yaml"
    path.write_text(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: one\n"
        "spec:\n  project: default\noperation:\n  sync:\n    revision: abc\n---\n"
    )
    assert main(["restore", "--from", str(path), "--context", "target", "--apply"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"unverified: {path} is a plain `argocd admin export` file")
    assert "operation" not in target.fake.stored("Application", "argocd", "one")


def test_restore_refuses_a_bad_namespace(env, capsys):
    path = env / "export.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\n")
    assert main(["restore", "--from", str(path), "--namespace", "Not_A_Namespace"]) == 2
    assert "namespace 'Not_A_Namespace' is not a valid Kubernetes namespace name" in capsys.readouterr().err


def test_restore_without_index_hints_no_verify(env, capsys):
    path = env / "lone.yaml.gz"
    path.write_bytes(b"whatever")
    assert main(["restore", "--from", str(path)]) == 2
    assert "pass --no-verify" in capsys.readouterr().err


def test_backup_forbidden_is_a_clear_message(env, bucket, source, capsys):
    source.fake.forbid("list", "secrets")
    assert main(["backup", "--bucket", bucket, "--context", "source"]) == 2
    err = capsys.readouterr().err
    assert (
        "imagebump backup: error: cannot list secrets in namespace argocd: forbidden; grant get/list" in err
    )


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        pytest.param(
            ["backup", "--bucket", "no-such-bucket-cli", "--context", "source"],
            "bucket 'no-such-bucket-cli' does not exist (NoSuchBucket)",
            id="missing-bucket",
        ),
        pytest.param(
            ["backup", "--bucket", "b-ok", "--context", "source", "--profile", "nope-profile"],
            "AWS profile 'nope-profile' not found",
            id="missing-profile",
        ),
        pytest.param(
            ["backup", "--bucket", "b-ok", "--context", "missing"], "context 'missing'", id="missing-context"
        ),
        pytest.param(
            ["restore", "--from", "s3://only-bucket"], "is not an s3://BUCKET/KEY URL", id="bad-url"
        ),
    ],
)
def test_bad_input_exits_2_with_a_message(env, argv, text, capsys):
    assert main(argv) == 2
    assert text in capsys.readouterr().err

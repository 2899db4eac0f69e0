"""``imagebump backup`` and ``imagebump restore`` through ``imagebump.cli.main``.

Kubernetes is the FAKE API server of :mod:`tests.fakes.kube` (no real one runs here; kmock 0.8
lacks paging, selectors and server-side apply), reached through a kubeconfig and ``--context``
exactly as on a workstation; S3 is moto's server through boto3's own ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import json
import socket
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


# --- contexts --------------------------------------------------------------------------------------
def test_a_missing_context_is_named_with_the_contexts_that_exist(env, bucket, capsys):
    assert main(["backup", "--bucket", bucket, "--context", "prod-eu"]) == 2
    err = capsys.readouterr().err
    assert "context 'prod-eu' is not in the kubeconfig" in err
    assert "its contexts: source, target" in err


def test_an_unreachable_api_server_names_the_server_it_tried(env, bucket, monkeypatch, capsys):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = env / "kc-dead"
    dead.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: dead\n"
        f"clusters: [{{name: dead, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: dead, user: {token: t}}]\ncontexts: [{name: dead, context: {cluster: dead, user: dead}}]\n"
    )
    monkeypatch.setenv("KUBECONFIG", str(dead))
    assert main(["backup", "--bucket", bucket, "--context", "dead"]) == 75
    err = capsys.readouterr().err
    assert f"API server unreachable: tried http://127.0.0.1:{port} (context dead)" in err


def test_a_backup_of_a_context_without_argo_cd_writes_nothing(env, bucket, moto, capsys):
    assert main(["backup", "--bucket", bucket, "--context", "target"]) == 2
    err = capsys.readouterr().err
    assert (
        "found no Argo CD to back up in namespace argocd of context target (server http://127.0.0.1:" in err
    )
    assert "ConfigMap argocd-cm and Secret argocd-secret are missing; nothing was written" in err
    assert moto.client("s3").list_objects_v2(Bucket=bucket).get("KeyCount") == 0


# --- a restore that fails part-way -------------------------------------------------------------------
@pytest.mark.parametrize(("code", "exit_code"), [(503, 75), (422, 2)])
def test_restore_apply_prints_each_write_and_a_failure_says_how_to_finish(
    env, bucket, source, target, capsys, code, exit_code
):
    assert main(["backup", "--bucket", bucket, "--context", "source"]) == 0
    url = capsys.readouterr().out.splitlines()[0].removeprefix("wrote ")
    argv = ["restore", "--from", url, "--context", "target", "--apply"]
    target.fake.fail_write(3, code)
    assert main(argv) == exit_code
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        "created ConfigMap/argocd-cm -n argocd",
        "created ConfigMap/argocd-cmd-params-cm -n argocd",
    ]
    assert (
        f"imagebump restore: error: 2 of {TOTAL} writes done; re-run the same command to finish. " in out.err
    )
    assert "Could not create ConfigMap/argocd-gpg-keys-cm -n argocd:" in out.err

    assert main(argv) == 0
    out = capsys.readouterr().out
    assert sum(line.startswith("created ") for line in out.splitlines()) == TOTAL - 2
    assert main(["restore", "--from", url, "--context", "target"]) == 0
    assert f"dry run: 0 to create, 0 to change, {TOTAL} unchanged" in capsys.readouterr().out


# --- logging -------------------------------------------------------------------------------------------
def _records(err: str) -> list[dict]:
    return [json.loads(line) for line in err.splitlines()]  # every line is one JSON object


@pytest.mark.parametrize("where", ["before", "after"])
def test_log_format_json_logs_as_the_steps_do(env, bucket, capsys, where):
    backup = ["backup", "--bucket", bucket, "--context", "source", "--keep", "1"]
    argv = ["--log-format", "json", *backup] if where == "before" else [*backup, "--log-format", "json"]
    assert main(argv) == 0
    assert main(argv) == 0
    out = capsys.readouterr()
    _no_secrets(out.out + out.err)
    records = _records(out.err)
    wrote = [r for r in records if r["message"].startswith("wrote s3://")]
    assert len(wrote) == 2
    assert {k: wrote[0][k] for k in ("level", "component", "command", "logger")} == {
        "level": "info",
        "component": "cli",
        "command": "backup",
        "logger": "steps.argocd_backup.export",
    }
    assert wrote[0]["ts"].endswith("Z")
    assert any(r["message"].startswith("retention: deleted s3://") for r in records)


def test_log_format_text_is_human_readable_and_loses_no_info(env, bucket, capsys):
    argv = ["backup", "--bucket", bucket, "--context", "source", "--keep", "1"]
    assert main(argv) == 0 and main(argv) == 0
    err = capsys.readouterr().err
    assert f"imagebump backup: info: wrote s3://{bucket}/argocd-backups/in-cluster/" in err
    assert f"imagebump backup: info: retention: deleted s3://{bucket}/" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["backup", "--bucket", "b-ok", "--context", "nope"],
        ["restore", "--from", "s3://only-bucket"],
        ["reconcile", "--rules", "/nonexistent/rules.yaml"],
        ["set-image", "/nonexistent/kustomization.yaml", "app=repo:1.2.3"],
    ],
    ids=["backup", "restore", "reconcile", "set-image"],
)
def test_log_format_json_errors_are_json_records_too(env, argv, capsys):
    assert main(["--log-format", "json", *argv]) == 2
    records = _records(capsys.readouterr().err)
    assert records[-1]["level"] == "error" and records[-1]["exit_code"] == 2
    assert records[-1]["command"] == argv[0]

"""edit-kustomize against a real ``git http-backend`` remote and moto's ECR — no fakes.

In-process calls use ``run.__wrapped__`` where a test wants the exception itself (the step wrapper
turns our errors into an exit code); one test runs the step through Hera's runner as a pod would.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from imagebump.local import builders
from steps.domain.errors import (
    ConfigError,
    ImageNotFoundError,
    KustomizationError,
    PermissionDeniedError,
)
from steps.domain.models import Target
from steps.edit_kustomize.step import EditKustomizeOutput, run
from tests.fixtures import ecr_clock

ROOT = Path(__file__).resolve().parents[3]
ACCOUNT = "123456789012"  # moto's default account
REGION = "us-west-2"
OVERLAY = "apps/api/overlays/prod"
DIGEST_1 = "sha256:" + "1" * 64
DIGEST_2 = "sha256:" + "2" * 64

plan_step = run.__wrapped__  # the bare step: raises our errors instead of exiting


def _image(repository: str = "team/api") -> str:
    return f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/{repository}"


def _kustomization(*entries: dict[str, str | None]) -> str:
    return builders.kustomization(entries)


def _entry(name: str, tag: str | None = "v1", digest: str | None = None, new_name: str | None = None) -> dict:
    return {"name": name, "newName": new_name, "newTag": tag, "digest": digest}


def _files(text: str, name: str = "kustomization.yaml", overlay: str = OVERLAY) -> dict[str, str]:
    return {
        "README.md": "# gitops\n",
        f"{overlay}/{name}": text,
        "apps/api/base/deployment.yaml": "kind: Deployment\n",
        "apps/web/overlays/prod/kustomization.yaml": _kustomization(_entry("web")),
    }


def _target(
    remote, *, image: str | None = None, tag: str | None = "v2", path: str = OVERLAY, **extra
) -> Target:
    fields = {"order": "none", **extra}
    return Target(
        rule=0,
        repo_url=remote.url if remote else "http://127.0.0.1:9/o/r",
        path=path,
        env="prod",
        image=image or _image(),
        tag=tag,
        **fields,
    )


@pytest.fixture(autouse=True)
def _env(git_env, outputs_dir, monkeypatch, moto):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    monkeypatch.setenv("AWS_REGION", REGION)


# --- decisions ----------------------------------------------------------------------------------


def test_update_plans_the_edit_and_writes_outputs(make_remote, outputs_dir) -> None:
    remote = make_remote(_files(_kustomization(_entry(_image(), "v1"))))
    out = run(_target(remote, tag="v2", event_id="e-1"))
    assert isinstance(out, EditKustomizeOutput)
    plan = out.plan
    assert (out.changed, out.decision) == (True, "update")
    assert plan.file == f"{OVERLAY}/kustomization.yaml"
    assert plan.image_name == _image()
    assert (plan.old.newTag, plan.new.newTag, plan.new.digest) == ("v1", "v2", None)
    assert plan.base_commit == remote.rev("main") and plan.base_branch == "main"
    params = outputs_dir / "parameters"
    assert (params / "changed").read_text() == "true"
    assert (params / "decision").read_text() == "update"
    assert json.loads((params / "plan").read_text())["new"]["newTag"] == "v2"
    assert remote.log() == ["initial commit"]  # pushes nothing


def test_current_when_the_overlay_already_holds_the_image(make_remote, outputs_dir) -> None:
    remote = make_remote(_files(_kustomization(_entry(_image(), "v2"))))
    out = run(_target(remote, tag="v2"))
    assert (out.changed, out.decision) == (False, "current")
    assert "already" in out.reason
    assert (outputs_dir / "parameters" / "changed").read_text() == "false"


def test_entry_found_by_new_name_and_explicit_image_name(make_remote) -> None:
    text = _kustomization(_entry("web", "w1"), _entry("api", "v1", new_name=_image()))
    remote = make_remote(_files(text))
    by_new_name = plan_step(_target(remote))
    assert by_new_name.plan.image_name == "api"
    assert by_new_name.plan.new.newName == _image()
    explicit = plan_step(_target(remote, image_name="web"))
    assert explicit.plan.image_name == "web" and explicit.plan.old.newTag == "w1"


@pytest.mark.parametrize(
    ("old_digest", "tag", "digest", "write_digest", "new_tag", "new_digest", "changed"),
    [
        pytest.param(DIGEST_1, "v2", DIGEST_2, False, "v2", None, True, id="tag-alone-drops-digest"),
        pytest.param(None, "v2", DIGEST_2, True, "v2", DIGEST_2, True, id="write-digest"),
        pytest.param(None, None, DIGEST_2, False, None, DIGEST_2, True, id="digest-only-push"),
        pytest.param(None, "v1", DIGEST_2, False, "v1", None, False, id="same-tag-without-digest-is-current"),
        pytest.param(None, "v1", DIGEST_2, True, "v1", DIGEST_2, True, id="same-tag-pins-digest"),
    ],
)
def test_new_entry_follows_setter_semantics(
    make_remote, old_digest, tag, digest, write_digest, new_tag, new_digest, changed
) -> None:
    remote = make_remote(_files(_kustomization(_entry(_image(), "v1", old_digest))))
    out = plan_step(_target(remote, tag=tag, digest=digest, write_digest=write_digest))
    assert (out.plan.new.newTag, out.plan.new.digest) == (new_tag, new_digest)
    assert out.changed is changed


@pytest.mark.parametrize("name", ["kustomization.yaml", "kustomization.yml", "Kustomization"])
def test_kustomization_file_names(make_remote, name) -> None:
    remote = make_remote(_files(_kustomization(_entry(_image())), name=name))
    out = plan_step(_target(remote))
    assert out.plan.file == f"{OVERLAY}/{name}"
    assert out.changed


def test_overlay_at_repository_root(make_remote) -> None:
    remote = make_remote({"kustomization.yaml": _kustomization(_entry(_image())), "other/x.yaml": "x: 1\n"})
    out = plan_step(_target(remote, path=""))
    assert out.plan.file == "kustomization.yaml" and out.changed


def test_base_branch_default_and_explicit(make_remote) -> None:
    remote = make_remote(_files(_kustomization(_entry(_image()))), branch="trunk")
    assert plan_step(_target(remote)).plan.base_branch == "trunk"
    release = remote.commit_files(
        {f"{OVERLAY}/kustomization.yaml": _kustomization(_entry(_image(), "v2"))}, branch="release"
    )
    out = plan_step(_target(remote, base_branch="release"))
    assert (out.plan.base_branch, out.plan.base_commit, out.decision) == ("release", release, "current")


# --- order by ECR push time (moto) --------------------------------------------------------------


def _ecr_push(moto, repository: str, tag: str) -> str:
    digest = builders.digest_for(f"{repository}:{tag}:{secrets.token_hex(8)}")
    moto.client("ecr").put_image(
        repositoryName=repository,
        imageManifest=builders.image_manifest(digest),
        imageTag=tag,
        imageDigest=digest,
    )
    return digest


@pytest.fixture()
def ecr_repository(moto) -> str:
    name = f"team/api-{secrets.token_hex(4)}"
    moto.client("ecr").create_repository(repositoryName=name)
    return name


@pytest.mark.parametrize(
    ("pushed_at_offset", "current_in_ecr", "decision"),
    [
        pytest.param(timedelta(days=-365), True, "stale", id="older-push-is-stale"),
        pytest.param(timedelta(days=1), True, "update", id="newer-push-updates"),
        pytest.param(timedelta(days=-365), False, "update", id="current-unknown-to-ecr-updates"),
    ],
)
def test_push_time_order_from_ecr(
    make_remote, moto, ecr_repository, pushed_at_offset, current_in_ecr, decision
) -> None:
    image = _image(ecr_repository)
    if current_in_ecr:
        _ecr_push(moto, ecr_repository, "v1")
    remote = make_remote(_files(_kustomization(_entry("api", "v1", new_name=image))))
    pushed_at = datetime.now(UTC) + pushed_at_offset
    out = plan_step(_target(remote, image=image, tag="v2", order="push-time", pushed_at=pushed_at))
    assert out.decision == decision, out.reason
    assert out.changed is (decision == "update")
    if decision == "stale":
        assert "v1" in out.reason and "v2" in out.reason


def test_push_time_of_the_new_image_is_looked_up_when_missing(make_remote, moto, ecr_repository) -> None:
    image = _image(ecr_repository)
    _ecr_push(moto, ecr_repository, "v1")
    digest = _ecr_push(moto, ecr_repository, "v2")
    remote = make_remote(_files(_kustomization(_entry(image, "v1"))))
    out = plan_step(_target(remote, image=image, tag="v2", digest=digest, order="push-time"))
    assert out.decision == "update" and "unknown" not in out.reason, out.reason


@pytest.mark.parametrize("newer", [True, False], ids=["newer-push", "older-push"])
def test_push_time_carried_in_the_target_gives_the_plan_asking_ecr_gives(
    make_remote, moto, ecr_repository, monkeypatch, newer
) -> None:
    """resolve-image's answer (push time, digest) travelling in the target and edit-kustomize asking
    ECR for it give the same plan; either way the step builds one ECR client, however many lookups."""
    from steps.aws import ecr

    image = _image(ecr_repository)
    if newer:
        _ecr_push(moto, ecr_repository, "v1")
        digest = _ecr_push(moto, ecr_repository, "v2")
    else:
        digest = _ecr_push(moto, ecr_repository, "v2")
        ecr_clock.advance()  # ECR push times have a second's resolution
        _ecr_push(moto, ecr_repository, "v1")
    remote = make_remote(_files(_kustomization(_entry(image, "v1"))))
    pushed_at = ecr.describe_image(ecr_repository, region=REGION, digest=digest).pushed_at
    clients = []
    real = ecr.make_client
    monkeypatch.setattr(ecr, "make_client", lambda region: clients.append(region) or real(region))
    carried = plan_step(_target(remote, image=image, digest=digest, order="push-time", pushed_at=pushed_at))
    assert clients == [REGION]  # the overlay's current image: one client, one call
    clients.clear()
    asked = plan_step(_target(remote, image=image, digest=digest, order="push-time"))
    assert clients == [REGION]  # the current image and the new one: still one client
    assert carried == asked
    assert carried.decision == ("update" if newer else "stale"), carried.reason


def test_an_entry_pinned_to_another_registry_is_never_rewritten(make_remote, ecr_repository) -> None:
    """Issue 23: an entry whose newName names another repository renders an image nobody pushed if
    its tag is rewritten; it is ``pinned`` (it used to be an update: "unknown push time")."""
    image = _image(ecr_repository)
    remote = make_remote(_files(_kustomization(_entry(image, "v1", new_name="ghcr.io/other/api"))))
    out = plan_step(
        _target(
            remote,
            image=image,
            image_name=image,
            order="push-time",
            pushed_at=datetime(2000, 1, 1, tzinfo=UTC),
        )
    )
    assert (out.decision, out.changed) == ("pinned", False)
    assert "ghcr.io/other/api:v1" in out.reason


# --- errors -------------------------------------------------------------------------------------


def test_image_not_in_file(make_remote) -> None:
    remote = make_remote(_files(_kustomization(_entry("web"), _entry("worker"))))
    with pytest.raises(ImageNotFoundError) as info:
        plan_step(_target(remote))
    assert info.value.found == ["web", "worker"]
    message = str(info.value)
    assert (
        f"{OVERLAY}/kustomization.yaml" in message
        and "web, worker" in message
        and "add it under images:" in message
    )


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        pytest.param(
            {f"{OVERLAY}/deployment.yaml": "kind: Deployment\n"}, "no-kustomization", id="no-kustomization"
        ),
        pytest.param(
            {f"{OVERLAY}/kustomization.yaml": "images: [\n", f"{OVERLAY}/x": ""},
            "invalid-yaml",
            id="bad-yaml",
        ),
        pytest.param(
            {f"{OVERLAY}/kustomization.yaml": "a: 1\n", f"{OVERLAY}/kustomization.yml": "a: 1\n"},
            "multiple-kustomizations",
            id="several-kustomizations",
        ),
    ],
)
def test_kustomization_problems(make_remote, files, reason) -> None:
    remote = make_remote(files)
    with pytest.raises(KustomizationError) as info:
        plan_step(_target(remote))
    assert info.value.reason == reason
    assert OVERLAY in str(info.value)  # the overlay to fix, named as the repository names it
    assert "edit-kustomize-" not in str(info.value)  # no scratch paths in messages


def test_a_missing_overlay_directory_names_the_rule_to_fix(make_remote) -> None:
    remote = make_remote({"README.md": "x\n"})
    with pytest.raises(KustomizationError, match="does not exist") as info:
        plan_step(_target(remote))
    assert "edit-kustomize-" not in str(info.value)  # no scratch paths in messages


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("../outside", id="dot-dot"),
        pytest.param("apps/../../outside", id="nested-dot-dot"),
        pytest.param("/etc", id="absolute"),
    ],
)
def test_path_escapes_are_refused_before_any_io(path) -> None:
    # the URL points at a closed port: refusing must not need the network
    with pytest.raises(ConfigError, match="relative|'..'"):
        plan_step(_target(None, path=path))


@pytest.mark.parametrize(
    ("symlinks", "path"),
    [
        pytest.param({OVERLAY: "../../../../../../../etc"}, OVERLAY, id="overlay-dir-symlink"),
        pytest.param({f"{OVERLAY}/kustomization.yaml": "/etc/hostname"}, OVERLAY, id="kustomization-symlink"),
    ],
)
def test_symlink_escapes_are_refused(make_remote, symlinks, path) -> None:
    remote = make_remote({"README.md": "x\n"})
    remote.commit_files({}, "links", symlinks=symlinks)
    with pytest.raises(ConfigError, match="symbolic link"):
        plan_step(_target(remote, path=path))


def test_without_read_token_the_clone_is_refused(make_remote, monkeypatch, git_token) -> None:
    remote = make_remote(_files(_kustomization(_entry(_image()))))
    monkeypatch.delenv("IMAGEBUMP_GIT_READ_TOKEN")
    with pytest.raises(PermissionDeniedError) as info:
        plan_step(_target(remote))
    assert git_token not in str(info.value)


def test_read_token_from_file(make_remote, monkeypatch, git_token, tmp_path) -> None:
    remote = make_remote(_files(_kustomization(_entry(_image()))))
    token_file = tmp_path / "token"
    token_file.write_text(git_token + "\n")
    monkeypatch.delenv("IMAGEBUMP_GIT_READ_TOKEN")
    monkeypatch.delenv("IMAGEBUMP_GIT_TOKEN")
    monkeypatch.setenv("IMAGEBUMP_GIT_READ_TOKEN_FILE", str(token_file))
    assert plan_step(_target(remote)).changed


def test_error_exits_with_config_code(make_remote, capsys) -> None:
    remote = make_remote(_files(_kustomization(_entry("web"))))
    with pytest.raises(SystemExit) as info:
        run(_target(remote))
    assert info.value.code == 2
    assert "ImageNotFoundError" in capsys.readouterr().err


# --- through Hera's runner, as in the pod ----------------------------------------------------------


@pytest.mark.parametrize(("current", "changed"), [("v1", "true"), ("v2", "false")])
def test_runs_through_hera_runner(make_remote, tmp_path, git_token, current, changed) -> None:
    remote = make_remote(_files(_kustomization(_entry(_image(), current))))
    target = _target(remote, tag="v2")
    args = tmp_path / "args.json"
    args.write_text(json.dumps([{"name": "target", "value": target.model_dump_json()}]))
    outputs = tmp_path / "outputs"
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGEBUMP_")}
    env.update(PYTHONPATH=str(ROOT), hera__outputs_directory=str(outputs), IMAGEBUMP_GIT_READ_TOKEN=git_token)
    proc = subprocess.run(
        [sys.executable, "-m", "hera.workflows.runner", "-e", "steps.edit_kustomize.step:run", str(args)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    params = outputs / "parameters"
    assert (params / "changed").read_text() == changed
    plan = json.loads((params / "plan").read_text())
    assert plan["file"] == f"{OVERLAY}/kustomization.yaml" and plan["base_commit"] == remote.rev()
    assert plan["new"]["newTag"] == "v2"
    for text in (proc.stdout, proc.stderr, *(p.read_text() for p in params.iterdir())):
        assert git_token not in text


# --- mode pr: the living proposal branch is never downgraded ---------------------------------------


@pytest.mark.parametrize(
    ("branch_tag", "new_offset", "provider", "decision", "changed", "pr_decision"),
    [
        pytest.param(None, timedelta(0), "local", "update", True, None, id="branch-missing-updates"),
        pytest.param("v3", timedelta(days=-1), "local", "stale", False, "stale", id="branch-newer-is-stale"),
        pytest.param("v2", timedelta(0), "local", "current", False, "current", id="branch-equal-is-current"),
        pytest.param("v3", timedelta(days=1), "local", "update", True, "update", id="branch-older-updates"),
        pytest.param("", timedelta(0), "local", "update", True, None, id="branch-without-entry-updates"),
        pytest.param(
            "v3",
            timedelta(days=-1),
            "github",
            "update",
            True,
            "stale",
            id="github-branch-newer-left-to-commit-pr",
        ),
    ],
)
def test_pr_mode_measures_the_update_against_the_proposal_branch(
    make_remote, moto, ecr_repository, branch_tag, new_offset, provider, decision, changed, pr_decision
) -> None:
    from steps.domain.branches import branch_name

    image = _image(ecr_repository)
    _ecr_push(moto, ecr_repository, "v3")  # pushed now; the base's v1 is unknown to ECR
    file = f"{OVERLAY}/kustomization.yaml"
    remote = make_remote(_files(_kustomization(_entry("api", "v1", new_name=image))))
    target = _target(
        remote,
        image=image,
        tag="v2",
        order="push-time",
        mode="pr",
        provider=provider,
        pushed_at=datetime.now(UTC) + new_offset,
    )
    branch = branch_name(target)
    if branch_tag is not None:
        remote.git("branch", branch, "main")
        entries = _entry("api", branch_tag, new_name=image) if branch_tag else _entry("web")
        remote.commit_files({file: _kustomization(entries)}, "the proposal", branch=branch)
    before = {b: remote.rev(b) for b in remote.branches()}

    out = plan_step(target)

    assert (out.decision, out.changed) == (decision, changed), out.reason
    plan = out.plan
    assert plan.pr_branch == branch
    assert (plan.pr_entry.newTag if plan.pr_entry else None) == (branch_tag or None)
    assert plan.pr_decision == pr_decision
    if pr_decision == "stale":
        assert "v2" in plan.pr_reason and "v3" in plan.pr_reason and branch in plan.pr_reason
        assert "v3" in out.reason and "v2" in out.reason
    if decision == "current":
        assert branch in out.reason and "already proposes" in out.reason
    assert plan.new.newTag == "v2" and plan.old.newTag == "v1"  # still measured from the base
    assert {b: remote.rev(b) for b in remote.branches()} == before  # pushes nothing


def test_commit_mode_does_not_look_at_a_proposal_branch(make_remote) -> None:
    out = plan_step(_target(make_remote(_files(_kustomization(_entry(_image(), "v1")))), mode="commit"))
    assert out.plan.pr_branch == "" and out.plan.pr_entry is None and out.changed


def test_edit_kustomize_does_not_import_githubkit() -> None:
    code = (
        "import sys, steps.edit_kustomize.step; assert 'githubkit' not in sys.modules; "
        "from steps.commit_pr.step import branch_name; from steps.domain.branches import branch_name as b; "
        "assert branch_name is b"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


# --- the optional read token: an absent Secret means an anonymous read ----------------------------


@pytest.fixture()
def absent_read_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """What the pod sees when the optional ``imagebump-git-read`` Secret does not exist: the template
    still points IMAGEBUMP_GIT_READ_TOKEN_FILE into the mount, which is an empty directory."""
    mount = tmp_path / "etc-imagebump-git-read"
    mount.mkdir()
    for name in ("IMAGEBUMP_GIT_READ_TOKEN", "IMAGEBUMP_GIT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IMAGEBUMP_GIT_READ_TOKEN_FILE", str(mount / "token"))
    return mount


def _remote_target(url: str) -> Target:
    return Target(rule=0, repo_url=url, path=OVERLAY, env="prod", image=_image(), tag="v2", order="none")


def test_absent_read_secret_reads_a_public_repository_anonymously(
    tmp_path, git_token, absent_read_secret
) -> None:
    from imagebump.local.git_server import GitHttpServer

    with GitHttpServer(tmp_path / "remotes", git_token, anonymous_read=True) as server:
        url = server.create_repo("public/gitops", _files(_kustomization(_entry(_image()))))
        out = plan_step(_remote_target(url))
    assert (out.changed, out.decision, out.plan.new.newTag) == (True, "update", "v2")


@pytest.mark.parametrize("status", [401, 403, 404])
def test_absent_read_secret_on_a_private_repository_names_the_secret_to_create(
    tmp_path, git_token, absent_read_secret, status
) -> None:
    """The refusal is terminal (exit 2: Argo's retryStrategy does not retry it) and says what to do."""
    from imagebump.local.git_server import GitHttpServer

    with GitHttpServer(tmp_path / "remotes", git_token, anonymous_status=status) as server:
        url = server.create_repo("private/gitops", _files(_kustomization(_entry(_image()))))
        with pytest.raises(PermissionDeniedError) as info:
            plan_step(_remote_target(url))
    message = str(info.value)
    assert info.value.exit_code == 2
    assert f"refused an anonymous read (HTTP {status})" in message
    assert "kubectl -n imagebump create secret generic imagebump-git-read --from-file=token=" in message
    assert str(absent_read_secret / "token") in message  # where the token was looked for


def test_an_empty_read_token_file_is_an_error_not_anonymous(
    tmp_path, absent_read_secret, monkeypatch
) -> None:
    """A Secret that exists but holds nothing is a mistake worth naming, not a public repository."""
    (absent_read_secret / "token").write_text("\n")
    with pytest.raises(ConfigError) as info:
        plan_step(_remote_target("http://127.0.0.1:9/o/r"))
    assert info.value.reason == "file-empty"

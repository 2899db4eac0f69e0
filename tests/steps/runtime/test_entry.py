"""steps.runtime.launcher (every step template's pod command) against Hera's runner: the same argv, inputs file,
outputs, exit codes — and what each step process imports.

Each case runs one step twice as a pod runs it — a new process, only the template's environment, the
inputs file Argo writes for ``source: '{{inputs.parameters}}'`` — once through
``python -m hera.workflows.runner`` and once through ``python -m steps.runtime.launcher``, and compares what
Argo reads back: the exit code, stdout (the template's ``result``) and every file under
``$hera__outputs_directory``, plus every log record. Values that differ between any two runs (commit
SHAs, the remote's name, seconds since the push, a backup's timestamp and compressed size) are masked
before comparing.

Real parts: a ``git http-backend`` remote (tests/fixtures/git.py), moto's ECR and S3 server. FAKES,
because no server can run here: the GitHub API (tests/fixtures/github.py, parsed by githubkit) for
commit-pr in PR mode, and the Kubernetes API (tests/fakes/kube.py, through the official client) for
backup-export.

Each process also reports the modules it had imported when it exited (an ``atexit`` hook in a
``python -c`` wrapper that runs the runner module as ``-m`` would), so the import claims of issue 15
are checked on the whole path a step takes, not just its first import: no step process imports
``hera.workflows`` through our entry; commit-pr in commit mode never imports the GitHub client; resolve-image
never imports git code.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from steps.domain.models import Target
from tests.conftest import FAKE_CREDENTIALS
from tests.steps.commit_pr.support import overlay_files, plan, target

ROOT = Path(__file__).resolve().parents[3]
HERA, ENTRY = "hera.workflows.runner", "steps.runtime.launcher"
RUNNERS = (HERA, ENTRY)
STEPS = (
    "resolve_image.step",
    "edit_kustomize.step",
    "commit_pr.step",
    "reconcile.step",
    "argocd_backup.export",
)

#: Runs MODULE as ``python -m MODULE ARGS...`` would, and writes the modules imported by the end of
#: the process (atexit: after the step's work and its exit code) to $SHOW_MODULES_TO.
WRAPPER = (
    "import atexit, json, os, runpy, sys\n"
    "atexit.register(lambda: open(os.environ['SHOW_MODULES_TO'], 'w').write(json.dumps(sorted(sys.modules))))\n"
    "module = sys.argv.pop(1)\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
)


def _run(runner: str, step: str, inputs: list[dict], tmp: Path, env: dict[str, str]) -> dict:
    work = tmp / f"{runner}-{uuid.uuid4().hex[:6]}"
    work.mkdir(parents=True)
    args = work / "script"  # what Argo's executor writes the script source to, and appends
    args.write_text(json.dumps(inputs))
    outputs = work / "outputs"
    modules = work / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, runner, "-e", f"steps.{step}:run", str(args)],
        cwd=work,
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(work),
            "PYTHONPATH": str(ROOT),
            "LANG": "C.UTF-8",
            "hera__outputs_directory": str(outputs),
            "PYDANTIC_DISABLE_PLUGINS": "1",  # as the templates set it (workflows.common.base_env)
            "SHOW_MODULES_TO": str(modules),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    files = {str(p.relative_to(outputs)): p.read_text() for p in sorted(outputs.rglob("*")) if p.is_file()}
    records = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    for record in records:
        record.pop("ts", None)
    return {
        "code": proc.returncode,
        "stdout": proc.stdout,
        "files": files,
        "records": records,
        "stderr": proc.stderr,
        "modules": set(json.loads(modules.read_text())),
    }


def _both(step: str, inputs: list[dict], tmp: Path, env: dict[str, str] | None = None) -> tuple[dict, dict]:
    hera, ours = (_run(r, step, inputs, tmp, env or {}) for r in RUNNERS)
    return hera, ours


def _params(**values: str) -> list[dict]:
    # Argo renders {{inputs.parameters}} as the full parameter objects; extra keys are ignored by both.
    return [{"name": k, "value": v, "description": "x"} for k, v in values.items()]


def _masked(result: dict, *literals: str) -> dict:
    """``result`` with what differs between any two runs masked (see the module docstring)."""

    def mask(text: str) -> str:
        for literal in literals:
            text = text.replace(literal, "<run>")
        text = re.sub(r"\b[0-9a-f]{64}\b", "<sha256>", text)
        text = re.sub(r"\b[0-9a-f]{40}\b", "<sha>", text)
        text = re.sub(r"\b[0-9a-f]{12}\b", "<short-sha>", text)
        text = re.sub(r"\(\d+ bytes", "(<n> bytes", text)  # a gzip of an archive that holds its time
        text = re.sub(r"\d{4}/\d{2}/\d{2}/\d{6}Z", "<when>", text)
        text = re.sub(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "<time>", text)
        return re.sub(r'("?seconds[-_]since[-_]push"?: ?"?)[0-9.]+', r"\1<s>", text)

    files = {k: mask(v) for k, v in result["files"].items()}
    if "parameters/seconds-since-push" in files:
        files["parameters/seconds-since-push"] = "<s>"

    def timings(record: dict) -> dict:  # how long things took differs; which phases ran does not
        if record.get("event") != "step-timings":
            return record
        return {**record, "message": "<took>", "seconds": "<s>", "phases": sorted(record["phases"])}

    return {
        "code": result["code"],
        "stdout": mask(result["stdout"]),
        "files": files,
        "records": [timings(json.loads(mask(json.dumps(r)))) for r in result["records"]],
    }


def _same(hera: dict, ours: dict, *literals: str) -> None:
    assert hera["code"] == ours["code"] == 0, hera["stderr"][-3000:] + ours["stderr"][-3000:]
    h, o = _masked(hera, *literals), _masked(ours, *literals)
    assert o["files"] == h["files"]
    assert o["stdout"] == h["stdout"]
    assert o["records"] == h["records"]


def _no_hera(result: dict) -> None:
    assert not {m for m in result["modules"] if m == "hera" or m.startswith("hera.")}, "imported Hera"


def _pydantic(modules: set[str]) -> set[str]:
    """pydantic was 0.1–0.15 s of each cold step (issue 33): the event's steps take contracts on
    msgspec (commit-pr in PR mode still meets it: githubkit's models are pydantic)."""
    return {m for m in modules if m.split(".")[0] in ("pydantic", "pydantic_core", "annotated_types")}


def _git_code(modules: set[str]) -> set[str]:
    return {m for m in modules if m == "steps.git" or m.startswith("steps.git_")}


_GITHUB_CLIENT = ("githubkit", "httpx", "steps.forge.github", "steps.forge.pull_requests")


#: The AWS SDK and what only it imports: a step that asks ECR through steps.aws.ecr_http imports none.
_AWS_SDK = ("boto3", "botocore", "s3transfer", "urllib3", "dateutil", "jmespath")


def _aws_sdk(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in _AWS_SDK}


def _github_client(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in _GITHUB_CLIENT or m in _GITHUB_CLIENT}


# --------------------------------------------------------------------------- every step, both runners


def test_resolve_image_gives_the_same_targets_through_both_and_never_imports_git_code(moto, tmp_path):
    """A push that matches a rule, against moto's ECR server: the targets Argo fans out over."""
    from tests.steps.resolve_image.test_resolve_image import D1, RULES, Registry

    registry = Registry(moto)
    registry.push("1.4.2", D1)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    hera, ours = _both(
        "resolve_image.step",
        _params(event=registry.event(), image=""),
        tmp_path,
        {"IMAGEBUMP_RULES_FILE": str(rules), "AWS_ENDPOINT_URL": moto.endpoint_url, **FAKE_CREDENTIALS},
    )
    _same(hera, ours)
    assert [t["tag"] for t in json.loads(ours["files"]["parameters/targets"])] == ["1.4.2"]
    assert "steps.aws.ecr_http" in ours["modules"]  # it did its work, with the lean ECR client
    assert _aws_sdk(ours["modules"]) == set()  # keys in the environment: neither botocore nor boto3
    assert _git_code(ours["modules"]) == set()
    assert _pydantic(ours["modules"]) == set()
    _no_hera(ours)


def test_edit_kustomize_gives_the_same_outputs_through_both_entry_points(make_remote, git_token, tmp_path):
    remote = make_remote(overlay_files("overlays/prod"))
    tgt = target(remote.url, order="none")
    token = tmp_path / "token"
    token.write_text(git_token)
    hera, ours = _both(
        "edit_kustomize.step",
        _params(target=tgt.model_dump_json(), env="prod"),  # `env` is an input the function does not take
        tmp_path,
        {"IMAGEBUMP_GIT_READ_TOKEN_FILE": str(token)},
    )
    _same(hera, ours)
    assert set(ours["files"]) == {f"parameters/{n}" for n in ("plan", "changed", "decision", "reason")}
    assert json.loads(ours["files"]["parameters/plan"])["decision"] == "update"
    assert json.loads(ours["stdout"])["changed"] is True
    assert _github_client(ours["modules"]) == set()
    assert _pydantic(ours["modules"]) == set()
    _no_hera(ours)


def _ecr_image(moto, tag: str, digest: str) -> None:
    """``tag`` → ``digest`` in the repository of :data:`tests.steps.commit_pr.support.IMAGE` (team/api)."""
    from imagebump.local import builders

    client = moto.client("ecr")
    try:
        client.create_repository(repositoryName="team/api")
    except client.exceptions.RepositoryAlreadyExistsException:
        pass
    try:
        client.put_image(
            repositoryName="team/api",
            imageManifest=builders.image_manifest(digest),
            imageDigest=digest,
            imageTag=tag,
        )
    except client.exceptions.ImageAlreadyExistsException:  # pushed by an earlier test of the session
        pass


@pytest.mark.parametrize("step", ["resolve_image.step", "edit_kustomize.step"])
def test_the_event_steps_ask_ecr_without_botocore_and_fall_back_to_it_with_the_same_outputs(
    step, moto, make_remote, git_token, tmp_path
):
    """With keys in the environment (as a Secret or the local runtime gives them) the step asks ECR
    through steps.aws.ecr_http and never imports botocore; with a setting only botocore reads
    (``AWS_DEFAULTS_MODE``) it asks through botocore, and Argo reads the same outputs."""
    from tests.steps.resolve_image.test_resolve_image import RULES

    _ecr_image(moto, "1.0.0", "sha256:" + "c" * 64)
    aws = {"AWS_ENDPOINT_URL": moto.endpoint_url, **FAKE_CREDENTIALS}
    if step == "resolve_image.step":
        rules = tmp_path / "rules.yaml"
        rules.write_text(RULES)
        inputs = _params(event="", image="123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api:1.0.0")
        aws["IMAGEBUMP_RULES_FILE"] = str(rules)
    else:
        remote = make_remote(overlay_files("overlays/prod"))  # holds 1.0.0: its push time is asked
        token = tmp_path / "token"
        token.write_text(git_token)
        inputs = _params(target=target(remote.url, order="push-time").model_dump_json())
        aws["IMAGEBUMP_GIT_READ_TOKEN_FILE"] = str(token)
    lean = _run(ENTRY, step, inputs, tmp_path, aws)
    fallback = _run(ENTRY, step, inputs, tmp_path, {**aws, "AWS_DEFAULTS_MODE": "standard"})
    assert lean["code"] == fallback["code"] == 0, lean["stderr"][-3000:] + fallback["stderr"][-3000:]
    assert "steps.aws.ecr_http" in lean["modules"] and _aws_sdk(lean["modules"]) == set()
    assert "botocore.session" in fallback["modules"] and "urllib3" in fallback["modules"]
    assert _masked(lean)["files"] == _masked(fallback)["files"]
    timings = [r for r in lean["records"] if r.get("event") == "step-timings"]
    assert any(phase.startswith("ecr call") for phase in timings[0]["phases"])  # ECR was asked
    assert any(phase.startswith("ecr client") for phase in timings[0]["phases"])


def test_resolve_image_with_container_credentials_never_imports_botocore(moto, tmp_path):
    """EKS Pod Identity or ECS (a container credentials endpoint, here a real one on loopback): the
    credentials are fetched and ECR asked without botocore."""
    from tests.steps.aws.test_credentials import _document, _Endpoint
    from tests.steps.resolve_image.test_resolve_image import RULES

    _ecr_image(moto, "1.0.0", "sha256:" + "c" * 64)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    token = tmp_path / "pod-identity-token"
    token.write_text("pod-token")
    with _Endpoint([(200, _document())]).running() as endpoint:
        ours = _run(
            ENTRY,
            "resolve_image.step",
            _params(event="", image="123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api:1.0.0"),
            tmp_path,
            {
                "IMAGEBUMP_RULES_FILE": str(rules),
                "AWS_ENDPOINT_URL": moto.endpoint_url,
                "AWS_CONTAINER_CREDENTIALS_FULL_URI": endpoint.url,
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token),
            },
        )
        assert [headers["Authorization"] for _, headers in endpoint.requests] == ["pod-token"]
    assert ours["code"] == 0, ours["stderr"][-3000:]
    assert [t["tag"] for t in json.loads(ours["files"]["parameters/targets"])] == ["1.0.0"]
    assert "steps.aws.ecr_http" in ours["modules"] and _aws_sdk(ours["modules"]) == set()


def test_resolve_image_with_web_identity_never_imports_botocore(moto, tmp_path):
    """IRSA, as the cluster install runs the step (a projected token file and the role's ARN): STS
    (moto's, answering AssumeRoleWithWebIdentity) gives the credentials and ECR is asked, without
    botocore; the token appears in no output or log line."""
    from tests.steps.resolve_image.test_resolve_image import RULES

    _ecr_image(moto, "1.0.0", "sha256:" + "c" * 64)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    token = tmp_path / "eks.amazonaws.com-serviceaccount-token"
    token.write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJl")
    ours = _run(
        ENTRY,
        "resolve_image.step",
        _params(event="", image="123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api:1.0.0"),
        tmp_path,
        {
            "IMAGEBUMP_RULES_FILE": str(rules),
            "AWS_ENDPOINT_URL": moto.endpoint_url,
            "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/imagebump-resolve",
            "AWS_WEB_IDENTITY_TOKEN_FILE": str(token),
        },
    )
    assert ours["code"] == 0, ours["stderr"][-3000:]
    assert [t["tag"] for t in json.loads(ours["files"]["parameters/targets"])] == ["1.0.0"]
    assert {"steps.aws.ecr_http", "steps.aws.sts_http"} <= ours["modules"]
    assert _aws_sdk(ours["modules"]) == set()
    shown = ours["stdout"] + ours["stderr"] + "".join(ours["files"].values())
    assert "c2lnbmF0dXJl" not in shown


def test_commit_pr_in_commit_mode_is_the_same_through_both_and_never_imports_the_github_client(
    make_remote, git_token, tmp_path
):
    """``provider: github`` (the default) with a git token: the commit needs no API, so neither
    githubkit nor httpx is imported, on the whole path (clone, edit, commit, push)."""
    remotes = {r: make_remote(overlay_files("overlays/prod"), name=f"o/commit-{r[:4]}") for r in RUNNERS}
    results = {}
    for runner, remote in remotes.items():
        tgt = target(remote.url, provider="github")
        results[runner] = _run(
            runner,
            "commit_pr.step",
            _params(target=tgt.model_dump_json(), plan=plan().model_dump_json(), env="prod"),
            tmp_path,
            {"IMAGEBUMP_GIT_TOKEN": git_token},
        )
    hera, ours = results[HERA], results[ENTRY]
    _same(hera, ours, *(r.name for r in remotes.values()))
    assert ours["files"]["parameters/action"] == "committed"
    assert ours["files"]["parameters/commit-sha"] == remotes[ENTRY].rev()
    assert "1.1.0" in (remotes[ENTRY].read("overlays/prod/kustomization.yaml") or "")
    assert "steps.commit_pr.commit_mode" in ours["modules"] and "steps.git" in ours["modules"]
    assert _github_client(ours["modules"]) == set()
    assert _pydantic(ours["modules"]) == set()
    _no_hera(ours)


def test_commit_pr_in_pr_mode_on_a_host_without_an_api_never_imports_the_github_client(
    make_remote, git_token, tmp_path
):
    """``mode: pr`` with ``provider: local``: the pushed branch is the proposal and no API is
    called, so a cold step pays neither githubkit nor httpx (~0.35 s of imports per start)."""
    remote = make_remote(overlay_files("overlays/prod"), name="o/pr-local")
    tgt = target(remote.url, mode="pr", provider="local")
    ours = _run(
        ENTRY,
        "commit_pr.step",
        _params(target=tgt.model_dump_json(), plan=plan().model_dump_json(), env="prod"),
        tmp_path,
        {"IMAGEBUMP_GIT_TOKEN": git_token},
    )
    assert ours["code"] == 0, ours["stderr"][-3000:]
    assert ours["files"]["parameters/action"] == "pr-created"
    branch = ours["files"]["parameters/branch"]
    assert "1.1.0" in (remote.read("overlays/prod/kustomization.yaml", ref=branch) or "")
    assert "steps.commit_pr.pr_mode" in ours["modules"]
    assert _github_client(ours["modules"]) == set()
    _no_hera(ours)


def test_commit_pr_in_pr_mode_is_the_same_through_both(make_remote, git_token, tmp_path):
    """PR mode against the FAKE GitHub API (one fake per runner, so both open PR #1)."""
    from tests.fixtures.github import GitHubFake

    results, remotes = {}, {}
    for runner in RUNNERS:
        remotes[runner] = make_remote(overlay_files("overlays/prod"), name=f"o/pr-{runner[:4]}")
        tgt = target(remotes[runner].url, mode="pr", provider="github")
        with GitHubFake({git_token}) as fake:
            results[runner] = _run(
                runner,
                "commit_pr.step",
                _params(target=tgt.model_dump_json(), plan=plan().model_dump_json(), env="prod"),
                tmp_path,
                {"IMAGEBUMP_GIT_TOKEN": git_token, "IMAGEBUMP_GITHUB_API_URL": fake.url},
            )
            pulls = [(p.number, p.head, p.base) for p in fake.pulls]
        assert len(pulls) == 1 and pulls[0][0] == 1, pulls
    hera, ours = results[HERA], results[ENTRY]
    _same(hera, ours, *(r.name for r in remotes.values()))
    assert ours["files"]["parameters/action"] == "pr-created"
    assert ours["files"]["parameters/pr-number"] == "1"
    assert "githubkit" in ours["modules"]  # the API is used here: the check above can see it
    _no_hera(ours)


def test_reconcile_reports_the_same_through_both(moto, make_remote, git_token, tmp_path):
    """A report-only sweep (``full=false``… ``limit``) over one rule: moto's ECR and a real remote."""
    from tests.steps.reconcile.test_reconcile_sweep import Registry, kustomization

    registry = Registry(moto.client("ecr"))
    name = f"{registry.prefix}/api"
    registry.push(name, "1.0.0")
    registry.push(name, "1.1.0")
    remote = make_remote(
        {"apps/api/overlays/staging/kustomization.yaml": kustomization(registry.uri(name), "1.0.0")}
    )
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        f"- registryURI: {registry.registry}/{registry.prefix}/$1\n"
        f"  githubRepository: {remote.url}/apps/$1/overlays/staging\n"
        "  env: staging\n  mode: commit\n  provider: local\n  order: push-time\n"
    )
    token = tmp_path / "token"
    token.write_text(git_token)
    hera, ours = _both(
        "reconcile.step",
        _params(concurrency="2", limit="5", full="true", gated="false"),
        tmp_path,
        {
            "IMAGEBUMP_RULES_FILE": str(rules),
            "IMAGEBUMP_GIT_READ_TOKEN_FILE": str(token),
            "AWS_ENDPOINT_URL": moto.endpoint_url,
            "AWS_REGION": "us-west-2",
            **FAKE_CREDENTIALS,
        },
    )
    _same(hera, ours)
    (behind,) = json.loads(ours["files"]["parameters/targets"])
    assert (behind["path"], behind["tag"]) == ("apps/api/overlays/staging", "1.1.0")
    _no_hera(ours)


def test_backup_export_is_the_same_through_both(moto, tmp_path):
    """One export per runner into its own bucket (moto S3) from the FAKE Kubernetes API."""
    from tests.fakes.kube import FakeKubeServer, seeded

    s3 = moto.client("s3")
    with FakeKubeServer(seeded("argocd", apps=5)) as kube:
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        results, buckets = {}, {}
        for runner in RUNNERS:
            buckets[runner] = f"entry-{uuid.uuid4().hex[:12]}"
            s3.create_bucket(
                Bucket=buckets[runner], CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
            )
            results[runner] = _run(
                runner,
                "argocd_backup.export",
                _params(
                    bucket=buckets[runner],
                    prefix="argocd-backups",
                    cluster="ci",
                    namespace="argocd",
                    kms_key_id="",
                    keep="30",
                    keep_days="0",
                ),
                tmp_path,
                {
                    "KUBECONFIG": str(kubeconfig),
                    "AWS_ENDPOINT_URL": moto.endpoint_url,
                    "AWS_REGION": "us-west-2",
                    **FAKE_CREDENTIALS,
                },
            )
    hera, ours = results[HERA], results[ENTRY]
    _same(hera, ours, *buckets.values())
    assert ours["files"]["parameters/url"].startswith(f"s3://{buckets[ENTRY]}/argocd-backups/ci/")
    _no_hera(ours)


def _exit_handler_inputs(outcomes: str = "[]") -> list[dict]:
    return _params(
        outcomes=outcomes,
        event_id="",
        workflow_status="Succeeded",
        workflow_failures="",
        workflow_url="",
        backup="false",
        workflow_name="image-update-x",
        event=json.dumps({"id": "ev-entry"}),
    )


#: What the exit handler leaves to a Workflow that has something to send (issue 33): parsing a
#: notifications file, the output model, delivering (HTTP, TLS).
_LAZY_IN_A_QUIET_EXIT_HANDLER = ("pydantic", "pydantic_core", "yaml", "steps.notify.send", "http", "ssl")


def _quiet_exit_handler_imports(modules: set[str]) -> set[str]:
    return {
        m
        for m in modules
        if m in _LAZY_IN_A_QUIET_EXIT_HANDLER or m.split(".")[0] in _LAZY_IN_A_QUIET_EXIT_HANDLER
    }


def test_the_exit_handler_with_nothing_configured_is_the_same_through_both_and_imports_no_pydantic(tmp_path):
    """No destination (no file, no variable): the same outputs and records as Hera's runner gives,
    from a process that imported neither pydantic, YAML nor the sending code — what most
    Workflows' exit handler pods pay is about an interpreter's start (issue 33)."""
    hera, ours = _both(
        "notify.step",
        _exit_handler_inputs(),
        tmp_path,
        {"IMAGEBUMP_NOTIFY_FILE": str(tmp_path / "absent.yaml")},
    )
    _same(hera, ours)
    assert ours["files"] == {"parameters/sent": "0", "parameters/duplicate": "0", "parameters/failed": "0"}
    assert json.loads(ours["stdout"]) == {"sent": 0, "duplicate": 0, "failed": 0}
    assert [r["message"] for r in ours["records"]][
        0
    ] == "no notification destinations configured: nothing sent"
    assert {r["step"] for r in ours["records"]} == {"notify"}  # as its template is named
    assert _quiet_exit_handler_imports(ours["modules"]) == set()
    assert "steps.notify.step" in ours["modules"]  # it ran: the check above can see what it imports
    _no_hera(ours)


def test_the_exit_handler_that_sends_is_the_same_through_both(tmp_path):
    """A webhook destination (a real receiver on 127.0.0.1): one message each, the same outputs."""
    from tests.steps.notify.receivers import Receiver

    outcome = {"kind": "committed", "target": "https://github.com/o/gitops/overlays/prod", "fields": {}}
    with Receiver("webhook") as hook:
        results = {
            runner: _run(
                runner,
                "notify.step",
                _exit_handler_inputs(json.dumps([outcome])),
                tmp_path,
                {
                    "IMAGEBUMP_NOTIFY_FILE": str(tmp_path / "absent.yaml"),
                    "IMAGEBUMP_NOTIFY_WEBHOOK_URL": hook.url,
                    "IMAGEBUMP_NOTIFY_WEBHOOK_SECRET": "whsec-" + "e" * 20,
                    "IMAGEBUMP_NOTIFY_LEDGER_DIR": str(tmp_path / f"ledger-{runner}"),
                },
            )
            for runner in RUNNERS
        }
    hera, ours = results[HERA], results[ENTRY]
    _same(hera, ours)
    assert json.loads(ours["stdout"]) == {"sent": 1, "duplicate": 0, "failed": 0}
    assert len(hook.received) == 2 and "steps.notify.send" in ours["modules"]
    _no_hera(ours)


# --------------------------------------------------------------------------- errors and argv


def test_a_refused_step_exits_2_with_the_same_record_through_both(tmp_path):
    tgt = Target(
        rule=0, repo_url="http://127.0.0.1:9/o/r", path="../escape", image="x", tag="1", event_id="e"
    )
    hera, ours = _both("edit_kustomize.step", _params(target=tgt.model_dump_json()), tmp_path)
    assert hera["code"] == ours["code"] == 2
    assert ours["records"] == hera["records"] and ours["records"][0]["error"] == "ConfigError"
    assert ours["files"] == hera["files"] == {}
    assert ours["stdout"] == hera["stdout"] == ""


#: Each step's entrypoint as an older manifest renders it (the template's ``args``, before issue 32
#: made the step a package), with inputs the step answers without a remote (a refusal, or "no Argo
#: CD configured"): its log records, named by the step, prove the old name ran the step's code.
OLDER_MANIFESTS = {
    "steps.edit_kustomize:run": (
        "edit-kustomize",
        _params(
            target=Target(
                rule=0, repo_url="http://127.0.0.1:9/o/r", path="../escape", image="x", tag="1", event_id="e"
            ).model_dump_json()
        ),
    ),
    "steps.resolve_image:run": ("resolve-image", _params(event="", image="")),  # neither: refused
    "steps.verify_live.states:run": ("live-states", _params(targets="[]")),  # no Argo CD here: says so
}


def _launch(entrypoint: str, inputs: list[dict], tmp: Path) -> subprocess.CompletedProcess:
    work = tmp / uuid.uuid4().hex[:6]
    work.mkdir()
    (work / "script").write_text(json.dumps(inputs))
    return subprocess.run(
        [sys.executable, "-m", ENTRY, "-e", entrypoint, str(work / "script")],
        cwd=work,
        env={"PATH": os.environ["PATH"], "HOME": str(work), "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("old", sorted(OLDER_MANIFESTS))
def test_a_resubmitted_workflow_naming_a_moved_step_runs_the_step_where_it_lives_now(old, tmp_path):
    """A Workflow resubmitted from the Argo UI runs its own, older manifest: the launcher's
    ``MOVED`` takes the old entrypoint to the new one, and the step behaves as under its new name."""
    from steps.runtime.launcher import MOVED

    step, inputs = OLDER_MANIFESTS[old]
    module, _, function = MOVED[old].partition(":")
    assert old not in MOVED.values() and callable(getattr(importlib.import_module(module), function))
    then, now = (_launch(e, inputs, tmp_path) for e in (old, MOVED[old]))
    said = [  # what each log record says, but the step's timings (they differ run to run)
        [(r["level"], r["step"], r["logger"], r["message"]) for r in map(json.loads, p.stderr.splitlines())]
        for p in (then, now)
    ]
    said = [
        [r for r in records if r[2] != "steps.runtime.harness" or " took " not in r[3]] for records in said
    ]
    assert (then.returncode, then.stdout) == (now.returncode, now.stdout), then.stderr
    assert said[0] == said[1] and said[0] and {r[1] for r in said[0]} == {step}, then.stderr


def test_every_moved_step_is_named_by_an_older_manifest_test_and_no_current_manifest_names_it():
    from steps.runtime.launcher import MOVED

    assert sorted(MOVED) == sorted(OLDER_MANIFESTS)
    rendered = "".join(p.read_text() for p in (ROOT / "manifests").rglob("*.yaml"))
    assert [old for old in MOVED if f"- {old}\n" in rendered] == []


def test_inputs_that_do_not_validate_are_bad_input_not_a_retried_traceback(tmp_path):
    """The one deliberate difference: Hera's runner lets pydantic's ValidationError escape (exit 1,
    retried by the template's retryStrategy); steps.runtime.launcher says what is wrong and exits 2."""
    hera, ours = _both(
        "reconcile.step", _params(concurrency="abc", limit="5", full="false", gated="false"), tmp_path
    )
    assert hera["code"] == 1 and "ValidationError" in hera["stderr"]
    assert ours["code"] == 2
    (record,) = ours["records"]
    assert (record["level"], record["step"], record["exit_code"]) == ("error", "reconcile", 2)
    assert "concurrency" in record["message"] and "Traceback" not in ours["stderr"]


def test_usage_errors_exit_2_like_hera(tmp_path):
    for runner in RUNNERS:
        proc = subprocess.run(
            [sys.executable, "-m", runner, str(tmp_path / "x")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 2 and "--entrypoint/-e" in proc.stderr, (runner, proc.stderr)


@pytest.mark.parametrize(
    "argv",
    [
        ["-e", "steps.resolve_image:run", "/tmp/inputs"],
        ["--entrypoint", "steps.commit_pr.step:run", "inputs.json"],
        ["--entrypoint=steps.commit_pr.step:run", "inputs.json"],
        ["inputs.json", "-e", "steps.edit_kustomize:run"],
        ["-esteps.reconcile:run", "x"],
        ["-e", "m:f", "a b/ü.json"],
    ],
)
def test_the_rendered_arguments_read_directly_are_what_the_parser_gives(argv):
    from steps.runtime import launcher as _entry

    assert _entry._parse_args(argv) == _entry._argparse(argv)


# --------------------------------------------------------------------------- what a step process imports


def _first_line_inputs() -> dict[str, dict[str, str]]:
    tgt = target("https://github.com/o/gitops").model_dump_json()
    return {
        "resolve_image.step": {"event": "", "image": "x.dkr.ecr.us-west-2.amazonaws.com/a:1"},
        "edit_kustomize.step": {"target": tgt},
        "commit_pr.step": {"target": tgt, "plan": plan().model_dump_json()},
        "reconcile.step": {"concurrency": "4", "limit": "5", "full": "false", "gated": "false"},
        "argocd_backup.export": {"bucket": "b"},
    }


def _modules_at_first_line(step: str) -> set[str]:
    """What a step process has imported when its function would start: the entry's own imports,
    the step's module and the entry's parsing of the inputs (pydantic validating real values)."""
    code = (
        "import inspect, json, sys, importlib, steps.runtime.launcher as e\n"
        f"f = importlib.import_module('steps.{step}').run\n"
        "assert e._unsupported(f) is None, e._unsupported(f)\n"
        "given = json.loads(sys.argv[1])\n"
        "inputs = {n: given[n] if n in given else p.default if isinstance(p.default, str)\n"
        "          else json.dumps(p.default) for n, p in inspect.signature(f).parameters.items()}\n"
        "e.function_kwargs(f, inputs)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(_first_line_inputs()[step])],
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "PYDANTIC_DISABLE_PLUGINS": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout))


@pytest.mark.parametrize("step", STEPS)
def test_every_step_is_supported_and_starts_without_hera_or_the_github_client(step):
    """Up to the first line of its work a step imports neither Hera nor githubkit/httpx, and only
    edit-kustomize/commit-pr/reconcile may ever reach git code (resolve-image and backup-export not)."""
    modules = _modules_at_first_line(step)
    assert {m for m in modules if m.split(".")[0] == "hera"} == set()
    assert _github_client(modules) == set()
    assert _git_code(modules) == set()
    if step in _EVENT_STEPS:  # what a push pays on a cluster: each module here is a pod's cold start
        assert {m for m in modules if m.split(".")[0] in _LAZY_IN_EVENT_STEPS} == set()


#: The steps of one push (resolve-image, edit-kustomize, commit-pr), and what they leave to the
#: code that uses it (bench/README.md "Cold start"): ``regex`` (only the CLI's terminal escaping).
_EVENT_STEPS = ("resolve_image.step", "edit_kustomize.step", "commit_pr.step")
_LAZY_IN_EVENT_STEPS = ("regex",)


def _launched() -> list[tuple[str, str, str]]:
    """(manifest, template, MODULE:FUNCTION) of every rendered template whose pod runs the launcher."""
    from workflows.common import STEP_ENTRY
    from workflows.local.documents import WorkflowDocument

    found = []
    for path in sorted((ROOT / "manifests" / "workflows").glob("*.yaml")):
        for tpl in WorkflowDocument.read(path).every_template():
            args = (tpl.get("script") or {}).get("args") or []
            if STEP_ENTRY in args and "-e" in args:
                found.append((path.name, tpl["name"], args[args.index("-e") + 1]))
    return found


def test_every_step_names_itself_in_its_log_records_as_its_template_is_named():
    """The ``step`` of a record is what a user looks for in Argo's UI: the template's name
    (``verify-live``, ``notify``, ``notify-verifying``), not its module's (``step``, ``verifying``)."""
    launched = _launched()
    assert {name for _, name, _ in launched} >= {"resolve-image", "verify-live", "notify", "notify-verifying"}
    for manifest, name, entrypoint in launched:
        module = importlib.import_module(entrypoint.split(":")[0])
        assert getattr(module, "STEP_NAME", None) == name, (manifest, entrypoint)


def test_hera_runner_is_what_the_checks_would_catch():
    """The import checks can fail: Hera's runner itself pulls in all of ``hera.workflows``."""
    proc = subprocess.run(
        [sys.executable, "-c", "import sys, hera.workflows.runner; print('hera.workflows' in sys.modules)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.strip() == "True"


def test_no_installed_distribution_declares_a_pydantic_plugin():
    """The templates set ``PYDANTIC_DISABLE_PLUGINS=1`` (workflows.common.base_env) to skip pydantic's
    plugin scan at a step's cold start; that is only safe while nothing installed is such a plugin.
    A dependency that starts shipping one fails here: decide then whether the steps want it."""
    from importlib.metadata import entry_points

    assert list(entry_points(group="pydantic")) == []
    from workflows import common

    assert ("PYDANTIC_DISABLE_PLUGINS", "1") in [(e.name, e.value) for e in common.base_env()]

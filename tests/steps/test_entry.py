"""steps._entry (PROTOTYPE, issue 15) against Hera's runner: the same argv, inputs file, outputs, exit codes.

Each case runs one step twice as a pod runs it — a new process, only the template's environment, the
inputs file Argo writes for ``source: '{{inputs.parameters}}'`` — once through
``python -m hera.workflows.runner`` and once through ``python -m steps._entry``, and compares what
Argo reads back: the exit code, stdout (the template's ``result``) and every file under
``$hera__outputs_directory``. Git is a real ``git http-backend`` remote (tests/fixtures/git.py);
resolve-image takes its no-rule path, which answers before any ECR call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from steps.models import Target
from tests.steps.commit_pr_support import overlay_files, target

ROOT = Path(__file__).resolve().parents[2]
RUNNERS = ("hera.workflows.runner", "steps._entry")


def _run(runner: str, step: str, inputs: list[dict], tmp: Path, env: dict[str, str]) -> dict:
    work = tmp / runner
    work.mkdir(parents=True)
    args = work / "script"  # what Argo's executor writes the script source to, and appends
    args.write_text(json.dumps(inputs))
    outputs = work / "outputs"
    proc = subprocess.run(
        [sys.executable, "-m", runner, "-e", f"steps.{step}:run", str(args)],
        cwd=work,
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(work),
            "PYTHONPATH": str(ROOT),
            "LANG": "C.UTF-8",
            "hera__outputs_directory": str(outputs),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
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
    }


def _both(step: str, inputs: list[dict], tmp: Path, env: dict[str, str] | None = None) -> tuple[dict, dict]:
    hera, ours = (_run(r, step, inputs, tmp, env or {}) for r in RUNNERS)
    return hera, ours


def _params(**values: str) -> list[dict]:
    # Argo renders {{inputs.parameters}} as the full parameter objects; extra keys are ignored by both.
    return [{"name": k, "value": v, "description": "x"} for k, v in values.items()]


def test_edit_kustomize_gives_the_same_outputs_through_both_entry_points(make_remote, git_token, tmp_path):
    remote = make_remote(overlay_files("overlays/prod"))
    tgt = target(remote.url, order="none")
    token = tmp_path / "token"
    token.write_text(git_token)
    hera, ours = _both(
        "edit_kustomize",
        _params(target=tgt.model_dump_json(), env="prod"),  # `env` is an input the function does not take
        tmp_path,
        {"IMAGEBUMP_GIT_READ_TOKEN_FILE": str(token)},
    )
    assert hera["code"] == ours["code"] == 0, hera["stderr"] + ours["stderr"]
    assert ours["files"] == hera["files"]
    assert set(hera["files"]) == {f"parameters/{n}" for n in ("plan", "changed", "decision", "reason")}
    assert json.loads(ours["files"]["parameters/plan"])["decision"] == "update"
    assert ours["stdout"] == hera["stdout"] and json.loads(ours["stdout"])["changed"] is True
    assert ours["records"] == hera["records"]


def test_resolve_image_gives_the_same_targets_through_both_entry_points(moto, tmp_path):
    """A push that matches a rule, against moto's ECR server: the targets Argo fans out over."""
    from tests.conftest import FAKE_CREDENTIALS
    from tests.steps.test_resolve_image import D1, RULES, Registry

    registry = Registry(moto)
    registry.push("1.4.2", D1)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    hera, ours = _both(
        "resolve_image",
        _params(event=registry.event(), image=""),
        tmp_path,
        {"IMAGEBUMP_RULES_FILE": str(rules), "AWS_ENDPOINT_URL": moto.endpoint_url, **FAKE_CREDENTIALS},
    )
    assert hera["code"] == ours["code"] == 0, hera["stderr"] + ours["stderr"]
    assert ours["files"] == hera["files"]
    assert [t["tag"] for t in json.loads(ours["files"]["parameters/targets"])] == ["1.4.2"]
    assert ours["stdout"] == hera["stdout"]
    assert ours["records"] == hera["records"]


def test_a_refused_step_exits_2_with_the_same_record_through_both(tmp_path):
    tgt = Target(
        rule=0, repo_url="http://127.0.0.1:9/o/r", path="../escape", image="x", tag="1", event_id="e"
    )
    hera, ours = _both("edit_kustomize", _params(target=tgt.model_dump_json()), tmp_path)
    assert hera["code"] == ours["code"] == 2
    assert ours["records"] == hera["records"] and ours["records"][0]["error"] == "ConfigError"
    assert ours["files"] == hera["files"] == {}
    assert ours["stdout"] == hera["stdout"] == ""


def test_inputs_that_do_not_validate_are_bad_input_not_a_retried_traceback(tmp_path):
    """The one deliberate difference: Hera's runner lets pydantic's ValidationError escape (exit 1,
    retried by the template's retryStrategy); steps._entry says what is wrong and exits 2."""
    hera, ours = _both("reconcile", _params(concurrency="abc", limit="5", full="false"), tmp_path)
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
    "step", ["resolve_image", "edit_kustomize", "commit_pr", "reconcile", "backup_export"]
)
def test_every_step_is_supported_and_loads_without_hera(step):
    """What the entry point imports for a step: never Hera (the goal of the entry point)."""
    code = (
        "import sys, importlib, steps._entry as e; "
        f"f = importlib.import_module('steps.{step}').run; "
        "assert e._unsupported(f) is None, e._unsupported(f); "
        "print(sorted({m.split('.')[0] for m in sys.modules}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "hera" not in json.loads(proc.stdout.replace("'", '"'))

"""steps.runtime.harness: a step's log reaches stderr as JSON lines (the pod log), secrets redacted.

The pod path is run as a pod runs it: ``python -m hera.workflows.runner -e steps.<step>:run ARGS``
in a new process whose environment holds only what the template gives it, against a real
``git http-backend`` remote. In-process tests wrap small functions of their own with
:func:`steps.runtime.harness.step_entry` to reach the error paths.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from steps.domain.errors import ConfigError
from steps.domain.models import Target
from steps.runtime import harness as _runtime
from steps.runtime.harness import step_entry
from tests.steps.commit_pr.support import overlay_files, target

ROOT = Path(__file__).resolve().parents[3]
EVENT_ID = "6f0e8b2c-1111-2222-3333-444455556666"  # the one commit_pr_support.target carries


def _records(stderr: str) -> list[dict]:
    lines = [line for line in stderr.splitlines() if line.strip()]
    records = []
    for line in lines:
        records.append(json.loads(line))  # every line is one JSON object: nothing else on stderr
    return records


def _runner(
    step: str, inputs: dict[str, str], tmp_path: Path, env: dict[str, str]
) -> subprocess.CompletedProcess:
    args = tmp_path / f"{step}-args.json"
    args.write_text(json.dumps([{"name": k, "value": v} for k, v in inputs.items()]))
    base = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "LANG": "C.UTF-8",
        "hera__outputs_directory": str(tmp_path / f"{step}-outputs"),
    }
    return subprocess.run(
        [sys.executable, "-m", "hera.workflows.runner", "-e", f"steps.{step}:run", str(args)],
        cwd=tmp_path,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_steps_log_json_lines_with_step_event_and_target(make_remote, git_token, tmp_path) -> None:
    """edit-kustomize then commit-pr, each as its pod runs it: their INFO lines reach stderr."""
    remote = make_remote(overlay_files("overlays/prod"))
    tgt = target(remote.url, order="none")
    token_file = tmp_path / "token"
    token_file.write_text(git_token + "\n")

    edit = _runner(
        "edit_kustomize.step",
        {"target": tgt.model_dump_json()},
        tmp_path,
        {"IMAGEBUMP_GIT_READ_TOKEN_FILE": str(token_file)},
    )
    assert edit.returncode == 0, edit.stderr
    plan = (tmp_path / "edit_kustomize.step-outputs" / "parameters" / "plan").read_text()
    commit = _runner(
        "commit_pr.step",
        {"target": tgt.model_dump_json(), "plan": plan},
        tmp_path,
        {"IMAGEBUMP_GIT_TOKEN_FILE": str(token_file)},
    )
    assert commit.returncode == 0, commit.stderr

    for proc, step, words in (
        (edit, "edit-kustomize", "overlays/prod/kustomization.yaml [api]"),
        (commit, "commit-pr", "committed "),
    ):
        records = _records(proc.stderr)
        assert records, f"{step} logged nothing"
        for record in records:
            assert {"ts", "level", "component", "step", "event_id", "target", "logger", "message"} <= set(
                record
            )
            assert (record["component"], record["step"], record["event_id"]) == ("step", step, EVENT_ID)
            assert record["target"] == f"{remote.url}/overlays/prod"
            assert record["ts"].endswith("Z")
        assert any(r["level"] == "info" and words in r["message"] for r in records), records
        assert git_token not in proc.stdout + proc.stderr


def test_resolve_image_takes_the_event_id_from_the_event(tmp_path) -> None:
    event = json.loads((ROOT / "examples" / "push-event.json").read_text())
    rules = tmp_path / "rules.yaml"
    rules.write_text("[]\n")  # no rule: a skip with a reason, before any ECR call
    proc = _runner(
        "resolve_image.step",
        {"event": json.dumps(event), "image": ""},
        tmp_path,
        {
            "IMAGEBUMP_RULES_FILE": str(rules),
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
            "AWS_REGION": "us-west-2",
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "x",
            "AWS_MAX_ATTEMPTS": "1",
        },
    )
    records = _records(proc.stderr)
    assert records and all(r["step"] == "resolve-image" and r["event_id"] == event["id"] for r in records)


def test_a_refused_step_logs_one_error_record_and_exits_2(tmp_path) -> None:
    tgt = Target(
        rule=0, repo_url="http://127.0.0.1:9/o/r", path="../escape", image="x", tag="1", event_id="ev-1"
    )
    proc = _runner("edit_kustomize.step", {"target": tgt.model_dump_json()}, tmp_path, {})
    assert proc.returncode == 2
    (record,) = _records(proc.stderr)
    assert (record["level"], record["error"], record["exit_code"], record["event_id"]) == (
        "error",
        "ConfigError",
        2,
        "ev-1",
    )
    assert record["message"].startswith("ConfigError: overlay path '../escape' must not contain '..'")


# --- in-process: redaction and the unexpected-error path ---------------------------------------------


def _in_process(fn, capsys) -> tuple[int | None, list[dict]]:
    code = None
    try:
        fn()
    except SystemExit as exc:
        code = exc.code
    return code, _records(capsys.readouterr().err)


def test_secrets_are_redacted_from_every_record(monkeypatch, capsys, tmp_path) -> None:
    import logging

    write, read, app = "wtok-" + "a1" * 12, "rtok-" + "b2" * 12, "ghs_" + "C3" * 18
    token_file = tmp_path / "read-token"
    token_file.write_text(read + "\n")
    monkeypatch.setenv("IMAGEBUMP_GIT_TOKEN", write)
    monkeypatch.setenv("IMAGEBUMP_GIT_READ_TOKEN_FILE", str(token_file))
    basic = base64.b64encode(f"x-access-token:{write}".encode()).decode()

    @step_entry
    def leaky() -> None:
        log = logging.getLogger("steps.leaky")
        log.info("env %s file %s", write, read)
        log.info("header Authorization: Basic %s", basic)
        log.info("url https://user:%s@github.com/o/r.git?access_token=%s&x=1", write, read)
        log.info("an App token %s in a message", app)
        log.warning("key -----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY----- done")
        raise ConfigError(f"refused with {write}")

    code, records = _in_process(leaky, capsys)

    assert code == 2
    text = json.dumps(records)
    for secret in (write, read, basic, app, "MIIE"):
        assert secret not in text
    assert [r["message"] for r in records[:3]] == [
        "env *** file ***",
        "header Authorization: Basic ***",
        "url https://***@github.com/o/r.git?access_token=***&x=1",
    ]
    assert records[-1]["message"] == "ConfigError: refused with ***"


def test_an_unexpected_error_is_logged_with_its_traceback_and_exits_3(capsys) -> None:
    @step_entry
    def broken() -> None:
        raise ZeroDivisionError("division by zero in the step")

    code, records = _in_process(broken, capsys)

    assert code == 3
    (record,) = records
    assert (record["level"], record["error"], record["exit_code"]) == ("error", "ZeroDivisionError", 3)
    assert "Traceback" in record["traceback"] and "broken" in record["traceback"]


def test_in_process_calls_leave_logging_as_they_found_it(capsys) -> None:
    import logging

    before = list(logging.getLogger().handlers)

    @step_entry
    def quiet() -> None:
        logging.getLogger("steps.quiet").info("inside")

    _in_process(quiet, capsys)
    logging.getLogger("steps.quiet").info("after")
    assert logging.getLogger().handlers == before
    assert "after" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(0.0, "1970-01-01T00:00:00.000Z", id="epoch"),
        pytest.param(1796270400.25, "2026-12-03T04:00:00.250Z", id="millis"),
    ],
)
def test_timestamps(seconds, text) -> None:
    assert _runtime.utc_timestamp(seconds) == text

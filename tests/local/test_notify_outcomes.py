"""``imagebump run --local`` sends the exit handler's messages (issue 36): a finished workflow's
outcomes, once each, to a real receiver on 127.0.0.1."""

from __future__ import annotations

import json

from imagebump.local import notify_outcomes
from tests.steps.notify.receivers import Receiver
from workflows.local.results import NodeResult, WorkflowResult

TARGETS = json.dumps(
    [
        {"env": "staging", "path": "a", "repo_url": "r"},
        {"env": "production", "path": "b", "repo_url": "r", "notify": ["x"]},
    ]
)


def _node(name: str, template: str, phase: str = "Succeeded", **outputs: str) -> NodeResult:
    return NodeResult(name=name, template=template, phase=phase, outputs=outputs, duration=0.5, attempts=1)


RESULT = WorkflowResult(
    "wf",
    "Failed",
    [
        _node("wf.resolve", "resolve-image", targets=TARGETS),
        _node("wf.update-target(0).edit", "edit-kustomize", decision="update"),
        _node("wf.update-target(0).commit", "commit-pr", action="committed", **{"commit-sha": "abcdef12"}),
        _node("wf.update-target(0).live", "verify-live", result="mismatch", message="runs :1.0"),
        _node("wf.update-target(1).edit", "edit-kustomize", decision="current"),
        _node("wf.update-target(1).commit", "commit-pr", phase="Skipped"),
    ],
)


def test_a_finished_workflow_becomes_its_outcomes_and_no_ops_none():
    found = notify_outcomes.outcomes({"id": "ev-1"}, RESULT)
    assert [(o.kind, o.target) for o in found] == [("committed", "r/a"), ("mismatch", "r/a")]
    assert all(o.event == "ev-1" for o in found)


def test_run_local_sends_each_message_once_and_a_redelivery_nothing(tmp_path, monkeypatch):
    with Receiver("slack") as slack:
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_FILE", str(tmp_path / "absent"))
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_SLACK_URL", slack.url)
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_LEDGER_DIR", str(tmp_path / "ledger"))
        notify_outcomes.send({"id": "ev-1"}, RESULT)
        notify_outcomes.send({"id": "ev-1"}, RESULT)  # redelivered
    assert len(slack.received) == 2  # committed, mismatch

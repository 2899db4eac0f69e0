"""The exit handler's view of a finished Workflow (issue 36): its nodes → outcomes; the step reads
them (the local executor's file, as a pod reads its Workflow), sends each once, and a resubmitted or
redelivered Workflow sends nothing new. The S3 "already sent" record against moto's server."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steps.notify import config
from steps.notify import step as notify_step
from steps.notify.decide import Outcome, decide
from steps.notify.ledger import FileLedger, S3Ledger
from steps.notify.step import notify
from steps.notify.workflow_outcomes import backup_outcomes, image_outcomes, nodes_of
from tests.steps.notify.receivers import Receiver

TARGETS = [
    {"env": "staging", "path": "overlays/staging", "repo_url": "github.com/acme/gitops"},
    {"env": "production", "path": "overlays/prod", "repo_url": "github.com/acme/gitops", "notify": ["ops"]},
]
IMAGE = "1.dkr.ecr.eu-west-1.amazonaws.com/team/api:1.4.2"


def _node(name: str, template: str, phase: str = "Succeeded", message: str = "", **outputs: str) -> dict:
    return {
        "name": name,
        "templateName": template,
        "phase": phase,
        "message": message,
        "outputs": {"parameters": [{"name": k, "value": v} for k, v in outputs.items()]},
    }


def _workflow(*nodes: dict, labels: dict | None = None) -> dict:
    return {
        "metadata": {"name": "image-update-x1", "labels": labels or {}},
        "status": {"phase": "Failed", "nodes": {f"id-{i}": n for i, n in enumerate(nodes)}},
    }


APPS = json.dumps(
    [
        {
            "namespace": "argocd",
            "name": "api-prod",
            "state": "mismatch",
            "revision": "abc123",
            "images": [":1.4.1"],
        }
    ]
)
# Argo's own node names: `wf[1].update-target(0:{…})[0].update[0].edit-kustomize` (retries: a Retry
# parent, attempts below it; the last attempt holds the outputs)
ARGO = _workflow(
    _node("image-update-x1[0].resolve-image", "resolve-image", targets=json.dumps(TARGETS), image=IMAGE),
    _node(
        'image-update-x1[1].update-target(0:{"env":"staging"})[0].update[0].edit-kustomize',
        "edit-kustomize",
        decision="held",
        reason="rollback abc1234 by Alice <a@x> (1.5.0 → 1.4.1, committed 2026-12-03T10:00:00Z)",
    ),
    _node(
        'image-update-x1[1].update-target(0:{"env":"staging"})[0].update[1].commit-pr', "commit-pr", "Skipped"
    ),
    _node(
        'image-update-x1[1].update-target(1:{"env":"production"})[0].update[0].edit-kustomize(0)',
        "edit-kustomize",
        "Failed",
        "exit code 75",
    ),
    _node(
        'image-update-x1[1].update-target(1:{"env":"production"})[0].update[0].edit-kustomize(1)',
        "edit-kustomize",
        decision="update",
    ),
    _node(
        'image-update-x1[1].update-target(1:{"env":"production"})[0].update[1].commit-pr',
        "commit-pr",
        action="committed",
        **{"commit-sha": "c0ffee"},
    ),
    _node(
        'image-update-x1[1].update-target(1:{"env":"production"})[1].verify-live',
        "verify-live",
        "Failed",
        result="mismatch",
        image=IMAGE,
        applications=APPS,
        message="runs :1.4.1",
    ),
)


def test_argo_shaped_nodes_become_each_targets_outcomes():
    found = image_outcomes(nodes_of(ARGO), "ev-1", "https://argo/wf")
    assert [(o.kind, o.target) for o in found] == [
        ("held", "github.com/acme/gitops/overlays/staging"),
        ("committed", "github.com/acme/gitops/overlays/prod"),
        ("mismatch", "github.com/acme/gitops/overlays/prod"),
    ]
    held, committed, mismatch = found
    assert held.fields["image"] == IMAGE and held.fields["reason"].startswith("rollback abc1234")
    assert (held.fields["by"], held.fields["commit"]) == ("Alice <a@x>", "abc1234")  # who, which commit
    assert committed.fields["link"] == "c0ffee" and committed.rule_notify == ("ops",)
    assert mismatch.fields["application"] == "argocd/api-prod"
    assert (mismatch.fields["revision"], mismatch.fields["git_image"], mismatch.fields["running_image"]) == (
        "abc123",
        IMAGE,
        ":1.4.1",
    )


def test_a_target_whose_step_failed_for_good_is_failed_with_the_workflows_link():
    wf = _workflow(
        _node("wf.resolve-image", "resolve-image", targets=json.dumps(TARGETS[:1])),
        _node(
            "wf.update-target(0).update.edit-kustomize",
            "edit-kustomize",
            "Failed",
            "exit code 2: bad overlay",
        ),
    )
    (failed,) = image_outcomes(nodes_of(wf), "ev-1", "https://argo/wf")
    assert failed.kind == "failed" and failed.fields["workflow_link"] == "https://argo/wf"
    assert "bad overlay" in failed.fields["error"]


def test_no_ops_and_nothing_resolved_say_nothing():
    wf = _workflow(
        _node("wf.resolve-image", "resolve-image", targets=json.dumps(TARGETS[:1])),
        _node("wf.update-target(0).update.edit-kustomize", "edit-kustomize", decision="current"),
        _node("wf.update-target(0).update.commit-pr", "commit-pr", "Skipped", action="error"),
    )
    assert image_outcomes(nodes_of(wf), "ev-1") == []
    assert image_outcomes([], "ev-1") == []


def test_a_shrunken_backup_archive_is_the_suspect_alarm():
    export = _node(
        "argocd-backup-1.backup-export",
        "backup-export",
        url="s3://b/argocd/c/2026.yaml.gz",
        counts=json.dumps({"Application": 3, "AppProject": 1}),
        suspect="true",
        **{"suspect-reason": "4 objects, fewer than 50% of the 61 in 2026-12-04.yaml.gz (Application 60→3)"},
    )
    (alarm,) = backup_outcomes([export], "argocd-backup-1")
    assert alarm.kind == "backup-suspect"
    assert (alarm.fields["archive"], alarm.fields["objects"], alarm.fields["previous_objects"]) == (
        "s3://b/argocd/c/2026.yaml.gz",
        "4",
        "61",
    )
    healthy = {**export, "outputs": {"parameters": [{"name": "suspect", "value": "false"}]}}
    assert backup_outcomes([healthy], "argocd-backup-1") == []


def _run_step(tmp_path, monkeypatch, workflow: dict, name: str, **kw: str) -> dict:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(workflow))
    monkeypatch.setenv("IMAGEBUMP_WORKFLOW_FILE", str(path))
    out = notify_step.run.__wrapped__(workflow_name=name, **kw)  # the step's body, no output files
    return out


def test_a_resubmitted_workflow_and_a_redelivered_event_send_nothing_new(tmp_path, monkeypatch):
    with Receiver("webhook") as hook:
        destination = {"type": "webhook", "url": hook.url, "secret": "whsec-" + "q" * 20}
        (tmp_path / "notify.json").write_text(
            json.dumps({"destinations": {"hook": destination, "ops": destination}, "default": ["hook"]})
        )
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_FILE", str(tmp_path / "notify.json"))
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_LEDGER_DIR", str(tmp_path / "ledger"))
        event = json.dumps({"id": "ev-7", "detail": {}})
        first = _run_step(
            tmp_path, monkeypatch, ARGO, "image-update-x1", event=event, workflow_status="Failed"
        )
        assert first == {"sent": 3, "duplicate": 0, "failed": 0}
        # Argo's resubmit: a new Workflow, the same event; the SQS redelivery: the same again
        again = _run_step(
            tmp_path, monkeypatch, ARGO, "image-update-x2", event=event, workflow_status="Failed"
        )
        assert again == {"sent": 0, "duplicate": 3, "failed": 0}
        # a manual run (no event) resubmitted: Argo labels it with the Workflow it came from
        manual = _workflow(*ARGO["status"]["nodes"].values())
        _run_step(tmp_path, monkeypatch, manual, "image-update-m1", workflow_status="Failed")
        resubmitted = _workflow(
            *ARGO["status"]["nodes"].values(),
            labels={"workflows.argoproj.io/resubmitted-from-workflow": "image-update-m1"},
        )
        last = _run_step(tmp_path, monkeypatch, resubmitted, "image-update-m2", workflow_status="Failed")
        assert last["sent"] == 0 and last["duplicate"] == 3
    assert len(hook.received) == 6  # the event's 3, and the manual run's 3 (another event)
    assert len({r.headers["X-Imagebump-Delivery"] for r in hook.received}) == 6


def test_a_rule_naming_an_unconfigured_destination_does_not_stop_the_others(tmp_path, monkeypatch):
    with Receiver("webhook") as hook:
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_FILE", str(tmp_path / "absent"))
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_WEBHOOK_URL", hook.url)
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_WEBHOOK_SECRET", "whsec-" + "q" * 20)
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_LEDGER_DIR", str(tmp_path / "ledger"))
        out = _run_step(tmp_path, monkeypatch, ARGO, "image-update-x1", event='{"id": "ev-8"}')
    assert out == {"sent": 1, "duplicate": 0, "failed": 2}  # held sent; the two routed to "ops" counted
    assert [r.json["outcome"] for r in hook.received] == ["held"]


@pytest.fixture()
def s3_bucket(moto):
    s3 = moto.client("s3")
    name = f"ledger-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    return s3, name


def test_the_s3_ledger_claims_each_key_once_with_a_conditional_put(s3_bucket):
    s3, bucket = s3_bucket
    ledger = S3Ledger(s3, bucket)
    assert ledger.claim("k1") is True
    assert ledger.claim("k1") is False  # 412 Precondition Failed: someone holds it
    assert S3Ledger(s3, bucket).claim("k1") is False  # another pod, the same record
    ledger.release("k1")  # a send that failed for good gives it back
    assert ledger.claim("k1") is True
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["imagebump/notifications/k1"]


_kinds = st.sampled_from(["committed", "pr-opened", "held", "live", "mismatch", "failed", "backup-suspect"])
_outcome = st.builds(
    Outcome,
    kind=_kinds,
    event=st.sampled_from(["ev-1", "ev-2"]),
    target=st.sampled_from(["r/a", "r/b"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    runs=st.lists(st.lists(_outcome, max_size=6), min_size=1, max_size=5),
    statuses=st.lists(st.sampled_from([200, 500, 503]), min_size=1),
)
def test_any_mix_of_retries_redeliveries_and_resubmits_sends_each_outcome_once_per_destination(
    runs, statuses, tmp_path_factory
):
    """Whatever the runs (a resubmit, a redelivery: the same outcomes again) and however the
    receiver answers, no key is ever delivered twice, and every key a run saw was delivered once
    unless every attempt for it failed; nothing raises."""
    ledger = FileLedger(tmp_path_factory.mktemp("ledger"))
    cfg = config.parse(
        {
            "destinations": {
                "a": {"type": "slack", "url": "http://a"},
                "b": {"type": "teams", "url": "http://b"},
            }
        }
    )
    answers = iter(statuses * 1000)
    delivered: list[str] = []

    def post(url, body, headers, timeout):
        status = next(answers)
        if status == 200:
            delivered.append(headers["X-Imagebump-Delivery"])
        return status

    for outcomes in runs:
        notify(outcomes, cfg, ledger, post=post, sleep=lambda s: None)
    assert len(delivered) == len(set(delivered))
    if 200 not in statuses or all(s == 200 for s in statuses):
        wanted = {m.key for run in runs for o in run for m in decide(o, cfg.routing)}
        assert set(delivered) == (wanted if 200 in statuses else set())


def test_a_failed_workflows_link_is_its_page_in_the_argo_ui_when_configured():
    from steps.notify.step import workflow_link

    assert workflow_link("image-update-x1", "imagebump", {}) == "image-update-x1"
    ui = {"IMAGEBUMP_ARGO_UI_URL": "https://argo.example.com/"}
    assert (
        workflow_link("image-update-x1", "imagebump", ui)
        == "https://argo.example.com/workflows/imagebump/image-update-x1"
    )


@pytest.mark.parametrize(
    ("repo_url", "link"),
    [
        ("https://github.com/acme/gitops", "https://github.com/acme/gitops/commit/c0ffee"),
        ("https://ghe.example.com/acme/gitops.git", "https://ghe.example.com/acme/gitops/commit/c0ffee"),
        ("http://127.0.0.1:8080/acme/gitops.git", "c0ffee"),  # a local remote has no page
        ("github.com/acme/gitops", "c0ffee"),
    ],
)
def test_a_commits_link_is_its_page_on_an_https_forge(repo_url, link):
    wf = _workflow(
        _node(
            "wf.resolve-image", "resolve-image", targets=json.dumps([{**TARGETS[0], "repo_url": repo_url}])
        ),
        _node("wf.update-target(0).update.edit-kustomize", "edit-kustomize", decision="update"),
        _node(
            "wf.update-target(0).update.commit-pr",
            "commit-pr",
            action="committed",
            **{"commit-sha": "c0ffee"},
        ),
    )
    (committed,) = image_outcomes(nodes_of(wf), "ev-1")
    assert (committed.kind, committed.fields["link"], committed.fields["commit"]) == (
        "committed",
        link,
        "c0ffee",
    )

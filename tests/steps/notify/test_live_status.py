"""``imagebump/live`` over a push's life (issue 36), against the GitHub fake: ``pending`` from
notify-verifying while verify-live watches the commit, then the exit handler's ``success`` (live) or
``failure`` (mismatch, timeout) on the same sha; the exit handler's own pending is the ledger's
``duplicate`` (the same key), so each status is set once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from steps.domain.models import Target
from steps.forge import github as gh
from steps.forge.pull_requests import GitHubForge
from steps.notify import config
from steps.notify import verifying as notify_verifying
from steps.notify.github import CONTEXT, STATES
from steps.notify.ledger import FileLedger
from steps.notify.step import notify
from steps.notify.verifying import mark_pending, pending_outcome
from steps.notify.workflow_outcomes import LIVE, image_outcomes
from steps.verify_live import step as verify_step
from tests.fixtures.github import GitHubFake

FAST = gh.RetryPolicy(max_retries=1, base_delay=0.0, max_delay=0.0, sleep=lambda s: None)
REPO = "https://github.com/acme/gitops"
SHA = "c" * 40
CFG = config.parse(
    {"destinations": {"gh": {"type": "github"}, "team": {"type": "slack", "url": "https://hooks.x/T"}}}
)
TARGET = Target(
    rule=0, repo_url=REPO, path="overlays/prod", env="prod", image="team/api", tag="1.4.2", order="none"
)


@pytest.fixture
def forge_for(github_fake: GitHubFake):
    token = next(iter(github_fake.tokens))
    settings_ = gh.GitHubSettings(api_url=github_fake.url, token=token)

    def make(repo_url: str) -> GitHubForge:
        _host, owner, repo = gh.parse_repo_url(repo_url)
        return GitHubForge(owner, repo, gh.client(settings_, retry=FAST), secrets=(token,))

    return make


def _node(name: str, template: str, phase: str = "Succeeded", **outputs: str) -> dict:
    params = [{"name": k, "value": v} for k, v in outputs.items()]
    return {"name": name, "templateName": template, "phase": phase, "outputs": {"parameters": params}}


def _finished(result: str, phase: str = "Succeeded") -> list[dict]:
    """The nodes the exit handler reads once verify-live ended with ``result``."""
    apps = [
        {"namespace": "argocd", "name": "api-prod", "state": result, "revision": SHA, "images": [":1.4.1"]}
    ]
    return [
        _node("wf.resolve-image", "resolve-image", targets=f"[{TARGET.model_dump_json()}]"),
        _node("wf.update-target(0).update.edit-kustomize", "edit-kustomize", decision="update"),
        _node("wf.update-target(0).update.commit-pr", "commit-pr", action="committed", **{"commit-sha": SHA}),
        _node("wf.update-target(0).notify-verifying", "notify-verifying", sent="1"),
        _node(
            "wf.update-target(0).verify-live",
            "verify-live",
            phase,
            result=result,
            applications=json.dumps(apps),
            **{"seconds-push-to-healthy": "42"},
        ),
    ]


def _states(fake: GitHubFake) -> list[str]:
    return [s["state"] for s in fake.statuses.get(("acme", "gitops", SHA), []) if s["context"] == CONTEXT]


@pytest.mark.parametrize(
    ("result", "phase", "final", "kind"),
    [
        ("live", "Succeeded", "success", "live"),
        ("mismatch", "Failed", "failure", "mismatch"),
        ("timeout", "Failed", "failure", "timeout"),
        # verify-live ended without a verdict worth a message: GitHub's pending still ends
        ("idle", "Succeeded", "success", "idle"),
        ("superseded", "Succeeded", "error", "not-verified"),
        ("no-application", "Succeeded", "error", "not-verified"),
        ("manual-sync", "Succeeded", "error", "not-verified"),
        ("off", "Succeeded", "error", "not-verified"),
    ],
)
def test_pending_while_verifying_then_the_verdict_on_the_same_commit(
    result, phase, final, kind, github_fake, forge_for, tmp_path
):
    ledger = FileLedger(tmp_path / "ledger")
    sent = []
    report = mark_pending(
        pending_outcome(TARGET, SHA, "ev-1"),
        CFG,
        ledger,
        forge_for=forge_for,
        post=lambda *a: sent.append(a) or 200,
    )
    assert report.counts == {"sent": 1} and sent == []  # GitHub only: Slack hears it from the exit handler
    assert _states(github_fake) == ["pending"]
    assert github_fake.status_of("acme", "gitops", SHA, CONTEXT) == "pending"

    outcomes = image_outcomes(_finished(result, phase), "ev-1")
    assert [o.kind for o in outcomes] == ["committed", kind]
    report = notify(outcomes, CFG, ledger, forge_for=forge_for, post=lambda *a: sent.append(a) or 200)
    # the exit handler's pending is the same key: a duplicate; its verdict is news; Slack gets both,
    # or only the commit when verify-live ended without a verdict (no noise in the team's channel)
    slack = [json.loads(a[1])["text"] for a in sent]
    assert len(slack) == (2 if kind in ("live", "mismatch", "timeout") else 1)
    assert report.counts == {"duplicate": 1, "sent": 1 + len(slack)}
    assert _states(github_fake) == ["pending", final]
    # a resubmitted Workflow sets nothing again
    notify(outcomes, CFG, ledger, forge_for=forge_for, post=lambda *a: 200)
    mark_pending(pending_outcome(TARGET, SHA, "ev-1"), CFG, ledger, forge_for=forge_for)
    assert _states(github_fake) == ["pending", final]


def test_every_end_of_verify_live_ends_the_pending_status():
    """Whatever verify-live ends with (each of its results, and ``off`` when no Argo CD is
    configured), the exit handler maps it to an outcome: ``imagebump/live`` never stays pending."""
    ends = (*verify_step.RESULTS, verify_step.OFF)
    assert set(LIVE) == set(ends)
    for result in ends:
        kinds = [o.kind for o in image_outcomes(_finished(result), "ev-1")]
        assert kinds[0] == "committed" and len(kinds) == 2 and kinds[1] in STATES


def test_nothing_without_a_github_destination_or_when_the_rule_routes_elsewhere(
    github_fake, forge_for, tmp_path
):
    slack_only = config.parse({"destinations": {"team": {"type": "slack", "url": "https://hooks.x/T"}}})
    assert (
        mark_pending(
            pending_outcome(TARGET, SHA, "ev-1"), slack_only, FileLedger(tmp_path), forge_for=forge_for
        ).counts
        == {}
    )
    routed = TARGET.with_settings(notify=["team"])  # the rule names Slack only
    assert (
        mark_pending(
            pending_outcome(routed, SHA, "ev-1"), CFG, FileLedger(tmp_path), forge_for=forge_for
        ).counts
        == {}
    )
    assert _states(github_fake) == []


def test_the_step_reads_its_destinations_and_never_fails(github_fake, tmp_path, monkeypatch):
    token = next(iter(github_fake.tokens))
    notify_file = tmp_path / "notify.yaml"
    notify_file.write_text(json.dumps({"destinations": {"gh": {"type": "github"}}}))
    for name, value in {
        "IMAGEBUMP_NOTIFY_FILE": str(notify_file),
        "IMAGEBUMP_NOTIFY_LEDGER_DIR": str(tmp_path / "ledger"),
        "IMAGEBUMP_GIT_TOKEN": token,
        "IMAGEBUMP_GITHUB_API_URL": github_fake.url,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("IMAGEBUMP_NOTIFY_LEDGER_BUCKET", raising=False)
    event = json.dumps({"id": "ev-7", "detail": {}})
    run = notify_verifying.run.__wrapped__  # the step's body, no output files
    out = run(target=TARGET, commit_sha=SHA, event=event, workflow_name="image-update-x")
    assert (out.sent, out.duplicate, out.failed) == (1, 0, 0)
    assert run(target=TARGET, commit_sha=SHA, event=event, workflow_name="image-update-x").duplicate == 1
    assert _states(github_fake) == ["pending"]
    # GitHub refuses (a wrong token): counted, logged without the token, never raised
    monkeypatch.setenv("IMAGEBUMP_GIT_TOKEN", "ghp_" + "0" * 36)
    monkeypatch.setenv("IMAGEBUMP_NOTIFY_LEDGER_DIR", str(tmp_path / "other"))
    out = run(target=TARGET, commit_sha="d" * 40, event=event, workflow_name="image-update-x")
    assert out.failed == 1 and out.sent == 0


def test_no_destination_file_sends_nothing(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("IMAGEBUMP_NOTIFY_FILE", str(tmp_path / "absent.yaml"))
    for name in (
        "IMAGEBUMP_NOTIFY_GITHUB",
        "IMAGEBUMP_NOTIFY_SLACK_URL",
        "IMAGEBUMP_NOTIFY_WEBHOOK_URL",
        "IMAGEBUMP_NOTIFY_TEAMS_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    out = notify_verifying.run.__wrapped__(target=TARGET, commit_sha=SHA)
    assert (out.sent, out.duplicate, out.failed) == (0, 0, 0)


def test_the_exit_handler_without_destinations_reads_no_workflow(tmp_path: Path, monkeypatch):
    """No destinations: the exit handler sends nothing and asks nothing of the Kubernetes API."""
    from steps.notify import step as notify_step

    monkeypatch.setenv("IMAGEBUMP_NOTIFY_FILE", str(tmp_path / "absent.yaml"))
    for name in (
        "IMAGEBUMP_NOTIFY_GITHUB",
        "IMAGEBUMP_NOTIFY_SLACK_URL",
        "IMAGEBUMP_NOTIFY_WEBHOOK_URL",
        "IMAGEBUMP_NOTIFY_TEAMS_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    asked = []
    monkeypatch.setattr(notify_step, "read_workflow", lambda name, env=None: asked.append(name) or {})
    out = notify_step.run.__wrapped__(workflow_name="image-update-x", workflow_status="Failed")
    assert out == {"sent": 0, "duplicate": 0, "failed": 0} and asked == []

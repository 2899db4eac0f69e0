"""The promotion gate's messages (issue 36): ``live-before`` once the environment before runs the
image live and Healthy, ``blocked`` when the gate blocks it — each once, however often the gate
evaluates (every minute in ``image-gate``, every 10 minutes in the sweep). Through
:func:`steps.gate.apply.apply_gates` (the gate's one call into notify), a real webhook receiver on
127.0.0.1 (its signature checked as a receiver does) and, for ``gate: check``, a comment on the open
pull request in the GitHub fake. The gate's reads are a stand-in for its reader seam (Argo CD's
Application as Argo CD writes it; tests/steps/gate/ read the simulated Argo CD for real).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from steps.domain.models import PromoteAfter, Target
from steps.forge import github as gh
from steps.forge.pull_requests import GitHubForge
from steps.gate.apply import apply_gates
from steps.notify.promotion import gate_outcomes
from steps.notify.signature import HEADER, verify
from steps.reconcile.decide import Verdict
from tests.fixtures.github import FakePull, GitHubFake
from tests.steps.notify.receivers import Receiver

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
REPO = "https://github.com/acme/gitops"
T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
SECRET = "whsec-" + "g" * 24
FAST = gh.RetryPolicy(max_retries=1, base_delay=0.0, max_delay=0.0, sleep=lambda s: None)


@dataclass(eq=False)
class Item:
    """The fields of a sweep item the gate reads (steps.reconcile.overlay_read.Item)."""

    sample: Target
    verdict: Verdict | None = None
    branch: str = ""
    branch_sha: str = ""
    no_pr: str = ""
    hold: str | None = None


class Reader:
    """The gate's reader seam: staging's one Application, deployed at T0 and ``health`` since."""

    def __init__(self) -> None:
        self.health = "Healthy"

    def deployments(self, target: Target) -> list[tuple[str, int | None, dict[str, Any]]]:
        app = {
            "status": {
                "history": [{"revision": "r1", "deployedAt": T0.isoformat()}],
                "health": {"status": self.health},
                "sync": {"status": "Synced", "revision": "r1"},
                "summary": {"images": [f"{IMAGE}:1.4.2"]},
            }
        }
        return [("argocd/api-staging", None, app)]

    def image_at(self, target: Target):
        return lambda revision: f"{IMAGE}:1.4.2" if revision == "r1" else None  # as kustomize renders it


def _items(gate: str = "wait", branch_sha: str = "") -> list[Item]:
    staging = Target(rule=0, repo_url=REPO, path="overlays/staging", env="staging", image=IMAGE, tag="1.4.2")
    production = Target(
        rule=1,
        repo_url=REPO,
        path="overlays/production",
        env="production",
        image=IMAGE,
        tag="1.4.2",
        mode="pr" if gate == "check" else "commit",
        gate=gate,
        promote_after=PromoteAfter(env="staging", soak_seconds=1800),
    )
    state = "proposed" if gate == "check" else "behind"
    return [
        Item(staging, Verdict("current", "current")),
        Item(
            production,
            Verdict(state, "1.4.1 → 1.4.2", update=production),
            branch="imagebump/production/api" if branch_sha else "",
            branch_sha=branch_sha,
        ),
    ]


@pytest.fixture
def destinations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def connect(**destinations: dict[str, str]) -> None:
        path = tmp_path / "notify.json"
        path.write_text(json.dumps({"destinations": destinations}))
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_FILE", str(path))
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_LEDGER_DIR", str(tmp_path / "ledger"))
        monkeypatch.delenv("IMAGEBUMP_NOTIFY_LEDGER_BUCKET", raising=False)

    return connect


def test_live_before_once_however_often_the_gate_evaluates(destinations) -> None:
    with Receiver("webhook") as hook:
        destinations(hooks={"type": "webhook", "url": hook.url, "secret": SECRET})
        reader = Reader()
        for minute in (1, 2, 3, 31, 32):  # waiting live, waiting live, …, promoted, promoted
            decisions = apply_gates(_items(), reader, T0 + timedelta(minutes=minute))
        assert [d.state for d in decisions.values()] == ["promoted"]
    (received,) = hook.received
    assert verify(SECRET, received.headers[HEADER], received.body, time.time())
    body = received.json
    assert body["outcome"] == "live-before" and not body["alarm"]
    assert body["target"] == f"{REPO}/overlays/production"
    assert body["fields"]["environment"] == "staging" and body["fields"]["image"] == f"{IMAGE}:1.4.2"
    assert body["fields"]["overlay"] == "overlays/production" and body["fields"]["since"] == T0.isoformat()


def test_blocked_once_and_nothing_while_nothing_is_live(destinations) -> None:
    with Receiver("slack") as slack:
        destinations(team={"type": "slack", "url": slack.url})
        apply_gates(_items(), None, T0)  # no Argo CD to read: waiting, nothing live — no message
        assert slack.received == []
        reader = Reader()
        reader.health = "Degraded"
        for minute in (5, 6, 7):
            decisions = apply_gates(_items(), reader, T0 + timedelta(minutes=minute))
        assert [(d.state, d.reason) for d in decisions.values()] == [("blocked", "degraded")]
    (received,) = slack.received
    text = received.json["text"]
    assert "blocked by the promotion gate" in text and "degraded" in text and "overlays/production" in text


def test_gate_check_comments_on_its_open_pull_request_once(
    destinations, github_fake: GitHubFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = next(iter(github_fake.tokens))
    monkeypatch.setenv("IMAGEBUMP_GIT_TOKEN", token)
    monkeypatch.setenv("IMAGEBUMP_GITHUB_API_URL", github_fake.url)
    pull = FakePull("acme", "gitops", 9, "imagebump/production/api", "main", "imagebump(production): api", "")
    github_fake.pulls.append(pull)
    settings = gh.GitHubSettings(api_url=github_fake.url, token=token)

    def forge_for(repo_url: str) -> GitHubForge:
        return GitHubForge("acme", "gitops", gh.client(settings, retry=FAST), secrets=(token,))

    destinations(gh={"type": "github"})
    for minute in (1, 2):
        apply_gates(_items("check", branch_sha="b" * 40), Reader(), T0 + timedelta(minutes=minute), forge_for)
    (comment,) = pull.comments
    assert "imagebump:notify:live-before:" in comment and "staging" in comment
    assert token not in comment


def test_without_github_credentials_github_is_left_out_not_failed(destinations, monkeypatch, caplog) -> None:
    for name in ("IMAGEBUMP_GIT_TOKEN", "IMAGEBUMP_GIT_TOKEN_FILE", "IMAGEBUMP_GITHUB_APP_ID"):
        monkeypatch.delenv(name, raising=False)
    with Receiver("webhook") as hook:
        destinations(gh={"type": "github"}, hooks={"type": "webhook", "url": hook.url, "secret": SECRET})
        from steps.notify.promotion import announce

        (target, decision) = _decided()
        report = announce([(target, decision, "imagebump/production/api")])
    assert report.counts == {"sent": 1} and len(hook.received) == 1


def _decided():
    from steps.gate.decide import GateDecision

    target = _items()[1].sample
    return target, GateDecision(
        "blocked", f"{IMAGE}:1.4.2", "staging", reason="rolled-back", note="staging x"
    )


def test_the_outcomes_are_pure_and_name_the_fields_of_the_catalogue() -> None:
    from steps.gate.decide import GateDecision
    from steps.notify.decide import FIELDS

    target, blocked = _decided()
    waiting = GateDecision("waiting", f"{IMAGE}:1.4.2", "staging", time_left=timedelta(minutes=5))
    live = GateDecision("waiting", f"{IMAGE}:1.4.2", "staging", time_left=timedelta(1), live_since=T0)
    found = gate_outcomes([(target, waiting, ""), (target, live, ""), (target, blocked, "")])
    assert [o.kind for o in found] == ["live-before", "blocked"]
    for outcome in found:
        assert set(FIELDS[outcome.kind]) <= set(outcome.fields)
        assert outcome.event == f"gate {IMAGE}:1.4.2"  # the key: the gated image, not the evaluation
    assert found[1].fields["reason"] == "rolled-back: staging x"

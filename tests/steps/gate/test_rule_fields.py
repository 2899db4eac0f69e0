"""The rule fields of the promotion gate (issue 35): ``promoteAfter: {env, soak}`` and
``gate: wait|check``, validated at load with the field named, and carried to every target."""

from __future__ import annotations

import pytest

from steps.domain.errors import RulesError
from steps.domain.models import Image
from steps.rules import load_rules
from steps.rules.schema import parse_soak

REGISTRY = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
IMAGE = Image(account="123456789012", region="us-west-2", repository="team/api", tag="1.0.0")


def _rules(gated: str) -> str:
    return f"""
- registryURI: {REGISTRY}/team/api
  githubRepository: https://github.com/o/r/stg
  env: staging
- registryURI: {REGISTRY}/team/api
  githubRepository: https://github.com/o/r/prd
  env: production
{gated}
"""


def test_promote_after_and_gate_reach_the_target():
    rules = load_rules(_rules("  promoteAfter: {env: staging, soak: 30m}\n  gate: check"))
    staging, production = rules.match(IMAGE).targets
    assert staging.settings.promote_after is None and staging.settings.gate == "wait"
    assert production.settings.promote_after is not None
    assert (production.settings.promote_after.env, production.settings.promote_after.soak_seconds) == (
        "staging",
        1800,
    )
    assert production.settings.gate == "check"


def test_gate_defaults_to_wait():
    rules = load_rules(_rules("  promoteAfter: {env: staging, soak: 90s}"))
    production = rules.match(IMAGE).targets[1]
    assert (production.settings.gate, production.settings.promote_after.soak_seconds) == ("wait", 90)


@pytest.mark.parametrize(
    ("gated", "field"),
    [
        ("  promoteAfter: {env: stage, soak: 30m}", "promoteAfter.env"),  # unknown env
        ("  promoteAfter: {env: production, soak: 30m}", "promoteAfter.env"),  # its own env
        ("  promoteAfter: {env: staging, soak: thirty}", "promoteAfter.soak"),  # bad duration
        ("  promoteAfter: {env: staging, soak: 30x}", "promoteAfter.soak"),
        ("  promoteAfter: {env: staging, soak: 30}", "promoteAfter.soak"),  # a number, no unit
        ("  promoteAfter: {env: staging, soak: 9999h}", "promoteAfter.soak"),  # beyond a week
        ("  promoteAfter: {env: staging}", "promoteAfter.soak"),
        ("  promoteAfter: {soak: 30m}", "promoteAfter.env"),
        ("  promoteAfter: {env: staging, soak: 30m, after: x}", "promoteAfter.after"),
        ("  promoteAfter: staging", "promoteAfter"),
        ("  promoteAfter: {env: staging, soak: 30m}\n  gate: later", "gate"),
        ("  gate: check", "gate"),  # no promoteAfter
        ("  promoteAfter: {env: staging, soak: 30m}\n  gate: check\n  mode: commit", "gate"),
    ],
)
def test_bad_gate_fields_are_refused_with_the_field_named(gated, field):
    with pytest.raises(RulesError) as caught:
        load_rules(_rules(gated))
    assert f"rule 1: {field}:" in str(caught.value)


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800), ("90s", 90), ("2h", 7200), ("1h30m", 5400)])
def test_soak_durations(text, seconds):
    assert parse_soak(text) == seconds


def _pushed(rules_text: str):
    from steps.aws.ecr import EcrImage
    from steps.resolve_image.decide import decide

    found = EcrImage(digest="sha256:" + "a" * 64, tags=("1.0.0",))
    return decide(IMAGE, manual=False, account="123456789012", found=found, rules=load_rules(rules_text))


def test_a_push_gives_a_gate_wait_target_no_commit_or_pr_and_says_why():
    out = _pushed(_rules("  promoteAfter: {env: staging, soak: 30m}"))
    assert [t.env for t in out.targets] == ["staging"]
    assert [s.rule for s in out.skipped] == [1] and "promoteAfter staging" in out.skipped[0].reason


def test_check_on_a_host_without_an_api_is_accepted_its_status_a_git_note():
    rules = load_rules(_rules("  promoteAfter: {env: staging, soak: 30m}\n  gate: check\n  provider: local"))
    production = rules.match(IMAGE).targets[1]
    assert (production.settings.gate, production.settings.provider) == ("check", "local")


def test_a_push_opens_the_gate_check_pr_at_once():
    out = _pushed(_rules("  promoteAfter: {env: staging, soak: 30m}\n  gate: check"))
    assert [(t.env, t.settings.gate) for t in out.targets] == [("staging", "wait"), ("production", "check")]


def test_the_short_evaluation_keeps_the_gated_rules_and_the_rules_they_wait_on():
    from steps.gate.apply import gated_rules

    text = _rules("  promoteAfter: {env: staging, soak: 30m}") + (
        f"- registryURI: {REGISTRY}/team/api\n  githubRepository: https://github.com/o/r/dev\n  env: dev\n"
    )
    subset = gated_rules(load_rules(text))
    assert [t.env for t in subset.match(IMAGE).targets] == ["staging", "production"]
    assert [t.rule for t in subset.match(IMAGE).targets] == [0, 1]


def test_the_outcomes_count_promotions_and_blocks_with_the_time_from_live():
    from datetime import UTC, datetime, timedelta

    from steps.gate.apply import outcomes
    from steps.gate.decide import GateDecision

    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    decisions = {
        1: GateDecision("promoted", "api:2", "staging", live_since=now - timedelta(minutes=31)),
        2: GateDecision(
            "blocked", "api:3", "staging", reason="degraded", decided_at=now - timedelta(seconds=20)
        ),
        3: GateDecision("waiting", "api:4", "staging", time_left=timedelta(minutes=3)),
    }
    got = sorted((o.result, o.env, o.seconds) for o in outcomes(decisions, now))
    assert got == [("blocked", "staging", 0.0), ("promoted", "staging", 1860.0)]


def test_a_block_is_counted_once_by_the_evaluation_of_the_minute_it_happened():
    """The evaluations are stateless (every minute, image-gate decides the same block again): the
    block counts only where the time it happened falls in that evaluation's last minute."""
    from datetime import UTC, datetime, timedelta

    from steps.gate.apply import outcomes
    from steps.gate.decide import GateDecision

    start = datetime(2026, 12, 1, 12, tzinfo=UTC)
    at = start + timedelta(minutes=3, seconds=12)  # Argo CD: Degraded since then
    blocked = {1: GateDecision("blocked", "api:3", "staging", reason="degraded", decided_at=at)}
    counted = [len(outcomes(blocked, start + timedelta(minutes=m, seconds=1))) for m in range(10)]
    assert counted == [0, 0, 0, 0, 1, 0, 0, 0, 0, 0]  # the first evaluation after it
    held = {1: GateDecision("blocked", "api:3", "staging", reason="held", decided_at=start)}
    assert outcomes(held, start) == []  # a hold's time is not recorded: the gauge shows it


def test_a_check_gate_promoted_is_counted_once_though_its_pull_request_stays_open():
    """gate: check: the pull request stays open (``proposed``) after the promotion, so every
    evaluation decides ``promoted`` again; it counts where the evaluation set the success status."""
    from datetime import UTC, datetime, timedelta
    from types import SimpleNamespace

    from steps.domain.models import PromoteAfter, Target
    from steps.forge.pull_requests import CommitStatus
    from steps.gate.apply import apply_gates, outcomes
    from steps.reconcile.decide import Verdict

    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    repo = "https://github.com/o/deploy"
    staging = Target(
        rule=0, repo_url=repo, path="staging", env="staging", image=f"{REGISTRY}/team/api", tag="2"
    )
    production = staging.with_settings(
        gate="check", promote_after=PromoteAfter(env="staging", soak_seconds=1800)
    ).model_copy(update={"rule": 1, "path": "production", "env": "production"})
    deployed = (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    app = {
        "status": {
            "history": [{"id": 0, "revision": "r1", "deployedAt": deployed}],
            "sync": {"status": "Synced", "revision": "r1"},
            "health": {"status": "Healthy", "lastTransitionTime": deployed},
            "summary": {"images": [f"{REGISTRY}/team/api:2"]},
        }
    }
    reader = SimpleNamespace(
        deployments=lambda _t: [("argocd/api-staging", None, app)],
        image_at=lambda _t: lambda _r: f"{REGISTRY}/team/api:2",
    )

    class Statuses:
        def __init__(self) -> None:
            self.set: dict[str, CommitStatus] = {}

        def statuses(self, sha: str) -> dict[str, CommitStatus]:
            return dict(self.set)

        def set_status(
            self, sha: str, *, state: str, context: str, description: str = "", **_: object
        ) -> bool:
            self.set[context] = CommitStatus(context, state, description)
            return True

    forge = Statuses()

    def evaluation() -> list:
        items = [
            SimpleNamespace(
                sample=staging, verdict=Verdict("current", ""), hold=None, branch="", branch_sha="", no_pr=""
            ),
            SimpleNamespace(
                sample=production,
                verdict=Verdict("proposed", "pull request open"),
                hold=None,
                branch="imagebump/production",
                branch_sha="c0ffee",
                no_pr="",
            ),
        ]
        return outcomes(apply_gates(items, reader, now, forge_for=lambda _url: forge), now)

    assert [(o.result, o.env) for o in evaluation()] == [("promoted", "staging")]
    assert forge.set["imagebump/soak: staging"].state == "success"
    assert evaluation() == []  # decided again, counted once

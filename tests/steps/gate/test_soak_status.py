"""``gate: check`` (issue 35): the pull request opens at once with the commit status
``imagebump/soak: ENV`` pending on its head commit; the gate's decision then sets success (or
failure) there — through the real commit-pr and the Forge seam, against the GitHub fake."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from steps.commit_pr import step as commit_pr
from steps.domain.models import PromoteAfter
from steps.forge import github as gh
from steps.forge.pull_requests import GitHubForge
from steps.gate.decide import GateDecision
from steps.gate.status import context, report_statuses
from tests.steps.commit_pr.support import overlay_files, plan, target

CONTEXT = "imagebump/soak: staging"
SINCE = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _env(git_env: str, outputs_dir: Path) -> None:
    pass


@pytest.fixture()
def gh_remote(make_remote, github_env):
    remote = make_remote(overlay_files("overlays/prod"))

    def ahead(owner: str, repo: str, base: str, head: str) -> int | None:
        try:
            return int(remote.git("rev-list", "--count", f"{base}..{head}").strip())
        except RuntimeError:
            return None

    github_env.ahead = ahead
    return remote, github_env


def _gated(remote, gate: str = "check"):
    return target(
        remote.url,
        mode="pr",
        provider="github",
        gate=gate,
        promote_after=PromoteAfter(env="staging", soak_seconds=1800),
    )


def _forge(fake, remote) -> GitHubForge:
    settings = gh.GitHubSettings(api_url=fake.url, token=next(iter(fake.tokens)))
    return GitHubForge.for_repo_url(remote.url, settings)


def test_check_opens_the_pr_at_once_pending_then_success_on_its_head_commit(gh_remote) -> None:
    remote, fake = gh_remote
    t = _gated(remote)
    out = commit_pr.run(t, plan())
    assert out.action == "pr-created"
    head = remote.rev(fake.pull(out.pr_number).head)  # the pull request's head commit
    assert head == out.commit_sha
    owner, repo = remote.name.split("/")
    assert fake.status_of(owner, repo, head, CONTEXT) == "pending"

    forge = _forge(fake, remote)
    waiting = GateDecision(
        "waiting", "api:1.1.0", "staging", time_left=timedelta(minutes=12), live_since=SINCE
    )
    assert report_statuses([(t, head, waiting)], lambda _url: forge) == {}  # pending already: nothing new
    promoted = GateDecision("promoted", "api:1.1.0", "staging", live_since=SINCE)
    assert report_statuses([(t, head, promoted)], lambda _url: forge) == {head: "success"}
    assert fake.status_of(owner, repo, head, CONTEXT) == "success"
    assert report_statuses([(t, head, promoted)], lambda _url: forge) == {}  # once


def test_a_blocked_soak_is_a_failure_status(gh_remote) -> None:
    remote, fake = gh_remote
    t = _gated(remote)
    out = commit_pr.run(t, plan())
    owner, repo = remote.name.split("/")
    blocked = GateDecision("blocked", "api:1.1.0", "staging", reason="degraded")
    forge = _forge(fake, remote)
    assert report_statuses([(t, out.commit_sha, blocked)], lambda _url: forge) == {out.commit_sha: "failure"}
    assert fake.status_of(owner, repo, out.commit_sha, CONTEXT) == "failure"


def test_a_target_without_check_sets_no_status(gh_remote) -> None:
    remote, fake = gh_remote
    out = commit_pr.run(target(remote.url, mode="pr", provider="github"), plan())
    owner, repo = remote.name.split("/")
    assert fake.status_of(owner, repo, out.commit_sha, CONTEXT) is None
    assert context("staging") == CONTEXT


def test_statuses_github_will_not_show_are_a_warning_and_the_pull_request_stands(gh_remote) -> None:
    """An App without "Commit statuses: read" gets 403 "Resource not accessible by integration" on the
    combined status: commit-pr still opens the pull request, the gate still decides; nothing is set."""
    remote, fake = gh_remote
    t = _gated(remote)
    fake.fail(
        "GET",
        r"/repos/[^/]+/[^/]+/commits/[^/]+/status",
        403,
        message="Resource not accessible by integration",
        times=10,
    )
    out = commit_pr.run(t, plan())
    assert out.action == "pr-created"
    owner, repo = remote.name.split("/")
    assert fake.status_of(owner, repo, out.commit_sha, CONTEXT) is None
    promoted = GateDecision("promoted", "api:1.1.0", "staging", live_since=SINCE)
    assert report_statuses([(t, out.commit_sha, promoted)], lambda _url: _forge(fake, remote)) == {}


def test_a_decision_already_there_stands_beyond_the_first_page_of_contexts(gh_remote) -> None:
    """GitHub pages a commit's combined status (30 contexts by default): imagebump's context on a
    later page is still found, so a waiting gate posts no pending over its success."""
    remote, fake = gh_remote
    t = _gated(remote)
    out = commit_pr.run(t, plan())
    forge = _forge(fake, remote)
    for i in range(120):  # other tools' checks, set before imagebump's decision
        assert forge.set_status(out.commit_sha, state="success", context=f"ci/check-{i:03d}")
    promoted = GateDecision("promoted", "api:1.1.0", "staging", live_since=SINCE)
    assert report_statuses([(t, out.commit_sha, promoted)], lambda _url: forge) == {out.commit_sha: "success"}
    waiting = GateDecision(
        "waiting", "api:1.1.0", "staging", time_left=timedelta(minutes=3), live_since=SINCE
    )
    assert report_statuses([(t, out.commit_sha, waiting)], lambda _url: forge) == {}
    owner, repo = remote.name.split("/")
    assert fake.status_of(owner, repo, out.commit_sha, CONTEXT) == "success"


@pytest.mark.parametrize(("reason", "stays"), [("degraded", True), ("mismatch", True), ("held", False)])
def test_a_failure_stays_on_the_commit_unless_a_person_lifted_their_hold(gh_remote, reason, stays) -> None:
    """An evaluation saw staging Degraded (failure); Argo CD later shows it Healthy, and a gate that
    lost its record would say success: the failure stays on that head commit (before: it flipped to
    success; a newer image is a new head commit, judged afresh). A person's hold is theirs to lift."""
    remote, fake = gh_remote
    t = _gated(remote)
    out = commit_pr.run(t, plan())
    forge = _forge(fake, remote)
    owner, repo = remote.name.split("/")
    blocked = GateDecision("blocked", "api:1.1.0", "staging", reason=reason)
    assert report_statuses([(t, out.commit_sha, blocked)], lambda _url: forge) == {out.commit_sha: "failure"}
    promoted = GateDecision("promoted", "api:1.1.0", "staging", live_since=SINCE)
    report_statuses([(t, out.commit_sha, promoted)], lambda _url: forge)
    assert fake.status_of(owner, repo, out.commit_sha, CONTEXT) == ("failure" if stays else "success")

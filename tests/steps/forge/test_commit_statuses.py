"""Commit statuses through the forge seam, against the GitHub fake (which answers as GitHub does:
the latest status per context in the combined status, 422 for an unknown state or commit)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steps.forge import github as gh
from steps.forge.pull_requests import STATUS_STATES, CommitStatus, GitHubForge, LocalForge
from tests.fixtures.github import GitHubFake

SHA = "a" * 40
FAST = gh.RetryPolicy(max_retries=1, base_delay=0.0, max_delay=0.0, sleep=lambda s: None)


@pytest.fixture
def forge(github_fake: GitHubFake) -> GitHubForge:
    token = next(iter(github_fake.tokens))
    settings_ = gh.GitHubSettings(api_url=github_fake.url, token=token)
    return GitHubForge("acme", "gitops", gh.client(settings_, retry=FAST), secrets=(token,))


def test_pending_then_success_is_what_the_commit_shows(forge: GitHubForge, github_fake: GitHubFake) -> None:
    assert forge.statuses(SHA) == {}
    assert forge.set_status(SHA, state="pending", context="imagebump/soak: staging", description="12m left")
    assert github_fake.status_of("acme", "gitops", SHA, "imagebump/soak: staging") == "pending"
    assert forge.set_status(SHA, state="success", context="imagebump/soak: staging", target_url="https://x/y")
    seen = forge.statuses(SHA)
    assert seen["imagebump/soak: staging"] == CommitStatus(
        context="imagebump/soak: staging", state="success", description="", target_url="https://x/y"
    )


def test_a_refused_status_is_a_warning_not_a_failure(forge: GitHubForge, github_fake: GitHubFake) -> None:
    # an unknown commit: GitHub answers 422 "No commit found for SHA"
    github_fake.bare = lambda o, r: None
    assert forge.set_status("not-a-sha", state="success", context="imagebump/live") is False
    with pytest.raises(ValueError):
        forge.set_status(SHA, state="done", context="imagebump/live")


def test_a_long_description_is_cut_to_githubs_limit(forge: GitHubForge, github_fake: GitHubFake) -> None:
    assert forge.set_status(SHA, state="pending", context="imagebump/live", description="x" * 500)
    assert len(forge.statuses(SHA)["imagebump/live"].description) == 140


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(STATUS_STATES)), max_size=8))
def test_the_latest_status_per_context_wins(history: list[tuple[str, str]]) -> None:
    with GitHubFake(tokens={"t0k"}) as fake:
        forge = GitHubForge(
            "acme", "gitops", gh.client(gh.GitHubSettings(api_url=fake.url, token="t0k"), retry=FAST)
        )
        for context, state in history:
            assert forge.set_status(SHA, state=state, context=context)
        expected = {context: state for context, state in history}
        assert {c: s.state for c, s in forge.statuses(SHA).items()} == expected


def test_a_host_without_an_api_sets_nothing() -> None:
    local = LocalForge("http://127.0.0.1:1/acme/gitops.git")
    assert local.set_status(SHA, state="success", context="imagebump/live") is False
    assert local.statuses(SHA) == {}


def test_a_pull_request_for_a_branch_github_does_not_know_yet_is_asked_again(
    forge: GitHubForge, github_fake: GitHubFake, monkeypatch
) -> None:
    """Right after a push GitHub may answer 422 ``head invalid`` (its replicas catch up in seconds; hub
    waits 9 s): asked again after a wait; still unknown after the waits, transient (exit 75)."""
    from steps.domain.errors import TransientError

    waited: list[float] = []
    monkeypatch.setattr(gh.CLOCK, "sleep", waited.append)
    invalid = [{"resource": "PullRequest", "field": "head", "code": "invalid"}]
    github_fake.fail(
        "POST", r"/repos/acme/gitops/pulls", 422, message="Validation Failed", errors=invalid, times=10
    )
    with pytest.raises(TransientError, match="head invalid"):
        forge.create_pr(head="imagebump/x", base="main", title="t", body="b")
    assert waited == [1.0, 2.0, 4.0]
    creates = [c for c in github_fake.calls if c.method == "POST" and c.path.endswith("/pulls")]
    assert len(creates) == 4

"""What a GitHub server says cannot stop or steer imagebump: rate limits of every shape, malformed
answers, and the 422 GitHub gives a ref moved concurrently (issues 30 items 10-11, 31 item 5).

Every wait goes through an injected clock (:class:`FakeClock`): no test sleeps. The GitHub fake
(tests/fixtures/github.py) answers the shapes the real GitHub sends: a secondary limit without
``Retry-After``, ``Retry-After: 0``, a reset in the past, garbage.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from steps.commit_pr import step as commit_pr
from steps.domain.errors import ImagebumpError, PermissionDeniedError, TransientError
from steps.forge import github as gh
from steps.forge.github_commits import RateLimitBudget
from steps.forge.pull_requests import GitHubForge
from tests.fixtures.github import GitHubFake
from tests.steps.commit_pr.support import overlay_files, plan, target, write_app_key

PULLS = r"/repos/acme/gitops/pulls"
NOW = 1_800_000_000.0


class FakeClock:
    """``now`` and ``sleep`` for :class:`steps.forge.github.RetryPolicy`: sleeping moves time on."""

    def __init__(self, now: float = NOW) -> None:
        self.t = now
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        assert seconds > 0 and math.isfinite(seconds)
        self.slept.append(seconds)
        self.t += seconds


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(gh, "CLOCK", fake)
    return fake


def _forge(fake: GitHubFake, retry: gh.RetryPolicy) -> GitHubForge:
    token = next(iter(fake.tokens))
    settings = gh.GitHubSettings(api_url=fake.url, token=token)
    return GitHubForge("acme", "gitops", gh.client(settings, retry=retry), secrets=(token,))


# ------------------------------------------------------------------------------- the pure rule


@pytest.mark.parametrize(
    "status, headers, message, retry_count, kind, wait",
    [
        pytest.param(403, {"retry-after": "30"}, "", 0, "retry-after", 30.0, id="retry-after"),
        pytest.param(403, {"retry-after": "0"}, "", 0, "retry-after", 1.0, id="retry-after-0-floor"),
        pytest.param(403, {"retry-after": "0"}, "", 3, "retry-after", 8.0, id="floor-doubles"),
        pytest.param(403, {"retry-after": "0"}, "", 12, "retry-after", 60.0, id="floor-capped"),
        pytest.param(
            429,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 40)},
            "API rate limit exceeded",
            0,
            "reset",
            40.0,
            id="primary-reset",
        ),
        pytest.param(
            403,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) - 500)},
            "",
            0,
            "reset",
            1.0,
            id="reset-in-the-past-floor",
        ),
        pytest.param(
            403,
            {"x-ratelimit-remaining": "4987"},
            "You have exceeded a secondary rate limit",
            0,
            "secondary",
            60.0,
            id="secondary-no-retry-after",
        ),
        pytest.param(
            403,
            {"x-ratelimit-remaining": "4987"},
            "You have exceeded a secondary rate limit",
            2,
            "secondary",
            240.0,
            id="secondary-backs-off",
        ),
        pytest.param(429, {}, "Too Many Requests", 0, "secondary", 60.0, id="429-without-headers"),
        pytest.param(403, {"retry-after": "abc"}, "", 0, "secondary", 60.0, id="retry-after-garbage"),
        pytest.param(403, {"retry-after": "1.5"}, "", 0, "secondary", 60.0, id="retry-after-fraction"),
        pytest.param(403, {"retry-after": "-5"}, "", 0, "secondary", 60.0, id="retry-after-negative"),
        pytest.param(
            403,
            {"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"},
            "",
            0,
            "retry-after",
            1.0,
            id="http-date-past",
        ),
        pytest.param(
            403,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "soon"},
            "",
            0,
            "secondary",
            60.0,
            id="reset-garbage",
        ),
    ],
)
def test_rate_limit_wait_follows_githubs_rules_with_a_floor(
    status: int, headers: dict, message: str, retry_count: int, kind: str, wait: float
) -> None:
    found = gh.rate_limit_wait(status, headers, message, NOW, retry_count)
    assert found is not None and found.kind == kind and found.wait == pytest.approx(wait)


def test_rate_limit_wait_says_none_for_a_refusal_and_far_for_a_reset_of_ten_to_the_fourteen() -> None:
    assert gh.rate_limit_wait(403, {"x-ratelimit-remaining": "4000"}, "Resource not accessible", NOW) is None
    assert gh.rate_limit_wait(422, {"retry-after": "5"}, "secondary rate limit", NOW) is None
    far = gh.rate_limit_wait(
        403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1" + "0" * 14}, "", NOW
    )
    assert far is not None and far.wait > 1e13 and math.isfinite(far.wait)


_HEADER_TEXT = st.one_of(
    st.text(max_size=40),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.datetimes().map(lambda d: d.strftime("%a, %d %b %Y %H:%M:%S GMT")),
)


@given(
    status=st.sampled_from([403, 429, 200, 404, 500]),
    retry_after=st.none() | _HEADER_TEXT,
    remaining=st.none() | st.sampled_from(["0", "1", "4999", "", "x"]),
    reset=st.none() | _HEADER_TEXT,
    message=st.sampled_from(["", "You have exceeded a secondary rate limit", "Bad credentials", "abuse"]),
    retry_count=st.integers(min_value=0, max_value=64),
)
@example(status=403, retry_after="0", remaining=None, reset=None, message="", retry_count=0)
@example(status=403, retry_after=None, remaining="0", reset=str(10**14), message="", retry_count=0)
def test_every_rate_limit_answer_gives_a_bounded_wait_never_an_exception(
    status, retry_after, remaining, reset, message, retry_count
) -> None:
    headers = {
        k: v
        for k, v in (
            ("retry-after", retry_after),
            ("x-ratelimit-remaining", remaining),
            ("x-ratelimit-reset", reset),
        )
        if v is not None
    }
    found = gh.rate_limit_wait(status, headers, message, NOW, retry_count)
    if status not in (403, 429):
        assert found is None
        return
    if found is None:  # only a 403 that names no limit at all is a refusal
        assert (
            status == 403
            and retry_after is None
            and remaining != "0"
            and not message.endswith(("limit", "abuse"))
        )
        return
    assert math.isfinite(found.wait)
    assert found.wait >= min(gh.SECONDARY_WAIT, gh.RATE_LIMIT_FLOOR * 2**retry_count) - 1e-9


@given(
    spent=st.lists(
        st.sampled_from(["0", "-3", "abc", "1.5", "1", "Thu, 01 Jan 1970 00:00:00 GMT"]), max_size=30
    )
)
def test_a_budget_is_spent_by_every_answer_so_it_runs_out(spent: list[str]) -> None:
    """However a server answers, the waits a budget allows add up to at most the budget, and each
    costs at least the floor: 30 s of budget is gone after a bounded number of answers."""
    clock = FakeClock()
    policy = RateLimitBudget(30.0, sleep=clock.sleep, clock=clock.now)
    retried = 0
    for retry_count, value in enumerate(spent):
        wait = gh.rate_limit_wait(403, {"retry-after": value}, "", clock.now(), retry_count)
        assert wait is not None
        if policy._spend(wait.wait, jitter=True) is None:  # noqa: SLF001 - the budget's own bookkeeping
            break
        retried += 1
    assert policy.waited <= 30.0 and retried <= 5  # 1 + 2 + 4 + 8 + 16 > 30


# ------------------------------------------------------------------------------ through githubkit


def test_secondary_limit_without_retry_after_waits_a_minute_and_is_not_a_permission_error(
    github_fake: GitHubFake, clock: FakeClock
) -> None:
    github_fake.secondary_limit("GET", PULLS, times=2)
    forge = _forge(github_fake, gh.RetryPolicy(max_wait=600))
    assert forge.find_open_pr("b", "main") is None
    assert [c.status for c in github_fake.calls_to("GET", PULLS)] == [403, 403, 200]
    assert clock.slept[0] >= 60 and clock.slept[1] >= 120  # a minute, then exponentially longer


def test_secondary_limit_that_persists_is_transient_within_the_budget(
    github_fake: GitHubFake, clock: FakeClock
) -> None:
    github_fake.secondary_limit("GET", PULLS, status=429, times=99)
    forge = _forge(github_fake, RateLimitBudget(500.0))
    with pytest.raises(TransientError) as info:
        forge.find_open_pr("b", "main")
    assert info.value.reason == "rate-limited"
    assert not isinstance(info.value, PermissionDeniedError)
    assert sum(clock.slept) <= 500 and len(github_fake.calls_to("GET", PULLS)) == 4  # 60+120+240 waited


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"Retry-After": "0"}, id="retry-after-0"),
        pytest.param({"Retry-After": "-30"}, id="retry-after-negative"),
        pytest.param({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1000"}, id="reset-in-the-past"),
    ],
)
def test_a_zero_wait_still_spends_the_budget_so_the_step_gives_up(
    github_fake: GitHubFake, clock: FakeClock, headers: dict
) -> None:
    github_fake.fail(
        "GET", PULLS, 403, times=999, headers=headers, message="You have exceeded a secondary rate limit"
    )
    budget = RateLimitBudget(120.0)
    with pytest.raises(TransientError) as info:
        _forge(github_fake, budget).find_open_pr("b", "main")
    assert info.value.reason == "rate-limited"
    calls = len(github_fake.calls_to("GET", PULLS))
    assert budget.waited <= 120 and sum(clock.slept) == pytest.approx(budget.waited)
    assert 2 <= calls <= 12  # a bounded number of requests, each wait at least the (doubling) floor


@pytest.mark.parametrize(
    "headers, message",
    [
        pytest.param({"Retry-After": "abc"}, "secondary rate limit", id="retry-after-abc"),
        pytest.param({"Retry-After": "1.5"}, "secondary rate limit", id="retry-after-1.5"),
        pytest.param({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, "secondary", id="http-date"),
        pytest.param(
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1" + "0" * 14},
            "API rate limit",
            id="reset-1e14",
        ),
        pytest.param(
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "tomorrow"}, "API rate limit", id="reset-word"
        ),
    ],
)
def test_malformed_rate_limit_headers_end_in_a_transient_error_never_a_traceback(
    github_fake: GitHubFake, clock: FakeClock, headers: dict, message: str
) -> None:
    github_fake.fail("GET", PULLS, 403, times=999, headers=headers, message=message)
    with pytest.raises(TransientError) as info:
        _forge(github_fake, RateLimitBudget(300.0)).find_open_pr("b", "main")
    assert info.value.reason == "rate-limited"


def test_malformed_retry_after_once_is_waited_out(github_fake: GitHubFake, clock: FakeClock) -> None:
    github_fake.fail("GET", PULLS, 429, headers={"Retry-After": "soon"}, message="slow down")
    assert _forge(github_fake, RateLimitBudget(300.0)).find_open_pr("b", "main") is None
    assert clock.slept and clock.slept[0] >= 60


def test_a_403_that_refuses_stays_a_permission_error_with_what_github_said(
    github_fake: GitHubFake, clock: FakeClock
) -> None:
    github_fake.fail(
        "GET",
        PULLS,
        403,
        headers={"Retry-After": "abc", "x-ratelimit-remaining": "10"},
        message="Resource not accessible by integration",
    )
    github_fake.fail("POST", PULLS, 403, message="Resource not accessible by integration")
    forge = _forge(github_fake, RateLimitBudget(300.0))
    forge.find_open_pr("b", "main")  # the garbage Retry-After marks a limit: waited out
    with pytest.raises(PermissionDeniedError, match="Resource not accessible by integration"):
        forge.create_pr(head="b", base="main", title="t", body="")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"<html>proxy login</html>", id="html"),
        pytest.param(b'{"number": "one"', id="truncated-json"),
        pytest.param(b"[1, 2, 3]", id="wrong-shape"),
    ],
)
def test_a_non_json_200_is_a_classified_error(github_fake: GitHubFake, clock: FakeClock, body: bytes) -> None:
    github_fake.garbage("POST", PULLS, body)
    with pytest.raises(TransientError) as info:
        _forge(github_fake, RateLimitBudget(300.0)).create_pr(head="b", base="main", title="t", body="")
    assert info.value.reason == "bad-answer"


# ------------------------------------------------------------------------------ installation tokens


@pytest.fixture()
def app_settings(github_fake: GitHubFake, tmp_path: Path) -> gh.GitHubSettings:
    write_app_key(tmp_path / "app.pem")
    github_fake.app_ids.add("777")
    gh.clear_token_cache()
    yield gh.GitHubSettings(
        api_url=github_fake.url,
        app_id="777",
        app_private_key=(tmp_path / "app.pem").read_text(),
        app_installation_id=42,
    )
    gh.clear_token_cache()


def _mint_answer(github_fake: GitHubFake, expires_at: str) -> None:
    github_fake.garbage(
        "POST",
        r"/app/installations/42/access_tokens",
        (b'{"token": "ghs_fractional", "expires_at": "%s", "permissions": {}}' % expires_at.encode()),
        status=201,
    )


def test_installation_token_expiry_with_fractional_seconds_is_read(
    github_fake: GitHubFake, app_settings: gh.GitHubSettings
) -> None:
    _mint_answer(github_fake, "2099-01-01T00:00:00.123Z")
    assert gh.installation_token(app_settings) == "ghs_fractional"
    assert gh.installation_token(app_settings) == "ghs_fractional"  # cached: one mint
    assert len(github_fake.calls_to("POST", r"/app/installations/42/access_tokens")) == 1


@pytest.mark.parametrize("expires_at", ["next week", "2099-13-45T99:99:99Z", "9999999-01-01T00:00:00Z"])
def test_installation_token_with_a_garbage_expiry_is_a_classified_error(
    github_fake: GitHubFake, app_settings: gh.GitHubSettings, expires_at: str
) -> None:
    _mint_answer(github_fake, expires_at)
    with pytest.raises(TransientError, match="installation token"):
        gh.installation_token(app_settings)


@given(st.text(max_size=40))
def test_expiry_parses_or_raises_value_error(text: str) -> None:
    try:
        gh.expiry(text)
    except ValueError:
        pass


# ------------------------------------------------------------------------------ commit-pr, end to end


@pytest.fixture()
def world(make_remote, github_env, git_server):
    remote = make_remote(overlay_files("overlays/prod"))
    github_env.serve_git(git_server)
    github_env.ahead = lambda o, r, b, h: 1
    return remote, github_env


@pytest.fixture(autouse=True)
def _env(git_env: str, outputs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "IMAGEBUMP_PUSH_ATTEMPTS",
        "IMAGEBUMP_REQUIRE_VERIFIED",
        "IMAGEBUMP_GITHUB_RATE_LIMIT_BUDGET",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("commit_method", ["git", "api"])
def test_commit_pr_sits_out_a_secondary_limit_without_retry_after_and_exits_75_when_the_budget_is_gone(
    world, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, commit_method: str
) -> None:
    remote, fake = world
    t = target(remote.url, mode="pr", provider="github", commit_method=commit_method)
    fake.secondary_limit("GET", r"/repos/[^/]+/[^/]+/pulls")
    out = commit_pr.run(t, plan())
    assert out.action == "pr-created" and clock.slept[0] >= 60

    monkeypatch.setenv("IMAGEBUMP_GITHUB_RATE_LIMIT_BUDGET", "200")
    fake.secondary_limit("GET", r"/repos/[^/]+/[^/]+/pulls", times=99)
    with pytest.raises(SystemExit) as exited:
        commit_pr.run(
            target(remote.url, mode="pr", provider="github", commit_method=commit_method, tag="1.2.0"),
            plan(new="1.2.0"),
        )
    assert exited.value.code == 75  # transient: Argo retries later; never 2 with "grant write access"


def test_commit_pr_api_ref_that_cannot_be_updated_is_a_lost_race_and_lands(world, clock: FakeClock) -> None:
    remote, fake = world
    fake.reference_cannot_be_updated(method="POST", path=r"/api/graphql", times=2)  # createCommitOnBranch
    out = commit_pr.run(target(remote.url, provider="github", commit_method="api"), plan())
    assert out.action == "committed" and remote.rev() == out.commit_sha
    assert [c.status for c in fake.calls_to("POST", r"/api/graphql")] == [422, 422, 200]


def test_the_fake_answers_a_concurrent_ref_move_as_github_does(world) -> None:
    """The fake's own lease: a branch moved before ``createCommitOnBranch`` (its ``expectedHeadOid``)
    is refused, and commit-pr treats it as the lost race it is."""
    remote, fake = world
    moved = {}

    def person_pushes() -> None:
        moved["sha"] = remote.commit_files({"README.md": "a person's push\n"}, "docs")

    fake.on("POST", r"/api/graphql", person_pushes)
    out = commit_pr.run(target(remote.url, provider="github", commit_method="api"), plan())
    assert out.action == "committed" and remote.rev() == out.commit_sha
    assert remote.git("merge-base", "--is-ancestor", moved["sha"], out.commit_sha) == ""


def test_every_error_a_github_answer_causes_is_ours(github_fake: GitHubFake, clock: FakeClock) -> None:
    """A table of hostile answers: each ends in one of our errors (an exit code), none escapes raw."""
    shapes = [
        ({"Retry-After": "abc"}, 403, "x"),
        ({"Retry-After": "99999999999999999999"}, 429, "x"),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "-1"}, 403, "x"),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1e9"}, 403, "x"),
        ({}, 403, "You have exceeded a secondary rate limit"),
    ]
    for headers, status, message in shapes:
        github_fake.fail("GET", PULLS, status, times=999, headers=headers, message=message)
        with pytest.raises(ImagebumpError):
            _forge(github_fake, RateLimitBudget(100.0)).find_open_pr("b", "main")
        github_fake.faults.clear()

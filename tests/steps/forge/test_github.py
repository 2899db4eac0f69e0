"""steps.forge.github and steps.forge.pull_requests through the real githubkit client against the local GitHub fake.

The fake (tests/fixtures/github.py) is a real HTTP server; githubkit parses its answers with its
own models (``.parsed_data``), so a field the models require and the fake forgot fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from steps.domain.errors import ConfigError, PermissionDeniedError, TransientError
from steps.forge import github as gh
from steps.forge.pull_requests import (
    GitHubForge,
    LocalForge,
    NoCommitsBetween,
    PullRequestExists,
    split_reviewers,
)
from tests.fixtures.github import GitHubFake

FAST = gh.RetryPolicy(base_delay=0.05, max_delay=0.2)


@pytest.fixture()
def forge(github_fake: GitHubFake) -> GitHubForge:
    token = next(iter(github_fake.tokens))
    settings = gh.GitHubSettings(api_url=github_fake.url, token=token)
    return GitHubForge("acme", "gitops", gh.client(settings, retry=FAST), secrets=(token,))


# --------------------------------------------------------------------------------- pure helpers


@pytest.mark.parametrize(
    "url, expected",
    [
        pytest.param("https://github.com/acme/gitops", ("github.com", "acme", "gitops"), id="github"),
        pytest.param("https://ghe.corp/acme/gitops.git", ("ghe.corp", "acme", "gitops"), id="dot-git"),
        pytest.param(
            "http://127.0.0.1:8080/acme/gitops/", ("127.0.0.1:8080", "acme", "gitops"), id="local-port"
        ),
    ],
)
def test_parse_repo_url(url: str, expected: tuple[str, str, str]) -> None:
    assert gh.parse_repo_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("https://github.com/acme", id="no-repo"),
        pytest.param("https://github.com/acme/gitops/tree/main", id="extra-path"),
        pytest.param("https://user:ghp_secret@github.com/acme/gitops", id="credentials"),
        pytest.param("git@github.com:acme/gitops.git", id="ssh"),
    ],
)
def test_parse_repo_url_refuses(url: str) -> None:
    with pytest.raises(ConfigError, match="https://HOST/OWNER/REPO") as info:
        gh.parse_repo_url(url)
    assert "ghp_secret" not in str(info.value)


def test_split_reviewers() -> None:
    assert split_reviewers(["alice", "@bob", "acme/sre", "team:platform", " "]) == (
        ["alice", "bob"],
        ["sre", "platform"],
    )


@pytest.mark.parametrize(
    "env, message",
    [
        pytest.param({}, "no GitHub credentials", id="nothing"),
        pytest.param(
            {"IMAGEBUMP_GIT_TOKEN": "t", "IMAGEBUMP_GITHUB_API_URL": "ftp://x"}, "not an http", id="url"
        ),
        pytest.param({"IMAGEBUMP_GITHUB_APP_ID": "1"}, "half configured", id="half-app"),
        pytest.param(
            {
                "IMAGEBUMP_GITHUB_APP_ID": "1",
                "IMAGEBUMP_GITHUB_APP_INSTALLATION_ID": "2",
                "IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE": "/nonexistent/key.pem",
            },
            "cannot read",
            id="no-key",
        ),
    ],
)
def test_settings_refuse(env: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        gh.GitHubSettings.from_env(env)


def test_settings_from_env_token_file_and_ghe_url(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("ghp_fromfile\n")
    settings = gh.GitHubSettings.from_env(
        {
            "IMAGEBUMP_GIT_TOKEN_FILE": str(tmp_path / "token"),
            "IMAGEBUMP_GITHUB_API_URL": "https://ghe.corp/api/v3/",
        }
    )
    assert settings.token == "ghp_fromfile" and settings.api_url == "https://ghe.corp/api/v3"
    assert "ghp_fromfile" not in repr(settings) and not settings.uses_app


# ------------------------------------------------------------------------------- pull requests


def test_create_find_update_label_review(forge: GitHubForge, github_fake: GitHubFake) -> None:
    assert forge.find_open_pr("imagebump/prod/x", "main") is None
    pr = forge.create_pr(head="imagebump/prod/x", base="main", title="bump", body="body")
    assert (pr.number, pr.state, pr.head, pr.base) == (1, "open", "imagebump/prod/x", "main")
    assert pr.url.endswith("/acme/gitops/pull/1")
    found = forge.find_open_pr("imagebump/prod/x", "main")
    assert found is not None and found.number == 1 and found.title == "bump"
    assert forge.find_open_pr("imagebump/prod/y", "main") is None
    updated = forge.update_pr(1, title="bump 2", body="body 2")
    assert (updated.title, updated.body) == ("bump 2", "body 2")
    forge.add_labels(1, ["imagebump"])
    forge.add_labels(1, ["imagebump", "prod"])
    forge.request_reviewers(1, ["alice", "acme/sre"])
    pull = github_fake.pull(1)
    assert (
        pull.labels == ["imagebump", "prod"]
        and pull.reviewers == ["alice"]
        and pull.team_reviewers == ["sre"]
    )


def test_closed_pr_is_not_found_and_a_new_one_can_be_opened(
    forge: GitHubForge, github_fake: GitHubFake
) -> None:
    forge.create_pr(head="b", base="main", title="t", body="")
    github_fake.close(1, merged=True)
    assert forge.find_open_pr("b", "main") is None
    assert forge.create_pr(head="b", base="main", title="t", body="").number == 2


def test_no_commits_between_and_already_exists(forge: GitHubForge, github_fake: GitHubFake) -> None:
    github_fake.no_commits()
    with pytest.raises(NoCommitsBetween, match="No commits between"):
        forge.create_pr(head="b", base="main", title="t", body="")
    forge.create_pr(head="b", base="main", title="t", body="")
    with pytest.raises(PullRequestExists):
        forge.create_pr(head="b", base="main", title="t", body="")


def test_server_error_once_is_retried(forge: GitHubForge, github_fake: GitHubFake) -> None:
    github_fake.server_error("POST", r"/repos/acme/gitops/pulls", status=503)
    assert forge.create_pr(head="b", base="main", title="t", body="").number == 1
    assert [c.status for c in github_fake.calls_to("POST", r"/repos/acme/gitops/pulls")] == [503, 201]


def test_server_error_persisting_is_transient(forge: GitHubForge, github_fake: GitHubFake) -> None:
    github_fake.server_error("GET", r"/repos/acme/gitops/pulls", status=500, times=99)
    with pytest.raises(TransientError) as info:
        forge.find_open_pr("b", "main")
    assert info.value.reason == "server-error"
    assert len(github_fake.calls_to("GET", r"/repos/acme/gitops/pulls")) == FAST.max_retries + 1


@pytest.mark.parametrize("status", [pytest.param(403, id="403"), pytest.param(429, id="429")])
def test_secondary_rate_limit_honours_retry_after(
    forge: GitHubForge, github_fake: GitHubFake, status: int
) -> None:
    github_fake.rate_limit("GET", r"/repos/acme/gitops/pulls", status=status, retry_after=1)
    assert forge.find_open_pr("b", "main") is None
    assert [c.status for c in github_fake.calls_to("GET", r"/repos/acme/gitops/pulls")] == [status, 200]


def test_primary_rate_limit_waits_for_a_near_reset(forge: GitHubForge, github_fake: GitHubFake) -> None:
    github_fake.rate_limit("PATCH", r"/repos/acme/gitops/pulls/1", retry_after=None, reset_in=1)
    forge.create_pr(head="b", base="main", title="t", body="")
    assert forge.update_pr(1, title="t2", body="").title == "t2"


def test_rate_limit_reset_far_away_fails_as_transient_at_once(
    forge: GitHubForge, github_fake: GitHubFake
) -> None:
    github_fake.rate_limit("GET", r"/repos/acme/gitops/pulls", retry_after=None, reset_in=3600)
    with pytest.raises(TransientError) as info:
        forge.find_open_pr("b", "main")
    assert info.value.reason == "rate-limited"
    assert len(github_fake.calls) == 1


def test_bad_token_is_permission_denied_without_the_token(github_fake: GitHubFake) -> None:
    settings = gh.GitHubSettings(api_url=github_fake.url, token="ghp_wrong_token_123")
    forge = GitHubForge("acme", "gitops", gh.client(settings, retry=FAST), secrets=("ghp_wrong_token_123",))
    with pytest.raises(PermissionDeniedError) as info:
        forge.find_open_pr("b", "main")
    assert info.value.reason == "refused"
    assert "ghp_wrong_token_123" not in str(info.value)
    assert "Bad credentials" in str(info.value)  # what GitHub said, passed on: no field carries it


def test_reviewer_refused_is_a_warning_not_a_failure(
    forge: GitHubForge, github_fake: GitHubFake, caplog: pytest.LogCaptureFixture
) -> None:
    forge.create_pr(head="b", base="main", title="t", body="")
    github_fake.fail(
        "POST",
        r"/repos/acme/gitops/pulls/1/requested_reviewers",
        422,
        message="Reviews may only be requested from collaborators.",
    )
    forge.request_reviewers(1, ["stranger"])
    assert "collaborators" in caplog.text


def test_for_repo_url_reads_the_environment(github_env: GitHubFake, git_env: str) -> None:
    forge = GitHubForge.for_repo_url("https://github.example/acme/gitops")
    assert (forge.owner, forge.repo) == ("acme", "gitops")
    assert forge.find_open_pr("b", "main") is None
    assert github_env.calls[0].path == "/repos/acme/gitops/pulls"


# ---------------------------------------------------------------------------------- GitHub App


@pytest.fixture()
def app_env(github_fake: GitHubFake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitHubFake:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (tmp_path / "app.pem").write_bytes(pem)
    github_fake.app_ids.add("777")
    monkeypatch.setenv("IMAGEBUMP_GITHUB_API_URL", github_fake.url)
    monkeypatch.setenv("IMAGEBUMP_GITHUB_APP_ID", "777")
    monkeypatch.setenv("IMAGEBUMP_GITHUB_APP_INSTALLATION_ID", "42")
    monkeypatch.setenv("IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE", str(tmp_path / "app.pem"))
    monkeypatch.delenv("IMAGEBUMP_GIT_TOKEN", raising=False)
    monkeypatch.delenv("IMAGEBUMP_GIT_TOKEN_FILE", raising=False)
    gh.clear_token_cache()
    yield github_fake
    gh.clear_token_cache()


def test_app_auth_mints_an_installation_token_once_and_caches_it(app_env: GitHubFake) -> None:
    settings = gh.GitHubSettings.from_env()
    assert settings.uses_app
    first = GitHubForge.for_repo_url("https://github.example/acme/gitops")
    first.create_pr(head="b", base="main", title="t", body="")
    second = GitHubForge.for_repo_url("https://github.example/acme/gitops")
    assert second.find_open_pr("b", "main") is not None
    assert len(app_env.minted) == 1  # cached until it expires
    assert gh.installation_token(settings) == app_env.minted[0]
    mint = app_env.calls_to("POST", r"/app/installations/42/access_tokens")
    assert [c.status for c in mint] == [201]


def test_app_auth_with_an_unknown_app_is_permission_denied(app_env: GitHubFake) -> None:
    app_env.app_ids.clear()
    with pytest.raises(PermissionDeniedError, match="GitHub App 777"):
        gh.client()


def test_local_forge_is_the_branch() -> None:
    forge = LocalForge("http://127.0.0.1:9/acme/gitops.git", {"imagebump/x"})
    assert forge.find_open_pr("imagebump/y", "main") is None
    found = forge.find_open_pr("imagebump/x", "main")
    assert found is not None and found.url == "http://127.0.0.1:9/acme/gitops/tree/imagebump/x"
    assert found.number == 0
    assert forge.create_pr(head="imagebump/y", base="main", title="t", body="b").number == 0


# ------------------------------------------------------------------ one spelling of a repository


@pytest.mark.parametrize(
    "url, expected",
    [
        pytest.param("https://github.com/Acme/GitOps", "https://github.com/acme/gitops", id="github-case"),
        pytest.param(
            "HTTPS://GitHub.COM/acme/gitops.git/", "https://github.com/acme/gitops", id="host-git-slash"
        ),
        pytest.param(
            "https://github.com:443/acme/gitops", "https://github.com/acme/gitops", id="default-port"
        ),
        pytest.param("https://ghe.corp/Acme/GitOps", "https://ghe.corp/acme/gitops", id="enterprise-host"),
        pytest.param(
            "https://GIT.example/Acme/GitOps/", "https://git.example/Acme/GitOps", id="other-host-keeps-case"
        ),
        pytest.param(
            "http://127.0.0.1:8080/Acme/x.git", "http://127.0.0.1:8080/Acme/x", id="plain-git-server"
        ),
    ],
)
def test_repo_id_is_one_spelling_per_repository(url: str, expected: str, monkeypatch) -> None:
    """Owner and repository are case-insensitive on github.com and on the Enterprise host that
    ``IMAGEBUMP_GITHUB_API_URL`` names (``api.`` or ``/api/v3`` alike); elsewhere only the host is."""
    from steps.domain.repo_url import repo_id

    monkeypatch.setenv("IMAGEBUMP_GITHUB_API_URL", "https://ghe.corp/api/v3")
    assert repo_id(url) == expected
    assert repo_id(expected) == expected


def test_two_spellings_of_one_repository_are_one_target_key(monkeypatch) -> None:
    from steps.domain.models import Target

    monkeypatch.delenv("IMAGEBUMP_GITHUB_API_URL", raising=False)
    a = Target(rule=0, repo_url="https://github.com/Acme/gitops", path="apps/api", image="x")
    b = Target(rule=1, repo_url="https://github.com/acme/GitOps.git", path="apps/api", image="x")
    assert a.key == b.key == "https://github.com/acme/gitops/apps/api"
    assert a.repo_url == "https://github.com/Acme/gitops"  # shown as the rule writes it
    # the derived id survives the round trip through a workflow parameter and cannot be forged
    forged = {**a.model_dump(mode="json"), "repo_id": "https://github.com/other/repo"}
    assert Target.model_validate(forged).key == a.key


def test_the_open_pr_is_found_when_github_spells_the_owner_otherwise(
    github_env: GitHubFake, git_env: str
) -> None:
    """GitHub answers with the owner's canonical case (``Acme``) whatever case the rule wrote
    (``acme``): commit-pr adopts the open pull request instead of opening a second one."""
    github_env.name_repository("Acme/GitOps")
    canonical = GitHubForge.for_repo_url("https://github.example/Acme/GitOps")
    canonical.create_pr(head="imagebump/prod/x", base="main", title="bump", body="")
    assert github_env.pull(1).owner == "Acme"

    forge = GitHubForge.for_repo_url("https://github.example/acme/gitops")
    found = forge.find_open_pr("imagebump/prod/x", "main")
    assert found is not None and found.number == 1

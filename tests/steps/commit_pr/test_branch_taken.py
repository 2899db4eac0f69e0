"""A proposal branch a person pushed to is theirs: imagebump stops updating it, says so once, and
resumes when its pull request is merged or closed (issue 30 item 9).

Pure rule first (:mod:`steps.domain.branch_owner`, :func:`steps.git.objects.commit_facts`), then end
to end: a real git remote, and the GitHub fake, whose git database writes real commits with their
authorship (a person's web edit: author the person, committer GitHub), for ``commitMethod: git``
and ``api``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from steps.commit_pr import step as commit_pr
from steps.domain.branch_owner import (
    BRANCH_TAKEN,
    TAKEN_MARKER,
    WEB_FLOW_EMAIL,
    CommitFacts,
    foreign_commits,
    made_by_imagebump,
    taken_reason,
)
from steps.forge import github as gh
from steps.git.objects import commit_facts
from tests.steps.commit_pr.support import (
    IMAGE,
    PERSON,
    kustomization,
    overlay_files,
    plan,
    target,
    write_app_key,
)

FILE = "overlays/prod/kustomization.yaml"
ME = "imagebump@users.noreply.github.com"
TRAILER = f"\n\nImagebump-Image: {IMAGE}:1.1.0\n"


# ------------------------------------------------------------------------------------ the rule


def _c(message: str, author: str, committer: str, name: str = "x") -> CommitFacts:
    return CommitFacts("a" * 40, name, author, name, committer, message)


@pytest.mark.parametrize(
    "commit, api, mine",
    [
        pytest.param(_c("bump" + TRAILER, ME, ME), False, True, id="git-method-own"),
        pytest.param(
            _c("bump" + TRAILER, "9+app[bot]@users.noreply.github.com", WEB_FLOW_EMAIL),
            True,
            True,
            id="api-web-flow",
        ),
        pytest.param(_c("bump" + TRAILER, "ci@corp", "ci@corp"), True, True, id="api-personal-token"),
        pytest.param(_c("bump" + TRAILER, "ci@corp", "ci@corp"), False, False, id="git-rule-other-identity"),
        pytest.param(_c("bump" + TRAILER, ME, "dana@example.com"), False, False, id="amended-by-a-person"),
        pytest.param(
            _c("Update kustomization.yaml", "dana@example.com", WEB_FLOW_EMAIL), True, False, id="web-edit"
        ),
        pytest.param(_c("fix", ME, ME), False, False, id="own-identity-no-trailer"),
        pytest.param(
            _c("Merge branch 'main' into x", "dana@example.com", WEB_FLOW_EMAIL),
            True,
            False,
            id="update-branch-merge",
        ),
        pytest.param(CommitFacts("b" * 40), False, False, id="unread-oversized"),
    ],
)
def test_made_by_imagebump(commit: CommitFacts, api: bool, mine: bool) -> None:
    assert made_by_imagebump(commit, ME, api=api) is mine


_EMAILS = st.sampled_from([ME, WEB_FLOW_EMAIL, "dana@example.com", "", "IMAGEBUMP@users.noreply.github.com"])
_COMMITS = st.builds(
    CommitFacts,
    sha=st.just("c" * 40),
    author_email=_EMAILS,
    committer_email=_EMAILS,
    message=st.sampled_from(["bump" + TRAILER, "fix", "", "Imagebump-Image:", "x\nImagebump-Image: r:t\n"]),
)


@given(st.lists(_COMMITS, max_size=6), st.booleans())
def test_a_branch_is_imagebumps_only_while_every_commit_is(commits: list[CommitFacts], api: bool) -> None:
    foreign = foreign_commits(commits, ME, api=api)
    assert (not foreign) == all(made_by_imagebump(c, ME, api=api) for c in commits)
    for c in commits:
        if "Imagebump-Image: r" not in c.message and "Imagebump-Image: " + IMAGE not in c.message:
            assert c in foreign  # no trailer: never imagebump's
    if foreign:
        assert foreign[0].sha[:12] in taken_reason("b", foreign)


def _raw(author: bytes, committer: bytes, message: bytes, extra: bytes = b"") -> bytes:
    return (
        b"tree " + b"1" * 40 + b"\nparent " + b"2" * 40 + b"\nauthor " + author + b" 1700000000 +0000\n"
        b"committer " + committer + b" 1700000000 +0000\n" + extra + b"\n" + message
    )


def test_commit_facts_reads_the_header_and_no_message_can_forge_it() -> None:
    forged = b"fix\n\ncommitter imagebump <" + ME.encode() + b"> 1 +0000\nImagebump-Image: x:y\n"
    facts = commit_facts("d" * 40, _raw(b"Dana <dana@example.com>", b"Dana <dana@example.com>", forged))
    assert (facts.author_email, facts.committer_email, facts.parents) == ("dana@example.com",) * 2 + (1,)
    assert not made_by_imagebump(facts, ME)
    signed = _raw(
        b"A <a@b>", b"GitHub <noreply@github.com>", b"m", b"gpgsig -----BEGIN\n committer x <y>\n -----END\n"
    )
    assert commit_facts("e" * 40, signed).committer_email == WEB_FLOW_EMAIL


@given(st.binary(max_size=300))
@example(b"author \n\n")
@example(b"committer <\x00>\n")
def test_commit_facts_never_raises(raw: bytes) -> None:
    commit_facts("f" * 40, raw)


def test_who_is_escaped_and_bounded() -> None:
    facts = CommitFacts("a" * 40, "Eve\x1b]0;owned\x07", "eve@x", "Eve", "eve@x", "")
    assert "\x1b" not in facts.who() and "\\x1b" in facts.who()
    assert len(CommitFacts("a" * 40, "n" * 5000, "e@x").who()) <= 120


# ------------------------------------------------------------------------------ end to end, GitHub


@pytest.fixture(autouse=True)
def _env(git_env: str, outputs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "IMAGEBUMP_GIT_AUTHOR_NAME",
        "IMAGEBUMP_GIT_AUTHOR_EMAIL",
        "IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE",
        "IMAGEBUMP_PUSH_ATTEMPTS",
        "IMAGEBUMP_REQUIRE_VERIFIED",
        "IMAGEBUMP_GITHUB_RATE_LIMIT_BUDGET",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture()
def world(make_remote, github_env, git_server):
    remote = make_remote(overlay_files("overlays/prod"))
    github_env.serve_git(git_server)

    def ahead(owner: str, repo: str, base: str, head: str) -> int | None:
        try:
            return int(remote.git("rev-list", "--count", f"{base}..{head}").strip())
        except RuntimeError:
            return None

    github_env.ahead = ahead
    return remote, github_env


@pytest.fixture()
def as_app(github_env, git_token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    write_app_key(tmp_path / "app.pem")
    github_env.app_ids.add("777")
    github_env.next_installation_token = git_token
    github_env.tokens.clear()
    monkeypatch.delenv("IMAGEBUMP_GIT_TOKEN")
    monkeypatch.delenv("IMAGEBUMP_GIT_READ_TOKEN")
    monkeypatch.setenv("IMAGEBUMP_GITHUB_APP_ID", "777")
    monkeypatch.setenv("IMAGEBUMP_GITHUB_APP_INSTALLATION_ID", "42")
    monkeypatch.setenv("IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE", str(tmp_path / "app.pem"))
    gh.clear_token_cache()
    yield
    gh.clear_token_cache()


def _t(remote, method: str, tag: str = "1.1.0"):
    return target(remote.url, mode="pr", provider="github", commit_method=method, tag=tag)


def _owner_repo(remote) -> tuple[str, str]:
    _host, owner, repo = gh.parse_repo_url(remote.url)
    return owner, repo


def _person_web_edit(remote, fake, branch: str) -> str:
    owner, repo = _owner_repo(remote)
    fixed = kustomization("1.1.0") + "# reviewer: pin the sidecar too\n"
    return fake.person_edits(
        owner,
        repo,
        branch,
        {FILE: fixed},
        "Update kustomization.yaml",
        who=("Dana Reviewer", "dana@example.com"),
    )


def _person_git_push(remote, branch: str) -> str:
    fixed = kustomization("1.1.0") + "# reviewer: pin the sidecar too\n"
    return remote.commit_files({FILE: fixed}, "fix the overlay", branch=branch, author=PERSON)


@pytest.mark.parametrize(
    "method, how",
    [
        pytest.param("git", "web-edit", id="git-web-edit"),
        pytest.param("git", "git-push", id="git-git-push"),
        pytest.param("api", "web-edit", id="api-web-edit"),
        pytest.param("api", "git-push", id="api-git-push"),
    ],
)
def test_a_persons_commit_makes_the_branch_theirs_until_the_pr_is_closed(
    world, as_app, method: str, how: str
) -> None:
    remote, fake = world
    first = commit_pr.run(_t(remote, method), plan())
    assert first.action == "pr-created"
    own = commit_pr.run(_t(remote, method, "1.2.0"), plan(new="1.2.0"))
    assert own.action == "pr-updated"  # imagebump's own commit (either method) is never a person's
    branch = own.branch

    theirs = _person_web_edit(remote, fake, branch) if how == "web-edit" else _person_git_push(remote, branch)
    for tag in ("1.3.0", "1.4.0"):  # every later event: the same outcome, no push, no second comment
        out = commit_pr.run(_t(remote, method, tag), plan(new=tag))
        assert out.action == BRANCH_TAKEN and out.pr_number == first.pr_number and out.commit_sha == theirs
        assert remote.rev(branch) == theirs and "Dana Reviewer" in out.reason
    pull = fake.pull(first.pr_number)
    assert [TAKEN_MARKER in c for c in pull.comments] == [True]
    assert "1.4.0" not in pull.title  # the pull request's text is the person's to keep too

    fake.close(first.pr_number)  # closed: the branch is no living proposal, imagebump proposes afresh
    fresh = commit_pr.run(_t(remote, method, "1.4.0"), plan(new="1.4.0"))
    assert fresh.action == "pr-created" and fresh.pr_number != first.pr_number
    assert remote.read(FILE, ref=branch) == kustomization("1.4.0")


def test_a_taken_branch_merged_by_its_pr_lets_imagebump_propose_again(world) -> None:
    remote, fake = world
    first = commit_pr.run(_t(remote, "git"), plan())
    theirs = _person_git_push(remote, first.branch)
    assert commit_pr.run(_t(remote, "git", "1.2.0"), plan(new="1.2.0")).action == BRANCH_TAKEN
    remote.git("update-ref", "refs/heads/main", theirs)  # the PR merged (fast-forward)
    fake.close(first.pr_number, merged=True)
    again = commit_pr.run(_t(remote, "git", "1.2.0"), plan(old="1.1.0", new="1.2.0"))
    assert again.action == "pr-created"
    assert remote.git("merge-base", "--is-ancestor", theirs, again.commit_sha) == ""


def test_a_comment_github_refuses_leaves_the_outcome_standing(world) -> None:
    remote, fake = world
    first = commit_pr.run(_t(remote, "git"), plan())
    _person_git_push(remote, first.branch)
    fake.fail(
        "POST",
        r"/repos/[^/]+/[^/]+/issues/\d+/comments",
        403,
        message="Resource not accessible by integration",
    )
    out = commit_pr.run(_t(remote, "git", "1.2.0"), plan(new="1.2.0"))
    assert out.action == BRANCH_TAKEN and fake.pull(first.pr_number).comments == []
    commit_pr.run(_t(remote, "git", "1.3.0"), plan(new="1.3.0"))  # said on the next event instead
    assert len(fake.pull(first.pr_number).comments) == 1

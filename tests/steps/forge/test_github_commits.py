"""commit-pr with ``commitMethod: api``: Verified commits through GitHub's git database (issue 26).

The git remote is real (``git http-backend``); the GitHub API is the fake (tests/fixtures/github.py
and github_gitdb.py), whose git database writes into that same bare repository with git itself,
so what the tests read back with git is what a clone sees. The fake marks a commit verified
exactly when an App installation token created it with no author, committer or signature, and
enforces GitHub's secondary limits when a test asks (with shrunk windows, honest Retry-After).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from steps.commit_pr import step as commit_pr
from steps.domain.branches import branch_name
from steps.domain.errors import ConfigError, TransientError, TreeMismatch, UnverifiedCommit
from steps.forge import github as gh
from steps.rules import load_rules
from tests.steps.commit_pr.support import IMAGE, kustomization, overlay_files, plan, target, write_app_key

REG = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
FILE = "overlays/prod/kustomization.yaml"


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
    """A remote with one overlay; the fake's git database writes into its bare repository."""
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
    """Only the GitHub App's settings: its installation token reads, pushes and calls the API."""
    write_app_key(tmp_path / "app.pem")
    github_env.app_ids.add("777")
    github_env.next_installation_token = git_token  # what the git server accepts
    github_env.tokens.clear()  # the API accepts minted tokens only
    monkeypatch.delenv("IMAGEBUMP_GIT_TOKEN")
    monkeypatch.delenv("IMAGEBUMP_GIT_READ_TOKEN")
    monkeypatch.setenv("IMAGEBUMP_GITHUB_APP_ID", "777")
    monkeypatch.setenv("IMAGEBUMP_GITHUB_APP_INSTALLATION_ID", "42")
    monkeypatch.setenv("IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE", str(tmp_path / "app.pem"))
    gh.clear_token_cache()
    yield
    gh.clear_token_cache()


def _api(remote, **kw):
    kw.setdefault("provider", "github")
    return target(remote.url, commit_method="api", **kw)


def _mode_of(remote, ref: str, path: str) -> str:
    return remote.git("ls-tree", ref, "--", path).split()[0]


def _git_statuses(fake, method: str, what: str) -> list[int]:
    return [c.status for c in fake.calls if c.method == method and c.path.split("/git/")[-1].startswith(what)]


# ------------------------------------------------------------------------------------ rules


@pytest.mark.parametrize(
    "extra, field, message",
    [
        pytest.param(
            "commitMethod: api\n  provider: local\n", "commitMethod", "provider: github", id="api-local"
        ),
        pytest.param("commitMethod: svn\n", "commitMethod", "must be one of git, api", id="unknown"),
        pytest.param("requireVerified: maybe\n", "requireVerified", "true or false", id="not-bool"),
        pytest.param("requireVerified: true\n", "requireVerified", "needs commitMethod: api", id="with-git"),
    ],
)
def test_rules_refuse_bad_commit_method_fields(extra: str, field: str, message: str) -> None:
    text = (
        f"- registryURI: {REG}/team/ok\n  githubRepository: https://github.com/o/r/ok\n"
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/overlays/prod\n  {extra}"
    )
    with pytest.raises(ConfigError) as info:
        load_rules(text)
    assert "rule 1" in str(info.value) and field in str(info.value) and message in str(info.value)


def test_rules_carry_commit_method_and_require_verified_to_the_target() -> None:
    from steps.domain.models import Image

    rules = load_rules(
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/overlays/prod\n"
        "  commitMethod: api\n  requireVerified: true\n"
    )
    pushed = Image(account="123456789012", region="us-west-2", repository="team/api", tag="1.0.0")
    (found,) = rules.match(pushed).targets
    assert (found.settings.commit_method, found.settings.require_verified) == ("api", True)


def test_local_run_needs_no_token_when_the_github_app_is_configured(tmp_path: Path) -> None:
    from imagebump.commands.run import local_secrets

    app = {
        "IMAGEBUMP_GITHUB_APP_ID": "777",
        "IMAGEBUMP_GITHUB_APP_INSTALLATION_ID": "42",
        "IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE": str(tmp_path / "app.pem"),
    }
    assert local_secrets(app) == {"imagebump-git": {}}  # each step mints the App's token itself
    with pytest.raises(ConfigError, match="IMAGEBUMP_GITHUB_APP_ID"):
        local_secrets({k: v for k, v in app.items() if k != "IMAGEBUMP_GITHUB_APP_ID"})


def test_reads_use_the_app_installation_token_when_no_read_token_is_set(
    github_env, as_app, git_token: str
) -> None:
    auth = gh.read_auth()
    assert auth is not None and auth.token == git_token and github_env.minted == [git_token]


def test_requiring_verified_commits_refuses_commit_method_git(world, monkeypatch) -> None:
    remote, _fake = world
    monkeypatch.setenv("IMAGEBUMP_REQUIRE_VERIFIED", "true")
    with pytest.raises(ConfigError, match="commitMethod: git"):
        commit_pr.land(target(remote.url), plan())
    assert len(remote.log()) == 1


# ------------------------------------------------------------------------------ mode: commit


def test_commit_mode_api_lands_a_verified_commit_with_the_same_tree_git_computes(world, as_app) -> None:
    remote, fake = world
    before = remote.rev()
    out = commit_pr.run(_api(remote), plan())
    assert out.action == "committed" and out.verified == "true" and out.verification_reason == "valid"
    assert remote.rev() == out.commit_sha and remote.git("rev-parse", f"{out.commit_sha}^").strip() == before
    assert remote.read(FILE) == kustomization("1.1.0")
    # GitHub signed it: no author, committer or signature was sent
    (made,) = fake.gitdb.commits_created
    assert made["sha"] == out.commit_sha and made["given"] == [] and made["verified"]
    # two requests land it (issue 33): the tree proven, then createCommitOnBranch with its lease
    assert _git_statuses(fake, "POST", "trees") == [201]
    assert _git_statuses(fake, "POST", "commits") == []
    (mutation,) = [c for c in fake.calls if c.path.endswith("graphql")]
    assert mutation.body["variables"]["input"]["expectedHeadOid"] == before
    assert not [c for c in fake.calls if c.method == "PATCH"]


def test_commit_mode_api_lost_race_rebases_and_retries(world, as_app) -> None:
    remote, fake = world
    fake.on("POST", r"/api/graphql", lambda: remote.commit_files({"README.md": "someone\n"}))
    out = commit_pr.run(_api(remote), plan())
    assert out.action == "committed" and remote.rev() == out.commit_sha
    assert remote.log()[1] == "someone else's change"  # kept, below ours
    assert remote.read("README.md") == "someone\n" and remote.read(FILE) == kustomization("1.1.0")
    mutations = [c for c in fake.calls if c.path.endswith("graphql")]
    assert len(mutations) == 2  # the lease refused the first (expectedHeadOid), the second landed
    assert (
        mutations[1].body["variables"]["input"]["expectedHeadOid"] == remote.git("rev-parse", "HEAD^").strip()
    )


def test_commit_mode_api_a_commit_that_landed_before_a_502_is_committed_not_a_lost_race(
    world, as_app
) -> None:
    """GitHub may answer 502 after doing the write: the retried createCommitOnBranch then finds the
    branch moved by the very commit it asked for, which is committed (and verify-live follows)."""
    remote, fake = world
    before = remote.rev()
    fake.server_error("POST", r"/api/graphql", after=True)
    out = commit_pr.run(_api(remote), plan())
    assert out.action == "committed" and out.commit_sha == remote.rev()
    assert out.verified == "true"  # GitHub's verification of the commit it made
    assert remote.git("rev-parse", f"{out.commit_sha}^").strip() == before
    assert len(fake.gitdb.commits_created) == 1  # one commit, not a second on top
    assert remote.read(FILE) == kustomization("1.1.0")


def test_commit_mode_api_a_protected_branch_is_a_config_error_not_a_lost_race(world, as_app) -> None:
    """A branch protection or ruleset refusing the commit is no race: retrying cannot land it."""
    remote, fake = world
    before = remote.rev()
    refused = [{"type": "UNPROCESSABLE", "message": "1 of 1 required status check is expected."}]
    fake.fail("POST", r"/api/graphql", 200, errors=refused, times=5)
    with pytest.raises(ConfigError, match="protected"):
        commit_pr.land(_api(remote), plan())
    assert remote.rev() == before
    assert len([c for c in fake.calls if c.path.endswith("graphql")]) == 1


def test_a_401_just_after_the_token_was_minted_is_asked_again(world, as_app, monkeypatch) -> None:
    """GitHub's replicas may not know a new installation token for a few seconds (octokit retries a
    401 for 5 s after minting): the commit still lands. A 401 later is refused as before."""
    remote, fake = world
    waited: list[float] = []
    monkeypatch.setattr(gh.CLOCK, "sleep", waited.append)
    fake.fail("POST", r"/repos/[^/]+/[^/]+/git/trees", 401, message="Bad credentials")
    out = commit_pr.run(_api(remote), plan())
    assert out.action == "committed" and out.commit_sha == remote.rev()
    assert _git_statuses(fake, "POST", "trees") == [401, 201] and len(waited) == 1
    monkeypatch.setattr(gh, "minted_recently", lambda now: False)  # long after minting
    fake.fail("POST", r"/repos/[^/]+/[^/]+/git/trees", 401, message="Bad credentials")
    with pytest.raises(SystemExit) as refused:
        commit_pr.run(_api(remote), plan(old="1.1.0", new="1.2.0"))
    assert refused.value.code == 2
    assert _git_statuses(fake, "POST", "trees")[-1] == 401  # not asked again
    assert remote.read(FILE) == kustomization("1.1.0")


def test_commit_mode_api_tree_mismatch_moves_nothing(world, as_app) -> None:
    remote, fake = world
    before = remote.rev()
    fake.gitdb.alter_content = lambda text: text.replace("\n", "\r\n")
    with pytest.raises(TreeMismatch, match="git computes"):
        commit_pr.land(_api(remote), plan())
    assert remote.rev() == before and fake.gitdb.commits_created == []
    assert not [c for c in fake.calls if "/git/refs" in c.path or c.path.endswith("graphql")]


def test_commit_mode_api_personal_token_is_unverified_and_require_verified_refuses(
    world, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote, fake = world
    before = remote.rev()
    with pytest.raises(SystemExit) as exited:
        commit_pr.run(_api(remote, require_verified=True), plan())
    assert exited.value.code == 2
    assert remote.rev() == before and fake.gitdb.commits_created[0]["reason"] == "unsigned"
    with pytest.raises(UnverifiedCommit, match=r"reason: unsigned"):
        commit_pr.land(_api(remote, require_verified=True), plan())
    # without requireVerified it lands, and says it is not verified
    out = commit_pr.run(_api(remote), plan())
    assert out.action == "committed" and (out.verified, out.verification_reason) == ("false", "unsigned")


def _make_executable(remote, *paths: str) -> None:
    """Commit on main the same files with mode 100755 (trees rebuilt with ``git mktree``)."""

    def rebuild(tree: str, prefix: str) -> str:
        lines = []
        for line in remote.git("ls-tree", tree).splitlines():
            meta, name = line.split("\t", 1)
            mode, kind, oid = meta.split()
            full = prefix + name
            if kind == "tree" and any(p.startswith(full + "/") for p in paths):
                oid = rebuild(oid, full + "/")
            if kind == "blob" and full in paths:
                mode = "100755"
            lines.append(f"{mode} {kind} {oid}\t{name}\n")
        return remote.server.git(remote.name, "mktree", input="".join(lines).encode()).strip()

    tree = rebuild("main^{tree}", "")
    who = {"GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.com"}
    who |= {"GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}
    head = remote.server.git(
        remote.name, "commit-tree", tree, "-p", "main", "-m", "executable", env=who
    ).strip()
    remote.git("update-ref", "refs/heads/main", head)


def test_commit_mode_api_keeps_file_modes(world, as_app) -> None:
    remote, fake = world
    remote.commit_files({"overlays/prod/render.sh": "#!/bin/sh\nkustomize build .\n"})
    _make_executable(remote, FILE, "overlays/prod/render.sh")
    assert _mode_of(remote, "main", FILE) == "100755"

    out = commit_pr.run(_api(remote), plan())
    assert out.action == "committed" and remote.read(FILE) == kustomization("1.1.0")
    assert _mode_of(remote, "main", FILE) == "100755"
    assert _mode_of(remote, "main", "overlays/prod/render.sh") == "100755"


def test_rate_limit_is_waited_out_as_told_and_a_long_one_exits_75(
    world, as_app, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote, fake = world
    fake.rate_limit("POST", r"/api/graphql", status=403, retry_after=1)
    out = commit_pr.run(_api(remote), plan())
    assert out.action == "committed"
    assert [c.status for c in fake.calls if c.path.endswith("graphql")] == [403, 200]

    before = remote.rev()
    monkeypatch.setenv("IMAGEBUMP_GITHUB_RATE_LIMIT_BUDGET", "5")
    fake.rate_limit("POST", r"/repos/[^/]+/[^/]+/git/trees", status=429, retry_after=60)
    with pytest.raises(TransientError) as info:
        commit_pr.land(_api(remote, tag="1.2.0"), plan(old="1.1.0", new="1.2.0"))
    assert info.value.reason == "rate-limited"
    assert remote.rev() == before
    with pytest.raises(SystemExit) as exited:
        fake.rate_limit("POST", r"/repos/[^/]+/[^/]+/git/trees", status=429, retry_after=60)
        commit_pr.run(_api(remote, tag="1.2.0"), plan(old="1.1.0", new="1.2.0"))
    assert exited.value.code == 75


# ---------------------------------------------------------------------------------- mode: pr


def test_pr_mode_api_creates_then_stacks_one_commit_on_the_branch_with_a_lease(world, as_app) -> None:
    """Issue 33: the base did not move, so the update is one more commit on the branch's head
    (``createCommitOnBranch``, ``expectedHeadOid`` = that head): the same tree a rebuild proposes."""
    remote, fake = world
    first = commit_pr.run(_api(remote, mode="pr"), plan())
    assert first.action == "pr-created" and first.verified == "true"
    assert remote.rev(first.branch) == first.commit_sha and len(fake.open_pulls()) == 1
    assert _git_statuses(fake, "POST", "refs") == [201]
    fake.calls.clear()

    newer = commit_pr.run(_api(remote, mode="pr", tag="1.2.0"), plan(new="1.2.0"))
    assert newer.action == "pr-updated" and newer.pr_number == first.pr_number
    assert remote.rev(newer.branch) == newer.commit_sha and newer.verified == "true"
    assert remote.read(FILE, ref=newer.branch) == kustomization("1.2.0")
    assert remote.git("rev-parse", f"{newer.commit_sha}^").strip() == first.commit_sha  # stacked
    assert _same_as_rebuilt(remote, newer.branch)
    (mutation,) = [c for c in fake.calls if c.path.endswith("graphql")]
    assert "createCommitOnBranch" in mutation.body["query"]
    assert mutation.body["variables"]["input"]["expectedHeadOid"] == first.commit_sha
    assert _content_requests(fake) == 3  # the tree (its proof), createCommitOnBranch, PATCH pulls
    assert fake.open_pulls()[0].merged is False and len(fake.pulls) == 1

    again = commit_pr.run(_api(remote, mode="pr", tag="1.2.0"), plan(new="1.2.0"))
    assert again.action == "unchanged" and remote.rev(again.branch) == newer.commit_sha


def _same_as_rebuilt(remote, branch: str) -> bool:
    """The branch's tree is the newest base's with the overlay file alone replaced, at its mode: what
    a rebuild on the base proposes."""
    changed = remote.git("diff-tree", "-r", "--name-only", "main", branch).split()
    return changed == [FILE] and _mode_of(remote, branch, FILE) == _mode_of(remote, "main", FILE)


def test_pr_mode_api_rebuilds_the_branch_on_a_base_that_moved(world, as_app) -> None:
    remote, fake = world
    first = commit_pr.run(_api(remote, mode="pr"), plan())
    remote.commit_files({"README.md": "someone's change on the base\n"}, "docs")
    fake.calls.clear()

    newer = commit_pr.run(_api(remote, mode="pr", tag="1.2.0"), plan(new="1.2.0"))
    assert newer.action == "pr-updated" and newer.pr_number == first.pr_number
    assert remote.read(FILE, ref=newer.branch) == kustomization("1.2.0")
    assert remote.git("rev-list", "--count", f"main..{newer.branch}").strip() == "1"
    assert remote.git("rev-parse", f"{newer.commit_sha}^").strip() == remote.rev()  # on the newest base
    (mutation,) = [c for c in fake.calls if c.path.endswith("graphql") and "updateRefs" in c.body["query"]]
    (update,) = mutation.body["variables"]["refUpdates"]
    assert update["beforeOid"] == first.commit_sha and update["afterOid"] == newer.commit_sha
    assert _content_requests(fake) == 4  # tree, commit, updateRefs, PATCH pulls
    assert len(fake.pulls) == 1 and fake.pulls[0].state == "open"


def test_pr_mode_api_stacks_at_most_max_stacked_commits_then_rebuilds_as_one(world, as_app) -> None:
    from steps.commit_pr.stack import MAX_STACKED

    remote, fake = world
    first = commit_pr.run(_api(remote, mode="pr"), plan())
    for n in range(2, MAX_STACKED + 2):
        tag = f"1.{n}.0"
        out = commit_pr.run(_api(remote, mode="pr", tag=tag), plan(new=tag))
        assert out.action == "pr-updated" and out.pr_number == first.pr_number
        assert remote.read(FILE, ref=out.branch) == kustomization(tag)
        count = int(remote.git("rev-list", "--count", f"main..{out.branch}").strip())
        assert count == (n if n <= MAX_STACKED else 1) and _same_as_rebuilt(remote, out.branch)
    assert len(fake.pulls) == 1 and fake.pulls[0].state == "open"


def test_pr_mode_api_stacked_update_lost_to_a_persons_push_leaves_the_branch_theirs(world, as_app) -> None:
    remote, fake = world
    first = commit_pr.run(_api(remote, mode="pr"), plan())
    branch = first.branch
    theirs: list[str] = []
    fake.on(  # a person pushes between imagebump's read of the branch and its mutation
        "POST",
        r"/api/graphql",
        lambda: theirs.append(
            remote.commit_files({FILE: kustomization("1.3.0")}, "a human's fix", branch=branch)
        ),
    )
    out = commit_pr.run(_api(remote, mode="pr", tag="1.2.0"), plan(new="1.2.0"))
    assert out.action == "branch-taken" and out.pr_number == first.pr_number
    assert remote.rev(branch) == theirs[0] and remote.read(FILE, ref=branch) == kustomization("1.3.0")
    stale = [
        c for c in fake.calls if c.path.endswith("graphql") and "createCommitOnBranch" in c.body["query"]
    ]
    assert [c.body["variables"]["input"]["expectedHeadOid"] for c in stale][-1] == first.commit_sha
    assert fake.pulls[0].title != out.reason and len(fake.pulls[0].comments) == 1


def test_pr_mode_api_does_not_stack_on_a_branch_a_person_cut_back(world, as_app) -> None:
    """A person force-pushed the branch back to imagebump's first commit (dropping the second): the
    pull request's title still names the dropped commit, so nothing is stacked on what they left."""
    remote, fake = world
    first = commit_pr.run(_api(remote, mode="pr"), plan())
    second = commit_pr.run(_api(remote, mode="pr", tag="1.2.0"), plan(new="1.2.0"))
    assert remote.git("rev-parse", f"{second.commit_sha}^").strip() == first.commit_sha
    remote.git("update-ref", f"refs/heads/{first.branch}", first.commit_sha)  # the person's force-push
    fake.calls.clear()
    third = commit_pr.run(_api(remote, mode="pr", tag="1.3.0"), plan(new="1.3.0"))
    assert third.action == "pr-updated"
    assert remote.git("rev-parse", f"{third.commit_sha}^").strip() == remote.rev()  # rebuilt, as before
    assert any("updateRefs" in c.body["query"] for c in fake.calls if c.path.endswith("graphql"))


def test_pr_mode_api_require_verified_updates_are_rebuilt_over_rest_never_stacked(world, as_app) -> None:
    """``requireVerified``: no ref may move before GitHub said the commit is Verified, and
    ``createCommitOnBranch`` moves the branch in the same request: the update keeps the REST path."""
    remote, fake = world
    first = commit_pr.run(_api(remote, mode="pr", require_verified=True), plan())
    fake.calls.clear()
    newer = commit_pr.run(_api(remote, mode="pr", tag="1.2.0", require_verified=True), plan(new="1.2.0"))
    assert newer.action == "pr-updated" and newer.verified == "true"
    assert remote.git("rev-parse", f"{newer.commit_sha}^").strip() == remote.rev() != first.commit_sha
    queries = [c.body["query"] for c in fake.calls if c.path.endswith("graphql")]
    assert not any("createCommitOnBranch" in q for q in queries) and any("updateRefs" in q for q in queries)
    assert _git_statuses(fake, "POST", "commits") == [201]


def test_a_stacked_update_whose_tree_fails_its_proof_moves_nothing(world, as_app) -> None:
    remote, fake = world
    first = commit_pr.run(_api(remote, mode="pr"), plan())
    fake.gitdb.alter_content = lambda text: text.replace("\n", "\r\n")
    with pytest.raises(TreeMismatch, match="git"):
        commit_pr.land(_api(remote, mode="pr", tag="1.2.0"), plan(new="1.2.0"))
    assert remote.rev(first.branch) == first.commit_sha  # the proof failed before the branch moved
    assert not [
        c for c in fake.calls if c.path.endswith("graphql") and "createCommitOnBranch" in str(c.body)
    ][1:]


def test_a_stacked_commit_github_builds_differently_after_the_proof_is_taken_back(world, as_app) -> None:
    remote, fake = world
    first = commit_pr.run(_api(remote, mode="pr"), plan())
    alter = lambda text: text.replace("\n", "\r\n")  # noqa: E731
    fake.on("POST", r"/api/graphql", lambda: setattr(fake.gitdb, "alter_content", alter))
    with pytest.raises(TreeMismatch, match="git"):
        commit_pr.land(_api(remote, mode="pr", tag="1.2.0"), plan(new="1.2.0"))
    assert remote.rev(first.branch) == first.commit_sha  # moved back, with a lease
    assert fake.pulls[0].state == "open"


def test_the_fake_marks_a_pull_request_merged_once_its_head_is_reachable_from_its_base(world, as_app) -> None:
    """Why a PR update cannot move the branch to the base first: GitHub closes the pull request as
    merged as soon as its head is a commit of its base."""
    remote, fake = world
    first = commit_pr.run(_api(remote, mode="pr"), plan())
    assert fake.open_pulls()[0].merged is False
    db = _db(remote)
    db.move_with_lease(first.branch, remote.rev(), first.commit_sha)  # the branch onto the base's head
    (pull,) = fake.pulls
    assert pull.state == "closed" and pull.merged is True


def _db(remote):
    from steps.forge.github_commits import GitDatabase

    return GitDatabase.for_repo_url(remote.url, gh.GitHubSettings.from_env(), 60.0)


def test_pr_mode_api_branch_created_meanwhile_is_a_lost_race(world, as_app) -> None:
    remote, fake = world
    branch = branch_name(_api(remote, mode="pr"))
    fake.on("POST", r".*/git/refs", lambda: remote.git("update-ref", f"refs/heads/{branch}", remote.rev()))
    out = commit_pr.run(_api(remote, mode="pr"), plan())
    assert out.action == "pr-created" and remote.rev(branch) == out.commit_sha
    assert _git_statuses(fake, "POST", "refs") == [422]
    assert remote.read(FILE, ref=branch) == kustomization("1.1.0") and len(fake.pulls) == 1


def test_pr_mode_api_never_overwrites_what_someone_else_pushed_to_the_branch(world, as_app) -> None:
    remote, fake = world
    first = commit_pr.run(_api(remote, mode="pr"), plan())
    branch = first.branch
    theirs: list[str] = []
    fake.on(
        "POST",
        r"/api/graphql",  # the repository id query comes first, then the mutation: push in between
        lambda: theirs.append(
            remote.commit_files({FILE: kustomization("1.3.0")}, "a human's fix", branch=branch)
        ),
    )
    later = plan(new="1.2.0").model_copy(
        update={"pr_branch": branch, "pr_entry": first_entry(), "pr_decision": "update"}
    )
    out = commit_pr.run(_api(remote, mode="pr", tag="1.2.0"), later)
    # The lease fails; the next attempt finds a person's commit on the branch: it is theirs now.
    assert out.action == "branch-taken" and out.pr_number == first.pr_number
    assert remote.rev(branch) == theirs[0] and remote.read(FILE, ref=branch) == kustomization("1.3.0")


def first_entry():
    from steps.domain.models import ImagesEntry

    return ImagesEntry(name="api", newName=IMAGE, newTag="1.1.0")


def test_pr_mode_api_require_verified_by_environment_refuses_before_any_ref(
    world, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote, fake = world
    monkeypatch.setenv("IMAGEBUMP_REQUIRE_VERIFIED", "true")
    with pytest.raises(SystemExit) as exited:
        commit_pr.run(_api(remote, mode="pr"), plan())
    assert exited.value.code == 2
    assert remote.branches() == ["main"] and fake.pulls == []


# ------------------------------------------------------------------------------------ burst


@pytest.mark.slow
def test_burst_of_27_pr_mode_api_lands_completely_under_the_secondary_limits(
    make_remote, github_env, git_server, as_app
) -> None:
    """27 pushes into 27 overlays of one repository, PR mode, through the API, against a GitHub
    that enforces the secondary limits (a minute shrunk to 3 s, 15 content-creating requests in it)."""
    paths = [f"apps/app{i:02d}/overlays/prod" for i in range(27)]
    remote = make_remote(overlay_files(*paths))
    fake = github_env
    fake.serve_git(git_server)
    fake.ahead = lambda o, r, b, h: int(remote.git("rev-list", "--count", f"{b}..{h}").strip())
    limits = fake.enforce_secondary_limits(per_minute=15, per_hour=500, scale=0.05)
    lock = threading.Lock()
    results = {}

    def land(path: str):
        out = commit_pr.land(_api(remote, path=path, mode="pr", tag="1.0.1"), plan(path, new="1.0.1"))
        with lock:
            results[path] = out

    with ThreadPoolExecutor(max_workers=9) as pool:
        list(pool.map(land, paths))

    assert limits.limited > 0  # the limit was met, and waited out
    assert sorted(o.action for o in results.values()) == ["pr-created"] * 27
    assert all(o.verified == "true" for o in results.values())
    assert len(fake.pulls) == 27 and len({p.head for p in fake.pulls}) == 27
    for path, out in results.items():
        assert remote.read(f"{path}/kustomization.yaml", ref=out.branch) == kustomization("1.0.1")
        assert remote.git("rev-list", "--count", f"main..{out.branch}").strip() == "1"


def test_the_default_rate_limit_budget_fits_in_one_commit_pr_pod() -> None:
    """A wait GitHub asks for within the budget is sat out in the same attempt: the budget stays
    below commit-pr's rendered pod deadline, with room to clone, commit and push after it."""
    from pathlib import Path

    import yaml

    from steps.commit_pr.settings import DEFAULT_RATE_LIMIT_BUDGET

    root = Path(__file__).resolve().parents[3]
    rendered = yaml.safe_load((root / "manifests" / "workflows" / "image-update.yaml").read_text())
    (template,) = [t for t in rendered["spec"]["templates"] if t["name"] == "commit-pr"]
    assert 60 <= DEFAULT_RATE_LIMIT_BUDGET <= template["activeDeadlineSeconds"] - 90


# ------------------------------------------------------------------------------ issue 33: cost


def _content_requests(fake) -> int:
    """Content-creating requests as GitHub's secondary limit counts them: REST writes, GraphQL mutations
    (the App's installation token, minted once per step process, is not repository content)."""
    return sum(
        1
        for c in fake.calls
        if (c.method != "GET" and not c.path.endswith(("graphql", "access_tokens")))
        or (c.path.endswith("graphql") and "mutation" in str((c.body or {}).get("query", "")))
    )


def test_api_commit_costs_two_content_requests_and_a_new_pr_three(world, as_app) -> None:
    remote, fake = world
    out = commit_pr.run(_api(remote), plan())
    assert out.action == "committed" and out.verified == "true"
    assert _content_requests(fake) == 2  # the tree (its proof), createCommitOnBranch
    fake.calls.clear()
    created = commit_pr.run(_api(remote, mode="pr", tag="1.2.0"), plan(old="1.1.0", new="1.2.0"))
    assert created.action == "pr-created" and created.verified == "true"
    assert _content_requests(fake) == 3  # the branch at the base, createCommitOnBranch, the pull request
    assert remote.git("rev-list", "--count", f"main..{created.branch}").strip() == "1"
    assert remote.read(FILE, ref=created.branch) == kustomization("1.2.0")


def test_a_new_pr_branch_whose_commit_fails_the_tree_proof_is_deleted_and_gets_no_pr(world, as_app) -> None:
    remote, fake = world
    fake.gitdb.alter_content = lambda text: text.replace("\n", "\r\n")
    with pytest.raises(TreeMismatch, match="git"):
        commit_pr.land(_api(remote, mode="pr"), plan())
    branch = branch_name(_api(remote, mode="pr"))
    assert remote.git("for-each-ref", f"refs/heads/{branch}").strip() == ""  # deleted again
    assert fake.pulls == []  # nothing points a pull request at it


def test_the_fake_requires_expected_head_oid_and_refuses_a_moved_branch(world, as_app) -> None:
    """GitHub's schema: ``expectedHeadOid`` is ``GitObjectID!`` (required), and a branch whose head
    is not that commit is not committed on (docs.github.com/en/graphql/reference/input-objects
    #createcommitonbranchinput)."""
    remote, fake = world
    before = remote.rev()
    given = {
        "branch": {"repositoryNameWithOwner": remote.name, "branchName": "main"},
        "message": {"headline": "x"},
        "fileChanges": {"additions": [{"path": "a.txt", "contents": "eA=="}]},
    }
    query = "mutation($input: CreateCommitOnBranchInput!) { createCommitOnBranch(input: $input) { commit { oid } } }"
    _status, _headers, missing = fake.gitdb.graphql({"query": query, "variables": {"input": given}})
    assert missing.get("errors") and "data" not in missing
    stale = {**given, "expectedHeadOid": "1" * 40}
    _status, _headers, refused = fake.gitdb.graphql({"query": query, "variables": {"input": stale}})
    assert refused["errors"] and refused["data"]["createCommitOnBranch"] is None
    assert remote.rev() == before
    good = {**given, "expectedHeadOid": before}
    _status, _headers, made = fake.gitdb.graphql(
        {"query": query, "variables": {"input": good}}, installation=True
    )
    assert remote.rev() == made["data"]["createCommitOnBranch"]["commit"]["oid"]
    assert remote.git("rev-parse", "HEAD^").strip() == before

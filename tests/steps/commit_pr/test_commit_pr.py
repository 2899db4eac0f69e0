"""commit-pr against a real git http-backend remote (and the GitHub fake for provider: github)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from steps.commit_pr import step as commit_pr
from steps.commit_pr.decide import decide
from steps.commit_pr.message import (
    DEFAULT_TEMPLATE,
    commit_message,
    message_fields,
    validate_template,
)
from steps.commit_pr.settings import CommitPrSettings as Settings
from steps.domain.branches import MAX_BRANCH_LENGTH, branch_name
from steps.domain.errors import ConfigError, ImageNotFoundError, PermissionDeniedError
from steps.domain.models import ImagesEntry
from steps.domain.never_downgrade import guard_branch
from steps.forge import github as gh
from tests.steps.commit_pr.support import (
    DIGEST_A,
    IMAGE,
    IMAGEBUMP_AUTHOR,
    PERSON,
    imagebump_commit,
    kustomization,
    overlay_files,
    plan,
    target,
    write_app_key,
)

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _env(git_env: str, outputs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "IMAGEBUMP_GIT_AUTHOR_NAME",
        "IMAGEBUMP_GIT_AUTHOR_EMAIL",
        "IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE",
        "IMAGEBUMP_PUSH_ATTEMPTS",
    ):
        monkeypatch.delenv(name, raising=False)


# ---------------------------------------------------------------------------------------------- pure


def _t(**kw):
    return target("http://127.0.0.1:1/team/gitops", **kw)


def test_branch_name_is_stable_across_events_and_a_valid_ref() -> None:
    a = branch_name(_t(tag="1.1.0"))
    assert a == branch_name(_t(tag="9.9.9"))  # the tag never enters the name
    assert a.startswith("imagebump/prod/overlays-prod/team-api-")
    assert len(a) <= MAX_BRANCH_LENGTH
    subprocess.run(["git", "check-ref-format", f"refs/heads/{a}"], check=True)


@pytest.mark.parametrize(
    "other",
    [
        pytest.param({"env": "staging"}, id="env"),
        pytest.param({"path": "overlays/dev"}, id="path"),
        pytest.param({"image_name": "api-canary"}, id="image-name"),
    ],
)
def test_branch_name_differs_per_target(other: dict) -> None:
    assert branch_name(_t()) != branch_name(_t(**other))


def test_branch_name_of_odd_input_is_bounded_and_valid() -> None:
    name = branch_name(_t(env="Prod..EU/..", path="a/" + "Very Long Dir.lock/" * 20))
    assert len(name) <= MAX_BRANCH_LENGTH and ".." not in name
    subprocess.run(["git", "check-ref-format", f"refs/heads/{name}"], check=True)


@pytest.mark.parametrize(
    "template, reason",
    [
        pytest.param("{subject} {oops}", "template-unknown-field", id="unknown-field"),
        pytest.param("{0}", "template-positional-field", id="positional"),
        pytest.param("{subject", "template-syntax", id="syntax"),
        pytest.param("{new_tag:>>>}", "template-format", id="bad-spec"),
        pytest.param("  ", "template-empty", id="empty"),
    ],
)
def test_validate_template_refuses(template: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_template(template)
    assert (info.value.reason, info.value.field) == (reason, "IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE")


@pytest.mark.parametrize(
    "env",
    [
        pytest.param({"IMAGEBUMP_GIT_AUTHOR_EMAIL": "not-an-email"}, id="email"),
        pytest.param({"IMAGEBUMP_GIT_AUTHOR_NAME": "a <b>"}, id="name"),
        pytest.param({"IMAGEBUMP_PUSH_ATTEMPTS": "0"}, id="attempts"),
        pytest.param({"IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE": "{nope}"}, id="template"),
    ],
)
def test_settings_refuse_bad_env(env: dict) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env(env)
    assert info.value.field == next(iter(env))  # the setting to fix


def test_default_message_says_what_a_reviewer_needs() -> None:
    t, p = _t(), plan(new_digest=DIGEST_A)
    fields = message_fields(t, p, p.old, "main")
    text = commit_message(DEFAULT_TEMPLATE, fields)
    assert text.splitlines()[0] == "imagebump(prod): api 1.0.0 → 1.1.0 in overlays/prod"
    for needle in (
        IMAGE,
        "1.0.0 → 1.1.0",
        f"(none) → {DIGEST_A}",
        "2026-12-01T12:00:00+00:00",
        "prod",
        "overlays/prod/kustomization.yaml",
        t.event_id,
        "Produced by imagebump 0.1.0",
    ):
        assert needle in text
    custom = commit_message("bump {image_name} to {new} ({event_id})", fields)
    # whatever the template, imagebump's own commits end with its trailer (issue 23)
    assert custom == f"bump api to 1.1.0 ({t.event_id})\n\nImagebump-Image: {IMAGE}:1.1.0@{DIGEST_A}\n"
    assert text.endswith(f"\n\nImagebump-Image: {IMAGE}:1.1.0@{DIGEST_A}\n")


@pytest.mark.parametrize(
    "file_tag, order, expect_text, reason",
    [
        pytest.param("1.1.0", "push-time", False, "already sets api to 1.1.0", id="already-landed"),
        pytest.param("1.0.5", "push-time", False, "changed since the plan", id="moved-push-time"),
        pytest.param("1.2.0", "semver", False, "older version than the current 1.2.0", id="newer-semver"),
        pytest.param("1.0.5", "semver", True, "", id="older-semver-redecided"),
        pytest.param("1.0.5", "none", True, "", id="order-none"),
        pytest.param("1.0.0", "push-time", True, "", id="as-planned"),
    ],
)
def test_decide_rechecks_the_file(file_tag: str, order: str, expect_text: bool, reason: str) -> None:
    applied = decide(kustomization(file_tag), _t(order=order), plan())
    assert (applied.text is not None) == expect_text
    assert reason in applied.reason
    if expect_text:
        assert applied.text == kustomization("1.1.0")  # only the tag line changed, comment kept
    if "changed since" in reason:
        assert file_tag in applied.reason and "1.1.0" in applied.reason


def test_decide_without_the_entry_is_image_not_found() -> None:
    with pytest.raises(ImageNotFoundError, match="found: web"):
        decide(kustomization(name="web"), _t(), plan())


def _entry(tag: str) -> ImagesEntry:
    return ImagesEntry(name="api", newName=IMAGE, newTag=tag)


def _looked(
    branch: str, seen: str | None, new: str = "1.1.0", decision: str | None = "update", why: str = ""
):
    """A plan whose edit-kustomize looked at ``branch`` and saw ``seen`` proposed there."""
    return plan(new=new).model_copy(
        update={
            "pr_branch": branch,
            "pr_entry": _entry(seen) if seen else None,
            "pr_decision": decision if seen else None,
            "pr_reason": why,
        }
    )


@pytest.mark.parametrize(
    "plan_seen, decision, now, refused, reason",
    [
        pytest.param(None, None, None, False, "", id="no-branch-then-or-now"),
        pytest.param("1.0.5", "update", "1.0.5", False, "", id="older-proposal-as-planned"),
        pytest.param("1.1.0", "current", "1.1.0", False, "", id="same-entry-rebuilt-on-new-base"),
        pytest.param(
            "1.0.5", "update", "1.3.0", True, "now proposes api 1.3.0 (the plan saw 1.0.5)", id="moved"
        ),
        pytest.param(None, None, "1.3.0", True, "(the plan saw no proposal)", id="appeared"),
        pytest.param("1.3.0", "stale", "1.3.0", True, "newer", id="stale-verdict-stands"),
    ],
)
def test_guard_branch(plan_seen, decision, now, refused, reason) -> None:
    branch = branch_name(_t(mode="pr"))
    why = guard_branch(
        _looked(branch, plan_seen, decision=decision, why="it proposes a newer one"),
        branch,
        _entry(now) if now else None,
    )
    assert (why is not None) == refused, why
    assert reason in (why or "")
    if refused and "plan saw" in reason:
        assert "1.3.0" in why and "1.1.0" in why


def test_guard_branch_lets_a_plan_that_did_not_look_proceed() -> None:
    assert guard_branch(plan(), branch_name(_t(mode="pr")), _entry("9.9.9")) is None


# ----------------------------------------------------------------------------------- mode: commit


def test_commit_mode_commits_once_and_then_is_unchanged(make_remote) -> None:
    remote = make_remote(overlay_files("overlays/prod", "overlays/dev"))
    t, p = target(remote.url), plan()
    first = commit_pr.run(t, p)
    assert first.action == "committed" and first.commit_sha == remote.rev()
    assert remote.read("overlays/prod/kustomization.yaml") == kustomization("1.1.0")
    assert remote.read("overlays/dev/kustomization.yaml") == kustomization("1.0.0")
    assert remote.log()[0] == "imagebump(prod): api 1.0.0 → 1.1.0 in overlays/prod"
    author = remote.git("log", "-1", "--format=%an <%ae>").strip()
    assert author == "imagebump <imagebump@users.noreply.github.com>"

    second = commit_pr.run(t, p)
    assert second.action == "unchanged" and "already sets" in second.reason
    assert len(remote.log()) == 2  # initial + one


def test_commit_mode_rebases_onto_a_moved_base_and_honours_identity(make_remote, monkeypatch) -> None:
    remote = make_remote(overlay_files("overlays/prod", "overlays/dev"))
    remote.commit_files({"overlays/dev/kustomization.yaml": kustomization("2.0.0")}, "someone else")
    monkeypatch.setenv("IMAGEBUMP_GIT_AUTHOR_NAME", "Deploy Bot")
    monkeypatch.setenv("IMAGEBUMP_GIT_AUTHOR_EMAIL", "deploy@example.com")
    monkeypatch.setenv("IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE", "deploy {image_name} {new} to {env}\n\n{details}")
    out = commit_pr.run(target(remote.url), plan())
    assert out.action == "committed"
    assert remote.log() == ["deploy api 1.1.0 to prod", "someone else", "initial commit"]
    assert remote.read("overlays/dev/kustomization.yaml") == kustomization("2.0.0")
    assert remote.git("log", "-1", "--format=%an <%ae>").strip() == "Deploy Bot <deploy@example.com>"


def test_commit_mode_does_not_downgrade_when_the_file_moved_on(make_remote) -> None:
    remote = make_remote(overlay_files("overlays/prod", tag="1.5.0"))
    out = commit_pr.run(target(remote.url), plan(old="1.0.0", new="1.1.0"))
    assert out.action == "unchanged"
    assert "1.5.0" in out.reason and "1.1.0" in out.reason
    assert len(remote.log()) == 1


def test_protected_branch_is_permission_denied_and_not_retried(make_remote, tmp_path: Path) -> None:
    remote = make_remote(overlay_files("overlays/prod"))
    counter = tmp_path / "hook-calls"
    remote.install_hook(
        "pre-receive",
        f"""#!/bin/sh
echo x >> {counter}
echo "GH006: Protected branch update failed for refs/heads/main." >&2
exit 1
""",
    )
    with pytest.raises(PermissionDeniedError) as info:
        commit_pr.land(target(remote.url), plan())
    text = str(info.value)
    assert "main" in text and "refused" in text and "mode: pr" in text
    assert counter.read_text().count("x") == 1  # no retry
    assert len(remote.log()) == 1


def test_eight_concurrent_writers_all_land(make_remote) -> None:
    paths = [f"overlays/app{i}" for i in range(8)]
    remote = make_remote(overlay_files(*paths))
    results: dict[str, object] = {}
    barrier = threading.Barrier(len(paths))

    def writer(path: str) -> None:
        barrier.wait()
        try:
            results[path] = commit_pr.land(target(remote.url, path), plan(path))
        except Exception as exc:  # noqa: BLE001 - reported below
            results[path] = exc

    threads = [threading.Thread(target=writer, args=(p,)) for p in paths]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert all(getattr(r, "action", None) == "committed" for r in results.values()), results
    for path in paths:
        assert remote.read(f"{path}/kustomization.yaml") == kustomization("1.1.0")
    assert len(remote.log()) == 1 + len(paths)
    assert len({r.commit_sha for r in results.values()}) == len(paths)


# ------------------------------------------------------------------------------ mode: pr, local


def test_pr_mode_local_keeps_one_branch(make_remote) -> None:
    remote = make_remote(overlay_files("overlays/prod"))
    t = target(remote.url, mode="pr", provider="local")
    branch = branch_name(t)

    created = commit_pr.run(t, plan())
    assert created.action == "pr-created" and created.pr_number == 0 and created.branch == branch
    assert created.pr_url == f"{remote.url}/tree/{branch}"
    assert remote.read("overlays/prod/kustomization.yaml", ref=branch) == kustomization("1.1.0")
    assert remote.read("overlays/prod/kustomization.yaml") == kustomization("1.0.0")  # base untouched
    assert remote.rev(branch) == created.commit_sha

    again = commit_pr.run(t, plan())
    assert again.action == "unchanged" and remote.rev(branch) == created.commit_sha

    newer = commit_pr.run(target(remote.url, mode="pr", tag="1.2.0"), plan(new="1.2.0"))
    assert newer.action == "pr-updated" and newer.branch == branch
    assert remote.read("overlays/prod/kustomization.yaml", ref=branch) == kustomization("1.2.0")
    assert remote.git("rev-list", "--count", f"main..{branch}").strip() == "1"  # force-updated, not stacked
    assert remote.branches() == sorted(["main", branch])


def test_pr_mode_never_pushes_over_a_persons_commit_on_its_branch(make_remote) -> None:
    """Issue 30 item 9, provider local: the branch is the proposal; a person's commit on it makes it
    theirs (``branch-taken``, nothing pushed) until it is merged into the base or deleted."""
    remote = make_remote(overlay_files("overlays/prod"))
    t = target(remote.url, mode="pr")
    first = commit_pr.run(t, plan())
    fixed = kustomization("1.1.0") + "# a reviewer's fix\n"
    theirs = remote.commit_files(
        {"overlays/prod/kustomization.yaml": fixed}, "fix", branch=first.branch, author=PERSON
    )
    for newer in ("1.2.0", "1.3.0"):
        out = commit_pr.run(target(remote.url, mode="pr", tag=newer), plan(new=newer))
        assert out.action == "branch-taken" and out.branch == first.branch and out.commit_sha == theirs
        assert "Dana Reviewer" in out.reason and theirs[:12] in out.reason
        assert remote.rev(first.branch) == theirs  # their commit is still there
    remote.git("update-ref", "refs/heads/main", theirs)  # merged (fast-forward) into the base
    resumed = commit_pr.run(target(remote.url, mode="pr", tag="1.3.0"), plan(old="1.1.0", new="1.3.0"))
    assert resumed.action in ("pr-created", "pr-updated")
    assert remote.git("merge-base", "--is-ancestor", theirs, resumed.commit_sha) == ""  # built on it


def test_pr_mode_rebuilds_a_branch_of_imagebumps_own_commits(make_remote) -> None:
    remote = make_remote(overlay_files("overlays/prod"))
    t = target(remote.url, mode="pr")
    first = commit_pr.run(t, plan())
    remote.commit_files({"README.md": "base moved on\n"}, "docs")
    out = commit_pr.run(target(remote.url, mode="pr", tag="1.2.0"), plan(new="1.2.0"))
    assert out.action == "pr-updated" and remote.rev(first.branch) == out.commit_sha
    assert remote.log(first.branch)[1:] == remote.log()  # one commit on top of the newest base


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("amend", id="amended-by-a-person"),
        pytest.param("no-trailer", id="imagebumps-identity-without-trailer"),
        pytest.param("under", id="a-persons-commit-below-imagebumps"),
    ],
)
def test_pr_mode_a_branch_is_taken_by_any_commit_imagebump_did_not_make(make_remote, how: str) -> None:
    remote = make_remote(overlay_files("overlays/prod"))
    t = target(remote.url, mode="pr")
    branch = branch_name(t)
    remote.git("branch", branch, "main")
    if how == "amend":  # imagebump's message and author, a person as committer (git commit --amend)
        remote.commit_files(
            {"overlays/prod/kustomization.yaml": kustomization("1.1.0")},
            f"bump\n\nImagebump-Image: {IMAGE}:1.1.0\n",
            branch=branch,
            author=PERSON,
        )
    elif how == "no-trailer":
        remote.commit_files(
            {"overlays/prod/kustomization.yaml": kustomization("1.1.0")},
            "bump",
            branch=branch,
            author=IMAGEBUMP_AUTHOR,
        )
    else:
        remote.commit_files({"README.md": "mine\n"}, "a person's commit", branch=branch, author=PERSON)
        imagebump_commit(remote, branch, "1.1.0")
    before = remote.rev(branch)
    out = commit_pr.run(target(remote.url, mode="pr", tag="1.2.0"), plan(new="1.2.0"))
    assert out.action == "branch-taken" and remote.rev(branch) == before


@pytest.mark.parametrize(
    "seen",
    [pytest.param("1.2.0", id="moved-since-the-plan"), pytest.param(None, id="appeared-since-the-plan")],
)
def test_pr_mode_never_overwrites_a_proposal_the_plan_did_not_see(make_remote, seen) -> None:
    remote = make_remote(overlay_files("overlays/prod"))
    t = target(remote.url, mode="pr", tag="1.4.0")
    branch = branch_name(t)
    remote.git("branch", branch, "main")
    moved = imagebump_commit(remote, branch, "1.3.0")  # another run of imagebump
    out = commit_pr.run(t, _looked(branch, seen, new="1.4.0"))
    assert out.action == "unchanged" and out.branch == branch
    assert "1.3.0" in out.reason and "1.4.0" in out.reason
    assert remote.rev(branch) == moved
    assert remote.read("overlays/prod/kustomization.yaml", ref=branch) == kustomization("1.3.0")


def test_pr_mode_updates_the_proposal_the_plan_saw(make_remote) -> None:
    remote = make_remote(overlay_files("overlays/prod"))
    t = target(remote.url, mode="pr", tag="1.4.0")
    branch = branch_name(t)
    remote.git("branch", branch, "main")
    imagebump_commit(remote, branch, "1.3.0")  # an earlier run
    out = commit_pr.run(t, _looked(branch, "1.3.0", new="1.4.0"))
    assert out.action == "pr-updated"
    assert remote.read("overlays/prod/kustomization.yaml", ref=branch) == kustomization("1.4.0")


def test_pr_mode_two_racing_runs_leave_one_commit(make_remote) -> None:
    remote = make_remote(overlay_files("overlays/prod"))
    t = target(remote.url, mode="pr")
    barrier = threading.Barrier(2)
    results: list[object] = []

    def writer() -> None:
        barrier.wait()
        try:
            results.append(commit_pr.land(t, plan()).action)
        except Exception as exc:  # noqa: BLE001 - reported below
            results.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    # The loser's lease fails, it re-fetches and finds its tree there ("unchanged") — or, when both
    # commits came out byte-identical (same second), its push was a no-op. Never two commits.
    assert "pr-created" in results and set(results) <= {"pr-created", "unchanged"}, results
    assert remote.git("rev-list", "--count", f"main..{branch_name(t)}").strip() == "1"


def test_pr_mode_is_unchanged_when_base_already_has_it(make_remote) -> None:
    remote = make_remote(overlay_files("overlays/prod", tag="1.1.0"))
    out = commit_pr.run(target(remote.url, mode="pr"), plan())
    assert out.action == "unchanged" and remote.branches() == ["main"]


def test_plan_without_change_does_nothing(make_remote) -> None:
    remote = make_remote(overlay_files("overlays/prod"))
    out = commit_pr.run(target(remote.url), plan(changed=False))
    assert out.action == "unchanged" and len(remote.log()) == 1


# ----------------------------------------------------------------------------- mode: pr, GitHub


@pytest.fixture()
def gh_remote(make_remote, github_env):
    """A real git remote whose GitHub API is the fake; the fake counts commits with real git."""
    remote = make_remote(overlay_files("overlays/prod"))

    def ahead(owner: str, repo: str, base: str, head: str) -> int | None:
        try:
            return int(remote.git("rev-list", "--count", f"{base}..{head}").strip())
        except RuntimeError:
            return None

    github_env.ahead = ahead
    return remote, github_env


def test_pr_mode_github_create_then_same_input_is_one_commit_one_pr(gh_remote) -> None:
    remote, fake = gh_remote
    t = target(
        remote.url,
        mode="pr",
        provider="github",
        labels=["imagebump", "prod"],
        reviewers=["alice", "acme/sre"],
    )
    first = commit_pr.run(t, plan())
    assert first.action == "pr-created" and first.pr_number == 1
    pull = fake.pull(1)
    assert pull.head == first.branch and pull.base == "main"
    assert pull.title == "imagebump(prod): api 1.0.0 → 1.1.0 in overlays/prod"
    assert "`1.0.0` → `1.1.0`" in pull.body and t.event_id in pull.body
    assert (
        pull.labels == ["imagebump", "prod"]
        and pull.reviewers == ["alice"]
        and pull.team_reviewers == ["sre"]
    )

    second = commit_pr.run(t, plan())
    assert second.action == "unchanged" and second.pr_number == 1 and second.commit_sha == first.commit_sha
    assert len(fake.pulls) == 1 and len(fake.calls_to("POST", r"/repos/[^/]+/[^/]+/pulls")) == 1
    assert remote.git("rev-list", "--count", f"main..{first.branch}").strip() == "1"


def test_pr_mode_github_newer_image_updates_the_same_pr(gh_remote) -> None:
    remote, fake = gh_remote
    commit_pr.run(target(remote.url, mode="pr", provider="github"), plan())
    out = commit_pr.run(target(remote.url, mode="pr", provider="github", tag="1.2.0"), plan(new="1.2.0"))
    assert out.action == "pr-updated" and out.pr_number == 1
    assert len(fake.open_pulls()) == 1 and "1.2.0" in fake.pull(1).title
    assert remote.read("overlays/prod/kustomization.yaml", ref=out.branch) == kustomization("1.2.0")


def test_pr_mode_github_closed_pr_leads_to_a_fresh_one(gh_remote) -> None:
    remote, fake = gh_remote
    t = target(remote.url, mode="pr", provider="github")
    commit_pr.run(t, plan())
    fake.close(1)
    out = commit_pr.run(t, plan())
    assert out.action == "pr-created" and out.pr_number == 2
    assert [p.number for p in fake.open_pulls()] == [2]


def test_pr_mode_github_open_pr_with_a_newer_proposal_is_kept_until_closed(gh_remote) -> None:
    remote, fake = gh_remote
    newer = commit_pr.run(target(remote.url, mode="pr", provider="github", tag="1.2.0"), plan(new="1.2.0"))
    branch = newer.branch
    late = _looked(
        branch,
        "1.2.0",
        new="1.1.0",
        decision="stale",
        why=f"the open PR branch {branch} proposes 1.2.0, newer than 1.1.0",
    )
    t = target(remote.url, mode="pr", provider="github")

    kept = commit_pr.run(t, late)
    assert kept.action == "unchanged" and kept.pr_number == 1 and "1.2.0" in kept.reason
    assert remote.rev(branch) == newer.commit_sha and "1.2.0" in fake.pull(1).title

    fake.close(1)  # a closed pull request's branch is no living proposal: a fresh one
    fresh = commit_pr.run(t, late)
    assert fresh.action == "pr-created" and fresh.pr_number == 2
    assert remote.read("overlays/prod/kustomization.yaml", ref=branch) == kustomization("1.1.0")


def test_pr_mode_github_no_commits_between_is_unchanged(gh_remote) -> None:
    remote, fake = gh_remote
    fake.no_commits()
    out = commit_pr.run(target(remote.url, mode="pr", provider="github"), plan())
    assert out.action == "unchanged" and "No commits between" in out.reason
    assert fake.pulls == []


def test_pr_mode_github_retries_5xx_and_rate_limit(gh_remote) -> None:
    remote, fake = gh_remote
    fake.rate_limit("GET", r"/repos/[^/]+/[^/]+/pulls", status=429, retry_after=1)
    fake.server_error("POST", r"/repos/[^/]+/[^/]+/pulls", status=502)
    out = commit_pr.run(target(remote.url, mode="pr", provider="github"), plan())
    assert out.action == "pr-created" and len(fake.pulls) == 1
    statuses = [c.status for c in fake.calls if c.path.endswith("/pulls")]
    assert statuses == [429, 200, 502, 201]


def test_pr_mode_github_app_auth_uses_the_installation_token_for_git_and_api(
    gh_remote, git_token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote, fake = gh_remote
    write_app_key(tmp_path / "app.pem")
    fake.app_ids.add("777")
    fake.next_installation_token = git_token  # what the git server accepts, so git proves it used it
    fake.tokens.clear()  # the API accepts only minted tokens now
    monkeypatch.delenv("IMAGEBUMP_GIT_TOKEN")
    monkeypatch.setenv("IMAGEBUMP_GITHUB_APP_ID", "777")
    monkeypatch.setenv("IMAGEBUMP_GITHUB_APP_INSTALLATION_ID", "42")
    monkeypatch.setenv("IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE", str(tmp_path / "app.pem"))
    gh.clear_token_cache()
    try:
        out = commit_pr.run(target(remote.url, mode="pr", provider="github"), plan())
    finally:
        gh.clear_token_cache()
    assert out.action == "pr-created" and remote.rev(out.branch) == out.commit_sha
    assert fake.minted == [git_token]


def test_pr_mode_github_bad_api_url_fails_before_any_push(make_remote, github_env, monkeypatch) -> None:
    remote = make_remote(overlay_files("overlays/prod"))
    monkeypatch.setenv("IMAGEBUMP_GITHUB_API_URL", "api.github.com")
    with pytest.raises(ConfigError) as info:
        commit_pr.land(target(remote.url, mode="pr", provider="github"), plan())
    assert info.value.field == "IMAGEBUMP_GITHUB_API_URL"
    assert remote.branches() == ["main"]


# --------------------------------------------------------------------------- through Hera's runner


def test_runner_subprocess_writes_outputs_without_the_token(
    make_remote, git_token: str, tmp_path: Path
) -> None:
    remote = make_remote(overlay_files("overlays/prod"))
    args = tmp_path / "args.json"
    args.write_text(
        json.dumps(
            [
                {"name": "target", "value": target(remote.url).model_dump_json()},
                {"name": "plan", "value": plan().model_dump_json()},
            ]
        )
    )
    outputs = tmp_path / "outputs"
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGEBUMP_")}
    env.update(
        {
            "PYTHONPATH": str(REPO_ROOT),
            "hera__outputs_directory": str(outputs),
            "IMAGEBUMP_GIT_TOKEN": git_token,
        }
    )
    proc = subprocess.run(
        [sys.executable, "-m", "hera.workflows.runner", "-e", "steps.commit_pr.step:run", str(args)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    params = outputs / "parameters"
    assert (params / "action").read_text() == "committed"
    assert (params / "commit-sha").read_text() == remote.rev()
    assert (params / "pr-number").read_text() == "0"
    assert {p.name for p in params.iterdir()} == {
        "action",
        "commit-sha",
        "pr-url",
        "pr-number",
        "branch",
        "reason",
        "seconds-since-push",
        "verified",
        "verification-reason",
    }
    assert (params / "verified").read_text() == ""  # commitMethod git: GitHub verified nothing
    assert float((params / "seconds-since-push").read_text()) > 0  # the target carries its push time
    everything = proc.stdout + proc.stderr + "".join(p.read_text() for p in params.iterdir())
    assert git_token not in everything


def test_runner_subprocess_maps_config_errors_to_exit_2(make_remote, tmp_path: Path) -> None:
    remote = make_remote(overlay_files("overlays/prod"))
    args = tmp_path / "args.json"
    args.write_text(
        json.dumps(
            [
                {"name": "target", "value": target(remote.url).model_dump_json()},
                {"name": "plan", "value": plan().model_dump_json()},
            ]
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGEBUMP_")}
    env.update(
        {
            "PYTHONPATH": str(REPO_ROOT),
            "hera__outputs_directory": str(tmp_path / "out"),
            "IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE": "{bogus}",
        }
    )
    proc = subprocess.run(
        [sys.executable, "-m", "hera.workflows.runner", "-e", "steps.commit_pr.step:run", str(args)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 2
    assert "unknown field {bogus}" in proc.stderr and "Traceback" not in proc.stderr


def test_backoff_retries_the_first_lost_race_at_once_then_jitters_from_one_push() -> None:
    from steps.commit_pr.retry import BACKOFF_CAP, backoff

    assert backoff(1, base=0.3) == 0.0
    for attempt in range(2, 12):
        for base in (0.0, 0.05, 3.0):
            delay = backoff(attempt, base=base)
            assert 0.0 <= delay <= min(BACKOFF_CAP, max(min(base, 0.5), 0.02) * 2 ** (attempt - 2))

"""commit-pr: re-apply the plan on the newest base; commit, or keep one living PR per target.

Reads: the ``target`` and the ``plan`` (parameters); the write token (``IMAGEBUMP_GIT_TOKEN`` /
``IMAGEBUMP_GIT_TOKEN_FILE``, or the GitHub App trio, see :mod:`steps.forge.github`);
``IMAGEBUMP_GITHUB_API_URL``; ``IMAGEBUMP_GIT_AUTHOR_NAME`` / ``IMAGEBUMP_GIT_AUTHOR_EMAIL``
(default ``imagebump`` / ``imagebump@users.noreply.github.com``);
``IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE`` (see below); ``IMAGEBUMP_PUSH_ATTEMPTS`` (default 10).

Writes: one commit on the base branch (``mode: commit``), or one branch per target plus one open
pull request for it (``mode: pr``). Outputs ``action`` (``committed`` | ``pr-created`` |
``pr-updated`` | ``unchanged`` | ``branch-taken``: a person pushed to the living PR branch, which is
theirs until its pull request is merged or closed, :mod:`steps.domain.branch_owner`), ``commit_sha``, ``pr_url``, ``pr_number``, ``branch``, ``reason``,
and for ``commitMethod: api`` (the commit made through GitHub, :mod:`steps.forge.github_commits`) GitHub's
``verified`` / ``verification_reason``.

How: a fresh clone of the newest base in a private temporary directory; the plan's *edit*
(``target`` + ``plan.new``) is re-applied there with the pure editor — never a stale patch. When
the plan carries the file it was made from (``plan.base_text`` and its blob id ``plan.base_blob``,
see :func:`steps.edit_kustomize.carry_text`), the clone holds objects only (commits and trees; no
blob, no work tree) and the text comes from the plan for as long as the newest base holds that very
blob — believed only when it hashes to that id; the commit is written with one ``git fast-import``.
In ``mode: commit`` the plan also carries the commit and the trees above the file
(``plan.base_objects``): the first attempt makes the plan's own base from them without any fetch
(:func:`steps.commit_pr.base_branch.seed_base`, :func:`steps.git.seed`, believed only when each object hashes to the id its
parent names) and pushes with a lease on that base, so it lands only while nobody moved the
branch (a moved or deleted branch refuses it: then the clone above, as after any lost race).
Otherwise (an older plan, a file too large to carry) a partial clone checked out sparsely on the
file's directory. All land the same commit (tests/steps/test_carried_plan.py). Before writing,
the file's current entry is re-checked:

- already equal to ``plan.new`` → ``unchanged`` (someone — or an earlier try of this step — landed it);
- changed since the plan to something else → with ``order: semver`` re-decided by
  :func:`steps.domain.version_order.judge_update`; with ``order: push-time`` ``unchanged`` with a reason naming both
  (commit-pr does not read ECR, so it cannot know the other image's push time); with
  ``order: none`` the plan wins.

Skips (``unchanged``, no commit, no PR): ``plan.changed`` is false; the re-check above; in
``mode: pr`` the branch already holds exactly this tree and its open PR already says this, or the
living proposal must not be replaced (never a downgrade of an open PR);
GitHub's 422 "No commits between".

``mode: commit`` pushes to the base branch; a non-fast-forward rejection fetches the new base,
re-applies and pushes again, at most ``IMAGEBUMP_PUSH_ATTEMPTS`` times with jittered exponential
backoff, then fails as transient. A hook or permission rejection is :class:`PermissionDeniedError`.

``mode: pr`` uses the branch :func:`branch_name` (stable for env + overlay path + image; defined in
:mod:`steps.domain.branches`), builds its one commit on the newest base and, unless the branch is a living
proposal that must not be replaced (see :func:`steps.domain.never_downgrade.guard_branch`: it proposes something else than the
plan saw there, or edit-kustomize found it already proposes this image or a newer one — the
pull request is open; for ``provider: local`` the branch exists), force-pushes it with a lease on
the sha seen before (a branch whose pull request was closed or merged is replaced); then
the open PR for that branch is updated (title, body), or a new one is created (also after the
previous one was merged or closed). Running the same input twice gives one commit and one PR:
the second run finds the branch's tree identical and the PR's text identical and reports
``unchanged`` (with the PR's url and number), pushing nothing.

``provider: local`` has no API: the pushed branch is the proposal, ``pr_url`` is
``<repo_url>/tree/<branch>``, ``pr_number`` 0, ``pr-created`` when the branch was new.

Layout (gather → decide → act): :class:`CommitPrInput` and :class:`steps.commit_pr.settings.CommitPrSettings`
are validated before any I/O; :func:`steps.commit_pr.decide.decide` is the pure core, table-tested without git in
tests/steps/test_commit_pr.py (its never-downgrade re-check is :func:`steps.domain.never_downgrade.recheck`);
both modes start from :mod:`steps.commit_pr.base_branch` and back off after a lost race with
:mod:`steps.commit_pr.retry`; the outputs are :class:`steps.commit_pr.result.CommitPrOutput`;
the two forge modes act in :mod:`steps.commit_pr.commit_mode` and :mod:`steps.commit_pr.pr_mode`; messages are templated
by :mod:`steps.commit_pr.message`.

Message template: ``IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE`` is a Python ``str.format`` string over
these fields (unknown fields are a ConfigError, checked before any I/O); the PR title is the
message's first line, and the PR body is imagebump's own Markdown summary:

``subject``      the default first line (``imagebump(ENV): NAME OLD → NEW in PATH``)
``details``      the default body (image, tag and digest old → new, push time, env, overlay, event)
``image``        repository URI of the pushed image (no tag)
``image_name``   the ``images[].name`` set
``old_tag`` ``new_tag`` ``old_digest`` ``new_digest``   ("" when none)
``old`` ``new``  short forms: the tag, else the short digest
``pushed_at``    ISO-8601 push time ("" when unknown)
``env`` ``path`` ``file`` ``repo_url`` ``base_branch`` ``event_id`` ``rule`` ``mode``
``version``      imagebump's version
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
import logging
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from steps.commit_pr.result import CommitPrOutput
from steps.commit_pr.settings import CommitPrSettings
from steps.domain.branches import branch_name
from steps.domain.errors import ConfigError
from steps.domain.models import Plan, Target
from steps.runtime.harness import step_entry

if TYPE_CHECKING:
    from steps import git
    from steps.forge import github as gh

log = logging.getLogger(__name__)
#: The name in this step's log records (its module is ``step``; the template is commit-pr).
STEP_NAME = "commit-pr"

#: Modules this step imports only when it acts (a step refused by its input or settings never pays
#: for git, githubkit or the YAML editor). A local executor that forks steps from a warm
#: interpreter imports them ahead (workflows.local.forkserver_server).
LAZY_IMPORTS = (
    "steps.commit_pr.commit_mode",
    "steps.commit_pr.pr_mode",
    "steps.git",
    "steps.forge.github",
    "steps.forge.pull_requests",
    "steps.forge.github_commits",
    "steps.kustomize",
    "steps.domain.never_downgrade",
    "steps.proposals",
    "githubkit",
)


class CommitPrInput(BaseModel):
    """What commit-pr lands: the target and edit-kustomize's plan for it, checked before any I/O."""

    model_config = ConfigDict(extra="forbid")

    target: Target
    plan: Plan

    @classmethod
    def of(cls, target: Target, plan: Plan) -> "CommitPrInput":
        """Check what the runner's models cannot: a relative ``plan.file``, an https repository URL.

        Raises:
            ConfigError: naming the field and the fix.
        """
        from steps.domain.repo_url import parse_repo_url

        file = PurePosixPath(plan.file)
        if file.is_absolute() or ".." in file.parts or not plan.file.strip():
            raise ConfigError(f"plan.file {plan.file!r} must be a relative path inside the repository")
        parse_repo_url(target.repo_url)  # https://HOST/OWNER/REPO, no credentials
        return cls(target=target, plan=plan)


# ============================================================================ I/O


def _credentials(target: Target) -> "tuple[git.GitAuth | None, gh.GitHubSettings | None]":
    """Read (not yet use) the git token and, when the API is needed, the GitHub settings.

    The API is needed for ``provider: github`` in ``mode: pr`` or with ``commitMethod: api``, and to
    mint a GitHub App installation token when no git token is set. Both are validated here, before any I/O.
    """
    from steps import git

    auth = git.GitAuth.from_env(write=True, required=False)
    settings = None
    if target.provider == "github" and (target.mode == "pr" or auth is None or target.commit_method == "api"):
        from steps.forge import github as gh  # the API client (githubkit, httpx): only where the API is used

        settings = gh.GitHubSettings.from_env()  # ConfigError naming both ways when neither is set
    if auth is None and not (settings and settings.uses_app):
        git.GitAuth.from_env(write=True, required=True)  # raises the "no git token" ConfigError
    return auth, settings


def land(target: Target, plan: Plan) -> CommitPrOutput:
    """Land ``plan`` for ``target``: commit to the base branch, or keep one living PR.

    The step's body (``run`` adds the runner's output files and error → exit-code mapping).

    Raises:
        ConfigError: bad settings or input, the file or image is gone (never retried).
        PermissionDeniedError: the remote or GitHub refused for lack of rights (never retried).
        TransientError: lost push races, network trouble, 5xx, rate limits (retried by Argo).
    """
    settings = CommitPrSettings.from_env()
    CommitPrInput.of(target, plan)
    if (target.require_verified or settings.require_verified) and target.commit_method != "api":
        raise ConfigError(
            f"verified commits are required (requireVerified / IMAGEBUMP_REQUIRE_VERIFIED) but rule {target.rule} "
            "uses commitMethod: git, whose commits are unsigned; set commitMethod: api (provider: github)"
        )
    if not plan.changed:
        return CommitPrOutput(
            action="unchanged",
            reason=plan.reason or "the plan changes nothing",
            branch=branch_name(target) if target.mode == "pr" else "",
        )
    from steps import git

    auth, gh_settings = _credentials(target)
    if auth is None:
        from steps.forge import github as gh  # a GitHub App's installation token (the API) pushes

        assert gh_settings is not None
        auth = git.GitAuth(gh.installation_token(gh_settings))  # the App's token pushes too
    base = target.base_branch or plan.base_branch or git.default_branch(target.repo_url, auth=auth)
    from steps.runtime.scratch_dir import scratch

    db = None
    if target.commit_method == "api":  # GitHub's git database; the step's one rate-limit budget
        from steps.forge.github_commits import GitDatabase

        assert gh_settings is not None  # _credentials reads them for commitMethod api
        db = GitDatabase.for_repo_url(target.repo_url, gh_settings, settings.rate_limit_budget)
    try:
        with scratch("imagebump-commit-pr-") as tmp:
            if target.mode == "commit":
                from steps.commit_pr.commit_mode import land_commit

                return land_commit(target, plan, settings, auth, base, tmp, db=db)
            from steps.commit_pr.pr_mode import land_pr

            return land_pr(target, plan, settings, auth, gh_settings, base, tmp, db=db)
    finally:
        if db is not None:
            db.log_cost()


@step_entry
def run(target: Target, plan: Plan) -> CommitPrOutput:
    """The commit-pr step: :func:`land` under the step runtime."""
    output = land(target, plan)
    if target.pushed_at is not None:
        pushed = target.pushed_at if target.pushed_at.tzinfo else target.pushed_at.replace(tzinfo=UTC)
        elapsed = (datetime.now(UTC) - pushed).total_seconds()
        output.seconds_since_push = f"{max(elapsed, 0.0):.3f}"
    return output

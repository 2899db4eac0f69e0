"""commit-pr: re-apply the plan on the newest base, then commit (``mode: commit``) or keep one living
pull request per target (``mode: pr``). What users see of it: docs/concepts.md, "Commits and pull
requests".

Reads: the ``target`` and ``plan`` parameters; the write token or GitHub App
(:mod:`steps.forge.github`) and the ``IMAGEBUMP_*`` settings of :class:`~steps.commit_pr.settings.CommitPrSettings`.
Writes: one commit on the base branch, or one branch and one open pull request per target.
Outputs: :class:`~steps.commit_pr.result.CommitPrOutput`.

Gather → decide → act: the input and settings are validated before any I/O;
:func:`steps.commit_pr.decide.decide` is the pure core (re-applying the plan, with
:func:`steps.domain.never_downgrade.recheck`); :mod:`~steps.commit_pr.base_branch` starts from a
carried or fresh base, :mod:`~steps.commit_pr.commit_mode` and :mod:`~steps.commit_pr.pr_mode` act,
:mod:`~steps.commit_pr.retry` backs off after a lost race, :mod:`~steps.commit_pr.message` writes
the messages.
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
import logging
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from steps.commit_pr.result import CommitPrOutput
from steps.commit_pr.settings import CommitPrSettings
from steps.domain.branches import branch_name
from steps.domain.contract import Contract
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


class CommitPrInput(Contract, kw_only=True):
    """What commit-pr lands: the target and edit-kustomize's plan for it, checked before any I/O."""

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
    if target.settings.provider == "github" and (
        target.settings.mode == "pr" or auth is None or target.settings.commit_method == "api"
    ):
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
    if (
        target.settings.require_verified or settings.require_verified
    ) and target.settings.commit_method != "api":
        raise ConfigError(
            f"verified commits are required (requireVerified / IMAGEBUMP_REQUIRE_VERIFIED) but rule {target.rule} "
            "uses commitMethod: git, whose commits are unsigned; set commitMethod: api (provider: github)"
        )
    if not plan.changed:
        return CommitPrOutput(
            action="unchanged",
            reason=plan.reason or "the plan changes nothing",
            branch=branch_name(target) if target.settings.mode == "pr" else "",
        )
    from steps import git

    auth, gh_settings = _credentials(target)
    if auth is None:
        from steps.forge import github as gh  # a GitHub App's installation token (the API) pushes

        assert gh_settings is not None
        auth = git.GitAuth(gh.installation_token(gh_settings))  # the App's token pushes too
    base = target.settings.base_branch or plan.base_branch or git.default_branch(target.repo_url, auth=auth)
    from steps.runtime.scratch_dir import scratch

    db = None
    if target.settings.commit_method == "api":  # GitHub's git database; the step's one rate-limit budget
        from steps.forge.github_commits import GitDatabase

        assert gh_settings is not None  # _credentials reads them for commitMethod api
        db = GitDatabase.for_repo_url(target.repo_url, gh_settings, settings.rate_limit_budget)
    try:
        with scratch("imagebump-commit-pr-") as tmp:
            if target.settings.mode == "commit":
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

"""commit-pr, ``mode: commit``: one commit on the base branch, pushed; lost races retried.

Act half of commit-pr for ``mode: commit``: the plan's own base made from the objects it carries
(:func:`steps.commit_pr.base_branch.seed_base`, no fetch), else a clone of the newest base; re-apply the plan
with the pure :func:`steps.commit_pr.decide.decide`, commit and push to the base branch (from the
plan's base: with a lease on it, so only while the branch is still there). A rejection — the
remote moved on — fetches the new base into the same repository, re-applies and pushes again, at most
``push_attempts`` times (:func:`steps.commit_pr.retry.backoff`: the first retry at once), then fails as
transient.

``commitMethod: api`` (``db`` given): the same local commit is then created through GitHub, Verified
when the token is an App installation's: the tree proven, then GraphQL ``createCommitOnBranch`` with
the plan's base as ``expectedHeadOid`` (:meth:`steps.forge.github_commits.GitDatabase.append_head`:
two content-creating requests); with ``requireVerified`` (or a file whose mode is not ``100644``)
tree, commit and a ``force: false`` ref move (:meth:`~steps.forge.github_commits.GitDatabase.commit_head`),
so no ref moves to an unverified commit. A moved branch is the same lost race.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from steps import git
from steps.commit_pr.base_branch import clone_base, read_overlay_file, seed_base
from steps.commit_pr.message import commit_message, history_line, message_fields
from steps.commit_pr.result import CommitPrOutput
from steps.commit_pr.retry import RACE_DEPTH, Pacer
from steps.commit_pr.rollbacks import reapply
from steps.commit_pr.settings import CommitPrSettings
from steps.domain.errors import GitCommandError, PushRejected, TransientError
from steps.domain.models import Plan, Target

if TYPE_CHECKING:
    from steps.forge.github_commits import ApiCommit, GitDatabase

log = logging.getLogger(__name__)


def land_commit(
    target: Target,
    plan: Plan,
    settings: CommitPrSettings,
    auth: git.GitAuth,
    base: str,
    workdir: Path,
    db: GitDatabase | None = None,
    pacer: Pacer | None = None,
) -> CommitPrOutput:
    """``mode: commit``: commit on the newest base and push; a lost race re-applies and retries.

    A lost race moves the same repository to the newest base (one fetch: commits and trees of the
    new tip, the carried text still known, so no blob) instead of cloning anew; ``pacer``: the
    retries' clock, sleep and jitter (:class:`steps.commit_pr.retry.Pacer`, injected by tests)."""
    pacer = pacer or Pacer()
    repo = seed_base(target, plan, auth, base, workdir) or clone_base(target, plan, auth, base, workdir)
    previous = None  # after a lost race: the last attempt's outcome, whose findings carry on

    for attempt in range(1, settings.push_attempts + 1):
        text = read_overlay_file(repo, plan, target, base)
        # the plan re-applied on the newest base, and the rollbacks landed since the plan judged
        applied = reapply(repo, text, target, plan, previous)
        if applied.text is None:
            return CommitPrOutput(action="unchanged", reason=applied.reason, commit_sha=repo.head())
        repo.write(plan.file, applied.text)
        fields = message_fields(target, plan, applied.current, base)
        history = history_line(plan.file, applied.clean_at, applied.on)
        message = commit_message(settings.template, fields, history)
        sha = repo.commit(message, settings.author_name, settings.author_email)
        if sha is None:  # the editor changed bytes git does not see (cannot happen; be safe)
            return CommitPrOutput(action="unchanged", reason=f"{plan.file}: no difference to commit")
        pacer.started()
        made: ApiCommit | None = None
        try:
            if db is None:
                repo.push(f"HEAD:refs/heads/{base}", (base, repo.seeded_from) if repo.seeded_from else None)
            else:
                required = target.settings.require_verified or settings.require_verified
                # unless verified commits are required (then nothing may move before GitHub said it
                # verifies the commit): the proven tree, then createCommitOnBranch with its lease
                made = (
                    None
                    if required
                    else db.append_head(
                        repo, plan.file, applied.text, message, base, prove=True, create=False
                    )
                )
                if made is None:
                    made = db.commit_head(repo, plan.file, applied.text, message, required)
                    db.fast_forward(base, made.sha)
                sha = made.sha
        except PushRejected as exc:
            if attempt == settings.push_attempts:
                raise TransientError(
                    f"push to {base} of {target.repo_url} lost the race {attempt} times (last: {exc}); "
                    "the step will be retried"
                ) from None
            pacer.lost(f"push to {base}", attempt, settings.push_attempts)
            # the plan's base (or the last one fetched) is not the newest any more: move the same
            # repository to the newest (a seeded one too: its origin is a promisor like a clone's),
            # with the commits since the base held so far when they are few
            previous = applied
            repo.fetch_and_reset(base, depth=RACE_DEPTH)
            continue
        except GitCommandError as exc:
            if not repo.seeded_from or db is not None:
                raise
            # git could not send the commit from the plan's base (not a refusal: those are
            # classified): never a reason to fail the step; the clone path does what it always did.
            log.warning("the push from the plan's base failed (%s); cloning the newest %s", exc, base)
            repo = clone_base(target, plan, auth, base, workdir)
            continue
        log.info("committed %s to %s: %s", sha[:12], base, fields["subject"])
        return CommitPrOutput(
            action="committed", commit_sha=sha, reason=fields["subject"], **(made.outputs() if made else {})
        )
    raise AssertionError("unreachable")

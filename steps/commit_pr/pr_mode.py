"""commit-pr, ``mode: pr``: one branch per target and one living pull request for it.

Act half of commit-pr for ``mode: pr``: build the branch's one commit on the newest base (the
plan re-applied with the pure :func:`steps.commit_pr.decide.decide`), check the living proposal with
:func:`steps.domain.never_downgrade.guard_branch` (what the branch proposes now is read by
:mod:`steps.proposals`), force-push with a lease on the sha seen before, then update the open pull
request (title, body) or open one. ``provider: local`` has no API: the pushed branch is the
proposal (:class:`steps.forge.forges.LocalForge`).

``commitMethod: api`` (``db`` given): the commit is created through GitHub
(:meth:`steps.forge.github_commits.GitDatabase.commit_head`) and the branch is created (``POST …/git/refs``; "already
exists" is a lost race) or moved with a lease (GraphQL ``updateRefs`` with ``beforeOid``: never
over a commit someone else pushed since it was read); the pull request calls share the step's
rate-limit budget. Issue 33: a living branch of imagebump's own commits on the newest base is updated
by one more commit instead (:func:`steps.commit_pr.stack.decide_update` decides,
:meth:`~steps.forge.github_commits.GitDatabase.stack_head` proves the tree and commits with
``createCommitOnBranch``, ``expectedHeadOid`` = the head read: the same lease) — the same tree, one
content-creating request fewer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from steps import git
from steps.commit_pr.base_branch import clone_base, read_overlay_file
from steps.commit_pr.message import commit_message, history_line, message_fields, pr_text
from steps.commit_pr.result import Action, CommitPrOutput
from steps.commit_pr.retry import RACE_DEPTH, Pacer
from steps.commit_pr.rollbacks import reapply
from steps.commit_pr.settings import CommitPrSettings
from steps.commit_pr.stack import MAX_STACKED, BranchCommit, Update, decide_update
from steps.domain.branch_owner import (
    BRANCH_TAKEN,
    TAKEN_MARKER,
    CommitFacts,
    foreign_commits,
    taken_comment,
    taken_reason,
)
from steps.domain.branches import branch_name
from steps.domain.errors import NoCommitsBetween, PullRequestExists, PushRejected, TransientError
from steps.domain.models import Plan, Target
from steps.domain.never_downgrade import guard_branch
from steps.forge import forges  # no client: GitHub's (githubkit, httpx) is imported only for provider github
from steps.gate.status import soak_pending
from steps.proposals import entry_at

if TYPE_CHECKING:
    from steps.forge import github as gh
    from steps.forge.github_commits import ApiCommit, GitDatabase
    from steps.forge.pull_requests import GitHubForge

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Proposal:
    """The branch as this run left it."""

    sha: str
    existed: bool  # the branch was on the remote before this run
    pushed: bool  # this run moved it
    fields: dict[str, str]
    message: str
    made: ApiCommit | None = None  # commitMethod api: the commit GitHub created


@dataclass(frozen=True)
class _Taken:
    """The branch is a person's (:mod:`steps.domain.branch_owner`): the outcome, and the PR's one comment."""

    output: CommitPrOutput
    comment: str


def _taken(
    commits: list[CommitFacts], target: Target, settings: CommitPrSettings, branch: str
) -> tuple[str, str] | None:
    """Is the living proposal ``branch`` a person's now? Every commit it has over its base
    (``commits``, :meth:`steps.git.ClonedRepo.branch_commits`) must be imagebump's
    (:func:`steps.domain.branch_owner.made_by_imagebump`). None when they all are, else the reason and
    the pull request's comment."""
    foreign = foreign_commits(commits, settings.author_email, api=target.settings.commit_method == "api")
    if not foreign:
        return None
    return taken_reason(branch, foreign), taken_comment(branch, foreign)


def _update_how(
    repo: git.ClonedRepo,
    commits: list[CommitFacts],
    target: Target,
    settings: CommitPrSettings,
    plan: Plan,
    head: str,
    required: bool,
    pr_title: str,
) -> Update:
    """Stack one more commit on the living branch or rebuild it (:func:`steps.commit_pr.stack.decide_update`):
    the facts read here, the decision there."""
    api = target.settings.commit_method == "api"
    mine = {c.sha for c in commits if not foreign_commits([c], settings.author_email, api=api)}
    can_append = not required and repo.mode_at("HEAD", plan.file) == "100644"
    readable = can_append and len(commits) < MAX_STACKED and len(mine) == len(commits)
    base = repo.head_trees()[0]  # the newest base: the local commit's parent
    shaped = [
        BranchCommit(
            c.sha,
            repo.parents(c.sha) if readable else (),
            c.sha in mine,
            (c.message.splitlines() or [""])[0],
        )
        for c in commits
    ]
    changed = repo.changed_paths(base, head) if readable else []
    return decide_update(
        head=head,
        base=base,
        commits=shaped,
        changed=changed,
        file=plan.file,
        pr_open=True,
        can_append=can_append,
        pr_title=pr_title,
    )


class _OpenPr:
    """The open pull request of the branch: looked up once per attempt (github), or the branch itself (local)."""

    def __init__(self, target: Target, forge: GitHubForge | None, branch: str, base: str) -> None:
        self.local = forges.LocalForge(target.repo_url)
        self.forge, self.branch, self.base = forge, branch, base
        self._looked = False
        self._found: forges.PullRequest | None = None

    def __call__(self) -> forges.PullRequest | None:
        """Only asked when the branch exists on the remote."""
        if self.forge is None:
            return forges.PullRequest(
                number=0, url=self.local.url(self.branch), state="open", head=self.branch, base=self.base
            )
        if not self._looked:
            self._found, self._looked = self.forge.find_open_pr(self.branch, self.base), True
        return self._found

    def forget(self) -> None:
        self._looked, self._found = False, None


def _propose(
    repo: git.ClonedRepo,
    target: Target,
    plan: Plan,
    settings: CommitPrSettings,
    base: str,
    branch: str,
    open_pr: _OpenPr,
    db: GitDatabase | None = None,
    pacer: Pacer | None = None,
) -> _Proposal | CommitPrOutput | _Taken:
    """Build the branch's one commit on the newest base and force-push it with a lease.

    Before pushing, a living proposal on the branch (its pull request is open; for ``provider:
    local`` the branch exists) is re-checked with :func:`guard_branch`: never overwrite a newer or
    unknown proposal. A branch whose pull request was closed or merged is no proposal: replaced.
    A living proposal with a commit imagebump did not make is a person's (:class:`_Taken`,
    ``branch-taken``): nothing is pushed and the pull request's text is left alone. A lost lease
    (someone moved the branch meanwhile) re-fetches the base and tries again, like ``mode: commit``
    — the next attempt sees the person's commit. Returns the outcome, or an ``unchanged`` output
    when nothing is to propose.
    """
    pacer = pacer or Pacer()
    previous = None  # after a lost race: the last attempt's outcome, whose findings carry on
    for attempt in range(1, settings.push_attempts + 1):
        open_pr.forget()
        text = read_overlay_file(repo, plan, target, base)
        # the plan re-applied on the newest base, and the rollbacks landed since the plan judged
        applied = reapply(repo, text, target, plan, previous)
        if applied.text is None:
            return CommitPrOutput(action="unchanged", reason=applied.reason, branch=branch)
        repo.write(plan.file, applied.text)
        fields = message_fields(target, plan, applied.current, base)
        history = history_line(plan.file, applied.clean_at, applied.on)
        message = commit_message(settings.template, fields, history)
        sha = repo.commit(message, settings.author_name, settings.author_email)
        if sha is None:
            return CommitPrOutput(
                action="unchanged", reason=f"{plan.file}: no difference to commit", branch=branch
            )
        remote_sha = repo.fetch(branch)  # what the lease expects (None: the branch must not exist)
        living = open_pr() if remote_sha else None
        commits: list[CommitFacts] = []
        if remote_sha and living is not None:
            commits = repo.branch_commits(branch, base)
            taken = _taken(commits, target, settings, branch)
            if taken is not None:  # a person pushed to it: theirs until the PR is merged or closed
                reason, comment = taken
                log.info("not updating %s: %s", branch, reason)
                output = CommitPrOutput(
                    action=BRANCH_TAKEN,
                    commit_sha=remote_sha,
                    pr_url=living.url,
                    pr_number=living.number,
                    branch=branch,
                    reason=reason,
                )
                return _Taken(output, comment)
        if remote_sha and repo.tree(remote_sha) == repo.tree("HEAD"):
            # The branch already proposes exactly this tree on this base: no new commit.
            return _Proposal(remote_sha, True, False, fields, message)
        if remote_sha and living is not None:
            why = guard_branch(
                plan, branch, entry_at(repo, remote_sha, plan.file, plan.image_name, plan.values)
            )
            if why:
                log.info("not updating %s: %s", branch, why)
                return CommitPrOutput(
                    action="unchanged",
                    commit_sha=remote_sha,
                    pr_url=living.url,
                    pr_number=living.number,
                    branch=branch,
                    reason=why,
                )
        pacer.started()
        try:
            if db is None:
                repo.push(f"HEAD:refs/heads/{branch}", force_with_lease=(branch, remote_sha or ""))
                return _Proposal(sha, remote_sha is not None, True, fields, message)
            required = target.settings.require_verified or settings.require_verified
            made = None
            if remote_sha is None and not required:  # a new branch at the base, the commit on it
                made = db.append_head(
                    repo, plan.file, applied.text, message, branch, prove=False, create=True
                )
            elif remote_sha is not None and living is not None:  # issue 33: one more commit on it?
                how = _update_how(repo, commits, target, settings, plan, remote_sha, required, living.title)
                log.info("updating %s: %s (%s)", branch, how.how, how.reason)
                if how.stack:
                    # its parent is the branch's head, not the base the history line speaks of
                    stacked = commit_message(settings.template, fields)
                    made = db.stack_head(repo, plan.file, applied.text, stacked, branch, remote_sha)
            if made is None:
                made = db.commit_head(repo, plan.file, applied.text, message, required)
                if remote_sha is None:
                    db.create_branch(branch, made.sha)
                else:
                    db.move_with_lease(branch, made.sha, remote_sha)
            return _Proposal(made.sha, remote_sha is not None, True, fields, message, made)
        except PushRejected as exc:
            if attempt == settings.push_attempts:
                raise TransientError(
                    f"branch {branch} of {target.repo_url} kept moving ({exc}); retried"
                ) from None
            pacer.lost(f"push of {branch}", attempt, settings.push_attempts)
            previous = applied
            repo.fetch_and_reset(base, depth=RACE_DEPTH)
    raise AssertionError("unreachable")


def land_pr(
    target: Target,
    plan: Plan,
    settings: CommitPrSettings,
    auth: git.GitAuth,
    gh_settings: gh.GitHubSettings | None,
    base: str,
    workdir: Path,
    db: GitDatabase | None = None,
) -> CommitPrOutput:
    """``mode: pr``: keep the target's one branch and its one open pull request up to date."""
    branch = branch_name(target)
    github: GitHubForge | None = None
    if db is not None or target.settings.provider != "local":
        # githubkit and httpx: imported only where GitHub's API is used (provider local never pays them)
        from steps.forge.github import RateLimitBudget
        from steps.forge.pull_requests import GitHubForge

        if db is not None:  # one client, one rate-limit budget for the whole step
            github = GitHubForge(db.owner, db.repo, db.client, secrets=db.secrets)
        else:  # the step's one rate-limit budget, as with commitMethod api
            github = GitHubForge.for_repo_url(
                target.repo_url, gh_settings, retry=RateLimitBudget(settings.rate_limit_budget)
            )
    open_pr = _OpenPr(target, github, branch, base)
    repo = clone_base(target, plan, auth, base, workdir)
    proposal = _propose(repo, target, plan, settings, base, branch, open_pr, db)
    if isinstance(proposal, _Taken):
        if github is not None:  # one comment per pull request, not one per event
            github.comment_once(proposal.output.pr_number, TAKEN_MARKER, proposal.comment)
        return proposal.output
    if isinstance(proposal, CommitPrOutput):
        return proposal
    sha, fields = proposal.sha, proposal.fields
    title, body = pr_text(fields, proposal.message)
    if github is None:
        forge: forges.Forge = forges.LocalForge(target.repo_url, {branch} if proposal.existed else set())
        existing = forge.find_open_pr(branch, base)
    else:
        forge = github
        existing = open_pr()  # looked up before the push when the branch existed, else now
    if existing is not None:
        # LocalForge knows no PR text: the branch is all there is.
        same_text = isinstance(forge, forges.LocalForge) or (
            existing.title == title and existing.body == body
        )
        if not proposal.pushed and same_text:
            return CommitPrOutput(
                action="unchanged",
                commit_sha=sha,
                pr_url=existing.url,
                pr_number=existing.number,
                branch=branch,
                reason=f"{branch} and its pull request already propose this change",
            )
        pr = forge.update_pr(existing.number, title=title, body=body)
        action: Action = "pr-updated"
    else:
        try:
            pr = forge.create_pr(head=branch, base=base, title=title, body=body)
            action = "pr-created"
        except NoCommitsBetween as exc:
            return CommitPrOutput(action="unchanged", commit_sha=sha, branch=branch, reason=str(exc))
        except PullRequestExists:
            # A concurrent run (or a retried POST that did land) opened it: adopt it.
            found = forge.find_open_pr(branch, base)
            if found is None:
                raise TransientError(
                    f"GitHub says a PR for {branch} exists but none is open; retried"
                ) from None
            pr = forge.update_pr(found.number, title=title, body=body)
            action = "pr-updated"
    forge.add_labels(pr.number, list(target.settings.labels))
    forge.request_reviewers(pr.number, list(target.settings.reviewers))
    soak_pending(forge, target, sha)  # issue 35: gate: check, pending until the soak passes
    log.info("%s %s for %s", action, pr.url or branch, fields["subject"])
    return CommitPrOutput(
        action=action,
        commit_sha=sha,
        pr_url=pr.url,
        pr_number=pr.number,
        branch=branch,
        reason=fields["subject"],
        **(proposal.made.outputs() if proposal.made else {}),
    )

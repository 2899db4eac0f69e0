"""Whose is a proposal branch: imagebump's while every commit on it is imagebump's, a person's once not.

Pure: no git, no API. :mod:`steps.git` reads the commits a branch has over its base
(:meth:`steps.git.ClonedRepo.branch_commits`); commit-pr and reconcile ask here.

A bot that force-pushes its branch must not push over a person's work: Renovate calls such a branch
"modified" and stops updating it when any commit between the base and the branch's head has an
author or committer that is not its own (renovatebot/renovate ``lib/util/git/index.ts``,
``isBranchModified``: author and committer e-mail of ``origin/BASE..origin/BRANCH`` against
``gitAuthor`` and the ignored authors). imagebump does the equivalent, per commit
(:func:`made_by_imagebump`):

- the message carries imagebump's trailer (:func:`steps.domain.intent.by_imagebump`) — a person's
  commit, made locally or in GitHub's web editor, does not;
- and its committer is imagebump: the configured identity (``IMAGEBUMP_GIT_AUTHOR_*``, author the
  same), as ``commitMethod: git`` commits; or GitHub's web-flow committer ``noreply@github.com``, as
  every commit GitHub creates through its API (``commitMethod: api``: GitHub signs it, Verified).
  With ``commitMethod: api`` and a personal token GitHub commits as the token's user (author and
  committer the same, unsigned): that counts too for an api rule. A person who amends, rebases or
  cherry-picks imagebump's commit becomes its committer (git keeps the author): the branch is theirs.

A branch with a commit that is not imagebump's is **taken** (decision/outcome/state
``branch-taken``): imagebump stops updating it and says so — commit-pr's outcome, reconcile's state,
one comment on the pull request (:data:`TAKEN_MARKER` finds it again) — until the pull request is
merged or closed (``provider: local``: until the branch is merged into its base or deleted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from steps.domain.intent import by_imagebump

#: The outcome (commit-pr's ``action``) and reconcile's state of a proposal branch a person pushed to.
BRANCH_TAKEN = "branch-taken"
#: The committer GitHub writes on commits it creates (web editor, API): "web-flow".
WEB_FLOW_EMAIL = "noreply@github.com"
#: At most this many commits of a branch are judged (imagebump's branch has at most five: steps.commit_pr.stack.MAX_STACKED).
MAX_BRANCH_COMMITS = 50
#: A commit object larger than this is nobody's imagebump commit (its message is bounded): not read.
MAX_COMMIT_BYTES = 64 * 1024
#: The hidden line that marks imagebump's one comment on a taken pull request.
TAKEN_MARKER = "<!-- imagebump:branch-taken -->"


@dataclass(frozen=True)
class CommitFacts:
    """What is judged of one commit: its id, identities, message and number of parents."""

    sha: str
    author_name: str = ""
    author_email: str = ""
    committer_name: str = ""
    committer_email: str = ""
    message: str = ""
    parents: int = 1

    def who(self) -> str:
        """``name <email>`` of whoever made the commit (the committer when the author differs), as
        printable text: whoever pushed chose it, so control characters are escaped and it is bounded."""
        name, email = self.author_name, self.author_email
        if self.committer_email and self.committer_email.lower() not in (
            self.author_email.lower(),
            WEB_FLOW_EMAIL,
        ):
            name, email = self.committer_name, self.committer_email
        return _printable(f"{name} <{email}>" if email else (name or "someone"))


def _printable(text: str, limit: int = 120) -> str:
    """``text`` with control characters escaped (``\\x1b``), at most ``limit`` characters."""
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def made_by_imagebump(commit: CommitFacts, identity_email: str, *, api: bool = False) -> bool:
    """Did imagebump make ``commit``? (see the module docstring for the rule).

    Args:
        identity_email: imagebump's configured commit e-mail (``IMAGEBUMP_GIT_AUTHOR_EMAIL``).
        api: the rule uses ``commitMethod: api`` (GitHub's API committed it, perhaps as a token's user).
    """
    if not by_imagebump(commit.message):
        return False
    committer = commit.committer_email.strip().lower()
    author = commit.author_email.strip().lower()
    mine = identity_email.strip().lower()
    if committer == WEB_FLOW_EMAIL:
        return True
    if committer == mine and author == mine:
        return True
    return api and bool(committer) and committer == author


def foreign_commits(
    commits: Sequence[CommitFacts], identity_email: str, *, api: bool = False
) -> list[CommitFacts]:
    """The commits of a branch (over its base) that imagebump did not make."""
    return [c for c in commits if not made_by_imagebump(c, identity_email, api=api)]


def taken_reason(branch: str, foreign: Sequence[CommitFacts]) -> str:
    """Why imagebump leaves ``branch`` alone (the outcome's and reconcile's ``reason``)."""
    first = foreign[0]
    more = f" and {len(foreign) - 1} more commit(s)" if len(foreign) > 1 else ""
    return (
        f"{branch} has commit {first.sha[:12]} by {first.who()}{more} that imagebump did not make: the "
        "branch is a person's now, so imagebump stops updating it (never pushing over their work) until "
        "its pull request is merged or closed"
    )


def taken_comment(branch: str, foreign: Sequence[CommitFacts]) -> str:
    """imagebump's one comment on a taken pull request (Markdown, ending with :data:`TAKEN_MARKER`)."""
    first = foreign[0]
    return (
        f"imagebump stopped updating `{branch}`: commit {first.sha[:12]} by {first.who()} was not made "
        "by imagebump, so the branch is yours now and imagebump will not push over it. Newer images "
        "are not proposed here while this pull request is open; merge or close it and imagebump "
        "proposes the newest image again.\n\n" + TAKEN_MARKER + "\n"
    )

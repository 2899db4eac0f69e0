"""commit-pr, ``mode: pr`` with ``commitMethod: api``: update the living branch by one more commit, or rebuild it.

Pure: no git, no API (:mod:`steps.commit_pr.pr_mode` reads the facts and acts). Issue 33.

The PR branch proposes one thing: the plan's edit on the newest base. Rebuilding it as one commit on
the newest base costs four content-creating requests through GitHub's API (tree, commit, ``updateRefs``
with its lease, the pull request's new text): GraphQL ``createCommitOnBranch`` always builds on the
branch's own head, and moving the branch to the base first would make the pull request's head a
commit of its base, which GitHub takes as merged.

When the branch's head is imagebump's own commit(s) directly on the newest base, one more commit on
that head proposes exactly the same tree as the rebuild: ``head's tree with the file replaced`` equals
``base's tree with the file replaced`` as long as the head's tree differs from the base's in that file
only. :func:`decide_update` says :data:`STACK` exactly then — three requests (the tree proof, then
``createCommitOnBranch`` with ``expectedHeadOid`` = the head as its lease, then the pull request's
text) — and :data:`REBUILD` (as before) for anything else:

- the pull request is not open, or the step may not append (``requireVerified``: no ref may move before
  GitHub said the commit is Verified; a file whose mode is not ``100644``: the mutation takes no mode);
- a commit on the branch is not imagebump's (commit-pr calls such a branch the person's before it gets
  here, :mod:`steps.domain.branch_owner`; this is a second guard, never a way to build on their work);
- the base moved: the oldest commit's parent is not the newest base (the proposal is rebuilt on it);
- the chain is not a line of single-parent commits from the base to the head the lease expects;
- the pull request's title is not the head commit's subject: imagebump sets it to the subject of each
  commit it pushes, so the branch was rewritten since (a person dropped imagebump's last commit with a
  force-push: nothing is stacked on what they left; the rebuild is what happens today);
- the head's tree differs from the base's outside the file (a former plan edited another file);
- the branch holds :data:`MAX_STACKED` commits already: it is rebuilt as one (so a pull request shows
  at most that many, and a long-lived one is squashed back to one every so often).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

#: A branch holding this many imagebump commits is rebuilt as one instead of stacked on.
MAX_STACKED = 5

STACK = "stack"
REBUILD = "rebuild"


@dataclass(frozen=True)
class BranchCommit:
    """One commit the PR branch has over its base: id, parent ids, and whether imagebump made it."""

    sha: str
    parents: tuple[str, ...]
    imagebump: bool
    subject: str = ""  # the first line of its message


@dataclass(frozen=True)
class Update:
    """How to move the living branch: :data:`STACK` (one more commit on its head) or :data:`REBUILD`."""

    how: str
    reason: str

    @property
    def stack(self) -> bool:
        return self.how == STACK


def decide_update(
    *,
    head: str,
    base: str,
    commits: Sequence[BranchCommit],
    changed: Collection[str],
    file: str,
    pr_open: bool,
    can_append: bool,
    pr_title: str | None = None,
    limit: int = MAX_STACKED,
) -> Update:
    """Stack on the branch or rebuild it (see the module docstring).

    Args:
        head: the branch's head as read before (the lease ``createCommitOnBranch`` is given).
        base: the newest base's head, on which the plan was re-applied.
        commits: the commits ``head`` has over ``base``, newest first.
        changed: the paths whose entries differ between ``base``'s tree and ``head``'s.
        file: the file the plan edits.
        pr_open: the branch's pull request is open (a living proposal).
        can_append: ``createCommitOnBranch`` keeps every guarantee for this commit (not
            ``requireVerified``, the file's mode ``100644``).
        pr_title: the open pull request's title. imagebump sets it to the subject of the commit it
            pushes (:func:`steps.commit_pr.message.pr_text`), so a title that is not the head's subject
            means the branch (or the title) changed since imagebump's last update — a person dropped
            its last commit with a force-push, say: then no commit is stacked on what they left.
        limit: at most this many commits on the branch before it is rebuilt as one.
    """
    if not can_append:
        return Update(REBUILD, "this commit cannot be appended through createCommitOnBranch")
    if not pr_open:
        return Update(REBUILD, "no open pull request: the branch is no living proposal")
    if not commits:
        return Update(REBUILD, "the branch has no commit over the base")
    if any(not c.imagebump for c in commits):
        return Update(REBUILD, "a commit on the branch is not imagebump's")
    if commits[0].sha != head:
        return Update(REBUILD, "the commits read are not the head the lease expects")
    if pr_title is not None and pr_title != commits[0].subject[:256]:
        return Update(REBUILD, "the pull request's title is not its head's subject: the branch changed since")
    if len(commits) >= limit:
        return Update(REBUILD, f"the branch holds {len(commits)} commits (at most {limit})")
    for newer, older in zip(commits, commits[1:], strict=False):
        if newer.parents != (older.sha,):
            return Update(
                REBUILD, f"commit {newer.sha[:12]} is not a single-parent child of {older.sha[:12]}"
            )
    if len(commits[-1].parents) != 1:
        return Update(REBUILD, f"commit {commits[-1].sha[:12]} is not a single-parent commit")
    if commits[-1].parents[0] != base:
        return Update(REBUILD, "the base moved since the branch was built")
    outside = sorted(set(changed) - {file})
    if outside:
        return Update(REBUILD, f"the branch also changes {outside[0]}")
    return Update(STACK, f"one more commit on {len(commits)} of imagebump's on the newest base")

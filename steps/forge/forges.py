"""What commit-pr, the promotion gate and notifications need of any forge, without a client.

:class:`Forge` is the protocol (find, create and update a pull request, labels, reviewers, one
comment, commit statuses); :class:`PullRequest` and :class:`CommitStatus` are what it answers.
:class:`LocalForge` is the forge of a git host without an API (the local demo remote, forges we do
not support yet): the pull request *is* the pushed branch, and it calls nothing. GitHub's forge,
which needs githubkit and httpx, is :class:`steps.forge.pull_requests.GitHubForge`: a step that
proposes on a host without an API never imports them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PullRequest:
    """What commit-pr needs to know about a pull request."""

    number: int
    url: str
    state: str
    head: str
    base: str
    title: str = ""
    body: str = ""


#: GitHub's commit status states (docs.github.com/rest/commits/statuses#create-a-commit-status).
STATUS_STATES = ("error", "failure", "pending", "success")

#: GitHub refuses a status description longer than this (422).
MAX_STATUS_DESCRIPTION = 140


@dataclass(frozen=True)
class CommitStatus:
    """The latest status of one context on a commit (e.g. ``imagebump/soak: staging``)."""

    context: str
    state: str  # one of STATUS_STATES
    description: str = ""
    target_url: str | None = None


class Forge(Protocol):
    """What commit-pr asks of a Git host. Implementations raise :mod:`steps.domain.errors` types."""

    def find_open_pr(self, head: str, base: str) -> PullRequest | None:
        """The open PR from branch ``head`` into ``base``, or None."""
        ...

    def create_pr(self, *, head: str, base: str, title: str, body: str) -> PullRequest:
        """Open a PR; raises :class:`NoCommitsBetween` / :class:`PullRequestExists`."""
        ...

    def update_pr(self, number: int, *, title: str, body: str) -> PullRequest:
        """Set a PR's title and body."""
        ...

    def add_labels(self, number: int, labels: list[str]) -> None:
        """Add labels (existing ones are kept)."""
        ...

    def request_reviewers(self, number: int, reviewers: list[str]) -> None:
        """Request reviews from users (``login``) or teams (``org/team`` or ``team:slug``)."""
        ...

    def comment_once(self, number: int, marker: str, body: str, *, strict: bool = False) -> bool:
        """Comment ``body`` on pull request ``number`` unless a comment holding ``marker`` is there
        already; True when it commented. ``strict``: what the forge refuses is raised, not logged."""
        ...

    def set_status(
        self,
        sha: str,
        *,
        state: str,
        context: str,
        description: str = "",
        target_url: str | None = None,
        strict: bool = False,
    ) -> bool:
        """Set commit status ``context`` on commit ``sha``; True when the forge took it. ``strict``:
        what the forge refuses is raised, not logged."""
        ...

    def statuses(self, sha: str) -> dict[str, CommitStatus]:
        """The latest status of each context on commit ``sha`` (empty when the forge has none)."""
        ...


class LocalForge:
    """:class:`Forge` for a host without an API: the pushed branch is the pull request.

    Args:
        repo_url: the clone URL base, used to build a browsable ``<repo_url>/tree/<branch>`` link.
        existing_branches: branches seen on the remote *before* this run pushed; a branch in it
            counts as an open PR (so commit-pr reports ``pr-updated`` rather than ``pr-created``).
    """

    def __init__(self, repo_url: str, existing_branches: set[str] | None = None) -> None:
        self.repo_url = repo_url.rstrip("/").removesuffix(".git")
        self.existing_branches = set(existing_branches or ())
        self._found: PullRequest | None = None

    def url(self, branch: str) -> str:
        return f"{self.repo_url}/tree/{branch}"

    def find_open_pr(self, head: str, base: str) -> PullRequest | None:
        if head in self.existing_branches:
            self._found = PullRequest(number=0, url=self.url(head), state="open", head=head, base=base)
            return self._found
        return None

    def create_pr(self, *, head: str, base: str, title: str, body: str) -> PullRequest:
        log.info("local forge: branch %s is the proposal for %s (no API to open a PR)", head, base)
        return PullRequest(
            number=0, url=self.url(head), state="open", head=head, base=base, title=title, body=body
        )

    def update_pr(self, number: int, *, title: str, body: str) -> PullRequest:
        # Nothing to update but the branch itself, which commit-pr has pushed.
        found = self._found
        return PullRequest(
            number=0,
            url=found.url if found else "",
            state="open",
            head=found.head if found else "",
            base=found.base if found else "",
            title=title,
            body=body,
        )

    def add_labels(self, number: int, labels: list[str]) -> None:
        if labels:
            log.info("local forge: labels %s not applied (no API)", labels)

    def request_reviewers(self, number: int, reviewers: list[str]) -> None:
        if reviewers:
            log.info("local forge: reviewers %s not requested (no API)", reviewers)

    def comment_once(self, number: int, marker: str, body: str, *, strict: bool = False) -> bool:
        log.info("local forge: no pull request to comment on (no API): %s", body.split("\n", 1)[0])
        return False

    def set_status(
        self,
        sha: str,
        *,
        state: str,
        context: str,
        description: str = "",
        target_url: str | None = None,
        strict: bool = False,
    ) -> bool:
        log.info(
            "local forge: status %s=%s on %s not set (no API): %s", context, state, sha[:12], description
        )
        return False

    def statuses(self, sha: str) -> dict[str, CommitStatus]:
        return {}

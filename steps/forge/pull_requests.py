"""The narrow seam between commit-pr and a Git hosting service ("forge"): GitHub's side.

commit-pr needs six things from a forge: find the open pull request for a head branch, create
one, update its title and body, add labels, request reviewers, and comment once (a branch a person
took over); the promotion gate and notifications add a seventh, commit statuses (set one, read the
latest per context). :class:`Forge` is that protocol.

- :class:`GitHubForge` speaks GitHub's REST API (github.com or Enterprise) through githubkit;
  its responses are parsed by githubkit's models, generated from GitHub's OpenAPI description.
- :class:`LocalForge` is for a git host without an API (the local demo remote, forges we do not
  support yet): the pull request *is* the pushed branch. It calls nothing; ``find_open_pr``
  reports the branch as an open "PR" when the caller saw it on the remote before pushing.

The protocol, its answers and :class:`LocalForge` live in :mod:`steps.forge.forges`, which imports
no client (re-exported here): proposing on a host without an API costs no githubkit import.

Errors: :class:`NoCommitsBetween` when GitHub refuses a PR because head adds nothing to base
(commit-pr reports ``unchanged``); everything else leaves as :mod:`steps.domain.errors` types.
"""

from __future__ import annotations

import logging

from githubkit import GitHub
from githubkit.exception import GitHubException, RequestFailed

from steps.domain.errors import ImagebumpError, NoCommitsBetween, PullRequestExists, TransientError
from steps.forge import github as gh
from steps.forge.forges import (  # the forge-neutral part (no client), re-exported
    MAX_STATUS_DESCRIPTION,
    STATUS_STATES,
    CommitStatus,
    Forge,
    LocalForge,
    PullRequest,
)

__all__ = [
    "MAX_STATUS_DESCRIPTION",
    "STATUS_STATES",
    "Forge",
    "GitHubForge",
    "LocalForge",
    "NoCommitsBetween",
    "CommitStatus",
    "PullRequest",
    "PullRequestExists",
    "split_reviewers",
]

log = logging.getLogger(__name__)


class GitHubForge:
    """:class:`Forge` over GitHub's REST API for one repository.

    Args:
        owner: repository owner (user or organisation).
        repo: repository name.
        client: a githubkit client (see :func:`steps.forge.github.client`).
        secrets: strings to redact from any message (the token).
    """

    def __init__(self, owner: str, repo: str, client: GitHub, secrets: tuple[str | None, ...] = ()) -> None:
        self.owner = owner
        self.repo = repo
        self.client = client
        self._secrets = secrets

    @classmethod
    def for_repo_url(
        cls, repo_url: str, settings: gh.GitHubSettings | None = None, retry: gh.RetryPolicy | None = None
    ) -> GitHubForge:
        """A forge for ``https://HOST/OWNER/REPO``, authenticated from ``settings`` (default: env)."""
        _host, owner, repo = gh.parse_repo_url(repo_url)
        settings = settings or gh.GitHubSettings.from_env()
        token = gh.api_token(settings, retry=retry)
        client = gh.GitHub(token, **gh.client_options(settings, retry))
        return cls(owner, repo, client, secrets=(token, settings.token))

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    def _fail(self, exc: Exception, what: str) -> ImagebumpError:
        return gh.translate(exc, f"{what} in {self.full_name}", self._secrets)

    @staticmethod
    def _pr(data: object) -> PullRequest:
        return PullRequest(
            number=data.number,  # type: ignore[attr-defined]
            url=data.html_url,  # type: ignore[attr-defined]
            state=data.state,  # type: ignore[attr-defined]
            head=data.head.ref,  # type: ignore[attr-defined]
            base=data.base.ref,  # type: ignore[attr-defined]
            title=data.title,  # type: ignore[attr-defined]
            body=data.body or "",  # type: ignore[attr-defined]
        )

    def find_open_pr(self, head: str, base: str) -> PullRequest | None:
        """The open pull request from branch ``head`` into ``base`` ("": into any branch)."""
        try:
            resp = self.client.rest.pulls.list(
                self.owner,
                self.repo,
                state="open",
                head=f"{self.owner}:{head}",
                per_page=10,
                **({"base": base} if base else {}),
            )
            pulls = resp.parsed_data
        except (GitHubException, ValueError) as exc:
            raise self._fail(exc, f"listing pull requests for {head}") from None
        # GitHub filters by head, but check: a fork's branch of the same name is not ours.
        mine = [p for p in pulls if p.head.ref == head and p.state == "open"]
        if len(mine) > 1:
            log.warning(
                "%d open PRs for %s in %s; using the oldest (#%d)",
                len(mine),
                head,
                self.full_name,
                min(p.number for p in mine),
            )
        return self._pr(min(mine, key=lambda p: p.number)) if mine else None

    def create_pr(self, *, head: str, base: str, title: str, body: str) -> PullRequest:
        """Open a pull request ``head`` → ``base``.

        Just after a push GitHub may not know the branch yet and answers 422 ``head invalid``: it is
        asked again after :data:`HEAD_INVALID_WAITS` (hub waits up to 9 s the same way), then the step
        fails as transient (exit 75; Argo comes back), never as a configuration error."""
        for wait in (*HEAD_INVALID_WAITS, None):
            try:
                resp = self.client.rest.pulls.create(
                    self.owner,
                    self.repo,
                    head=head,
                    base=base,
                    title=title,
                    body=body,
                    maintainer_can_modify=True,
                )
                return self._pr(resp.parsed_data)
            except RequestFailed as exc:
                if exc.response.status_code == 422:
                    text = gh.error_text(exc)
                    if "no commits between" in text.lower():
                        raise NoCommitsBetween(f"{base} already contains {head} ({text})") from None
                    if "already exists" in text.lower():
                        raise PullRequestExists(
                            f"a pull request for {head} already exists ({text})"
                        ) from None
                    if "head invalid" in text.lower():
                        if wait is not None:
                            log.info(
                                "GitHub does not know %s yet (%s); asking again in %.0fs", head, text, wait
                            )
                            gh.CLOCK.sleep(wait)
                            continue
                        raise TransientError(
                            f"creating a pull request {head} → {base} in {self.full_name}: GitHub still "
                            f"answers {text!r} after the push; retried later"
                        ) from None
                raise self._fail(exc, f"creating a pull request {head} → {base}") from None
            except (GitHubException, ValueError) as exc:
                raise self._fail(exc, f"creating a pull request {head} → {base}") from None
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def update_pr(self, number: int, *, title: str, body: str) -> PullRequest:
        try:
            resp = self.client.rest.pulls.update(self.owner, self.repo, number, title=title, body=body)
            return self._pr(resp.parsed_data)
        except (GitHubException, ValueError) as exc:
            raise self._fail(exc, f"updating pull request #{number}") from None

    def add_labels(self, number: int, labels: list[str]) -> None:
        if not labels:
            return
        try:
            _ = self.client.rest.issues.add_labels(
                self.owner, self.repo, number, labels=list(labels)
            ).parsed_data
        except (GitHubException, ValueError) as exc:
            raise self._fail(exc, f"labelling pull request #{number}") from None

    def request_reviewers(self, number: int, reviewers: list[str]) -> None:
        users, teams = split_reviewers(reviewers)
        if not users and not teams:
            return
        try:
            _ = self.client.rest.pulls.request_reviewers(
                self.owner, self.repo, number, reviewers=users, team_reviewers=teams
            ).parsed_data
        except RequestFailed as exc:
            # 422: a reviewer is not a collaborator (or is the author). The PR stands; say so loudly.
            if exc.response.status_code == 422:
                log.warning(
                    "could not request reviewers %s on %s#%d: %s",
                    reviewers,
                    self.full_name,
                    number,
                    gh.error_text(exc),
                )
                return
            raise self._fail(exc, f"requesting reviewers on pull request #{number}") from None
        except (GitHubException, ValueError) as exc:
            raise self._fail(exc, f"requesting reviewers on pull request #{number}") from None

    def comment_once(self, number: int, marker: str, body: str, *, strict: bool = False) -> bool:
        """One comment per pull request for one thing said (``marker``, a hidden line in ``body``):
        the comments are read first (at most :data:`MAX_COMMENT_PAGES` pages), so every later event
        finds it and says nothing. A comment GitHub refuses is a warning: what it reports stands;
        ``strict`` (a notification, which counts it failed and tries again later): it is raised,
        translated (:func:`steps.forge.github.translate`: transient or not)."""
        what = f"commenting on pull request #{number}"
        try:
            for page in range(1, MAX_COMMENT_PAGES + 1):
                comments = self.client.rest.issues.list_comments(
                    self.owner, self.repo, number, per_page=100, page=page
                ).parsed_data
                if any(marker in (c.body or "") for c in comments):
                    return False
                if len(comments) < 100:
                    break
            self.client.rest.issues.create_comment(self.owner, self.repo, number, body=body)
        except (GitHubException, ValueError) as exc:
            if strict:
                raise self._fail(exc, what) from None
            log.warning("could not comment on %s#%d: %s", self.full_name, number, self._fail(exc, what))
            return False
        return True

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
        """``POST /repos/{o}/{r}/statuses/{sha}`` (the App needs the "Commit statuses: write"
        permission, a token ``repo:status``). The description is cut to GitHub's 140 characters. A
        status GitHub refuses is a warning, like a comment: it never fails the step that sets it;
        ``strict``: it is raised, translated (transient or not)."""
        if state not in STATUS_STATES:
            raise ValueError(f"commit status state {state!r}: use one of {', '.join(STATUS_STATES)}")
        text = description if len(description) <= MAX_STATUS_DESCRIPTION else description[:139] + "…"
        what = f"setting status {context} on commit {sha[:12]}"
        body: dict[str, str] = {"state": state, "context": context, "description": text}
        if target_url:
            body["target_url"] = target_url
        try:
            self.client.rest.repos.create_commit_status(self.owner, self.repo, sha, data=body)  # type: ignore[arg-type]
        except (GitHubException, ValueError) as exc:
            if strict:
                raise self._fail(exc, what) from None
            log.warning(
                "could not set a status on %s@%s: %s", self.full_name, sha[:12], self._fail(exc, what)
            )
            return False
        return True

    def statuses(self, sha: str) -> dict[str, CommitStatus]:
        """``GET /repos/{o}/{r}/commits/{sha}/status``: the latest status per context.

        GitHub pages the combined status's ``statuses`` (30 by default, 100 at most) and says how
        many there are (``total_count``): every page is read, at most :data:`MAX_STATUS_PAGES`."""
        found: dict[str, CommitStatus] = {}
        try:
            for page in range(1, MAX_STATUS_PAGES + 1):
                combined = self.client.rest.repos.get_combined_status_for_ref(
                    self.owner, self.repo, sha, per_page=100, page=page
                ).parsed_data
                for s in combined.statuses:
                    found.setdefault(
                        s.context,
                        CommitStatus(
                            context=s.context,
                            state=s.state,
                            description=s.description or "",
                            target_url=s.target_url,
                        ),
                    )
                if len(combined.statuses) < 100 or len(found) >= combined.total_count:
                    break
        except (GitHubException, ValueError) as exc:
            raise self._fail(exc, f"reading the statuses of commit {sha[:12]}") from None
        return found


#: Waits (seconds) before asking again when GitHub answers 422 ``head invalid`` for a branch just
#: pushed (its replicas catch up within seconds: mislav/hub ``HUB_RETRY_TIMEOUT``, 9 s).
HEAD_INVALID_WAITS = (1.0, 2.0, 4.0)
#: At most this many pages (100 contexts each) of a commit's combined status are read.
MAX_STATUS_PAGES = 10
#: At most this many pages (100 comments each) of a pull request's comments are read for a marker.
MAX_COMMENT_PAGES = 10


def split_reviewers(reviewers: list[str]) -> tuple[list[str], list[str]]:
    """``["alice", "org/team-a", "team:b"]`` → ``(["alice"], ["team-a", "b"])``."""
    users: list[str] = []
    teams: list[str] = []
    for reviewer in reviewers:
        reviewer = reviewer.strip().lstrip("@")
        if not reviewer:
            continue
        if reviewer.startswith("team:"):
            teams.append(reviewer[len("team:") :])
        elif "/" in reviewer:
            teams.append(reviewer.split("/", 1)[1])
        else:
            users.append(reviewer)
    return users, teams

"""Commits through GitHub's git database API: signed by GitHub (Verified), moved with a lease.

``commitMethod: api`` (``provider: github``). commit-pr still builds the commit locally — that is
how it decides, and how it knows the tree id git computes for the edit — but lands it through
GitHub's REST git database instead of ``git push``:

1. ``POST /repos/{o}/{r}/git/trees`` with ``base_tree`` = the planned parent's tree and one entry
   per changed file (path, the mode the file has, its text as ``content``: GitHub writes the blob;
   a separate ``POST …/git/blobs`` would be one more content-creating request for the same bytes).
   The tree id GitHub answers must equal the tree id git computed locally, else
   :class:`~steps.domain.errors.TreeMismatch` and nothing points at it (byte-faithful, modes kept).
2. ``POST …/git/commits`` with the message, that tree and the planned parent, and **no** author,
   committer or signature: authenticated as a GitHub App installation, GitHub signs it and the
   response's ``verification`` says ``verified: true`` (``reason: valid``). With a personal token,
   or an Enterprise Server without web commit signing, it says false and why; with
   ``require_verified`` that is :class:`~steps.domain.errors.UnverifiedCommit` (exit 2) and no ref moves.
3. Move the ref, never over someone else's work:

   - :meth:`GitDatabase.fast_forward` — ``PATCH …/git/refs/heads/B`` with ``force: false``.
     GitHub's 422 "Update is not a fast forward" is a lost race (:class:`~steps.domain.errors.PushRejected`).
   - :meth:`GitDatabase.create_branch` — ``POST …/git/refs``; 422 "Reference already exists" is a
     lost race.
   - :meth:`GitDatabase.move_with_lease` — GraphQL ``updateRefs`` with ``beforeOid`` (REST's ref
     update has no expected value): GitHub moves the ref only while it still points at the commit
     read before, atomically; otherwise a lost race.

Fewer content-creating requests (issue 33), :meth:`GitDatabase.append_head`: GraphQL
``createCommitOnBranch`` creates the commit and moves the branch in one request, only while the
branch's head is the planned parent (``expectedHeadOid``, its lease). ``mode: commit``: the tree
proven (1.) then that mutation — 2 requests, not 3; a new PR branch: the branch created at the base,
the mutation, the created commit's tree compared before a pull request points at it — 2, not 3.
Not with ``require_verified`` (no ref may move before GitHub said the commit is Verified) nor for a
file whose mode is not ``100644`` (the mutation takes no mode): then 1.–3. as above.

Rate limits: every request of one step shares a :class:`~steps.forge.github.RateLimitBudget`
(:func:`steps.forge.github.rate_limit_wait`: ``Retry-After``, a reset, or for a secondary limit naming
no wait a minute doubling; every wait at least a floor, so ``Retry-After: 0`` spends it too); a wait
beyond what is left of it gives up as :class:`~steps.domain.errors.TransientError` (exit 75: Argo
retries the step later). A 422 "Reference cannot be updated" (GitHub's answer to concurrent updates
of one ref) is a lost race like "not a fast forward". Requests are counted
(:attr:`GitDatabase.requests`, every HTTP request including retries) and logged per step.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from githubkit import GitHub
from githubkit.exception import GitHubException, GraphQLFailed, RequestFailed

from steps.domain.errors import (
    ConfigError,
    ImagebumpError,
    PushRejected,
    TransientError,
    TreeMismatch,
    UnverifiedCommit,
)
from steps.forge import github as gh
from steps.forge.github import RateLimitBudget as RateLimitBudget  # the step's budget (re-exported)

if TYPE_CHECKING:
    from steps.git import ClonedRepo

log = logging.getLogger(__name__)

ZERO_OID = "0" * 40

_REPOSITORY_ID = "query($owner: String!, $name: String!) { repository(owner: $owner, name: $name) { id } }"
_UPDATE_REFS = (
    "mutation($repositoryId: ID!, $refUpdates: [RefUpdate!]!) "
    "{ updateRefs(input: {repositoryId: $repositoryId, refUpdates: $refUpdates}) { clientMutationId } }"
)

_CREATE_COMMIT_ON_BRANCH = (
    "mutation($input: CreateCommitOnBranchInput!) { createCommitOnBranch(input: $input) "
    "{ commit { oid tree { oid } signature { isValid state } } } }"
)

#: GraphQL repository ids, per (API URL, owner, repo): they never change.
_REPOSITORY_IDS: dict[tuple[str, str, str], str] = {}
_IDS_LOCK = threading.Lock()


@dataclass(frozen=True)
class FileChange:
    """One file of the new tree: its path in the repository, git mode (``100644``/``100755``), text."""

    path: str
    mode: str
    text: str


@dataclass(frozen=True)
class ApiCommit:
    """A commit GitHub created: its id, tree, and GitHub's verification of it."""

    sha: str
    tree: str
    verified: bool
    reason: str

    def outputs(self) -> dict[str, str]:
        """commit-pr's outputs ``verified`` (``true``/``false``) and ``verification_reason``."""
        return {"verified": str(self.verified).lower(), "verification_reason": self.reason}


def _lost_race(text: str) -> bool:
    """GitHub's 422 on a ref move that means "someone else moved it": "Update is not a fast forward",
    or "Reference cannot be updated", which GitHub answers to concurrent updates of one ref
    (reported on ``PATCH …/git/refs/heads/B`` when a person pushed meanwhile: cagov/wordpress-to-github
    #74, osunyorg/admin #119). A lost race is retried on the new tip, never a configuration error."""
    lowered = text.lower()
    return "fast forward" in lowered or "reference cannot be updated" in lowered


#: What GitHub says when a branch protection or ruleset refuses a ref move (git's GH006 "Protected
#: branch update failed", GH013 "Repository rule violations found"; the API's "N of N required
#: status checks are expected", "Changes must be made through a pull request"; Dependabot matches
#: /required status check/: dependabot-core #3998).
_PROTECTED = (
    "protected branch",
    "required status check",
    "must be made through a pull request",
    "repository rule violation",
    "cannot update this protected ref",
    "gh006",
    "gh013",
)


def _protected(text: str) -> bool:
    lowered = text.lower()
    return any(mark in lowered for mark in _PROTECTED)


class GitDatabase:
    """GitHub's git database (and ``updateRefs``) for one repository, requests counted.

    Args:
        owner, repo: the repository.
        client: a githubkit client built by :meth:`for_repo_url` (its event hook counts requests).
        retry: the step's :class:`RateLimitBudget` (the client's ``auto_retry``).
        api_url: the API base (the key of the repository id cache).
        secrets: strings to redact from any message.
    """

    def __init__(
        self,
        owner: str,
        repo: str,
        client: GitHub,
        retry: RateLimitBudget,
        api_url: str,
        secrets: tuple[str | None, ...] = (),
    ) -> None:
        self.owner, self.repo, self.client, self.retry = owner, repo, client, retry
        self.api_url = api_url
        self.secrets = secrets
        self.requests = 0
        self.content_requests = 0

    @classmethod
    def for_repo_url(
        cls, repo_url: str, settings: gh.GitHubSettings, budget: float, retry: RateLimitBudget | None = None
    ) -> GitDatabase:
        """A database for ``https://HOST/OWNER/REPO`` with ``settings``' credentials and a fresh budget
        (or ``retry``, a budget made by the caller: tests inject its clock)."""
        _host, owner, repo = gh.parse_repo_url(repo_url)
        retry = retry or RateLimitBudget(budget)
        token = gh.api_token(settings, retry=retry)
        holder: list[GitDatabase] = []

        def count(request: httpx.Request) -> None:
            if not holder:
                return
            holder[0].requests += 1
            graphql = request.url.path.endswith("/graphql")
            if (request.method != "GET" and not graphql) or (graphql and b"mutation" in request.content[:40]):
                holder[0].content_requests += 1

        client = GitHub(token, **gh.client_options(settings, retry, request_hooks=(count,)))
        db = cls(owner, repo, client, retry, settings.api_url, secrets=(token, settings.token))
        holder.append(db)
        return db

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    def log_cost(self) -> None:
        """Log what this step cost in GitHub requests (docs/verified-commits.md counts them per event)."""
        log.info(
            "GitHub git database: %d requests (%d content-creating), %.1fs waited on rate limits",
            self.requests,
            self.content_requests,
            self.retry.waited,
            extra={
                "fields": {
                    "github_requests": self.requests,
                    "github_content_requests": self.content_requests,
                    "rate_limit_waited_s": round(self.retry.waited, 3),
                }
            },
        )

    def commit_head(
        self, repo: ClonedRepo, path: str, text: str, message: str, require_verified: bool
    ) -> ApiCommit:
        """Create through GitHub the commit ``repo`` just made locally at ``HEAD`` from ``message`` —
        same parent, the same tree (proven by its id) with ``path`` at its mode; see :meth:`commit`."""
        parent, parent_tree, tree = repo.head_trees()
        mode = repo.mode_at("HEAD", path)
        return self.commit(
            parent=parent,
            parent_tree=parent_tree,
            changes=[FileChange(path, mode or "100644", text)],
            message=message,
            expected_tree=tree,
            require_verified=require_verified,
        )

    def _fail(self, exc: Exception, what: str) -> ImagebumpError:
        return gh.translate(exc, f"{what} in {self.full_name}", self.secrets)

    # ----------------------------------------------------------------------- objects

    def commit(
        self,
        *,
        parent: str,
        parent_tree: str,
        changes: list[FileChange],
        message: str,
        expected_tree: str,
        require_verified: bool,
    ) -> ApiCommit:
        """Create the tree and the commit (no author, committer or signature: GitHub signs it).

        Raises:
            TreeMismatch: GitHub's tree id is not ``expected_tree`` (no commit is made).
            UnverifiedCommit: ``require_verified`` and GitHub does not verify the commit.
        """
        tree = self.prove_tree(parent, parent_tree, changes, expected_tree)
        try:
            made = self.client.rest.git.create_commit(
                self.owner, self.repo, message=message, tree=tree, parents=[parent]
            ).parsed_data
        except (GitHubException, ValueError) as exc:
            raise self._fail(exc, "creating a commit") from None
        verification = made.verification
        result = ApiCommit(made.sha, tree, bool(verification.verified), str(verification.reason))
        self._log_made(result)
        if require_verified and not result.verified:
            raise UnverifiedCommit(
                f"GitHub does not verify commit {result.sha[:12]} in {self.full_name} (reason: {result.reason}) "
                "and verified commits are required (requireVerified / IMAGEBUMP_REQUIRE_VERIFIED); no ref was "
                "moved. Authenticate as a GitHub App installation (IMAGEBUMP_GITHUB_APP_ID, "
                "IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE, IMAGEBUMP_GITHUB_APP_INSTALLATION_ID), not a personal "
                "token, and on GitHub Enterprise Server turn on web commit signing"
            )
        return result

    def prove_tree(self, parent: str, parent_tree: str, changes: list[FileChange], expected_tree: str) -> str:
        """``POST git/trees``: the tree GitHub builds for ``changes`` on ``parent_tree``; its id must be
        ``expected_tree`` (git's, computed locally), else :class:`TreeMismatch` and nothing is made."""
        entries = [{"path": c.path, "mode": c.mode, "type": "blob", "content": c.text} for c in changes]
        try:
            tree = self.client.rest.git.create_tree(
                self.owner, self.repo, base_tree=parent_tree, tree=entries
            ).parsed_data
        except (GitHubException, ValueError) as exc:
            raise self._fail(exc, "creating a tree") from None
        if tree.sha != expected_tree:
            raise TreeMismatch(
                f"GitHub built tree {tree.sha} for {', '.join(c.path for c in changes)} on {parent[:12]} of "
                f"{self.full_name}, but git computes {expected_tree} for the same edit (bytes or file modes "
                "would differ); nothing was committed or moved. Use commitMethod: git for this rule and report "
                "the file"
            )
        return tree.sha

    @staticmethod
    def _log_made(result: ApiCommit) -> None:
        log.info(
            "GitHub created commit %s (verified: %s, reason: %s)",
            result.sha[:12],
            str(result.verified).lower(),
            result.reason,
            extra={"fields": {"verified": result.verified, "verification_reason": result.reason}},
        )

    def append_head(
        self, repo: ClonedRepo, path: str, text: str, message: str, branch: str, *, prove: bool, create: bool
    ) -> ApiCommit | None:
        """Land the commit ``repo`` made at ``HEAD`` on ``branch`` with fewer content-creating requests
        (issue 33), or None when this way cannot keep every guarantee (the file's mode is not
        ``100644``: ``createCommitOnBranch`` takes no mode) and the caller uses :meth:`commit_head`.

        ``createCommitOnBranch`` (GraphQL) creates the commit on ``branch`` and moves the branch in
        one request, only while the branch's head is still ``HEAD^`` (``expectedHeadOid``, its lease:
        a moved branch is :class:`PushRejected`). ``prove`` first proves the tree (:meth:`prove_tree`)
        before anything moves (``mode: commit``: 2 requests instead of 3); ``create`` first creates
        ``branch`` at ``HEAD^`` (a new proposal branch, no pull request yet: 2 instead of 3), and the
        tree of the created commit is proven from the mutation's answer before a pull request points
        at it: a mismatch deletes the branch again and raises :class:`TreeMismatch`.
        """
        parent, parent_tree, tree = repo.head_trees()
        mode = repo.mode_at("HEAD", path)
        if mode != "100644":
            return None
        changes = [FileChange(path, "100644", text)]
        if prove:
            self.prove_tree(parent, parent_tree, changes, tree)
        if create:
            self.create_branch(branch, parent)
        try:
            return self.commit_on_branch(branch, parent, changes, message, tree)
        except TreeMismatch:
            if create:
                self._delete_branch(branch)
            raise

    def stack_head(
        self, repo: ClonedRepo, path: str, text: str, message: str, branch: str, head: str
    ) -> ApiCommit | None:
        """Land the commit ``repo`` made at ``HEAD`` (on the newest base) as one more commit on the
        living ``branch``, whose head is ``head`` (issue 33: 3 content-creating requests per PR update
        instead of 4), or None when the file's mode is not ``100644`` (the caller rebuilds).

        :func:`steps.commit_pr.stack.decide_update` decided that ``head`` is imagebump's on the newest
        base and differs from it in ``path`` only, so ``head``'s tree with ``path`` replaced is
        ``HEAD``'s tree. That is proven first (:meth:`prove_tree` on ``head``'s tree: nothing points at
        the new tree unless GitHub builds git's), because the open pull request shows the branch as
        soon as it moves. Then ``createCommitOnBranch`` with ``expectedHeadOid`` = ``head``: a branch
        someone pushed to meanwhile is :class:`PushRejected` (a lost race; the caller re-reads it). Should
        GitHub still answer another tree for the commit, the branch is moved back to ``head`` (with a
        lease on that commit) and :class:`TreeMismatch` raised.
        """
        if repo.mode_at("HEAD", path) != "100644":
            return None
        tree, head_tree = repo.tree("HEAD"), repo.tree(head)
        changes = [FileChange(path, "100644", text)]
        self.prove_tree(head, head_tree, changes, tree)
        return self.commit_on_branch(branch, head, changes, message, tree, undo=True)

    def commit_on_branch(
        self,
        branch: str,
        expected_head: str,
        changes: list[FileChange],
        message: str,
        expected_tree: str,
        *,
        undo: bool = False,
    ) -> ApiCommit:
        """GraphQL ``createCommitOnBranch``: a commit of ``changes`` on ``branch``, whose head must be
        ``expected_head``; no author, committer or signature (GitHub signs it for an App installation,
        as the web editor's commits). The created commit's tree must be ``expected_tree``.
        https://docs.github.com/en/graphql/reference/mutations#createcommitonbranch
        """
        import base64

        headline, _, body = message.partition("\n")
        variables = {
            "input": {
                "branch": {"repositoryNameWithOwner": self.full_name, "branchName": branch},
                "expectedHeadOid": expected_head,
                "message": {"headline": headline, "body": body.lstrip("\n")},
                "fileChanges": {
                    "additions": [
                        {"path": c.path, "contents": base64.b64encode(c.text.encode("utf-8")).decode("ascii")}
                        for c in changes
                    ]
                },
            }
        }
        try:
            data = self.client.graphql.request(_CREATE_COMMIT_ON_BRANCH, variables)
        except GraphQLFailed as exc:
            errors = "; ".join(str(e.message)[:300] for e in exc.response.errors or [])
            now = self.ref(branch)
            if now == expected_head and _protected(errors):
                raise ConfigError(
                    f"GitHub refused to commit on {branch} of {self.full_name}: the branch is protected "
                    f"({errors}); use mode: pr for this rule, or let imagebump's App bypass the rule"
                ) from None
            if now and now != expected_head:
                landed = self._landed(now, expected_head, expected_tree, message)
                if landed is not None:  # an earlier try that answered 5xx or timed out made it
                    log.info("the retried commit on %s had landed: %s", branch, landed.sha[:12])
                    self._log_made(landed)
                    return landed
            if now != expected_head or _lost_race(errors) or "expected" in errors.lower():
                raise PushRejected(
                    f"{branch} of {self.full_name} moved from {expected_head[:12]} to {(now or 'nothing')[:12]} "
                    f"since it was read ({errors})"
                ) from None
            raise TransientError(
                f"GitHub refused to commit on {branch} of {self.full_name}: {errors}; retried"
            ) from None
        except RequestFailed as exc:
            text = gh.error_text(exc)
            if exc.response.status_code == 422 and _lost_race(text):
                raise PushRejected(f"{branch} of {self.full_name} could not be moved now ({text})") from None
            raise self._fail(exc, f"committing on {branch}") from None
        except (GitHubException, ValueError) as exc:
            raise self._fail(exc, f"committing on {branch}") from None
        made = (data or {}).get("createCommitOnBranch") if isinstance(data, dict) else None
        commit = made.get("commit") if isinstance(made, dict) else None
        if not isinstance(commit, dict) or not commit.get("oid"):
            raise TransientError(f"GitHub answered no commit for {branch} of {self.full_name}; retried")
        signature = commit.get("signature") or {}
        result = ApiCommit(
            str(commit["oid"]),
            str((commit.get("tree") or {}).get("oid") or ""),
            bool(signature.get("isValid")),
            str(signature.get("state") or "unsigned").lower(),
        )
        self._log_made(result)
        if result.tree != expected_tree:
            if undo:  # the branch back where it was, with a lease on the commit just made
                try:
                    self.move_with_lease(branch, expected_head, result.sha)
                except ImagebumpError as exc:
                    log.warning("could not move %s of %s back: %s", branch, self.full_name, exc)
            raise TreeMismatch(
                f"GitHub built tree {result.tree} for {', '.join(c.path for c in changes)} on "
                f"{expected_head[:12]} of {self.full_name} (commit {result.sha[:12]} on {branch}), but git "
                f"computes {expected_tree} for the same edit. Use commitMethod: git for this rule and report the file"
            )
        return result

    def _landed(self, sha: str, parent: str, tree: str, message: str) -> ApiCommit | None:
        """``sha`` when it is this very commit, made by an earlier try of the same request: on
        ``parent``, with ``tree`` and ``message``. A 5xx or a timeout does not say the write failed
        (GitHub may answer 502 after doing it), and the retried mutation then finds the branch moved."""
        try:
            made = self.client.rest.git.get_commit(self.owner, self.repo, sha).parsed_data
        except (GitHubException, ValueError):
            return None
        parents = [p.sha for p in made.parents]
        if parents != [parent] or made.tree.sha != tree or made.message.strip() != message.strip():
            return None
        verification = made.verification
        return ApiCommit(
            made.sha,
            made.tree.sha,
            bool(verification and verification.verified),
            str((verification.reason if verification else None) or "unsigned").lower(),
        )

    def _delete_branch(self, branch: str) -> None:
        """Delete ``branch`` (best effort: a branch this step created whose commit failed its proof)."""
        try:
            self.client.rest.git.delete_ref(self.owner, self.repo, f"heads/{branch}")
        except (GitHubException, ValueError) as exc:
            log.warning("could not delete branch %s of %s: %s", branch, self.full_name, exc)

    # ----------------------------------------------------------------------- refs

    def ref(self, branch: str) -> str | None:
        """The commit ``refs/heads/<branch>`` points at, or None when there is no such branch."""
        try:
            found = self.client.rest.git.get_ref(self.owner, self.repo, f"heads/{branch}").parsed_data
        except RequestFailed as exc:
            if exc.response.status_code == 404:
                return None
            raise self._fail(exc, f"reading branch {branch}") from None
        except (GitHubException, ValueError) as exc:
            raise self._fail(exc, f"reading branch {branch}") from None
        return found.object_.sha if found.ref == f"refs/heads/{branch}" else None

    def fast_forward(self, branch: str, sha: str) -> None:
        """Move ``branch`` to ``sha`` only as a fast-forward; a moved branch is :class:`PushRejected`."""
        try:
            self.client.rest.git.update_ref(self.owner, self.repo, f"heads/{branch}", sha=sha, force=False)
        except RequestFailed as exc:
            text = gh.error_text(exc)
            if exc.response.status_code == 422 and _lost_race(text):
                raise PushRejected(f"{branch} of {self.full_name} moved on ({text})") from None
            raise self._fail(exc, f"moving {branch} to {sha[:12]}") from None
        except (GitHubException, ValueError) as exc:
            raise self._fail(exc, f"moving {branch} to {sha[:12]}") from None

    def create_branch(self, branch: str, sha: str) -> None:
        """Create ``branch`` at ``sha``; a branch that appeared meanwhile is :class:`PushRejected`."""
        try:
            self.client.rest.git.create_ref(self.owner, self.repo, ref=f"refs/heads/{branch}", sha=sha)
        except RequestFailed as exc:
            text = gh.error_text(exc)
            if exc.response.status_code == 422 and ("already exists" in text.lower() or _lost_race(text)):
                if self.ref(branch) == sha:  # a retried request that did land
                    return
                raise PushRejected(f"{branch} of {self.full_name} was created meanwhile ({text})") from None
            raise self._fail(exc, f"creating branch {branch}") from None
        except (GitHubException, ValueError) as exc:
            raise self._fail(exc, f"creating branch {branch}") from None

    def repository_id(self) -> str:
        """The repository's GraphQL id (cached for the process: it never changes)."""
        key = (self.api_url, self.owner, self.repo)
        with _IDS_LOCK:
            if key in _REPOSITORY_IDS:
                return _REPOSITORY_IDS[key]
        try:
            data = self.client.graphql.request(_REPOSITORY_ID, {"owner": self.owner, "name": self.repo})
        except (GitHubException, ValueError) as exc:
            raise self._fail(exc, "reading the repository id") from None
        repository = data.get("repository") if isinstance(data, dict) else None
        found = repository.get("id") if isinstance(repository, dict) else None
        if not found:
            raise TransientError(f"GitHub returned no repository id for {self.full_name}; retried")
        with _IDS_LOCK:
            _REPOSITORY_IDS[key] = str(found)
        return str(found)

    def move_with_lease(self, branch: str, sha: str, expected: str) -> None:
        """Point ``branch`` at ``sha`` only while it still points at ``expected`` (GraphQL
        ``updateRefs`` with ``beforeOid``, atomic on GitHub's side); otherwise :class:`PushRejected`."""
        update: dict[str, Any] = {
            "name": f"refs/heads/{branch}",
            "afterOid": sha,
            "beforeOid": expected,
            "force": True,  # the new commit sits on the newest base, not on the branch's old tip
        }
        repository = self.repository_id()
        try:
            self.client.graphql.request(_UPDATE_REFS, {"repositoryId": repository, "refUpdates": [update]})
            return
        except GraphQLFailed as exc:
            errors = "; ".join(str(e.message)[:300] for e in exc.response.errors or [])
        except (GitHubException, ValueError) as exc:
            raise self._fail(exc, f"moving {branch}") from None
        now = self.ref(branch)  # GitHub refused: find out whether the lease was what failed
        if now == sha:  # a retried mutation that did land
            return
        if now != expected:
            raise PushRejected(
                f"{branch} of {self.full_name} moved from {expected[:12]} to {(now or 'nothing')[:12]} "
                f"since it was read ({errors})"
            )
        if _lost_race(errors):  # GitHub's answer to concurrent updates of one ref: try again on the new tip
            raise PushRejected(f"{branch} of {self.full_name} could not be moved now ({errors})")
        raise TransientError(f"GitHub refused to move {branch} of {self.full_name}: {errors}; retried")

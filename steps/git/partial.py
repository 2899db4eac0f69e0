"""A bare partial clone for reading revisions: :class:`PartialClone`.

One clone per repository in a step's scratch directory, with the optional read token, fetched once
for every branch asked about (verify-live: ``--filter=tree:0``, the base branch's commits only;
reconcile: ``--filter=blob:none``, so ``git log -- path`` needs no further reads, and the overlay
files' blobs are fetched in one batch, :meth:`PartialClone.prefetch`). A revision not fetched yet is
fetched once more (the branch moved on); a revision still unknown then is remembered as not on the
branch, never fetched for again. Only commit ids reach git as revisions. What a revision means to a
step lives with the step (:mod:`steps.verify_live.revisions`).
"""

from __future__ import annotations

import re
from pathlib import Path

from steps.git import history
from steps.git.auth import GitAuth
from steps.git.process import run_git

_COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: The most of an overlay file read to find its image (a kustomization is a few KB).
MAX_FILE_BYTES = 1 << 20


class PartialClone:
    """One repository's bare partial clone, fetched once for ``branches``; counts its fetches."""

    def __init__(self, repo_url: str, branches: list[str], workdir: Path, *, filter: str = "tree:0") -> None:
        self.url = repo_url
        self.branches = sorted(set(branches))
        self.filter = filter
        self.auth = GitAuth.from_env(write=False)
        self.path = workdir
        self.fetches = 0
        self._missing: set[str] = set()  # revisions a fetch did not bring: not on these branches
        self._fetched_blobs: set[str] = set()
        self._commits: set[str] | None = None  # the commits fetched (listed on the first look)
        run_git(["init", "--quiet", "--bare", str(workdir)], auth=None, what="git init")
        self.git("config", "remote.origin.url", repo_url)
        self.git("config", "remote.origin.promisor", "true")
        self.git("config", "remote.origin.partialclonefilter", filter)
        self.fetch()

    def git(self, *args: str, check: bool = True, what: str | None = None, raw_stdout: bool = False):
        """Run a git command in this clone, with its auth (the shape :mod:`steps.git.history` calls)."""
        return run_git(
            list(args),
            self.path,
            self.auth,
            check,
            url=self.url,
            what=what or f"git {args[0]} in {self.url}",
            raw_stdout=raw_stdout,
        )

    def fetch(self) -> None:
        """Every branch asked about, in one fetch (commits, and trees unless ``tree:0``)."""
        self.fetches += 1
        self._commits = None
        self.git(
            "fetch",
            "--quiet",
            "--no-tags",
            f"--filter={self.filter}",
            "origin",
            *(f"+refs/heads/{b}:refs/heads/{b}" for b in self.branches),
        )

    def head(self, branch: str) -> str:
        """The branch's newest commit (as fetched)."""
        return self.git("rev-parse", "--verify", "--end-of-options", f"refs/heads/{branch}").stdout.strip()

    def last_change(self, branch: str, path: str) -> str | None:
        """The newest commit of ``branch``'s first-parent line that changed ``path`` (None: it never
        existed): a merge that took a side branch's version of the file is that change, as
        :func:`steps.git.history.touching` reads it."""
        out = self.git(
            "--literal-pathspecs",
            "log",
            "-1",
            "--first-parent",
            "--format=%H",
            f"refs/heads/{branch}",
            "--",
            path,
        ).stdout.strip()
        return out or None

    def blob(self, revision: str, path: str) -> str | None:
        """The id of ``path`` at ``revision`` (from the trees: no blob is read), or None."""
        proc = self.git(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}:{path}", check=False
        )
        return proc.stdout.strip() or None if proc.returncode == 0 else None

    def exists(self, revision: str, path: str) -> bool:
        return self.blob(revision, path) is not None

    def known(self, revision: str) -> bool:
        """Is ``revision`` (a commit id) here, fetching once when it is new; remembered when not."""
        if not _COMMIT_ID.fullmatch(revision) or revision in self._missing:
            return False
        if self._has(revision):
            return True
        self.fetch()
        if self._has(revision):
            return True
        self._missing.add(revision)  # not on the branch: another branch, or force-pushed away
        return False

    def known_locally(self, revision: str) -> bool:
        """Is ``revision`` (a commit id) here already (no fetch)?"""
        return bool(_COMMIT_ID.fullmatch(revision)) and self._has(revision)

    def _has(self, revision: str) -> bool:
        # not an object lookup: a partial clone fetches a missing object on its own, once per look,
        # so a revision not on the branch would cost a read every poll; the commits fetched are
        # listed once per fetch instead
        if self._commits is None:
            listed = self.git("rev-list", "--all").stdout.split()
            self._commits = set(listed)
        return revision in self._commits

    def is_ancestor(self, ancestor: str, revision: str) -> bool:
        return history.is_ancestor(self, ancestor, revision)

    def prefetch(self, pairs: list[tuple[str, str]]) -> None:
        """The blobs of ``(revision, path)`` pairs not fetched yet, in one fetch (partial clones
        otherwise fetch each blob on its own when it is read)."""
        wanted = []
        for revision, path in pairs:
            oid = self.blob(revision, path) if _COMMIT_ID.fullmatch(revision) else None
            if oid and oid not in self._fetched_blobs:
                wanted.append(oid)
        wanted = sorted(set(wanted))
        if not wanted:
            return
        self.fetches += 1
        history.fetch_objects(self, wanted, f"fetch of {len(wanted)} file(s) from {self.url}")
        self._fetched_blobs.update(wanted)

    def show(self, revision: str, path: str) -> str | None:
        """``path`` at ``revision`` (None: absent, or larger than :data:`MAX_FILE_BYTES`)."""
        oid = self.blob(revision, path)
        if oid is None:
            return None
        # not fetched by prefetch: the partial clone's own lazy fetch brings it as it is read
        read = history.read_blobs(self, [oid], MAX_FILE_BYTES, fetch=False)
        self._fetched_blobs.add(oid)
        data = read.get(oid, (0, None))[1]
        return None if data is None else data.decode("utf-8", "replace")

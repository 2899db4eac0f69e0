"""What Git says about the revisions Argo CD reports: does a revision contain the commit verified,
and which image does the overlay set there.

:class:`Clone`: one partial clone per repository in the step's scratch directory, with the
optional read token, fetched once for every branch asked about (verify-live: ``--filter=tree:0``,
the base branch's commits only; reconcile: ``--filter=blob:none``, so ``git log -- path`` needs no
further reads, and the overlay files' blobs are fetched in one batch, :meth:`Clone.prefetch`). A
revision not fetched yet is fetched once more (the branch moved on); a revision still unknown then
is remembered as not on the branch, never fetched for again. Only commit ids reach git as
revisions. :class:`History` is one overlay's view of a clone: ``git merge-base --is-ancestor``
decides containment, the overlay's file at a revision is read from the object store. Imports
:mod:`steps.git` and :mod:`steps.kustomize`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from steps import git
from steps.domain.errors import KustomizationError
from steps.git import history as githistory
from steps.verify_live.decide import RevisionFacts, expected_image

_COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: The most of an overlay file read to find its image (a kustomization is a few KB).
MAX_FILE_BYTES = 1 << 20


class Clone:
    """One repository's partial clone, fetched once for ``branches``; counts its fetches."""

    def __init__(self, repo_url: str, branches: list[str], workdir: Path, *, filter: str = "tree:0") -> None:
        self.url = repo_url
        self.branches = sorted(set(branches))
        self.filter = filter
        self.auth = git.GitAuth.from_env(write=False)
        self.path = workdir
        self.fetches = 0
        self._missing: set[str] = set()  # revisions a fetch did not bring: not on these branches
        self._fetched_blobs: set[str] = set()
        self._commits: set[str] | None = None  # the commits fetched (listed on the first look)
        git.run_git(["init", "--quiet", "--bare", str(workdir)], auth=None, what="git init")
        self.git("config", "remote.origin.url", repo_url)
        self.git("config", "remote.origin.promisor", "true")
        self.git("config", "remote.origin.partialclonefilter", filter)
        self.fetch()

    def git(self, *args: str, check: bool = True, what: str | None = None, raw_stdout: bool = False):
        """Run a git command in this clone, with its auth (the shape :mod:`steps.git.history` calls)."""
        return git.run_git(
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
        """The newest commit of ``branch`` that changed ``path`` (None: it never existed)."""
        out = self.git("log", "-1", "--format=%H", f"refs/heads/{branch}", "--", path).stdout.strip()
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
        return ancestor == revision or (
            self.git("merge-base", "--is-ancestor", ancestor, revision, check=False).returncode == 0
        )

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
        githistory.fetch_objects(self, wanted, f"fetch of {len(wanted)} file(s) from {self.url}")
        self._fetched_blobs.update(wanted)

    def show(self, revision: str, path: str) -> str | None:
        """``path`` at ``revision`` (None: absent, or larger than :data:`MAX_FILE_BYTES`)."""
        oid = self.blob(revision, path)
        if oid is None:
            return None
        # not fetched by prefetch: the partial clone's own lazy fetch brings it as it is read
        read = githistory.read_blobs(self, [oid], MAX_FILE_BYTES, fetch=False)
        self._fetched_blobs.add(oid)
        data = read.get(oid, (0, None))[1]
        return None if data is None else data.decode("utf-8", "replace")


class History:
    """One overlay's view of the base branch: which revisions contain ``commit``, and the image the
    overlay's ``file`` sets at a revision (memoised per revision)."""

    def __init__(
        self,
        repo_url: str,
        branch: str,
        commit: str,
        file: str,
        image_name: str,
        workdir: Path | None = None,
        *,
        clone: Clone | None = None,
        values: Any = None,
    ) -> None:
        if clone is None:
            if workdir is None:
                raise ValueError("History needs a workdir or a clone")
            clone = Clone(repo_url, [branch], workdir)
        self.clone = clone
        self.url, self.branch, self.commit = repo_url, branch, commit
        self.file, self.image_name = file, image_name
        self.values = values  # a Helm values file: how to find the image (steps.domain.models.ValuesRef)
        self._facts: dict[str, RevisionFacts] = {}
        if not commit:  # reconcile: the newest change of the overlay's file is the one to find live
            self.commit = self.last_change(file) or self.head()

    def head(self) -> str:
        """The base branch's newest commit (as fetched)."""
        return self.clone.head(self.branch)

    def last_change(self, path: str) -> str | None:
        return self.clone.last_change(self.branch, path)

    def exists(self, revision: str, path: str) -> bool:
        return self.clone.exists(revision, path)

    def facts(self, revision: str) -> RevisionFacts:
        """Does ``revision`` contain the commit, and what the overlay's entry renders there."""
        if revision in self._facts:
            return self._facts[revision]
        if not self.clone.known(revision):
            facts = RevisionFacts(False)
        else:
            contains = self.clone.is_ancestor(self.commit, revision)
            facts = RevisionFacts(contains, self._image_at(revision) if contains else None)
        if len(self._facts) < 10_000:
            self._facts[revision] = facts
        return facts

    def _image_at(self, revision: str) -> str | None:
        from steps.kustomize import read_entry

        text = self.clone.show(revision, self.file)
        if text is None:
            return None
        try:
            entry = read_entry(text, self.image_name, source=self.file, values=self.values)
        except KustomizationError:  # a file that no longer parses: what Git holds there is unknown
            return None
        if entry is None:
            return None
        return expected_image(entry.newName or entry.name, entry.newTag, entry.digest)

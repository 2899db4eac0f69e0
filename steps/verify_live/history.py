"""What Git says about the revisions Argo CD reports: does a revision contain the commit verified,
and which image does the overlay set there.

One partial clone per step (``--filter=tree:0``: the base branch's commits only, no work tree) in the step's scratch directory, with the optional read token. ``git merge-base
--is-ancestor`` decides containment; a revision not fetched yet is fetched once more (the branch
moved on). The overlay's file at a revision is read from the object store (its blob fetched on
demand). Imports :mod:`steps.git` and :mod:`steps.kustomize`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from steps import git
from steps.domain.errors import KustomizationError
from steps.verify_live.decide import RevisionFacts, expected_image


class History:
    """The base branch's history, fetched once into ``workdir`` and again when a revision is new."""

    def __init__(
        self,
        repo_url: str,
        branch: str,
        commit: str,
        file: str,
        image_name: str,
        workdir: Path,
        values: Any = None,
    ) -> None:
        self.url, self.branch, self.commit = repo_url, branch, commit
        self.file, self.image_name = file, image_name
        self.values = values  # a Helm values file: how to find the image (steps.domain.models.ValuesRef)
        self.auth = git.GitAuth.from_env(write=False)
        self.path = workdir
        self._facts: dict[str, RevisionFacts] = {}
        git.run_git(["init", "--quiet", "--bare", str(workdir)], auth=None, what="git init")
        self._git(["config", "remote.origin.url", repo_url])
        self._git(["config", "remote.origin.promisor", "true"])
        self._git(["config", "remote.origin.partialclonefilter", "tree:0"])
        self.fetch()
        if not commit:  # the sweep: the newest change of the overlay's file is the one to find live
            self.commit = self.last_change(file) or self.head()

    def _git(self, args: list[str], *, check: bool = True):
        return git.run_git(
            args, self.path, self.auth, check, url=self.url, what=f"git {args[0]} in {self.url}"
        )

    def fetch(self) -> None:
        self._git(
            [
                "fetch",
                "--quiet",
                "--no-tags",
                # commits only: ancestry needs no trees; the one file read fetches its trees on demand
                "--filter=tree:0",
                "origin",
                f"+refs/heads/{self.branch}:refs/heads/{self.branch}",
            ]
        )

    def head(self) -> str:
        """The base branch's newest commit (as fetched)."""
        return self._git(["rev-parse", f"refs/heads/{self.branch}"]).stdout.strip()

    def last_change(self, path: str) -> str | None:
        """The newest commit of the branch that changed ``path`` (None: it never existed)."""
        out = self._git(["log", "-1", "--format=%H", f"refs/heads/{self.branch}", "--", path]).stdout.strip()
        return out or None

    def exists(self, revision: str, path: str) -> bool:
        return self._git(["cat-file", "-e", f"{revision}:{path}"], check=False).returncode == 0

    def _known(self, revision: str) -> bool:
        return self._git(["cat-file", "-e", f"{revision}^{{commit}}"], check=False).returncode == 0

    def facts(self, revision: str) -> RevisionFacts:
        """Does ``revision`` contain the commit, and what the overlay's entry renders there."""
        if revision in self._facts:
            return self._facts[revision]
        if not self._known(revision):
            self.fetch()
            if not self._known(revision):  # not on the branch: another branch, or force-pushed away
                return RevisionFacts(False)
        contains = revision == self.commit or (
            self._git(["merge-base", "--is-ancestor", self.commit, revision], check=False).returncode == 0
        )
        facts = RevisionFacts(contains, self._image_at(revision) if contains else None)
        self._facts[revision] = facts
        return facts

    def _image_at(self, revision: str) -> str | None:
        from steps.kustomize import read_entry

        shown = self._git(["show", f"{revision}:{self.file}"], check=False)
        if shown.returncode != 0:
            return None
        try:
            entry = read_entry(shown.stdout, self.image_name, source=self.file, values=self.values)
        except KustomizationError:  # a file that no longer parses: what Git holds there is unknown
            return None
        if entry is None:
            return None
        return expected_image(entry.newName or entry.name, entry.newTag, entry.digest)

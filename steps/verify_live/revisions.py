"""What Git says about the revisions Argo CD reports: does a revision contain the commit verified,
and which image does the overlay set there.

The clone read is :class:`steps.git.PartialClone` (a bare partial clone: every git command
runs there). :class:`History` is one overlay's view of a clone: ``git merge-base --is-ancestor``
decides containment, the overlay's file at a revision is read from the object store. Imports
:mod:`steps.git` and :mod:`steps.kustomize`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from steps.domain.errors import KustomizationError
from steps.git import PartialClone
from steps.verify_live.decide import RevisionFacts, expected_image


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
        clone: PartialClone | None = None,
        values: Any = None,
    ) -> None:
        if clone is None:
            if workdir is None:
                raise ValueError("History needs a workdir or a clone")
            clone = PartialClone(repo_url, [branch], workdir)
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

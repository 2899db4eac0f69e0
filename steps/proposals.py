"""Reading what a proposal branch proposes: the gather half of "never downgrade a living proposal".

The branch's name is pure (:func:`steps.domain.branches.branch_name`); the judgement is pure
(:mod:`steps.domain.never_downgrade`); this module is the I/O between them: the ``images`` entry a file
holds at a revision of a :class:`steps.git.ClonedRepo`, read from the object store only (a partial
clone downloads just that blob; nothing is checked out). Used by edit-kustomize and commit-pr.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from steps.domain.errors import KustomizationError
from steps.domain.models import ImagesEntry, ValuesRef

if TYPE_CHECKING:
    from steps.git import ClonedRepo


def entry_at(
    repo: ClonedRepo, rev: str, file: str, image_name: str, values: ValuesRef | None = None
) -> ImagesEntry | None:
    """The entry ``image_name`` of ``file`` at ``rev``; None when the file is absent, not a regular
    file, not a readable kustomization (or values file: ``values``), or has no such entry: no
    proposal to protect there."""
    from steps.kustomize import read_entry

    text = repo.show(rev, file)
    if text is None:
        return None
    try:
        return read_entry(text, image_name, source=file, values=values)
    except KustomizationError:
        return None


def branch_entry(
    repo: ClonedRepo, branch: str, file: str, image_name: str, values: ValuesRef | None = None
) -> ImagesEntry | None:
    """Fetch the remote ``branch`` shallowly into ``repo`` and read its entry (None: no branch)."""
    sha = repo.fetch(branch)
    return entry_at(repo, sha, file, image_name, values) if sha else None

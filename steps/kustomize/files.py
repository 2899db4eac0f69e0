"""Finding the one kustomization file of an overlay directory, by kustomize's own file names."""

from __future__ import annotations

from pathlib import Path

from steps.domain.errors import KustomizationError

#: The file names kustomize looks for, in its own order of preference.
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")


# --------------------------------------------------------------------------------------------
# Finding the file


def find_kustomization(directory: Path) -> Path:
    """Return the one kustomization file in ``directory``.

    Raises:
        KustomizationError: the directory does not exist, holds none, or holds several.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise KustomizationError(
            f"{directory}: not a directory; pass an overlay directory or its kustomization file",
            reason="not-a-directory",
        )
    found = [directory / name for name in KUSTOMIZATION_FILES if (directory / name).is_file()]
    # On a case-insensitive filesystem "Kustomization" and "kustomization.yaml" differ anyway.
    if not found:
        raise KustomizationError(
            f"no kustomization in {directory}: expected one of {', '.join(KUSTOMIZATION_FILES)}",
            reason="no-kustomization",
        )
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise KustomizationError(
            f"ambiguous: found multiple kustomization files in {directory}: {names}; keep one",
            reason="multiple-kustomizations",
        )
    return found[0]

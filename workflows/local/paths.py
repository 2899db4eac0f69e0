"""Container paths a step may use, and where they live in its private temp dir (pure).

A pod's ``/tmp``, ``/argo`` and every volume mount are private to it; locally each such container
path ``/p`` becomes ``<step temp dir>/mounts/p``. Anything outside them is refused.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from steps.runtime.harness import DEFAULT_OUTPUTS_DIRECTORY  # /tmp/hera-outputs: never the real /tmp

#: Where Argo's executor puts a script template's source; rewritten into the step's temp dir.
STAGING_SCRIPT = "/argo/staging/script"
#: Container paths that are always private to a step (besides its volume mounts).
IMPLICIT_MOUNTS = ("/tmp", "/argo")


def container_path(path: str) -> PurePosixPath:
    """``path`` as an absolute container path (``tmp/x/`` → ``/tmp/x``)."""
    return PurePosixPath("/" + path.strip("/"))


def under(path: PurePosixPath, root: PurePosixPath) -> bool:
    """Whether ``path`` is ``root`` or inside it."""
    return path == root or root in path.parents


def is_private(path: str, mount_paths: list[str]) -> bool:
    """Whether the container path ``path`` is under /tmp, /argo or one of ``mount_paths``."""
    p = container_path(path)
    roots = list(IMPLICIT_MOUNTS) + [str(container_path(m)) for m in mount_paths]
    return any(under(p, PurePosixPath(r)) for r in roots)


def mount_points(mount_paths: list[str]) -> list[PurePosixPath]:
    """The private roots of a step, deepest first (so a nested mount wins)."""
    points = [container_path(m) for m in mount_paths] + [PurePosixPath(p) for p in IMPLICIT_MOUNTS]
    return sorted(points, key=lambda p: len(p.parts), reverse=True)


def host_path(path: str, root: Path, mounts: list[PurePosixPath]) -> Path | None:
    """Where the container path ``path`` lives under the step's temp dir ``root``; None if not private."""
    p = container_path(path)
    if any(under(p, m) for m in mounts):
        return root / "mounts" / str(p).lstrip("/")
    return None


__all__ = [
    "DEFAULT_OUTPUTS_DIRECTORY",
    "IMPLICIT_MOUNTS",
    "STAGING_SCRIPT",
    "container_path",
    "host_path",
    "is_private",
    "mount_points",
    "under",
]

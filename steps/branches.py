"""The one proposal branch of a target (``mode: pr``): a pure name, no I/O, no GitHub import.

Shared by edit-kustomize (which reads the branch to avoid planning a downgrade of a living
proposal) and commit-pr (which force-updates it). Reads and writes nothing.
"""

from __future__ import annotations

import hashlib
import re

from steps.models import ImagesEntry, Target

BRANCH_PREFIX = "imagebump"
MAX_BRANCH_LENGTH = 120


def _slug(text: str, limit: int) -> str:
    text = re.sub(r"[^a-z0-9._-]+", "-", text.lower())
    text = re.sub(r"[-._]{2,}", "-", text)  # no "..", no "._" oddities
    text = text.strip("-._")[:limit].strip("-._")
    return text.removesuffix(".lock") or "x"


def branch_name(target: Target) -> str:
    """The one branch of a target: ``imagebump/<env>/<path-slug>/<image-slug>-<hash8>``.

    Stable across events (it depends on env, overlay path, image, images[].name and the base
    branch as configured — never on tag or digest), a valid git ref, at most 120 characters; the
    hash keeps two targets apart when their slugs collide after shortening.
    """
    identity = "\n".join(
        [target.env, target.path.strip("/"), target.image, target.image_name or "", target.base_branch or ""]
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:8]
    repository = target.image.split("/", 1)[1] if "/" in target.image else target.image
    env = _slug(target.env, 24) if target.env else "default"
    path = _slug(target.path.strip("/").replace("/", "-") or "root", 48)
    image = _slug(repository.replace("/", "-"), 32)
    name = f"{BRANCH_PREFIX}/{env}/{path}/{image}-{digest}"
    return name[:MAX_BRANCH_LENGTH]


def proposed_entry(repo, rev: str, file: str, image_name: str) -> ImagesEntry | None:
    """The ``images`` entry ``image_name`` in ``file`` at ``rev`` of a :class:`steps.git.ClonedRepo`.

    Reads the object store only (a partial clone downloads just this blob); nothing is checked
    out. None when the file is absent, not a regular file, not a readable kustomization, or has no
    such entry: no proposal to protect there.
    """
    from steps.errors import KustomizationError
    from steps.kustomize import get_image

    listing = repo.git("ls-tree", rev, "--", file).stdout.strip()
    if not listing:
        return None
    mode, kind, _rest = listing.split(None, 2)
    if kind != "blob" or mode not in ("100644", "100755"):
        return None
    text = repo.git(
        "cat-file", "blob", f"{rev}:{file}", what=f"reading {file} at {rev[:12]} of {repo.url}"
    ).stdout
    try:
        return get_image(text, image_name, source=file)
    except KustomizationError:
        return None

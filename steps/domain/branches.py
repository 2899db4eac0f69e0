"""The one proposal branch of a target (``mode: pr``): a pure name, no I/O, no GitHub import.

Shared by edit-kustomize (which reads the branch to avoid planning a downgrade of a living
proposal), commit-pr (which force-updates it) and reconcile. Reads and writes nothing: reading
what a branch proposes is :mod:`steps.proposals`, judging it :mod:`steps.domain.never_downgrade`.
"""

from __future__ import annotations

import hashlib
import re

from steps.domain.models import Target

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
    where = target.edited.strip(
        "/"
    )  # the overlay; a values file or helmfile release (issue 34) by its own name
    identity = "\n".join(
        [target.env, where, target.image, target.settings.image_name or "", target.settings.base_branch or ""]
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:8]
    repository = target.image.split("/", 1)[1] if "/" in target.image else target.image
    env = _slug(target.env, 24) if target.env else "default"
    path = _slug(where.replace("/", "-").replace("#", "-").replace("@", "-") or "root", 48)
    image = _slug(repository.replace("/", "-"), 32)
    name = f"{BRANCH_PREFIX}/{env}/{path}/{image}-{digest}"
    return name[:MAX_BRANCH_LENGTH]

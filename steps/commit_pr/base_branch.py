"""The base branch both modes start from: the plan's own base seeded from the objects it carries,
else a clone of the newest base; and the overlay file read there.
"""

from __future__ import annotations

import logging
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from steps.domain.errors import CarriedObjectsError, KustomizationError
from steps.domain.models import Plan, Target

if TYPE_CHECKING:
    from steps import git

log = logging.getLogger(__name__)


def clone_base(target: Target, plan: Plan, auth: git.GitAuth, base: str, workdir: Path) -> git.ClonedRepo:
    """The newest ``base`` to re-apply the plan on.

    When the plan carries the file's text (:func:`steps.edit_kustomize.carry_text`), an objects-only
    clone (commits and trees, no blob, no checkout) told that text: while the file's blob on the
    newest base is the one the plan read, nothing is downloaded for it, also after a lost race.
    Otherwise a partial clone checked out sparsely on the file's directory.
    """
    from steps import git

    if plan.base_blob and plan.base_text:
        repo = git.clone(target.repo_url, workdir / "repo", branch=base, auth=auth, checkout=False)
        if not repo.know(plan.base_text, plan.base_blob):
            log.warning(
                "the plan's carried text of %s does not match its blob id; reading it again", plan.file
            )
        return repo
    return git.clone(
        target.repo_url,
        workdir / "repo",
        branch=base,
        paths=(str(PurePosixPath(plan.file).parent),),
        auth=auth,
    )


def seed_base(
    target: Target, plan: Plan, auth: git.GitAuth, base: str, workdir: Path
) -> git.ClonedRepo | None:
    """The plan's own base, made from the objects the plan carries (:func:`steps.git.seed`: no
    fetch), for a first attempt that pushes with a lease on it; None when the plan carries none, is
    for another branch, or its objects do not prove its text (then :func:`clone_base`)."""
    if not (plan.base_objects and plan.base_text and plan.base_commit) or plan.base_branch != base:
        return None
    import base64
    import binascii

    from steps import git

    try:
        try:
            objects = [base64.b64decode(o, validate=True) for o in plan.base_objects]
        except binascii.Error:
            raise CarriedObjectsError("a carried object is not base64") from None
        return git.seed(
            target.repo_url,
            workdir / "seed",
            branch=base,
            commit=plan.base_commit,
            objects=objects,
            path=plan.file,
            text=plan.base_text,
            blob=plan.base_blob,
            auth=auth,
        )
    except CarriedObjectsError as exc:
        log.warning("the plan's carried objects were not used (%s); cloning %s", exc, base)
        return None


def read_overlay_file(repo: git.ClonedRepo, plan: Plan, target: Target, base: str) -> str:
    """The plan's file on the newest base; KustomizationError when it is gone."""
    from steps.kustomize import read_limit

    text = repo.read(plan.file, **read_limit(plan.file, values=target.edits_values))
    if text is None:
        raise KustomizationError(
            f"{plan.file} does not exist on {base} of {target.repo_url} any more (moved or deleted since "
            "the plan?); fix the rule's path"
        )
    return text

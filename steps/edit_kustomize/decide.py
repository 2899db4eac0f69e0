"""edit-kustomize's pure core: the overlay's text, the target and ECR's push times → the plan.

:func:`decide` reads nothing and writes nothing: :mod:`steps.edit_kustomize.step` gathers (the
clone, the file, the push times :func:`steps.domain.never_downgrade.lookups` names) and acts (the
outputs). :func:`find_entry` is the entry the decision is about (a kustomization's ``images:``
entry, or the pushed image in a Helm values file); the never-downgrade decisions themselves are
:mod:`steps.domain.never_downgrade`'s, a person's pin or hold marker :mod:`steps.domain.intent`'s.
"""

# No `from __future__ import annotations`: the step module's models read real annotation objects.
import logging
from typing import TYPE_CHECKING

from steps.domain.errors import ConfigError, ImageNotFoundError
from steps.domain.models import ImagesEntry, Plan, Target, ValuesRef, image_ref

if TYPE_CHECKING:
    from steps.domain.never_downgrade import PushTimes

log = logging.getLogger(__name__)


def _new_entry(target: Target, old: ImagesEntry) -> ImagesEntry:
    """The entry after the edit: kustomize setter semantics (a tag alone drops the digest)."""
    tag = target.tag
    digest = target.digest if (target.settings.write_digest or not target.tag) else None
    if tag is None and digest is None:
        raise ConfigError(
            f"target for {target.image} has neither a tag nor a digest; nothing to set in the overlay"
        )
    data = old.model_dump(exclude_none=True)
    data.pop("newTag", None)
    data.pop("digest", None)
    return ImagesEntry(**data, newTag=tag, digest=digest)


def values_ref(target: Target, scope: list | None = None) -> ValuesRef | None:
    """How to find the image in the target's values file (None: the target edits a kustomization)."""
    return target.values_ref(scope)


def find_entry(text: str, target: Target, file: str, values: ValuesRef | None = None) -> ImagesEntry:
    """The overlay's entry for the target's image (pure); ImageNotFoundError naming the ones there.

    For a values file (``values``): the pushed image wherever the file holds it, as an entry whose
    ``name`` is the pushed repository (:func:`steps.kustomize.require_entry`)."""
    from steps import kustomize

    if values is not None:
        return kustomize.require_entry(text, target.image, source=file, values=values)
    wanted = target.settings.image_name or target.image
    old = kustomize.get_image(text, wanted, source=file)
    if old is None:
        found = [entry.name for entry in kustomize.read_images(text, source=file)]
        listed = f"found: {', '.join(found)}" if found else "it has no images entries"
        raise ImageNotFoundError(
            f"image {wanted!r} not in {file} ({listed}); add it under images:", found=found
        )
    return old


def decide(
    target: Target,
    text: str,
    file: str,
    base_commit: str,
    base_branch: str,
    known: "PushTimes",
    old: ImagesEntry | None = None,
    values: ValuesRef | None = None,
) -> Plan:
    """The pure core: the plan for ``target`` on the kustomization ``text``, given ECR's push times.

    ``known`` holds what :func:`steps.domain.never_downgrade.lookups` asked of ECR for this entry; ``old``,
    the entry :func:`find_entry` read from this ``text`` when the caller has it (else it is read
    here: a 1 MiB file costs a parse each time); ``values``, how to find the image when ``file`` is
    a Helm values file (the same decisions, the values-file writer: :mod:`steps.kustomize.seam`).
    """
    from steps import kustomize
    from steps.domain.intent import marker_hold, pinned
    from steps.domain.never_downgrade import decide_base

    if old is None:
        old = find_entry(text, target, file, values)
    new = _new_entry(target, old) if values is None else _new_values_entry(target, old)
    pin = pinned(old, target.image)  # what a person decided stands: a pin, a hold marker
    hold = None
    if not pin:
        hold = marker_hold(
            kustomize.entry_hold(text, old.name, by_new_name=False, source=file, values=values)
        )
    if pin or hold:
        decision, reason = ("pinned", pin) if pin else ("held", hold or "")
    else:
        decision, reason = decide_base(target, old, known)
    if decision == "current" and values is not None and old.newTag == target.tag:
        misread = kustomize.values_misread(text, old.name, source=file, values=values)
        if misread:  # the file says the tag, the chart deploys a number: the same tag, quoted
            decision, reason = (
                "update",
                f"{file} writes the tag {misread[0]} unquoted: Helm reads it as a number and deploys "
                "another tag; writing it quoted",
            )
    changed = False
    if decision == "update" and values is not None:
        edit = kustomize.edit_entry(
            text, old.name, source=file, tag=target.tag, digest=target.digest, values=values
        )
        changed, new = edit.changed, edit.new or new
        for note in edit.notes:
            log.info("%s: %s", file, note)
        if changed:
            log.info(
                "%s: %s set in %s",
                file,
                image_ref(new.newTag, new.digest, name=target.image),
                ", ".join(edit.edited),
            )
        else:
            decision, reason = (
                "current",
                f"{file} already sets {old.name} to {image_ref(new.newTag, new.digest)}",
            )
    elif decision == "update":
        edited = kustomize.set_image(text, old.name, tag=new.newTag, digest=new.digest, source=file)
        changed = edited != text
        if not changed:
            decision, reason = (
                "current",
                f"{file} already sets {old.name} to {image_ref(new.newTag, new.digest)}",
            )
    return Plan(
        changed=changed,
        decision=decision,
        reason=reason,
        file=file,
        image_name=old.name,
        old=old,
        new=new,
        base_commit=base_commit,
        base_branch=base_branch,
        values=values,
    )


def _new_values_entry(target: Target, old: ImagesEntry) -> ImagesEntry:
    """What a values file would say after the edit, before it is made (the edit itself says it exactly)."""
    return ImagesEntry(
        name=old.name, newName=old.newName, newTag=target.tag or old.newTag, digest=target.digest
    )

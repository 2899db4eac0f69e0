"""edit-kustomize's rollback check: a plan that would change its entry, held when a person rolled it back.

Asked only for a plan that changes something (a run where nothing moves reads no history). The
history read itself — bounded, unforgeable, shared with commit-pr's re-check and reconcile — is
:mod:`steps.entry_history`; what counts as a standing rollback is :mod:`steps.domain.intent`'s.
Here: ECR's push times asked only for what the plan's decision lacks, and the verdict on the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from steps.domain.models import ImagesEntry, Plan, Target

if TYPE_CHECKING:
    from steps.domain.never_downgrade import ImageKey
    from steps.entry_history import ReadAhead
    from steps.git import ClonedRepo


def read_ahead(repo: ClonedRepo, rev: str, file: str, depths: dict[str, int]) -> ReadAhead | None:
    """The history's first read (:func:`steps.entry_history.only_imagebump` at ``rev``, the plan's
    base) before the plan is decided, for :func:`unless_rolled_back` to take: the caller runs it
    while ECR answers the push times the decision needs. None when it failed: the history read
    meets that again if the plan needs it (a plan that changes nothing never does)."""
    from steps.domain.errors import ImagebumpError
    from steps.domain.intent import HISTORY_LIMIT
    from steps.entry_history import ReadAhead, only_imagebump
    from steps.runtime.timing import timed

    with timed("history"):
        try:
            return ReadAhead(rev, file, HISTORY_LIMIT, only_imagebump(repo, rev, file, depths=depths))
        except ImagebumpError:
            return None


def unless_rolled_back(
    target: Target,
    plan: Plan,
    repo: ClonedRepo,
    ask: Callable[[list[ImageKey]], dict[ImageKey, datetime | None]],
    known: dict[ImageKey, datetime | None],
    current: tuple[str, ImagesEntry] | None = None,
    depths: dict[str, int] | None = None,
    ahead: ReadAhead | None = None,
) -> Plan:
    """``plan`` (one that changes something), or the same plan ``held`` (``changed: false``) when a
    person's rollback of its entry stands (:func:`steps.entry_history.rollback_verdict`); a plan
    that goes ahead says whether only imagebump touched the file within the bound
    (``history_clean``: its commit may record it).

    ``ask`` is ECR's push-time lookup (``[ImageKey] → {ImageKey: datetime | None}``), called only
    for ``order: push-time`` and only for what ``known`` (the push times already asked) lacks;
    ``depths`` (branch → commits the clone already holds) spares fetching commits it brought;
    ``ahead``, the history's first read made before the plan (:func:`read_ahead`), is not made again.
    """
    from steps.domain.errors import InvalidEventError
    from steps.domain.intent import pinned
    from steps.domain.never_downgrade import image_key
    from steps.entry_history import rollback_verdict
    from steps.runtime.timing import timed

    def pushed_at(entry: ImagesEntry) -> datetime | None:
        if target.settings.order != "push-time" or pinned(entry, target.image):
            return None
        key = image_key(entry.newTag, entry.digest)
        if key not in known:
            try:
                known.update(ask([key]))
            except InvalidEventError:  # not an ECR image: no push times
                known[key] = None
        return known.get(key)

    new_at = target.pushed_at or pushed_at(
        ImagesEntry(name=plan.image_name, newTag=target.tag, digest=target.digest)
    )
    notes: list[str] = []
    with timed("history"):
        verdict = rollback_verdict(
            repo,
            plan.base_commit,
            plan.file,
            plan.image_name,
            order=target.settings.order,
            new=plan.new,
            new_pushed_at=new_at,
            pushed_at=pushed_at,
            current=current,
            depths=depths,
            notes=notes,
            ahead=ahead,
            values=plan.values,
        )
    why = verdict.held
    if why is None:
        if verdict.only_imagebump:
            plan = plan.model_copy(update={"history_clean": True})
        if notes:  # the update goes ahead; its reason says how far the history was read
            reason = "; ".join(
                [plan.reason, f"history read stopped early: {'; '.join(notes)}"]
                if plan.reason
                else [f"history read stopped early: {'; '.join(notes)}"]
            )
            return plan.model_copy(update={"reason": reason})
        return plan
    return plan.model_copy(update={"changed": False, "decision": "held", "reason": why})

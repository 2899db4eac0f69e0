"""Never a downgrade: every decision that keeps an older image from replacing a newer one.

Pure: no ECR, no git, no clock. The steps gather the facts (the overlay's entry, a proposal
branch's entry, ECR push times) and ask here; :func:`steps.domain.version_order.judge_update` compares two images under
the rule's order. Where each guard stands in the pipeline:

- edit-kustomize, against the base (:func:`decide_base`): ``update``, ``current`` or ``stale``;
- edit-kustomize, ``mode: pr``, against the target's proposal branch (:func:`against_branch`):
  a living proposal of the same or a newer image is not replaced;
- commit-pr, against the file on the newest base (:func:`recheck`): landed already, or changed
  since the plan to an image whose order it cannot judge;
- commit-pr, against the proposal branch right before the force-push (:func:`guard_branch`):
  a branch that changed since the plan, or a verdict edit-kustomize reached on it, stands;
- reconcile, against the overlay's entry and, in ``mode: pr``, the target's proposal branch
  (:func:`reconcile_verdict`): ``behind`` only when neither holds the newest allowed image or a newer
  one; a newer one is ``ahead`` and never touched.

ECR facts travel as :data:`PushTimes`: the push time of each image (by :func:`image_key`) the step
looked up; :func:`lookups` says which ones a decision needs, so a step asks ECR before deciding.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal

from steps.domain.errors import InvalidEventError
from steps.domain.models import (
    Decision,
    ImagesEntry,
    Plan,
    Target,
    entry_ref,
    entry_sets,
    image_ref,
    same_entry,
    short_ref,
)
from steps.domain.version_order import judge_update

#: An image as ECR is asked about it: ``(None, digest)`` when the digest is known, else ``(tag, None)``.
ImageKey = tuple[str | None, str | None]
#: ECR push times the step looked up (None: ECR does not have that image).
PushTimes = Mapping[ImageKey, datetime | None]


def image_key(tag: str | None, digest: str | None) -> ImageKey:
    """How an image is looked up in ECR: by digest when there is one, else by tag."""
    return (None, digest) if digest else (tag, None)


def lookups(target: Target, entry: ImagesEntry) -> list[ImageKey]:
    """The ECR push times :func:`push_times` needs to judge ``target`` against ``entry`` (pure).

    Only ``order: push-time`` needs them; never for the same image, for an entry that pins
    nothing, for an entry of another image, or for a new image whose push time the target carries.
    """
    if target.settings.order != "push-time":
        return []
    if entry.newTag == target.tag and (entry.digest == target.digest or not target.digest):
        return []  # the same image reference: nothing to compare
    if not (entry.newTag or entry.digest):
        return []
    from steps.domain.events import parse_repository_uri

    try:
        parse_repository_uri(target.image)
    except InvalidEventError:
        return []  # not an ECR image: no push times to ask for
    keys = []
    if (entry.newName or entry.name) == target.image:
        keys.append(image_key(entry.newTag, entry.digest))
    if target.pushed_at is None and (target.digest or target.tag):
        keys.append(image_key(target.tag, target.digest))
    return keys


def branch_lookups(target: Target, plan: Plan, proposed: ImagesEntry | None) -> list[ImageKey]:
    """The ECR push times :func:`against_branch` needs (none when the branch proposes ``plan.new``)."""
    if not plan.changed or proposed is None or entry_sets(proposed, plan.new):
        return []
    return lookups(target, proposed)


def push_times(
    target: Target, entry: ImagesEntry, known: PushTimes
) -> tuple[datetime | None, datetime | None]:
    """(the entry's, the new image's) push times from what ECR told; None where unknown or not needed."""
    wanted = lookups(target, entry)
    current_at = new_at = None
    if wanted and (entry.newName or entry.name) == target.image:
        current_at = known.get(image_key(entry.newTag, entry.digest))
    if target.pushed_at is not None:
        new_at = target.pushed_at
    elif image_key(target.tag, target.digest) in wanted:
        new_at = known.get(image_key(target.tag, target.digest))
    return current_at, new_at


def _judge(target: Target, entry: ImagesEntry, known: PushTimes) -> tuple[Decision, str]:
    current_at, new_at = push_times(target, entry, known)
    return judge_update(
        current_tag=entry.newTag,
        current_digest=entry.digest,
        current_pushed_at=current_at,
        new_tag=target.tag,
        new_digest=target.digest,
        new_pushed_at=new_at,
        order=target.settings.order,
    )


def decide_base(target: Target, old: ImagesEntry, known: PushTimes) -> tuple[Decision, str]:
    """May the target's image replace ``old``, the overlay's entry on the base? (pure)"""
    return _judge(target, old, known)


def against_branch(
    target: Target, plan: Plan, branch: str, proposed: ImagesEntry | None, known: PushTimes
) -> Plan:
    """Measure a planned update against what the proposal ``branch`` proposes (``mode: pr``; pure).

    ``proposed`` is the branch's entry (None: no branch, or the branch has no such entry — nothing
    to protect). Returns the plan with ``pr_*`` filled in; for ``provider: local`` a
    ``current``/``stale`` verdict is final (``changed: false``). For ``provider: github`` only
    commit-pr can ask whether the branch's pull request is open, so the verdict travels in the plan.
    """
    plan = plan.model_copy(update={"pr_branch": branch, "pr_entry": proposed})
    if not plan.changed or proposed is None:
        return plan
    new_ref = image_ref(plan.new.newTag, plan.new.digest, none="(unset)")
    branch_ref = image_ref(proposed.newTag, proposed.digest, none="(unset)")
    if entry_sets(proposed, plan.new):
        verdict, why = "current", f"the open PR branch {branch} already proposes {plan.image_name} {new_ref}"
    else:
        verdict, why = _judge(target, proposed, known)
        if verdict == "current":
            why = f"the open PR branch {branch} already proposes the same image as {new_ref}: {why}"
        elif verdict == "stale":
            why = (
                f"the open PR branch {branch} proposes {branch_ref}, newer than {new_ref} "
                f"(order: {target.settings.order}); not proposing {new_ref}: {why}"
            )
        else:
            return plan.model_copy(update={"pr_decision": verdict, "pr_reason": f"PR branch {branch}: {why}"})
    plan = plan.model_copy(update={"pr_decision": verdict, "pr_reason": why})
    if target.settings.provider == "local":  # the branch is the proposal: final
        return plan.model_copy(update={"changed": False, "decision": verdict, "reason": why})
    # github: only commit-pr can ask whether the branch's pull request is still open
    return plan.model_copy(
        update={
            "reason": (
                f"{plan.reason}; but {why} — commit-pr skips unless that branch's pull request was closed or merged"
            )
        }
    )


def recheck(target: Target, plan: Plan, current: ImagesEntry | None) -> str | None:
    """May commit-pr set ``plan.new`` over ``current``, the file's entry on the newest base? (pure)

    None: go ahead. Otherwise why not: the entry says ``plan.new`` already (landed, maybe by an
    earlier try), or it changed since the plan — with ``order: semver`` re-decided; with
    ``order: push-time`` refused (commit-pr does not read ECR, so it cannot know which was pushed
    later; the next push re-plans); with ``order: none`` the plan wins.
    """
    if current is not None and entry_sets(current, plan.new):
        return f"{plan.file} already sets {plan.image_name} to {entry_ref(plan.new)}"
    if (
        current is None
        or plan.old is None
        or entry_sets(current, plan.old)
        or target.settings.order == "none"
    ):
        return None
    now, planned, wanted = entry_ref(current), entry_ref(plan.old), entry_ref(plan.new)
    if target.settings.order == "semver":
        decision, why = judge_update(
            current_tag=current.newTag,
            current_digest=current.digest,
            current_pushed_at=None,
            new_tag=plan.new.newTag,
            new_digest=plan.new.digest,
            new_pushed_at=target.pushed_at,
            order=target.settings.order,
        )
        if decision == "update":
            return None
        return f"{plan.file} changed since the plan ({planned} → {now}); not setting {wanted}: {why}"
    return (
        f"{plan.file} changed since the plan: {plan.image_name} is now {now} (planned from {planned}); "
        f"not replacing it with {wanted} without knowing which was pushed later (order: push-time); "
        "the next push re-plans"
    )


def guard_branch(plan: Plan, branch: str, proposed: ImagesEntry | None) -> str | None:
    """May this run replace what the living proposal ``branch`` proposes now? None, or why not (pure).

    ``proposed`` is the branch's entry now (None: no such entry). The same entry as ``plan.new`` is
    no downgrade (the branch is merely rebuilt on the newest base). Otherwise, when edit-kustomize
    looked at this branch (``plan.pr_branch``): a branch that changed since (``plan.pr_entry``) is
    an unknown proposal, never overwritten; a ``current``/``stale`` verdict on it stands. A plan
    that did not look at the branch (older plans, hand-made ones) proceeds as before.
    """
    if proposed is not None and entry_sets(proposed, plan.new):
        return None
    if plan.pr_branch != branch:
        return None
    wanted = entry_ref(plan.new)
    if not same_entry(proposed, plan.pr_entry):
        seen = entry_ref(plan.pr_entry) if plan.pr_entry else "no proposal"
        return (
            f"{branch} changed since the plan: it now proposes {plan.image_name} {entry_ref(proposed)} "
            f"(the plan saw {seen}); not replacing it with {wanted} without knowing which is newer; "
            "a newer event re-plans"
        )
    if plan.pr_decision in ("current", "stale"):
        return plan.pr_reason or f"{branch} already proposes {entry_ref(proposed)}; not proposing {wanted}"
    return None


#: What reconcile may do with a target, as far as never-downgrade is concerned (reconcile adds ``unknown``).
ReconcileState = Literal["behind", "current", "ahead", "proposed"]


def _proposes(entry: ImagesEntry, tag: str | None, digest: str | None) -> bool:
    return entry_sets(entry, ImagesEntry(name=entry.name, newTag=tag, digest=digest))


def reconcile_verdict(
    *,
    newest: Target,
    tag: str | None,
    digest: str | None,
    current: ImagesEntry,
    current_pushed_at: datetime | None = None,
    branch: str = "",
    proposed: ImagesEntry | None = None,
    proposed_pushed_at: datetime | None = None,
) -> tuple[ReconcileState, str]:
    """May the reconcile run hand the newest allowed image to update-target? The state and why (pure).

    ``newest`` is that image (its rule's order and mode), ``tag``/``digest`` what update-target
    would write; ``current`` the overlay's entry on the base. Against the base: the same digest or
    the same image is ``current``; a newer one ``ahead``, never touched. In ``mode: pr``, then
    against what the living proposal ``branch`` proposes (``proposed``; None: nothing): the same
    image is ``proposed``; a newer one ``ahead``, never touched; an older one is replaced
    (``behind``, and the reason says so). Push times: None where unknown or not needed.
    """
    new = image_ref(tag, digest, none="")
    if current.digest and current.digest == newest.digest:
        return "current", f"pins digest {current.digest[:19]}, the newest allowed image"

    def against(entry: ImagesEntry, pushed_at: datetime | None) -> tuple[str, str]:
        """:func:`~steps.domain.version_order.judge_update` of the newest allowed image against what ``entry`` holds."""
        return judge_update(
            current_tag=entry.newTag,
            current_digest=entry.digest,
            current_pushed_at=pushed_at,
            new_tag=tag,
            new_digest=digest,
            new_pushed_at=newest.pushed_at,
            order=newest.settings.order,
        )

    verdict, why = against(current, current_pushed_at)
    if verdict == "current":
        return "current", f"holds the newest allowed image: {why}"
    if verdict == "stale":
        return (
            "ahead",
            f"holds something newer than the newest allowed {short_ref(new)}: {why}; never touched",
        )
    if newest.settings.mode != "pr" or proposed is None:
        return "behind", why
    offered = image_ref(proposed.newTag, proposed.digest, none="") or "(unset)"
    if _proposes(proposed, tag, digest) and (proposed.newName or None) == (current.newName or None):
        return "proposed", f"the PR branch {branch} already proposes {short_ref(new)}"
    again, why2 = against(proposed, proposed_pushed_at)
    if again == "current":
        return "proposed", f"the PR branch {branch} already proposes the same image: {why2}"
    if again == "stale":
        return "ahead", (
            f"the PR branch {branch} proposes {short_ref(offered)}, newer than the newest "
            f"allowed {short_ref(new)}: {why2}; never touched"
        )
    return "behind", f"{why}; the PR branch {branch} proposes the older {short_ref(offered)}"

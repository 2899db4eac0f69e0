"""reconcile's pure core: the newest allowed image of an overlay, and the state of each target.

Reads and writes nothing: every fact (ECR's candidates, the overlay's images entry, the proposal
branch's entry, push times) was gathered before (:mod:`steps.reconcile.ecr_scan`,
:mod:`steps.reconcile.overlay_read`). :func:`pick_newest` chooses by the rule's order; :func:`decide` says
``behind`` / ``current`` / ``ahead`` / ``proposed`` / ``unknown`` / ``held`` / ``pinned`` with a reason
(the Git phase adds ``branch-taken``): ``unknown`` when
a fact is missing, otherwise what the never-downgrade rule says against the overlay and its
proposal branch (:func:`steps.domain.never_downgrade.reconcile_verdict`; that rule lives there only).
Table-tested in ``tests/steps/reconcile/test_reconcile.py`` without ECR or git. Imports only
``steps.domain.models``, ``steps.domain.version_order``, ``steps.domain.intent`` and ``steps.domain.never_downgrade``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cmp_to_key
from typing import Any, Literal, get_args

from steps.domain.intent import marker_hold, pinned
from steps.domain.models import ImagesEntry, Target, image_ref
from steps.domain.never_downgrade import ReconcileState, reconcile_verdict
from steps.domain.version_order import compare_semver, parse_semver

#: A target's state: never-downgrade's verdict (:data:`steps.domain.never_downgrade.ReconcileState`), unknown,
#: or what a person decided (:mod:`steps.domain.intent`): ``held`` (a hold marker, a rollback), ``pinned``,
#: ``branch-taken`` (a person pushed to the proposal branch: :mod:`steps.domain.branch_owner`).
#: ``waiting`` / ``blocked`` / ``promoted``: a gated target's promotion gate (``promoteAfter``, issue 35).
State = (
    ReconcileState | Literal["unknown", "held", "pinned", "branch-taken", "waiting", "blocked", "promoted"]
)
STATES: tuple[str, ...] = (
    *(*get_args(ReconcileState), "unknown", "held", "pinned", "branch-taken"),
    *("waiting", "blocked", "promoted"),
)
#: The gate's states: in the gauge always (zeros reset it), in a summary line only when some target has one.
GATE_STATES: tuple[str, ...] = ("waiting", "blocked", "promoted")


def summary_states(totals: Any) -> list[str]:
    """The states a summary line lists: every state, but the gate's only when counted."""
    return [s for s in STATES if s not in GATE_STATES or totals.get(s)]


def _natural(tag: str) -> tuple:
    """``1.10`` after ``1.9``: digits compare as numbers (a deterministic tie-break)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"([0-9]+)", tag) if p)


def _utc(t: datetime | None) -> datetime:
    if t is None:
        return datetime.min.replace(tzinfo=UTC)
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def pick_newest(candidates: Sequence[Target]) -> tuple[Target | None, str]:
    """The newest of one overlay's candidates by their rule's order, or None and why.

    ``push-time``: the latest ECR push; ties (one image with several tags, or two pushes in the same
    instant) go to the higher version, then the naturally larger tag, so the choice is stable.
    ``semver``: the highest Semantic Versioning precedence among tags that are versions.
    ``none``: never guessed.
    """
    if not candidates:
        return None, "no tag in ECR that the rules allow"
    orders = sorted({c.settings.order for c in candidates})
    rules = sorted({c.rule for c in candidates})
    if len(orders) > 1:
        return None, (
            f"rules {', '.join(map(str, rules))} map images to this overlay with different orders "
            f"({', '.join(orders)}); give them one order"
        )
    order = orders[0]
    if order == "none":
        return None, (
            f"rule {rules[0]} has order: none, so no image is 'the newest': reconcile cannot "
            "reconcile this target (its events still update it); use push-time or semver"
        )
    if order == "semver":
        versions = [(parse_semver(c.tag), c) for c in candidates]
        versions = [(v, c) for v, c in versions if v is not None]
        if not versions:
            return None, "rule orders by semver but no allowed tag in ECR is a semantic version"

        def cmp(a: tuple, b: tuple) -> int:
            c = compare_semver(a[0], b[0])
            if c:
                return c
            ka, kb = (
                (_utc(a[1].pushed_at), _natural(a[1].tag or "")),
                (_utc(b[1].pushed_at), _natural(b[1].tag or "")),
            )
            return (ka > kb) - (ka < kb)

        return max(versions, key=cmp_to_key(cmp))[1], ""

    def key(c: Target) -> tuple:
        v = parse_semver(c.tag)
        return (_utc(c.pushed_at), v is not None, _natural(c.tag or ""), c.digest or "")

    return max(candidates, key=key), ""


def _ref(tag: str | None, digest: str | None) -> str:
    return image_ref(tag, digest, none="")


@dataclass(frozen=True)
class Verdict:
    """What :func:`decide` says about one target."""

    state: State
    reason: str
    current: str = ""
    newest: str = ""
    update: Target | None = None  # behind: the target to hand to update-target


def _written(
    newest: Target, current: ImagesEntry, same_image_tags: Iterable[str]
) -> tuple[str | None, str | None]:
    """(tag, digest) as update-target would write them: the file's own tag if it names the same
    image; the digest only with ``writeDigest`` (or when there is no tag)."""
    tag = newest.tag
    if current.newTag and current.newTag in set(same_image_tags):
        tag = current.newTag  # another allowed tag of the very same image: no tag churn
    digest = newest.digest if (newest.settings.write_digest or not tag) else None
    return tag, digest


def decide(
    *,
    newest: Target | None,
    why_no_newest: str = "",
    same_image_tags: Iterable[str] = (),
    current: ImagesEntry | None,
    current_error: str = "",
    current_pushed_at: datetime | None = None,
    branch: str = "",
    proposed: ImagesEntry | None = None,
    proposed_pushed_at: datetime | None = None,
    image: str = "",
    hold: str | None = None,
    misread: Iterable[str] = (),
    proposed_misread: Iterable[str] = (),
) -> Verdict:
    """The state of one target. Pure: every fact was read before.

    Args:
        newest: the newest allowed image as a Target (:func:`pick_newest`), None if there is none.
        why_no_newest: why there is none (``order: none``, no version tag, ...).
        same_image_tags: every allowed tag of the newest image's digest (the file may use another).
        current: the overlay's images entry; None when unreadable (``current_error`` says why).
        current_pushed_at: ECR push time of what the overlay holds (None: unknown, not needed).
        branch: mode pr: the target's proposal branch ('' when not looked at).
        proposed: the entry that branch proposes (None: no branch, file or entry).
        proposed_pushed_at: ECR push time of the proposed image.
        image: the repository the rule maps here (an entry whose ``newName`` names another is ``pinned``).
        hold: the reason of the entry's ``# imagebump:hold`` marker ("" none given; None: no marker).
        misread: the tags a Helm values file writes unquoted so that Helm reads another value
            (``tag: 1.10`` deploys ``1.1``: :func:`steps.kustomize.values_misread`); the file that
            holds the newest such tag is ``behind`` until it writes it quoted.
        proposed_misread: the same, in the proposal branch's file (a branch that writes the tag
            quoted already proposes the repair: ``proposed``).
    """
    if current is None:
        return Verdict("unknown", current_error or "the overlay's images entry could not be read")
    held = _ref(current.newTag, current.digest)
    pin = pinned(current, image or (newest.image if newest else ""))
    if pin or hold is not None:  # what a person decided stands: never touched
        state: State = "pinned" if pin else "held"
        newest_ref = _ref(newest.tag, newest.digest) if newest else ""
        return Verdict(state, pin or marker_hold(hold) or "", held, newest_ref)
    if newest is None:
        return Verdict("unknown", why_no_newest or "no newest image", current=held)
    tag, digest = _written(newest, current, same_image_tags)
    state, why = reconcile_verdict(
        newest=newest,
        tag=tag,
        digest=digest,
        current=current,
        current_pushed_at=current_pushed_at,
        branch=branch,
        proposed=proposed,
        proposed_pushed_at=proposed_pushed_at,
    )
    if state == "current" and tag and tag == current.newTag and tag in set(misread):
        # The file says the newest tag, but the chart deploys a number (1.10 -> 1.1): the update
        # writes the same tag quoted (edit-kustomize's decide does the same for a push of it).
        state, why = "behind", f"the tag {tag} is written unquoted: Helm reads it as another value"
        if (
            newest.settings.mode == "pr"
            and proposed is not None
            and proposed.newTag == tag
            and tag not in set(proposed_misread)
        ):
            state, why = "proposed", f"the PR branch {branch} already writes the tag {tag} quoted"
    update = newest.model_copy(update={"tag": tag}) if state == "behind" else None
    return Verdict(state, why, held, _ref(tag, digest), update)


def pushed_at(images: Sequence[Any], entry: ImagesEntry | None, image: str) -> datetime | None:
    """ECR push time of what ``entry`` names, from the listing we already have (None: unknown)."""
    if entry is None or (entry.newName or entry.name) != image:
        return None
    for found in images:
        if entry.digest and found.digest == entry.digest:
            return found.pushed_at
    if entry.newTag and not entry.digest:
        for found in images:
            if entry.newTag in found.tags:
                return found.pushed_at
    return None

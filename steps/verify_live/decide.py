"""The pure judgement of push → live: one Argo CD Application's status → its live state.

No I/O: what Git says about a revision comes in as :class:`RevisionFacts` (from
:mod:`steps.verify_live.history`), the Application as the API server's JSON. Argo CD's status
fields read here (argo-cd ``pkg/apis/application/v1alpha1/types.go``): ``status.sync.status`` and
``.revision`` (``.revisions[i]`` for source ``i`` of a multi-source Application),
``status.operationState.phase`` / ``.finishedAt`` / ``.syncResult.revision(s)`` (the last sync
operation), ``status.reconciledAt`` (the last comparison), ``status.conditions[].type``,
``status.health.status`` and ``status.summary.images`` (every image the live resources run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

#: Per-Application states. ``syncing``: not live yet, nothing wrong for sure (verify-live waits).
LIVE, SYNCING, MISMATCH, MANUAL_SYNC, SUPERSEDED, UNKNOWN = (
    "live",
    "syncing",
    "mismatch",
    "manual-sync",
    "superseded",
    "unknown",
)
#: Conditions under which an Application is not live, however it looks otherwise.
ERROR_CONDITIONS = ("ComparisonError", "InvalidSpecError", "SyncError")


@dataclass(frozen=True)
class RevisionFacts:
    """What Git says about a revision Argo CD reports: does it contain the commit verified, and the
    image the overlay sets there (None: cannot tell, e.g. the file is gone)."""

    contains: bool
    image: str | None = None


@dataclass(frozen=True)
class Judgement:
    """One Application's state, why, and what was seen (for messages and outputs)."""

    state: str
    reason: str
    revision: str = ""
    images: list[str] = field(default_factory=list)
    synced_at: datetime | None = None


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp of Argo CD's status (``2026-12-03T10:00:00Z``), or None."""
    if not value or not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def automated(app: dict[str, Any]) -> bool:
    """Does Argo CD sync this Application by itself (``spec.syncPolicy.automated``, not disabled)?"""
    auto = ((app.get("spec") or {}).get("syncPolicy") or {}).get("automated")
    return isinstance(auto, dict) and auto.get("enabled", True) is not False


def synced_revision(app: dict[str, Any], source_index: int | None) -> str:
    """The revision Argo CD compared the live state with, for the source that deploys the overlay."""
    sync = (app.get("status") or {}).get("sync") or {}
    if source_index is None:
        return str(sync.get("revision") or "")
    revisions = sync.get("revisions") or []
    return str(revisions[source_index]) if source_index < len(revisions) else ""


def operation_revision(app: dict[str, Any], source_index: int | None) -> str:
    """The revision the last sync operation applied (``operationState.syncResult``)."""
    result = (((app.get("status") or {}).get("operationState") or {}).get("syncResult")) or {}
    if source_index is None:
        return str(result.get("revision") or "")
    revisions = result.get("revisions") or []
    return str(revisions[source_index]) if source_index < len(revisions) else ""


def image_running(expected: str, images: list[str]) -> bool:
    """Is ``expected`` (``repo:tag`` or ``repo@digest``) among ``images``? An image listed as
    ``repo:tag@digest`` counts for either form: a manifest may carry both."""
    for image in images:
        if image == expected:
            return True
        name_tag, _, digest = image.partition("@")
        if digest:
            name = name_tag.rsplit(":", 1)[0] if ":" in name_tag.rsplit("/", 1)[-1] else name_tag
            if expected in (name_tag, f"{name}@{digest}"):
                return True
    return False


def judge(
    app: dict[str, Any],
    source_index: int | None,
    expected: str,
    facts: Callable[[str], RevisionFacts],
    *,
    wait_for_manual: bool = False,
) -> Judgement:
    """The state of one Application deploying the overlay, for the image ``expected``.

    ``facts(revision)`` says whether ``revision`` contains the commit and what image the overlay
    sets there. ``live`` needs all of: synced at a revision containing the commit, the last sync
    operation ``Succeeded`` (at such a revision), ``reconciledAt`` ≥ ``operationState.finishedAt``
    (health describes the synced state), no error condition, health ``Healthy`` and ``expected``
    among ``status.summary.images``. ``mismatch``: synced there and compared after the sync, not
    ``Progressing``, yet ``expected`` is not running while Git holds it. ``superseded``: the revision
    synced holds another image for the overlay (a newer commit). ``manual-sync``: not live and no
    automated sync (unless ``wait_for_manual``). Anything else is ``syncing``, with the reason.
    """
    status = app.get("status") or {}
    revision = synced_revision(app, source_index)
    images = [str(i) for i in ((status.get("summary") or {}).get("images") or [])]
    operation = status.get("operationState") or {}
    finished = parse_time(operation.get("finishedAt"))
    reconciled = parse_time(status.get("reconciledAt"))
    health = str((status.get("health") or {}).get("status") or "")
    sync_status = str((status.get("sync") or {}).get("status") or "")

    def seen(state: str, reason: str) -> Judgement:
        return Judgement(state, reason, revision, images, finished)

    def not_yet(reason: str) -> Judgement:
        if not automated(app) and not wait_for_manual:
            return seen(MANUAL_SYNC, f"no automated sync: a person syncs it ({reason})")
        return seen(SYNCING, reason)

    if not revision:
        return not_yet("Argo CD has not compared it with Git yet")
    at = facts(revision)
    if not at.contains:
        return not_yet(f"synced at {revision[:12]}, which does not contain the commit yet")
    if at.image is not None and at.image != expected:
        return seen(
            SUPERSEDED, f"Git at {revision[:12]} holds {at.image}: a newer commit replaced {expected}"
        )
    if sync_status != "Synced":
        return not_yet(f"sync status {sync_status or 'unknown'} at {revision[:12]}")
    phase = str(operation.get("phase") or "")
    if phase != "Succeeded":
        return not_yet(f"last sync operation {phase or 'absent'}")
    applied = operation_revision(app, source_index)
    if applied and applied != revision and not facts(applied).contains:
        return not_yet(f"last sync operation applied {applied[:12]}, before the commit")
    if finished is None or reconciled is None or reconciled < finished:
        return seen(SYNCING, "waiting for Argo CD to compare the live state after the sync")
    errors = [
        f"{c.get('type')}: {str(c.get('message') or '')[:200]}"
        for c in status.get("conditions") or []
        if c.get("type") in ERROR_CONDITIONS
    ]
    if errors:
        return seen(SYNCING, "; ".join(errors))
    running = image_running(expected, images)
    if not running and health != "Progressing":
        return seen(
            MISMATCH,
            f"Application {app_name(app)} is synced at revision {revision}, where Git holds {expected}, "
            f"but it runs {', '.join(images) or 'no image'}",
        )
    if health != "Healthy":
        return seen(SYNCING, f"health {health or 'unknown'}")
    if not running:
        return seen(SYNCING, f"{expected} not running yet")
    return seen(LIVE, f"synced at {revision[:12]}, healthy, running {expected}")


def app_name(app: dict[str, Any]) -> str:
    """``namespace/name`` of an Application."""
    meta = app.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def expected_image(name: str, tag: str | None, digest: str | None) -> str:
    """The image kustomize renders for an ``images`` entry: ``name@digest`` when pinned (kustomize
    puts the digest in place of the tag), else ``name:tag``."""
    if digest:
        return f"{name}@{digest}"
    return f"{name}:{tag}" if tag else name

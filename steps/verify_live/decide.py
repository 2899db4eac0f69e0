"""The pure judgement of push → live: one Argo CD Application's status → its live state.

No I/O: what Git says about a revision comes in as :class:`RevisionFacts` (from
:mod:`steps.verify_live.revisions`), the Application as the API server's JSON. Argo CD's status
fields read here (argo-cd ``pkg/apis/application/v1alpha1/types.go``): ``status.sync.status`` and
``.revision`` (``.revisions[i]`` for source ``i`` of a multi-source Application),
``status.operationState.phase`` / ``.finishedAt`` / ``.syncResult.revision(s)`` (the last sync
operation), ``status.reconciledAt`` (the last comparison), ``status.conditions[].type``,
``status.health.status``, ``status.resources[].kind`` (the managed resources) and
``status.summary.images``.

``summary.images`` holds the images of **Pods only**: Argo CD's controller takes a node's images
from the Pod spec (argo-cd ``controller/cache/info.go``, ``populatePodInfo``; no other kind gets
any) and the summary is the union over the resource tree's nodes
(``pkg/apis/application/v1alpha1/types.go``, ``ApplicationTree.GetSummary``). So a Deployment
scaled to zero shows no image, and a CronJob shows the image of its last run's completed Pod
until its next run. Hence ``mismatch`` means only: after the post-sync comparison, a Pod runs
another image of the overlay's repository and none runs the image Git holds, while the
Application keeps Pods running (a Deployment, StatefulSet, DaemonSet, ReplicaSet, Pod or Argo
Rollout among its resources, or resources unknown). When no Pod runs an image of the repository,
or only run-to-completion workloads (CronJob, Job) use it, the state is ``idle``: synced and
healthy at the commit, nothing to compare until a Pod starts.

A status field of the wrong type, or a revision that is not a commit id, gives the state
``unknown`` with a reason naming the field — never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from steps.domain.errors import StatusError

#: Per-Application states. ``syncing``: not live yet, nothing wrong for sure (verify-live waits).
#: ``idle``: synced and healthy at the commit, but no Pod runs an image of the repository now.
LIVE, SYNCING, MISMATCH, MANUAL_SYNC, SUPERSEDED, UNKNOWN, IDLE = (
    "live",
    "syncing",
    "mismatch",
    "manual-sync",
    "superseded",
    "unknown",
    "idle",
)
#: Conditions under which an Application is not live, however it looks otherwise.
ERROR_CONDITIONS = ("ComparisonError", "InvalidSpecError", "SyncError")
#: Kinds whose Pods keep running (a Pod of theirs running another image is a mismatch). Any other
#: workload (CronJob, Job) runs to completion: its Pod seen may be a run from before the sync.
POD_KEEPING_KINDS = frozenset(
    {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Pod", "ReplicationController", "Rollout"}
)
#: A revision Argo CD reports for a Git source: a commit id (SHA-1 or SHA-256). Anything else —
#: a 200 KB string, an option-like text — is never handed to git.
_COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: How much of a text from the status a reason quotes.
_QUOTE = 80


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
    if not value or not isinstance(value, str) or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _quote(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _QUOTE else f"{text[:_QUOTE]}… ({len(text)} chars)"


def _object(value: Any, where: str) -> dict[str, Any]:
    """``value`` when it is an object (absent: empty), else :class:`StatusError` naming ``where``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise StatusError(f"{where} is a {type(value).__name__}, not an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise StatusError(f"{where} is a {type(value).__name__}, not a list")
    return value


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise StatusError(f"{where} is a {type(value).__name__}, not a string")
    return value


def _revision_at(container: dict[str, Any], source_index: int | None, where: str) -> str:
    if source_index is None:
        return _text(container.get("revision"), f"{where}.revision")
    revisions = _list(container.get("revisions"), f"{where}.revisions")
    if source_index >= len(revisions):
        return ""
    return _text(revisions[source_index], f"{where}.revisions[{source_index}]")


def commit_id(revision: str, where: str) -> str:
    """``revision`` when it is a commit id ("" stays ""), else :class:`StatusError` (never to git)."""
    if revision and not _COMMIT_ID.fullmatch(revision):
        raise StatusError(f"{where} {_quote(revision)} is not a commit id")
    return revision


def automated(app: dict[str, Any]) -> bool:
    """Does Argo CD sync this Application by itself (``spec.syncPolicy.automated``, not disabled)?"""
    spec = app.get("spec")
    policy = spec.get("syncPolicy") if isinstance(spec, dict) else None
    auto = policy.get("automated") if isinstance(policy, dict) else None
    return isinstance(auto, dict) and auto.get("enabled", True) is not False


def rolling_synced(app: dict[str, Any]) -> bool:
    """Does an ApplicationSet's RollingSync sync this Application? Its controller turns the
    generated Application's automated sync off (``automated.enabled: false``) and starts each sync
    itself, step by step (argo-cd ``applicationset/progressivesync/progressive_sync.go``:
    ``disableAutomatedSync``, ``syncApplication``, initiated by ``applicationset-controller``). Seen as
    that flag on an Application an ApplicationSet owns (Argo CD 3; 2.x clears ``automated`` instead,
    which reads as a manual sync)."""
    meta = app.get("metadata")
    owners = meta.get("ownerReferences") if isinstance(meta, dict) else None
    owned = isinstance(owners, list) and any(
        isinstance(o, dict) and o.get("kind") == "ApplicationSet" for o in owners
    )
    spec = app.get("spec")
    policy = spec.get("syncPolicy") if isinstance(spec, dict) else None
    auto = policy.get("automated") if isinstance(policy, dict) else None
    return owned and isinstance(auto, dict) and auto.get("enabled") is False


def synced_revision(app: dict[str, Any], source_index: int | None) -> str:
    """The revision Argo CD compared the live state with, for the source that deploys the overlay."""
    status = _object(app.get("status"), "status")
    sync = _object(status.get("sync"), "status.sync")
    return commit_id(_revision_at(sync, source_index, "status.sync"), "status.sync.revision")


def operation_revision(app: dict[str, Any], source_index: int | None) -> str:
    """The revision the last sync operation applied (``operationState.syncResult``)."""
    status = _object(app.get("status"), "status")
    operation = _object(status.get("operationState"), "status.operationState")
    result = _object(operation.get("syncResult"), "status.operationState.syncResult")
    where = "status.operationState.syncResult"
    return commit_id(_revision_at(result, source_index, where), f"{where}.revision")


def repository(image: str) -> str:
    """The repository of an image reference: ``host/team/api`` of ``host/team/api:1.2@sha256:…``."""
    name = image.partition("@")[0]
    last = name.rsplit("/", 1)[-1]
    return name.rsplit(":", 1)[0] if ":" in last else name


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


def others_of_repository(expected: str, images: list[str]) -> list[str]:
    """The images in ``images`` of ``expected``'s repository that are not ``expected``."""
    repo = repository(expected)
    return [i for i in images if repository(i) == repo and not image_running(expected, [i])]


def keeps_pods(status: dict[str, Any]) -> bool:
    """Does the Application manage a workload whose Pods keep running (``status.resources[].kind``)?
    Resources not reported: assume so (a Pod seen then is a running one)."""
    resources = _list(status.get("resources"), "status.resources")
    if not resources:
        return True
    kinds = {str(_object(r, "status.resources[]").get("kind") or "") for r in resources}
    return bool(kinds & POD_KEEPING_KINDS)


def decide(
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
    among ``status.summary.images``. ``mismatch``: all of that but health (not ``Progressing``),
    and instead of ``expected`` a Pod runs another image of its repository while the Application
    keeps Pods running (:func:`keeps_pods`). ``idle``: all of that, ``Healthy``, and no Pod runs an
    image of the repository (or only CronJobs/Jobs run one: a run from before the sync).
    ``superseded``: the revision synced holds another image for the overlay (a newer commit).
    ``manual-sync``: not live and no automated sync (unless ``wait_for_manual``). ``unknown``: a
    status field of the wrong type or a revision that is not a commit id. Anything else is
    ``syncing``, with the reason.
    """
    try:
        return _judge(app, source_index, expected, facts, wait_for_manual)
    except StatusError as exc:
        return Judgement(UNKNOWN, f"Application {app_name(app)}: unreadable status: {exc}")


def _judge(
    app: dict[str, Any],
    source_index: int | None,
    expected: str,
    facts: Callable[[str], RevisionFacts],
    wait_for_manual: bool,
) -> Judgement:
    status = _object(app.get("status"), "status")
    revision = synced_revision(app, source_index)
    summary = _object(status.get("summary"), "status.summary")
    images = [
        _text(i, "status.summary.images[]") for i in _list(summary.get("images"), "status.summary.images")
    ]
    operation = _object(status.get("operationState"), "status.operationState")
    finished = parse_time(operation.get("finishedAt"))
    reconciled = parse_time(status.get("reconciledAt"))
    health = _text(_object(status.get("health"), "status.health").get("status"), "status.health.status")
    sync_status = _text(_object(status.get("sync"), "status.sync").get("status"), "status.sync.status")

    def seen(state: str, reason: str) -> Judgement:
        return Judgement(state, reason, revision, images, finished)

    def not_yet(reason: str) -> Judgement:
        if not automated(app) and not rolling_synced(app) and not wait_for_manual:
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
        return not_yet(f"sync status {_quote(sync_status) or 'unknown'} at {revision[:12]}")
    phase = _text(operation.get("phase"), "status.operationState.phase")
    applied = operation_revision(app, source_index)
    if applied and applied != revision and not facts(applied).contains:
        # Synced at a revision with the commit, and no sync operation since the commit: the commit
        # changed nothing Argo CD renders (a comment, a hold marker, an image no resource uses), so
        # it skipped the sync (controller/appcontroller.go autoSync: "already Synced") and the
        # comparison at that revision is the live state. What runs is judged from it below.
        pass
    elif phase != "Succeeded":
        return not_yet(f"last sync operation {_quote(phase) or 'absent'}")
    elif finished is None or reconciled is None or reconciled < finished:
        return seen(SYNCING, "waiting for Argo CD to compare the live state after the sync")
    errors = []
    for i, c in enumerate(_list(status.get("conditions"), "status.conditions")):
        condition = _object(c, f"status.conditions[{i}]")
        if condition.get("type") in ERROR_CONDITIONS:
            errors.append(f"{condition.get('type')}: {str(condition.get('message') or '')[:200]}")
    if errors:
        return seen(SYNCING, "; ".join(errors))
    running = image_running(expected, images)
    others = [] if running else others_of_repository(expected, images)
    if others and health != "Progressing" and keeps_pods(status):
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        return seen(
            MISMATCH,
            f"Application {app_name(app)} is synced at revision {revision}, where Git holds {expected}, "
            f"but its Pods run {shown}",
        )
    if health != "Healthy":
        return seen(SYNCING, f"health {_quote(health) or 'unknown'}")
    if not running:
        why = (
            f"only a CronJob/Job ran {repository(expected)}, before the sync ({others[0]})"
            if others
            else f"no Pod runs {repository(expected)} now (scaled to zero, or only a CronJob/Job uses it)"
        )
        return seen(IDLE, f"synced at {revision[:12]}, healthy; {why}: {expected} runs when a Pod starts")
    return seen(LIVE, f"synced at {revision[:12]}, healthy, running {expected}")


def app_name(app: dict[str, Any]) -> str:
    """``namespace/name`` of an Application."""
    meta = app.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return f"{_quote(str(meta.get('namespace', '')))}/{_quote(str(meta.get('name', '')))}"


def expected_image(name: str, tag: str | None, digest: str | None) -> str:
    """The image kustomize renders for an ``images`` entry: ``name@digest`` when pinned (kustomize
    puts the digest in place of the tag), else ``name:tag``."""
    if digest:
        return f"{name}@{digest}"
    return f"{name}:{tag}" if tag else name

"""The gate's facts: a timeline of :class:`~steps.gate.decide.Fact` s about one Application of the
environment before, read from what survives any restart (pure: the caller hands over what it read).

From Argo CD's Application (argo-cd ``pkg/apis/application/v1alpha1/types.go``):

- ``status.history[]`` (``RevisionHistory``: ``revision`` or ``revisions[]``, ``deployedAt``,
  ``id``), one entry per successful sync, appended by the application controller
  (``controller/appcontroller.go``, ``persistRevisionHistory``; at most ``revisionHistoryLimit``,
  10 by default): each entry is a fact at ``deployedAt`` whose image is what Git's overlay sets at
  that revision (``image_at``);
- ``status.health`` (``status``, and ``lastTransitionTime`` where Argo CD records it, 2.14 on): the
  health now, since its last transition; before that transition nothing is known of it
  (``Unknown``: the soak's clock does not run), so a ``Degraded`` spell that ended between two
  evaluations restarts the clock at the recovery;
- ``status.sync`` and ``status.summary.images`` (from Pods only), compared with the full image Git
  renders at the newest deployed revision: Pods running another image of the repository, or not
  ``Synced`` there while the Pods do not run exactly that image, is a ``mismatch``; no Pod running
  it is not ``running`` (it did not run live).

From Git: a person's ``# imagebump:hold`` on the environment's entry (``held``: a fact now) or a
rollback (``rolled-back``: the deploy that replaced the image, or now if Argo CD has not synced it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from steps.domain.errors import ImagebumpError
from steps.gate.decide import DEGRADED, HEALTHY, UNKNOWN, Fact

Person = Literal["held", "rolled-back"] | None

_REPOSITORY_OF = Callable[[str], str]


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 time of Argo CD's status, or None."""
    from datetime import UTC

    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _revision(entry: dict[str, Any], source_index: int | None) -> str:
    if source_index is None:
        value = entry.get("revision")
    else:
        revisions = entry.get("revisions")
        value = (
            revisions[source_index] if isinstance(revisions, list) and source_index < len(revisions) else ""
        )
    return value if isinstance(value, str) else ""


def _repository(image: str) -> str:
    name = image.partition("@")[0]
    last = name.rsplit("/", 1)[-1]
    return name.rsplit(":", 1)[0] if ":" in last else name


def _runs(expected: str, images: list[str]) -> bool:
    """Is ``expected`` (``repo:tag`` or ``repo@digest``) among Argo CD's ``summary.images``?"""
    for image in images:
        name_tag, _, digest = image.partition("@")
        name = name_tag.rsplit(":", 1)[0] if ":" in name_tag.rsplit("/", 1)[-1] else name_tag
        if expected in (image, name_tag, f"{name}@{digest}" if digest else None):
            return True
    return False


def _compared_before(
    status: dict[str, Any], deployed_at: datetime, revision: str, source_index: int | None
) -> bool:
    """Is the Application's comparison (``status.sync``, ``summary``, ``health``) older than its newest
    deploy: a sync operation of that revision still running, or ``reconciledAt`` before the deploy's
    ``deployedAt``? A running operation of another revision (a newer commit's sync that fails and
    retries, ``syncPolicy.retry``: argo-cd ``controller/appcontroller.go``
    processRequestedAppOperation keeps the phase ``Running`` between attempts) says nothing of the
    deployed one, whose comparison goes on."""
    operation = _dict(status.get("operationState"))
    if operation.get("phase") in ("Running", "Terminating"):
        running = _revision(_dict(_dict(operation.get("operation")).get("sync")), source_index)
        return not running or running == revision
    reconciled = parse_time(status.get("reconciledAt"))
    return reconciled is not None and reconciled < deployed_at


def application_facts(
    app: dict[str, Any],
    source_index: int | None,
    image_at: Callable[[str], str | None],
    *,
    person: Person = None,
    now: datetime,
    wanted: str | None = None,
    same: Callable[[str], bool] | None = None,
) -> list[Fact]:
    """The timeline of one Application deploying the environment's overlay, oldest first.

    ``image_at(revision)``: the image the overlay sets at ``revision`` (``name@digest`` or
    ``name:tag``, as kustomize renders it and Pods run it; None when Git cannot tell). ``same(ref)``:
    is that the gated image (the same digest, or a tag of it: :func:`steps.gate.read.same_image`);
    default: ``ref == wanted``. A fact's ``digest`` is ``wanted`` for the gated image, the reference
    otherwise. The Pods' images (``summary.images``) are compared with the full reference: Pods that
    run another image of the repository are a ``mismatch``; none that runs the repository (scaled to
    zero, idle, only a sidecar) is not ``running``: it did not run live.
    """

    def token(ref: str | None) -> str | None:
        if ref is not None and wanted is not None and (same(ref) if same is not None else ref == wanted):
            return wanted
        return ref

    status = _dict(app.get("status"))
    history = status.get("history")
    entries = [e for e in history if isinstance(e, dict)] if isinstance(history, list) else []
    deployed: list[tuple[datetime, str | None, str]] = []
    refs: dict[str, str | None] = {}
    ids: dict[datetime, tuple[int, str]] = {}  # deployedAt → status.history[].id, revision
    for entry in entries:
        at = parse_time(entry.get("deployedAt"))
        revision = _revision(entry, source_index)
        if at is None or not revision:
            continue
        try:
            image = image_at(revision)
        except ImagebumpError:
            image = None
        refs[revision] = image
        deployed.append((at, token(image), revision))
        if isinstance(entry.get("id"), int):
            ids[at] = (entry["id"], revision)
    deployed.sort(key=lambda d: d[0])
    sync_now = _dict(status.get("sync"))
    compared = parse_time(status.get("reconciledAt"))
    if not deployed and sync_now.get("status") == "Synced" and compared is not None:
        # ``revisionHistoryLimit: 0`` keeps no history at all: Argo CD's comparison still says what is
        # synced now, from a time it does not keep. A fact from that comparison on (the clock then
        # restarts at every comparison; what evaluations saw, steps.gate.decide.Seen, reaches back).
        revision = _revision(sync_now, source_index)
        if revision:
            try:
                image = image_at(revision)
            except ImagebumpError:
                image = None
            refs[revision] = image
            deployed.append((min(compared, now), token(image), revision))
    facts = [Fact(at, image) for at, image, _ in deployed]
    if deployed:
        last_at, last_image, last_revision = deployed[-1]
        health = _dict(status.get("health"))
        state = health.get("status") if isinstance(health.get("status"), str) else UNKNOWN
        changed = parse_time(health.get("lastTransitionTime"))
        sync = _dict(status.get("sync"))
        stale = _compared_before(status, last_at, last_revision, source_index)
        if stale or sync.get("status") == "Unknown":
            # Not yet compared since the newest deploy (Argo CD writes status.history before the sync
            # operation ends and compares again only after it: controller/sync.go SyncAppState,
            # persistRevisionHistory; appcontroller.go processRequestedAppOperation), or it cannot
            # compare (a spec or project error sets sync and health Unknown): no verdict from it.
            state, changed, sync = UNKNOWN, None, {}
        synced = not (
            _revision(sync, source_index) == last_revision and sync.get("status") not in (None, "Synced")
        )
        images = [i for i in _dict(status.get("summary")).get("images") or [] if isinstance(i, str)]
        if stale:
            images = []  # the Pods' images of before the deploy say nothing of it yet
        last_ref = refs.get(last_revision)
        running = True
        if last_ref is not None and not stale and not _runs(last_ref, images):
            others = [i for i in images if _repository(i) == _repository(last_ref)]
            if not others:  # no Pod runs the repository (scaled to zero, idle): not proof it ran live
                running = False
            elif state != "Progressing":  # Pods run another image than Git holds: mismatch
                synced = False
        elif last_ref is not None and not stale and not synced:
            # OutOfSync at the deployed revision while every Pod of the repository runs exactly what
            # Git holds: drift elsewhere (replicas an HPA sets, a label edited by hand), not the
            # wrong-manifest failure; blocking for good on it would block on what is not a failure
            others = [
                i for i in images if _repository(i) == _repository(last_ref) and not _runs(last_ref, [i])
            ]
            synced = not others
        if changed is None:
            # Argo CD before 2.14 records no lastTransitionTime: the health now is all there is. It is
            # the newest deploy's; the older deploys count as Healthy (a Degraded spell between two
            # evaluations is not seen: docs/promotion.md says so).
            facts[-1] = Fact(last_at, last_image, health=state, synced=synced)
            if state != HEALTHY:
                # ... and nothing says since when it is not Healthy: as far back as this image ran
                # (a Degraded now is never taken for one that began after the soak)
                first = len(facts) - 1
                while first > 0 and facts[first - 1].digest == last_image:
                    first -= 1
                facts[first:] = [replace(f, health=state) for f in facts[first:]]
        else:
            facts = _since_transition(deployed, state, min(changed, now), synced)
            facts[-1] = replace(facts[-1], health_since=min(changed, now))
        deploys = {at: image for at, image, _ in deployed}
        facts = [
            replace(f, entry=ids[f.at][0], revision=ids[f.at][1])
            if f.at in ids and deploys.get(f.at) == f.digest
            else f
            for f in facts
        ]
        if not running:
            # what the Pods run is known only now, not since when: nothing of this image's run counts
            first = len(facts) - 1
            while first > 0 and facts[first - 1].digest == facts[-1].digest:
                first -= 1
            facts[first:] = [replace(f, running=False) for f in facts[first:]]
        if wanted is not None and _argocd_rollback(deployed, wanted):
            facts = _rolled_back(facts, last_at, wanted)
    if person == "held":
        current = facts[-1] if facts else None
        facts.append(Fact(now, current.digest if current else None, held=True))
    elif person == "rolled-back":
        facts = _rolled_back(facts, now, wanted)
    return facts


def _since_transition(
    deployed: list[tuple[datetime, str | None, str]], state: str, changed: datetime, synced: bool
) -> list[Fact]:
    """The deploys as facts when Argo CD says since when its health is ``state`` (``changed``).

    Argo CD moves ``status.health.lastTransitionTime`` only when the status changes (argo-cd
    ``controller/health.go``, ``setApplicationHealth``: "if the status didn't change, don't update
    the timestamp"). The field came with argo-cd PR #18660 ("Timestamp for Health Status") in v2.14,
    set there only while the controller persists resource health; PR #22666 sets it always from 3.0
    (``AppHealthStatus.LastTransitionTime`` in ``pkg/apis/application/v1alpha1/types.go``). So the
    health is ``state`` from ``changed`` until now, through every deploy since, and nothing is known
    of it before: a deploy before ``changed``
    is ``Unknown`` (the clock does not run on it), and at ``changed`` the image then deployed turns
    ``state``. The soak's clock therefore starts at max(the deploy, ``changed``): a ``Degraded`` that
    recovered between two evaluations restarts it at the recovery, never promotes early."""
    facts: list[Fact] = []
    last = len(deployed) - 1
    for i, (at, image, _) in enumerate(deployed):
        if i and deployed[i - 1][0] < changed < at:  # the transition came while the previous ran
            facts.append(Fact(changed, deployed[i - 1][1], health=state))
        known = at >= changed
        facts.append(
            Fact(at, image, health=state if known else UNKNOWN, synced=synced if i == last else True)
        )
    if deployed[last][0] < changed:
        facts.append(Fact(changed, deployed[last][1], health=state, synced=synced))
    return facts


def _argocd_rollback(deployed: list[tuple[datetime, str | None, str]], wanted: str) -> bool:
    """Is the newest deploy a person's return to an older revision after the gated image ran
    (``argocd app rollback``, or a sync to an older revision)? argo-cd
    ``server/application/application.go`` Rollback syncs the history entry's revision, and
    ``controller/state.go`` persistRevisionHistory appends a new entry with that old revision."""
    revisions = [revision for _, _, revision in deployed]
    last = len(deployed) - 1
    if last < 1 or deployed[last][1] == wanted:
        return False
    for i in range(last):
        if revisions[i] == revisions[last] and any(d[1] == wanted for d in deployed[i + 1 : last]):
            return True
    return False


def _rolled_back(facts: list[Fact], now: datetime, wanted: str | None) -> list[Fact]:
    """Mark the deploy that replaced the gated image as a person's rollback (or add one now, when
    Argo CD has not deployed the rollback yet)."""
    if len(facts) >= 2 and facts[-1].digest != wanted and facts[-2].digest == wanted:
        last = facts[-1]
        return [*facts[:-1], Fact(last.at, last.digest, last.health, last.synced, rolled_back=True)]
    last = facts[-1] if facts else None
    return [*facts, Fact(now, last.digest if last else None, rolled_back=True)]


__all__ = ["DEGRADED", "HEALTHY", "Person", "application_facts", "parse_time"]

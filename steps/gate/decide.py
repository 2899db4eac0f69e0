"""The gate's pure core: ``waiting``, ``blocked`` or ``promoted`` for one image of a gated target.

The input is a timeline of :class:`Fact` s about the environment before (``promoteAfter.env``),
oldest first; each fact holds until the next one. A fact is read from what survives any restart:
the digest Argo CD reports live and its sync state (``status.sync``, ``status.history[].revision``
and ``deployedAt``), its health (``status.health.status``, and ``lastTransitionTime`` where Argo CD
records it), and from Git whether a person held or rolled back the environment.

The promises (tested as properties in tests/steps/gate/):

- an image is never ``promoted`` before the environment before ran it, with the same digest,
  synced and continuously ``Healthy``, for the whole soak;
- once blocked, never promoted (a ``mismatch``, ``Degraded``, rollback, hold or newer image
  during the soak blocks this image for good; a newer image starts its own clock);
- a person's hold or rollback is a decision: it blocks, it is never waited out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

GateState = Literal["waiting", "blocked", "promoted"]
#: Why an image is blocked.
BlockReason = Literal["mismatch", "degraded", "rolled-back", "held", "superseded"]
GATE_STATES: tuple[GateState, ...] = ("waiting", "blocked", "promoted")
HEALTHY, DEGRADED, SUSPENDED = "Healthy", "Degraded", "Suspended"
#: Why an image waits: not live there yet; live but no Pod runs it (scaled to zero, idle); Argo CD
#: says ``Suspended`` (paused by a person or a controller); live but not Healthy (``Progressing``,
#: ``Missing``, ``Unknown``); Healthy and its soak's clock running; deployed through Argo CD's source
#: hydrator (``spec.sourceHydrator``), whose hydrated commits the gate cannot map back to the overlay.
WaitReason = Literal["not-live", "idle", "suspended", "unhealthy", "soaking", "hydrated"]
#: Argo CD's health when it cannot tell; also a deploy's health before ``lastTransitionTime`` (not seen)
UNKNOWN = "Unknown"


@dataclass(frozen=True)
class Fact:
    """What held in the environment before from ``at`` until the next fact."""

    at: datetime
    digest: str | None  # the digest Argo CD reports live (None: nothing live / unknown)
    health: str = HEALTHY  # Argo CD's health status: Healthy, Progressing, Degraded, Missing, ...
    synced: bool = True  # status.sync.status == Synced at the revision that carries the digest
    held: bool = False  # a person's hold on the environment (Git)
    rolled_back: bool = False  # a person's rollback of the environment (Git, or Argo CD's rollback)
    running: bool = True  # a Pod runs the image (Argo CD's summary.images); False: none runs it
    #: since when Argo CD says the health is what it is now (``lastTransitionTime``; None: not said)
    health_since: datetime | None = None
    entry: int | None = None  # the ``status.history[].id`` of the deploy this fact is (None: not one)
    revision: str | None = None  # that deploy's revision


#: Blocks that Argo CD forgets (a Degraded that recovered, a mismatch that was repaired, a newer image
#: rolled back): an earlier evaluation's record (:class:`Seen`) keeps them. A person's hold or
#: rollback is not among them: Git keeps it, and it lasts until a person lifts it.
STICKY: tuple[BlockReason, ...] = ("mismatch", "degraded", "superseded")


@dataclass(frozen=True)
class Seen:
    """What earlier evaluations saw of one image in one Application of the environment before: the
    record that makes a block stick and a soak's clock honest where Argo CD forgets
    (:mod:`steps.gate.memory` keeps it across restarts). Argo CD keeps no health history (a
    ``Degraded`` an evaluation saw is gone once it recovers; without ``lastTransitionTime`` even its
    time is gone) and trims ``status.history`` (``revisionHistoryLimit``; every sync, a re-sync of
    the same revision too, appends an entry)."""

    blocked: BlockReason | None = None  # a block an evaluation decided: for good, for this image
    blocked_at: datetime | None = None
    #: the first evaluation of an unbroken run of evaluations that saw it live, synced, Healthy and
    #: running: a lower bound of its soak's start when Argo CD's history no longer shows the deploy
    live_from: datetime | None = None
    #: the last evaluation that saw it deployed but not live and Healthy (Progressing, not running,
    #: Unknown, ...): the soak's clock starts after it, whatever Argo CD remembers
    unwell_at: datetime | None = None
    #: the newest ``status.history[].id`` the last evaluation that saw it live saw: a later history
    #: whose oldest entry is newer than the next id lost a deploy nobody saw (trimmed)
    live_entry: int | None = None
    live_revision: str | None = None  # the revision of that newest entry


def _good(fact: Fact, digest: str) -> bool:
    return (
        fact.digest == digest
        and fact.health == HEALTHY
        and fact.synced
        and fact.running
        and not (fact.held or fact.rolled_back)
    )


@dataclass(frozen=True)
class GateDecision:
    """The gate's answer for one image of one gated target."""

    state: GateState
    image: str
    env: str
    time_left: timedelta | None = None  # waiting only: how much of the soak remains
    reason: BlockReason | None = None  # blocked only
    wait: WaitReason | None = None  # waiting only: why
    live_since: datetime | None = None  # when the soak's clock started (the env went live)
    note: str = ""  # for people: why it waits (nothing deploys the env yet, ...), what blocked it
    #: when it came to hold (blocked: the fact that blocked it; promoted: the soak's end), per the
    #: facts' own times (Argo CD's, Git's): what counts a decision once (steps.gate.apply.outcomes)
    decided_at: datetime | None = None
    #: already reported (a ``gate: check`` commit status says it since an earlier evaluation): the
    #: metrics do not count it again
    settled: bool = False

    @property
    def seconds_left(self) -> int | None:
        """``time_left`` in whole seconds, rounded up (None unless waiting)."""
        if self.time_left is None:
            return None
        return max(0, -int(-self.time_left.total_seconds() // 1))


def decide(
    image: str,
    digest: str,
    env: str,
    soak: timedelta,
    facts: Sequence[Fact],
    now: datetime,
    seen: Seen | None = None,
) -> GateDecision:
    """Decide the gate for ``image`` (``digest``) waiting on ``env`` at ``now`` from ``facts``.

    The clock starts at the first fact where ``env`` runs ``digest``, synced and Healthy; a fact
    that is not Healthy yet not Degraded (``Progressing``, ``Missing``) restarts it at the next
    Healthy fact, and so does a fact where no Pod runs it. A person's hold or rollback among the
    facts blocks, whatever its time. Facts after ``now`` are ignored.

    ``seen``: what earlier evaluations saw (:class:`Seen`): a block they decided stands; the clock
    starts after the last evaluation that saw it unwell, and reaches back to the first of an unbroken
    run of evaluations that saw it live when every fact since then agrees (a trimmed history)."""
    timeline = sorted((f for f in facts if f.at <= now), key=lambda f: f.at)
    person = next((f for f in reversed(timeline) if f.held or f.rolled_back), None)
    if person is not None:
        # A person's hold or rollback is read as it holds now (Git now, Argo CD's newest deploy): it
        # blocks whatever its time, before the image arrived or after the soak passed.
        return GateDecision(
            "blocked",
            image,
            env,
            reason="held" if person.held else "rolled-back",
            decided_at=person.at,
        )
    if seen is not None and seen.blocked is not None:
        return GateDecision(
            "blocked", image, env, reason=seen.blocked, decided_at=seen.blocked_at, settled=True
        )
    since: datetime | None = None
    last: Fact | None = None
    for fact in timeline:
        if since is not None and fact.at - since >= soak:
            break  # the soak passed before this fact: what came after is not about the gate
        if fact.digest != digest:
            if last is not None:
                return GateDecision(
                    "blocked",
                    image,
                    env,
                    reason="superseded" if fact.digest else "mismatch",
                    live_since=since,
                    decided_at=fact.at,
                )
            continue
        last = fact
        if not fact.synced:
            return GateDecision(
                "blocked", image, env, reason="mismatch", live_since=since, decided_at=fact.at
            )
        if fact.health == DEGRADED:
            return GateDecision(
                "blocked", image, env, reason="degraded", live_since=since, decided_at=fact.at
            )
        if fact.health != HEALTHY or not fact.running:
            since = None
        elif since is None:
            since = fact.at
    since = _with_evaluations(since, timeline, digest, seen)
    if since is None:
        if last is not None and last.running and last.health == HEALTHY:
            return GateDecision("waiting", image, env, time_left=soak, wait="unhealthy")
        wait: WaitReason = (
            "not-live"
            if last is None
            else "idle"
            if not last.running
            else "suspended"
            if last.health == SUSPENDED
            else "unhealthy"
        )
        return GateDecision("waiting", image, env, time_left=soak, wait=wait)
    left = soak - (now - since)
    if left <= timedelta(0):
        return GateDecision("promoted", image, env, live_since=since, decided_at=since + soak)
    return GateDecision("waiting", image, env, time_left=left, live_since=since, wait="soaking")


def _with_evaluations(
    since: datetime | None, timeline: Sequence[Fact], digest: str, seen: Seen | None
) -> datetime | None:
    """The soak's start from Argo CD's facts (``since``), corrected by what evaluations saw."""
    if seen is None:
        return since
    if seen.unwell_at is not None and since is not None and since <= seen.unwell_at:
        # an evaluation saw it unwell after Argo CD's start (a spell Argo CD no longer shows)
        since = seen.live_from if seen.live_from is not None and seen.live_from > seen.unwell_at else None
    if since is not None and seen.live_from is not None and seen.live_from < since and timeline:
        now_fact = timeline[-1]
        if (seen.unwell_at is None or seen.unwell_at < seen.live_from) and (
            now_fact.health_since is None or now_fact.health_since <= seen.live_from
        ):
            between = [f for f in timeline if seen.live_from <= f.at <= since]
            known = [f for f in timeline if f.at <= seen.live_from]
            entries = [f.entry for f in timeline if f.entry is not None]
            # no deploy nobody saw: the history reaches back to the entry after the one seen live,
            # or every entry it keeps re-synced that same revision (self-heal re-syncs, trimmed)
            unbroken = (
                not entries
                or (seen.live_entry is not None and min(entries) <= seen.live_entry + 1)
                or (
                    seen.live_revision is not None
                    and all(f.revision == seen.live_revision for f in timeline if f.entry is not None)
                )
            )
            if (
                unbroken
                and all(_good(f, digest) for f in between)
                and (not known or _good(known[-1], digest))
            ):
                # every evaluation since saw it live, Argo CD's health has not changed since, and
                # every deploy since is of it (a re-sync, a history trimmed): the clock reaches back
                since = seen.live_from
    return since


def observe(
    decision: GateDecision, digest: str, facts: Sequence[Fact], now: datetime, seen: Seen | None
) -> Seen:
    """What this evaluation adds to ``seen`` (pure): a block of :data:`STICKY` kind, and whether the
    image, once there, was live and Healthy now (the fact holding at ``now``)."""
    seen = seen or Seen()
    if seen.blocked is not None:
        return seen
    if decision.state == "blocked" and decision.reason in STICKY:
        return replace(seen, blocked=decision.reason, blocked_at=decision.decided_at or now)
    current = max((f for f in facts if f.at <= now), key=lambda f: f.at, default=None)
    if current is None:
        return seen
    if current.digest != digest:  # another image now, after this one was seen there: not live
        if seen.live_from is None and seen.unwell_at is None:
            return seen
        return replace(seen, live_from=None, live_entry=None, live_revision=None, unwell_at=now)
    if _good(current, digest):
        newest = max((f for f in facts if f.entry is not None), key=lambda f: f.entry or 0, default=None)
        return replace(
            seen,
            # the soak's start this evaluation decided (Argo CD's, or reaching back through an
            # unbroken run of evaluations): a run a trimmed history may have broken starts again
            live_from=min(decision.live_since or now, now),
            live_entry=newest.entry if newest else None,
            live_revision=newest.revision if newest else None,
        )
    return replace(seen, live_from=None, live_entry=None, live_revision=None, unwell_at=now)

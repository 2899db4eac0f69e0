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
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

GateState = Literal["waiting", "blocked", "promoted"]
#: Why an image is blocked.
BlockReason = Literal["mismatch", "degraded", "rolled-back", "held", "superseded"]
GATE_STATES: tuple[GateState, ...] = ("waiting", "blocked", "promoted")
HEALTHY, DEGRADED, SUSPENDED = "Healthy", "Degraded", "Suspended"
#: Why an image waits: not live there yet; live but no Pod runs it (scaled to zero, idle); Argo CD
#: says ``Suspended`` (paused by a person or a controller); live but not Healthy (``Progressing``,
#: ``Missing``, ``Unknown``); Healthy and its soak's clock running.
WaitReason = Literal["not-live", "idle", "suspended", "unhealthy", "soaking"]
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
    image: str, digest: str, env: str, soak: timedelta, facts: Sequence[Fact], now: datetime
) -> GateDecision:
    """Decide the gate for ``image`` (``digest``) waiting on ``env`` at ``now`` from ``facts``.

    The clock starts at the first fact where ``env`` runs ``digest``, synced and Healthy; a fact
    that is not Healthy yet not Degraded (``Progressing``, ``Missing``) restarts it at the next
    Healthy fact, and so does a fact where no Pod runs it. A person's hold or rollback among the
    facts blocks, whatever its time. Facts after ``now`` are ignored."""
    seen = sorted((f for f in facts if f.at <= now), key=lambda f: f.at)
    person = next((f for f in reversed(seen) if f.held or f.rolled_back), None)
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
    since: datetime | None = None
    last: Fact | None = None
    for fact in seen:
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
    if since is None:
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

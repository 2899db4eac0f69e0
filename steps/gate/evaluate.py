"""One gated target's decision over every Application of every target of the environment before.

:func:`combine` is pure: each Application's :func:`~steps.gate.decide.decide` over its own timeline
(:mod:`steps.gate.facts`), then one answer — ``blocked`` if any is blocked (a newer image starts its
own clock: it is another gate), ``promoted`` only when every Application of every target of the
environment is promoted, else ``waiting`` for the longest time left. Nothing deploys the
environment: ``waiting`` (with a note), never ``promoted``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from steps.gate.decide import GateDecision, Seen, decide, observe
from steps.gate.facts import Person, application_facts


@dataclass(frozen=True)
class EnvTarget:
    """One target of the environment before, as read: the Applications deploying it (``(name,
    source index, Application)``), the image Git sets at a revision, and a person's hold or rollback."""

    name: str
    apps: Sequence[tuple[str, int | None, dict[str, Any]]] = field(default_factory=tuple)
    image_at: Callable[[str], str | None] = lambda _revision: None
    person: Person = None
    #: is a rendered reference the gated image (:func:`steps.gate.read.same_image`); None: equal to it
    same: Callable[[str], bool] | None = None


def combine(
    image: str,
    expected: str,
    env: str,
    soak: timedelta,
    targets: Sequence[EnvTarget],
    now: datetime,
    memory: dict[str, Seen] | None = None,
) -> GateDecision:
    """The gate for ``image`` (rendered as ``expected``: ``name@digest`` or ``name:tag``, as the
    environment's overlay renders it) waiting on ``env``'s ``targets``, at ``now``.

    ``memory``: what earlier evaluations saw of this image, per Application (:class:`Seen`); read,
    and updated in place with what this evaluation saw (the caller stores it)."""
    decisions: list[tuple[str, GateDecision]] = []
    for target in targets:
        for app_name, index, app in target.apps:
            where = f"{target.name} ({app_name})"
            facts = application_facts(
                app,
                index,
                target.image_at,
                person=target.person,
                now=now,
                wanted=expected,
                same=target.same,
            )
            seen = memory.get(where) if memory is not None else None
            decision = decide(image, expected, env, soak, facts, now, seen)
            if memory is not None:
                memory[where] = observe(decision, expected, facts, now, seen)
            decisions.append((where, decision))
    if not decisions:
        where = ", ".join(t.name for t in targets) or f"no target of {env} for this image"
        return GateDecision(
            "waiting", image, env, time_left=soak, note=f"no Argo CD Application deploys {where} yet"
        )
    blocked = [(w, d) for w, d in decisions if d.state == "blocked"]
    if blocked:
        where, first = blocked[0]
        return replace(first, note=f"{env} {where}: {first.reason}")
    waiting = [(w, d) for w, d in decisions if d.state == "waiting"]
    if waiting:
        where, longest = max(waiting, key=lambda p: p[1].time_left or timedelta(0))
        note = {
            "idle": f"{env} {where} deploys it, but no Pod runs it (scaled to zero or idle)",
            "suspended": f"{env} {where} deploys it, but Argo CD says Suspended",
            "unhealthy": f"{env} {where} deploys it, not Healthy yet",
        }.get(longest.wait or "", f"{env} {where} is not live with it yet")
        if longest.live_since is not None:
            note = f"{env} {where} live and Healthy since {longest.live_since.isoformat()}"
        return replace(longest, note=note)
    since = max(d.live_since for _, d in decisions if d.live_since is not None)
    at = max((d.decided_at for _, d in decisions if d.decided_at is not None), default=None)
    return GateDecision(
        "promoted", image, env, live_since=since, note=f"{env} ran it for the soak", decided_at=at
    )

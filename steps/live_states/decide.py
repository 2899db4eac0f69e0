"""live-states' pure core: a current target's Applications, each judged by verify-live → the target's live state.

:func:`decide` reads nothing: :mod:`steps.live_states.step` gathers (the Applications, each
repository's clone) and has each Application judged (:func:`steps.verify_live.decide.decide`); here
those judgements become the target's one state (``live``, ``idle``, ``syncing``, ``mismatch``,
``no-application``, ``unknown``) with its reason, the rows and counts the step outputs, bounded.
"""

# No `from __future__ import annotations`: the step's output models are read by Hera's runner.
from collections import Counter
from typing import TYPE_CHECKING

from msgspec import field

from steps.domain.contract import Contract
from steps.verify_live.decide import Judgement, repository
from steps.verify_live.step import AppLive

if TYPE_CHECKING:
    from steps.verify_live.argocd import Deployment

LIVE_STATES = ("live", "idle", "syncing", "mismatch", "no-application", "unknown")
#: Bounds of the outputs (as verify-live's): images per Application, characters per reason.
MAX_APPLICATIONS = 50
MAX_IMAGES = 20
MAX_REASON = 1000


class LiveState(Contract, kw_only=True):
    repo_url: str
    path: str
    env: str = ""
    state: str
    reason: str = ""
    applications: list[AppLive] = field(default_factory=list)


class LiveCount(Contract, kw_only=True):
    state: str
    env: str
    count: int


class LiveStatesOutput(Contract, kw_only=True):
    states: list[LiveState] = field(default_factory=list)
    counts: list[LiveCount] = field(default_factory=list)
    mismatches: int = 0


def count_live(states: list[LiveState]) -> list[LiveCount]:
    """Targets per (state, env), every state for every env seen (zeros too: gauges reset)."""
    seen = Counter((s.state, s.env or "none") for s in states)
    envs = sorted({env for _, env in seen})
    return [LiveCount(state=st, env=e, count=seen.get((st, e), 0)) for e in envs for st in LIVE_STATES]


def decide(judged: list[tuple[str, Judgement]]) -> tuple[str, str]:
    """A target's state from its Applications' judgements: mismatch > unknown > syncing > live >
    idle (``idle`` only when no Application runs the image: every one is idle)."""
    if not judged:
        return "no-application", "no Argo CD Application deploys this overlay"
    for state in ("mismatch", "unknown", "syncing"):
        hits = [f"{name}: {j.reason}" for name, j in judged if _sweep_state(j.state) == state]
        if hits:
            return state, "; ".join(hits)
    states = {_sweep_state(j.state) for _, j in judged}
    return ("live" if "live" in states else "idle"), "; ".join(f"{name}: {j.reason}" for name, j in judged)


def _sweep_state(state: str) -> str:
    # manual-sync and superseded are waits, seen from a reconcile run: a person syncs, a newer change lands
    return state if state in ("live", "mismatch", "idle", "unknown") else "syncing"


def clip(text: str, limit: int = MAX_REASON) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out."""
    return text if len(text) <= limit else f"{text[: limit - 40]}… ({len(text) - limit + 40} more chars)"


def app_row(deployment: "Deployment", judgement: Judgement, image_repository: str) -> AppLive:
    """An Application's row of a target's live state (bounded: :data:`MAX_IMAGES`, :data:`MAX_REASON`)."""
    images = sorted(judgement.images, key=lambda i: repository(i) != image_repository)
    shown = images[:MAX_IMAGES] + (
        [f"… {len(images) - MAX_IMAGES} more images"] if len(images) > MAX_IMAGES else []
    )
    return AppLive(
        namespace=deployment.namespace,
        name=deployment.name,
        state=_sweep_state(judgement.state),
        reason=clip(judgement.reason),
        revision=judgement.revision[:64],
        images=[clip(i, 300) for i in shown],
    )

"""live-states: the sweep's view of push → live — for every current target, the live state of the
Argo CD Applications deploying its overlay, whoever changed it (a merged pull request, a person).

Reads only: the Applications (:mod:`steps.verify_live.argocd`, no refresh: a sweep must not make
Argo CD work) and the base branch's history (:mod:`steps.verify_live.history`). Per target:
``live`` (every Application synced at a revision holding the overlay's newest change, healthy,
running what Git holds), ``syncing`` (not yet, with the reason: not synced, no automated sync,
progressing, an error condition), ``mismatch`` (synced and compared, yet running another image),
``no-application`` (nothing deploys it) or ``unknown`` (it could not be read, with the reason).
Outputs ``states`` (a row per target) and ``counts`` (targets per state and env: the gauge
``imagebump_live_targets``). Safe to run twice.
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.

import logging
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from steps.domain.errors import ImagebumpError
from steps.domain.models import Target
from steps.runtime.harness import step_entry
from steps.verify_live import decide
from steps.verify_live.step import AppLive

log = logging.getLogger(__name__)

LIVE_STATES = ("live", "syncing", "mismatch", "no-application", "unknown")


class LiveState(BaseModel):
    repo_url: str
    path: str
    env: str = ""
    state: str
    reason: str = ""
    applications: list[AppLive] = Field(default_factory=list)


class LiveCount(BaseModel):
    state: str
    env: str
    count: int


class LiveStatesOutput(BaseModel):
    states: list[LiveState] = Field(default_factory=list)
    counts: list[LiveCount] = Field(default_factory=list)
    mismatches: int = 0


def count_live(states: list[LiveState]) -> list[LiveCount]:
    """Targets per (state, env), every state for every env seen (zeros too: gauges reset)."""
    seen = Counter((s.state, s.env or "none") for s in states)
    envs = sorted({env for _, env in seen})
    return [LiveCount(state=st, env=e, count=seen.get((st, e), 0)) for e in envs for st in LIVE_STATES]


def target_state(judged: list[tuple[str, decide.Judgement]]) -> tuple[str, str]:
    """A target's state from its Applications' judgements: mismatch > syncing > live."""
    if not judged:
        return "no-application", "no Argo CD Application deploys this overlay"
    for state in ("mismatch", "syncing"):
        hits = [f"{name}: {j.reason}" for name, j in judged if _sweep_state(j.state) == state]
        if hits:
            return state, "; ".join(hits)
    return "live", "; ".join(f"{name}: {j.reason}" for name, j in judged)


def _sweep_state(state: str) -> str:
    # manual-sync and superseded are waits, seen from a sweep: a person syncs, a newer change lands
    return state if state in ("live", "mismatch") else "syncing"


def live_state(target: Target, api: Any, namespace: str, workdir: Path) -> LiveState:
    """One current target's live state (``unknown`` with the reason when it cannot be read)."""
    from steps import git
    from steps.kustomize import KUSTOMIZATION_FILES
    from steps.verify_live import argocd
    from steps.verify_live.history import History

    row = LiveState(repo_url=target.repo_url, path=target.path, env=target.env, state="unknown")
    try:
        auth = git.GitAuth.from_env(write=False)
        default_branch = git.default_branch(target.repo_url, auth)
        branch = target.base_branch or default_branch
        if target.helmfile is not None:  # issue 34: the release's values file is known only after an update
            row.reason = "the live state of a helmfile release is read by verify-live after each update"
            return row
        found = argocd.find(
            api,
            namespace,
            target.repo_url,
            target.path,
            branch,
            branch == default_branch,
            file=target.values_file,
        )
        if not found:
            row.state, row.reason = target_state([])
            return row
        files = [f"{target.path}/{name}".lstrip("/") for name in KUSTOMIZATION_FILES]
        if target.values_file is not None:
            files = [target.values_file]
        history = History(
            target.repo_url,
            branch,
            "",
            files[0],
            target.image_name or target.image,
            workdir,
            target.values_ref(),
        )
        head = history.head()
        file = next((f for f in files if history.exists(head, f)), files[0])
        # the overlay's newest change is what must be live (History took files[0]'s)
        history.file, history.commit = file, history.last_change(file) or head
        expected = history.facts(history.head()).image
        if expected is None:
            row.reason = f"{file} at {branch} sets no image {target.image}"
            return row
        judged = []
        for deployment, app in found:
            judgement = decide.judge(app, deployment.source_index, expected, history.facts)
            judged.append((deployment.display, judgement))
            row.applications.append(
                AppLive(
                    namespace=deployment.namespace,
                    name=deployment.name,
                    state=_sweep_state(judgement.state),
                    reason=judgement.reason,
                    revision=judgement.revision,
                    images=judgement.images,
                )
            )
        row.state, row.reason = target_state(judged)
    except ImagebumpError as exc:
        row.state, row.reason = "unknown", str(exc)
    return row


def check(targets: list[Target], api: Any, namespace: str, scratch: Path) -> LiveStatesOutput:
    """Every target's live state, and the counts."""
    states = [live_state(t, api, namespace, scratch / str(i)) for i, t in enumerate(targets)]
    return LiveStatesOutput(
        states=states, counts=count_live(states), mismatches=sum(s.state == "mismatch" for s in states)
    )


def render_live_table(states: list[LiveState]) -> str:
    """The human view: one line per current target, mismatches first."""
    order = {s: i for i, s in enumerate(("mismatch", "unknown", "syncing", "no-application", "live"))}
    rows = [
        (s.state, s.env or "-", f"{s.repo_url}/{s.path}", s.reason)
        for s in sorted(states, key=lambda s: (order.get(s.state, 9), s.repo_url, s.path))
    ]
    head = ("LIVE", "ENV", "OVERLAY", "REASON")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3] for r in [head, *rows]
    ]
    totals = Counter(s.state for s in states)
    lines.append(
        f"{len(states)} current target(s) in Argo CD: "
        + ", ".join(f"{totals.get(s, 0)} {s}" for s in LIVE_STATES)
    )
    return "\n".join(line.rstrip() for line in lines) + "\n"


@step_entry
def run(targets: list[Target]) -> LiveStatesOutput:
    """Report the live state in Argo CD of every current target the sweep found."""
    from steps.runtime.scratch_dir import scratch
    from steps.verify_live import argocd

    if not argocd.configured():
        log.info("%s", argocd.NOT_CONFIGURED)
        return LiveStatesOutput()
    api = argocd.connect()
    with scratch("live-states-") as workdir:
        out = check(targets, api, argocd.argocd_namespace(), workdir)
    log.info("%s", render_live_table(out.states).splitlines()[-1])
    return out

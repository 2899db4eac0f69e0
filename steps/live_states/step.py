"""live-states (the step's I/O and ``run``): reconcile's view of push → live — for every current target, the live state of the
Argo CD Applications deploying its overlay, whoever changed it (a merged pull request, a person).

Reads only: the Applications (:mod:`steps.verify_live.argocd`, no refresh: a reconcile run must not make
Argo CD work) and the base branch's history (:mod:`steps.verify_live.revisions`). Per target:
``live`` (every Application synced at a revision holding the overlay's newest change, healthy,
running what Git holds), ``idle`` (synced and healthy there, but no Pod runs the image now),
``syncing`` (not yet, with the reason: not synced, no automated sync, progressing, an error
condition), ``mismatch`` (synced and compared, yet a Pod runs another image of the repository),
``no-application`` (nothing deploys it) or ``unknown`` (it could not be read, with the reason).
Cost per run: one list of Applications; per repository one ``ls-remote``, one fetch of its
branches and one of the overlay files — never per target. A repository or status that cannot be
read costs only its rows. Outputs ``states`` (a row per target, bounded) and ``counts`` (targets
per state and env: the gauge ``imagebump_live_targets``). Safe to run twice.

Shape: gather (the Applications, each repository's one clone, the image its overlay holds) → per
Application verify-live's judgement (:func:`steps.verify_live.decide.decide`) → per target
:func:`steps.live_states.decide.decide`, the pure core → act (the outputs, the table).
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.

import logging
from collections import Counter
from pathlib import Path
from typing import Any

from steps.domain.errors import ImagebumpError
from steps.domain.models import Target
from steps.domain.terminal import for_terminal
from steps.live_states.decide import (
    LIVE_STATES,
    MAX_APPLICATIONS,
    MAX_REASON,
    LiveState,
    LiveStatesOutput,
    app_row,
    clip,
    count_live,
    decide,
)
from steps.runtime.harness import step_entry
from steps.verify_live import decide as verify_live

log = logging.getLogger(__name__)
#: The name in this step's log records (its module is ``step``; the template is live-states).
STEP_NAME = "live-states"


def live_state(
    target: Target,
    apps: list[dict[str, Any]],
    clone: Any,
    default_branch: str,
) -> LiveState:
    """One current target's live state from the run's one list of Applications and its
    repository's one clone (``unknown`` with the reason when it cannot be read). No I/O but the
    clone's reads of objects it already holds (and one fetch if Argo CD is ahead of it)."""
    from steps.kustomize import KUSTOMIZATION_FILES
    from steps.verify_live import argocd
    from steps.verify_live.revisions import History

    row = LiveState(repo_url=target.repo_url, path=target.path, env=target.env, state="unknown")
    try:
        branch = target.settings.base_branch or default_branch
        if target.helmfile is not None:  # issue 34: the release's values file is known only after an update
            row.reason = "the live state of a helmfile release is read by verify-live after each update"
            return row
        found = argocd.select(
            apps, target.repo_url, target.path, branch, branch == default_branch, file=target.values_file
        )
        if not found:
            row.state, row.reason = decide([])
            return row
        files = [f"{target.path}/{name}".lstrip("/") for name in KUSTOMIZATION_FILES]
        if target.values_file is not None:
            files = [target.values_file]
        head = clone.head(branch)
        file = next((f for f in files if clone.exists(head, f)), files[0])
        # the overlay's newest change is what must be live
        commit = clone.last_change(branch, file) or head
        history = History(
            target.repo_url,
            branch,
            commit,
            file,
            target.settings.image_name or target.image,
            clone=clone,
            values=target.values_ref(),
        )
        expected = history.facts(head).image
        if expected is None:
            row.reason = f"{file} at {branch} sets no image {target.image}"
            return row
        judged = []
        for deployment, app in found:
            judgement = verify_live.decide(app, deployment.source_index, expected, history.facts)
            judged.append((deployment.display, judgement))
            row.applications.append(app_row(deployment, judgement, verify_live.repository(expected)))
        row.state, row.reason = decide(judged)
        rank = {"mismatch": 0, "unknown": 1, "syncing": 2}
        row.applications = sorted(row.applications, key=lambda a: rank.get(a.state, 9))[:MAX_APPLICATIONS]
        row.reason = clip(row.reason, MAX_REASON * 4)
    except ImagebumpError as exc:
        row.state, row.reason = "unknown", clip(str(exc))
    return row


def _synced_revisions(apps: list[dict[str, Any]]) -> list[str]:
    """Every revision the Applications report synced (to read their overlay files in one batch)."""
    found = []
    for app in apps:
        status = app.get("status") if isinstance(app, dict) else None
        sync = status.get("sync") if isinstance(status, dict) else None
        if not isinstance(sync, dict):
            continue
        values = [
            sync.get("revision"),
            *(sync.get("revisions") or [] if isinstance(sync.get("revisions"), list) else []),
        ]
        found.extend(v for v in values if isinstance(v, str) and len(v) in (40, 64))
    return found


def _repository_states(
    repo_url: str, targets: list[Target], apps: list[dict[str, Any]], workdir: Path
) -> list[LiveState]:
    """The states of one repository's targets: one ``ls-remote`` (its default branch), one fetch of
    every branch they use, one fetch of the overlay files' blobs — whatever the number of targets."""
    from steps import git
    from steps.kustomize import KUSTOMIZATION_FILES

    try:
        default_branch = git.default_branch(repo_url, git.GitAuth.from_env(write=False))
        branches = sorted({t.settings.base_branch or default_branch for t in targets})
        clone = git.PartialClone(repo_url, branches, workdir, filter="blob:none")
        revisions = [*(clone.head(b) for b in branches), *_synced_revisions(apps)]
        revisions = [r for r in dict.fromkeys(revisions) if clone.known_locally(r)]
        files = {f"{t.path}/{name}".lstrip("/") for t in targets for name in KUSTOMIZATION_FILES}
        clone.prefetch([(r, f) for r in revisions for f in sorted(files)])
    except ImagebumpError as exc:  # this repository only: its rows say why
        reason = clip(f"reading {repo_url}: {exc}")
        return [
            LiveState(repo_url=t.repo_url, path=t.path, env=t.env, state="unknown", reason=reason)
            for t in targets
        ]
    return [live_state(t, apps, clone, default_branch) for t in targets]


def check(targets: list[Target], api: Any, namespace: str, scratch: Path) -> LiveStatesOutput:
    """Every target's live state, and the counts: one list of Applications per run, one
    history read per repository (:func:`_repository_states`)."""
    from steps.verify_live import argocd

    try:
        apps = argocd.list_applications(api, namespace)
    except ImagebumpError as exc:
        states = [
            LiveState(repo_url=t.repo_url, path=t.path, env=t.env, state="unknown", reason=clip(str(exc)))
            for t in targets
        ]
    else:
        by_repo: dict[str, list[int]] = {}
        for i, t in enumerate(targets):
            by_repo.setdefault(t.repo_url, []).append(i)
        found: dict[int, LiveState] = {}
        for n, (repo_url, indexes) in enumerate(by_repo.items()):
            rows = _repository_states(repo_url, [targets[i] for i in indexes], apps, scratch / str(n))
            found.update(zip(indexes, rows, strict=True))
        states = [found[i] for i in range(len(targets))]
    return LiveStatesOutput(
        states=states, counts=count_live(states), mismatches=sum(s.state == "mismatch" for s in states)
    )


def render_live_table(states: list[LiveState]) -> str:
    """The human view: one line per current target, mismatches first."""
    order = {s: i for i, s in enumerate(("mismatch", "unknown", "syncing", "no-application", "idle", "live"))}
    rows = [
        tuple(for_terminal(c) for c in (s.state, s.env or "-", f"{s.repo_url}/{s.path}", s.reason))
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
    """Report the live state in Argo CD of every current target reconcile found."""
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

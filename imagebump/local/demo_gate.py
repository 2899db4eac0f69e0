"""The demo's promotion gate (issue 35): production waits until staging ran the image live and
Healthy for a short soak, then its pull request branch appears (``gate: wait``), or its pull request
branch is there at once and its head commit's status goes from pending to success (``gate: check``).

:func:`gated_rules` adds ``promoteAfter: {env: staging, soak: …}`` (and ``gate: check``) to the demo's
production rule; :func:`watch_the_gate` runs reconcile (what ``imagebump run --local`` runs every
``IMAGEBUMP_GATE_INTERVAL``) until production is promoted, saying each state on the way:
staging live → waiting (time left) → promoted → the production PR branch, and with ``gate: check``
each state of the commit status ``imagebump/soak: staging`` on the branch's head (the demo's forge has
no API: the status is a git note, :mod:`steps.forge.local_status`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from imagebump.local.demo_repo import PRODUCTION_PATH

#: The demo's soak: short enough to watch.
DEMO_SOAK = "8s"


#: The gate modes the demo shows (``./dev demo --gate [wait|check]``).
GATES = ("wait", "check")


def gated_rules(rules: str, soak: str = DEMO_SOAK, gate: str = "wait") -> str:
    """The demo's rules with production gated on staging (``gate: wait`` or ``check``)."""
    marker = "  env: production\n"
    if marker not in rules:
        return rules
    added = f"  promoteAfter: {{env: staging, soak: {soak}}}\n" + (
        "  gate: check\n" if gate == "check" else ""
    )
    return rules.replace(marker, marker + added, 1)


def watch_the_gate(
    world: Any,
    say: Callable[[str], None],
    *,
    every: float = 2.0,
    timeout: float = 90.0,
    statuses: list[str] | None = None,
) -> dict[str, Any] | None:
    """Reconcile every ``every`` seconds until production is promoted (or ``timeout``); the last row.

    ``statuses`` (``gate: check``): each state the commit status ``imagebump/soak: staging`` took on
    the production pull request branch's head is appended to it (and said), in order."""
    from imagebump.local.reconciler import run_reconcile

    deadline = time.monotonic() + timeout
    row: dict[str, Any] | None = None
    if statuses is not None:
        _status_changed(world, say, statuses)  # commit-pr set it when it opened the pull request
    while time.monotonic() < deadline:
        reconciled = run_reconcile(world.reconcile_executor(), apply=True)
        row = next((r for r in reconciled.summary()["targets"] if _is_production(r)), None)
        gate = (row or {}).get("gate") or {}
        if gate.get("state") == "waiting":
            left = gate.get("time_left")
            say(f"gate: production waits for staging ({left}s of the soak left)")
        elif gate:
            say(f"gate: production {gate['state']}{': ' + gate['reason'] if gate.get('reason') else ''}")
        if statuses is not None:
            _status_changed(world, say, statuses)
        if gate.get("state") in ("promoted", "blocked"):
            branches = [b for b in world.branches() if b != "main"]
            if branches:
                say(f"gate: the production pull request branch: {', '.join(branches)}")
            return row
        time.sleep(every)  # the demo runs in real time (tests inject clocks instead)
    return row


def _is_production(row: dict[str, Any]) -> bool:
    """The sweep's row for the demo's own production overlay: the sweep reads every ECR repository
    the rules match, and an ECR that holds other ``team/*`` repositories (an emulator shared with
    other worlds in one process) yields rows for overlays this repository does not have."""
    return row.get("env") == "production" and row.get("path") == PRODUCTION_PATH


def _status_changed(world: Any, say: Callable[[str], None], seen: list[str]) -> None:
    """Read the soak status on the production branch's head; say it and record it when it changed."""
    from steps.forge.local_status import GitNoteStatuses
    from steps.gate.status import context
    from steps.git import GitAuth

    branches = [b for b in world.branches() if b != "main"]
    if not branches:
        return
    head = world.rev(branches[0])
    status = GitNoteStatuses(world.manifests_url, GitAuth(world.token)).statuses(head).get(context("staging"))
    if status is not None and (not seen or seen[-1] != status.state):
        seen.append(status.state)
        say(
            f"gate: {context('staging')} on {branches[0]} ({head[:12]}): {status.state} — {status.description}"
        )

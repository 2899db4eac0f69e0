"""The demo's promotion gate (issue 35): production waits until staging ran the image live and
Healthy for a short soak, then its pull request branch appears.

:func:`gated_rules` adds ``promoteAfter: {env: staging, soak: …}`` to the demo's production rule;
:func:`watch_the_gate` runs the sweep (what ``imagebump run --local`` runs every
``IMAGEBUMP_GATE_INTERVAL``) until production is promoted, saying each state on the way:
staging live → waiting (time left) → promoted → the production PR branch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: The demo's soak: short enough to watch.
DEMO_SOAK = "8s"


def gated_rules(rules: str, soak: str = DEMO_SOAK) -> str:
    """The demo's rules with production gated on staging (``gate: wait``)."""
    marker = "  env: production\n"
    if marker not in rules:
        return rules
    return rules.replace(marker, marker + f"  promoteAfter: {{env: staging, soak: {soak}}}\n", 1)


def watch_the_gate(
    world: Any, say: Callable[[str], None], *, every: float = 2.0, timeout: float = 90.0
) -> dict[str, Any] | None:
    """Sweep every ``every`` seconds until production is promoted (or ``timeout``); the last row."""
    from imagebump.local.sweep import run_sweep

    deadline = time.monotonic() + timeout
    row: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        sweep = run_sweep(world.sweep_executor(), apply=True)
        row = next((r for r in sweep.summary()["targets"] if r.get("env") == "production"), None)
        gate = (row or {}).get("gate") or {}
        if gate.get("state") == "waiting":
            left = gate.get("time_left")
            say(f"gate: production waits for staging ({left}s of the soak left)")
        elif gate:
            say(f"gate: production {gate['state']}{': ' + gate['reason'] if gate.get('reason') else ''}")
        if gate.get("state") in ("promoted", "blocked"):
            branches = [b for b in world.branches() if b != "main"]
            if branches:
                say(f"gate: the production pull request branch: {', '.join(branches)}")
            return row
        time.sleep(every)  # the demo runs in real time (tests inject clocks instead)
    return row

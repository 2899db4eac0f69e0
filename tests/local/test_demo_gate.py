"""The demo's gate (issue 35) reads the sweep's row for its own production overlay.

The sweep reports a row per overlay the rules reach from every ECR repository they match. The demo's
rules map ``team/<app>`` to ``apps/<app>/overlays/…``, so an ECR that holds other ``team/*``
repositories (an emulator that outlived another world in the same process) adds production rows
for overlays the demo's repository does not have. The gate's verdict is the row of
``apps/api/overlays/production``, wherever it comes in the list.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from imagebump.local import demo_gate, reconciler
from imagebump.local.demo_repo import PRODUCTION_PATH


def _row(path: str, **gate: str) -> dict[str, object]:
    row: dict[str, object] = {"env": "production", "path": path, "state": "unknown"}
    if gate:
        row["gate"] = gate
    return row


@pytest.mark.parametrize("own_first", [False, True])
def test_the_gate_is_read_from_the_demo_overlay_row(monkeypatch, own_first: bool) -> None:
    foreign = _row("apps/api-1bef9f08/overlays/production")  # "does not exist; fix the path"
    own = _row(PRODUCTION_PATH, state="promoted", env="staging")
    rows = [own, foreign] if own_first else [foreign, own]
    summary = {"targets": [{"env": "staging", "path": "apps/api/overlays/staging"}, *rows]}
    monkeypatch.setattr(
        reconciler, "run_reconcile", lambda executor, apply: SimpleNamespace(summary=lambda: summary)
    )
    world = SimpleNamespace(reconcile_executor=lambda: None, branches=lambda: ["main"])
    said: list[str] = []

    row = demo_gate.watch_the_gate(world, said.append, every=0.0, timeout=5.0)

    assert row is own
    assert said == ["gate: production promoted"]

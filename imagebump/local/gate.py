"""The promotion gate on this machine (issue 35): ``imagebump run --local`` evaluates it every
``IMAGEBUMP_GATE_INTERVAL`` (default 60 s) when a rule has ``promoteAfter``.

The evaluation is reconcile (the rendered ``image-reconcile``, whose reconcile step decides every
gated target from Argo CD and Git, :mod:`steps.gate.apply`): a promoted ``gate: wait`` target goes
through the same update-target steps as any update. Nothing is remembered between evaluations, so a
restart of ``run --local`` mid-soak neither loses the gate nor restarts its clock: the clock is Argo
CD's ``deployedAt``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from steps.domain.errors import ConfigError

DEFAULT_INTERVAL = "60s"
#: The longest interval: a promotion lands within 2 minutes of the soak's end.
MAX_INTERVAL_SECONDS = 60.0


def interval(environ: Mapping[str, str] | None = None) -> float:
    """``IMAGEBUMP_GATE_INTERVAL`` in seconds (``30s``, ``1m``, ``45``); a bad value is a ConfigError."""
    from imagebump.local.reconciler import parse_every

    text = (os.environ if environ is None else environ).get("IMAGEBUMP_GATE_INTERVAL") or DEFAULT_INTERVAL
    try:
        seconds = parse_every(text)
    except ConfigError:
        raise ConfigError(
            f"IMAGEBUMP_GATE_INTERVAL {text[:40]!r}: expected a duration like 30s or 1m"
        ) from None
    if not 0 < seconds <= MAX_INTERVAL_SECONDS:
        raise ConfigError(
            f"IMAGEBUMP_GATE_INTERVAL {text[:40]!r}: must be more than 0 and at most 1m "
            "(a gated target is promoted within one interval after its soak ends)"
        )
    return seconds


def gated(rules_text: str, source: str = "rules.yaml") -> bool:
    """Does a rule of this file have ``promoteAfter``?"""
    from steps.rules import load_rules

    return any(r.settings.promote_after is not None for r in load_rules(rules_text, source).rules)


def gate_reconciler(
    rules_text: str,
    make_executor: Callable[[], Any],
    *,
    log: Callable[[dict[str, Any]], None],
    environ: Mapping[str, str] | None = None,
) -> Any:
    """A :class:`~imagebump.local.reconciler.Reconciler` every gate interval when a rule is gated (else None)."""
    if not gated(rules_text):
        return None
    from imagebump.local.reconciler import Reconciler

    every = interval(environ)
    return Reconciler(make_executor(), every, log=log, out=lambda line: print(f"gate {line}", flush=True))

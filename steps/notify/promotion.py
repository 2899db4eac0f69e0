"""The promotion gate's messages: ``live-before`` and ``blocked`` (issue 36, for issue 35's gate).

The gate (:func:`steps.gate.apply.apply_gates`, in reconcile and every minute in ``image-gate``)
hands over each gated target it decided, with its decision and, when one is open, its proposal
branch (``gate: check``). :func:`announce` sends

- ``live-before`` once the environment before runs the image live and Healthy (the soak's clock
  started: ``waiting`` with a ``live_since``, or ``promoted``);
- ``blocked`` when the gate blocked it (a mismatch, ``Degraded``, a rollback, a hold, a newer image);

nothing while it only waits. A reconcile run has no push event, so the idempotency key's event is the gated
image (``gate <image>``): the every-minute gate, a restarted pod and the 10-minute reconcile find the
key in the ledger and send nothing again. GitHub gets a comment on the open pull request from the
branch (none open: nothing); the other destinations a message. Never raises; a destination that
is down is logged and counted, as every message. Without GitHub credentials in the pod (reconcile
holds no write token) the ``github`` destinations are left out, with a log record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from steps.domain.errors import ImagebumpError
from steps.domain.models import Target
from steps.notify import config as notify_config
from steps.notify import github
from steps.notify.decide import Message, Outcome
from steps.notify.send import Report

log = logging.getLogger("imagebump.notify")

#: What the gate hands over per gated target.
Decided = tuple[Target, Any, str]  # (gated target, steps.gate.decide.GateDecision, open PR's branch)


def gate_outcomes(decided: Iterable[Decided]) -> list[Outcome]:
    """Pure: the ``live-before`` / ``blocked`` outcomes of the gate's decisions."""
    found = []
    for target, decision, branch in decided:
        if decision.state == "blocked":
            kind = "blocked"
        elif decision.state == "promoted" or getattr(decision, "live_since", None) is not None:
            kind = "live-before"
        else:
            continue
        note = str(getattr(decision, "note", "") or "")
        fields = {
            "image": str(decision.image),
            "overlay": target.path,
            "environment": str(decision.env),
            "pr": "",
            "repo": target.repo_url,
            **({"branch": branch, "base": target.settings.base_branch or ""} if branch else {}),
        }
        if kind == "blocked":
            fields["reason"] = f"{decision.reason}: {note}" if note else str(decision.reason or "")
        else:
            since = decision.live_since
            fields["since"] = since.isoformat() if since is not None else ""
        found.append(
            Outcome(
                kind,
                f"gate {decision.image}",
                f"{target.repo_url}/{target.path}",
                fields,
                tuple(target.settings.notify),
            )
        )
    return found


def _github_reachable(env: Mapping[str, str] | None) -> bool:
    """Does this pod hold GitHub credentials (a token or the App)?"""
    from steps.forge.github import GitHubSettings

    try:
        GitHubSettings.from_env(None if env is None else dict(env))
    except ImagebumpError:
        return False
    return True


def announce(decided: Iterable[Decided], env: Mapping[str, str] | None = None, **kw: Any) -> Report:
    """Send the gate's ``live-before`` / ``blocked`` messages once each; never raises."""
    from steps.notify.step import ledger_from_env, notify

    try:
        outcomes = gate_outcomes(decided)
        if not outcomes:
            return Report()
        cfg = notify_config.load(env)
        if not cfg.destinations:
            return Report()
        keep = None
        if any(d.kind == github.KIND for d in cfg.destinations.values()) and not _github_reachable(env):
            log.info("gate messages: no GitHub credentials here, so no comment on pull requests")

            def keep(message: Message) -> bool:
                destination = cfg.destinations.get(message.destination)
                return destination is None or destination.kind != github.KIND

        return notify(outcomes, cfg, ledger_from_env(env), keep=keep, **kw)
    except Exception as exc:  # noqa: BLE001 - a message never fails the gate
        log.warning("gate messages not sent: %s", type(exc).__name__)
        return Report()

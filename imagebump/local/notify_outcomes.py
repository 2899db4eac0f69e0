"""``imagebump run --local``'s notifications: a finished ``image-update`` workflow → outcomes →
the same messages the cluster's exit handler sends (:mod:`steps.notify`). Never raises: a
notification problem is logged, the run goes on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from imagebump.local.outcome import resolved_image, target_nodes, targets
from steps.notify.decide import Outcome
from workflows.local.results import WorkflowResult

log = logging.getLogger("imagebump.notify")

#: commit-pr's ``action`` → the outcome (``unchanged``/``branch-taken``: nothing to say here).
_ACTIONS = {"committed": "committed", "pr-created": "pr-opened", "pr-updated": "pr-updated"}
_LIVE = {"live": "live", "mismatch": "mismatch", "timeout": "timeout"}


def outcomes(event: dict[str, Any], result: WorkflowResult) -> list[Outcome]:
    """Each target's outcomes: its commit or PR, held/pinned, live/mismatch/timeout, or failed."""
    event_id = str(event.get("id") or result.name)
    image = resolved_image(result)
    found: list[Outcome] = []
    for i, target in enumerate(targets(result)):
        key = f"{target.get('repo_url', '')}/{target.get('path', '')}"
        notify = tuple(target.get("notify") or ())
        nodes = target_nodes(result, i)
        base = {"image": image, "overlay": str(target.get("path", ""))}

        def add(kind: str, fields: dict[str, str], key: str = key, notify: tuple[str, ...] = notify) -> None:
            found.append(Outcome(kind, event_id, key, fields, notify))

        edit, commit, live = nodes.get("edit-kustomize"), nodes.get("commit-pr"), nodes.get("verify-live")
        if any(
            n is not None and n.phase in ("Failed", "Error") and n.template != "verify-live"
            for n in (edit, commit)
        ):
            add("failed", {**base, "workflow_link": result.name})
            continue
        if edit is not None and edit.outputs.get("decision") in ("held", "pinned"):
            add(edit.outputs["decision"], {**base, "reason": edit.outputs.get("reason", "")})
        if commit is not None and commit.phase == "Succeeded" and commit.outputs.get("action") in _ACTIONS:
            link = commit.outputs.get("pr-url") or commit.outputs.get("commit-sha", "")
            add(_ACTIONS[commit.outputs["action"]], {**base, "link": link})
        if live is not None and live.phase != "Skipped":
            kind = _LIVE.get(live.outputs.get("result", ""))
            if kind:
                add(
                    kind,
                    {
                        **base,
                        "seconds": live.outputs.get("seconds-push-to-healthy", ""),
                        "message": live.outputs.get("message", "")[:300],
                    },
                )
    return found


def executor_secrets(environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """The ``imagebump-notify`` Secret the exit handler mounts, from this machine's notification
    settings (the file or ``IMAGEBUMP_NOTIFY_*``), as a cluster holds it; {} when none is set.
    A bad notifications file is refused here, before the first event (:class:`NotifyConfigError`)."""
    from steps.notify import config
    from workflows import names

    cfg = config.load(environ)
    if not cfg.destinations:
        return {}
    data: dict[str, Any] = {
        "destinations": {
            d.name: {"type": d.kind, "url": d.url, **({"secret": d.secret} if d.secret else {})}
            for d in cfg.destinations.values()
        },
        "default": list(cfg.routing.default),
    }
    if cfg.routing.alarms is not None:
        data["alarms"] = list(cfg.routing.alarms)
    if cfg.routing.others is not None:
        data["others"] = list(cfg.routing.others)
    return {names.NOTIFY_SECRET: {names.NOTIFY_KEY: json.dumps(data)}}


def ledger_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The "already sent" record's directory, absolute: a step's own HOME is its temporary directory."""
    from steps.notify.config import LEDGER_ENV
    from steps.notify.step import DEFAULT_LEDGER_DIR

    return {LEDGER_ENV: str(Path(environ.get(LEDGER_ENV) or DEFAULT_LEDGER_DIR).expanduser().resolve())}


def send(event: dict[str, Any], result: WorkflowResult) -> None:
    """Send the run's messages (when destinations are configured); never raises."""
    try:
        from steps.notify import config
        from steps.notify.step import ledger_from_env, notify

        cfg = config.load()
        if cfg.destinations:
            notify(outcomes(event, result), cfg, ledger_from_env())
    except Exception as exc:  # noqa: BLE001 - a notification never stops the run
        log.warning("notifications not sent: %s", type(exc).__name__)

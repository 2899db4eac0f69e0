"""``imagebump run --local``'s notifications: the rendered templates' exit handler (``notify``,
``onExit``) sends them, as on a cluster; this module hands it what a cluster would: the
``imagebump-notify`` Secret built from this machine's settings, and an absolute ledger directory.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger("imagebump.notify")


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

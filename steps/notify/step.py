"""notify: the exit handler of ``image-update`` and ``argocd-backup`` (and ``imagebump run --local``).

Reads the outcomes the Workflow's steps reported (a JSON list), and the Workflow's status and
failures (``{{workflow.status}}``, ``{{workflow.failures}}``); a Workflow that failed with no alarm
among its outcomes becomes a ``failed`` outcome with the Workflow's link. Sends each message once
per destination (:mod:`steps.notify.ledger`); writes the counts ``sent``, ``duplicate`` and
``failed``, which the template's ``notifications_total{result}`` metric reads. Never fails: a bad
notifications file or a destination that is down is a log record and a ``failed`` count.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from steps.domain.errors import ImagebumpError
from steps.notify import config as notify_config
from steps.notify.decide import NotifyConfigError, Outcome, decide
from steps.notify.ledger import FileLedger, Ledger, S3Ledger
from steps.notify.send import Report, deliver
from steps.runtime.harness import step_entry

log = logging.getLogger("imagebump.notify")

LEDGER_BUCKET_ENV = "IMAGEBUMP_NOTIFY_LEDGER_BUCKET"
DEFAULT_LEDGER_DIR = "~/.cache/imagebump/notifications"
#: Argo's workflow phases that mean the Workflow did not succeed.
FAILED_PHASES = frozenset({"Failed", "Error"})


class NotifyOutput(BaseModel):
    sent: int = 0
    duplicate: int = 0
    failed: int = 0


def parse_outcomes(text: str, event: str) -> list[Outcome]:
    """Outcomes from their JSON list ``[{"kind", "target", "fields", "notify"}]``."""
    try:
        items = json.loads(text or "[]")
    except ValueError:
        raise NotifyConfigError("outcomes: not a JSON list") from None
    if not isinstance(items, list):
        raise NotifyConfigError("outcomes: expected a JSON list of {kind, target, fields}")
    found = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("kind"), str):
            raise NotifyConfigError(f"outcomes[{i}]: expected an object with `kind`")
        found.append(
            Outcome(
                kind=item["kind"],
                event=str(item.get("event") or event),
                target=str(item.get("target", "")),
                fields={str(k): str(v) for k, v in (item.get("fields") or {}).items()},
                rule_notify=tuple(item.get("notify") or ()),
            )
        )
    return found


def with_workflow_failure(
    outcomes: list[Outcome], status: str, failures: str, event: str, workflow_url: str, backup: bool = False
) -> list[Outcome]:
    """Add the ``failed`` (or ``backup-failed``) outcome of a Workflow that did not succeed and
    reported no alarm of its own (Argo's ``{{workflow.failures}}``: a JSON list of the failed
    nodes, ``displayName``/``message``/``templateName``)."""
    from steps.notify.decide import ALARMS

    if status not in FAILED_PHASES or any(o.kind in ALARMS for o in outcomes):
        return outcomes
    try:
        nodes = json.loads(failures or "[]")
    except ValueError:
        nodes = []
    first = nodes[0] if isinstance(nodes, list) and nodes and isinstance(nodes[0], dict) else {}
    fields = {
        "workflow_link": workflow_url,
        "step": str(first.get("displayName", "")),
        "error": str(first.get("message", ""))[:300],
    }
    target = outcomes[0].target if outcomes else ""
    kind = "backup-failed" if backup else "failed"
    if not backup and outcomes:
        fields |= {k: outcomes[0].fields.get(k, "") for k in ("image", "overlay")}
    return [*outcomes, Outcome(kind, event, target, fields, outcomes[0].rule_notify if outcomes else ())]


def ledger_from_env(env: Any = None) -> Ledger:
    env = os.environ if env is None else env
    if env.get(LEDGER_BUCKET_ENV):
        import boto3

        return S3Ledger(boto3.client("s3"), env[LEDGER_BUCKET_ENV])
    return FileLedger(Path(env.get(notify_config.LEDGER_ENV) or DEFAULT_LEDGER_DIR).expanduser())


def notify(outcomes: list[Outcome], cfg: notify_config.NotifyConfig, ledger: Ledger, **kw: Any) -> Report:
    """Decide and deliver: the core the step and ``imagebump run --local`` share."""
    messages = []
    for outcome in outcomes:
        messages += decide(outcome, cfg.routing, list(cfg.destinations))
    return deliver(messages, cfg.destinations, ledger, **kw)


@step_entry
def run(
    outcomes: str = "[]",
    event_id: str = "",
    workflow_status: str = "",
    workflow_failures: str = "",
    workflow_url: str = "",
    backup: str = "false",
) -> NotifyOutput:
    """Send the Workflow's outcomes; never fails the Workflow."""
    try:
        cfg = notify_config.load()
        found = parse_outcomes(outcomes, event_id)
        found = with_workflow_failure(
            found, workflow_status, workflow_failures, event_id, workflow_url, backup == "true"
        )
        if not cfg.destinations:
            log.info("no notification destinations configured: %d outcome(s) not sent", len(found))
            return NotifyOutput()
        report = notify(found, cfg, ledger_from_env())
    except (NotifyConfigError, ImagebumpError, OSError) as exc:
        log.error("notifications not sent: %s", exc)
        return NotifyOutput(failed=1)
    return NotifyOutput(**{k: report.counts.get(k, 0) for k in ("sent", "duplicate", "failed")})

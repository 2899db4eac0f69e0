"""notify-verifying: ``imagebump/live`` = ``pending`` on imagebump's commit while verify-live watches it.

Runs beside verify-live (the same ``when``: commit-pr committed and the Workflow's ``verify-live`` is
``true``), with the exit handler's rights (the ``imagebump-notify`` ServiceAccount, Secret and ledger,
the Git token): commit-pr stays the only writer of Git and verify-live holds no write right. It sends
the one message the exit handler would send for the commit to a ``github`` destination — the
``committed`` outcome with ``verifying: true``, under the same idempotency key — so the exit handler
finds it in the ledger (``duplicate``) and then sets ``success`` (live) or ``failure`` (mismatch,
timeout) on the same commit. Only ``github`` destinations the outcome is routed to; none configured:
nothing. Never fails: a GitHub that refuses or is down is a log record and a ``failed`` count.
"""

# No `from __future__ import annotations`: Hera reads real annotation objects.

import logging
from typing import Any

from steps.domain.errors import ImagebumpError
from steps.domain.models import Target, image_ref
from steps.notify import config as notify_config
from steps.notify import github
from steps.notify.decide import Message, NotifyConfigError, Outcome
from steps.notify.ledger import Ledger
from steps.notify.output import NotifyOutput
from steps.notify.send import VERIFYING_BUDGET, Report
from steps.notify.step import event_of, ledger_from_env, notify, read_workflow
from steps.runtime.harness import step_entry

log = logging.getLogger("imagebump.notify")
#: The name in this step's log records (as its template is named).
STEP_NAME = "notify-verifying"


def pending_outcome(target: Target, commit_sha: str, event_id: str) -> Outcome:
    """The ``committed`` outcome the exit handler reads from the nodes once verify-live ran
    (:func:`steps.notify.workflow_outcomes.image_outcomes`): the same event, target and kind, so the
    same key per destination."""
    return Outcome(
        "committed",
        event_id,
        f"{target.repo_url}/{target.path}",
        {
            "image": image_ref(target.tag, target.digest, name=target.image),
            "overlay": target.path,
            "repo": target.repo_url,
            "link": commit_sha,
            "commit": commit_sha,
            "pr": "",
            "verifying": "true",
        },
        tuple(target.settings.notify),
    )


def mark_pending(outcome: Outcome, cfg: notify_config.NotifyConfig, ledger: Ledger, **kw: Any) -> Report:
    """Deliver ``outcome``'s messages to its ``github`` destinations only (the pending status); the
    other destinations hear of the commit from the exit handler, with the rest of the push."""

    def to_github(message: Message) -> bool:
        destination = cfg.destinations.get(message.destination)
        return destination is not None and destination.kind == github.KIND

    return notify([outcome], cfg, ledger, keep=to_github, **kw)


@step_entry
def run(target: Target, commit_sha: str, event: str = "", workflow_name: str = "") -> NotifyOutput:
    """Set ``imagebump/live`` = ``pending`` on ``commit_sha``; never fails the Workflow."""
    try:
        cfg = notify_config.load()
        if not any(d.kind == github.KIND for d in cfg.destinations.values()):
            return NotifyOutput()
        event_id = event_of(event, read_workflow(workflow_name), workflow_name)
        report = mark_pending(
            pending_outcome(target, commit_sha, event_id), cfg, ledger_from_env(), budget=VERIFYING_BUDGET
        )
    except (NotifyConfigError, ImagebumpError, OSError, ValueError) as exc:
        log.error("imagebump/live pending not set: %s", exc)
        return NotifyOutput(failed=1)
    except Exception as exc:  # noqa: BLE001 - it never fails the Workflow
        log.error("imagebump/live pending not set: %s", type(exc).__name__)
        return NotifyOutput(failed=1)
    return NotifyOutput(**{k: report.counts.get(k, 0) for k in ("sent", "duplicate", "failed")})

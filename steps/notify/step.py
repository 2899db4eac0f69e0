"""notify: the exit handler of ``image-update`` and ``argocd-backup`` (and ``imagebump run --local``).

Reads the outcomes the Workflow's steps reported (a JSON list), and the Workflow's status and
failures (``{{workflow.status}}``, ``{{workflow.failures}}``); a Workflow that failed with no alarm
among its outcomes becomes a ``failed`` outcome with the Workflow's link. Sends each message once
per destination (:mod:`steps.notify.ledger`); writes the counts ``sent``, ``duplicate`` and
``failed``, which the template's ``notifications_total{result}`` metric reads. Never fails: a bad
notifications file or a destination that is down is a log record and a ``failed`` count.
"""

# No `from __future__ import annotations`: Hera reads real annotation objects.

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from steps.domain.errors import ImagebumpError
from steps.notify import config as notify_config
from steps.notify.decide import Message, NotifyConfigError, Outcome, decide
from steps.notify.ledger import FileLedger, Ledger, S3Ledger
from steps.notify.workflow_outcomes import (
    backup_outcomes,
    decode_failures,
    image_outcomes,
    nodes_of,
    telling_failure,
    unreadable_nodes,
)
from steps.runtime.harness import step_entry

if TYPE_CHECKING:
    from steps.notify.send import Report

log = logging.getLogger("imagebump.notify")

#: Modules this step imports only when it has something to send (:func:`_counts`); a local executor
#: that forks steps from a warm interpreter imports them ahead (workflows.local.forkserver_server).
LAZY_IMPORTS = ("steps.notify.output", "steps.notify.send", "yaml")
#: The name in this step's log records (its module is ``step``; the template is notify).
STEP_NAME = "notify"

LEDGER_BUCKET_ENV = "IMAGEBUMP_NOTIFY_LEDGER_BUCKET"
#: The finished Workflow as JSON (``{metadata, status: {phase, nodes}}``): the local executor writes
#: it for its exit handlers; on a cluster the step reads the Workflow from the Kubernetes API.
WORKFLOW_FILE_ENV = "IMAGEBUMP_WORKFLOW_FILE"
#: The pod's namespace, where its Workflow is: the service account's own file in every pod.
NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
DEFAULT_LEDGER_DIR = "~/.cache/imagebump/notifications"
#: Argo's workflow phases that mean the Workflow did not succeed.
FAILED_PHASES = frozenset({"Failed", "Error"})


def _counts(sent: int = 0, duplicate: int = 0, failed: int = 0) -> dict[str, int]:
    """The step's output: :class:`~steps.notify.output.NotifyOutput`'s fields as a ``dict`` (the
    templates' output parameters come from that model; the harness writes the same files from
    either). Not the model itself: a pod whose exit handler has nothing to send (most Workflows,
    when no destination is configured) thus ends without importing pydantic, YAML or the sending
    code, about an interpreter's start (issue 33; tests/steps/runtime/test_entry.py)."""
    return {"sent": sent, "duplicate": duplicate, "failed": failed}


def deliver(*args: Any, **kwargs: Any) -> "Report":
    """:func:`steps.notify.send.deliver`, imported once there is something to send (HTTP, TLS)."""
    from steps.notify.send import deliver as send

    return send(*args, **kwargs)


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
    first = telling_failure(decode_failures(failures))
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


def notify(
    outcomes: list[Outcome],
    cfg: notify_config.NotifyConfig,
    ledger: Ledger,
    keep: Callable[[Message], bool] | None = None,
    **kw: Any,
) -> "Report":
    """Decide and deliver: the core the step and ``imagebump run --local`` share. ``keep``: only the
    messages it accepts (notify-verifying: GitHub's; the gate: none for a GitHub it cannot reach)."""
    messages, unknown = [], []
    for outcome in outcomes:
        for message in decide(outcome, cfg.routing):
            if keep is not None and not keep(message):
                continue
            (messages if message.destination in cfg.destinations else unknown).append(message)
    report = deliver(messages, cfg.destinations, ledger, **kw)
    for message in unknown:  # a rule naming a destination the file lacks: the others still go out
        text = f"notification {message.kind} for {message.target}: destination {message.destination!r} is not configured"
        log.error(text)
        report.failures.append(text)
        report.counts["failed"] += 1
    return report


def read_workflow(name: str, env: Any = None) -> dict[str, Any]:
    """The finished Workflow ``name``: the local executor's file, else the Kubernetes API ({} if none)."""
    env = os.environ if env is None else env
    if env.get(WORKFLOW_FILE_ENV):
        return json.loads(Path(env[WORKFLOW_FILE_ENV]).read_text())
    if not name or not env.get("KUBERNETES_SERVICE_HOST"):
        return {}
    from steps.kube.api import Resource
    from steps.kube.client import KubernetesApi

    api = KubernetesApi.from_config(timeout=20.0)
    namespace = Path(NAMESPACE_FILE).read_text().strip() if Path(NAMESPACE_FILE).is_file() else "imagebump"
    return api.get(Resource("Workflow", "argoproj.io/v1alpha1", "workflows"), namespace, name) or {}


#: The Argo Workflows UI (e.g. ``https://argo.example.com``; the ``imagebump-env`` ConfigMap): a
#: failed Workflow's message links to it (``/workflows/<namespace>/<name>``, the UI's route).
ARGO_UI_ENV = "IMAGEBUMP_ARGO_UI_URL"


def workflow_link(name: str, namespace: str = "imagebump", env: Any = None) -> str:
    """The Workflow's page in the Argo UI when its URL is configured, else its name."""
    env = os.environ if env is None else env
    base = str(env.get(ARGO_UI_ENV) or "").rstrip("/")
    return f"{base}/workflows/{namespace}/{name}" if base and name else name


#: Argo's label on a resubmitted Workflow naming the one it was resubmitted from
#: (argo-workflows workflow/common/common.go ``LabelKeyPreviousWorkflowName``).
RESUBMITTED_FROM = "workflows.argoproj.io/resubmitted-from-workflow"


def event_of(event: str, workflow: dict[str, Any], workflow_name: str) -> str:
    """The idempotency's event id: the push event's ``id`` (the same for a redelivery and a resubmit
    of it), else the Workflow a resubmitted one came from, else the Workflow's name."""
    try:
        data = json.loads(event) if event else {}
    except ValueError:
        data = {}
    if isinstance(data, dict) and data.get("id"):
        return str(data["id"])
    labels = (workflow.get("metadata") or {}).get("labels") or {}
    return str(labels.get(RESUBMITTED_FROM) or workflow_name)


def send_now(outcomes: list[Outcome], env: Any = None) -> "Report":
    """Send ``outcomes`` from a command on one machine (``imagebump restore``): the same
    destinations and ledger as ``imagebump run --local``; never raises (a problem is a log record)."""
    from steps.notify.send import Report

    try:
        cfg = notify_config.load(env)
        if not cfg.destinations:
            return Report()
        return notify(outcomes, cfg, ledger_from_env(env))
    except Exception as exc:  # noqa: BLE001 - a notification never fails the command
        log.warning("notifications not sent: %s", type(exc).__name__)
        return Report()


@step_entry
def run(
    outcomes: str = "[]",
    event_id: str = "",
    workflow_status: str = "",
    workflow_failures: str = "",
    workflow_url: str = "",
    backup: str = "false",
    workflow_name: str = "",
    event: str = "",
) -> dict[str, int]:
    """Send the Workflow's outcomes; never fails the Workflow. Returns the counts (:func:`_counts`)."""
    try:
        # nothing to send: the Workflow is not even read (no API call), nothing parsed or imported
        cfg = notify_config.load() if notify_config.configured() else None
        if cfg is None or not cfg.destinations:
            log.info("no notification destinations configured: nothing sent")
            return _counts()
        workflow = read_workflow(workflow_name)
        namespace = str((workflow.get("metadata") or {}).get("namespace") or "imagebump")
        workflow_url = workflow_url or workflow_link(workflow_name, namespace)
        event_id = event_id or event_of(event, workflow, workflow_name)
        found = parse_outcomes(outcomes, event_id)
        if workflow:
            nodes = nodes_of(workflow)
            unreadable = unreadable_nodes(workflow)
            if unreadable:  # the targets' outcomes are not known: a failed Workflow is still said
                log.warning("the Workflow's outcomes cannot be read: %s", unreadable)
            if backup == "true":
                found += backup_outcomes(nodes, event_id)
            else:
                found += image_outcomes(nodes, event_id, workflow_url)
        found = with_workflow_failure(
            found,
            workflow_status,
            workflow_failures,
            event_id,
            workflow_url,
            backup == "true",
        )
        report = notify(found, cfg, ledger_from_env())
    except (NotifyConfigError, ImagebumpError, OSError, ValueError) as exc:
        log.error("notifications not sent: %s", exc)
        return _counts(failed=1)
    except Exception as exc:  # noqa: BLE001 - an exit handler that fails fails a Workflow that succeeded
        log.error("notifications not sent: %s", type(exc).__name__)
        return _counts(failed=1)
    return _counts(**{k: report.counts.get(k, 0) for k in ("sent", "duplicate", "failed")})

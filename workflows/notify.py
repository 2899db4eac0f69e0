"""The exit handler (``onExit``) of ``image-update`` and ``argocd-backup``: the ``notify`` step.

Argo runs ``spec.onExit`` after the entrypoint whatever its result, so a Workflow that failed still
notifies (argo-workflows docs/walk-through/exit-handlers.md). The handler passes the Workflow's
name, status and failures (``{{workflow.name}}``, ``{{workflow.status}}``, ``{{workflow.failures}}``)
and its ``event``; :func:`steps.notify.step.run` reads the steps' outputs from the Workflow's
``status.nodes`` (its ServiceAccount ``imagebump-notify`` may get Workflows in its namespace,
nothing else). Destinations' URLs and secrets come from the ``imagebump-notify`` Secret mounted as
a file, and the Git token from ``imagebump-git`` (for PR comments and commit statuses) as an
environment variable: never parameters. ``notifications_total{result}`` counts the step's outputs.

``notify-verifying`` (:mod:`steps.notify.verifying`), with the same rights, runs beside verify-live
in image-update's ``deliver-target`` and sets ``imagebump/live`` = ``pending`` on the commit it watches.
"""

from __future__ import annotations

from hera.workflows import Env, SecretEnv, SecretVolume, Steps, script
from hera.workflows import models as m

from steps.notify import send as notify_send
from steps.notify import step as notify_step
from steps.notify import verifying as notify_verifying
from steps.notify.output import NotifyOutput
from workflows import common as c
from workflows import names as n

#: The name of the exit handler template (``spec.onExit``).
EXIT_HANDLER = "exit-handler"
#: The template that sets ``imagebump/live`` = ``pending`` beside verify-live.
VERIFYING = "notify-verifying"
METRIC = "imagebump_notifications_total"  # Prometheus: argo_workflows_imagebump_notifications_total
METRIC_HELP = "Notifications by result: sent, duplicate (already sent) or failed (after its retries)."


def messages_env() -> list:
    """Where a sender finds its destinations and its "already sent" record: the notifications file
    (the ``imagebump-notify`` Secret, :func:`messages_volume`) and the ledger's bucket (optional)."""
    return [
        Env(name="IMAGEBUMP_NOTIFY_FILE", value=f"{n.NOTIFY_DIR}/{n.NOTIFY_KEY}"),
        SecretEnv(
            name=notify_step.LEDGER_BUCKET_ENV,
            secret_name=n.NOTIFY_SECRET,
            secret_key="ledger-bucket",
            optional=True,
        ),
    ]


def messages_volume() -> SecretVolume:
    """The ``imagebump-notify`` Secret's ``notify.yaml``, read-only; optional (absent: nothing is sent)."""
    return SecretVolume(
        name="notify",
        secret_name=n.NOTIFY_SECRET,
        mount_path=n.NOTIFY_DIR,
        read_only=True,
        optional=True,
        default_mode=0o440,
        items=[m.KeyToPath(key=n.NOTIFY_KEY, path=n.NOTIFY_KEY)],
    )


def _notify_env() -> list:
    """What a sender reads: the notifications file, the Git token (GitHub as a destination), the
    ledger's bucket; each Secret optional (without ``imagebump-notify`` nothing is sent)."""
    file_env, bucket_env = messages_env()
    return [
        *c.base_env(),
        file_env,
        SecretEnv(
            name="IMAGEBUMP_GIT_TOKEN",
            secret_name=n.GIT_SECRET,
            secret_key=n.GIT_TOKEN_KEY,
            optional=True,
        ),
        bucket_env,
    ]


def _notify_volumes() -> list:
    return [c.tmp_volume(), messages_volume()]


def _counted() -> m.Metrics:
    """``notifications_total{result}`` from the step's outputs ``sent``, ``duplicate``, ``failed``."""
    return m.Metrics(
        prometheus=[
            m.Prometheus(
                name=METRIC,
                help=METRIC_HELP,
                labels=[m.MetricLabel(key="result", value=result)],
                when=f"{{{{status}}}} == Succeeded && {{{{outputs.parameters.{result}}}}} > 0",
                counter=m.Counter(value=f"{{{{outputs.parameters.{result}}}}}"),
            )
            for result in ("sent", "duplicate", "failed")
        ]
    )


def _sender(name: str, fn, deadline: int, **options):
    return script(
        name=name,
        constructor=c.step_runner(),
        image=c.IMAGE,
        service_account_name=n.SA_NOTIFY,
        outputs=c.outputs_of(NotifyOutput, {"sent": "0", "duplicate": "0", "failed": "0"}),
        env=_notify_env(),
        env_from=c.base_env_from(),
        volumes=_notify_volumes(),
        security_context=c.CONTAINER_SECURITY_CONTEXT,
        resources=c.resources(),
        active_deadline_seconds=deadline,
        metrics=_counted(),
        **options,
    )(fn)


def _notify_template():
    return _sender("notify", notify_step.run, notify_send.EXIT_HANDLER_DEADLINE)


def verifying_template():
    """``notify-verifying``: ``imagebump/live`` = ``pending`` on the commit verify-live watches
    (:mod:`steps.notify.verifying`); call inside the WorkflowTemplate's context."""
    # a pod lost before it sent (eviction, node loss) tries again; the step itself never fails
    return _sender(
        VERIFYING,
        notify_verifying.run,
        notify_send.VERIFYING_DEADLINE,
        retry_strategy=c.retry_transient(limit=2, deadline=120),
    )


def verifying_arguments(update_step: str) -> dict[str, str]:
    """notify-verifying's arguments after ``update_step`` (an ``update-target``) committed."""
    return {
        "target": "{{inputs.parameters.target}}",
        "commit_sha": f"{{{{steps.{update_step}.outputs.parameters.commit-sha}}}}",
        "event": "{{workflow.parameters.event}}",
        "workflow_name": "{{workflow.name}}",
    }


def exit_handler(*, backup: bool = False) -> Steps:
    """The ``exit-handler`` steps template; call inside the WorkflowTemplate's (CronWorkflow's)
    context and name :data:`EXIT_HANDLER` as its ``on_exit``."""
    notify = _notify_template()
    with Steps(name=EXIT_HANDLER) as handler:
        notify(
            name="notify",
            arguments={
                "event": "" if backup else "{{workflow.parameters.event}}",
                "workflow_name": "{{workflow.name}}",
                "workflow_status": "{{workflow.status}}",
                "workflow_failures": "{{workflow.failures}}",
                "backup": "true" if backup else "false",
            },
        )
    return handler

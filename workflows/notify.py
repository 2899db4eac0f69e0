"""The exit handler (``onExit``) of ``image-update`` and ``argocd-backup``: the ``notify`` step.

Argo runs ``spec.onExit`` after the entrypoint whatever its result, so a Workflow that failed still
notifies (argo-workflows docs/walk-through/exit-handlers.md). The handler passes the Workflow's
name, status and failures (``{{workflow.name}}``, ``{{workflow.status}}``, ``{{workflow.failures}}``)
and its ``event``; :func:`steps.notify.step.run` reads the steps' outputs from the Workflow's
``status.nodes`` (its ServiceAccount ``imagebump-notify`` may get Workflows in its namespace,
nothing else). Destinations' URLs and secrets come from the ``imagebump-notify`` Secret mounted as
a file, and the Git token from ``imagebump-git`` (for PR comments and commit statuses) as an
environment variable: never parameters. ``notifications_total{result}`` counts the step's outputs.
"""

from __future__ import annotations

from hera.workflows import Env, SecretEnv, SecretVolume, Steps, script
from hera.workflows import models as m

from steps.notify import step as notify_step
from workflows import common as c
from workflows import names as n

#: The name of the exit handler template (``spec.onExit``).
EXIT_HANDLER = "exit-handler"
METRIC = "imagebump_notifications_total"  # Prometheus: argo_workflows_imagebump_notifications_total
METRIC_HELP = "Notifications by result: sent, duplicate (already sent) or failed (after its retries)."


def _notify_template():
    return script(
        name="notify",
        constructor=c.step_runner(),
        image=c.IMAGE,
        service_account_name=n.SA_NOTIFY,
        outputs=c.outputs_of(notify_step.NotifyOutput, {"sent": "0", "duplicate": "0", "failed": "0"}),
        env=[
            *c.base_env(),
            Env(name="IMAGEBUMP_NOTIFY_FILE", value=f"{n.NOTIFY_DIR}/{n.NOTIFY_KEY}"),
            SecretEnv(
                name="IMAGEBUMP_GIT_TOKEN",
                secret_name=n.GIT_SECRET,
                secret_key=n.GIT_TOKEN_KEY,
                optional=True,
            ),
            SecretEnv(
                name=notify_step.LEDGER_BUCKET_ENV,
                secret_name=n.NOTIFY_SECRET,
                secret_key="ledger-bucket",
                optional=True,
            ),
        ],
        env_from=c.base_env_from(),
        volumes=[
            c.tmp_volume(),
            SecretVolume(
                name="notify",
                secret_name=n.NOTIFY_SECRET,
                mount_path=n.NOTIFY_DIR,
                read_only=True,
                optional=True,
                default_mode=0o440,
                items=[m.KeyToPath(key=n.NOTIFY_KEY, path=n.NOTIFY_KEY)],
            ),
        ],
        security_context=c.CONTAINER_SECURITY_CONTEXT,
        resources=c.resources(),
        active_deadline_seconds=300,
        metrics=m.Metrics(
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
        ),
    )(notify_step.run)


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

"""CronWorkflow ``argocd-backup``: daily, Argo CD's configuration → one encrypted archive in S3.

Wiring only; the work is :func:`steps.argocd_backup.export.run`. Settings (bucket, prefix, cluster,
namespace, KMS key, retention) come from the ConfigMap ``imagebump-backup`` as workflow parameters
(:func:`settings_configmap` says how the controller reads them, and what a missing ``bucket``
does). Runs as its own ServiceAccount (``imagebump-backup``: read-only in Argo CD's namespace, S3
write through IRSA).
"""

from __future__ import annotations

from hera.workflows import CronWorkflow, FieldEnv, Parameter, Steps, script
from hera.workflows import models as m

from steps.argocd_backup import export as backup_export
from steps.argocd_backup.settings import DEFAULTS, BackupSettings
from workflows import common as c
from workflows import names as n
from workflows import notify as exit_notify

NAME = n.ARGOCD_BACKUP
SCHEDULE = "17 3 * * *"  # 03:17 UTC daily: off the hour, when schedulers pile up

#: backup_export.run argument → key in the ConfigMap (same spelling, so the mapping is obvious).
SETTINGS = tuple(BackupSettings.model_fields)

#: Settings that must be set in the ConfigMap: no default, so a missing one fails the Workflow at start.
REQUIRED = ("bucket",)


def setting_defaults() -> dict[str, str]:
    """``valueFrom.default`` of each optional setting: :func:`steps.argocd_backup.export.run`'s own default."""
    return {name: str(DEFAULTS[name]) for name in SETTINGS if name not in REQUIRED}


def _setting(name: str) -> Parameter:
    default = setting_defaults().get(name)
    where = (
        f"key `{name}` of ConfigMap {n.BACKUP_CONFIGMAP} "
        f"(labelled {', '.join(f'{k}: {v}' for k, v in n.PARAMETER_CONFIGMAP_LABELS.items())})"
    )
    return Parameter(
        name=name,
        description=f"Required: {where}." if default is None else f"From {where}; default {default!r}.",
        value_from=m.ValueFrom(
            config_map_key_ref=m.ConfigMapKeySelector(name=n.BACKUP_CONFIGMAP, key=name),
            default=default,
        ),
    )


def _backup_export_template():
    return script(
        name="backup-export",
        constructor=c.step_runner(),
        image=c.IMAGE,
        service_account_name=n.SA_BACKUP,
        outputs=c.outputs_of(
            backup_export.BackupExportOutput, {"counts": "{}", "deleted": "[]", "suspect": "false"}
        ),
        # The pod's namespace, where the settings' ConfigMap is: a bad setting's error names it.
        env=[*c.base_env(), FieldEnv(name=backup_export.NAMESPACE_ENV, field_path="metadata.namespace")],
        env_from=c.base_env_from(),
        volumes=[c.tmp_volume()],
        security_context=c.CONTAINER_SECURITY_CONTEXT,
        resources=c.resources(memory_limit="1Gi"),
        retry_strategy=c.retry_transient(limit=3, deadline=1800),
        active_deadline_seconds=1800,
    )(backup_export.run)


def build() -> CronWorkflow:
    """The ``argocd-backup`` CronWorkflow (Hera object; ``.to_dict()`` is the manifest)."""
    with CronWorkflow(
        name=NAME,
        namespace=n.NAMESPACE,
        labels=dict(n.LABELS),
        annotations={"workflows.argoproj.io/description": "Daily export of Argo CD's configuration to S3."},
        schedules=[SCHEDULE],
        timezone="UTC",
        concurrency_policy="Forbid",
        starting_deadline_seconds=3600,
        successful_jobs_history_limit=3,
        failed_jobs_history_limit=7,
        entrypoint="main",
        on_exit=exit_notify.EXIT_HANDLER,
        arguments=[_setting(name) for name in SETTINGS],
        service_account_name=n.SA_BACKUP,
        active_deadline_seconds=3600,
        **c.housekeeping(),
    ) as cw:
        export = _backup_export_template()
        exit_notify.exit_handler(backup=True)
        with Steps(name="main"):
            export(
                name="backup-export",
                arguments={name: f"{{{{workflow.parameters.{name}}}}}" for name in SETTINGS},
            )
    return cw


def settings_configmap() -> dict:
    """The example ``imagebump-backup`` ConfigMap the CronWorkflow reads its parameters from.

    The controller reads those parameters only from a ConfigMap labelled
    ``workflows.argoproj.io/configmap-type: Parameter`` (:data:`workflows.names.PARAMETER_CONFIGMAP_LABELS`).
    Every setting but ``bucket`` has ``valueFrom.default`` = the step's own default, so a missing key
    (or a missing label) falls back to what ``imagebump backup`` would use. ``bucket`` has none on
    purpose: without it the controller fails the Workflow at start, before any pod, instead of a
    backup that writes somewhere unintended. Its message (argo-workflows v4.0.10
    workflow/controller/operator.go ``setGlobalParameters`` wrapping workflow/common/configmap.go
    ``GetConfigMapValue``) always names the parameter, the ConfigMap and the key; it names the label
    only when the label is what is missing::

        failed to set global parameters: failed to set global parameter bucket from configmap with
        name imagebump-backup and key bucket: ConfigMap 'imagebump-backup' does not have the key 'bucket'

    (unlabelled: "... ConfigMap 'imagebump-backup' does not exist. Please make sure it has the label
    workflows.argoproj.io/configmap-type: Parameter to be detectable by the controller"). A bucket that
    is set but empty, still the example's ``CHANGE-ME-…`` or not a bucket name fails the step (exit 2,
    not retried) with a message naming the key ``bucket`` of ConfigMap ``imagebump-backup`` and its
    namespace (:class:`steps.argocd_backup.settings.ConfigMapKeys`); so does any other bad setting.
    """
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": n.BACKUP_CONFIGMAP,
            "namespace": n.NAMESPACE,
            "labels": {**n.LABELS, **n.PARAMETER_CONFIGMAP_LABELS},
        },
        "data": {
            "bucket": "CHANGE-ME-imagebump-backups",
            **setting_defaults(),
        },
    }

"""CronWorkflow ``argocd-backup``: daily, Argo CD's configuration → one encrypted archive in S3.

Wiring only; the work is :func:`steps.backup_export.run`. Settings (bucket, prefix, cluster,
namespace, KMS key, retention) come from the ConfigMap ``imagebump-backup`` as workflow
parameters, so an operator changes them without re-rendering. Runs as its own ServiceAccount
(``imagebump-backup``: read-only in Argo CD's namespace, S3 write through IRSA).
"""

from __future__ import annotations

from hera.workflows import CronWorkflow, Parameter, Steps, script
from hera.workflows import models as m

from steps import backup_export
from workflows import common as c

NAME = "argocd-backup"
SCHEDULE = "17 3 * * *"  # 03:17 UTC daily: off the hour, when schedulers pile up

#: backup_export.run argument → key in the ConfigMap (same spelling, so the mapping is obvious).
SETTINGS = ("bucket", "prefix", "cluster", "namespace", "kms_key_id", "keep", "keep_days")


def _setting(name: str) -> Parameter:
    return Parameter(
        name=name,
        value_from=m.ValueFrom(config_map_key_ref=m.ConfigMapKeySelector(name=c.BACKUP_CONFIGMAP, key=name)),
    )


def _backup_export_template():
    return script(
        name="backup-export",
        constructor="runner",
        image=c.IMAGE,
        service_account_name=c.SA_BACKUP,
        outputs=c.outputs_of(backup_export.BackupExportOutput, {"counts": "{}", "deleted": "[]"}),
        env=c.base_env(),
        env_from=c.base_env_from(),
        volumes=[c.tmp_volume()],
        security_context=c.CONTAINER_SECURITY_CONTEXT,
        resources=c.resources(memory_limit="1Gi"),
        retry_strategy=c.retry_transient(limit=3),
        active_deadline_seconds=1800,
    )(backup_export.run)


def build() -> CronWorkflow:
    """The ``argocd-backup`` CronWorkflow (Hera object; ``.to_dict()`` is the manifest)."""
    with CronWorkflow(
        name=NAME,
        namespace=c.NAMESPACE,
        labels=dict(c.LABELS),
        annotations={"workflows.argoproj.io/description": "Daily export of Argo CD's configuration to S3."},
        schedules=[SCHEDULE],
        timezone="UTC",
        concurrency_policy="Forbid",
        starting_deadline_seconds=3600,
        successful_jobs_history_limit=3,
        failed_jobs_history_limit=7,
        entrypoint="main",
        arguments=[_setting(name) for name in SETTINGS],
        service_account_name=c.SA_BACKUP,
        security_context=c.POD_SECURITY_CONTEXT,
        active_deadline_seconds=3600,
        pod_gc=m.PodGC(strategy="OnPodSuccess", delete_delay_duration="10m"),
        ttl_strategy=m.TTLStrategy(seconds_after_success=86400, seconds_after_failure=7 * 86400),
        pod_metadata=m.Metadata(labels=dict(c.LABELS)),
    ) as cw:
        export = _backup_export_template()
        with Steps(name="main"):
            export(
                name="backup-export",
                arguments={name: f"{{{{workflow.parameters.{name}}}}}" for name in SETTINGS},
            )
    return cw


def settings_configmap() -> dict:
    """The example ``imagebump-backup`` ConfigMap the CronWorkflow reads its parameters from."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": c.BACKUP_CONFIGMAP, "namespace": c.NAMESPACE, "labels": dict(c.LABELS)},
        "data": {
            "bucket": "CHANGE-ME-imagebump-backups",
            "prefix": "argocd-backups",
            "cluster": "in-cluster",
            "namespace": c.ARGOCD_NAMESPACE,
            "kms_key_id": "",
            "keep": "30",
            "keep_days": "0",
        },
    }

"""backup-export: Argo CD's configuration → one sanitised, encrypted archive in S3.

Reads, through the Kubernetes API (in-cluster service account; kubeconfig outside):

- from Argo CD's namespace: AppProjects; every Secret upstream's ``argocd admin export`` takes —
  any ``argocd.argoproj.io/secret-type`` label whatever its value, the annotation ``managed-by:
  argocd.argoproj.io``, ``argocd-secret`` — plus Secrets labelled ``app.kubernetes.io/part-of:
  argocd`` and ``argocd-notifications-secret`` (one paged list, filtered here: RBAC and label
  selectors cannot select by annotation); the ConfigMaps ``argocd-cm``, ``argocd-rbac-cm``,
  ``argocd-cmd-params-cm``, ``argocd-ssh-known-hosts-cm``, ``argocd-tls-certs-cm``,
  ``argocd-gpg-keys-cm``, ``argocd-notifications-cm`` where present (by ``get``, so RBAC may
  restrict them by resourceNames);
- Applications from Argo CD's namespace and every namespace ``application.namespaces`` in
  ``argocd-cmd-params-cm`` enables, ApplicationSets likewise with
  ``applicationsetcontroller.namespaces`` (Argo CD's own matching: globs, ``/regex/``). Plain
  namespace names are listed one namespace at a time (a RoleBinding per namespace suffices); a
  pattern needs one list across all namespaces, filtered here (a ClusterRoleBinding to the
  ClusterRole ``imagebump-backup-app-reader``: get/list of these two kinds, nothing else; both
  grants are the README's overlay, "Back up and restore Argo CD").

Writes ``s3://BUCKET/PREFIX/CLUSTER/YYYY/MM/DD/HHMMSSZ.yaml.gz`` (gzip of a multi-document YAML,
see :mod:`steps.argocd_backup.archive`) with server-side encryption (``aws:kms`` with ``kms_key_id`` when given,
else ``AES256``) and a conditional put (``If-None-Match: *``): an existing key is never replaced;
a second backup in the same second becomes ``HHMMSSZ-1.yaml.gz``. Beside it,
``HHMMSSZ.index.json``: sha256 of the archive bytes, counts per kind, tool version, time, cluster,
namespace. Then retention: archives of this cluster beyond the newest ``keep`` and older than
``keep_days`` (0 disables either rule; an archive is kept when either rule keeps it) are deleted
with their index — never the one just written.

Gather → decide → act: :func:`steps.argocd_backup.live_objects.collect_live` reads the cluster; the archive bytes and
index (:mod:`steps.argocd_backup.archive`) are pure, and so is :func:`plan_backup`, the step's core: where the archive
goes and, given the listing of this cluster's archives after the write, which ones expire
(table-tested without S3 or Kubernetes); :mod:`steps.aws.s3` writes, lists and deletes. The settings
are one model, :class:`steps.argocd_backup.settings.BackupSettings`, whose defaults the step's parameters,
``imagebump backup`` and the CronWorkflow share.

It never skips: an empty namespace gives an archive with zero counts; a namespace it may not
read fails the backup (naming the grant), never a silently partial archive. S3 is reached with
boto3's standard configuration (``AWS_REGION``, credentials, ``AWS_ENDPOINT_URL``). Secret values
appear only inside the encrypted archive, never in logs or outputs.
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from steps.argocd_backup import archive, retention
from steps.argocd_backup.live_objects import collect_live
from steps.argocd_backup.settings import DEFAULTS, BackupSettings, ConfigMapKeys
from steps.aws import s3 as s3io
from steps.domain.errors import ConfigError
from steps.kube import api as kube
from steps.kube import client as kube_client
from steps.runtime.harness import imagebump_version, step_entry

log = logging.getLogger(__name__)
#: The name in this step's log records (the template is backup-export).
STEP_NAME = "backup-export"

#: The namespace the step's pod runs in (the template sets it from the pod's metadata.namespace):
#: the ConfigMap its settings come from is there.
NAMESPACE_ENV = "IMAGEBUMP_NAMESPACE"


@dataclass(frozen=True)
class Decision:
    """What :func:`plan_backup` says a backup writes and deletes."""

    key: str  # PREFIX/CLUSTER/YYYY/MM/DD/HHMMSSZ: s3.put_new adds -N (same second) and .yaml.gz
    expired: tuple[str, ...] = ()  # archive keys retention deletes (with their indexes), oldest first


def plan_backup(
    settings: BackupSettings, created: datetime, *, listing: Sequence[str] = (), written: str = ""
) -> Decision:
    """The pure core: where a backup made at ``created`` goes, and which archives expire.

    Before the write nothing is listed: the key alone matters. After it, ``listing`` holds the keys
    under this cluster's prefix and ``written`` the archive just written (never expired): an archive
    is kept while either rule keeps it (:func:`steps.argocd_backup.retention.select_expired`). No I/O.
    """
    expired = retention.select_expired(
        list(listing), keep=settings.keep, keep_days=settings.keep_days, now=created, protect=written
    )
    return Decision(key=retention.archive_key(settings.prefix_path, created), expired=tuple(expired))


class BackupExportOutput(BaseModel):
    url: str = Field(description="s3://BUCKET/KEY of the archive written")
    sha256: str
    counts: dict[str, int] = Field(default_factory=dict)
    deleted: list[str] = Field(default_factory=list)
    index_url: str = Field(default="", description="s3://BUCKET/KEY of the index beside the archive")


# The step's parameters are BackupSettings' fields, spelled out because Hera renders them from this
# signature (and the CronWorkflow passes each one); their defaults are the model's.
@step_entry
def run(
    bucket: str,
    prefix: str = DEFAULTS["prefix"],
    cluster: str = DEFAULTS["cluster"],
    namespace: str = DEFAULTS["namespace"],
    kms_key_id: str = DEFAULTS["kms_key_id"],
    keep: int = DEFAULTS["keep"],
    keep_days: int = DEFAULTS["keep_days"],
) -> BackupExportOutput:
    """The step: the pod's service account (kubeconfig outside a pod) and boto3's standard S3 client.

    Its parameters are the keys of the ConfigMap ``imagebump-backup`` (the ``argocd-backup``
    CronWorkflow passes them), so a bad one is reported as that ConfigMap's key, not as a flag.
    """
    import boto3

    settings = BackupSettings.parse(
        source=ConfigMapKeys(namespace=os.environ.get(NAMESPACE_ENV, "")),
        bucket=bucket,
        prefix=prefix,
        cluster=cluster,
        namespace=namespace,
        kms_key_id=kms_key_id,
        keep=keep,
        keep_days=keep_days,
    )
    api = kube_client.KubernetesApi.from_config()
    return export_backup(api=api, s3=boto3.client("s3"), settings=settings)


def export_backup(
    *,
    api: kube.KubeApi,
    s3: Any,
    settings: BackupSettings | None = None,
    now: Callable[[], datetime] | None = None,
    page_size: int = kube.DEFAULT_PAGE_SIZE,
    **values: Any,
) -> BackupExportOutput:
    """Collect, write (never overwriting) and prune; the body of :func:`run` and ``imagebump backup``.

    Args:
        api: the Kubernetes seam (:class:`steps.kube.client.KubernetesApi` in production).
        s3: a boto3 S3 client.
        settings: what to back up where; or give its fields as keywords (``bucket=…``), checked the
            same way before any I/O.
        now: clock seam (UTC); tests freeze it to prove same-second backups do not collide.
        page_size: ``limit`` of each list request.
    """
    if settings is None:
        settings = BackupSettings.parse(**values)
    elif values:
        raise TypeError(f"pass settings or its fields, not both ({', '.join(values)})")
    created = (now or (lambda: datetime.now(UTC)))().astimezone(UTC)
    # gather
    objects = collect(api, settings.namespace, page_size=page_size)
    # decide (pure): the bytes and where they go
    data = archive.build_archive(objects)
    bucket, kms = settings.bucket, settings.kms_key_id
    # act
    key = s3io.put_new(s3, bucket, plan_backup(settings, created).key, data, kms_key_id=kms)
    index_key = retention.index_key(key)
    index = archive.make_index(
        data,
        objects,
        cluster=settings.cluster,
        namespace=settings.namespace,
        created=created,
        version=imagebump_version(),
        archive=key.rpartition("/")[2],
    )
    written = s3io.put_if_absent(
        s3, bucket, index_key, archive.json_bytes(index), kms_key_id=kms, content_type="application/json"
    )
    if not written:  # an index without its archive: never replace it, but say so
        raise ConfigError(
            f"s3://{bucket}/{index_key} already exists although its archive did not; "
            f"the archive s3://{bucket}/{key} has no index — inspect the bucket"
        )
    log.info(
        "wrote s3://%s/%s (%d bytes, sha256 %s, %s)",
        bucket,
        key,
        len(data),
        index["sha256"],
        ", ".join(f"{k}={v}" for k, v in index["counts"].items()),
    )
    # retention: gather the listing (only when a rule is on), decide what expired, delete it
    listing = retention.listing(
        s3, bucket, settings.prefix_path, keep=settings.keep, keep_days=settings.keep_days
    )
    expired = plan_backup(settings, created, listing=listing, written=key).expired
    deleted = retention.delete(s3, bucket, expired, listing)
    return BackupExportOutput(
        url=f"s3://{bucket}/{key}",
        sha256=index["sha256"],
        counts=index["counts"],
        deleted=deleted,
        index_url=f"s3://{bucket}/{index_key}",
    )


def collect(api: kube.KubeApi, namespace: str, *, page_size: int = kube.DEFAULT_PAGE_SIZE) -> list[dict]:
    """Every object a backup holds, sanitised, in archive order (kind, namespace, name)."""
    live = collect_live(api, namespace, page_size=page_size)
    return sorted((archive.sanitise(o) for o in live), key=archive.sort_key)

"""backup-export: Argo CD's configuration → one sanitised, encrypted archive in S3, then retention.
What users see of it (what is taken, the grants, suspect archives, retention): docs/backup-restore.md.

Reads, through the Kubernetes API: Argo CD's AppProjects, Secrets and ConfigMaps (what upstream's
``argocd admin export`` takes) and the Applications and ApplicationSets of every namespace Argo CD
watches (:mod:`steps.argocd_backup.live_objects`). A cluster with no Argo CD writes nothing and fails
(exit 2); a namespace it may not read fails the backup, never a silently partial archive.
Writes ``s3://BUCKET/PREFIX/CLUSTER/YYYY/MM/DD/HHMMSSZ[-N].yaml.gz`` (server-side encrypted, a
conditional put: never replaces a key) and its ``.index.json``, then deletes what retention expires.
Secret values appear only inside the encrypted archive.

Gather → decide → act: :func:`steps.argocd_backup.live_objects.collect_live` reads; the archive and
index (:mod:`steps.argocd_backup.archive`) and :func:`steps.argocd_backup.decide.decide` (the key,
which archives expire: :mod:`steps.argocd_backup.retention`) are pure; :mod:`steps.aws.s3` writes,
lists and deletes. Settings: :class:`steps.argocd_backup.settings.BackupSettings`.
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from steps.argocd_backup import archive, retention, retention_s3
from steps.argocd_backup.decide import decide
from steps.argocd_backup.live_objects import collect_live, namespace_exists
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


def missing_argocd(api: kube.KubeApi, namespace: str) -> list[str]:
    """What of Argo CD is missing in ``namespace`` (its ``argocd-cm`` and ``argocd-secret``, or the
    namespace itself); empty when both are there. Reads two objects (and the namespace when they
    are missing), writes nothing."""
    missing = [
        f"{resource.kind} {name}"
        for resource, name in ((kube.CONFIG_MAP, "argocd-cm"), (kube.SECRET, archive.ARGOCD_SECRET))
        if api.get(resource, namespace, name) is None
    ]
    if missing and namespace_exists(api, namespace) is False:
        return [f"namespace {namespace}"]
    return missing


class BackupExportOutput(BaseModel):
    url: str = Field(description="s3://BUCKET/KEY of the archive written")
    sha256: str
    counts: dict[str, int] = Field(default_factory=dict)
    deleted: list[str] = Field(default_factory=list)
    index_url: str = Field(default="", description="s3://BUCKET/KEY of the index beside the archive")
    suspect: bool = Field(
        default=False,
        description="the archive holds far fewer objects than the newest healthy one before it "
        "(written, marked in its index; retention keeps the older archives)",
    )
    suspect_reason: str = Field(default="", description="why the archive is suspect")


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


class _Indexes:
    """The indexes of one bucket's archives, each read once (None: missing or unreadable)."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self._s3, self._bucket = s3, bucket
        self.cache: dict[str, dict[str, Any] | None] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        if key not in self.cache:
            self.cache[key] = retention_s3.read_index(self._s3, self._bucket, key)
        return self.cache[key]


def export_backup(
    *,
    api: kube.KubeApi,
    s3: Any,
    settings: BackupSettings | None = None,
    now: Callable[[], datetime] | None = None,
    page_size: int = kube.DEFAULT_PAGE_SIZE,
    accept_shrink: bool = False,
    **values: Any,
) -> BackupExportOutput:
    """Collect, write (never overwriting) and prune; the body of :func:`run` and ``imagebump backup``.

    Refuses (ConfigError, nothing written) when Argo CD is not there: its namespace, ``argocd-cm``
    or ``argocd-secret`` missing — a wrong ``namespace``, a wrong context, an Argo CD just deleted.
    A backup holding far fewer objects than the newest healthy archive before it
    (:func:`steps.argocd_backup.retention.shrink_reason`) is written, marked ``suspect`` in its index and logged
    as a warning; retention then keeps every older archive until ``keep`` healthy ones follow it.

    Args:
        api: the Kubernetes seam (:class:`steps.kube.client.KubernetesApi` in production).
        s3: a boto3 S3 client.
        settings: what to back up where; or give its fields as keywords (``bucket=…``), checked the
            same way before any I/O.
        now: clock seam (UTC); tests freeze it to prove same-second backups do not collide.
        page_size: ``limit`` of each list request.
        accept_shrink: the operator confirms a smaller Argo CD is the new normal: the archive is
            not marked suspect (``imagebump backup --accept-shrink``).
    """
    if settings is None:
        settings = BackupSettings.parse(**values)
    elif values:
        raise TypeError(f"pass settings or its fields, not both ({', '.join(values)})")
    created = (now or (lambda: datetime.now(UTC)))().astimezone(UTC)
    require_argocd(api, settings.namespace)
    objects = collect(api, settings.namespace, page_size=page_size)
    indexes = _Indexes(s3, settings.bucket)
    reason = "" if accept_shrink else _shrink(s3, settings, indexes, archive.counts(objects))
    key, index_key, index = _write(s3, settings, created, objects, reason)
    indexes.cache[key] = index
    deleted = _retain(s3, settings, created, key, indexes)
    return BackupExportOutput(
        url=f"s3://{settings.bucket}/{key}",
        sha256=index["sha256"],
        counts=index["counts"],
        deleted=deleted,
        index_url=f"s3://{settings.bucket}/{index_key}",
        suspect=bool(reason),
        suspect_reason=reason,
    )


def require_argocd(api: kube.KubeApi, namespace: str) -> None:
    """ConfigError, nothing written, unless Argo CD is there: an empty list is a 200 too, so a wrong
    namespace or context would otherwise give a zero-object archive that rotates the good ones out."""
    missing = missing_argocd(api, namespace)
    if missing:
        raise ConfigError(
            f"found no Argo CD to back up in namespace {namespace} of {kube.describe(api)}: "
            f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing; nothing was written. "
            "Pass the namespace Argo CD runs in (--namespace, or the ConfigMap key `namespace`) and "
            "the cluster it runs on (--context)"
        )


def _shrink(s3: Any, settings: BackupSettings, indexes: _Indexes, counts: dict[str, int]) -> str:
    """Why this backup looks like a broken Argo CD next to the newest healthy archive ("" if not)."""
    prefix = settings.prefix_path
    for key in retention.archives(s3io.list_keys(s3, settings.bucket, prefix), prefix):
        index = indexes.get(key)
        if index is not None and not index.get(retention.SUSPECT):
            return retention.shrink_reason(counts, index.get("counts") or {}, key.rpartition("/")[2])
    return ""


def _write(
    s3: Any, settings: BackupSettings, created: datetime, objects: list[dict], reason: str
) -> tuple[str, str, dict[str, Any]]:
    """Write the archive (never overwriting), then its index (marked suspect with ``reason``);
    returns the archive's key, the index's key and the index."""
    bucket, kms = settings.bucket, settings.kms_key_id
    data = archive.build_archive(objects)
    key = s3io.put_new(s3, bucket, decide(settings, created).key, data, kms_key_id=kms)
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
    if reason:  # a healthy archive's index is as before: no such fields
        index[retention.SUSPECT] = True
        index[retention.SUSPECT_REASON] = reason
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
    if reason:
        log.warning(
            "suspect backup s3://%s/%s: %s; it is kept and marked suspect in its index, and retention "
            "keeps every older archive until %d healthy backups follow it (if Argo CD really shrank, "
            "run `imagebump backup --accept-shrink` once)",
            bucket,
            key,
            reason,
            max(settings.keep, 1),
            extra={"fields": {"event": "backup-suspect", "suspect_reason": reason}},
        )
    return key, index_key, index


def _retain(
    s3: Any, settings: BackupSettings, created: datetime, written: str, indexes: _Indexes
) -> list[str]:
    """Retention: gather the listing and the indexes (only when a rule is on), decide, delete."""
    bucket, prefix = settings.bucket, settings.prefix_path
    listing = retention_s3.listing(s3, bucket, prefix, keep=settings.keep, keep_days=settings.keep_days)
    suspect = {k: retention.is_suspect(indexes.get(k)) for k in retention.archives(listing, prefix)}
    expired = decide(settings, created, listing=listing, written=written, suspect=suspect).expired
    return retention_s3.delete(s3, bucket, expired, listing)


def collect(api: kube.KubeApi, namespace: str, *, page_size: int = kube.DEFAULT_PAGE_SIZE) -> list[dict]:
    """Every object a backup holds, sanitised, in archive order (kind, namespace, name)."""
    live = collect_live(api, namespace, page_size=page_size)
    return sorted((archive.sanitise(o) for o in live), key=archive.sort_key)

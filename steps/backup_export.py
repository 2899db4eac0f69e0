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
see :mod:`steps.archive`) with server-side encryption (``aws:kms`` with ``kms_key_id`` when given,
else ``AES256``) and a conditional put (``If-None-Match: *``): an existing key is never replaced;
a second backup in the same second becomes ``HHMMSSZ-1.yaml.gz``. Beside it,
``HHMMSSZ.index.json``: sha256 of the archive bytes, counts per kind, tool version, time, cluster,
namespace. Then retention: archives of this cluster beyond the newest ``keep`` and older than
``keep_days`` (0 disables either rule; an archive is kept when either rule keeps it) are deleted
with their index — never the one just written.

It never skips: an empty namespace gives an archive with zero counts; a namespace it may not
read fails the backup (naming the grant), never a silently partial archive. S3 is reached with
boto3's standard configuration (``AWS_REGION``, credentials, ``AWS_ENDPOINT_URL``). Secret values
appear only inside the encrypted archive, never in logs or outputs.
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from steps import archive, kube
from steps._runtime import step_entry
from steps.errors import ConfigError, PermissionDeniedError, TransientError

log = logging.getLogger(__name__)

_MAX_SUFFIX = 100
_ARCHIVE_RE = re.compile(r"(\d{4})/(\d{2})/(\d{2})/(\d{2})(\d{2})(\d{2})Z(?:-(\d+))?\.yaml\.gz$")


class BackupExportOutput(BaseModel):
    url: str = Field(description="s3://BUCKET/KEY of the archive written")
    sha256: str
    counts: dict[str, int] = Field(default_factory=dict)
    deleted: list[str] = Field(default_factory=list)
    index_url: str = Field(default="", description="s3://BUCKET/KEY of the index beside the archive")


@step_entry
def run(
    bucket: str,
    prefix: str = "argocd-backups",
    cluster: str = "in-cluster",
    namespace: str = "argocd",
    kms_key_id: str = "",
    keep: int = 30,
    keep_days: int = 0,
) -> BackupExportOutput:
    """The step: the pod's service account (kubeconfig outside a pod) and boto3's standard S3 client."""
    import boto3

    api = kube.KubernetesApi.from_config()
    return export_backup(
        api=api,
        s3=boto3.client("s3"),
        bucket=bucket,
        prefix=prefix,
        cluster=cluster,
        namespace=namespace,
        kms_key_id=kms_key_id,
        keep=keep,
        keep_days=keep_days,
    )


def export_backup(
    *,
    api: kube.KubeApi,
    s3: Any,
    bucket: str,
    prefix: str = "argocd-backups",
    cluster: str = "in-cluster",
    namespace: str = "argocd",
    kms_key_id: str = "",
    keep: int = 30,
    keep_days: int = 0,
    now: Callable[[], datetime] | None = None,
    page_size: int = kube.DEFAULT_PAGE_SIZE,
) -> BackupExportOutput:
    """Collect, write (never overwriting) and prune; the body of :func:`run` and ``imagebump backup``.

    Args:
        api: the Kubernetes seam (:class:`steps.kube.KubernetesApi` in production).
        s3: a boto3 S3 client.
        now: clock seam (UTC); tests freeze it to prove same-second backups do not collide.
        page_size: ``limit`` of each list request.
    """
    _validate(
        bucket=bucket, prefix=prefix, cluster=cluster, namespace=namespace, keep=keep, keep_days=keep_days
    )
    created = (now or (lambda: datetime.now(UTC)))().astimezone(UTC)
    objects = collect(api, namespace, page_size=page_size)
    data = archive.build_archive(objects)
    base = f"{_prefix_path(prefix, cluster)}{created:%Y/%m/%d/%H%M%S}Z"
    key = _put_new(s3, bucket, base, data, kms_key_id=kms_key_id)
    index_key = key[: -len(".yaml.gz")] + ".index.json"
    from imagebump import __version__

    index = archive.make_index(
        data,
        objects,
        cluster=cluster,
        namespace=namespace,
        created=created,
        version=__version__,
        archive=key.rpartition("/")[2],
    )
    try:
        _put(
            s3,
            bucket,
            index_key,
            archive.json_bytes(index),
            kms_key_id=kms_key_id,
            content_type="application/json",
        )
    except _Taken:  # an index without its archive: never replace it, but say so
        raise ConfigError(
            f"s3://{bucket}/{index_key} already exists although its archive did not; "
            f"the archive s3://{bucket}/{key} has no index — inspect the bucket"
        ) from None
    log.info(
        "wrote s3://%s/%s (%d bytes, sha256 %s, %s)",
        bucket,
        key,
        len(data),
        index["sha256"],
        ", ".join(f"{k}={v}" for k, v in index["counts"].items()),
    )
    deleted = prune(
        s3, bucket, _prefix_path(prefix, cluster), keep=keep, keep_days=keep_days, now=created, protect=key
    )
    return BackupExportOutput(
        url=f"s3://{bucket}/{key}",
        sha256=index["sha256"],
        counts=index["counts"],
        deleted=deleted,
        index_url=f"s3://{bucket}/{index_key}",
    )


#: The ClusterRole (get/list of applications and applicationsets only) the README's overlay adds:
#: bound per namespace by a RoleBinding, or cluster-wide when the namespace settings hold patterns.
APP_READER_ROLE = "imagebump-backup-app-reader"
_README = "README, 'Back up and restore Argo CD'"


def collect(api: kube.KubeApi, namespace: str, *, page_size: int = kube.DEFAULT_PAGE_SIZE) -> list[dict]:
    """Every object a backup holds, sanitised, in archive order (kind, namespace, name)."""
    live = collect_live(api, namespace, page_size=page_size)
    return sorted((archive.sanitise(o) for o in live), key=archive.sort_key)


def collect_live(
    api: kube.KubeApi,
    namespace: str,
    *,
    page_size: int = kube.DEFAULT_PAGE_SIZE,
    kinds: tuple[str, ...] = tuple(kube.RESOURCES),
    cmd_params: dict | None = None,
) -> list[dict]:
    """The live Argo CD objects of ``kinds`` a backup takes, as the API server returns them.

    ``cmd_params`` (an argocd-cmd-params-cm) decides the other namespaces of Applications and
    ApplicationSets; by default the live one is read. Restore uses this to find what ``--prune``
    may delete, with the archive's argocd-cmd-params-cm.
    """
    found: list[dict] = []
    live_params = None
    need_params = cmd_params is None and bool({"Application", "ApplicationSet"} & set(kinds))
    for name in archive.CONFIG_MAPS:
        if "ConfigMap" not in kinds and not (need_params and name == archive.CMD_PARAMS_CONFIG_MAP):
            continue
        obj = api.get(kube.CONFIG_MAP, namespace, name)
        if obj is None:
            log.info("ConfigMap %s/%s not present; not in this backup", namespace, name)
            continue
        if name == archive.CMD_PARAMS_CONFIG_MAP:
            live_params = obj
        if "ConfigMap" in kinds:
            found.append(obj)
    params = cmd_params if cmd_params is not None else live_params
    if "Secret" in kinds:
        found.extend(
            o
            for o in kube.list_all(api, kube.SECRET, namespace, page_size=page_size)
            if archive.is_argocd_secret(o)
        )
    if "AppProject" in kinds:
        found.extend(kube.list_all(api, kube.APP_PROJECT, namespace, page_size=page_size))
    for resource, setting in (
        (kube.APPLICATION_SET, archive.APPLICATIONSET_NAMESPACES_KEY),
        (kube.APPLICATION, archive.APPLICATION_NAMESPACES_KEY),
    ):
        if resource.kind in kinds:
            patterns = archive.namespace_patterns(params, setting)
            found.extend(_list_enabled(api, resource, namespace, patterns, setting, page_size))
    return found


def _list_enabled(
    api: kube.KubeApi,
    resource: kube.Resource,
    namespace: str,
    patterns: list[str],
    setting: str,
    page_size: int,
) -> list[dict]:
    """``resource`` in Argo CD's namespace and every namespace ``patterns`` enable."""
    if all(archive.is_literal(p) for p in patterns):
        out: list[dict] = []
        for ns in dict.fromkeys([namespace, *patterns]):
            try:
                out.extend(kube.list_all(api, resource, ns, page_size=page_size))
            except PermissionDeniedError as exc:
                if ns == namespace:
                    raise
                raise PermissionDeniedError(
                    f"{exc}. {setting} in {archive.CMD_PARAMS_CONFIG_MAP} has Argo CD manage "
                    f"{resource.plural} in namespace {ns}; for the backup-export step bind ClusterRole "
                    f"{APP_READER_ROLE} there with a RoleBinding ({_README})"
                ) from None
        return out
    try:
        every = list(kube.list_all(api, resource, None, page_size=page_size))
    except PermissionDeniedError as exc:
        shown = ", ".join(p for p in patterns if not archive.is_literal(p))
        raise PermissionDeniedError(
            f"{exc}. {setting} in {archive.CMD_PARAMS_CONFIG_MAP} holds patterns ({shown}), which RBAC "
            f"cannot grant namespace by namespace: bind ClusterRole {APP_READER_ROLE} (get/list of "
            f"applications and applicationsets, nothing else) with a ClusterRoleBinding, or list the "
            f"namespaces by name and bind it with a RoleBinding in each ({_README})"
        ) from None
    return [
        o
        for o in every
        if archive.namespace_enabled(
            (o.get("metadata") or {}).get("namespace") or "", namespace, patterns, setting=setting
        )
    ]


def _validate(*, bucket: str, prefix: str, cluster: str, namespace: str, keep: int, keep_days: int) -> None:
    if not re.fullmatch(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]", bucket or ""):
        raise ConfigError(f"bucket {bucket!r} is not a valid S3 bucket name; pass --bucket NAME")
    for label, value in (("prefix", prefix), ("cluster", cluster)):
        parts = value.strip("/").split("/") if value.strip("/") else []
        if (label == "cluster" and not parts) or any(p in ("", ".", "..") for p in parts):
            raise ConfigError(f"{label} {value!r} is not a usable S3 key segment")
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", namespace or ""):
        raise ConfigError(f"namespace {namespace!r} is not a valid Kubernetes namespace name")
    if keep < 0 or keep_days < 0:
        raise ConfigError(f"keep ({keep}) and keep-days ({keep_days}) must be 0 (off) or positive")


def _prefix_path(prefix: str, cluster: str) -> str:
    return "/".join(p for p in (prefix.strip("/"), cluster.strip("/")) if p) + "/"


def _put_new(s3: Any, bucket: str, base: str, data: bytes, *, kms_key_id: str) -> str:
    """Put ``data`` at ``base.yaml.gz``, else ``base-1.yaml.gz``…: the first name nobody holds."""
    for n in range(_MAX_SUFFIX):
        key = f"{base}{'' if n == 0 else f'-{n}'}.yaml.gz"
        try:
            _put(s3, bucket, key, data, kms_key_id=kms_key_id, content_type="application/gzip")
            return key
        except _Taken:
            log.info("s3://%s/%s exists; trying the next name", bucket, key)
    raise TransientError(f"s3://{bucket}/{base}.yaml.gz and {_MAX_SUFFIX - 1} successors exist; retry later")


class _Taken(Exception):
    """The key exists (the conditional put lost)."""


def _put(s3: Any, bucket: str, key: str, body: bytes, *, kms_key_id: str, content_type: str) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    extra: dict[str, str] = (
        {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key_id}
        if kms_key_id
        else {"ServerSideEncryption": "AES256"}
    )
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type, IfNoneMatch="*", **extra)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
            raise _Taken() from None
        raise s3_error(exc, bucket=bucket, key=key, action="write", kms_key_id=kms_key_id) from None
    except BotoCoreError as exc:
        raise TransientError(f"cannot write s3://{bucket}/{key}: {type(exc).__name__}; retry later") from None


def s3_error(exc: Exception, *, bucket: str, key: str = "", action: str, kms_key_id: str = "") -> Exception:
    """A botocore ClientError as our error, naming the bucket (or the KMS key) and the fix."""
    error = getattr(exc, "response", {}).get("Error", {})
    code = str(error.get("Code", ""))
    message = str(error.get("Message", ""))
    status = getattr(exc, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    where = f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
    if code == "NoSuchBucket":
        return ConfigError(
            f"cannot {action} {where}: bucket {bucket!r} does not exist (NoSuchBucket); "
            "create it or pass the right --bucket"
        )
    if code == "NoSuchKey" or code == "404":
        return ConfigError(f"cannot {action} {where}: no such object (check the URL)")
    if code.startswith("KMS") or "kms" in message.lower() or (code == "InvalidArgument" and kms_key_id):
        key_text = f"KMS key {kms_key_id!r}" if kms_key_id else "the bucket's KMS key"
        return PermissionDeniedError(
            f"cannot {action} {where}: {key_text} is not usable ({code}); check the key exists, is "
            "enabled, and the caller may kms:GenerateDataKey and kms:Decrypt with it"
        )
    if (
        code in ("AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch")
        or status == 403
    ):
        perm = {
            "write": "s3:PutObject",
            "read": "s3:GetObject",
            "list": "s3:ListBucket",
            "delete": "s3:DeleteObject",
        }.get(action, "access")
        return PermissionDeniedError(
            f"cannot {action} {where}: access denied ({code}); grant {perm} on "
            f"bucket {bucket!r} to the role imagebump runs as"
        )
    if code in ("SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout") or status >= 500:
        return TransientError(f"cannot {action} {where}: S3 answered {code or status}; retry later")
    return ConfigError(f"cannot {action} {where}: {code or status}")


def _archive_time(key: str) -> tuple[datetime, int] | None:
    m = _ARCHIVE_RE.search(key)
    if not m:
        return None
    y, mo, d, h, mi, s, n = m.groups()
    return datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=UTC), int(n or 0)


def select_expired(keys: list[str], *, keep: int, keep_days: int, now: datetime, protect: str) -> list[str]:
    """Archive keys to delete (oldest first); pure. ``protect`` is never among them."""
    dated = sorted(((t, key) for key in keys if (t := _archive_time(key))), reverse=True)
    if keep <= 0 and keep_days <= 0:
        return []
    cutoff = now - timedelta(days=keep_days) if keep_days > 0 else None
    expired = []
    for i, ((when, _), key) in enumerate(dated):
        kept_by_count = keep > 0 and i < keep
        kept_by_age = cutoff is not None and when >= cutoff
        if key == protect or kept_by_count or kept_by_age:
            continue
        expired.append(key)
    return list(reversed(expired))


def prune(
    s3: Any, bucket: str, prefix: str, *, keep: int, keep_days: int, now: datetime, protect: str
) -> list[str]:
    """Delete expired archives (and their indexes) under ``prefix``; the s3:// URLs deleted."""
    from botocore.exceptions import ClientError

    if keep <= 0 and keep_days <= 0:
        return []
    keys: list[str] = []
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(o["Key"] for o in page.get("Contents", []))
        expired = select_expired(keys, keep=keep, keep_days=keep_days, now=now, protect=protect)
        deleted = []
        for key in expired:
            index_key = key[: -len(".yaml.gz")] + ".index.json"
            s3.delete_object(Bucket=bucket, Key=key)
            if index_key in keys:
                s3.delete_object(Bucket=bucket, Key=index_key)
            log.info("retention: deleted s3://%s/%s", bucket, key)
            deleted.append(f"s3://{bucket}/{key}")
    except ClientError as exc:
        raise s3_error(exc, bucket=bucket, key=prefix, action="list" if not keys else "delete") from None
    return deleted

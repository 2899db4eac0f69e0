"""S3 as backup-export and restore use it: conditional puts, reads, lists, deletes, and S3's errors
turned into ours (naming the bucket or KMS key and the fix).

Shared by :mod:`steps.argocd_backup.export` (writes, retention) and :mod:`steps.argocd_backup.restore` (reads), so
neither imports the other. Every function takes a boto3 S3 client (``boto3.client("s3")``: its
standard configuration — ``AWS_REGION``, credentials, ``AWS_ENDPOINT_URL``). botocore is imported
where it is used, so importing this module stays cheap. Imports only :mod:`steps.domain.errors`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from steps.domain.errors import ConfigError, PermissionDeniedError, TransientError

log = logging.getLogger(__name__)

#: How many names ``BASE-N.yaml.gz`` a backup tries when the same second already holds archives.
MAX_SUFFIX = 100
#: The codes S3 answers a conditional put (``If-None-Match: *``) with when the key exists.
_TAKEN_CODES = ("PreconditionFailed", "412")
#: S3's answer when a conflicting write of the same key is in flight: not "it exists" — "retry the
#: upload" (S3 API PutObject ``If-None-Match``: "If a conflicting operation occurs during the upload
#: S3 returns a 409 ConditionalRequestConflict response. On a 409 failure you should retry").
_CONFLICT_CODES = ("ConditionalRequestConflict", "409")
#: Waits (seconds) before a conditional put that met a conflict is tried again.
CONFLICT_WAITS = (0.2, 0.5, 1.0)
_sleep = time.sleep  # tests replace it


def split_url(url: str) -> tuple[str, str]:
    """``s3://BUCKET/KEY`` → (bucket, key); ConfigError naming the URL when either part is missing."""
    rest = url[len("s3://") :] if url.startswith("s3://") else ""
    bucket, _, key = rest.partition("/")
    if not bucket or not key:
        raise ConfigError(f"{url!r} is not an s3://BUCKET/KEY URL of a backup archive")
    return bucket, key


def encryption(kms_key_id: str) -> dict[str, str]:
    """Server-side encryption arguments: SSE-KMS with ``kms_key_id`` when given, else none, so the
    bucket's default encryption applies. S3 applies a bucket's default only to a put that names no
    encryption (S3 API ``ServerSideEncryptionRule``), so naming SSE-S3 here would override a bucket
    whose default is SSE-KMS, and fail where its policy requires KMS; and S3 encrypts every new object
    with SSE-S3 at least since January 2023."""
    if kms_key_id:
        return {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key_id}
    return {}


def put_if_absent(s3: Any, bucket: str, key: str, body: bytes, *, kms_key_id: str, content_type: str) -> bool:
    """Write ``key`` unless it exists (``If-None-Match: *``): True written, False already there."""
    from botocore.exceptions import BotoCoreError, ClientError

    for wait in (*CONFLICT_WAITS, None):
        try:
            s3.put_object(
                Bucket=bucket,
                Key=key,
                Body=body,
                ContentType=content_type,
                IfNoneMatch="*",
                **encryption(kms_key_id),
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in _TAKEN_CODES:
                return False
            if code in _CONFLICT_CODES:
                if wait is None:
                    raise TransientError(
                        f"cannot write s3://{bucket}/{key}: another write of it kept conflicting (409); retry later"
                    ) from None
                _sleep(wait)
                continue
            raise s3_error(exc, bucket=bucket, key=key, action="write", kms_key_id=kms_key_id) from None
        except BotoCoreError as exc:
            raise TransientError(
                f"cannot write s3://{bucket}/{key}: {type(exc).__name__}; retry later"
            ) from None
        return True
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def put_new(s3: Any, bucket: str, base: str, data: bytes, *, kms_key_id: str) -> str:
    """Put ``data`` at ``base.yaml.gz``, else ``base-1.yaml.gz``…: the first name nobody holds."""
    for n in range(MAX_SUFFIX):
        key = f"{base}{'' if n == 0 else f'-{n}'}.yaml.gz"
        if put_if_absent(s3, bucket, key, data, kms_key_id=kms_key_id, content_type="application/gzip"):
            return key
        log.info("s3://%s/%s exists; trying the next name", bucket, key)
    raise TransientError(f"s3://{bucket}/{base}.yaml.gz and {MAX_SUFFIX - 1} successors exist; retry later")


def read(s3: Any, bucket: str, key: str, *, missing_ok: bool = False) -> bytes | None:
    """The object's bytes; None when it does not exist and ``missing_ok``."""
    from botocore.exceptions import ClientError

    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        if missing_ok and exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise s3_error(exc, bucket=bucket, key=key, action="read") from None


def list_keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    """Every key under ``prefix`` (all pages)."""
    from botocore.exceptions import ClientError

    keys: list[str] = []
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(o["Key"] for o in page.get("Contents", []))
    except ClientError as exc:
        raise s3_error(exc, bucket=bucket, key=prefix, action="list") from None
    return keys


def delete(s3: Any, bucket: str, key: str) -> None:
    from botocore.exceptions import ClientError

    try:
        s3.delete_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        raise s3_error(exc, bucket=bucket, key=key, action="delete") from None


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

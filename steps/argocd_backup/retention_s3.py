"""Backup retention's S3 side: list one cluster's keys, read an archive's index, delete the expired
archives with their indexes. Which archives expire is :func:`steps.argocd_backup.retention.select_expired`
(pure). Imports :mod:`steps.aws.s3`, :mod:`steps.argocd_backup.archive`,
:mod:`steps.argocd_backup.retention` and :mod:`steps.domain.errors` only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from steps.argocd_backup import archive
from steps.argocd_backup.retention import index_key
from steps.aws import s3 as s3io
from steps.domain.errors import ConfigError

log = logging.getLogger(__name__)


def read_index(s3: Any, bucket: str, key: str) -> dict[str, Any] | None:
    """The index beside archive ``key``; None when it is missing or unreadable (logged)."""
    where = f"s3://{bucket}/{index_key(key)}"
    data = s3io.read(s3, bucket, index_key(key), missing_ok=True)
    if data is None:
        log.warning(
            "archive s3://%s/%s has no index (%s); it does not count as a healthy backup", bucket, key, where
        )
        return None
    try:
        return archive.parse_index(data, where)
    except ConfigError as exc:
        log.warning("%s; archive s3://%s/%s does not count as a healthy backup", exc, bucket, key)
        return None


def listing(s3: Any, bucket: str, prefix: str, *, keep: int, keep_days: int) -> list[str]:
    """Every key under ``prefix`` when a retention rule is on; nothing is listed when both are off."""
    if keep <= 0 and keep_days <= 0:
        return []
    return s3io.list_keys(s3, bucket, prefix)


def delete(s3: Any, bucket: str, expired: Sequence[str], keys: Sequence[str]) -> list[str]:
    """Delete the ``expired`` archives and those of their indexes ``keys`` holds; the s3:// URLs deleted."""
    present = set(keys)
    deleted = []
    for key in expired:
        s3io.delete(s3, bucket, key)
        if index_key(key) in present:
            s3io.delete(s3, bucket, index_key(key))
        log.info("retention: deleted s3://%s/%s", bucket, key)
        deleted.append(f"s3://{bucket}/{key}")
    return deleted

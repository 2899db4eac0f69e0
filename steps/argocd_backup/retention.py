"""Backup retention: which archives of one cluster to delete (pure), listing and deleting them (S3).

Archives live at ``PREFIX/CLUSTER/YYYY/MM/DD/HHMMSSZ[-N].yaml.gz`` with ``….index.json`` beside
them. An archive is kept when EITHER rule keeps it — among the newest ``keep``, or newer than
``keep_days`` days (0 disables a rule; both 0 keeps everything) — and the archive just written is
never deleted. Keys that do not look like archives (someone else's files) are never touched.
Imports :mod:`steps.aws.s3` and :mod:`steps.domain.errors` only.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from steps.aws import s3 as s3io

log = logging.getLogger(__name__)

_ARCHIVE_RE = re.compile(r"(\d{4})/(\d{2})/(\d{2})/(\d{2})(\d{2})(\d{2})Z(?:-(\d+))?\.yaml\.gz$")


def archive_key(prefix_path: str, created: datetime) -> str:
    """``PREFIX/CLUSTER/YYYY/MM/DD/HHMMSSZ`` (no suffix, no extension) of an archive made at ``created``."""
    return f"{prefix_path}{created.astimezone(UTC):%Y/%m/%d/%H%M%S}Z"


def index_key(key: str) -> str:
    """The index beside archive ``key``: ``X.index.json`` for ``X.yaml.gz``."""
    return key[: -len(".yaml.gz")] + ".index.json"


def archive_time(key: str) -> tuple[datetime, int] | None:
    """When the archive ``key`` was made and its same-second suffix; None when it is not an archive."""
    m = _ARCHIVE_RE.search(key)
    if not m:
        return None
    y, mo, d, h, mi, s, n = m.groups()
    return datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=UTC), int(n or 0)


def select_expired(keys: list[str], *, keep: int, keep_days: int, now: datetime, protect: str) -> list[str]:
    """Archive keys to delete (oldest first); pure. ``protect`` is never among them."""
    dated = sorted(((t, key) for key in keys if (t := archive_time(key))), reverse=True)
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

"""Backup retention's rule: which archives of one cluster to delete (pure; the S3 side, listing,
reading indexes and deleting, is :mod:`steps.argocd_backup.retention_s3`).

Archives live at exactly ``PREFIX/CLUSTER/YYYY/MM/DD/HHMMSSZ[-N].yaml.gz`` with ``….index.json``
beside them. Only keys of exactly that shape *directly under this cluster's* ``PREFIX/CLUSTER/``
are archives here: a cluster's name may contain ``/`` (``prod`` and ``prod/eu`` share a prefix),
a second install's prefix may nest under another's, and someone may keep a copy under
``…/prod/keep/…`` — none of those keys is ever considered, let alone deleted.

An archive is kept when ANY rule keeps it:

- it is among the newest ``keep`` archives, or newer than ``keep_days`` days (0 disables a rule;
  both 0 keeps everything);
- it is the archive just written;
- it is the newest *healthy* archive (its index is readable and not marked ``suspect``);
- it is older than the newest *suspect* archive (a backup that held far fewer objects than the
  healthy one before it, :func:`shrink_reason`) while fewer than ``max(keep, 1)`` healthy
  archives are newer than that suspect one. So backups of an emptied or wrong Argo CD never rotate
  the last good archives out; once ``keep`` healthy backups follow it (a real, lasting change),
  the older archives expire as usual.

No I/O: keys, times and index flags in, keys out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

_ARCHIVE_RE = re.compile(r"(\d{4})/(\d{2})/(\d{2})/(\d{2})(\d{2})(\d{2})Z(?:-(\d+))?\.yaml\.gz")
_ARCHIVE_TAIL_RE = re.compile(r"(?:^|/)" + _ARCHIVE_RE.pattern + "$")

#: A backup is *suspect* when it holds fewer than this fraction of the objects of the newest
#: healthy archive before it, or no Applications where that one had some.
SHRINK_THRESHOLD = 0.5

#: The index fields that mark a suspect archive: ``suspect`` (bool) and ``suspect_reason``.
SUSPECT = "suspect"
SUSPECT_REASON = "suspect_reason"


def archive_key(prefix_path: str, created: datetime) -> str:
    """``PREFIX/CLUSTER/YYYY/MM/DD/HHMMSSZ`` (no suffix, no extension) of an archive made at ``created``."""
    return f"{prefix_path}{created.astimezone(UTC):%Y/%m/%d/%H%M%S}Z"


def index_key(key: str) -> str:
    """The index beside archive ``key``: ``X.index.json`` for ``X.yaml.gz``."""
    return key[: -len(".yaml.gz")] + ".index.json"


def archive_time(key: str, prefix: str | None = None) -> tuple[datetime, int] | None:
    """When the archive ``key`` was made and its same-second suffix; None when it is not an archive.

    With ``prefix`` (``PREFIX/CLUSTER/``) the key must be exactly ``prefix`` followed by
    ``YYYY/MM/DD/HHMMSSZ[-N].yaml.gz`` — what retention uses. Without it, any key whose last five
    path segments have that shape (for reading a key a user names).
    """
    if prefix is not None:
        if not key.startswith(prefix):
            return None
        m = _ARCHIVE_RE.fullmatch(key[len(prefix) :])
    else:
        m = _ARCHIVE_TAIL_RE.search(key)
    if not m:
        return None
    y, mo, d, h, mi, s, n = m.groups()
    try:
        return datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=UTC), int(n or 0)
    except ValueError:  # 2026/13/45: not a date, so not ours
        return None


def archives(keys: Sequence[str], prefix: str | None) -> list[str]:
    """The archive keys of exactly this cluster's ``prefix`` among ``keys``, newest first."""
    dated = sorted(((t, key) for key in keys if (t := archive_time(key, prefix))), reverse=True)
    return [key for _, key in dated]


def shrink_reason(counts: Mapping[str, int], baseline: Mapping[str, int], baseline_name: str) -> str:
    """Why a backup holding ``counts`` is suspect next to the healthy archive ``baseline_name``
    holding ``baseline``; "" when it is not (pure)."""
    total, before = sum(counts.values()), sum(baseline.values())
    if baseline.get("Application", 0) > 0 and counts.get("Application", 0) == 0:
        return (
            f"no Applications where {baseline_name} held {baseline['Application']} "
            f"({total} objects, {before} before)"
        )
    if before and total < before * SHRINK_THRESHOLD:
        return (
            f"{total} objects, fewer than {SHRINK_THRESHOLD:.0%} of the {before} in {baseline_name} "
            f"({', '.join(f'{k} {baseline.get(k, 0)}→{counts.get(k, 0)}' for k in sorted({*baseline, *counts}))})"
        )
    return ""


def select_expired(
    keys: Sequence[str],
    *,
    prefix: str | None = None,
    keep: int,
    keep_days: int,
    now: datetime,
    protect: str,
    suspect: Mapping[str, bool | None] | None = None,
) -> list[str]:
    """Archive keys to delete (oldest first); pure. ``protect`` is never among them.

    ``keys`` is a listing under ``prefix`` (``PREFIX/CLUSTER/``): only exact archive keys of that
    prefix are considered (module docstring). Without ``prefix`` every key ending in an archive's
    ``YYYY/MM/DD/HHMMSSZ[-N].yaml.gz`` counts: only for keys known to be one cluster's (backup-export
    always passes its prefix). ``suspect`` maps an archive key to True (its index
    marks it suspect), False (healthy) or None (no readable index: neither); keys it lacks are
    healthy.
    """
    if keep <= 0 and keep_days <= 0:
        return []
    dated = sorted(((t[0], t[1], key) for key in keys if (t := archive_time(key, prefix))), reverse=True)
    flags = suspect or {}
    cutoff = now - timedelta(days=keep_days) if keep_days > 0 else None
    newest_healthy = next((key for *_, key in dated if flags.get(key, False) is False), None)
    # Healthy archives newer than the newest suspect one; while fewer than `need`, everything older
    # than it stays (the count only grows further back, so the newest suspect archive decides).
    need = max(keep, 1)
    guard = len(dated)
    healthy = 0
    for i, (*_, key) in enumerate(dated):
        if flags.get(key, False) is True:
            if healthy < need:
                guard = i
            break
        if flags.get(key, False) is False:
            healthy += 1
    expired = []
    for i, (when, _, key) in enumerate(dated):  # newest first
        kept_by_count = keep > 0 and i < keep
        kept_by_age = cutoff is not None and when >= cutoff
        if key in (protect, newest_healthy) or kept_by_count or kept_by_age or i > guard:
            continue
        expired.append(key)
    return list(reversed(expired))


def is_suspect(index: Mapping[str, Any] | None) -> bool | None:
    """True when ``index`` marks its archive suspect, False when healthy, None without an index."""
    if index is None:
        return None
    return bool(index.get(SUSPECT))

"""backup-export's pure core: where a backup made now goes, and which archives of this cluster expire.

:func:`decide` reads nothing: :mod:`steps.argocd_backup.export` gathers (the live objects, the
listing of this cluster's archives after the write, which of their indexes say suspect) and acts
(S3 writes and deletes, through :mod:`steps.argocd_backup.retention_s3`). The retention rule
itself is :func:`steps.argocd_backup.retention.select_expired` (pure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from steps.argocd_backup import retention
from steps.argocd_backup.settings import BackupSettings


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` says a backup writes and deletes."""

    key: str  # PREFIX/CLUSTER/YYYY/MM/DD/HHMMSSZ: s3.put_new adds -N (same second) and .yaml.gz
    expired: tuple[str, ...] = ()  # archive keys retention deletes (with their indexes), oldest first


def decide(
    settings: BackupSettings,
    created: datetime,
    *,
    listing: Sequence[str] = (),
    written: str = "",
    suspect: Mapping[str, bool | None] | None = None,
) -> Decision:
    """The pure core: where a backup made at ``created`` goes, and which archives expire.

    Before the write nothing is listed: the key alone matters. After it, ``listing`` holds the keys
    under this cluster's prefix, ``written`` the archive just written (never expired) and
    ``suspect`` which archives' indexes mark them suspect: only exact archive keys of this cluster
    are considered, and an archive is kept while any rule keeps it
    (:func:`steps.argocd_backup.retention.select_expired`). No I/O.
    """
    expired = retention.select_expired(
        list(listing),
        prefix=settings.prefix_path,
        keep=settings.keep,
        keep_days=settings.keep_days,
        now=created,
        protect=written,
        suspect=suspect,
    )
    return Decision(key=retention.archive_key(settings.prefix_path, created), expired=tuple(expired))

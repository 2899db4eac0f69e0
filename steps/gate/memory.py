"""What earlier evaluations of the gate saw (:class:`steps.gate.decide.Seen`), kept across restarts.

Argo CD forgets what the gate must not: a ``Degraded`` that an evaluation saw is gone from the
Application once it recovers (and without ``lastTransitionTime`` even its time is), and
``status.history`` is trimmed to ``revisionHistoryLimit`` entries (a re-sync of the same revision
appends one too). So each evaluation records, per gated target, image and Application, the block it
decided and when it saw the image live or unwell; the next evaluation reads it back.

One JSON object per gated target and image, written whole by the one evaluation that runs at a time
(``image-gate``'s schedule does not overlap; a lost write costs only that evaluation's
observation). Where: beside the notifications' ledger, which the gate's pods already reach: the S3
bucket ``IMAGEBUMP_NOTIFY_LEDGER_BUCKET`` under ``imagebump/gate/``, else the directory
``IMAGEBUMP_NOTIFY_LEDGER_DIR`` (default ``~/.cache/imagebump/notifications``) under ``gate/``. A
record that cannot be read or written is a warning: the gate then decides from Argo CD alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from steps.gate.decide import STICKY, Seen
from steps.gate.facts import parse_time

log = logging.getLogger(__name__)
PREFIX = "imagebump/gate/"


class Memory(Protocol):
    def load(self, key: str) -> dict[str, Seen]: ...

    def save(self, key: str, seen: Mapping[str, Seen]) -> None: ...


def record_key(repo_url: str, path: str, image: str) -> str:
    """One record per gated target and image (a file or object name: a hash)."""
    return hashlib.sha256(f"{repo_url}\n{path}\n{image}".encode()).hexdigest()[:40]


def _dump(seen: Mapping[str, Seen]) -> bytes:
    def one(s: Seen) -> dict[str, Any]:
        return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in asdict(s).items()}

    return json.dumps({where: one(s) for where, s in sorted(seen.items())}, sort_keys=True).encode()


def _load(data: bytes) -> dict[str, Seen]:
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return {}
    found: dict[str, Seen] = {}
    for where, s in raw.items() if isinstance(raw, dict) else ():
        if not isinstance(s, dict):
            continue
        blocked = s.get("blocked") if s.get("blocked") in STICKY else None
        found[str(where)] = Seen(
            blocked=blocked,
            blocked_at=parse_time(s.get("blocked_at")),
            live_from=parse_time(s.get("live_from")),
            unwell_at=parse_time(s.get("unwell_at")),
            live_entry=s["live_entry"] if isinstance(s.get("live_entry"), int) else None,
            live_revision=s["live_revision"] if isinstance(s.get("live_revision"), str) else None,
        )
    return found


class FileMemory:
    """Records as files under ``directory`` (replaced atomically)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def load(self, key: str) -> dict[str, Seen]:
        try:
            return _load((self.directory / key).read_bytes())
        except FileNotFoundError:
            return {}

    def save(self, key: str, seen: Mapping[str, Seen]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".{key}.{os.getpid()}.tmp"
        tmp.write_bytes(_dump(seen))
        os.replace(tmp, self.directory / key)


class S3Memory:
    """Records as objects ``prefix + key`` in ``bucket``."""

    def __init__(self, client: Any, bucket: str, prefix: str = PREFIX) -> None:
        self.client, self.bucket, self.prefix = client, bucket, prefix

    def load(self, key: str) -> dict[str, Seen]:
        try:
            data = self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return {}
        return _load(data)

    def save(self, key: str, seen: Mapping[str, Seen]) -> None:
        self.client.put_object(
            Bucket=self.bucket, Key=self.prefix + key, Body=_dump(seen), ContentType="application/json"
        )


def memory_from_env(env: Mapping[str, str] | None = None) -> Memory:
    """Beside the notifications' ledger (its bucket, else its directory)."""
    env = os.environ if env is None else env
    bucket = env.get("IMAGEBUMP_NOTIFY_LEDGER_BUCKET")
    if bucket:
        import boto3

        return S3Memory(boto3.client("s3"), bucket)
    directory = env.get("IMAGEBUMP_NOTIFY_LEDGER_DIR") or "~/.cache/imagebump/notifications"
    return FileMemory(Path(directory).expanduser() / "gate")

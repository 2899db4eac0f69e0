"""The "already sent" record: a key is claimed before it is sent and marked once it was.

A key's record is in one of three states: absent (never sent: anyone may claim it), **sending**
(claimed at a time it records) and **sent** (final: a later run counts it a duplicate). A failed
send gives the claim back (:meth:`Ledger.release`), so the next run tries again. A sender that
died while sending (its pod killed or evicted mid-send, its node lost) or could not give its
claim back leaves it *sending*: once that claim is older than :data:`LEASE_SECONDS` (longer than
any notify run lives) a later run takes it over, so the message is sent after all rather than
never. A record written by an earlier version (empty) is *sent*.

:class:`FileLedger` (one machine, or a volume): one file per key, created with
``O_CREAT | O_EXCL`` so two senders cannot both claim a key; a stale claim is taken over under an
``flock`` of the directory's lock file. It survives restarts of the process. On a cluster the
directory is a persistent volume, or the S3 form below.

:class:`S3Ledger`: one object per key created with a conditional put (``If-None-Match: *``,
S3's conditional writes): the second writer gets 412 Precondition Failed and sends nothing. A
stale claim is taken over with ``If-Match`` on the ETag that was read: of two runs taking it
over, one wins (the other gets 412).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

#: How long a *sending* claim is honoured. A notify run ends within its pod's 300 s
#: (``activeDeadlineSeconds``; its sends within ``steps.notify.send.BUDGET``), so a claim older
#: than this belongs to a sender that is gone.
LEASE_SECONDS = 900.0
_SENDING = b"sending "
_SENT = b"sent"


def stale(record: bytes, now: float) -> bool:
    """Whether ``record`` is a *sending* claim older than the lease (an unreadable time: stale)."""
    if not record.startswith(_SENDING):
        return False  # sent, or an earlier version's empty record (sent)
    try:
        since = float(record[len(_SENDING) :].decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return True
    return not now - LEASE_SECONDS < since <= now + LEASE_SECONDS  # a claim from the future: broken


def sending(now: float) -> bytes:
    return _SENDING + repr(now).encode()


class Ledger(Protocol):
    def claim(self, key: str) -> bool:
        """True when this caller may send ``key`` (nobody sent it, nobody living is sending it)."""

    def sent(self, key: str) -> None:
        """Mark ``key`` sent: no later run sends it again."""

    def release(self, key: str) -> None:
        """Give a claim back (the send failed): a later run may try again."""


class FileLedger:
    """Keys as files under ``directory``."""

    def __init__(self, directory: Path, clock: Callable[[], float] = time.time) -> None:
        self.directory = Path(directory)
        self.clock = clock

    def claim(self, key: str) -> bool:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / key
        now = self.clock()
        if self._create(path, sending(now)):
            return True
        import fcntl

        with open(self.directory / ".lock", "a") as lock:  # one taker of a stale claim at a time
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                record = path.read_bytes()
            except FileNotFoundError:  # released meanwhile
                return self._create(path, sending(now))
            if not stale(record, now):
                return False
            tmp = path.with_name(f".{key}.{os.getpid()}.tmp")
            tmp.write_bytes(sending(now))
            os.replace(tmp, path)
            return True

    @staticmethod
    def _create(path: Path, data: bytes) -> bool:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return False
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return True

    def sent(self, key: str) -> None:
        tmp = self.directory / f".{key}.{os.getpid()}.tmp"
        tmp.write_bytes(_SENT)
        os.replace(tmp, self.directory / key)

    def release(self, key: str) -> None:
        (self.directory / key).unlink(missing_ok=True)


class S3Ledger:
    """Keys as objects ``prefix/key`` in ``bucket``, claimed with a conditional put."""

    def __init__(
        self,
        client: Any,
        bucket: str,
        prefix: str = "imagebump/notifications/",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client, self.bucket, self.prefix, self.clock = client, bucket, prefix, clock

    def claim(self, key: str) -> bool:
        from steps.aws.s3 import put_if_absent

        now = self.clock()
        if put_if_absent(
            self.client,
            self.bucket,
            self.prefix + key,
            sending(now),
            kms_key_id="",
            content_type="text/plain",
        ):
            return True
        return self._take_over(key, now)

    def _take_over(self, key: str, now: float) -> bool:
        """A stale claim replaced by ours, if nobody else replaced it first (``If-Match``)."""
        from botocore.exceptions import ClientError

        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return False  # released meanwhile: the next run claims it afresh
            raise
        record = got["Body"].read(256)
        if not stale(record, now):
            return False
        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=self.prefix + key,
                Body=sending(now),
                ContentType="text/plain",
                IfMatch=got["ETag"],
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey") or status in (
                404,
                409,
                412,
            ):
                return False  # another run took it over (or released it) first
            raise
        return True

    def sent(self, key: str) -> None:
        self.client.put_object(
            Bucket=self.bucket, Key=self.prefix + key, Body=_SENT, ContentType="text/plain"
        )

    def release(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.prefix + key)

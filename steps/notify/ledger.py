"""The "already sent" record: a key is claimed before it is sent and kept once it was.

:class:`FileLedger` (one machine, or a volume): one empty file per key, created with
``O_CREAT | O_EXCL`` so two senders cannot both claim a key; a failed send releases the claim so
the next run tries again. It survives restarts of the process. On a cluster the directory is a
persistent volume, or the S3 form below.

:class:`S3Ledger`: one object per key created with a conditional put (``If-None-Match: *``,
S3's conditional writes): the second writer gets 412 Precondition Failed and sends nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol


class Ledger(Protocol):
    def claim(self, key: str) -> bool:
        """True when this caller may send ``key`` (nobody sent or is sending it)."""

    def release(self, key: str) -> None:
        """Give a claim back (the send failed): a later run may try again."""


class FileLedger:
    """Keys as files under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def claim(self, key: str) -> bool:
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.directory / key, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return False
        os.close(fd)
        return True

    def release(self, key: str) -> None:
        (self.directory / key).unlink(missing_ok=True)


class S3Ledger:
    """Keys as objects ``prefix/key`` in ``bucket``, claimed with a conditional put."""

    def __init__(self, client: Any, bucket: str, prefix: str = "imagebump/notifications/") -> None:
        self.client, self.bucket, self.prefix = client, bucket, prefix

    def claim(self, key: str) -> bool:
        from steps.aws.s3 import put_if_absent

        return put_if_absent(
            self.client, self.bucket, self.prefix + key, b"", kms_key_id="", content_type="text/plain"
        )

    def release(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.prefix + key)

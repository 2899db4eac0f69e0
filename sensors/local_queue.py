"""The SQS calls of the local sensor, each one logged and none of them fatal.

:class:`SqsQueue` receives (long polls), deletes, releases (visibility 0) and extends a message's
visibility on one queue. A failed call is logged (``receive-failed``, ``delete-failed``,
``release-failed``) and the sensor goes on: a message not deleted comes back and is deduplicated by
its Workflow name, one not released becomes visible when its timeout expires. What to do with a
message is :class:`sensors.local.LocalSensor`'s; this module only talks to SQS.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

MAX_MESSAGES_PER_RECEIVE = 10  # the SQS limit


class SqsQueue:
    """One queue, read with ``wait_seconds`` long polls and ``visibility_timeout`` receives.

    ``log(**record)`` receives one record per call that failed or settled a message.
    """

    def __init__(
        self,
        sqs: Any,
        url: str,
        *,
        wait_seconds: int,
        visibility_timeout: int,
        log: Callable[..., None],
        stopped: threading.Event,
    ) -> None:
        self.sqs = sqs
        self.url = url
        self.wait_seconds = wait_seconds
        self.visibility_timeout = visibility_timeout
        self._log = log
        self._stopped = stopped

    def receive(self, count: int) -> list[dict[str, Any]]:
        """Up to ``count`` messages (at most SQS's 10); [] after a failed call, once a short back-off
        (1–5 s, cut short by ``stopped``) has passed."""
        try:
            response = self.sqs.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=max(1, min(count, MAX_MESSAGES_PER_RECEIVE)),
                WaitTimeSeconds=self.wait_seconds,
                VisibilityTimeout=self.visibility_timeout,
                AttributeNames=["ApproximateReceiveCount"],
            )
        except Exception as exc:  # noqa: BLE001 - network blips: log, back off, keep polling
            self._log(event="receive-failed", error=f"{type(exc).__name__}: {exc}")
            self._stopped.wait(min(5.0, max(1.0, self.wait_seconds)))
            return []
        return response.get("Messages") or []

    def delete(self, message: dict[str, Any], **record: Any) -> None:
        """Delete the message, logged as ``message-deleted`` with ``record``."""
        try:
            self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"])
            self._log(event="message-deleted", message_id=message.get("MessageId"), **record)
        except Exception as exc:  # noqa: BLE001 - it will be redelivered and deduplicated
            self._log(
                event="delete-failed",
                message_id=message.get("MessageId"),
                error=f"{type(exc).__name__}: {exc}",
                **record,
            )

    def release(self, message: dict[str, Any], reason: str) -> None:
        """Make a received-but-not-started message visible again at once."""
        try:
            self.sqs.change_message_visibility(
                QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )
        except Exception as exc:  # noqa: BLE001 - it becomes visible when its timeout expires anyway
            self._log(event="release-failed", message_id=message.get("MessageId"), error=str(exc))
        self._log(event="message-released", message_id=message.get("MessageId"), reason=reason)

    def extend(self, receipt: str) -> None:
        """Keep the message invisible for another ``visibility_timeout``; raises what SQS raised."""
        self.sqs.change_message_visibility(
            QueueUrl=self.url, ReceiptHandle=receipt, VisibilityTimeout=self.visibility_timeout
        )

"""What the local sensor makes of one SQS message, and what it counts: pure, no SQS calls.

:func:`read_event` reads a message body as an event object or raises :class:`InvalidMessage`
(such a body is left on the queue for its redrive policy); :func:`event_id_of` is the event's id
as text any UTF-8 stream can take (:func:`printable`); :class:`SensorStats` counts the outcomes,
:class:`InFlight` is a running workflow's message, and :func:`sensor_record` makes one log record
(its ``level`` from :data:`LEVELS` unless given). The loop that receives, runs, deletes and
heartbeats is :class:`sensors.local.LocalSensor`. Imports the standard library only.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from workflows.local.results import WorkflowResult

#: ``level`` of the sensor's records that are not ``info``.
LEVELS = {
    "receive-failed": "warning",
    "delete-failed": "warning",
    "release-failed": "warning",
    "heartbeat-failed": "warning",
    "message-redelivered": "warning",
    "message-invalid": "warning",
    "workflow-failed": "error",
    "message-error": "error",
    "on-result-failed": "error",
}


def sensor_record(ts: str, fields: dict[str, Any]) -> dict[str, Any]:
    """One record in the format of every imagebump log (:mod:`steps.runtime.harness`): ``ts``, ``level``
    (``fields["level"]``, else :data:`LEVELS`' for its ``event``, else ``info``), ``component``,
    then the fields that are not None."""
    fields = dict(fields)
    level = fields.pop("level", None) or LEVELS.get(fields.get("event", ""), "info")
    return {
        "ts": ts,
        "level": level,
        "component": "sensor",
        **{k: v for k, v in fields.items() if v is not None},
    }


class Executor(Protocol):
    """What runs a workflow for the sensor (:class:`workflows.local.executor.LocalExecutor`)."""

    def run(
        self, parameters: dict[str, str], workflow_name: str, *, event_id: str | None = None
    ) -> WorkflowResult: ...


@dataclass
class InFlight:
    """A workflow the sensor runs, and the message it settles when the workflow ends."""

    receipt: str  # the newest receipt handle of its message (SQS honours only the newest)
    name: str
    event_id: str | None
    message_id: str | None = None
    started: float = field(default_factory=time.monotonic)


@dataclass
class SensorStats:
    """What the sensor did with the messages it received."""

    received: int = 0
    succeeded: int = 0
    failed: int = 0
    skipped: int = 0
    duplicates: int = 0
    invalid: int = 0

    @property
    def handled(self) -> int:
        """Messages brought to an outcome."""
        return self.succeeded + self.failed + self.skipped + self.duplicates + self.invalid

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class InvalidMessage(ValueError):
    """A message body that is not an event at all (not even one to filter out)."""


def read_event(body: Any) -> dict[str, Any]:
    """The event object a message body holds; :class:`InvalidMessage` saying why when it holds none."""
    try:
        event = json.loads(body)
        if not isinstance(event, dict):
            raise ValueError(f"a JSON {type(event).__name__}, not an object")
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidMessage(str(exc)) from None
    return event


def event_id_of(event: dict[str, Any]) -> str | None:
    """The event's ``id`` when it is a string, made printable; None otherwise."""
    event_id = event.get("id")
    return printable(event_id) if isinstance(event_id, str) else None


def receive_count(message: dict[str, Any]) -> str | None:
    """SQS's ``ApproximateReceiveCount`` of a received message (None when not asked for)."""
    return (message.get("Attributes") or {}).get("ApproximateReceiveCount")


_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` safe to write to a UTF-8 stream (a lone surrogate from a JSON escape becomes U+FFFD)."""
    return _SURROGATE.sub("\ufffd", text)


__all__ = [
    "LEVELS",
    "Executor",
    "InFlight",
    "InvalidMessage",
    "SensorStats",
    "event_id_of",
    "printable",
    "read_event",
    "receive_count",
    "sensor_record",
]

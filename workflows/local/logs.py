"""Logging for the local runtime: JSON-line records, the one format of steps, executor and sensor.

A record is a dict (``ts``, ``level``, ``component``, ``event``, …; see :mod:`workflows.local`'s
executor docstring); a ``Log`` is any callable that takes one. :func:`json_logger` writes them to
a stream. Steps format their own records with :class:`steps.runtime.harness.JsonLineFormatter` (a
:mod:`logging` formatter for ``LogRecord`` s, not for dicts); the timestamp is the same
:func:`steps.runtime.harness.utc_timestamp`; :class:`Redactor` masks secrets with :mod:`steps.runtime.redact`.
Imports only the standard library, :mod:`steps.runtime.harness`, :mod:`steps.runtime.redact` and :mod:`results`,
so the local sensor can log without loading the interpreter.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any

from steps.runtime.harness import utc_timestamp
from steps.runtime.redact import REDACTED, mask_secrets
from workflows.local.results import ERROR, FAILED

Log = Callable[[dict[str, Any]], None]

STDERR_TAIL_CHARS = 2000

_WARN_EVENTS = {"attempt-failed", "retry-scheduled", "zygote-lost", "zygote-unavailable"}


def json_logger(stream: Any = None) -> Log:
    """A ``log`` callable writing one JSON object per line to ``stream`` (default stderr).

    Non-ASCII text is escaped (``\\uXXXX``), so any stream can take any record.
    """
    lock = threading.Lock()

    def log(record: dict[str, Any]) -> None:
        line = json.dumps(record, default=str, sort_keys=False)
        with lock:
            out = stream if stream is not None else sys.stderr
            out.write(line + "\n")
            out.flush()

    return log


def level_of(record: dict[str, Any]) -> str:
    """The ``level`` of an executor record: failures are errors, retries warnings, the rest info."""
    if record.get("phase") in (FAILED, ERROR) and record.get("event") in (
        "node-finished",
        "workflow-finished",
    ):
        return "error"
    return "warning" if record.get("event") in _WARN_EVENTS else "info"


def tail(text: str, lines: int = 20) -> str:
    """The last ``lines`` lines of ``text``, at most STDERR_TAIL_CHARS characters."""
    last = "\n".join(text.rstrip("\n").splitlines()[-lines:])
    return last[-STDERR_TAIL_CHARS:]


def json_record(line: str) -> dict[str, Any] | None:
    """A step's JSON log line as a dict; None for anything else."""
    if not line.startswith("{"):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


class Redactor:
    """Replaces every secret value the executor was given (4 characters or more), and its base64 and
    HTTP Basic forms, with ``***`` — :func:`steps.runtime.redact.mask_secrets`, the one redaction. Only the
    secrets: a step's JSON log lines pass through it and must stay JSON."""

    def __init__(self, secrets: dict[str, dict[str, str]]) -> None:
        self.values = sorted({v for s in secrets.values() for v in s.values() if v and len(v) >= 4})

    def __call__(self, text: str) -> str:
        return mask_secrets(text, self.values)


def forward_step_stderr(
    stderr: str, emit: Log, *, step: str, event_id: str | None, extra: dict[str, Any]
) -> None:
    """Pass a step process's (already redacted) stderr on: its JSON records as they are, with
    ``component``/``step``/``event_id`` defaulted and ``extra`` added; other lines grouped into
    ``step-stderr`` records."""
    loose: list[str] = []

    def flush_loose() -> None:
        if loose:
            emit(
                {
                    "ts": utc_timestamp(),
                    "level": "info",
                    "component": "step",
                    "step": step,
                    **({"event_id": event_id} if event_id else {}),
                    "event": "step-stderr",
                    "message": "\n".join(loose)[-STDERR_TAIL_CHARS:],
                    **extra,
                }
            )
            loose.clear()

    for line in stderr.splitlines():
        record = json_record(line)
        if record is None:
            if line.strip():
                loose.append(line)
            continue
        flush_loose()
        record.setdefault("component", "step")
        record.setdefault("step", step)
        if event_id:
            record.setdefault("event_id", event_id)
        emit({**record, **extra})
    flush_loose()


__all__ = [
    "REDACTED",
    "Log",
    "Redactor",
    "forward_step_stderr",
    "json_logger",
    "json_record",
    "level_of",
    "tail",
]

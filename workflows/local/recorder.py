"""The record of one run: its nodes, in completion order, and its JSON log records.

Every executor record carries ``ts``, ``level`` (:func:`~workflows.local.logs.level_of`),
``component: executor``, ``workflow`` and ``event_id``; None fields are left out; a broken log
sink never breaks a run.
"""

from __future__ import annotations

import threading
from typing import Any

from steps.runtime.harness import utc_timestamp
from workflows.local.logs import Log, forward_step_stderr, level_of
from workflows.local.results import NodeResult, Phase


class RunRecorder:
    def __init__(self, workflow: str, event_id: str | None, sink: Log) -> None:
        self.workflow = workflow
        self.event_id = event_id
        self.sink = sink
        self.nodes: list[NodeResult] = []
        self._lock = threading.Lock()

    def log(self, **record: Any) -> None:
        level = record.pop("level", None) or level_of(record)
        base = {"ts": utc_timestamp(), "level": level, "component": "executor", "workflow": self.workflow}
        if self.event_id:
            base["event_id"] = self.event_id
        base.update({k: (str(v) if isinstance(v, Phase) else v) for k, v in record.items() if v is not None})
        self.emit(base)

    def emit(self, record: dict[str, Any]) -> None:
        try:
            self.sink(record)
        except Exception:  # noqa: BLE001 - a broken log sink must not break a run
            pass

    def forward(self, stderr: str, step: str, node: str, attempt: int) -> None:
        """A step process's (redacted) stderr into the run's log (see :func:`forward_step_stderr`)."""
        extra = {"workflow": self.workflow, "node": node, "attempt": attempt}
        forward_step_stderr(stderr, self.emit, step=step, event_id=self.event_id, extra=extra)

    def add(self, node: NodeResult) -> NodeResult:
        with self._lock:
            self.nodes.append(node)
        return node

    def finished(self, node: NodeResult, **script: Any) -> NodeResult:
        """Record ``node`` and log its ``node-finished``; ``script`` adds a script node's ``step``,
        ``exit_code``, ``attempts`` and ``stderr_tail``."""
        self.add(node)
        self.log(
            event="node-finished",
            node=node.name,
            template=node.template,
            step=script.get("step"),
            phase=node.phase,
            exit_code=script.get("exit_code"),
            attempts=script.get("attempts"),
            duration=round(node.duration, 3),
            message=node.message or None,
            stderr_tail=script.get("stderr_tail"),
        )
        return node

    def snapshot(self) -> list[NodeResult]:
        with self._lock:
            return list(self.nodes)


__all__ = ["RunRecorder"]

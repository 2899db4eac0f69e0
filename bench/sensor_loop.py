"""The benchmark's sensor: a :class:`sensors.local.LocalSensor` draining a world's queue in a
background thread, recording per event when it was sent and when its workflow finished
(:class:`Completion`). Nothing here asserts on time.

An event's clock starts just before the ``put_events`` call that carries it (EventBridge's routing
to SQS, the sensor's receive and the workflow all count) and stops when its Workflow's phase is
final — its last step's process has ended, the commit or PR branch is on the remote. The sensor
deletes the SQS message after that; that bookkeeping call (a round trip to the emulator, ~10 ms
here) is not part of push → commit and is not counted.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.testbed import World


@dataclass
class Completion:
    event_id: str
    sent: float
    done: float
    phase: str
    duration: float
    nodes: list[tuple[str, str, float, int]]  # (template, phase, duration, attempts)
    outcome: str
    workflow: str = ""
    #: (node name, template, duration) of each step that succeeded at its first attempt
    node_names: list[tuple[str, str, float]] = field(default_factory=list)
    #: when commit-pr succeeded (monotonic): the change is in Git; verify-live and onExit follow
    committed_at: float | None = None

    @property
    def latency(self) -> float:
        return self.done - self.sent

    @property
    def to_commit(self) -> float | None:
        """Push → commit landed (commit-pr's end), the measure plain git's floor is compared with."""
        return None if self.committed_at is None else self.committed_at - self.sent


class _EndClock:
    """The executor, with the moment each of its workflows ended (``ends[name]``)."""

    def __init__(self, executor: Any) -> None:
        self._executor = executor
        self.ends: dict[str, float] = {}

    def run(self, *args: Any, **kwargs: Any) -> Any:
        result = self._executor.run(*args, **kwargs)
        self.ends[result.name] = time.monotonic()
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._executor, name)


class SensorLoop:
    """A LocalSensor draining the world's queue in a background thread, recording completions."""

    def __init__(self, world: World, executor: Any, *, concurrency: int = 4) -> None:
        from sensors.local import LocalSensor

        self.world = world
        self.sent: dict[str, float] = {}
        self.completions: dict[str, Completion] = {}
        self._cond = threading.Condition()
        self.records: list[dict[str, Any]] = []
        self._clock = _EndClock(executor)
        self.sensor = LocalSensor(
            world.queue_url,
            self._clock,
            sqs_client=world.moto.client("sqs"),
            concurrency=concurrency,
            wait_seconds=1,
            visibility_timeout=600,
            log=self.records.append,
            on_result=self._on_result,
        )
        self._thread = threading.Thread(target=self.sensor.run, name="bench-sensor", daemon=True)

    def _on_result(self, event: dict[str, Any], result: Any) -> None:
        done = self._clock.ends.pop(result.name, None) or time.monotonic()
        nodes = [
            (n.template, n.phase, n.duration, n.attempts)
            for n in result.nodes
            if n.template in ("resolve-image", "edit-kustomize", "commit-pr")
        ]
        commit = next((n for n in result.nodes if n.template == "commit-pr" and n.phase == "Succeeded"), None)
        edit = next((n for n in result.nodes if n.template == "edit-kustomize"), None)
        outcome = (
            commit.outputs.get("action", "")
            if commit
            else (f"edit:{edit.outputs.get('decision', '')}" if edit else result.phase)
        )
        with self._cond:
            eid = str(event.get("id"))
            first_try = [
                (n.name, n.template, n.duration)
                for n in result.nodes
                if n.phase == "Succeeded" and n.attempts == 1
            ]
            self.completions[eid] = Completion(
                eid,
                self.sent.get(eid, done),
                done,
                result.phase,
                result.duration,
                nodes,
                outcome,
                result.name,
                first_try,
                commit.finished_at if commit else None,
            )
            self._cond.notify_all()

    def __enter__(self) -> SensorLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sensor.stop()
        self._thread.join(timeout=600)

    def send(self, events: list[dict[str, Any]]) -> None:
        """Send ``events`` (10 per ``put_events``); each one's clock starts just before its call.

        A workflow may finish before the id EventBridge assigned is known here: the completion is
        kept under that id and matched when :meth:`wait` is called.
        """
        for i in range(0, len(events), 10):
            batch = events[i : i + 10]
            now = time.monotonic()
            self.world.send(batch)
            with self._cond:
                for e in batch:
                    self.sent[e["id"]] = now
                    if e["id"] in self.completions:  # finished before we knew its id
                        self.completions[e["id"]].sent = now

    def wait(self, event_ids: list[str], timeout: float = 900) -> list[Completion]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not all(e in self.completions for e in event_ids):
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = [e for e in event_ids if e not in self.completions]
                    raise TimeoutError(
                        f"{len(missing)} of {len(event_ids)} events not done after {timeout:.0f}s"
                    )
                self._cond.wait(min(left, 1.0))
            return [self.completions[e] for e in event_ids]

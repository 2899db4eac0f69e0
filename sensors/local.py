"""The local sensor: long-poll SQS and run each accepted ECR push through the local executor.

The laptop / small-install counterpart of the Argo Events EventSource + Sensor. It applies the
SAME filters, Workflow name and parameter mapping as the cluster Sensor (:mod:`sensors.definition`),
but unlike the SQS EventSource it deletes a message only once its workflow reached a terminal
outcome, so a crash or a failure loses nothing:

* reads: messages from ``queue_url`` (``ReceiveMessage`` long polls of ``wait_seconds``, at most
  as many messages as there are free workers);
* runs: the executor for each accepted event, up to ``concurrency`` at once, while a heartbeat
  extends the message's visibility (``ChangeMessageVisibility``) so a long workflow is not
  redelivered meanwhile;
* deletes: after a Succeeded workflow (updated, unchanged or skipped with a reason), after a
  filter rejection (a skip, logged with its reason), and for a duplicate of a workflow name that
  already succeeded or is running in this process (another message: a running workflow's OWN
  message, received again because its visibility lapsed, is kept and settled with its newest
  receipt when the workflow ends);
* leaves: a message whose body is not JSON (the queue's redrive policy dead-letters it), a
  Failed/Error workflow (visibility expires → redelivered → after ``maxReceiveCount`` the DLQ),
  and a message whose handling raised anything at all (logged as ``message-error`` with its id;
  the sensor goes on with the others — one bad message never stops it).

Filters and the Workflow name are computed from the raw body exactly as the cluster Sensor
computes them (:mod:`sensors.definition`: gjson's unescaping, Go's regular expressions); reading a
body as an event, the counts and the record levels are :mod:`sensors.local_messages` (pure); the
SQS calls themselves, each logged and none fatal, are :mod:`sensors.local_queue`.

:meth:`LocalSensor.stop` (what SIGTERM/SIGINT call) stops taking messages; running workflows
finish and their messages are settled; messages received but not started are made visible again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from sensors.local_messages import (
    Executor,
    InFlight,
    InvalidMessage,
    SensorStats,
    event_id_of,
    printable,
    read_event,
    receive_count,
    sensor_record,
)
from sensors.local_queue import MAX_MESSAGES_PER_RECEIVE, SqsQueue
from steps.runtime.harness import utc_timestamp
from workflows.local.logs import json_logger
from workflows.local.results import ERROR, SUCCEEDED, WorkflowResult

#: The longest the poll loop waits for a slot without looking again (a workflow's end wakes it at once).
SLOT_WAIT_SECONDS = 1.0


class LocalSensor:
    """Long-polls one SQS queue and runs the ``image-update`` workflow for each accepted event.

    Args:
        queue_url: the queue EventBridge delivers ECR push events to.
        executor: a :class:`workflows.local.executor.LocalExecutor` (thread-safe; shared), or
        executor_factory: a callable returning one per workflow run.
        sqs_client: a boto3 SQS client (real AWS or ``endpoint_url``); default ``boto3.client("sqs")``.
        concurrency: workflows running at once.
        wait_seconds: long-poll wait per ``ReceiveMessage`` (20 normally; tests use 1).
        visibility_timeout: seconds a received message stays invisible; renewed every
            ``heartbeat_seconds`` (default a third of it) while its workflow runs.
        log: receives one dict per record (default: JSON lines on stderr).
        on_result: called with ``(event, WorkflowResult)`` after each workflow (progress lines).
        definition: the filters/naming module (default :mod:`sensors.definition`).
    """

    def __init__(
        self,
        queue_url: str,
        executor: Executor | None = None,
        *,
        executor_factory: Callable[[], Executor] | None = None,
        sqs_client: Any = None,
        concurrency: int = 4,
        wait_seconds: int = 20,
        visibility_timeout: int = 300,
        heartbeat_seconds: float | None = None,
        log: Callable[[dict[str, Any]], None] | None = None,
        on_result: Callable[[dict[str, Any], WorkflowResult], None] | None = None,
        definition: Any = None,
    ) -> None:
        if (executor is None) == (executor_factory is None):
            raise ValueError("pass exactly one of executor and executor_factory")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if definition is None:
            from sensors import definition as _definition

            definition = _definition
        if sqs_client is None:
            import boto3

            sqs_client = boto3.client("sqs")
        self.queue_url = queue_url
        self._executor = executor
        self._executor_factory = executor_factory
        self.concurrency = concurrency
        self.heartbeat_seconds = heartbeat_seconds or max(1.0, visibility_timeout / 3)
        self.log_sink = log or json_logger()
        self.on_result = on_result
        self.definition = definition
        self.stats = SensorStats()
        self._stop = threading.Event()
        self.queue = SqsQueue(
            sqs_client,
            queue_url,
            wait_seconds=wait_seconds,
            visibility_timeout=visibility_timeout,
            log=self.log,
            stopped=self._stop,
        )
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._running: dict[str, InFlight] = {}  # workflow name -> in flight
        self._succeeded: set[str] = set()
        #: set when a workflow ends (a slot is free, the counts changed) or the sensor stops: what
        #: the poll loop waits for when every slot is taken, instead of polling
        self._slot_freed = threading.Event()

    # -- public ---------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop taking messages; :meth:`run` returns once running workflows have finished."""
        if not self._stop.is_set():
            self.log(event="sensor-stopping", running=len(self._running))
        self._stop.set()
        self._slot_freed.set()

    @property
    def sqs(self) -> Any:
        """The boto3 SQS client (replaceable: tests wrap it to inject failures)."""
        return self.queue.sqs

    @sqs.setter
    def sqs(self, client: Any) -> None:
        self.queue.sqs = client

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(
        self, stop_when: Callable[[SensorStats], bool] | None = None, max_events: int | None = None
    ) -> SensorStats:
        """Poll until :meth:`stop`, ``stop_when(stats)`` is true, or ``max_events`` were handled.

        Returns the counts; running workflows always finish before it returns.
        """
        self.log(event="sensor-started", queue=self.queue_url, concurrency=self.concurrency)
        self._done.clear()
        heartbeat = threading.Thread(target=self._heartbeat, name="sqs-heartbeat", daemon=True)
        heartbeat.start()
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="workflow")
        futures: set[Future] = set()
        try:
            while not self._stop.is_set():
                if stop_when is not None and stop_when(self.stats):
                    break
                with self._lock:
                    self._slot_freed.clear()  # under the lock: a workflow that ends after this sets it
                    in_flight = len(self._running)
                if max_events is not None and self.stats.handled + in_flight >= max_events:
                    if in_flight == 0:
                        break
                    self._slot_freed.wait(SLOT_WAIT_SECONDS)
                    continue
                free = self.concurrency - in_flight
                if free <= 0:
                    # woken the moment a workflow ends (a poll every 50 ms made a freed slot wait
                    # for the next receive up to that long)
                    self._slot_freed.wait(SLOT_WAIT_SECONDS)
                    continue
                want = min(free, MAX_MESSAGES_PER_RECEIVE)
                if max_events is not None:
                    want = min(want, max_events - self.stats.handled - in_flight)
                for message in self._receive(want):
                    if self._stop.is_set():
                        self._release(message, "sensor stopping")
                        continue
                    future = self._handle_contained(message, pool)
                    if future is not None:
                        futures.add(future)
                futures = {f for f in futures if not f.done()}
        finally:
            pool.shutdown(wait=True)  # finish what is running; nothing lost
            self._done.set()
            heartbeat.join(timeout=5)
            self.log(event="sensor-stopped", **self.stats.as_dict())
        return self.stats

    # -- internals ------------------------------------------------------------------------------

    def log(self, **record: Any) -> None:
        """One record in the format of every imagebump log (:mod:`steps.runtime.harness`): ts, level, component."""
        try:
            self.log_sink(sensor_record(utc_timestamp(), record))
        except Exception:  # noqa: BLE001 - a broken log sink must not stop the sensor
            pass

    def _receive(self, count: int) -> list[dict[str, Any]]:
        messages = self.queue.receive(count)
        with self._lock:
            self.stats.received += len(messages)
        return messages

    def _release(self, message: dict[str, Any], reason: str) -> None:
        with self._lock:
            self.stats.received -= 1
        self.queue.release(message, reason)

    def _succeeded_or_running(self, name: str) -> str:
        """Why a workflow of this name must not start again ('' if it may). Caller holds the lock."""
        if name in self._succeeded:
            return "already succeeded"
        if name in self._running:
            return "is running (its own message is deleted when it succeeds, redelivered if it fails)"
        return ""

    def _handle_contained(self, message: dict[str, Any], pool: ThreadPoolExecutor) -> Future | None:
        """:meth:`_handle`, but whatever it raises stays with this one message.

        The message is neither deleted nor released: it becomes visible again after its visibility
        timeout and the queue's redrive policy dead-letters it after ``maxReceiveCount`` receives.
        """
        try:
            return self._handle(message, pool)
        except Exception as exc:  # noqa: BLE001 - one bad message never stops the sensor
            with self._lock:
                for name, item in list(self._running.items()):
                    if item.receipt == message.get("ReceiptHandle"):
                        del self._running[name]
                self.stats.failed += 1
                self._slot_freed.set()
            self.log(
                event="message-error",
                level="error",
                message_id=message.get("MessageId"),
                receive_count=receive_count(message),
                error=f"{type(exc).__name__}: {printable(str(exc))[:500]}",
                reason="left on the queue: redelivered after its visibility timeout, dead-lettered "
                "after maxReceiveCount",
            )
            return None

    def _handle(self, message: dict[str, Any], pool: ThreadPoolExecutor) -> Future | None:
        message_id, count = message.get("MessageId"), receive_count(message)
        body = message.get("Body", "")
        try:
            event = read_event(body)
        except InvalidMessage as exc:
            # Not an event at all (not even one to filter out): keep it for a human, via the DLQ.
            with self._lock:
                self.stats.invalid += 1
            self.log(
                event="message-invalid",
                message_id=message_id,
                receive_count=count,
                reason=f"body is not JSON holding an event object ({exc}); left on the queue for its redrive policy (DLQ)",
            )
            return None
        event_id = event_id_of(event)
        accepted, reason = self.definition.accepts(body)  # as the cluster reads it (gjson, Go regexps)
        if not accepted:
            with self._lock:
                self.stats.skipped += 1
            self.queue.delete(message, event_id=event_id, outcome="skipped", reason=f"filtered out: {reason}")
            return None
        name = self.definition.workflow_name(body)
        with self._lock:
            running = self._running.get(name)
            redelivered = running is not None and message_id is not None and running.message_id == message_id
            if redelivered:
                # Its OWN message again: the visibility lapsed while the workflow ran (a heartbeat
                # late on a loaded machine). Deleting it as a duplicate would delete the running
                # workflow's only message; keep it, and settle it later with this newest receipt.
                running.receipt = message["ReceiptHandle"]
                duplicate = ""
            else:
                duplicate = self._succeeded_or_running(name)
            if duplicate:
                self.stats.duplicates += 1
            elif not redelivered:
                self._running[name] = InFlight(message["ReceiptHandle"], name, event_id, message_id)
        if redelivered:
            self.log(
                event="message-redelivered",
                message_id=message_id,
                event_id=event_id,
                workflow=name,
                receive_count=count,
                reason="visibility lapsed while its workflow runs; kept, settled when the workflow ends",
            )
            return None
        if duplicate:
            # Like the Argo API server refusing a second Workflow of the same name. Deleting a
            # duplicate of a RUNNING workflow is safe: if that run fails, its own message comes back.
            # (Leaving it would spend one of the queue's maxReceiveCount receives per poll, and a
            # long run could push a duplicate into the DLQ.)
            self.queue.delete(
                message,
                event_id=event_id,
                workflow=name,
                outcome="duplicate",
                reason=f"workflow {name} {duplicate}",
            )
            return None
        try:
            arguments = self.definition.workflow_arguments(body)
        except Exception as exc:  # noqa: BLE001 - treated like an unparseable body
            with self._lock:
                self._running.pop(name, None)
                self.stats.invalid += 1
            self.log(
                event="message-invalid",
                message_id=message_id,
                event_id=event_id,
                reason=f"no workflow arguments: {exc}; left for the redrive policy",
            )
            return None
        self.log(
            event="workflow-submitted",
            message_id=message_id,
            event_id=event_id,
            workflow=name,
            receive_count=count,
        )
        return pool.submit(self._run_workflow, message, event, name, arguments, event_id)

    def _run_workflow(
        self,
        message: dict[str, Any],
        event: dict[str, Any],
        name: str,
        arguments: dict[str, str],
        event_id: str | None,
    ) -> None:
        try:
            executor = self._executor or self._executor_factory()  # type: ignore[misc]
            result = executor.run(arguments, name, event_id=event_id)
        except Exception as exc:  # noqa: BLE001 - an executor bug fails this event, not the sensor
            result = WorkflowResult(name, ERROR, [], f"{type(exc).__name__}: {exc}")
        with self._lock:
            item = self._running.get(name)
            if item is not None and item.receipt != message["ReceiptHandle"]:
                message = {**message, "ReceiptHandle": item.receipt}  # redelivered meanwhile
        try:
            if result.phase == SUCCEEDED:
                self.queue.delete(
                    message,
                    event_id=event_id,
                    workflow=name,
                    outcome="succeeded",
                    duration=round(result.duration, 3),
                )
            else:
                self.log(
                    event="workflow-failed",
                    message_id=message.get("MessageId"),
                    event_id=event_id,
                    workflow=name,
                    phase=result.phase,
                    message=result.message,
                    reason="message left on the queue: redelivered after its visibility timeout, "
                    "dead-lettered after maxReceiveCount",
                )
            if self.on_result is not None:
                try:
                    self.on_result(event, result)
                except Exception as exc:  # noqa: BLE001
                    self.log(event="on-result-failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._running.pop(name, None)
                if result.phase == SUCCEEDED:
                    self._succeeded.add(name)
                    self.stats.succeeded += 1
                else:
                    self.stats.failed += 1
                self._slot_freed.set()

    def _heartbeat(self) -> None:
        while not self._done.wait(self.heartbeat_seconds):
            with self._lock:
                in_flight = list(self._running.values())
            for item in in_flight:
                try:
                    self.queue.extend(item.receipt)
                except Exception as exc:  # noqa: BLE001 - worst case: a redelivery, deduplicated by name
                    with self._lock:
                        settled = self._running.get(item.name) is not item
                    if settled:
                        continue  # its workflow ended and deleted the message meanwhile: nothing to keep
                    self.log(
                        event="heartbeat-failed",
                        message_id=item.message_id,
                        event_id=item.event_id,
                        workflow=item.name,
                        error=f"{type(exc).__name__}: {exc}",
                    )


__all__ = ["LocalSensor", "SensorStats"]

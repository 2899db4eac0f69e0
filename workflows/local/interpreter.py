"""The interpreter: one run of a validated workflow — steps, dag, suspend, templateRef, retry, mutex.

It walks the templates as Argo's controller would (steps in groups, dag tasks as their
dependencies finish, ``withParam``/``withItems`` fan-out, ``when``, ``parallelism``,
``activeDeadlineSeconds``), resolves ``{{...}}`` variables, holds ``synchronization`` mutexes,
retries script attempts by their ``retryStrategy``, and hands each script attempt to the
:class:`~workflows.local.sandbox.Sandbox`. It records every node as a
:class:`~workflows.local.results.NodeResult` and logs JSON records through :mod:`logs`.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from workflows.local.argo_nodes import status_nodes
from workflows.local.errors import NodeError
from workflows.local.expressions import evaluate_when, parse_duration, task_dependencies
from workflows.local.logs import Log
from workflows.local.mutexes import MutexRegistry
from workflows.local.recorder import RunRecorder
from workflows.local.results import (
    ERROR,
    FAILED,
    SKIPPED,
    SUCCEEDED,
    NodeResult,
    Phase,
    StepOutputs,
    WorkflowResult,
    child_node_name,
    item_node_name,
)
from workflows.local.sandbox import Sandbox
from workflows.local.scope import Scope, bind_inputs
from workflows.local.scripts import run_script
from workflows.local.validation import ValidatedWorkflow


class _Siblings:
    """Threads for the steps of a group that run beside its first (:meth:`Run.run_parallel`): a
    thread is started only when none is idle, then kept and reused (before, every group started
    threads of its own, and each one started waits to be scheduled). A thread is idle again before
    its caller can see its result, so groups run one after another never start more threads than
    the largest of them has siblings."""

    def __init__(self) -> None:
        self._idle: list[queue.SimpleQueue[Any]] = []
        self._lock = threading.Lock()

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name="step", daemon=True).start()
        inbox.put((future, fn, args))
        return future

    def _serve(self, inbox: queue.SimpleQueue[Any]) -> None:
        while True:
            future, fn, args = inbox.get()
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, as a pool does
                result, error = None, exc
            with self._lock:
                self._idle.append(inbox)
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)
            del future, fn, args, result, error


_SIBLINGS = _Siblings()


class _Gate:
    """``parallelism``: at most ``limit`` units of work at once (a context manager per unit)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._slots = threading.BoundedSemaphore(limit)

    def __enter__(self) -> _Gate:
        self._slots.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._slots.release()


_Call = tuple[dict[str, Any], Scope, str, "float | None"]


class Run:
    """The state of one workflow run (one call of :meth:`LocalExecutor.run`)."""

    def __init__(
        self,
        workflow: ValidatedWorkflow,
        *,
        name: str,
        params: dict[str, Any],
        event_id: str | None,
        sandbox: Sandbox,
        mutexes: MutexRegistry,
        log: Log,
        redact: Any,
        backoff_scale: float,
    ) -> None:
        self.wf = workflow
        self.doc = workflow.document
        self.name = name
        self.params = params
        self.sandbox = sandbox
        self.mutexes = mutexes
        self.rec = RunRecorder(name, event_id, log)
        self.log = self.rec.log
        self.redact = redact
        self.backoff_scale = backoff_scale
        ads = workflow.spec.get("activeDeadlineSeconds")
        self.started = time.monotonic()
        self.deadline = self.started + int(ads) if ads is not None else None
        #: set while the exit handler runs: ``{{workflow.status}}``/``failures`` and its environment
        self.exit_status: dict[str, str] | None = None
        self.exit_env: dict[str, str] | None = None

    def execute(self) -> WorkflowResult:
        entrypoint = self.wf.spec["entrypoint"]
        self.log(event="workflow-started", phase=Phase.RUNNING, template=entrypoint)
        entry = self.doc.templates[entrypoint]
        try:
            inputs = bind_inputs(entry, {}, "spec.entrypoint")
            node = self.run_template(entry, inputs, self.name, self.deadline)
            phase, message, outputs = node.phase, node.message, node.outputs
        except NodeError as exc:
            phase, message, outputs = ERROR, self.redact(str(exc)), {}
        if self.wf.spec.get("onExit"):
            phase, message = self.run_exit_handler(phase, message)
        duration = time.monotonic() - self.started
        self.log(event="workflow-finished", phase=phase, duration=round(duration, 3), message=message or None)
        return WorkflowResult(self.name, phase, self.rec.snapshot(), message, duration, outputs)

    def run_exit_handler(self, phase: Phase, message: str) -> tuple[Phase, str]:
        """``spec.onExit``: run after the entrypoint whatever its result, as Argo does, with
        ``{{workflow.status}}`` and ``{{workflow.failures}}`` (a JSON list of the failed nodes, quoted again as
        a JSON string as Argo writes it (``"null"`` when none failed):
        displayName, message, templateName, phase, as argo-workflows workflow/controller/operator.go
        ``getWorkflowFailures`` writes them). The handler's steps find the finished Workflow
        (``{metadata, status: {phase, nodes}}``, Argo's shape) in the file ``IMAGEBUMP_WORKFLOW_FILE``
        names, where a pod would read its Workflow from the API. A failing exit handler fails a
        Workflow that had succeeded (Argo does the same)."""
        nodes = self.rec.snapshot()
        failures = [
            {
                "displayName": n.name.rsplit(".", 1)[-1],
                "message": n.message,
                "templateName": n.template,
                "phase": str(n.phase),
                "podName": n.name,
                "finishedAt": time.strftime(
                    "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - (time.monotonic() - n.finished_at))
                ),
            }
            for n in nodes
            if n.phase in (FAILED, ERROR) and "steps" not in (self.doc.templates.get(n.template) or {})
        ]
        workflow = {
            "metadata": {"name": self.name, "labels": {}},
            "status": {
                "phase": str(phase),
                "message": message,
                "nodes": status_nodes(self.name, nodes, self.doc.templates),
            },
        }
        fd, path = tempfile.mkstemp(prefix="imagebump-workflow-", suffix=".json", dir=self.sandbox.work_root)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(workflow))  # one C-encoded string (json.dump encodes in Python)
        # Argo's wire format (operator.go: strconv.Quote of the JSON): a JSON string holding the JSON
        # list, and the quoted "null" when nothing failed; consumers decode twice
        self.exit_status = {"status": str(phase), "failures": json.dumps(json.dumps(failures or None))}
        self.exit_env = {"IMAGEBUMP_WORKFLOW_FILE": path}
        handler = self.doc.templates[self.wf.spec["onExit"]]
        self.log(event="exit-handler-started", template=handler["name"], phase=phase)
        try:
            node = self.run_template(
                handler, bind_inputs(handler, {}, "spec.onExit"), f"{self.name}.onExit", None
            )
            if not node.phase.ok and phase == SUCCEEDED:
                phase, message = node.phase, f"exit handler {handler['name']!r} {node.phase.lower()}"
        except NodeError as exc:
            if phase == SUCCEEDED:
                phase, message = ERROR, self.redact(str(exc))
        finally:
            self.exit_status = self.exit_env = None
            os.unlink(path)
        return phase, message

    # -- templates ----------------------------------------------------------------------------

    def run_template(
        self, tpl: dict[str, Any], inputs: dict[str, str], node_name: str, deadline: float | None
    ) -> NodeResult:
        if tpl.get("activeDeadlineSeconds") is not None and "script" not in tpl:
            # a script's is per attempt, from its pod's start (scripts.run_script), as Argo puts it
            # on each pod, created once the template's mutexes are held
            own = time.monotonic() + int(str(tpl["activeDeadlineSeconds"]))
            deadline = own if deadline is None else min(deadline, own)
        scope = Scope(self.name, self.params, inputs, where=self.doc.scope(tpl), exit_status=self.exit_status)
        sync = tpl.get("synchronization") or {}
        names = [
            scope.render(m["name"])
            for m in list(sync.get("mutexes") or []) + ([sync["mutex"]] if sync.get("mutex") else [])
        ]
        held: list[str] = []
        try:
            for mutex in sorted(set(names)):  # sorted: two templates never deadlock on order
                self.mutexes.acquire(
                    mutex,
                    lambda m=mutex: self.log(
                        event="mutex-waiting", node=node_name, template=tpl["name"], mutex=m
                    ),
                )
                held.append(mutex)
                self.log(event="mutex-acquired", node=node_name, template=tpl["name"], mutex=mutex)
            if "script" in tpl:
                return self.run_script(tpl, scope, node_name, deadline)
            if "suspend" in tpl:
                return self.run_suspend(tpl, node_name, deadline)
            return self.run_group(tpl, scope, node_name, deadline)
        finally:
            for mutex in reversed(held):
                self.mutexes.release(mutex)
                self.log(event="mutex-released", node=node_name, template=tpl["name"], mutex=mutex)

    def run_suspend(self, tpl: dict[str, Any], node_name: str, deadline: float | None) -> NodeResult:
        """A suspend with a duration: wait that long (never past the deadline); no process."""
        started = time.monotonic()
        seconds = parse_duration(tpl["suspend"]["duration"], "suspend.duration")
        phase, message = SUCCEEDED, ""
        if deadline is not None and started + seconds > deadline:
            seconds = max(0.0, deadline - started)
            phase, message = FAILED, "activeDeadlineSeconds exceeded while suspended"
        if seconds > 0:
            time.sleep(seconds)
        node = NodeResult(node_name, tpl["name"], phase, None, {}, time.monotonic() - started, 1, message)
        return self.rec.finished(node)

    def run_group(
        self, tpl: dict[str, Any], scope: Scope, node_name: str, deadline: float | None
    ) -> NodeResult:
        started = time.monotonic()
        phase, message = SUCCEEDED, ""
        # parallelism: at most N of this template's steps, tasks or items at once (a slot per leaf
        # unit of work, never held by a step while its own items wait for slots)
        gate = _Gate(int(tpl["parallelism"])) if tpl.get("parallelism") else None
        try:
            if "steps" in tpl:
                for group in tpl["steps"] or []:
                    calls = [
                        (step, scope, child_node_name(node_name, step["name"]), deadline) for step in group
                    ]
                    results = self.run_parallel(calls, gate)
                    for step, (_, outs) in zip(group, results, strict=True):
                        scope.steps[step["name"]] = outs
                    bad = [(s, p) for s, (p, _) in zip(group, results, strict=True) if not p.ok]
                    if bad:
                        step, phase = bad[0]
                        message = f"child {step['name']!r} {phase.lower()}"
                        break
            else:
                phase, message = self.run_dag(tpl, scope, node_name, deadline, gate)
            outputs: dict[str, str] = {}
            if phase == SUCCEEDED:
                for p in (tpl.get("outputs") or {}).get("parameters") or []:
                    vf = p["valueFrom"]
                    try:
                        outputs[p["name"]] = scope.render(vf["parameter"])
                    except NodeError:
                        if "default" not in vf:
                            raise
                        outputs[p["name"]] = str(vf["default"])
        except NodeError as exc:
            phase, message, outputs = ERROR, self.redact(str(exc)), {}
        node = NodeResult(
            node_name, tpl["name"], phase, None, outputs, time.monotonic() - started, 1, message
        )
        return self.rec.finished(node)

    def run_dag(
        self,
        tpl: dict[str, Any],
        scope: Scope,
        node_name: str,
        deadline: float | None,
        gate: _Gate | None = None,
    ) -> tuple[Phase, str]:
        tasks = {t["name"]: t for t in (tpl["dag"] or {}).get("tasks") or []}
        deps = {n: set(task_dependencies(t, n)) for n, t in tasks.items()}
        done: dict[str, Phase] = {}
        phase, message = SUCCEEDED, ""
        while len(done) < len(tasks):
            ready = [n for n in tasks if n not in done and deps[n] <= set(done)]
            blocked = [n for n in ready if any(not done[d].ok for d in deps[n])]
            for n in blocked:
                done[n] = Phase.OMITTED
                scope.steps[n] = StepOutputs()
            ready = [n for n in ready if n not in blocked]
            if not ready:
                if not blocked:  # validation refuses cycles; never spin
                    raise NodeError(f"{node_name}: dag tasks {sorted(set(tasks) - set(done))} can never run")
                continue
            results = self.run_parallel(
                [(tasks[n], scope, child_node_name(node_name, n), deadline) for n in ready], gate
            )
            for n, (p, outs) in zip(ready, results, strict=True):
                done[n] = p
                scope.steps[n] = outs
                if not p.ok and phase == SUCCEEDED:
                    phase, message = p, f"child {n!r} {p.lower()}"
        return phase, message

    def run_parallel(self, calls: list[_Call], gate: _Gate | None = None) -> list[tuple[Phase, StepOutputs]]:
        """Run a group's steps (or a dag's ready tasks) at once: the first on this thread, the
        others on threads kept for that (:class:`_Siblings`), reused from group to group (a thread
        started per group waits to be scheduled, between one step's end and the next one's start:
        image-update's resolve-image → update-target | count-gated). Returns when all have ended."""
        if len(calls) == 1:
            return [self.run_step(*calls[0], gate)]
        others = [_SIBLINGS.submit(self.run_step, *c, gate) for c in calls[1:]]
        try:
            first = self.run_step(*calls[0], gate)
        finally:
            wait(others)  # as a pool's shutdown: never return while a sibling still runs
        return [first] + [f.result() for f in others]

    def error_node(
        self, node_name: str, template: str, exc: NodeError, item: Any = None
    ) -> tuple[Phase, StepOutputs]:
        node = NodeResult(node_name, template, ERROR, message=self.redact(str(exc)), item=item)
        self.rec.finished(node)
        return ERROR, StepOutputs()

    def run_step(
        self,
        step: dict[str, Any],
        scope: Scope,
        node_name: str,
        deadline: float | None,
        gate: _Gate | None = None,
    ) -> tuple[Phase, StepOutputs]:
        """Run one step/task (expanding withParam/withItems); return its phase and what later steps read."""
        callee = self.doc.callee(step, scope.where)
        try:
            if "withParam" not in step and "withItems" not in step:
                with gate if gate is not None else contextlib.nullcontext():
                    return self.run_one(step, scope, node_name, deadline)
            if "withItems" in step:
                items = step["withItems"]
            else:
                raw = scope.render(step["withParam"])
                try:
                    items = json.loads(raw)
                except json.JSONDecodeError:
                    raise NodeError(f"{node_name}: withParam is not a JSON list: {raw[:200]!r}") from None
                if not isinstance(items, list):
                    raise NodeError(f"{node_name}: withParam is not a JSON list: {raw[:200]!r}")
            children = [
                (
                    step,
                    scope.with_item(item),
                    item_node_name(node_name, i),
                    deadline,
                )
                for i, item in enumerate(items)
            ]
            if not children:
                self.rec.add(NodeResult(node_name, callee["name"], SKIPPED, message="withParam is empty"))
                return SKIPPED, StepOutputs(self.skipped_outputs(callee))
            results = self.run_items(children, gate)
            phase = next((p for p, _ in results if not p.ok), SUCCEEDED)
            names = {p["name"] for p in (callee.get("outputs") or {}).get("parameters") or []}
            return phase, StepOutputs.aggregate(names, [o for _, o in results])
        except NodeError as exc:
            return self.error_node(node_name, callee["name"], exc)

    def run_items(self, children: list[_Call], gate: _Gate | None = None) -> list[tuple[Phase, StepOutputs]]:
        if len(children) == 1:
            return [self.run_item(*children[0], gate)]
        workers = len(children) if gate is None else min(len(children), gate.limit)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="item") as pool:
            return list(pool.map(lambda c: self.run_item(*c, gate), children))

    def run_item(
        self, step: dict, scope: Scope, node_name: str, deadline: float | None, gate: _Gate | None = None
    ) -> tuple[Phase, StepOutputs]:
        try:
            with gate if gate is not None else contextlib.nullcontext():
                return self.run_one(step, scope, node_name, deadline)
        except NodeError as exc:
            return self.error_node(node_name, self.doc.callee(step, scope.where)["name"], exc, scope.item)

    def run_one(
        self, step: dict, scope: Scope, node_name: str, deadline: float | None
    ) -> tuple[Phase, StepOutputs]:
        callee = self.doc.callee(step, scope.where)
        if "when" in step:
            when = scope.render(step["when"])
            try:
                go = evaluate_when(when)
            except ValueError as exc:
                raise NodeError(f"{node_name}: cannot evaluate when {when!r}: {exc}") from None
            if not go:
                node = NodeResult(
                    node_name,
                    callee["name"],
                    SKIPPED,
                    message=f"when {when!r} evaluated false",
                    item=scope.item if scope.has_item else None,
                    outputs=self.skipped_outputs(callee),
                )
                self.rec.finished(node)
                return SKIPPED, StepOutputs(dict(node.outputs))
        given = {
            p["name"]: scope.render(p.get("value", ""))
            for p in (step.get("arguments") or {}).get("parameters") or []
        }
        inputs = bind_inputs(callee, given, node_name)
        node = self.run_template(callee, inputs, node_name, deadline)
        if scope.has_item:
            node.item = scope.item
        return node.phase, node.step_outputs()

    @staticmethod
    def skipped_outputs(tpl: dict[str, Any]) -> dict[str, str]:
        """``valueFrom.default`` of each output that has one: what a skipped step outputs."""
        outs = {}
        for p in (tpl.get("outputs") or {}).get("parameters") or []:
            vf = p.get("valueFrom") or {}
            if "default" in vf:
                outs[p["name"]] = str(vf["default"])
        return outs

    def run_script(
        self, tpl: dict[str, Any], scope: Scope, node_name: str, deadline: float | None
    ) -> NodeResult:
        return run_script(
            self.rec, self.sandbox, tpl, scope.render, node_name, deadline, self.backoff_scale, self.exit_env
        )


__all__ = ["Run"]

"""Reconcile on this machine: run the rendered ``image-reconcile`` CronWorkflow once, or every N.

:func:`build_executor` builds the local executor for ``manifests/workflows/image-reconcile.yaml``
(its ``update-target`` steps by ``templateRef`` from the rendered ``image-update``);
:func:`run_reconcile` runs it once and reads what its reconcile step found and its update steps did
into a :class:`ReconcileRun` (report, updates, exit code); :class:`Reconciler` runs it every
``--reconcile-every`` (:func:`parse_every`) inside ``imagebump run --local``. Used by ``imagebump
reconcile`` (:mod:`imagebump.commands.reconcile`, which prints it), ``run --local``, the demo and
the benchmarks. Node names are read through :class:`workflows.local.results.WorkflowResult`;
``steps.reconcile.step`` and the executor are imported lazily.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from steps.domain.errors import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, EXIT_TRANSIENT, ConfigError
from steps.domain.terminal import for_terminal
from workflows import names

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TEMPLATE = names.rendered_file(names.IMAGE_RECONCILE, PROJECT_ROOT)
DEFAULT_UPDATE_TEMPLATE = names.rendered_file(names.IMAGE_UPDATE, PROJECT_ROOT)
EXIT_UNEXPECTED = 3
#: The exit code of a target ``unknown`` because its read failed, by the report's ``error``.
READ_ERRORS = {"refused": EXIT_CONFIG, "transient": EXIT_TRANSIENT, "failed": EXIT_UNEXPECTED}
#: When several apply, the first of these wins; then 1 (a dry run found targets behind), then 0.
#: A refusal needs a fix (running again will not help), a transient failure needs another run, and
#: "behind" is an answer only when every target could be read.
PRECEDENCE = (EXIT_CONFIG, EXIT_TRANSIENT, EXIT_UNEXPECTED)
#: Locally there is no Workflow status to keep small: every behind target is handed over.
LOCAL_LIMIT = 1_000_000
DEFAULT_EVERY = "10m"


# ---------------------------------------------------------------------------------------------
# Building and running reconcile (shared with `imagebump run --local --reconcile-every`)
# ---------------------------------------------------------------------------------------------


def build_executor(
    *,
    secrets: Mapping[str, Mapping[str, str]],
    configmaps: Mapping[str, Mapping[str, str]],
    env: Mapping[str, str],
    log: Callable[[dict[str, Any]], None],
    template: Path = DEFAULT_TEMPLATE,
    update_template: Path = DEFAULT_UPDATE_TEMPLATE,
    **options: Any,
) -> Any:
    """The local executor for the rendered ``image-reconcile`` CronWorkflow (and ``image-update``);
    ``options`` go to :class:`~workflows.local.executor.LocalExecutor` (``backoff_scale``, ``work_root``)."""
    from workflows.local.executor import LocalExecutor

    for path, what in ((template, "--template"), (update_template, "--update-template")):
        if not Path(path).is_file():
            raise ConfigError(f"{what} {path}: no such file; render it with `imagebump render`")
    return LocalExecutor(
        template,
        project_root=PROJECT_ROOT,
        secrets=secrets,
        configmaps=configmaps,
        env=env,
        log=log,
        workflow_templates=[update_template],
        **options,
    )


@dataclass
class ReconcileRun:
    """What one run of reconcile found and did."""

    phase: str
    report: list[dict[str, Any]] = field(default_factory=list)
    submitted: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    updates: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""
    #: live states of the current targets in Argo CD (steps.live_states), when it ran
    live: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int = EXIT_OK
    message: str = ""
    seconds: float = 0.0

    behind_total: int | None = None  # the step's ``behind`` output (the report may be capped)

    @property
    def behind(self) -> int:
        if self.behind_total is not None:
            return self.behind_total
        return sum(1 for t in self.report if t.get("state") == "behind")

    @property
    def errors(self) -> dict[str, int]:
        """Targets ``unknown`` because a read failed, per kind (``refused``, ``transient``, ``failed``)."""
        found = [t.get("error") for t in self.report if t.get("state") == "unknown" and t.get("error")]
        return {kind: found.count(kind) for kind in READ_ERRORS}

    def summary(self) -> dict[str, Any]:
        """The JSON the command prints."""
        keys = ("repo_url", "path", "env", "current", "newest", "state", "reason")
        live = {(s.get("repo_url"), s.get("path"), s.get("env", "")): s for s in self.live}
        rows = []
        for t in self.report:
            row = {k: t.get(k, "") for k in keys}
            state = live.get((t.get("repo_url"), t.get("path"), t.get("env", "")))
            if state is not None:  # push → live (--argocd-context): the current target in Argo CD
                row["live"] = {k: state.get(k) for k in ("state", "reason", "applications")}
            # issue 35: promoteAfter's waiting (env, time left, why), blocked (why), promoted
            if t.get("gate"):
                why = t.get("wait_reason", "") if t["gate"] == "waiting" else t.get("blocked_reason", "")
                row["gate"] = {
                    "state": t["gate"],
                    "image": t.get("newest", ""),
                    "env": t.get("waiting_on", ""),
                    "time_left": t.get("time_left"),
                    "reason": why,
                }
            rows.append(row)
        return {
            "targets": rows,
            "submitted": self.submitted,
            **self.calls,
            "errors": self.errors,
            "updates": self.updates,
        }


def _first(codes: list[int]) -> int:
    """The exit code that wins among ``codes`` (:data:`PRECEDENCE`), 0 if there is none."""
    return next((c for c in PRECEDENCE if c in codes), EXIT_OK)


def _exit_of(node: Any) -> int:
    if node.exit_code == EXIT_CONFIG:
        return EXIT_CONFIG
    if node.exit_code == EXIT_TRANSIENT or node.exit_code is None or node.exit_code < 0:
        return EXIT_TRANSIENT  # transient, or killed (deadline): running again may pass
    return EXIT_UNEXPECTED


def _updated(node: Any) -> bool:
    """What the CronWorkflow's counter ``imagebump_reconcile_updates_total`` counts for one
    sweep-target node: it succeeded and its ``action`` output is a real change."""
    from steps.reconcile.report import UPDATED_ACTIONS

    return node is not None and node.phase == "Succeeded" and node.outputs.get("action") in UPDATED_ACTIONS


def _outcome(result: Any, index: int) -> tuple[str, Any]:
    """What update-target did for the ``index``-th target: (outcome, the failed node or None)."""
    nodes = result.item_nodes("sweep-target", index)
    edit, commit = nodes.get("edit-kustomize"), nodes.get("commit-pr")
    failed = next((n for n in (commit, edit) if n is not None and n.phase in ("Failed", "Error")), None)
    if failed is not None:
        return f"{failed.template} {failed.phase.lower()}: {failed.message[:200]}", failed
    if commit is not None and commit.phase == "Succeeded":
        return commit.outputs.get("action", "done"), None
    if edit is not None and edit.phase == "Succeeded":
        return f"unchanged ({edit.outputs.get('decision', '')}: {edit.outputs.get('reason', '')})", None
    mutex = result.item_node("sweep-target", index)
    if mutex is not None and mutex.phase in ("Failed", "Error"):
        return f"update-target {mutex.phase.lower()}: {mutex.message[:200]}", mutex
    return "not run", None


def run_reconcile(
    executor: Any,
    *,
    apply: bool,
    concurrency: int | None = None,
    limit: int = LOCAL_LIMIT,
    full: bool = True,
    name: str | None = None,
) -> ReconcileRun:
    """Run the CronWorkflow's template once; read what its reconcile step and update steps did."""
    from steps.reconcile import step as reconcile

    params = {
        "apply": "true" if apply else "false",
        "limit": str(limit),
        "full": "true" if full else "false",
        "concurrency": str(concurrency or reconcile.DEFAULT_CONCURRENCY),
    }
    started = time.monotonic()
    result = executor.run(params, name or f"{names.IMAGE_RECONCILE}-local-{int(time.time())}")
    reconciled = ReconcileRun(phase=result.phase, seconds=time.monotonic() - started)
    node = next(iter(result.nodes_for("reconcile")), None)
    if node is None or node.phase != "Succeeded":
        why = (node.message if node is not None else result.message) or "reconcile did not run"
        reconciled.exit_code = _exit_of(node) if node is not None else EXIT_UNEXPECTED
        reconciled.message = (
            f"the reconcile step {('ended ' + node.phase.lower()) if node else 'did not run'}: {why}"
        )
        return reconciled
    out = node.outputs
    try:
        reconciled.report = json.loads(out.get("report") or "[]")
        targets = json.loads(out.get("targets") or "[]")
    except json.JSONDecodeError as exc:
        reconciled.exit_code, reconciled.message = (
            EXIT_UNEXPECTED,
            f"the reconcile step wrote unreadable outputs: {exc}",
        )
        return reconciled
    reconciled.reason = out.get("reason", "")
    live = next(iter(result.nodes_for("live-states")), None)
    if live is not None and live.outputs.get("states"):
        try:
            reconciled.live = json.loads(live.outputs["states"])
        except json.JSONDecodeError:
            reconciled.live = []
    if str(out.get("behind", "")).isdigit():
        reconciled.behind_total = int(out["behind"])
    reconciled.calls = {
        key.replace("-", "_"): int(out.get(key) or 0) for key in ("ecr-calls", "git-calls", "git-clones")
    }
    unread = {kind: n for kind, n in reconciled.errors.items() if n}
    codes = [READ_ERRORS[kind] for kind in unread]
    if unread:
        reconciled.message = (
            f"{sum(unread.values())} target(s) unknown because Git or ECR could not be read ("
            + ", ".join(f"{n} {kind}" for kind, n in unread.items())
            + "); see their reasons"
        )
    if not apply:
        reconciled.exit_code = _first(codes) or (EXIT_FAILURE if reconciled.behind else EXIT_OK)
        return reconciled
    failures = 0
    for i, target in enumerate(targets):
        outcome, failed = _outcome(result, i)
        reconciled.updates.append(
            {
                "repo_url": target.get("repo_url"),
                "path": target.get("path"),
                "env": target.get("env", ""),
                "outcome": outcome,
                "ok": failed is None and outcome != "not run",
                "updated": _updated(result.item_node("sweep-target", i)),
            }
        )
        if failed is not None:
            codes.append(_exit_of(failed))
            failures += 1
    reconciled.submitted = len(targets)
    if codes:
        reconciled.exit_code = _first(codes)
        if failures:
            reconciled.message = "; ".join(
                m
                for m in (
                    f"{failures} of {len(targets)} update(s) failed; see the updates in the JSON output",
                    reconciled.message,
                )
                if m
            )
    elif result.phase != "Succeeded":
        reconciled.exit_code, reconciled.message = (
            EXIT_UNEXPECTED,
            f"reconcile ended {result.phase}: {result.message}",
        )
    elif len(targets) < reconciled.behind:
        reconciled.exit_code = EXIT_TRANSIENT
        reconciled.message = f"{reconciled.behind - len(targets)} target(s) behind were left for the next reconcile run (limit {limit})"
    return reconciled


# ---------------------------------------------------------------------------------------------
# Every DURATION, inside `imagebump run --local`
# ---------------------------------------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_every(text: str) -> float:
    """``10m``, ``30s``, ``1h30m``, ``90`` (seconds) → seconds; ``0`` turns reconcile off."""
    value = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise ConfigError(
            f"--reconcile-every {text!r}: expected a duration like 10m, 30s or 1h (0 turns it off)"
        )
    return sum(float(n) * _UNITS[u] for n, u in parts)


class Reconciler:
    """Runs reconcile (with apply) every ``interval`` seconds in a thread, until :meth:`stop`.

    The first reconcile run comes one interval after :meth:`start`: while the process was down, pushes
    waited on the SQS queue (the local sensor deletes a message only once its workflow is done),
    so reconcile is for what the queue lost. Each reconcile prints one line to ``out``; a reconcile run that
    fails is logged and the next one runs on schedule. :meth:`stop` lets a running reconcile run finish.
    """

    def __init__(
        self,
        executor: Any,
        interval: float,
        *,
        log: Callable[[dict[str, Any]], None],
        out: Callable[[str], None] = lambda line: print(line, flush=True),
    ) -> None:
        self.executor = executor
        self.interval = interval
        self.log = log
        self.out = out
        self.runs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="reconcile-reconcileer", daemon=True)

    def start(self) -> Reconciler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.run_once()

    def run_once(self) -> ReconcileRun | None:
        self.runs += 1
        try:
            reconciled = run_reconcile(
                self.executor,
                apply=True,
                full=False,
                name=f"{names.IMAGE_RECONCILE}-local-{int(time.time())}-{self.runs}",
            )
        except Exception as exc:  # noqa: BLE001 - one failed reconcile must not stop the intake
            self.log({"event": "sweep-failed", "message": f"{type(exc).__name__}: {exc}"})
            return None
        outcomes = [u["outcome"] for u in reconciled.updates]
        line = (
            f"reconcile {self.runs}: {reconciled.behind} behind, {reconciled.submitted} submitted"
            + (f" ({', '.join(outcomes)})" if outcomes else "")
            + f"  ({reconciled.seconds:.1f}s)"
        )
        if reconciled.message:
            line += f"  [{reconciled.message}]"
        self.out(for_terminal(line, 4000))
        self.log(
            {
                "event": "sweep-finished",
                "behind": reconciled.behind,
                "submitted": reconciled.submitted,
                "exit_code": reconciled.exit_code,
                "duration": round(reconciled.seconds, 3),
                **reconciled.calls,
            }
        )
        return reconciled

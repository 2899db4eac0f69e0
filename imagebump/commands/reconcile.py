"""``imagebump reconcile``: which overlays are behind their newest allowed image — and, with
``--apply``, bring them up to date.

Runs the rendered CronWorkflow ``manifests/workflows/image-reconcile.yaml`` once through the local
executor (its ``update-target`` steps by ``templateRef`` from the rendered ``image-update``
WorkflowTemplate): the very templates a cluster runs every 10 minutes, each step its own process
in its own temporary directory. Not a parallel code path.

Inputs: ``--rules FILE`` becomes the ``imagebump-rules`` ConfigMap; the Git tokens come from the
environment, never a flag: ``IMAGEBUMP_GIT_TOKEN`` (or ``_FILE``; needed with ``--apply``) becomes
the ``imagebump-git`` Secret only commit-pr mounts; ``IMAGEBUMP_GIT_READ_TOKEN`` (or ``_FILE``)
the read token of the sweep's clones — one user on one machine, so without a read token the write
token reads. ``AWS_*`` and ``IMAGEBUMP_*`` pass through to the steps; ``--endpoint-url`` also sets
``AWS_ENDPOINT_URL`` (moto, a VPC endpoint).

Output: a table on stderr; on stdout one JSON object ``{"targets": [{"repo_url", "path", "env",
"current", "newest", "state", "reason"}], "submitted": N, "ecr_calls", "git_calls", "git_clones",
"updates": [...]}``. Exit codes: 0 nothing behind (with ``--apply``: everything behind was brought
up to date), 1 a dry run found targets behind, 2 bad input, 3 unexpected, 75 transient (run it
again).

:class:`Sweeper` runs the same sweep every ``--reconcile-every`` inside ``imagebump run --local``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagebump.commands.run import local_secrets
from steps.errors import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, EXIT_TRANSIENT, ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TEMPLATE = PROJECT_ROOT / "manifests" / "workflows" / "image-reconcile.yaml"
DEFAULT_UPDATE_TEMPLATE = PROJECT_ROOT / "manifests" / "workflows" / "image-update.yaml"
EXIT_UNEXPECTED = 3
#: Locally there is no Workflow status to keep small: every behind target is handed over.
LOCAL_LIMIT = 1_000_000
DEFAULT_EVERY = "10m"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "reconcile",
        help="which overlays are behind their newest allowed image (--apply: update them)",
        description=(
            "Compare every overlay the rules map an ECR repository to with the newest image ECR holds that "
            "the rule allows, and report each as behind, current, ahead, proposed or unknown. With --apply, "
            "the overlays behind are updated by the same update-target steps an ECR push runs. Runs the "
            "rendered image-reconcile CronWorkflow once through the local executor. Git tokens come from "
            "IMAGEBUMP_GIT_TOKEN / IMAGEBUMP_GIT_READ_TOKEN (or *_FILE), never a flag."
        ),
    )
    parser.add_argument("--rules", type=Path, help="rules file (the imagebump-rules ConfigMap's rules.yaml)")
    parser.add_argument(
        "--endpoint-url", help="AWS endpoint (e.g. moto's server); also AWS_ENDPOINT_URL for steps"
    )
    parser.add_argument(
        "--apply", action="store_true", help="update the overlays that are behind (default: report)"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="ECR calls and Git repositories worked on at once (default 8)",
    )
    parser.add_argument("--region", help="AWS region (default: AWS_REGION, else each rule's own)")
    parser.add_argument(
        "--template",
        type=Path,
        default=DEFAULT_TEMPLATE,
        help="rendered CronWorkflow (default manifests/workflows/image-reconcile.yaml)",
    )
    parser.add_argument(
        "--update-template",
        type=Path,
        default=DEFAULT_UPDATE_TEMPLATE,
        help="rendered WorkflowTemplate it references (default manifests/workflows/image-update.yaml)",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="also print the executor's JSON log lines on stderr"
    )
    parser.set_defaults(func=run)
    return parser


# ---------------------------------------------------------------------------------------------
# Building and running the sweep (shared with `imagebump run --local --reconcile-every`)
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
class Sweep:
    """What one run of the sweep found and did."""

    phase: str
    report: list[dict[str, Any]] = field(default_factory=list)
    submitted: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    updates: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""
    exit_code: int = EXIT_OK
    message: str = ""
    seconds: float = 0.0

    @property
    def behind(self) -> int:
        return sum(1 for t in self.report if t.get("state") == "behind")

    def summary(self) -> dict[str, Any]:
        """The JSON the command prints."""
        keys = ("repo_url", "path", "env", "current", "newest", "state", "reason")
        return {
            "targets": [{k: t.get(k, "") for k in keys} for t in self.report],
            "submitted": self.submitted,
            **self.calls,
            "updates": self.updates,
        }


def _exit_of(node: Any) -> int:
    if node.exit_code == EXIT_CONFIG:
        return EXIT_CONFIG
    if node.exit_code == EXIT_TRANSIENT or node.exit_code is None or node.exit_code < 0:
        return EXIT_TRANSIENT  # transient, or killed (deadline): running again may pass
    return EXIT_UNEXPECTED


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


def run_sweep(
    executor: Any,
    *,
    apply: bool,
    concurrency: int | None = None,
    limit: int = LOCAL_LIMIT,
    full: bool = True,
    name: str | None = None,
) -> Sweep:
    """Run the CronWorkflow's template once; read what its reconcile step and update steps did."""
    from steps import reconcile

    params = {
        "apply": "true" if apply else "false",
        "limit": str(limit),
        "full": "true" if full else "false",
        "concurrency": str(concurrency or reconcile.DEFAULT_CONCURRENCY),
    }
    started = time.monotonic()
    result = executor.run(params, name or f"image-reconcile-local-{int(time.time())}")
    sweep = Sweep(phase=result.phase, seconds=time.monotonic() - started)
    node = next(iter(result.nodes_for("reconcile")), None)
    if node is None or node.phase != "Succeeded":
        why = (node.message if node is not None else result.message) or "the sweep did not run"
        sweep.exit_code = _exit_of(node) if node is not None else EXIT_UNEXPECTED
        sweep.message = (
            f"the reconcile step {('ended ' + node.phase.lower()) if node else 'did not run'}: {why}"
        )
        return sweep
    out = node.outputs
    try:
        sweep.report = json.loads(out.get("report") or "[]")
        targets = json.loads(out.get("targets") or "[]")
    except json.JSONDecodeError as exc:
        sweep.exit_code, sweep.message = (
            EXIT_UNEXPECTED,
            f"the reconcile step wrote unreadable outputs: {exc}",
        )
        return sweep
    sweep.reason = out.get("reason", "")
    sweep.calls = {
        key.replace("-", "_"): int(out.get(key) or 0) for key in ("ecr-calls", "git-calls", "git-clones")
    }
    if not apply:
        sweep.exit_code = EXIT_FAILURE if sweep.behind else EXIT_OK
        return sweep
    codes = []
    for i, target in enumerate(targets):
        outcome, failed = _outcome(result, i)
        sweep.updates.append(
            {
                "repo_url": target.get("repo_url"),
                "path": target.get("path"),
                "env": target.get("env", ""),
                "outcome": outcome,
                "ok": failed is None and outcome != "not run",
            }
        )
        if failed is not None:
            codes.append(_exit_of(failed))
    sweep.submitted = len(targets)
    if codes:
        sweep.exit_code = next(c for c in (EXIT_CONFIG, EXIT_TRANSIENT, EXIT_UNEXPECTED) if c in codes)
        sweep.message = f"{len(codes)} of {len(targets)} update(s) failed; see the updates in the JSON output"
    elif result.phase != "Succeeded":
        sweep.exit_code, sweep.message = EXIT_UNEXPECTED, f"the sweep ended {result.phase}: {result.message}"
    elif len(targets) < sweep.behind:
        sweep.exit_code = EXIT_TRANSIENT
        sweep.message = (
            f"{sweep.behind - len(targets)} target(s) behind were left for the next sweep (limit {limit})"
        )
    return sweep


# ---------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------


def _quiet(log: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """Only what went wrong: failed attempts and nodes (the table says the rest)."""

    def sink(record: dict[str, Any]) -> None:
        if record.get("phase") in ("Failed", "Error") or str(record.get("event", "")).startswith("zygote"):
            log(record)

    return sink


def run(args: argparse.Namespace) -> int:
    from imagebump.commands.run import step_environment
    from steps import reconcile
    from steps.rules import load_rules
    from workflows.local.logs import json_logger

    if not args.rules:
        raise ConfigError("--rules is required: the rules file that maps ECR repositories to overlays")
    concurrency = args.concurrency if args.concurrency is not None else reconcile.DEFAULT_CONCURRENCY
    if not 1 <= concurrency <= reconcile.MAX_CONCURRENCY:
        raise ConfigError(f"--concurrency {concurrency}: must be between 1 and {reconcile.MAX_CONCURRENCY}")
    try:
        rules_text = args.rules.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        raise ConfigError(f"--rules {args.rules}: cannot read it ({why})") from None
    load_rules(rules_text, str(args.rules))  # a bad file is refused here, naming the rule and field
    secrets = local_secrets(require_write=args.apply, why="`imagebump reconcile --apply` (it pushes)")
    log = json_logger(sys.stderr)
    region = args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    executor = build_executor(
        secrets=secrets,
        configmaps={"imagebump-rules": {"rules.yaml": rules_text}},
        env=step_environment(dict(os.environ), args.endpoint_url, region),
        log=log if args.verbose else _quiet(log),
        template=args.template,
        update_template=args.update_template,
    )
    sweep = run_sweep(executor, apply=args.apply, concurrency=concurrency)
    if sweep.message and not sweep.report:
        print(f"imagebump reconcile: {sweep.message}", file=sys.stderr)
        return sweep.exit_code
    from steps.reconcile import TargetState, render_table

    sys.stderr.write(render_table([TargetState(**t) for t in sweep.report]))
    tail = (
        f"{sweep.calls.get('ecr_calls', 0)} ECR call(s), {sweep.calls.get('git_clones', 0)} clone(s), "
        f"{sweep.calls.get('git_calls', 0)} Git call(s) in {sweep.seconds:.1f}s"
    )
    if args.apply:
        done = sum(1 for u in sweep.updates if u["ok"])
        print(
            f"applied: {sweep.submitted} target(s) behind submitted, {done} brought up to date; {tail}",
            file=sys.stderr,
        )
        for update in sweep.updates:
            print(
                f"  {update['env'] or '-'} {update['repo_url']}/{update['path']}: {update['outcome']}",
                file=sys.stderr,
            )
    else:
        print(f"dry run ({tail}); --apply updates the targets behind", file=sys.stderr)
    if sweep.message:
        print(f"imagebump reconcile: {sweep.message}", file=sys.stderr)
    print(json.dumps(sweep.summary(), indent=2))
    return sweep.exit_code


# ---------------------------------------------------------------------------------------------
# Every DURATION, inside `imagebump run --local`
# ---------------------------------------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_every(text: str) -> float:
    """``10m``, ``30s``, ``1h30m``, ``90`` (seconds) → seconds; ``0`` turns the sweep off."""
    value = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise ConfigError(
            f"--reconcile-every {text!r}: expected a duration like 10m, 30s or 1h (0 turns it off)"
        )
    return sum(float(n) * _UNITS[u] for n, u in parts)


class Sweeper:
    """Runs the sweep (with apply) every ``interval`` seconds in a thread, until :meth:`stop`.

    The first sweep comes one interval after :meth:`start`: while the process was down, pushes
    waited on the SQS queue (the local sensor deletes a message only once its workflow is done),
    so the sweep is for what the queue lost. Each sweep prints one line to ``out``; a sweep that
    fails is logged and the next one runs on schedule. :meth:`stop` lets a running sweep finish.
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
        self.sweeps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="reconcile-sweeper", daemon=True)

    def start(self) -> Sweeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sweep_once()

    def sweep_once(self) -> Sweep | None:
        self.sweeps += 1
        try:
            sweep = run_sweep(
                self.executor,
                apply=True,
                full=False,
                name=f"image-reconcile-local-{int(time.time())}-{self.sweeps}",
            )
        except Exception as exc:  # noqa: BLE001 - one failed sweep must not stop the intake
            self.log({"event": "sweep-failed", "message": f"{type(exc).__name__}: {exc}"})
            return None
        outcomes = [u["outcome"] for u in sweep.updates]
        line = (
            f"sweep {self.sweeps}: {sweep.behind} behind, {sweep.submitted} submitted"
            + (f" ({', '.join(outcomes)})" if outcomes else "")
            + f"  ({sweep.seconds:.1f}s)"
        )
        if sweep.message:
            line += f"  [{sweep.message}]"
        self.out(line)
        self.log(
            {
                "event": "sweep-finished",
                "behind": sweep.behind,
                "submitted": sweep.submitted,
                "exit_code": sweep.exit_code,
                "duration": round(sweep.seconds, 3),
                **sweep.calls,
            }
        )
        return sweep

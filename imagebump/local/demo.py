"""``imagebump demo``: build a local world, push one image, and report what imagebump did with it.

:func:`build_world` (:mod:`.world`) starts on 127.0.0.1 moto (the AWS side deployed from
``manifests/aws/cloudformation.yaml``, an ECR repository), a ``demo/manifests`` repository behind
``git http-backend`` with a staging (``mode: commit``) and a production (``mode: pr``) overlay, and
the rules; :func:`push_image` (:mod:`.drive`) pushes an image and sends its event through EventBridge;
:func:`run_until_done` runs the local sensor and executor; :func:`run_demo` does all three and
reports. Steps get only what the WorkflowTemplate gives them (the Git token as ``imagebump run
--local`` gives it, random per world, never printed). Reads and writes only under its temporary
directory and moto's memory.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagebump.local.demo_gate import gated_rules, watch_the_gate
from imagebump.local.demo_live import live_lines, simulated_argocd
from imagebump.local.demo_notify import demo_receiver, notification_lines
from imagebump.local.demo_repo import (
    HELM_ENV,
    HELM_VALUES_PATH,
    default_rules,
    helm_rule,
    helm_values_file,
    manifests_files,
)
from imagebump.local.drive import RunReport, push_image, run_until_done
from imagebump.local.outcome import TargetResult, failure_details, node, resolved_image, target_results
from imagebump.local.stack import quiet_request_logs
from imagebump.local.world import World, build_world


@dataclass
class DemoReport:
    """Everything the demo shows."""

    ok: bool
    error: str = ""
    event: dict[str, Any] = field(default_factory=dict)
    image: str = ""
    targets: list[TargetResult] = field(default_factory=list)
    staging_diff: str = ""
    production_diff: str = ""
    #: the Helm values file's commit (issue 34: a values-file target next to the overlays)
    helm_diff: str = ""
    timings: list[tuple[str, float]] = field(default_factory=list)
    total_seconds: float = 0.0
    setup_seconds: float = 0.0
    wall_seconds: float = 0.0
    kept: str = ""
    stack: dict[str, str] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)
    endpoint_url: str = ""
    git_base_url: str = ""
    #: ``--lost-push``: one push whose event was lost, then one reconcile run (empty when not asked)
    sweep: dict[str, Any] = field(default_factory=dict)
    #: why push → live did not run (no kubectl), else ""
    live_skipped: str = ""
    #: the messages the demo's webhook receiver got from the exit handler (issue 36)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    #: ``--gate``: the gate's last row for production (``waiting``, ``promoted``, …), and with
    #: ``--gate check`` each state the commit status ``imagebump/soak: staging`` took on its head
    gate: dict[str, Any] = field(default_factory=dict)
    gate_statuses: list[str] = field(default_factory=list)

    def step_seconds(self) -> dict[str, float]:
        """Stable keys for benchmarks: ``queue``, ``resolve-image``, ``edit-kustomize[ENV]``,
        ``commit-pr[ENV]``, ``workflow``, ``end-to-end``."""
        out: dict[str, float] = {}
        for name, seconds in self.timings:
            key = name.replace(" [", "[").split(" ")[0] if name[:1].isalpha() and "[" in name else name
            key = {
                "push → event picked up from SQS": "queue",
                "workflow (all steps)": "workflow",
                "end to end: ECR push → Git change": "end-to-end",
                "end to end: ECR push → workflow ended": "end-to-end",
            }.get(key, key)
            out[key] = round(seconds, 3)
        return out

    def summary(self) -> dict[str, Any]:
        """The machine-readable summary (``imagebump demo --json``)."""
        staging = next((t for t in self.targets if t.mode == "commit" and t.env != HELM_ENV), None)
        production = next((t for t in self.targets if t.mode == "pr"), None)
        return {
            "ok": self.ok,
            "error": self.error or None,
            "event_id": self.event.get("id"),
            "event": self.event or None,
            "image": self.image,
            "targets": [
                {
                    "env": t.env,
                    "repo_url": t.repo_url,
                    "path": t.path,
                    "mode": t.mode,
                    "provider": t.provider,
                    "decision": t.decision,
                    "action": t.action,
                    "commit_sha": t.commit_sha,
                    "branch": t.branch,
                    "pr_url": t.pr_url,
                    "reason": t.reason,
                    "steps": t.steps,
                }
                for t in self.targets
            ],
            "actions": {t.env or t.path: t.action for t in self.targets},
            "commit_sha": staging.commit_sha if staging else "",
            "branch": production.branch if production else "",
            "steps": [{"step": name, "seconds": round(seconds, 3)} for name, seconds in self.timings],
            "step_seconds": self.step_seconds(),
            "total_seconds": round(self.total_seconds, 3),
            "setup_seconds": round(self.setup_seconds, 3),
            "wall_seconds": round(self.wall_seconds, 3),
            "staging_diff": self.staging_diff,
            "production_diff": self.production_diff,
            "helm_diff": self.helm_diff,
            "details": self.details,
            "kept": self.kept or None,
            "aws_endpoint_url": self.endpoint_url,
            "git_base_url": self.git_base_url,
            "sweep": self.sweep or None,
            "live": {t.env: {"result": t.live, **t.live_outputs} for t in self.targets if t.live} or None,
            "notifications": self.notifications,
            "gate": self.gate or None,
            "gate_statuses": self.gate_statuses,
        }


def run_demo(
    *,
    keep: bool = False,
    tag: str = "1.4.2",
    timeout: float = 120,
    log_sink: Callable[[dict[str, Any]], None] | None = None,
    progress: Callable[[str], None] | None = None,
    lost_push: bool = False,
    wrong_manifest: bool = False,
    gate: str | bool | None = None,
) -> DemoReport:
    """Build the world, push one image, run until its event is done, and collect what to show.

    ``lost_push``: then push one more image while the sensor is stopped, purge the queue (its event
    is lost), and reconcile once (``imagebump reconcile --apply``'s template): both overlays follow.
    The staging commit is then watched until live in a simulated Argo CD (:mod:`.demo_live`);
    ``wrong_manifest`` makes that Argo CD run another image: the demo shows verify-live's alarm.
    ``gate`` (``wait`` or ``check``; True is ``wait``): production is gated on staging's short soak
    (:mod:`.demo_gate`); ``check`` records the soak status's states on the pull request's head.

    Never raises for a failing pipeline: the report says ``ok=False`` with the reason. Raises
    :class:`steps.domain.errors.ConfigError` when a prerequisite (git, git-http-backend) is missing.
    """
    say = progress or (lambda _msg: None)
    gate = "wait" if gate is True else (gate or None)
    wall = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="imagebump-demo-"))
    report = DemoReport(ok=False)
    try:
        say(
            "starting moto (AWS emulator), deploying manifests/aws/cloudformation.yaml, "
            "serving demo/manifests over git http-backend …"
        )
        with (
            quiet_request_logs(),
            build_world(
                tmp,
                log_sink=log_sink,
                files=_demo_files,
                rules=(lambda w: gated_rules(_demo_rules(w), gate=gate)) if gate else _demo_rules,
            ) as world,
            simulated_argocd(world, wrong_manifest=wrong_manifest, say=say) as live,
            demo_receiver(world, tmp / "notifications") as receiver,
        ):
            say(f"notifications: the exit handler sends to a webhook receiver on {receiver.url}")
            report.live_skipped = live.skipped
            world.executor().warm()  # as `imagebump run --local` does before its first message
            report.setup_seconds = time.monotonic() - wall
            report.stack = {"stack": world.stack_name, **world.stack_outputs}
            report.endpoint_url, report.git_base_url = world.moto.endpoint_url, world.git.base_url
            say(f"pushing {world.repository}:{tag} to ECR and sending its push event through EventBridge …")
            event_id = push_image(world, tag)
            pushed = world.pushes[event_id]
            say("running the local sensor and executor until the event is done …")
            run = run_until_done(world, 1, timeout=timeout)
            fill_report(report, world, run, event_id, pushed, timeout=timeout)
            report.notifications = list(receiver.messages)
            if wrong_manifest and any(t.live == "mismatch" for t in report.targets):
                report.ok, report.error = True, ""  # the alarm is what this variant shows
            if lost_push and report.ok:
                _lose_a_push_then_sweep(report, world, say)
            if gate and report.ok:  # issue 35: staging live → a short soak → the production PR
                statuses = report.gate_statuses if gate == "check" else None
                row = watch_the_gate(world, say, statuses=statuses)
                report.gate = dict((row or {}).get("gate") or {})
    finally:
        report.wall_seconds = time.monotonic() - wall
        if keep:
            report.kept = str(tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return report


def _demo_files(image: str) -> dict[str, str]:
    """The demo repository: the overlays, and the api chart's Helm values file."""
    return manifests_files(image) | {HELM_VALUES_PATH: helm_values_file(image)}


def _demo_rules(world: World) -> str:
    """The overlays' rules and one naming the Helm values file."""
    base = default_rules(world.git.base_url, world.registry, repository=world.repository)
    return base + helm_rule(world.git.base_url, world.registry, repository=world.repository)


def _lose_a_push_then_sweep(report: DemoReport, world: World, say: Callable[[str], None]) -> None:
    """Push a newer image with the sensor stopped, purge its event from the queue, reconcile once."""
    from imagebump.local.reconciler import run_reconcile

    lost = "1.5.0"
    say(
        f"pushing {world.repository}:{lost} with the sensor stopped, purging the queue (its event is lost), "
        "then one reconcile run …"
    )
    time.sleep(1.1)  # moto keeps push times in whole seconds: make this push the newest
    push_image(world, lost)
    world.client("sqs").purge_queue(QueueUrl=world.queue_url)
    reconciled = run_reconcile(world.reconcile_executor(), apply=True)
    report.sweep = {
        "lost_tag": lost,
        "behind": reconciled.behind,
        "submitted": reconciled.submitted,
        "updates": reconciled.updates,
        "seconds": round(reconciled.seconds, 3),
        **reconciled.calls,
        "message": reconciled.message,
    }
    if reconciled.exit_code != 0 or reconciled.submitted != len(report.targets):
        report.ok = False
        report.error = f"reconcile after a lost push did not bring every target up: {reconciled.message or reconciled.updates}"


def fill_report(
    report: DemoReport, world: World, run: RunReport, event_id: str, pushed: float, *, timeout: float
) -> None:
    """Fill ``report`` from one run of the sensor: the event, targets, diffs, timings, or the error."""
    outcome = next((o for o in run.outcomes if o.event_id == event_id), None)
    if outcome is None:
        depth, dlq = world.queue_depth(), world.queue_depth(world.dlq_url)
        report.error = (
            f"the push event {event_id} was not handled within {timeout:.0f}s "
            f"(sensor: {run.stats.received} received, {run.stats.skipped} filtered out; "
            f"queue {depth}, DLQ {dlq}); "
            "rerun with --verbose to see the sensor's log"
        )
        return
    report.event = outcome.event
    result = outcome.result
    resolve = node(result, "resolve-image")
    report.image = resolved_image(result)
    report.targets = target_results(result)
    # timings: queue pickup, each step, workflow, end to end
    submitted = next(
        (
            r["mono"]
            for r in world.logs
            if r.get("event") == "workflow-submitted" and r.get("event_id") == event_id
        ),
        None,
    )
    if submitted is not None:
        report.timings.append(("push → event picked up from SQS", submitted - pushed))
    if resolve is not None:
        report.timings.append(("resolve-image", resolve.duration))
    for t in report.targets:
        for step in ("edit-kustomize", "commit-pr"):
            if step in t.steps:
                report.timings.append((f"{step} [{t.env or t.path}]", t.steps[step]))
    report.timings.append(("workflow (all steps)", result.duration))
    report.total_seconds = outcome.finished - pushed
    done = "Git change" if result.phase == "Succeeded" else "workflow ended"
    report.timings.append((f"end to end: ECR push → {done}", report.total_seconds))

    if result.phase != "Succeeded":
        depth, dlq = world.queue_depth(), world.queue_depth(world.dlq_url)
        report.details = failure_details(result)
        report.error = (
            f"the workflow for event {event_id} ended {result.phase}; its message stays on the queue "
            f"({depth} there, {dlq} in the DLQ): SQS redelivers it, and after maxReceiveCount receives the "
            "redrive policy moves it to the dead-letter queue. Failed steps:\n"
            + "\n".join(f"  - {line}" for line in report.details)
        )
        return
    if not report.targets:
        reason = resolve.outputs.get("reason", "") if resolve is not None else ""
        report.error = f"the event matched no target: {reason or 'no rule matched'}"
        return
    problems = []
    for t in report.targets:
        if t.mode == "commit":
            if t.action != "committed" or not t.commit_sha:
                problems.append(f"{t.env}: expected a commit, got {t.action or t.phase} ({t.reason})")
            elif t.env == HELM_ENV:
                report.helm_diff = world.show(t.commit_sha)
            else:
                report.staging_diff = world.show(t.commit_sha)
        elif t.mode == "pr":
            if not t.branch or t.action not in ("pr-created", "pr-updated"):
                got = t.action or t.phase
                problems.append(f"{t.env}: expected a pull request branch, got {got} ({t.reason})")
            else:
                report.production_diff = world.branch_diff(t.branch)
    if problems:
        report.error = "; ".join(problems)
        return
    report.ok = True


def render_report(report: DemoReport) -> str:
    """The demo's human-readable output: short headed sections, both diffs verbatim, a timing table."""
    out: list[str] = []

    def section(title: str) -> None:
        out.append("")
        out.append(f"== {title} " + "=" * max(3, 72 - len(title)))

    if report.stack:
        section("AWS side (moto, from manifests/aws/cloudformation.yaml)")
        out.append(f"stack      {report.stack.get('stack', '')}")
        out.append(f"queue      {report.stack.get('QueueUrl', '')}")
        out.append(f"DLQ        {report.stack.get('DeadLetterQueueUrl', '')}")
        out.append(f"rule       {report.stack.get('RuleArn', '')}")
    if report.event:
        section("1. The ECR push event (EventBridge → SQS)")
        out.append(json.dumps(report.event, indent=2))
    if report.image:
        out.append(f"\nresolved image: {report.image}")
    if report.targets:
        section("2. Matched targets")
        width = max(len(t.env or "-") for t in report.targets)
        for t in report.targets:
            where = t.commit_sha[:12] if t.action == "committed" else (t.branch or "")
            out.append(f"{(t.env or '-'):<{width}}  mode={t.mode:<6} {t.repo_url}/{t.path}")
            did = t.action or t.phase or "?"
            out.append(f"{'':<{width}}  → {t.decision or '?'} → {did} {where}".rstrip())
            if t.message:
                out.append(f"{'':<{width}}  ! {t.message}")
    if report.staging_diff:
        section("3. Staging: the commit on main (git show)")
        out.append(report.staging_diff.rstrip("\n"))
    if report.helm_diff:
        section("3b. Helm values: the commit on main (a values file, next to the kustomization)")
        out.append(report.helm_diff.rstrip("\n"))
    if report.production_diff:
        branch = next((t.branch for t in report.targets if t.mode == "pr"), "")
        section("4. Production: the pull request branch vs main (git diff main...BRANCH)")
        out.append(f"branch {branch}")
        out.append(report.production_diff.rstrip("\n"))
    if report.timings:
        section("5. Timing")
        width = max(len(name) for name, _ in report.timings)
        out.append(f"{'step':<{width}}  seconds")
        out.append(f"{'-' * width}  -------")
        for name, seconds in report.timings:
            out.append(f"{name:<{width}}  {seconds:7.2f}")
        out.append(f"\n(setup {report.setup_seconds:.1f}s; whole demo {report.wall_seconds:.1f}s)")
    if any(t.live for t in report.targets) or report.live_skipped:
        section("Push → live (simulated Argo CD)")
        out.extend(live_lines(report.targets, report.live_skipped))
    if report.notifications or report.targets:
        section("Notifications (the exit handler → a webhook receiver on 127.0.0.1)")
        out.extend(notification_lines(report.notifications))
    if report.gate:
        section("Promotion gate: production waits for staging's soak (promoteAfter)")
        out.append(f"production: {report.gate.get('state', '')} (gated on {report.gate.get('env', '')})")
        if report.gate_statuses:
            out.append(
                "commit status imagebump/soak: staging on the pull request's head: "
                + " → ".join(report.gate_statuses)
            )
    if report.sweep:
        s = report.sweep
        section("6. A push whose event was lost, then one reconcile run (imagebump reconcile --apply)")
        outcomes = ", ".join(f"{u['env']} {u['outcome']}" for u in s["updates"]) or "nothing to do"
        out.append(
            f"pushed {s['lost_tag']}, queue purged → reconcile: {s['behind']} behind → {outcomes} "
            f"({s['seconds']:.1f}s; {s.get('ecr_calls', 0)} ECR calls, {s.get('git_clones', 0)} clone)"
        )
    section("Result")
    if report.ok:
        out.append(
            "OK: one ECR push became a staging commit, a production pull request branch"
            + (" and a Helm values commit" if report.helm_diff else "")
            + (
                ", and a push whose event was lost followed within one reconcile run."
                if report.sweep
                else "."
            )
        )
    else:
        out.append(f"FAILED: {report.error}")
    if any(t.live == "mismatch" for t in report.targets):
        out.append(
            "The simulated Argo CD ran another image: verify-live raised the alarm (the Workflow failed)."
        )
    if report.kept:
        out.append(f"kept: {report.kept} (bare repository under git/, rules.yaml)")
    else:
        out.append("cleaned up: servers stopped, temporary files removed (--keep keeps them).")
    return "\n".join(out).lstrip("\n") + "\n"


__all__ = ["DemoReport", "fill_report", "render_report", "run_demo"]

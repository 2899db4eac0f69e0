"""CronWorkflow ``image-reconcile``: every 10 minutes, bring every overlay behind to its newest allowed image.

Wiring only; the work is :func:`steps.reconcile.step.run` and, for each target it finds behind, the
``update-target`` template of the ``image-update`` WorkflowTemplate by ``templateRef`` (the same
edit-kustomize and commit-pr, under the same per-overlay mutex as events); then, with verify-live
on, ``live-report`` (the live states). ``concurrencyPolicy: Forbid``; its deadline:
:func:`workflow_deadline_seconds`. Metrics ``imagebump_reconcile_targets{state,env}`` and
``imagebump_reconcile_updates_total{env}`` (docs/operations.md, "Metrics").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hera.workflows import (
    ConfigMapVolume,
    CronWorkflow,
    Env,
    Parameter,
    Step,
    Steps,
    Suspend,
    script,
)
from hera.workflows import models as m

from steps.reconcile import report as reconcile_report
from steps.reconcile import step as reconcile
from workflows import common as c
from workflows import image_update
from workflows import names as n
from workflows import notify as exit_notify
from workflows import verify_live as live

NAME = n.IMAGE_RECONCILE
#: Every 10 minutes: the bound on how long a push whose event was lost stays unreflected.
SCHEDULE = "*/10 * * * *"
#: A reconcile run that could not start within this many seconds of its slot is skipped (the next one comes).
STARTING_DEADLINE_SECONDS = 300
#: At most this many update-target pods at once (a first reconcile run may find hundreds behind).
PARALLELISM = 8
DESCRIPTION = (
    "Every overlay a rule maps an ECR repository to, compared with the newest image ECR holds that the "
    "rule allows; those behind are updated by image-update's update-target (a push whose event was lost "
    "is reflected within one reconcile run)."
)
#: The referenced template: update-target of the image-update WorkflowTemplate.
UPDATE_TEMPLATE = "update-target"

#: The counter counts a target only when update-target really changed something (a commit, or a
#: pull request created or updated): not when edit-kustomize found it current, nor when commit-pr
#: was ``unchanged`` (an event that raced reconcile won).
#: (``&&`` binds tighter than ``||`` in govaluate: one clause per action, no parentheses.)
UPDATED_WHEN = " || ".join(
    f"{{{{status}}}} == Succeeded && '{{{{outputs.parameters.{image_update.UPDATE_ACTION}}}}}' == '{a}'"
    for a in reconcile_report.UPDATED_ACTIONS
)

ENV_LABEL = "{{=inputs.parameters.env != '' ? inputs.parameters.env : 'none'}}"

#: The reconcile pod's deadline per attempt (its retry window is c.retry_transient's).
RECONCILE_DEADLINE_SECONDS = 1200
#: Holders of one overlay's mutex the Workflow deadline is sized for, reconcile's own update
#: included: one update ahead (an overlay is busy when its events are being handled, and those
#: move it forward anyway), then its own. A deeper queue is left to the next reconcile run.
MUTEX_HOLDS = 2


@dataclass(frozen=True)
class ReconcileVariant:
    """What makes one CronWorkflow of this wiring: ``image-reconcile`` (the default), or the promotion
    gate's ``image-gate`` (:mod:`workflows.image_gate`): its reconcile step given ``gated: true`` and,
    beside its counts, ``count_step`` (a pod-less template counting each of the ``gates`` output)."""

    name: str = NAME
    description: str = DESCRIPTION
    schedule: str = SCHEDULE
    starting_deadline_seconds: int = STARTING_DEADLINE_SECONDS
    gated: bool = False
    #: (step name, template) counting each item of the reconcile step's ``gates`` output
    count_gates: tuple[str, Any] | None = None


def _seconds(duration: str) -> int:
    """Seconds of an Argo duration as rendered here ("10s", "5m", "1h")."""
    match = re.fullmatch(r"(\d+)([smh])", duration)
    if not match:
        raise ValueError(f"unsupported duration {duration!r}")
    return int(match[1]) * {"s": 1, "m": 60, "h": 3600}[match[2]]


def pod_hold_seconds(template: dict[str, Any]) -> int:
    """Longest a rendered pod template runs: without retries its ``activeDeadlineSeconds``; with
    them ``backoff.maxDuration`` from the first attempt's start, past which Argo starts no attempt
    and ends any running one (argo-workflows ``operator.go`` ``processNodeRetries``; the first attempt
    is bounded by its own deadline, which :func:`workflows.common.retry_transient` keeps within it)."""
    retry = template.get("retryStrategy") or {}
    deadline = int(template["activeDeadlineSeconds"])
    return max(deadline, _seconds(retry["backoff"]["maxDuration"])) if retry else deadline


def update_hold_seconds() -> int:
    """Longest one ``update-target`` holds its overlay's mutex: each of its steps at its worst."""
    templates = {t["name"]: t for t in image_update.build().to_dict()["spec"]["templates"]}
    return sum(
        pod_hold_seconds(templates[step["template"]])
        for group in templates[UPDATE_TEMPLATE]["steps"]
        for step in group
    )


def workflow_deadline_seconds() -> int:
    """Reconcile's deadline: the reconcile step at its worst, then :data:`MUTEX_HOLDS` worst holds,
    then verify-live of reconcile's own commit at its worst (it runs outside the mutex).

    Deadlines: the pods carry their own (per attempt, with a retry window); ``sweep-target`` and the
    referenced ``update-target`` carry none, since a deadline there would count the time queued on
    the overlay's mutex. The Workflow deadline counts from reconcile's start, queue included, and is
    sized (:func:`workflow_deadline_seconds`) for the worst reconcile is meant to wait for: the
    reconcile step using all its retries, then a target that waits behind one update of its overlay
    using all of its retries and deadlines and then does the same itself. It is the least that covers
    this, because with ``concurrencyPolicy: Forbid`` a running reconcile run skips the next slots. A target
    still queued when it expires fails ("Step exceeded its deadline"; counted as
    ``imagebump_updates_total{result="error"}``) and the Workflow fails; the next reconcile run finds the
    overlay still behind and updates it.
    """
    reconcile_hold = _seconds(_reconcile_retry().backoff.max_duration)
    return reconcile_hold + MUTEX_HOLDS * update_hold_seconds() + live.VERIFY_HOLD_SECONDS


def _reconcile_retry():
    return c.retry_transient(limit=2, deadline=RECONCILE_DEADLINE_SECONDS)


def _reconcile_template(gated: bool = False):
    return script(
        name="reconcile",
        constructor=c.step_runner(),
        image=c.IMAGE,
        service_account_name=n.SA_ECR_READER,
        outputs=c.outputs_of(
            reconcile.ReconcileOutput,
            {
                "targets": "[]",
                "report": "[]",
                "counts": "[]",
                "behind": "0",
                "ecr-calls": "0",
                "git-calls": "0",
                "git-clones": "0",
                **({"gates": "[]"} if gated else {}),
            },
        ),
        env=[
            *c.base_env(),
            Env(name="IMAGEBUMP_RULES_FILE", value=f"{n.RULES_DIR}/{n.RULES_KEY}"),
            c.read_token_env(),
            *exit_notify.messages_env(),  # issue 36: the promotion gate's live-before / blocked
        ],
        env_from=c.base_env_from(),
        volumes=[
            c.tmp_volume(),
            ConfigMapVolume(
                name=n.RULES_CONFIGMAP,
                mount_path=n.RULES_DIR,
                read_only=True,
                items=[m.KeyToPath(key=n.RULES_KEY, path=n.RULES_KEY)],
            ),
            c.read_token_volume(),
            exit_notify.messages_volume(),
        ],
        security_context=c.CONTAINER_SECURITY_CONTEXT,
        resources=c.resources(memory_limit="1Gi"),
        retry_strategy=_reconcile_retry(),
        active_deadline_seconds=RECONCILE_DEADLINE_SECONDS,
    )(reconcile.run)


def _count_template(
    name: str = "count-targets",
    metric: str = "imagebump_reconcile_targets",
    # the help texts keep "sweep": see workflows.verify_live.LIVE_STATES_HELP
    help_text: str = "targets per state (behind, current, ahead, proposed, unknown, held, pinned, branch-taken) and env at the last sweep",
) -> Suspend:
    """A pod-less node per (state, env) that sets the gauge (a suspend of zero seconds: no pod)."""
    return c.MeteredSuspend(
        name=name,
        duration="0",
        inputs=[Parameter(name="state"), Parameter(name="env"), Parameter(name="count")],
        metrics=m.Metrics(
            prometheus=[
                m.Prometheus(
                    name=metric,
                    help=help_text,
                    labels=[
                        m.MetricLabel(key="state", value="{{inputs.parameters.state}}"),
                        m.MetricLabel(key="env", value="{{inputs.parameters.env}}"),
                    ],
                    gauge=m.Gauge(value="{{inputs.parameters.count}}", realtime=False),
                )
            ]
        ),
    )


def _live_report_steps(live_states, count_live) -> Steps:
    """``live-report``: the live states of the current targets, then their gauge."""
    with Steps(name="live-report") as live_report:
        live_states(name="live-states", arguments={"targets": "{{inputs.parameters.targets}}"})
        Step(
            name="count-live",
            template=count_live,
            arguments={"state": "{{item.state}}", "env": "{{item.env}}", "count": "{{item.count}}"},
            with_param="{{steps.live-states.outputs.parameters.counts}}",
        )
    live_report.inputs = [Parameter(name="targets")]
    return live_report


def _sweep_target_steps() -> Steps:
    """``sweep-target``: image-update's update-target for one behind target, then verify-live;
    counted when it really changed something."""
    with Steps(
        name="sweep-target",
        inputs=c.target_inputs(),
        outputs=[image_update.update_action_output(UPDATE_TEMPLATE)],
        metrics=c.counter(
            "imagebump_reconcile_updates_total",
            "targets a sweep found behind and updated (a push whose event was lost), by env",
            UPDATED_WHEN,
            {"env": ENV_LABEL},
        ),
    ) as sweep_target:
        Step(
            name=UPDATE_TEMPLATE,
            template_ref=m.TemplateRef(name=image_update.NAME, template=UPDATE_TEMPLATE),
            arguments=c.target_passed_on(),
        )
        Step(
            name="verify-live",
            template_ref=m.TemplateRef(name=image_update.NAME, template="verify-live"),
            arguments=live.verify_live_arguments(UPDATE_TEMPLATE),
            when=live.when_committed(UPDATE_TEMPLATE),
        )
    return sweep_target


def _main_steps(sweep, count, sweep_target: Steps, live_report: Steps, variant: ReconcileVariant) -> Steps:
    """``main``: the reconcile step, then at once its counts, the behind targets' updates and the
    live report of the current ones (and, for the gate, the count of each gate decided)."""
    with Steps(name="main", parallelism=PARALLELISM) as main:
        sweep(
            name="reconcile",
            arguments={
                "concurrency": "{{workflow.parameters.concurrency}}",
                "limit": "{{workflow.parameters.limit}}",
                "full": "{{workflow.parameters.full}}",
                **({"gated": "true"} if variant.gated else {}),
            },
        )
        with main.parallel():
            Step(
                name="count-targets",
                template=count,
                arguments={"state": "{{item.state}}", "env": "{{item.env}}", "count": "{{item.count}}"},
                with_param="{{steps.reconcile.outputs.parameters.counts}}",
            )
            Step(
                name="sweep-target",
                template=sweep_target,
                arguments=c.target_fan_out(),
                with_param="{{steps.reconcile.outputs.parameters.targets}}",
                when="'{{workflow.parameters.apply}}' == 'true'",
            )
            Step(
                name="live-report",
                template=live_report,
                arguments={"targets": "{{steps.reconcile.outputs.parameters.current-targets}}"},
                when="'{{workflow.parameters.verify-live}}' == 'true'",
            )
            if variant.count_gates is not None:
                step_name, template = variant.count_gates
                Step(
                    name=step_name,
                    template=template,
                    arguments={k: f"{{{{item.{k}}}}}" for k in ("result", "env", "seconds")},
                    with_param="{{steps.reconcile.outputs.parameters.gates}}",
                )
    return main


def build(variant: ReconcileVariant | None = None) -> CronWorkflow:
    """The ``image-reconcile`` CronWorkflow, or another :class:`ReconcileVariant` of the same wiring (Hera
    object; ``.to_dict()`` is the manifest)."""
    variant = variant or ReconcileVariant()
    with CronWorkflow(
        name=variant.name,
        namespace=n.NAMESPACE,
        labels=dict(n.LABELS),
        annotations={"workflows.argoproj.io/description": variant.description},
        schedules=[variant.schedule],
        timezone="UTC",
        concurrency_policy="Forbid",
        starting_deadline_seconds=variant.starting_deadline_seconds,
        successful_jobs_history_limit=3,
        failed_jobs_history_limit=5,
        entrypoint="main",
        arguments=[
            Parameter(
                name="apply",
                value="true",
                description="`false`: only report (reconcile's table is in the reconcile pod's log)",
            ),
            Parameter(
                name="concurrency",
                value=str(reconcile.DEFAULT_CONCURRENCY),
                description="ECR calls and Git repositories reconcile works on at once",
            ),
            Parameter(
                name="limit",
                value=str(reconcile.DEFAULT_LIMIT),
                description="at most this many targets updated per reconcile run; the rest wait for the next",
            ),
            Parameter(
                name="full", value="false", description="`true`: the report output lists current targets too"
            ),
            *live.live_parameters(),
        ],
        service_account_name=n.SA_WORKFLOW,
        active_deadline_seconds=workflow_deadline_seconds(),
        **c.housekeeping(seconds_after_success=3600),
        workflow_metadata=m.WorkflowMetadata(labels=dict(n.LABELS)),
    ) as cw:
        sweep = _reconcile_template(variant.gated)
        count = _count_template()
        count_live = _count_template("count-live", live.LIVE_STATES_METRIC, live.LIVE_STATES_HELP)
        live_states = live.live_states_template()

        live_report = _live_report_steps(live_states, count_live)
        sweep_target = _sweep_target_steps()
        _main_steps(sweep, count, sweep_target, live_report, variant)  # adds count_gates' template
    return cw

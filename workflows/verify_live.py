"""The ``verify-live`` step template (push → live) and the workflow parameters it reads.

Wiring only; the work is :mod:`steps.verify_live`. Used by the WorkflowTemplate ``image-update``
(after its ``update-target``, outside the overlay's mutex) and, by ``templateRef``, by reconcile
``image-reconcile``. Runs as ServiceAccount ``imagebump-live`` (workflows/rbac.py: get/list/watch
Applications in Argo CD's namespace, no write) with the optional read token and, for a refresh
through Argo CD's API server (``IMAGEBUMP_ARGOCD_REFRESH=api``), the optional Argo CD account token
(Secret ``imagebump-argocd``). Metrics (the controller adds the prefix ``argo_workflows_``):
``imagebump_live_total{result,env}`` and ``imagebump_push_to_live_seconds{env}``.
"""

from __future__ import annotations

from hera.workflows import Env, Parameter, SecretVolume, script
from hera.workflows import models as m

from steps.live_states import step as live_states
from steps.verify_live import step as verify_live
from workflows import common as c
from workflows import names as n

#: ``when`` of a per-step metric: only the final, successful result (as in image_update).
FINAL_SUCCESS = "{{status}} == Succeeded"
ENV_LABEL = "{{=inputs.parameters.env != '' ? inputs.parameters.env : 'none'}}"

LIVE_LATENCY_METRIC = "imagebump_push_to_live_seconds"
LIVE_METRIC = "imagebump_live_total"
#: Buckets (seconds) of the push → live histogram: Argo CD's sync and a rollout come on top.
LIVE_LATENCY_BUCKETS = [30, 60, 120, 180, 300, 600, 900, 1800, 3600]
LIVE_LATENCY_HELP = (
    "Seconds from the ECR push to the new image running healthy in every Argo CD Application "
    "deploying the overlay (verify-live's result live), by env."
)
LIVE_HELP = (
    "verify-live's outcome for each committed target, by env: live, idle (synced and healthy, no Pod "
    "runs the image now), mismatch (Argo CD runs another image than Git holds), timeout, "
    "no-application, manual-sync or superseded."
)
LIVE_STATES_METRIC = "imagebump_live_targets"
#: Metric help texts keep the word "sweep" (issue 32 made "reconcile" the one word): Argo Workflows
#: requires one help per metric name (argoproj/argo-workflows#3613), so a controller that already
#: registered the metric would refuse a new help; these stay as installed.
LIVE_STATES_HELP = (
    "current targets per live state in Argo CD (live, idle, syncing, mismatch, no-application, unknown) "
    "and env at the last sweep"
)
#: Default wait of verify-live (workflow parameter ``live-timeout``).
LIVE_TIMEOUT = verify_live.DEFAULT_TIMEOUT


#: The pod's deadline per attempt: the wait is bounded by ``live-timeout`` (default 15 min) and by
#: the step's own cap (a longer ``live-timeout`` ends in ``timeout`` at the cap, an outcome, before
#: this backstop for a wedged pod). Kept small: reconcile (concurrencyPolicy Forbid) runs
#: verify-live too, and its deadline stays within 2 h.
VERIFY_DEADLINE_SECONDS = int(verify_live.MAX_WAIT_SECONDS) + 60
#: Longest one verify-live runs: its retry window and a last attempt's whole deadline (its maxDuration).
VERIFY_HOLD_SECONDS = c.RETRY_WINDOW_SECONDS + VERIFY_DEADLINE_SECONDS


def when_committed(update_step: str) -> str:
    """verify-live runs when ``update_step`` (an ``update-target``) pushed a commit to the base
    branch and the workflow parameter ``verify-live`` is ``true``.

    Every operand is quoted: Argo's ``when`` is govaluate, which reads an unquoted ``pr-created``
    (another action) as ``pr - created`` and errors the step (argo-workflows
    ``workflow/controller/steps.go`` ``shouldExecute``; Knetic/govaluate ``parsing.go``)."""
    return (
        f"'{{{{steps.{update_step}.outputs.parameters.action}}}}' == 'committed' "
        "&& '{{workflow.parameters.verify-live}}' == 'true'"
    )


def argocd_token_volume() -> SecretVolume:
    """The optional Argo CD account token (Secret ``imagebump-argocd``, key ``token``) for a refresh
    through Argo CD's API server; absent, an empty directory (no refresh unless configured)."""
    return SecretVolume(
        name="argocd-token",
        secret_name=n.ARGOCD_SECRET,
        mount_path=n.ARGOCD_DIR,
        read_only=True,
        optional=True,
        default_mode=0o440,
    )


def verify_live_template():
    """The verify-live script template (one per Workflow definition that runs it)."""
    return script(
        name="verify-live",
        constructor=c.step_runner(),
        image=c.IMAGE,
        service_account_name=n.SA_LIVE,
        inputs=[Parameter(name="env", default="", description="the target's env, for metrics")],
        outputs=c.outputs_of(verify_live.VerifyLiveOutput, {"result": "error", "applications": "[]"}),
        env=[
            *c.base_env(),
            c.read_token_env(),
            Env(name="IMAGEBUMP_ARGOCD_NAMESPACE", value=n.ARGOCD_NAMESPACE),
            Env(name="IMAGEBUMP_ARGOCD_TOKEN_FILE", value=f"{n.ARGOCD_DIR}/token"),
        ],
        env_from=c.base_env_from(),
        volumes=[
            c.tmp_volume(),
            c.read_token_volume(),
            argocd_token_volume(),
        ],
        security_context=c.CONTAINER_SECURITY_CONTEXT,
        resources=c.resources(),
        retry_strategy=c.retry_transient(deadline=VERIFY_DEADLINE_SECONDS),
        # The wait itself is bounded by live-timeout; this is the backstop for a wedged pod.
        active_deadline_seconds=VERIFY_DEADLINE_SECONDS,
        metrics=m.Metrics(
            prometheus=[
                m.Prometheus(
                    name=LIVE_METRIC,
                    help=LIVE_HELP,
                    labels=[
                        m.MetricLabel(key="result", value="{{outputs.parameters.result}}"),
                        m.MetricLabel(key="env", value=ENV_LABEL),
                    ],
                    # A mismatch fails the step (exit 2, not retried): counted once, with its outputs.
                    when=f"{FINAL_SUCCESS} || '{{{{outputs.parameters.result}}}}' == 'mismatch'",
                    counter=m.Counter(value="1"),
                ),
                m.Prometheus(
                    name=LIVE_LATENCY_METRIC,
                    help=LIVE_LATENCY_HELP,
                    labels=[m.MetricLabel(key="env", value=ENV_LABEL)],
                    when=f"{FINAL_SUCCESS} && '{{{{outputs.parameters.result}}}}' == 'live'",
                    histogram=m.Histogram(
                        value="{{outputs.parameters.seconds-push-to-healthy}}", buckets=LIVE_LATENCY_BUCKETS
                    ),
                ),
            ]
        ),
    )(verify_live.run)


def verify_live_arguments(update_step: str) -> dict[str, str]:
    """verify-live's arguments after the step ``update_step`` (an ``update-target``) committed."""
    outputs = f"steps.{update_step}.outputs.parameters"
    return {
        "target": "{{inputs.parameters.target}}",
        "plan": f"{{{{{outputs}.plan}}}}",
        "commit_sha": f"{{{{{outputs}.commit-sha}}}}",
        "seconds_to_commit": f"{{{{{outputs}.seconds-since-push}}}}",
        "live_timeout": "{{workflow.parameters.live-timeout}}",
        "env": "{{inputs.parameters.env}}",
    }


def live_parameters() -> list[Parameter]:
    """The workflow parameters verify-live reads (image-update and image-reconcile both declare them)."""
    return [
        Parameter(
            name="verify-live",
            value="true",
            description="`true`: after a commit, watch Argo CD until the new image runs (verify-live); "
            "`false` turns it off",
        ),
        Parameter(
            name="live-timeout",
            value=LIVE_TIMEOUT,
            description="how long verify-live waits for Argo CD (15m, 90s, 1h)",
        ),
    ]


def live_states_template():
    """Reconcile's live-states script template: reads Applications and Git, writes nothing."""
    return script(
        name="live-states",
        constructor=c.step_runner(),
        image=c.IMAGE,
        service_account_name=n.SA_LIVE,
        outputs=c.outputs_of(
            live_states.LiveStatesOutput, {"states": "[]", "counts": "[]", "mismatches": "0"}
        ),
        env=[
            *c.base_env(),
            c.read_token_env(),
            Env(name="IMAGEBUMP_ARGOCD_NAMESPACE", value=n.ARGOCD_NAMESPACE),
        ],
        env_from=c.base_env_from(),
        volumes=[
            c.tmp_volume(),
            c.read_token_volume(),
        ],
        security_context=c.CONTAINER_SECURITY_CONTEXT,
        resources=c.resources(),
        retry_strategy=c.retry_transient(limit=2, deadline=600),
        active_deadline_seconds=600,
    )(live_states.run)

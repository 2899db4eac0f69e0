"""WorkflowTemplate ``image-update``: an ECR push (or a manual image) → one Git change per overlay.

Wiring only; the work is in :mod:`steps`. ``main``: ``resolve-image`` (event or image → targets),
then per target ``deliver-target``: ``update-target`` under the overlay's mutex (edit-kustomize,
then commit-pr when the plan changes something), then, outside the mutex, ``verify-live`` when
commit-pr committed (workflow parameters ``verify-live``, ``live-timeout``). docs/concepts.md draws
it. Reads the rules ConfigMap (resolve-image), the Git write token Secret (commit-pr only), the
optional read-token Secret (edit-kustomize, verify-live) and, for verify-live's optional refresh
through Argo CD's API server, the ``imagebump-argocd`` token; writes nothing itself (no write on
any Application).
"""

from __future__ import annotations

from hera.workflows import (
    ConfigMapVolume,
    Env,
    Parameter,
    SecretEnv,
    SecretVolume,
    Step,
    Steps,
    WorkflowTemplate,
    script,
)
from hera.workflows import models as m

from steps.commit_pr import step as commit_pr
from steps.edit_kustomize import step as edit_kustomize
from steps.resolve_image import step as resolve_image
from workflows import common as c
from workflows import names as n
from workflows import notify as exit_notify
from workflows import verify_live as live

NAME = n.IMAGE_UPDATE

#: What serialises writers: one overlay of one repository (= steps.domain.models.Target.key). The fan-outs
#: pass the target's ``repo_id`` as ``repo-url``: one spelling per repository, so two rules that
#: write it differently (``Acme/GitOps.git``, ``acme/gitops``) take one lock.
#: Argo ≥ 3.6 splits lock keys as `<ns>/Mutex/<name>` with SplitN(3), so '/' and ':' in the
#: name are kept intact (workflow/sync/lock_name.go, DecodeLockName).
MUTEX_NAME = "{{inputs.parameters.repo-url}}/{{inputs.parameters.path}}"

#: Buckets (seconds) of the push → change latency histogram.
LATENCY_BUCKETS = [5, 10, 20, 30, 60, 120, 300, 600, 1800]

EVENT_HELP = (
    "The raw EventBridge event of an ECR push (the SQS message body), as the Sensor passes it. "
    "Leave empty when submitting by hand with `image`."
)
IMAGE_HELP = (
    "Manual run: an image reference ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:TAG][@DIGEST]. "
    "Used when `event` is empty."
)


#: Metric label for the target's env; Prometheus label values must not be empty.
ENV_LABEL = "{{=inputs.parameters.env != '' ? inputs.parameters.env : 'none'}}"

#: Custom metrics as Prometheus shows them: the controller's exporter prefixes every custom metric
#: with its namespace ``argo_workflows`` and adds no ``_total`` suffix of its own
#: (argo-workflows v4.0.10 workflow/controller/controller.go ``metrics.New(..., `argo_workflows`)``,
#: util/telemetry/exporter_prometheus.go ``WithNamespace``, ``WithoutCounterSuffixes``).
METRIC_PREFIX = "argo_workflows_"
UPDATES_METRIC = "imagebump_updates_total"
DECISIONS_METRIC = "imagebump_decisions_total"
LATENCY_METRIC = "imagebump_push_to_change_seconds"
#: One help text per metric name: the controller refuses a second help for the same name.
UPDATES_HELP = (
    "Final outcome of each target update, by env: committed, pr-created, pr-updated, unchanged or "
    "branch-taken (a person pushed to the PR branch: left to them) (commit-pr succeeded), or error (edit-kustomize or commit-pr failed after all its retries, "
    "or the update waited past the Workflow deadline). Retried attempts are not counted."
)
DECISIONS_HELP = (
    "edit-kustomize's decision for each target, by env: update, current, stale, held (a person's "
    "rollback or an imagebump:hold marker) or pinned (newName names another repository). Counted once per "
    "target when the step succeeds; a target whose edit failed after all retries is counted as "
    "result=error in imagebump_updates_total. The promotion gate's decisions (promoteAfter) too: waiting "
    "(a push to a gate: wait target, once, by image-update), then promoted or blocked (once, by image-gate)."
)
#: The pod-less template that counts a decision taken outside a pod (the gate's ``waiting``).
COUNT_DECISION = "count-decision"
LATENCY_HELP = "Seconds from the ECR push to the end of a successful commit-pr, by env."

#: ``when`` of a per-step metric: only the final, successful result (the retry node's status).
#: Failed attempts are evaluated too but have status Failed/Error. (Same form as upstream's
#: docs/metrics.md example; ``when`` is govaluate with bare words read as strings.)
FINAL_SUCCESS = "{{status}} == Succeeded"

# Deadlines sit where the work happens: every pod template has ``activeDeadlineSeconds`` (per
# attempt; Argo puts it on the pod, which is created only once the overlay's mutex is held) and a
# retry window (``backoff.maxDuration``). The Workflow-level deadline counts from the Workflow's
# start, so it includes time queued on an overlay's mutex (argo-workflows v4.0.10
# workflow/controller/operator.go ``getWorkflowDeadline`` and
# ``failNodesWithoutCreatedPodsAfterDeadlineOrShutdown``).
# Metrics count final outcomes, not attempts: the controller evaluates a template's metrics for
# every failed retry attempt as well as for the final result (operator.go ``executeTemplate``), so
# the per-step counters are emitted only when ``status`` is ``Succeeded`` and a failure after all
# retries is counted once, by the ``update-target`` template (which is never retried).

#: Workflow deadline: a backstop for a pod that never starts, not a budget for work. It counts
#: from the Workflow's start, so it includes time queued behind other updates of the same
#: overlay; 6 h covers 10 targets ahead in the queue that each hold the mutex as long as their
#: retries and pod deadlines allow (35 min; tests/workflows/test_image_update.py computes it), and
#: 25 min more the verification of the target's own commit (verify-live, outside the mutex).
WORKFLOW_DEADLINE_SECONDS = 6 * 3600 + live.VERIFY_HOLD_SECONDS


def _env_input() -> Parameter:
    # Extra input (not a function argument; Hera's runner ignores it) for metric labels.
    return Parameter(name="env", default="", description="the target's env, for metrics")


def _resolve_image_template():
    return script(
        name="resolve-image",
        constructor=c.step_runner(),
        image=c.IMAGE,
        service_account_name=n.SA_ECR_READER,
        outputs=c.outputs_of(
            resolve_image.ResolveImageOutput, {"targets": "[]", "skipped": "[]", "gated": "[]"}
        ),
        env=[*c.base_env(), Env(name="IMAGEBUMP_RULES_FILE", value=f"{n.RULES_DIR}/{n.RULES_KEY}")],
        env_from=c.base_env_from(),
        volumes=[
            c.tmp_volume(),
            ConfigMapVolume(
                name=n.RULES_CONFIGMAP,
                mount_path=n.RULES_DIR,
                read_only=True,
                items=[m.KeyToPath(key=n.RULES_KEY, path=n.RULES_KEY)],
            ),
        ],
        security_context=c.CONTAINER_SECURITY_CONTEXT,
        resources=c.resources(),
        retry_strategy=c.retry_transient(deadline=300),
        active_deadline_seconds=300,
    )(resolve_image.run)


def _edit_kustomize_template():
    return script(
        name="edit-kustomize",
        constructor=c.step_runner(),
        image=c.IMAGE,
        service_account_name=n.SA_ECR_READER,
        inputs=[_env_input()],
        outputs=c.outputs_of(edit_kustomize.EditKustomizeOutput, {"changed": "false", "decision": "error"}),
        env=[*c.base_env(), c.read_token_env()],
        env_from=c.base_env_from(),
        volumes=[
            c.tmp_volume(),
            c.read_token_volume(),
        ],
        security_context=c.CONTAINER_SECURITY_CONTEXT,
        resources=c.resources(memory_limit="1Gi"),
        retry_strategy=c.retry_transient(deadline=600),
        active_deadline_seconds=600,
        metrics=c.counter(
            DECISIONS_METRIC,
            DECISIONS_HELP,
            FINAL_SUCCESS,
            {"decision": "{{outputs.parameters.decision}}", "env": ENV_LABEL},
        ),
    )(edit_kustomize.run)


def _commit_pr_template():
    return script(
        name="commit-pr",
        constructor=c.step_runner(),
        image=c.IMAGE,
        service_account_name=n.SA_WORKFLOW,
        inputs=[_env_input()],
        # seconds-since-push (a CommitPrOutput field) feeds the latency histogram below.
        outputs=c.outputs_of(commit_pr.CommitPrOutput, {"action": "error", "pr-number": "0"}),
        # The write token as an environment variable of the main container only. Argo mirrors
        # every volume mount of the main container into its `wait` container (argo-workflows
        # v4.0.10 workflow/controller/workflowpod.go addOutputArtifactsVolumes, under /mainctrfs),
        # but not its environment: a mounted token would sit in the wait container too.
        env=[
            *c.base_env(),
            SecretEnv(
                name="IMAGEBUMP_GIT_TOKEN",
                secret_name=n.GIT_SECRET,
                secret_key=n.GIT_TOKEN_KEY,
                optional=True,
            ),
        ],
        env_from=c.base_env_from(),
        volumes=[
            c.tmp_volume(),
            # Only the GitHub App's private key, when one is used (IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE
            # reads a file); the token key is not projected into this volume.
            SecretVolume(
                name="git",
                secret_name=n.GIT_SECRET,
                mount_path=n.GIT_DIR,
                read_only=True,
                optional=True,
                default_mode=0o440,
                items=[m.KeyToPath(key=n.GIT_APP_KEY_KEY, path=n.GIT_APP_KEY_KEY)],
            ),
        ],
        security_context=c.CONTAINER_SECURITY_CONTEXT,
        resources=c.resources(memory_limit="1Gi"),
        retry_strategy=c.retry_transient(limit=6, deadline=900),
        active_deadline_seconds=900,
        metrics=m.Metrics(
            prometheus=[
                m.Prometheus(
                    name=UPDATES_METRIC,
                    help=UPDATES_HELP,
                    labels=[
                        m.MetricLabel(key="result", value="{{outputs.parameters.action}}"),
                        m.MetricLabel(key="env", value=ENV_LABEL),
                    ],
                    when=FINAL_SUCCESS,
                    counter=m.Counter(value="1"),
                ),
                m.Prometheus(
                    name=LATENCY_METRIC,
                    help=LATENCY_HELP,
                    labels=[m.MetricLabel(key="env", value=ENV_LABEL)],
                    when=f"{FINAL_SUCCESS} && '{{{{outputs.parameters.seconds-since-push}}}}' != ''",
                    histogram=m.Histogram(
                        value="{{outputs.parameters.seconds-since-push}}", buckets=LATENCY_BUCKETS
                    ),
                ),
            ]
        ),
    )(commit_pr.run)


#: What an update did: commit-pr's ``action`` (committed, pr-created, pr-updated, unchanged, branch-taken).
#: When commit-pr did not run (edit-kustomize found the overlay current) the value is "unchanged"
#: on Argo before 3.7.16 and commit-pr's own output default ("error") from 3.7.16 / 4.0.7 on, which
#: give a skipped step's outputs their defaults (argo-workflows workflow/controller/scope.go); only
#: the real changes (:data:`steps.reconcile.report.UPDATED_ACTIONS`) mean "updated".
UPDATE_ACTION = "action"


def update_action_output(step: str) -> Parameter:
    """The ``action`` output of a steps template: ``step``'s action, "unchanged" if unresolvable."""
    return Parameter(
        name=UPDATE_ACTION,
        value_from=m.ValueFrom(
            parameter=f"{{{{steps.{step}.outputs.parameters.{UPDATE_ACTION}}}}}", default="unchanged"
        ),
    )


def _update_target_steps(edit, commit) -> Steps:
    """``update-target``: edit-kustomize, then commit-pr when it changed something, under the
    overlay's mutex; its outputs are what verify-live needs, read outside the mutex."""
    with Steps(
        name="update-target",
        inputs=c.target_inputs(),
        outputs=[
            update_action_output("commit-pr"),
            # What verify-live needs, read outside this mutex-holding template.
            Parameter(
                name="plan",
                value_from=m.ValueFrom(
                    parameter="{{steps.edit-kustomize.outputs.parameters.plan}}", default=""
                ),
            ),
            Parameter(
                name="commit-sha",
                value_from=m.ValueFrom(
                    parameter="{{steps.commit-pr.outputs.parameters.commit-sha}}", default=""
                ),
            ),
            Parameter(
                name="seconds-since-push",
                value_from=m.ValueFrom(
                    parameter="{{steps.commit-pr.outputs.parameters.seconds-since-push}}", default=""
                ),
            ),
        ],
        synchronization=m.Synchronization(mutexes=[m.Mutex(name=MUTEX_NAME)]),
        # No deadline here: on a steps template `activeDeadlineSeconds` reaches no pod, and
        # `timeout` would count the time queued on the mutex. The pods below carry theirs.
        # Counted once per target (this template is not retried): a failure after all retries
        # of edit-kustomize or commit-pr, or a wait past the Workflow deadline.
        metrics=c.counter(
            UPDATES_METRIC, UPDATES_HELP, "{{status}} != Succeeded", {"result": "error", "env": ENV_LABEL}
        ),
    ) as update_target:
        edit(
            name="edit-kustomize",
            arguments={"target": "{{inputs.parameters.target}}", "env": "{{inputs.parameters.env}}"},
        )
        commit(
            name="commit-pr",
            arguments={
                "target": "{{inputs.parameters.target}}",
                "plan": "{{steps.edit-kustomize.outputs.parameters.plan}}",
                "env": "{{inputs.parameters.env}}",
            },
            when="'{{steps.edit-kustomize.outputs.parameters.changed}}' == 'true'",
        )
    return update_target


def _deliver_target_steps(update_target: Steps, verify, verifying) -> Steps:
    """``deliver-target``: update-target, then verify-live of what it committed (outside the mutex),
    and beside it notify-verifying (``imagebump/live`` = ``pending`` on that commit, issue 36)."""
    with Steps(
        name="deliver-target",
        inputs=c.target_inputs(),
        outputs=[update_action_output("update")],
    ) as deliver_target:
        Step(name="update", template=update_target, arguments=c.target_passed_on())
        with deliver_target.parallel():  # the pending status never delays the verification
            verify(
                name="verify-live",
                arguments=live.verify_live_arguments("update"),
                when=live.when_committed("update"),
            )
            verifying(
                name=exit_notify.VERIFYING,
                arguments=exit_notify.verifying_arguments("update"),
                when=live.when_committed("update"),
            )
    return deliver_target


def _count_decision_template():
    """``count-decision``: a pod-less node (a suspend of zero seconds) that counts one decision no
    step of this Workflow takes in a pod: ``waiting``, for a target resolve-image left to the
    promotion gate (``gate: wait``; issue 35)."""
    return c.MeteredSuspend(
        name=COUNT_DECISION,
        duration="0",
        inputs=[Parameter(name="decision"), Parameter(name="env")],
        metrics=c.counter(
            DECISIONS_METRIC,
            DECISIONS_HELP,
            None,
            {"decision": "{{inputs.parameters.decision}}", "env": ENV_LABEL},
        ),
    )


def _main_steps(resolve, deliver_target: Steps, count_decision) -> Steps:
    """``main``: resolve-image, then deliver-target for each target it found and the decision of
    each target it left to the promotion gate."""
    with Steps(name="main") as main:
        resolve(
            name="resolve-image",
            arguments={
                "event": "{{workflow.parameters.event}}",
                "image": "{{workflow.parameters.image}}",
            },
        )
        with main.parallel():
            Step(
                name="update-target",
                template=deliver_target,
                arguments=c.target_fan_out(),
                with_param="{{steps.resolve-image.outputs.parameters.targets}}",
            )
            Step(
                name="count-gated",
                template=count_decision,
                arguments={"decision": "{{item.decision}}", "env": "{{item.env}}"},
                with_param="{{steps.resolve-image.outputs.parameters.gated}}",
            )
    return main


def build() -> WorkflowTemplate:
    """The ``image-update`` WorkflowTemplate (Hera object; ``.to_dict()`` is the manifest)."""
    with WorkflowTemplate(
        name=NAME,
        namespace=n.NAMESPACE,
        labels=dict(n.LABELS),
        annotations={
            "workflows.argoproj.io/description": "An ECR image push becomes a commit or pull request "
            "in the kustomization of every overlay a rule maps it to.",
        },
        entrypoint="main",
        on_exit=exit_notify.EXIT_HANDLER,
        arguments=[
            Parameter(name="event", value="", description=EVENT_HELP),
            Parameter(name="image", value="", description=IMAGE_HELP),
            *live.live_parameters(),
        ],
        service_account_name=n.SA_WORKFLOW,
        active_deadline_seconds=WORKFLOW_DEADLINE_SECONDS,
        **c.housekeeping(),
        workflow_metadata=m.WorkflowMetadata(labels=dict(n.LABELS)),
    ) as wt:
        resolve = _resolve_image_template()
        edit = _edit_kustomize_template()
        commit = _commit_pr_template()
        verify = live.verify_live_template()
        verifying = exit_notify.verifying_template()
        exit_notify.exit_handler()
        update_target = _update_target_steps(edit, commit)
        deliver_target = _deliver_target_steps(update_target, verify, verifying)
        _main_steps(resolve, deliver_target, _count_decision_template())
    return wt

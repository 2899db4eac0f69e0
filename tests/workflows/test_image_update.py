"""The image-update WorkflowTemplate: wiring, least privilege, retries, metrics, schema."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import imagebump
from steps.commit_pr import step as commit_pr
from steps.domain.errors import EXIT_CONFIG, EXIT_TRANSIENT
from steps.domain.models import Image, Target
from steps.edit_kustomize import step as edit_kustomize
from steps.resolve_image import step as resolve_image
from steps.runtime.harness import field_names, kebab
from tests.workflows import schemas
from workflows import image_gate, image_reconcile, image_update
from workflows.common import OUTPUTS_DIR

ROOT = Path(__file__).resolve().parents[2]

STEPS = {
    "resolve-image": (resolve_image, resolve_image.ResolveImageOutput),
    "edit-kustomize": (edit_kustomize, edit_kustomize.EditKustomizeOutput),
    "commit-pr": (commit_pr, commit_pr.CommitPrOutput),
}


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    return image_update.build().to_dict()


@pytest.fixture(scope="module")
def templates(manifest) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in manifest["spec"]["templates"]}


def test_validates_strictly_against_the_crd(manifest):
    assert schemas.errors(manifest) == []


def test_parameters_event_and_image_default_empty_with_descriptions(manifest):
    params = {p["name"]: p for p in manifest["spec"]["arguments"]["parameters"]}
    assert set(params) == {"event", "image", "verify-live", "live-timeout"}
    for name in ("event", "image"):
        assert params[name]["value"] == ""
    # push → live (verify-live): on, waiting 15 min, unless a Workflow says otherwise
    assert (params["verify-live"]["value"], params["live-timeout"]["value"]) == ("true", "15m")
    for param in params.values():
        assert len(param["description"]) > 20


def test_main_resolves_then_fans_out_over_targets(templates):
    (resolve,), (fan_out, count_gated) = templates["main"]["steps"]
    assert resolve["template"] == "resolve-image"
    # the targets left to the promotion gate (gate: wait) are counted, in parallel, as decided: waiting
    assert count_gated["template"] == "count-decision"
    assert count_gated["withParam"] == "{{steps.resolve-image.outputs.parameters.gated}}"
    # each target: update-target (the mutex) then verify-live outside it (deliver-target holds no mutex)
    assert fan_out["name"] == "update-target" and fan_out["template"] == "deliver-target"
    (update,), (verify, pending) = templates["deliver-target"]["steps"]
    assert "synchronization" not in templates["deliver-target"]
    assert (update["template"], verify["template"]) == ("update-target", "verify-live")
    # beside verify-live (issue 36): imagebump/live = pending on the commit it watches, same condition
    assert pending["template"] == "notify-verifying" and pending["when"] == verify["when"]
    assert verify["when"] == (
        "'{{steps.update.outputs.parameters.action}}' == 'committed' && '{{workflow.parameters.verify-live}}' == 'true'"
    )
    assert fan_out["withParam"] == "{{steps.resolve-image.outputs.parameters.targets}}"
    args = {p["name"]: p["value"] for p in fan_out["arguments"]["parameters"]}
    assert args == {
        "target": "{{item}}",
        "repo-url": "{{item.repo_id}}",
        "path": "{{item.path}}",
        "env": "{{item.env}}",
    }
    # The item fields the fan-out reads exist on the Target model.
    for field in re.findall(r"\{\{item\.(\w+)\}\}", json.dumps(args)):
        assert field in Target.__struct_fields__


def test_per_target_template_edits_then_commits_only_when_changed(templates):
    (edit,), (commit,) = templates["update-target"]["steps"]
    assert edit["template"] == "edit-kustomize"
    assert commit["template"] == "commit-pr"
    assert commit["when"] == "'{{steps.edit-kustomize.outputs.parameters.changed}}' == 'true'"
    args = {p["name"]: p["value"] for p in commit["arguments"]["parameters"]}
    assert args["plan"] == "{{steps.edit-kustomize.outputs.parameters.plan}}"


def _mutex_of(templates, target: Target) -> str:
    """The mutex name ``update-target`` takes for a target the fan-out hands it (as Argo renders it)."""
    (mutex,) = templates["update-target"]["synchronization"]["mutexes"]
    (_, (fan_out, _count_gated)) = templates["main"]["steps"]
    item = target.model_dump(mode="json")
    args = {
        p["name"]: re.sub(r"\{\{item\.(\w+)\}\}", lambda m: str(item[m[1]]), p["value"])
        for p in fan_out["arguments"]["parameters"]
    }
    return re.sub(r"\{\{inputs\.parameters\.([\w-]+)\}\}", lambda m: args[m[1]], mutex["name"])


def test_mutex_is_keyed_by_repository_and_overlay(templates):
    target = Target(rule=0, repo_url="https://github.com/o/gitops", path="apps/api/overlays/stg", image="x")
    rendered = _mutex_of(templates, target)
    assert rendered == target.key == "https://github.com/o/gitops/apps/api/overlays/stg"
    # Argo (>= 3.6) decodes "<ns>/Mutex/<name>" with SplitN(..., 3): the name survives intact.
    assert f"imagebump/Mutex/{rendered}".split("/", 2)[2] == rendered


def test_two_rules_spelling_one_repository_differently_share_the_overlays_mutex(templates, monkeypatch):
    """GitHub owner and repository names are case-insensitive: the pushes of two images whose rules
    write ``Acme/GitOps.git`` and ``acme/gitops`` for one overlay serialise on one mutex."""
    from steps.rules import load_rules

    monkeypatch.delenv("IMAGEBUMP_GITHUB_API_URL", raising=False)
    registry = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
    rules = load_rules(
        f"- registryURI: {registry}/team/api\n"
        "  githubRepository: https://github.com/Acme/GitOps.git/apps/shop/overlays/prod\n"
        f"- registryURI: {registry}/team/web\n"
        "  githubRepository: https://github.com/acme/gitops/apps/shop/overlays/prod\n"
    )
    names = set()
    for repository in ("team/api", "team/web"):
        image = Image(account="123456789012", region="us-west-2", repository=repository, tag="1.0.0")
        (target,) = rules.match(image).targets
        names.add(_mutex_of(templates, target))
    assert names == {"https://github.com/acme/gitops/apps/shop/overlays/prod"}
    # a plain git server's paths are case-sensitive: two spellings there are two repositories
    other = Target(
        rule=0, repo_url="https://git.example/Acme/GitOps", path="apps/shop/overlays/prod", image="x"
    )
    assert _mutex_of(templates, other) == "https://git.example/Acme/GitOps/apps/shop/overlays/prod"


@pytest.mark.parametrize("name", sorted(STEPS))
def test_step_runs_the_step_function_through_the_step_entry(templates, name):
    module, _ = STEPS[name]
    script = templates[name]["script"]
    assert script["image"] == imagebump.IMAGE
    assert script["command"] == ["python"]
    # Hera's runner constructor (inputs, source, outputs) with our entry module (steps.runtime.launcher).
    assert script["args"] == ["-m", "steps.runtime.launcher", "-e", f"{module.__name__}:run"]
    assert script["source"] == "{{inputs.parameters}}"
    # Hera derived the inputs from the (functools.wraps-wrapped) signature.
    declared = {p["name"] for p in templates[name]["inputs"]["parameters"]}
    assert set(inspect.signature(module.run).parameters) <= declared


@pytest.mark.parametrize("name", sorted(STEPS))
def test_step_declares_every_output_field_with_a_default(templates, name):
    _, output_model = STEPS[name]
    outputs = {p["name"]: p["valueFrom"] for p in templates[name]["outputs"]["parameters"]}
    for field in field_names(output_model):
        value_from = outputs[kebab(field)]
        assert value_from["path"] == f"{OUTPUTS_DIR}/parameters/{kebab(field)}"
        assert "default" in value_from
    env = {e["name"]: e.get("value") for e in templates[name]["script"]["env"]}
    assert env["hera__outputs_directory"] == OUTPUTS_DIR


def test_targets_default_is_an_empty_list(templates):
    outputs = {p["name"]: p["valueFrom"] for p in templates["resolve-image"]["outputs"]["parameters"]}
    assert json.loads(outputs["targets"]["default"]) == []


def _mounted(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    volumes = {v["name"]: v for v in template.get("volumes", [])}
    return {m["mountPath"]: volumes[m["name"]] for m in template["script"].get("volumeMounts", [])}


def _secrets_and_configmaps(template: dict[str, Any]) -> set[str]:
    found = set()
    for volume in _mounted(template).values():
        if "secret" in volume:
            found.add("secret/" + volume["secret"]["secretName"])
        if "configMap" in volume:
            found.add("configmap/" + volume["configMap"]["name"])
    return found


def test_least_privilege_mounts(manifest, templates):
    assert manifest["spec"].get("volumes") is None  # nothing shared at workflow level
    assert _secrets_and_configmaps(templates["resolve-image"]) == {"configmap/imagebump-rules"}
    assert _secrets_and_configmaps(templates["edit-kustomize"]) == {"secret/imagebump-git-read"}
    assert _secrets_and_configmaps(templates["commit-pr"]) == {"secret/imagebump-git"}
    rules = _mounted(templates["resolve-image"])["/etc/imagebump/rules"]["configMap"]
    assert rules["items"] == [{"key": "rules.yaml", "path": "rules.yaml"}]
    read_token = _mounted(templates["edit-kustomize"])["/etc/imagebump/git-read"]["secret"]
    assert read_token["optional"] is True


@pytest.mark.parametrize(
    ("name", "variable", "path"),
    [
        ("resolve-image", "IMAGEBUMP_RULES_FILE", "/etc/imagebump/rules/rules.yaml"),
        ("edit-kustomize", "IMAGEBUMP_GIT_READ_TOKEN_FILE", "/etc/imagebump/git-read/token"),
    ],
)
def test_file_variables_point_into_the_mounts(templates, name, variable, path):
    env = {e["name"]: e.get("value") for e in templates[name]["script"]["env"]}
    assert env[variable] == path
    assert any(path.startswith(mount + "/") for mount in _mounted(templates[name]))
    others = {n for n in STEPS if n != name}
    for other in others:
        assert variable not in {e["name"] for e in templates[other]["script"]["env"]}


@pytest.mark.parametrize("name", sorted(STEPS))
def test_pods_are_hardened_and_bounded(manifest, templates, name):
    pod = manifest["spec"]["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] > 0
    template = templates[name]
    container = template["script"]["securityContext"]
    assert container["readOnlyRootFilesystem"] is True
    assert container["allowPrivilegeEscalation"] is False
    assert container["capabilities"] == {"drop": ["ALL"]}
    assert "emptyDir" in _mounted(template)["/tmp"]
    resources = template["script"]["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"]) and {"cpu", "memory"} <= set(resources["limits"])
    assert template["activeDeadlineSeconds"] > 0
    assert template["serviceAccountName"]


def test_workflow_has_deadline_gc_and_ttl(manifest):
    spec = manifest["spec"]
    assert spec["activeDeadlineSeconds"] > 0
    assert spec["podGC"]["strategy"] == "OnPodSuccess"
    assert spec["ttlStrategy"]["secondsAfterSuccess"] > 0
    assert spec["serviceAccountName"] == "imagebump-workflow"


def _retry_allowed(expression: str, exit_code: int) -> bool:
    """Evaluate the one expression shape used: ``asInt(lastRetry.exitCode) != N``."""
    match = re.fullmatch(r"asInt\(lastRetry\.exitCode\) != (\d+)", expression)
    assert match, expression
    return exit_code != int(match.group(1))


@pytest.mark.parametrize("name", sorted(STEPS))
@pytest.mark.parametrize(
    ("exit_code", "retried"),
    [
        pytest.param(EXIT_CONFIG, False, id="config-error"),
        pytest.param(EXIT_TRANSIENT, True, id="transient"),
        pytest.param(1, True, id="unexpected"),
        pytest.param(-1, True, id="pod-error"),
    ],
)
def test_retry_skips_only_config_errors(templates, name, exit_code, retried):
    strategy = templates[name]["retryStrategy"]
    assert strategy["retryPolicy"] == "Always"
    assert int(strategy["limit"]) >= 3
    assert strategy["backoff"]["duration"] and strategy["backoff"]["maxDuration"]
    assert _retry_allowed(strategy["expression"], exit_code) is retried


def test_metrics_count_results_by_env_and_time_push_to_change(templates):
    commit = {m["name"]: m for m in templates["commit-pr"]["metrics"]["prometheus"]}
    updates = commit["imagebump_updates_total"]
    labels = {label["key"]: label["value"] for label in updates["labels"]}
    assert labels["result"] == "{{outputs.parameters.action}}"
    assert "inputs.parameters.env" in labels["env"]
    assert updates["counter"]["value"] == "1"
    latency = commit["imagebump_push_to_change_seconds"]
    assert latency["histogram"]["value"] == "{{outputs.parameters.seconds-since-push}}"
    assert latency["histogram"]["buckets"] == sorted(latency["histogram"]["buckets"])
    assert "seconds-since-push" in latency["when"]
    declared = {p["name"] for p in templates["commit-pr"]["outputs"]["parameters"]}
    for metric in commit.values():
        for ref in re.findall(r"outputs\.parameters\.([\w-]+)", json.dumps(metric)):
            assert ref in declared
    edit = templates["edit-kustomize"]["metrics"]["prometheus"][0]
    assert {label["key"] for label in edit["labels"]} == {"decision", "env"}


# --- Metrics: final outcomes, as the controller emits them (issue 16, item 4) ----------------
# Upstream facts, argo-workflows v4.0.10:
# - workflow/controller/operator.go executeTemplate: a template with retryStrategy runs under a
#   Retry node whose children are the attempts. Its metrics are evaluated for every attempt that
#   failed while another follows ("If retry node has not completed and last child node has
#   completed, emit metrics for the last child node") and once more for the Retry node when it
#   completes (with the last attempt's outputs). A template without retryStrategy: once, when
#   its node completes.
# - workflow/controller/steps.go prepareMetricScope: `status` is that node's phase; inputs and
#   outputs are that node's. shouldExecute: `when` is govaluate, bare words read as strings.
# - workflow/controller/controller.go metrics.New(..., `argo_workflows`) with
#   util/telemetry/exporter_prometheus.go WithNamespace + WithoutCounterSuffixes: the series is
#   the metric's name prefixed with `argo_workflows_`, nothing appended.
EXPORTED_PREFIX = "argo_workflows_"


def _eval_value(text: str, scope: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        expr = match[1].strip()
        if expr.startswith("="):
            # The one expression form used: `{{=inputs.parameters.env != '' ? inputs.parameters.env : 'none'}}`
            cond = re.fullmatch(r"=\s*([\w.-]+) != '' \? \1 : '(\w+)'", expr)
            assert cond, f"the metric model does not know the expression {expr!r}"
            return scope[cond[1]] or cond[2]
        assert expr in scope, f"{expr!r} is not in the metric scope"
        return scope[expr]

    return re.sub(r"\{\{(.*?)\}\}", one, text)


def _when(text: str | None, scope: dict[str, str]) -> bool:
    if not text:
        return True
    result = True
    for clause in _eval_value(text, scope).split("&&"):
        left, op, right = re.fullmatch(r"\s*(.*?)\s*(==|!=)\s*(.*?)\s*", clause).groups()
        left, right = (v.strip("'") for v in (left, right))
        result = result and ((left == right) if op == "==" else (left != right))
    return result


def _emit(template: dict[str, Any], scope: dict[str, str], series: dict[tuple, float]) -> None:
    for metric in (template.get("metrics") or {}).get("prometheus", []):
        if not _when(metric.get("when"), scope):
            continue
        labels = tuple(
            sorted((lab["key"], _eval_value(lab["value"], scope)) for lab in metric.get("labels", []))
        )
        if "counter" in metric:
            key = (EXPORTED_PREFIX + metric["name"], labels)
            series[key] = series.get(key, 0) + float(_eval_value(metric["counter"]["value"], scope))
        else:
            key = (EXPORTED_PREFIX + metric["name"] + "_count", labels)
            series[key] = series.get(key, 0) + 1


def _run_node(
    template: dict[str, Any],
    inputs: dict[str, str],
    attempts: list[tuple[str, dict]],
    series: dict[tuple, float],
) -> str:
    """Evaluate a pod template's metrics as the controller does for these attempts; return its phase."""
    outputs_default = {
        p["name"]: p["valueFrom"].get("default", "") for p in template["outputs"]["parameters"]
    }

    def scope(phase: str, written: dict) -> dict[str, str]:
        values = {**outputs_default, **written}
        return {
            "status": phase,
            **{f"inputs.parameters.{k}": v for k, v in inputs.items()},
            **{f"outputs.parameters.{k}": v for k, v in values.items()},
        }

    assert "retryStrategy" in template
    assert len(attempts) <= int(template["retryStrategy"]["limit"]) + 1
    for phase, written in attempts[:-1]:
        assert phase == "Failed"
        _emit(template, scope(phase, written), series)  # a failed attempt, another follows
    final_phase, written = attempts[-1]
    _emit(template, scope(final_phase, written), series)  # the Retry node, completed
    return final_phase


def _run_target(
    templates: dict[str, dict],
    edit: list[tuple[str, dict]],
    commit: list[tuple[str, dict]],
    env: str = "staging",
) -> dict[tuple, float]:
    series: dict[tuple, float] = {}
    phase = _run_node(templates["edit-kustomize"], {"env": env}, edit, series)
    if phase == "Succeeded" and edit[-1][1].get("changed") == "true":
        phase = _run_node(templates["commit-pr"], {"env": env}, commit, series)
    update_target = templates["update-target"]
    _emit(update_target, {"status": phase, "inputs.parameters.env": env}, series)  # never retried
    return series


FAILED = ("Failed", {})
UPDATE = ("Succeeded", {"changed": "true", "decision": "update"})
CURRENT = ("Succeeded", {"changed": "false", "decision": "current"})
COMMITTED = ("Succeeded", {"action": "committed", "seconds-since-push": "12"})


def _series(name: str, **labels: str) -> tuple:
    return (EXPORTED_PREFIX + name, tuple(sorted(labels.items())))


@pytest.mark.parametrize(
    ("edit", "commit", "expected"),
    [
        pytest.param(
            [FAILED, FAILED, UPDATE],
            [FAILED, FAILED, FAILED, COMMITTED],
            {
                _series("imagebump_decisions_total", decision="update", env="staging"): 1,
                _series("imagebump_updates_total", result="committed", env="staging"): 1,
                _series("imagebump_push_to_change_seconds_count", env="staging"): 1,
            },
            id="retried-then-committed",
        ),
        pytest.param(
            [UPDATE],
            [FAILED] * 7,
            {
                _series("imagebump_decisions_total", decision="update", env="staging"): 1,
                _series("imagebump_updates_total", result="error", env="staging"): 1,
            },
            id="commit-fails-after-all-retries",
        ),
        pytest.param(
            [FAILED] * 5,
            [],
            {_series("imagebump_updates_total", result="error", env="staging"): 1},
            id="edit-fails-after-all-retries",
        ),
        pytest.param(
            [FAILED, CURRENT],
            [],
            {_series("imagebump_decisions_total", decision="current", env="staging"): 1},
            id="already-current",
        ),
    ],
)
def test_counters_count_each_target_once_whatever_the_retries(templates, edit, commit, expected):
    assert _run_target(templates, edit, commit) == expected


def test_a_target_left_to_the_gate_counts_its_decision_waiting_once_without_a_pod(templates):
    count = templates["count-decision"]
    assert count["suspend"] == {"duration": "0"} and "script" not in count  # no pod
    (step,) = [s for s in templates["main"]["steps"][1] if s["template"] == "count-decision"]
    args = {p["name"]: p["value"] for p in step["arguments"]["parameters"]}
    assert args == {"decision": "{{item.decision}}", "env": "{{item.env}}"}
    series: dict[tuple, float] = {}
    for item in ({"decision": "waiting", "env": "production"}, {"decision": "waiting", "env": ""}):
        scope = {f"inputs.parameters.{k}": v for k, v in item.items()}
        _emit(count, {"status": "Succeeded", **scope}, series)
    assert series == {
        _series("imagebump_decisions_total", decision="waiting", env="production"): 1,
        _series("imagebump_decisions_total", decision="waiting", env="none"): 1,
    }


def test_the_emission_model_counts_attempts_for_a_metric_without_a_final_only_guard(templates):
    # The same model on the metric as it was before (no `when`): 7 failed attempts → 7 errors.
    unguarded = json.loads(json.dumps(templates))
    for metric in unguarded["commit-pr"]["metrics"]["prometheus"]:
        metric.pop("when", None)
    unguarded["update-target"].pop("metrics", None)
    series = _run_target(unguarded, [UPDATE], [FAILED] * 7)
    assert series[_series("imagebump_updates_total", result="error", env="staging")] == 7


def test_one_help_per_metric_name_across_templates(manifest):
    # The controller refuses a second help text for a name it already knows
    # (workflow/metrics/metrics_custom.go matchExistingMetric).
    helps: dict[str, set[str]] = {}
    for template in manifest["spec"]["templates"]:
        for metric in (template.get("metrics") or {}).get("prometheus", []):
            helps.setdefault(metric["name"], set()).add(metric["help"])
    assert set(helps) == {
        "imagebump_updates_total",
        "imagebump_decisions_total",
        "imagebump_push_to_change_seconds",
        "imagebump_live_total",
        "imagebump_notifications_total",
        "imagebump_push_to_live_seconds",
    }
    assert all(len(texts) == 1 for texts in helps.values()), helps


def _rendered_metric_names() -> set[str]:
    """Every custom metric the rendered WorkflowTemplate and CronWorkflows declare (unprefixed)."""
    names = set()
    for path in RENDERED.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            spec = (doc or {}).get("spec", {})
            for template in (spec.get("workflowSpec") or spec).get("templates", []):
                names |= {m["name"] for m in (template.get("metrics") or {}).get("prometheus", [])}
    return names


def test_the_docs_name_every_series_as_prometheus_shows_it(manifest):
    """Every `argo_workflows_imagebump_*` series README.md and docs/ name is exported, and vice versa."""
    text = "\n".join(p.read_text() for p in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))))
    exported = _rendered_metric_names()
    ours = {
        m["name"]
        for t in manifest["spec"]["templates"]
        for m in (t.get("metrics") or {}).get("prometheus", [])
    }
    assert ours <= exported
    named = {
        re.sub(r"_(bucket|sum|count)$", "", n) if n.startswith("imagebump_push_to_change") else n
        for n in re.findall(rf"{EXPORTED_PREFIX}(imagebump_\w+)", text)
    }
    assert named == exported, named ^ exported
    # No bare, unprefixed series left for users to query in vain.
    for name in exported:
        assert not re.search(rf"(?<![\w_]){name}\{{", text), name


# --- Deadlines where the work happens (issue 16, item 5) --------------------------------------
# Upstream facts, argo-workflows v4.0.10:
# - workflow/controller/workflowpod.go createWorkflowPod: a template's activeDeadlineSeconds
#   becomes its pod's (capped by what is left of the Workflow's deadline); nothing else reads it,
#   so on a steps template it bounds nothing. The pod is created only once its parent's mutex is held.
# - workflow/validate/validate.go: `timeout` is refused on steps/dag templates (and on a pod
#   template it would count its Pending time from the node's start).
# - workflow/controller/operator.go getWorkflowDeadline: startedAt + spec.activeDeadlineSeconds,
#   so time spent Pending on a mutex counts; failNodesWithoutCreatedPodsAfterDeadlineOrShutdown
#   then fails the waiting node: "Step exceeded its deadline". processNodeRetries starts no new
#   attempt once backoff.maxDuration has passed since the first attempt started.
#: Holders of one overlay's mutex each Workflow's deadline is sized for, its own update included
#: (docs/operations.md, "Deadlines"): an event's update may wait behind 9 others; a sweep's behind one (a deeper
#: queue is left to the next sweep, so a sweep never blocks the next slots for longer).
MUTEX_HOLDS = {image_update.NAME: 10, image_reconcile.NAME: 2, image_gate.NAME: 2}
RENDERED = ROOT / "manifests" / "workflows"


def _seconds(duration: str) -> int:
    match = re.fullmatch(r"(\d+)([smh]?)", duration)
    assert match, duration
    return int(match[1]) * {"": 1, "s": 1, "m": 60, "h": 3600}[match[2]]


def _rendered() -> dict[str, dict[str, Any]]:
    """Every rendered Workflow definition by name, as a cluster gets it (manifests/workflows/)."""
    docs = (yaml.safe_load(path.read_text()) for path in sorted(RENDERED.glob("*.yaml")))
    return {doc["metadata"]["name"]: doc for doc in docs}


def _spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["workflowSpec"] if doc["kind"] == "CronWorkflow" else doc["spec"]


def _templates(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in _spec(doc)["templates"]}


def _pod_hold(pod: dict[str, Any]) -> int:
    """Longest a pod template runs: Argo starts no attempt after the first's start + maxDuration and
    ends any retry there (operator.go processNodeRetries: executionDeadline = maxDurationDeadline);
    the first attempt runs at most its own activeDeadlineSeconds."""
    assert "script" in pod and int(pod["activeDeadlineSeconds"]) > 0  # per attempt, on the pod
    window = _seconds(pod["retryStrategy"]["backoff"]["maxDuration"])
    # a retry that starts within 5 minutes may run its whole deadline
    assert window >= 300 + int(pod["activeDeadlineSeconds"])
    return max(window, int(pod["activeDeadlineSeconds"]))


def _worst(docs, doc_name: str, template: str, holds: int, locked: list[str]) -> int:
    """Worst time from a template's start to its end, following ``templateRef`` into the
    referenced WorkflowTemplate; a mutex template counts ``holds`` worst holds of its body.
    Fan-outs count their first wave (a target the Workflow has started)."""
    tmpl = _templates(docs[doc_name])[template]
    if "script" in tmpl:
        return _pod_hold(tmpl)
    if "suspend" in tmpl:
        return _seconds(tmpl["suspend"].get("duration", "0"))
    # On a steps template `activeDeadlineSeconds` reaches no pod and `timeout` counts the queue.
    assert "activeDeadlineSeconds" not in tmpl and "timeout" not in tmpl, template
    body = 0
    for group in tmpl["steps"]:
        longest = 0
        for step in group:
            ref = step.get("templateRef")
            child = (ref["name"], ref["template"]) if ref else (doc_name, step["template"])
            longest = max(longest, _worst(docs, *child, holds, locked))
        body += longest
    if tmpl.get("synchronization"):
        locked.append(f"{doc_name}/{template}")
        return holds * body
    return body


def _worst_hold_seconds(templates: dict[str, dict], mutex_template: str) -> int:
    """Longest time one target holds the mutex: each step's retry window plus a last attempt's deadline."""
    return sum(
        _pod_hold(templates[step["template"]])
        for group in templates[mutex_template]["steps"]
        for step in group
    )


def test_every_workflow_that_reaches_a_mutex_has_its_queue_sized():
    docs = _rendered()
    reaching = set()
    for name, doc in docs.items():
        locked: list[str] = []
        _worst(docs, name, _spec(doc)["entrypoint"], 1, locked)
        if locked:
            reaching.add(name)
            assert locked and set(locked) == {"image-update/update-target"}, name
    assert reaching == set(MUTEX_HOLDS)


@pytest.mark.parametrize("name", sorted(MUTEX_HOLDS))
def test_deadlines_bound_the_work_not_the_queue(name):
    docs = _rendered()
    hold = _worst_hold_seconds(_templates(docs[image_update.NAME]), "update-target")
    assert hold == 35 * 60
    spec = _spec(docs[name])
    worst = _worst(docs, name, spec["entrypoint"], MUTEX_HOLDS[name], [])
    deadline = int(spec["activeDeadlineSeconds"])
    # Sized for the worst queue, and no more: a sweep (concurrencyPolicy: Forbid) that may run
    # longer than it needs to skips the next sweeps for as long.
    assert deadline == worst, (name, deadline, worst)
    for template_name, template in _templates(docs[name]).items():
        if "script" in template:
            assert int(template["activeDeadlineSeconds"]) < deadline, template_name
    if name == image_reconcile.NAME:
        # the sweep's deadline is bounded: with Forbid a running sweep skips the next slots
        assert docs[name]["spec"]["concurrencyPolicy"] == "Forbid"
        assert deadline <= 2 * 3600


# --- Who holds the Git token (issue 16, item 7) -------------------------------------------------
# argo-workflows v4.0.10 workflow/controller/workflowpod.go addOutputArtifactsVolumes: every
# volumeMount of the main container is added to the `wait` container (and artifact-plugin
# sidecars) under /mainctrfs; the main container's environment is not copied.
MIRRORED_TO = {"wait"}


def _holders(template: dict[str, Any], secret: str, key: str) -> set[str]:
    script = template["script"]
    holders: set[str] = set()
    for env in script.get("env", []):
        ref = (env.get("valueFrom") or {}).get("secretKeyRef")
        if ref and ref["name"] == secret and ref["key"] == key:
            holders.add("main")
    for env_from in script.get("envFrom", []):
        if (env_from.get("secretRef") or {}).get("name") == secret:
            holders.add("main")
    volumes = {v["name"]: v for v in template.get("volumes", [])}
    for mount in script.get("volumeMounts", []):
        source = volumes[mount["name"]].get("secret")
        if source and source["secretName"] == secret:
            projected = {item["key"] for item in source.get("items", [])} or {key}
            if key in projected:
                holders |= {"main", *MIRRORED_TO}
    return holders


def test_the_write_token_reaches_only_commit_prs_main_container(templates):
    assert _holders(templates["commit-pr"], "imagebump-git", "token") == {"main"}
    for name in ("resolve-image", "edit-kustomize"):
        assert _holders(templates[name], "imagebump-git", "token") == set()
    # A GitHub App key is read from a file, so it is mirrored into the wait container; the
    # optional read token likewise. docs/install.md's rights table says so.
    assert _holders(templates["commit-pr"], "imagebump-git", "app-private-key") == {"main", "wait"}
    app_key = _mounted(templates["commit-pr"])["/etc/imagebump/git"]["secret"]
    assert app_key["items"] == [{"key": "app-private-key", "path": "app-private-key"}]  # the documented path
    assert app_key["optional"] is True
    for name in STEPS:  # no step points at a token file any more
        assert "IMAGEBUMP_GIT_TOKEN_FILE" not in {e["name"] for e in templates[name]["script"]["env"]}
    assert _holders(templates["edit-kustomize"], "imagebump-git-read", "token") == {"main", "wait"}


# --- The Argo Workflows version the manifests need (issue 16, item 6) -------------------------
#: First Argo Workflows release whose CRDs accept the field (argoproj/argo-workflows,
#: manifests/base/crds/full/argoproj.io_{workflowtemplates,cronworkflows}.yaml, read at v3.1.0,
#: v3.2.0, v3.4.0, v3.5.0 and v3.6.0: each field is absent in the release before).
DOCUMENTED_ARGO_WORKFLOWS_MINIMUM = (3, 6)
FIELD_SINCE = {
    "synchronization.mutexes": (3, 6),  # v3.5.0 knows only the single `mutex`
    "CronWorkflow.schedules": (3, 6),  # v3.5.0 knows only `schedule`
    "podGC.deleteDelayDuration": (3, 5),
    "retryStrategy.expression": (3, 2),
}


def _fields_used() -> set[str]:
    from workflows import argocd_backup

    used = set()
    for doc in (image_update.build().to_dict(), argocd_backup.build().to_dict()):
        text = json.dumps(doc)
        if '"mutexes"' in text:
            used.add("synchronization.mutexes")
        if doc["kind"] == "CronWorkflow" and "schedules" in doc["spec"]:
            used.add("CronWorkflow.schedules")
        if '"deleteDelayDuration"' in text:
            used.add("podGC.deleteDelayDuration")
        if '"expression"' in text:
            used.add("retryStrategy.expression")
    return used


def test_the_stated_argo_workflows_minimum_is_what_the_manifests_use(templates):
    used = _fields_used()
    assert {"synchronization.mutexes", "CronWorkflow.schedules"} <= used
    minimum = max(FIELD_SINCE[field] for field in used)
    # docs/install.md ("Prerequisites") and README.md ("Install") state this minimum: change them with it.
    assert minimum == DOCUMENTED_ARGO_WORKFLOWS_MINIMUM
    # 4.0.7 (and 3.7.16) changed only how references to a SKIPPED step's outputs resolve
    # (docs/upgrading.md, "Outputs of skipped and omitted steps and tasks now resolve"): no step
    # argument references the outputs of a step that can be skipped. The one template output that
    # does, update-target's `action` (commit-pr's action), resolves to its default "unchanged"
    # before and to commit-pr's default "error" after: both mean "not updated" to its one reader,
    # the sweep's counter (tests/workflows/test_image_reconcile.py).
    for template in templates.values():
        for group in template.get("steps") or []:
            for step in group:
                if step.get("when"):
                    ref = f"steps.{step['name']}.outputs"
                    assert ref not in json.dumps({k: v for k, v in template.items() if k != "outputs"})
                    for p in (template.get("outputs") or {}).get("parameters") or []:
                        if ref in json.dumps(p):
                            # commit-sha / seconds-since-push (for verify-live): "" before 4.0.7 and
                            # commit-pr's own default "" after; verify-live runs only when committed.
                            assert (template["name"], p["name"], p["valueFrom"]["default"]) in (
                                ("update-target", "action", "unchanged"),
                                ("update-target", "commit-sha", ""),
                                ("update-target", "seconds-since-push", ""),
                            )


def test_hera_runner_maps_template_inputs_onto_wrapped_step_functions():
    from hera.workflows._runner.util import _map_function_annotations

    target = Target(rule=0, repo_url="https://github.com/o/r", path="p", image="x").model_dump_json()
    inputs = {"event": "{}", "image": ""}
    assert _map_function_annotations(resolve_image.run, inputs) == inputs
    # Extra template inputs (env, for metric labels) are not passed to the function.
    assert _map_function_annotations(edit_kustomize.run, {"target": target, "env": "stg"}) == {
        "target": target
    }

"""The image-update WorkflowTemplate: wiring, least privilege, retries, metrics, schema."""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

import pytest

import imagebump
from steps import commit_pr, edit_kustomize, resolve_image
from steps._runtime import kebab
from steps.errors import EXIT_CONFIG, EXIT_TRANSIENT
from steps.models import Target
from tests.workflows import schemas
from workflows import image_update
from workflows.common import OUTPUTS_DIR

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
    assert set(params) == {"event", "image"}
    for param in params.values():
        assert param["value"] == ""
        assert len(param["description"]) > 20


def test_main_resolves_then_fans_out_over_targets(templates):
    (resolve,), (fan_out,) = templates["main"]["steps"]
    assert resolve["template"] == "resolve-image"
    assert fan_out["template"] == "update-target"
    assert fan_out["withParam"] == "{{steps.resolve-image.outputs.parameters.targets}}"
    args = {p["name"]: p["value"] for p in fan_out["arguments"]["parameters"]}
    assert args == {
        "target": "{{item}}",
        "repo-url": "{{item.repo_url}}",
        "path": "{{item.path}}",
        "env": "{{item.env}}",
    }
    # The item fields the fan-out reads exist on the Target model.
    for field in re.findall(r"\{\{item\.(\w+)\}\}", json.dumps(args)):
        assert field in Target.model_fields


def test_per_target_template_edits_then_commits_only_when_changed(templates):
    (edit,), (commit,) = templates["update-target"]["steps"]
    assert edit["template"] == "edit-kustomize"
    assert commit["template"] == "commit-pr"
    assert commit["when"] == "{{steps.edit-kustomize.outputs.parameters.changed}} == true"
    args = {p["name"]: p["value"] for p in commit["arguments"]["parameters"]}
    assert args["plan"] == "{{steps.edit-kustomize.outputs.parameters.plan}}"


def test_mutex_is_keyed_by_repository_and_overlay(templates):
    (mutex,) = templates["update-target"]["synchronization"]["mutexes"]
    target = Target(rule=0, repo_url="https://github.com/o/gitops", path="apps/api/overlays/stg", image="x")
    rendered = mutex["name"].replace("{{inputs.parameters.repo-url}}", target.repo_url)
    rendered = rendered.replace("{{inputs.parameters.path}}", target.path)
    assert rendered == target.key
    # Argo (>= 3.6) decodes "<ns>/Mutex/<name>" with SplitN(..., 3): the name survives intact.
    assert f"imagebump/Mutex/{rendered}".split("/", 2)[2] == rendered


@pytest.mark.parametrize("name", sorted(STEPS))
def test_step_runs_the_step_function_through_hera_runner(templates, name):
    module, _ = STEPS[name]
    script = templates[name]["script"]
    assert script["image"] == imagebump.IMAGE
    assert script["command"] == ["python"]
    assert script["args"] == ["-m", "hera.workflows.runner", "-e", f"{module.__name__}:run"]
    # Hera derived the inputs from the (functools.wraps-wrapped) signature.
    declared = {p["name"] for p in templates[name]["inputs"]["parameters"]}
    assert set(inspect.signature(module.run).parameters) <= declared


@pytest.mark.parametrize("name", sorted(STEPS))
def test_step_declares_every_output_field_with_a_default(templates, name):
    _, output_model = STEPS[name]
    outputs = {p["name"]: p["valueFrom"] for p in templates[name]["outputs"]["parameters"]}
    for field in output_model.model_fields:
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
        ("commit-pr", "IMAGEBUMP_GIT_TOKEN_FILE", "/etc/imagebump/git/token"),
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


def test_hera_runner_maps_template_inputs_onto_wrapped_step_functions():
    from hera.workflows._runner.util import _map_function_annotations

    target = Target(rule=0, repo_url="https://github.com/o/r", path="p", image="x").model_dump_json()
    inputs = {"event": "{}", "image": ""}
    assert _map_function_annotations(resolve_image.run, inputs) == inputs
    # Extra template inputs (env, for metric labels) are not passed to the function.
    assert _map_function_annotations(edit_kustomize.run, {"target": target, "env": "stg"}) == {
        "target": target
    }

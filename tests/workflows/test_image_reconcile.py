"""The image-reconcile CronWorkflow: schedule, wiring to image-update's update-target, rights,
metrics, schema — read from the rendered manifests (what a cluster and the local executor get)."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from steps.domain.models import Target
from steps.reconcile import step as reconcile
from steps.runtime.harness import field_names, kebab
from tests.workflows import schemas
from workflows import image_reconcile
from workflows import names as n
from workflows.local.executor import LocalExecutor

ROOT = Path(__file__).resolve().parents[2]
CRON = ROOT / "manifests" / "workflows" / "image-reconcile.yaml"
UPDATE = ROOT / "manifests" / "workflows" / "image-update.yaml"


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    return yaml.safe_load(CRON.read_text())


@pytest.fixture(scope="module")
def templates(manifest) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in manifest["spec"]["workflowSpec"]["templates"]}


@pytest.fixture(scope="module")
def update_templates() -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in yaml.safe_load(UPDATE.read_text())["spec"]["templates"]}


def test_the_rendered_manifest_is_the_definition_and_validates_strictly(manifest):
    assert manifest == image_reconcile.build().to_dict()
    assert schemas.errors(manifest) == []


def test_every_ten_minutes_never_overlapping_with_a_starting_deadline(manifest):
    spec = manifest["spec"]
    assert spec["schedules"] == ["*/10 * * * *"] and spec["timezone"] == "UTC"
    assert spec["concurrencyPolicy"] == "Forbid"
    assert 0 < spec["startingDeadlineSeconds"] <= 600  # a missed slot is skipped, not run late in a pile
    # Sized for one busy overlay (tests/workflows/test_image_update.py, the deadlines), and bounded:
    # with Forbid a running sweep skips the next slots, so it must not run for hours.
    # (The deadline equals the worst queue computed from the rendered templates: that test.)
    deadline = spec["workflowSpec"]["activeDeadlineSeconds"]
    assert spec["startingDeadlineSeconds"] < deadline <= 2 * 3600


def test_the_sweep_reads_ecr_as_the_ecr_reader_with_the_optional_read_token(templates):
    sweep = templates["reconcile"]
    assert sweep["serviceAccountName"] == n.SA_ECR_READER
    assert sweep["script"]["args"] == ["-m", "steps.runtime.launcher", "-e", "steps.reconcile.step:run"]
    env = {e["name"]: e.get("value") for e in sweep["script"]["env"]}
    assert env["IMAGEBUMP_GIT_READ_TOKEN_FILE"] == f"{n.GIT_READ_DIR}/token"
    assert "IMAGEBUMP_GIT_TOKEN_FILE" not in env  # never the write token
    volumes = {v["name"]: v for v in sweep["volumes"]}
    assert volumes["git-read"]["secret"] == {
        "secretName": n.GIT_READ_SECRET,
        "optional": True,
        "defaultMode": 0o440,
    }
    assert volumes[n.RULES_CONFIGMAP]["configMap"]["name"] == n.RULES_CONFIGMAP
    assert sweep["script"]["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_step_contract_matches_the_template(templates):
    sweep = templates["reconcile"]
    inputs = {p["name"] for p in sweep["inputs"]["parameters"]}
    assert inputs == set(inspect.signature(reconcile.run).parameters)
    outputs = {p["name"] for p in sweep["outputs"]["parameters"]}
    assert outputs == {kebab(f) for f in field_names(reconcile.ReconcileOutput)}
    defaults = {p["name"]: p["valueFrom"]["default"] for p in sweep["outputs"]["parameters"]}
    assert defaults["targets"] == "[]" and defaults["counts"] == "[]"


def test_behind_targets_go_to_image_updates_update_target_by_template_ref(templates, update_templates):
    (sweep,), (counts, fan_out, live_report) = templates["main"]["steps"]
    # push → live: the current targets' live states, when verify-live is on (never the write token)
    assert live_report["when"] == "'{{workflow.parameters.verify-live}}' == 'true'"
    assert live_report["arguments"]["parameters"][0]["value"] == (
        "{{steps.reconcile.outputs.parameters.current-targets}}"
    )
    assert sweep["template"] == "reconcile"
    assert fan_out["withParam"] == "{{steps.reconcile.outputs.parameters.targets}}"
    assert fan_out["when"] == "'{{workflow.parameters.apply}}' == 'true'"
    (call,) = templates[fan_out["template"]]["steps"][0]
    assert call["templateRef"] == {"name": "image-update", "template": "update-target"}
    # the same template an event runs: same mutex, same inputs
    referenced = update_templates["update-target"]
    assert (
        referenced["synchronization"]["mutexes"][0]["name"]
        == "{{inputs.parameters.repo-url}}/{{inputs.parameters.path}}"
    )
    assert {p["name"] for p in call["arguments"]["parameters"]} == {
        p["name"] for p in referenced["inputs"]["parameters"]
    }
    args = {p["name"]: p["value"] for p in fan_out["arguments"]["parameters"]}
    for field in re.findall(r"\{\{item\.(\w+)\}\}", json.dumps(args)):
        assert field in Target.__struct_fields__
    assert counts["withParam"] == "{{steps.reconcile.outputs.parameters.counts}}"
    assert templates["main"]["parallelism"] == image_reconcile.PARALLELISM


def test_metrics_a_gauge_per_state_and_env_and_a_counter_of_updates(templates):
    (gauge,) = templates["count-targets"]["metrics"]["prometheus"]
    assert gauge["name"] == "imagebump_reconcile_targets"
    assert {label["key"] for label in gauge["labels"]} == {"state", "env"}
    assert gauge["gauge"] == {"value": "{{inputs.parameters.count}}", "realtime": False}
    assert templates["count-targets"]["suspend"] == {"duration": "0"}  # no pod for a number
    (counter,) = templates["sweep-target"]["metrics"]["prometheus"]
    assert counter["name"] == "imagebump_reconcile_updates_total" and counter["counter"] == {"value": "1"}
    assert {label["key"] for label in counter["labels"]} == {"env"}
    # every count the step outputs is a (state, env) pair the gauge can carry
    assert set(field_names(reconcile.StateCount)) == {"state", "env", "count"}


def test_no_template_of_the_sweep_holds_the_write_token(manifest):
    """Only commit-pr (in image-update, reached by templateRef) mounts the write token."""
    secrets = re.findall(r'"secretName": "([^"]+)"', json.dumps(manifest))
    # the reconcile and live-states pods; the reconcile pod the notifications file too (issue 36:
    # the promotion gate's messages), never the write token
    assert set(secrets) == {n.GIT_READ_SECRET, n.NOTIFY_SECRET}
    refs = re.findall(r'"secretKeyRef": \{[^}]*"name": "([^"]+)"', json.dumps(manifest))
    assert n.GIT_SECRET not in refs


def test_the_local_executor_accepts_the_rendered_cron_workflow():
    executor = LocalExecutor(
        CRON,
        project_root=ROOT,
        workflow_templates=[UPDATE],
        secrets={n.GIT_SECRET: {"token": "dummy-token"}},
        configmaps={n.RULES_CONFIGMAP: {n.RULES_KEY: ""}},
        log=lambda record: None,
    )
    assert executor.kind == "CronWorkflow"
    assert set(executor.workflow_parameters) == {
        "apply",
        "concurrency",
        "limit",
        "full",
        "verify-live",
        "live-timeout",
    }
    assert (
        "steps.reconcile.step" in executor.preload_modules()
        and "steps.commit_pr.step" in executor.preload_modules()
    )


@pytest.mark.parametrize(
    ("status", "action", "counted"),
    [
        ("Succeeded", "committed", True),
        ("Succeeded", "pr-created", True),
        ("Succeeded", "pr-updated", True),
        # commit-pr found nothing to do: an event that raced the sweep got there first
        ("Succeeded", "unchanged", False),
        # commit-pr did not run (edit-kustomize found the overlay current): Argo before 3.7.16 gives
        # the aggregating output's default, later ones (and the local executor) commit-pr's own
        ("Succeeded", "error", False),
        ("Failed", "committed", False),
        ("Error", "error", False),
    ],
)
def test_the_counter_counts_only_targets_really_updated(templates, update_templates, status, action, counted):
    """Issue 13: "a counter of targets updated by a sweep (a non-zero value means an event was lost
    somewhere)": a sweep-target whose update changed nothing is not counted. The action travels
    commit-pr → update-target (image-update) → sweep-target, and the counter's `when` (evaluated
    as the controller does after substitution; the local evaluator speaks the same subset) keys on it."""
    from typing import get_args

    from steps.commit_pr.result import Action
    from workflows.local.expressions import evaluate_condition

    (counter,) = templates["sweep-target"]["metrics"]["prometheus"]
    when = counter["when"].replace("{{status}}", status).replace("{{outputs.parameters.action}}", action)
    assert "{{" not in when
    assert evaluate_condition(when) is counted
    (forwarded,) = templates["sweep-target"]["outputs"]["parameters"]
    assert forwarded == {
        "name": "action",
        "valueFrom": {
            "parameter": "{{steps.update-target.outputs.parameters.action}}",
            "default": "unchanged",
        },
    }
    own, *for_verify_live = update_templates["update-target"]["outputs"]["parameters"]
    assert [p["name"] for p in for_verify_live] == ["plan", "commit-sha", "seconds-since-push"]
    assert own == {
        "name": "action",
        "valueFrom": {"parameter": "{{steps.commit-pr.outputs.parameters.action}}", "default": "unchanged"},
    }
    assert action in get_args(Action) or action == "error"

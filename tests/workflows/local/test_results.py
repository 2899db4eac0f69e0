"""Results read by sensors, ``run --local``'s progress line and the sweep: phases and node names."""

from __future__ import annotations

import json

from workflows.local.results import (
    NodeResult,
    Phase,
    StepOutputs,
    WorkflowResult,
    child_node_name,
    item_index,
    item_node_name,
)


def test_phases_are_argo_strings_in_json_and_logs() -> None:
    assert json.dumps({"phase": Phase.SUCCEEDED}) == '{"phase": "Succeeded"}'
    assert [p.value for p in Phase] == ["Running", "Succeeded", "Failed", "Error", "Skipped", "Omitted"]
    assert Phase.FAILED == "Failed" and Phase.ERROR.lower() == "error"
    assert Phase.SKIPPED.ok and Phase.SUCCEEDED.ok and not Phase.OMITTED.ok and not Phase.FAILED.ok


def test_node_names_are_built_and_read_in_one_place() -> None:
    item = item_node_name(child_node_name("image-update-abc", "update-target"), 1)
    assert item == "image-update-abc.update-target(1)"
    commit = child_node_name(item, "commit-pr")
    assert item_index(commit, "update-target") == 1
    assert item_index(item, "update-target") == 1
    assert item_index("image-update-abc.update-target(12).edit-kustomize", "update-target") == 12
    assert item_index("image-update-abc.resolve-image", "update-target") is None
    # a step whose name ends like another's is not that step
    assert item_index("wf.sweep-update-target(0).commit-pr", "update-target") is None


def test_item_nodes_and_item_node() -> None:
    def node(name: str, template: str, phase: Phase = Phase.SUCCEEDED) -> NodeResult:
        return NodeResult(name, template, phase)

    result = WorkflowResult(
        "wf",
        Phase.FAILED,
        [
            node("wf.resolve-image", "resolve-image"),
            node("wf.update-target(0).edit-kustomize", "edit-kustomize"),
            node("wf.update-target(0).commit-pr", "commit-pr"),
            node("wf.update-target(1).edit-kustomize", "edit-kustomize", Phase.FAILED),
            node("wf.update-target(10).edit-kustomize", "edit-kustomize"),
            node("wf.update-target(1)", "update-target", Phase.FAILED),
        ],
    )
    assert set(result.item_nodes("update-target", 0)) == {"edit-kustomize", "commit-pr"}
    assert result.item_nodes("update-target", 1)["edit-kustomize"].phase == Phase.FAILED
    assert result.item_nodes("update-target", 2) == {}
    assert result.item_node("update-target", 1).template == "update-target"
    assert result.item_node("update-target", 0) is None


def test_step_outputs_of_a_fan_out_are_json_lists_in_item_order() -> None:
    items = [StepOutputs({"a": "1"}, "r1"), StepOutputs({}, None)]
    out = StepOutputs.aggregate({"a"}, items)
    assert json.loads(out.parameters["a"]) == ["1", None]
    assert json.loads(out.result) == ["r1", None]

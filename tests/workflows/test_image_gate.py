"""CronWorkflow ``image-gate`` (issue 35): the promotion gate every minute — image-reconcile's wiring
with ``gated: true``, and the promotion metrics."""

from __future__ import annotations

from pathlib import Path

import yaml

from workflows import image_gate

ROOT = Path(__file__).resolve().parents[2]


def _rendered() -> dict:
    return yaml.safe_load((ROOT / "manifests" / "workflows" / "image-gate.yaml").read_text())


def test_the_rendered_manifest_is_the_declared_one() -> None:
    assert _rendered() == image_gate.manifest()


def test_every_minute_with_the_gated_rules_only() -> None:
    cw = _rendered()
    assert cw["kind"] == "CronWorkflow" and cw["metadata"]["name"] == "image-gate"
    assert cw["spec"]["schedules"] == ["* * * * *"]  # promotion within 2 minutes of the soak's end
    main = next(t for t in cw["spec"]["workflowSpec"]["templates"] if t["name"] == "main")
    reconcile = next(s for group in main["steps"] for s in group if s["name"] == "reconcile")
    assert {"name": "gated", "value": "true"} in reconcile["arguments"]["parameters"]


def test_promotions_by_result_and_the_time_to_promotion_are_metrics() -> None:
    cw = _rendered()
    counter = next(t for t in cw["spec"]["workflowSpec"]["templates"] if t["name"] == "count-promotion")
    metrics = {m["name"]: m for m in counter["metrics"]["prometheus"]}
    assert {label["key"] for label in metrics["imagebump_promotions_total"]["labels"]} == {"result", "env"}
    assert "counter" in metrics["imagebump_promotions_total"]
    assert "histogram" in metrics["imagebump_promotion_seconds"]
    # the same decisions in the decision metric, with image-update's help (one help per name)
    decisions = metrics["imagebump_decisions_total"]
    assert {label["key"]: label["value"] for label in decisions["labels"]} == {
        "decision": "{{inputs.parameters.result}}",
        "env": "{{inputs.parameters.env}}",
    }
    assert "counter" in decisions and "when" not in decisions
    update = yaml.safe_load((ROOT / "manifests" / "workflows" / "image-update.yaml").read_text())
    helps = {
        m["help"]
        for t in update["spec"]["templates"]
        for m in (t.get("metrics") or {}).get("prometheus", [])
        if m["name"] == "imagebump_decisions_total"
    }
    assert helps == {decisions["help"]}
    main = next(t for t in cw["spec"]["workflowSpec"]["templates"] if t["name"] == "main")
    step = next(s for group in main["steps"] for s in group if s["name"] == "count-promotions")
    assert step["withParam"] == "{{steps.reconcile.outputs.parameters.gates}}"

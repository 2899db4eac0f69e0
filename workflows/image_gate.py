"""CronWorkflow ``image-gate``: every minute, the promotion gate (``promoteAfter``, issue 35).

The same wiring as ``image-reconcile`` (read from its :func:`workflows.image_reconcile.build`, so the
two never drift): its reconcile step with ``gated: true`` (only the gated rules and the rules of the
environments they wait on), whose promoted ``gate: wait`` targets go to image-update's
``update-target``. Every minute, so a gated target is promoted within 2 minutes of its soak's end.
Adds the metrics ``imagebump_promotions_total{result,env}`` (promoted, blocked) and
``imagebump_promotion_seconds{env}`` (from the environment before going live to the promotion), and
counts the same decisions in ``imagebump_decisions_total{decision,env}`` (each once: see
:func:`steps.gate.sweep.outcomes`) beside image-update's (edit-kustomize's, and the gate's ``waiting``
of a push).

Rights: the reconcile pod reads Argo CD's Applications (``get``, ``list``: the role verify-live has).
"""

from __future__ import annotations

import copy
from typing import Any

from workflows import image_reconcile, image_update
from workflows import names as n

NAME = "image-gate"
#: Every minute (cron's finest): promotion within one interval (≤ 60 s) after the soak ends.
SCHEDULE = "* * * * *"
STARTING_DEADLINE_SECONDS = 50
#: Buckets of imagebump_promotion_seconds: a soak is minutes to hours.
BUCKETS = [60, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400]


def _count_promotion() -> dict[str, Any]:
    """A pod-less node per gate decided (promoted or blocked) that counts it and, promoted, observes
    the seconds from the environment before going live."""
    labels = [
        {"key": "result", "value": "{{inputs.parameters.result}}"},
        {"key": "env", "value": "{{inputs.parameters.env}}"},
    ]
    return {
        "name": "count-promotion",
        "inputs": {"parameters": [{"name": "result"}, {"name": "env"}, {"name": "seconds"}]},
        "suspend": {"duration": "0"},
        "metrics": {
            "prometheus": [
                {
                    "name": "imagebump_promotions_total",
                    "help": "gated targets decided by the promotion gate, by result (promoted, blocked) and env",
                    "labels": labels,
                    "counter": {"value": "1"},
                },
                {
                    "name": image_update.DECISIONS_METRIC,
                    "help": image_update.DECISIONS_HELP,
                    "labels": [
                        {"key": "decision", "value": "{{inputs.parameters.result}}"},
                        {"key": "env", "value": "{{inputs.parameters.env}}"},
                    ],
                    "counter": {"value": "1"},
                },
                {
                    "name": "imagebump_promotion_seconds",
                    "help": "seconds from the environment before going live with the image to its promotion",
                    "labels": [{"key": "env", "value": "{{inputs.parameters.env}}"}],
                    "when": "'{{inputs.parameters.result}}' == 'promoted'",
                    "histogram": {"buckets": BUCKETS, "value": "{{inputs.parameters.seconds}}"},
                },
            ]
        },
    }


def manifest() -> dict[str, Any]:
    """The ``image-gate`` CronWorkflow (a manifest), from image-reconcile's."""
    cw = copy.deepcopy(image_reconcile.build().to_dict())
    cw["metadata"]["name"] = NAME
    cw["metadata"].setdefault("annotations", {})["workflows.argoproj.io/description"] = (
        "The promotion gate (promoteAfter): every minute, gated targets whose environment before ran the "
        "image live and Healthy for the soak are promoted by image-update's update-target."
    )
    spec = cw["spec"]
    spec["schedules"] = [SCHEDULE]
    spec["startingDeadlineSeconds"] = STARTING_DEADLINE_SECONDS
    templates = spec["workflowSpec"]["templates"]
    for template in templates:
        if template["name"] == "reconcile":
            for output in template.get("outputs", {}).get("parameters", []):
                if output["name"] == "gates":
                    output["valueFrom"]["default"] = "[]"
        if template["name"] == "main":
            first, *rest = template["steps"]
            for step in first:
                if step["name"] == "reconcile":
                    step["arguments"]["parameters"].append({"name": "gated", "value": "true"})
            rest[0].append(
                {
                    "name": "count-promotions",
                    "template": "count-promotion",
                    "arguments": {
                        "parameters": [
                            {"name": k, "value": f"{{{{item.{k}}}}}"} for k in ("result", "env", "seconds")
                        ]
                    },
                    "withParam": "{{steps.reconcile.outputs.parameters.gates}}",
                }
            )
    templates.append(_count_promotion())
    assert n.NAMESPACE == cw["metadata"]["namespace"]
    return cw

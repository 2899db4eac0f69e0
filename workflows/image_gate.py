"""CronWorkflow ``image-gate``: every minute, the promotion gate (``promoteAfter``, issue 35).

The same wiring as ``image-reconcile``, built by the same :func:`workflows.image_reconcile.build` (so
the two never drift): its reconcile step with ``gated: true`` (only the gated rules and the rules of the
environments they wait on), whose promoted ``gate: wait`` targets go to image-update's
``update-target``. Every minute, so a gated target is promoted within 2 minutes of its soak's end.
Adds the metrics ``imagebump_promotions_total{result,env}`` (promoted, blocked) and
``imagebump_promotion_seconds{env}`` (from the environment before going live to the promotion), and
counts the same decisions in ``imagebump_decisions_total{decision,env}`` (each once: see
:func:`steps.gate.apply.outcomes`) beside image-update's (edit-kustomize's, and the gate's ``waiting``
of a push).

Rights: the reconcile pod reads Argo CD's Applications (``get``, ``list``: the role verify-live has).
"""

from __future__ import annotations

from typing import Any

from hera.workflows import Parameter
from hera.workflows import models as m

from workflows import common as c
from workflows import image_reconcile, image_update
from workflows import names as n

NAME = "image-gate"
#: Every minute (cron's finest): promotion within one interval (≤ 60 s) after the soak ends.
SCHEDULE = "* * * * *"
STARTING_DEADLINE_SECONDS = 50
#: Buckets of imagebump_promotion_seconds: a soak is minutes to hours.
BUCKETS = [60, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400]
DESCRIPTION = (
    "The promotion gate (promoteAfter): every minute, gated targets whose environment before ran the "
    "image live and Healthy for the soak are promoted by image-update's update-target."
)


def _count_promotion() -> c.MeteredSuspend:
    """A pod-less node per gate decided (promoted or blocked) that counts it and, promoted, observes
    the seconds from the environment before going live."""
    result, env = "{{inputs.parameters.result}}", "{{inputs.parameters.env}}"
    return c.MeteredSuspend(
        name="count-promotion",
        duration="0",
        inputs=[Parameter(name="result"), Parameter(name="env"), Parameter(name="seconds")],
        metrics=m.Metrics(
            prometheus=[
                m.Prometheus(
                    name="imagebump_promotions_total",
                    help="gated targets decided by the promotion gate, by result (promoted, blocked) and env",
                    labels=[m.MetricLabel(key="result", value=result), m.MetricLabel(key="env", value=env)],
                    counter=m.Counter(value="1"),
                ),
                m.Prometheus(
                    name=image_update.DECISIONS_METRIC,
                    help=image_update.DECISIONS_HELP,
                    labels=[m.MetricLabel(key="decision", value=result), m.MetricLabel(key="env", value=env)],
                    counter=m.Counter(value="1"),
                ),
                m.Prometheus(
                    name="imagebump_promotion_seconds",
                    help="seconds from the environment before going live with the image to its promotion",
                    labels=[m.MetricLabel(key="env", value=env)],
                    when=f"'{result}' == 'promoted'",
                    histogram=m.Histogram(buckets=BUCKETS, value="{{inputs.parameters.seconds}}"),
                ),
            ]
        ),
    )


def build() -> Any:
    """The ``image-gate`` CronWorkflow (Hera object): image-reconcile's wiring, built by its
    :func:`workflows.image_reconcile.build` with this :class:`~workflows.image_reconcile.ReconcileVariant`."""
    return image_reconcile.build(
        image_reconcile.ReconcileVariant(
            name=NAME,
            description=DESCRIPTION,
            schedule=SCHEDULE,
            starting_deadline_seconds=STARTING_DEADLINE_SECONDS,
            gated=True,
            count_gates=("count-promotions", _count_promotion()),
        )
    )


def manifest() -> dict[str, Any]:
    """The ``image-gate`` CronWorkflow (a manifest)."""
    cw = build().to_dict()
    assert n.NAMESPACE == cw["metadata"]["namespace"]
    return cw

"""Argo Events objects: EventBus (JetStream), EventSource (SQS) and Sensor (create image-update Workflows).

Built as plain dicts in the CRD's own shape, not through ``hera.events.models``: those follow
the Argo Server API's JSON (no apiVersion/kind, int64 as strings, resources as base64), which
the controller rejects. tests/sensors/test_argo_events.py proves every document against the
Argo Events v1.9 JSON schema with unknown fields refused. Filters, name derivation and
parameter mapping come from :mod:`sensors.definition` — the one place the local sensor reads.
"""

from __future__ import annotations

from typing import Any

from sensors import definition as d
from workflows import names as n
from workflows import pod_security

API_VERSION = "argoproj.io/v1alpha1"
EVENTBUS = "default"  # the name Sensors and EventSources use when eventBusName is unset
EVENTSOURCE = "ecr"
EVENT_NAME = "push"  # key under spec.sqs; the Sensor's dependency refers to it
SENSOR = n.SENSOR
TRIGGER = f"create-{n.IMAGE_UPDATE}"
DEAD_LETTER_TRIGGER = "dead-letter"

#: The trigger's retries. Argo Events retries EVERY failed trigger, AlreadyExists included
#: (v1.9.11 pkg/sensors/triggers/standard-k8s/standard-k8s.go returns the Create error as is;
#: pkg/sensors/listener.go wraps the trigger in ``DoWithRetry``), while the trigger's one
#: goroutine holds the next events (pkg/eventbus/jetstream/sensor/trigger_conn.go ``processMsgs``).
#: So the retries are what a duplicate delivery costs: 3 attempts, sleeping 1 s then 2 s (each
#: up to +20 % jitter; k8s.io/apimachinery wait.ExponentialBackoff) — at most 3.6 s. ``duration``
#: must be a string: an integer is read as nanoseconds (pkg/shared/util/retry.go Convert2WaitBackoff).
TRIGGER_RETRY = {"steps": 3, "duration": "1s", "factor": 2.0, "jitter": 0.2}
#: Pinned JetStream (NATS) version. The controller deploys only versions its ConfigMap
#: ``argo-events-controller-config`` lists (argo-events v1.9.11 pkg/reconciler/config.go
#: ``GetJetStreamVersion``: anything else is "unsupported version", the EventBus never becomes ready
#: and no Sensor is deployed). 2.10.29 is in the default config of v1.9.10 and v1.9.11
#: (manifests/base/controller-manager/controller-config.yaml); v1.9.2-v1.9.9 list 2.10.10 instead.
#: Upstream's own docs say to pin a version rather than ``latest`` (docs/eventbus/jetstream.md).
JETSTREAM_VERSION = "2.10.29"
#: The oldest Argo Events release whose default controller config lists JETSTREAM_VERSION.
MIN_ARGO_EVENTS = "1.9.10"
#: Placeholders patched per installation (docs/install.md, manifests/aws outputs).
SQS_QUEUE = "imagebump-ecr-events"
AWS_REGION = "us-west-2"


def _meta(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": n.NAMESPACE, "labels": dict(n.LABELS), **extra}


def eventbus() -> dict[str, Any]:
    """JetStream EventBus, 3 replicas, pinned version, persisted."""
    return {
        "apiVersion": API_VERSION,
        "kind": "EventBus",
        "metadata": _meta(EVENTBUS),
        "spec": {
            "jetstream": {
                "version": JETSTREAM_VERSION,
                "metadata": {"labels": dict(n.LABELS)},  # on the pods, so `-l part-of=imagebump` finds them
                "replicas": 3,
                "persistence": {"volumeSize": "5Gi", "accessMode": "ReadWriteOnce"},
            }
        },
    }


def eventsource(queue: str = SQS_QUEUE, region: str = AWS_REGION) -> dict[str, Any]:
    """SQS EventSource: long polls the EventBridge → SQS queue with its IRSA ServiceAccount.

    SQS EventSources run active-active, so 2 replicas double throughput without duplicates
    beyond SQS's own at-least-once delivery (the Sensor's Workflow names absorb those).
    """
    return {
        "apiVersion": API_VERSION,
        "kind": "EventSource",
        "metadata": _meta(EVENTSOURCE),
        "spec": {
            "eventBusName": EVENTBUS,
            "replicas": 2,
            "template": {
                "metadata": {"labels": dict(n.LABELS)},
                "serviceAccountName": n.SA_EVENTSOURCE,
                "securityContext": pod_security.pod_security_context(),
            },
            "sqs": {
                EVENT_NAME: {
                    "region": region,
                    "queue": queue,
                    "waitTimeSeconds": 20,  # int64 in the CRD (a string would be rejected)
                    "jsonBody": True,
                    "dlq": True,  # leave unparseable messages for SQS's redrive to the DLQ
                }
            },
        },
    }


def data_filters() -> list[dict[str, Any]]:
    """:data:`sensors.definition.FILTERS` in Argo Events' ``filters.data`` form."""
    return [{"path": path, "type": "string", "value": [pattern]} for path, pattern in d.FILTERS.items()]


def workflow_resource() -> dict[str, Any]:
    """The Workflow the trigger creates; name and ``event`` are filled by trigger parameters.

    Only ``workflowTemplateRef`` and ``arguments``: the rest comes from the WorkflowTemplate, and
    these two are what a controller in ``templateReferencing: Strict``/``Secure`` mode accepts.
    """
    return {
        "apiVersion": API_VERSION,
        "kind": "Workflow",
        "metadata": {
            "name": f"{d.NAME_PREFIX}placeholder",  # replaced by the name parameter
            "namespace": n.NAMESPACE,
            "labels": {**n.LABELS, "imagebump.io/trigger": "sensor"},
        },
        "spec": {
            "workflowTemplateRef": {"name": d.WORKFLOW_TEMPLATE},
            "arguments": {"parameters": [{"name": name, "value": ""} for name in d.PARAMETERS]},
        },
    }


def trigger_parameters() -> list[dict[str, Any]]:
    """Trigger parameters: the Workflow's name and its arguments, from :mod:`sensors.definition`."""
    parameters: list[dict[str, Any]] = [
        {
            "src": {"dependencyName": EVENT_NAME, "dataTemplate": d.NAME_TEMPLATE},
            "dest": "metadata.name",
        }
    ]
    for index, (_name, key) in enumerate(d.PARAMETERS.items()):
        parameters.append(
            {
                "src": {"dependencyName": EVENT_NAME, "dataKey": key},
                "dest": f"spec.arguments.parameters.{index}.value",
            }
        )
    return parameters


def sensor() -> dict[str, Any]:
    """Sensor: filters → create a Workflow from ``image-update``, named from repository, tag and digest.

    A ``k8s`` trigger creating the Workflow object (no ``argo`` CLI in the sensor pod, so no
    version skew between the CLI Argo Events bundles and the Workflows controller). A duplicate
    delivery names the same Workflow, the API server answers AlreadyExists, the trigger retries
    (:data:`TRIGGER_RETRY`, bounded to a few seconds) and then hands the event to the
    ``dead-letter`` trigger, which writes it to the Sensor's log: one line per dropped event, so
    a lost push (any other error) is visible, with its body, and counted in
    ``argo_events_action_triggered_total{trigger_name="dead-letter"}``.
    """
    return {
        "apiVersion": API_VERSION,
        "kind": "Sensor",
        "metadata": _meta(SENSOR, annotations={"events.argoproj.io/leader-election": "k8s"}),
        "spec": {
            "eventBusName": EVENTBUS,
            "replicas": 2,
            "template": {
                "metadata": {"labels": dict(n.LABELS)},
                "serviceAccountName": n.SA_SENSOR,
                "securityContext": pod_security.pod_security_context(),
            },
            "dependencies": [
                {
                    "name": EVENT_NAME,
                    "eventSourceName": EVENTSOURCE,
                    "eventName": EVENT_NAME,
                    "filters": {"dataLogicalOperator": "and", "data": data_filters()},
                }
            ],
            "triggers": [
                {
                    "template": {
                        "name": TRIGGER,
                        "k8s": {
                            "operation": "create",
                            "source": {"resource": workflow_resource()},
                            "parameters": trigger_parameters(),
                        },
                    },
                    # Ack the event only after the trigger (and, failing it, the dlqTrigger) ran.
                    # The controller refuses a dlqTrigger unless both are atLeastOnce
                    # (v1.9.11 pkg/reconciler/sensor/validate.go validateDlqTrigger).
                    "atLeastOnce": True,
                    "retryStrategy": dict(TRIGGER_RETRY),
                    "rateLimit": {"unit": "Second", "requestsPerUnit": 20},
                    "dlqTrigger": {
                        "template": {"name": DEAD_LETTER_TRIGGER, "log": {"intervalSeconds": 0}},
                        "atLeastOnce": True,
                    },
                }
            ],
        },
    }


def documents() -> list[dict[str, Any]]:
    return [eventbus(), eventsource(), sensor()]

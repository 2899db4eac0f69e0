"""Argo Events objects: EventBus (JetStream), EventSource (SQS) and Sensor (submit image-update).

Built as plain dicts in the CRD's own shape, not through ``hera.events.models``: those follow
the Argo Server API's JSON (no apiVersion/kind, int64 as strings, resources as base64), which
the controller rejects. tests/sensors/test_argo_events.py proves every document against the
Argo Events v1.9 JSON schema with unknown fields refused. Filters, name derivation and
parameter mapping come from :mod:`sensors.definition` — the one place the local sensor reads.
"""

from __future__ import annotations

from typing import Any

from sensors import definition as d
from workflows import common as c

API_VERSION = "argoproj.io/v1alpha1"
EVENTBUS = "default"  # the name Sensors and EventSources use when eventBusName is unset
EVENTSOURCE = "ecr"
EVENT_NAME = "push"  # key under spec.sqs; the Sensor's dependency refers to it
SENSOR = "image-update"
#: Pinned JetStream (NATS) version; must be one the Argo Events controller's config lists.
JETSTREAM_VERSION = "2.10.10"
#: Placeholders patched per installation (docs/install.md, manifests/aws outputs).
SQS_QUEUE = "imagebump-ecr-events"
AWS_REGION = "us-west-2"

_POD_SECURITY_CONTEXT = {
    "runAsNonRoot": True,
    "runAsUser": c.UID,
    "runAsGroup": c.UID,
    "fsGroup": c.UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _meta(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": c.NAMESPACE, "labels": dict(c.LABELS), **extra}


def eventbus() -> dict[str, Any]:
    """JetStream EventBus, 3 replicas, pinned version, persisted."""
    return {
        "apiVersion": API_VERSION,
        "kind": "EventBus",
        "metadata": _meta(EVENTBUS),
        "spec": {
            "jetstream": {
                "version": JETSTREAM_VERSION,
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
                "serviceAccountName": c.SA_EVENTSOURCE,
                "securityContext": _POD_SECURITY_CONTEXT,
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
    """The Workflow the trigger creates; name and ``event`` are filled by trigger parameters."""
    return {
        "apiVersion": API_VERSION,
        "kind": "Workflow",
        "metadata": {
            "name": f"{d.NAME_PREFIX}placeholder",  # replaced by the name parameter
            "namespace": c.NAMESPACE,
            "labels": {**c.LABELS, "imagebump.io/trigger": "sensor"},
        },
        "spec": {
            "workflowTemplateRef": {"name": d.WORKFLOW_TEMPLATE},
            "arguments": {"parameters": [{"name": name, "value": ""} for name in d.PARAMETERS]},
        },
    }


def sensor() -> dict[str, Any]:
    """Sensor: filters → submit ``image-update`` named from repository, tag and digest."""
    parameters = [
        {
            "src": {"dependencyName": EVENT_NAME, "dataTemplate": d.NAME_TEMPLATE},
            "dest": "metadata.name",
        }
    ]
    for index, (name, key) in enumerate(d.PARAMETERS.items()):
        parameters.append(
            {
                "src": {"dependencyName": EVENT_NAME, "dataKey": key},
                "dest": f"spec.arguments.parameters.{index}.value",
            }
        )
    return {
        "apiVersion": API_VERSION,
        "kind": "Sensor",
        "metadata": _meta(SENSOR, annotations={"events.argoproj.io/leader-election": "k8s"}),
        "spec": {
            "eventBusName": EVENTBUS,
            "replicas": 2,
            "template": {
                "serviceAccountName": c.SA_SENSOR,
                "securityContext": _POD_SECURITY_CONTEXT,
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
                        "name": "submit-image-update",
                        "argoWorkflow": {
                            "operation": "submit",
                            "source": {"resource": workflow_resource()},
                            "parameters": parameters,
                        },
                    },
                    "atLeastOnce": True,
                    "retryStrategy": {"steps": 5, "duration": "2s", "factor": 2.0, "jitter": 0.2},
                    "rateLimit": {"unit": "Second", "requestsPerUnit": 20},
                }
            ],
        },
    }


def documents() -> list[dict[str, Any]]:
    return [eventbus(), eventsource(), sensor()]

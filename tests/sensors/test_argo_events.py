"""The Argo Events objects: strictly valid against the v1.9 schema, and saying what definition says."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from sensors import argo
from sensors import definition as d
from tests.workflows import schemas
from workflows import image_update

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests" / "events"
EVENTS = Path(__file__).resolve().parents[1] / "testdata" / "events"


@pytest.mark.parametrize("document", argo.documents(), ids=lambda doc: doc["kind"])
def test_documents_validate_strictly(document):
    assert schemas.errors(document) == []


@pytest.mark.parametrize(
    ("build", "mutate", "expected"),
    [
        pytest.param(
            argo.eventsource,
            lambda doc: doc["spec"]["sqs"][argo.EVENT_NAME].update(waitTimeSeconds="20"),
            "'20' is not of type 'integer'",
            id="waitTimeSeconds-as-string",
        ),
        pytest.param(
            argo.eventsource,
            lambda doc: doc["spec"]["sqs"][argo.EVENT_NAME].update(jsonbody=True),
            "'jsonbody' was unexpected",
            id="misspelled-jsonBody",
        ),
        pytest.param(
            argo.sensor,
            lambda doc: doc["spec"]["triggers"][0].update(atLeastOnec=True),
            "'atLeastOnec' was unexpected",
            id="misspelled-atLeastOnce",
        ),
        pytest.param(
            argo.sensor,
            lambda doc: doc["spec"]["triggers"][0]["template"]["argoWorkflow"]["parameters"][0]["src"].update(
                datakey="body"
            ),
            "'datakey' was unexpected",
            id="misspelled-dataKey",
        ),
        pytest.param(
            argo.eventbus,
            lambda doc: doc["spec"]["jetstream"].update(replicas="3"),
            "'3' is not of type 'integer'",
            id="replicas-as-string",
        ),
    ],
)
def test_schema_catches_mistakes(build, mutate, expected):
    document = build()
    mutate(document)
    assert any(expected in error for error in schemas.errors(document)), schemas.errors(document)


def test_rendered_files_are_the_builders_output():
    builders = {"eventbus": argo.eventbus, "eventsource": argo.eventsource, "sensor": argo.sensor}
    for name, build in builders.items():
        assert yaml.safe_load((MANIFESTS / f"{name}.yaml").read_text()) == build()


def test_eventbus_is_pinned_jetstream_with_three_replicas():
    jetstream = argo.eventbus()["spec"]["jetstream"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", jetstream["version"])
    assert jetstream["replicas"] == 3


def test_eventsource_long_polls_sqs_as_json_with_irsa():
    spec = argo.eventsource()["spec"]
    sqs = spec["sqs"][argo.EVENT_NAME]
    assert sqs["jsonBody"] is True and sqs["dlq"] is True
    assert sqs["waitTimeSeconds"] == 20 and isinstance(sqs["waitTimeSeconds"], int)
    assert spec["template"]["serviceAccountName"] == "imagebump-eventsource"


def _sensor_parts() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    spec = argo.sensor()["spec"]
    (dependency,) = spec["dependencies"]
    (trigger,) = spec["triggers"]
    return spec, dependency, trigger


def test_sensor_filters_are_the_definition():
    _, dependency, _ = _sensor_parts()
    assert dependency["eventSourceName"] == argo.EVENTSOURCE
    assert dependency["eventName"] in argo.eventsource()["spec"]["sqs"]
    filters = dependency["filters"]
    assert filters["dataLogicalOperator"] == "and"
    assert {f["path"]: f["value"] for f in filters["data"]} == {p: [r] for p, r in d.FILTERS.items()}
    assert all(f["type"] == "string" for f in filters["data"])


def _gjson_get(data: Any, path: str) -> tuple[bool, Any]:
    # The paths are plain dotted keys (no gjson wildcards or escapes), so this is gjson's meaning.
    for key in path.split("."):
        if not isinstance(data, dict) or key not in data:
            return False, None
        data = data[key]
    return True, data


def _sensor_matches(filters: list[dict[str, Any]], data: dict[str, Any]) -> bool:
    """Argo Events' string data filter: each path present, any regex found (unanchored search)."""
    for f in filters:
        found, value = _gjson_get(data, f["path"])
        if not found or not any(re.search(v, str(value)) for v in f["value"]):
            return False
    return True


@pytest.mark.parametrize("sample", sorted(p.name for p in EVENTS.glob("*.json")))
def test_rendered_filters_and_accepts_agree_on_every_sample(sample):
    event = json.loads((EVENTS / sample).read_text())
    _, dependency, _ = _sensor_parts()
    # jsonBody: true → the event data is {"body": <parsed SQS body>, ...}
    data = {"messageId": "m-1", "messageAttributes": {}, "body": event}
    assert _sensor_matches(dependency["filters"]["data"], data) is d.accepts(event)[0]


def test_trigger_submits_image_update_with_name_and_event():
    spec, _, trigger = _sensor_parts()
    assert trigger["atLeastOnce"] is True
    assert trigger["retryStrategy"]["steps"] >= 3
    assert trigger["rateLimit"]["requestsPerUnit"] > 0
    workflow_trigger = trigger["template"]["argoWorkflow"]
    assert workflow_trigger["operation"] == "submit"
    resource = workflow_trigger["source"]["resource"]
    assert resource["kind"] == "Workflow"
    assert resource["spec"]["workflowTemplateRef"] == {"name": image_update.NAME}
    by_dest = {p["dest"]: p["src"] for p in workflow_trigger["parameters"]}
    assert by_dest["metadata.name"]["dataTemplate"] == d.NAME_TEMPLATE
    names = [p["name"] for p in resource["spec"]["arguments"]["parameters"]]
    for index, name in enumerate(names):
        assert by_dest[f"spec.arguments.parameters.{index}.value"]["dataKey"] == d.PARAMETERS[name]
    assert names == ["event"]
    # The template declares what the Sensor passes.
    declared = [p["name"] for p in image_update.build().to_dict()["spec"]["arguments"]["parameters"]]
    assert set(names) <= set(declared)


def test_submitted_workflow_validates_against_the_workflow_crd():
    resource = argo.workflow_resource()
    resource = copy.deepcopy(resource)
    resource["metadata"]["name"] = d.workflow_name(json.loads((EVENTS / "push.json").read_text()))
    resource["spec"]["arguments"]["parameters"][0]["value"] = (EVENTS / "push.json").read_text()
    assert schemas.errors(resource) == []


def test_sensor_is_ha_with_kubernetes_leader_election():
    sensor = argo.sensor()
    assert sensor["metadata"]["annotations"]["events.argoproj.io/leader-election"] == "k8s"
    assert sensor["spec"]["replicas"] == 2
    assert sensor["spec"]["template"]["serviceAccountName"] == "imagebump-sensor"

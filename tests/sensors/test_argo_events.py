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
from tests.sensors.test_definition import render_name_template
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
            lambda doc: doc["spec"]["triggers"][0]["template"]["k8s"]["parameters"][0]["src"].update(
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
        pytest.param(
            argo.sensor,
            lambda doc: doc["spec"]["triggers"][0]["dlqTrigger"]["template"]["log"].update(
                intervalSeconds="0"
            ),
            "'0' is not of type 'integer'",
            id="log-interval-as-string",
        ),
        pytest.param(
            argo.sensor,
            lambda doc: doc["spec"]["triggers"][0]["retryStrategy"].update(factor="2"),
            "'2' is not of type 'number'",
            id="retry-factor-as-string",
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


# --- The JetStream version the controller will deploy (issue 16, item 2) ----------------------

#: JetStream versions the default controller config of each Argo Events 1.9 release lists
#: (argoproj/argo-events, manifests/base/controller-manager/controller-config.yaml at tag vX.Y.Z,
#: eventBus.jetstream.versions[].version; manifests/install.yaml carries the same list). The
#: controller deploys an EventBus only with one of these: pkg/reconciler/config.go
#: GetJetStreamVersion returns "unsupported version" otherwise (v1.9.11), the EventBus is never
#: ready and no Sensor is deployed on it.
_OLD = {"latest", "2.8.1", "2.8.1-alpine", "2.8.2", "2.8.2-alpine", "2.9.1", "2.9.12", "2.9.16"}
JETSTREAM_VERSIONS: dict[str, set[str]] = {
    "1.9.0": _OLD,
    "1.9.1": _OLD,
    **{f"1.9.{patch}": _OLD | {"2.10.10"} for patch in range(2, 10)},
    "1.9.10": _OLD | {"2.10.29"},
    "1.9.11": _OLD | {"2.10.29"},
}


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_eventbus_version_is_listed_by_every_argo_events_release_from_the_minimum_on():
    version = argo.eventbus()["spec"]["jetstream"]["version"]
    assert version == argo.JETSTREAM_VERSION
    supported = sorted((r for r, listed in JETSTREAM_VERSIONS.items() if version in listed), key=_release)
    assert supported, f"JetStream {version} is in no Argo Events 1.9 release's controller config"
    assert supported[0] == argo.MIN_ARGO_EVENTS
    # Contiguous up to the newest release we know: no release after the minimum lacks it.
    newer = [r for r in JETSTREAM_VERSIONS if _release(r) >= _release(argo.MIN_ARGO_EVENTS)]
    assert sorted(newer, key=_release) == supported
    # ... and the minimum is exact: the release before it would not deploy the EventBus.
    before = max(
        (r for r in JETSTREAM_VERSIONS if _release(r) < _release(argo.MIN_ARGO_EVENTS)), key=_release
    )
    assert version not in JETSTREAM_VERSIONS[before]


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


def test_trigger_creates_a_workflow_from_image_update_with_name_and_event():
    _, _, trigger = _sensor_parts()
    template = trigger["template"]
    # A k8s trigger, not argoWorkflow: no `argo` CLI (v3.x in the Argo Events image) in between.
    assert set(template) == {"name", "k8s"}
    k8s = template["k8s"]
    assert k8s["operation"] == "create"
    resource = k8s["source"]["resource"]
    assert resource["apiVersion"] == "argoproj.io/v1alpha1" and resource["kind"] == "Workflow"
    assert resource["metadata"]["namespace"] == "imagebump"
    assert "generateName" not in resource["metadata"]  # the name is what makes duplicates collide
    assert set(resource["spec"]) == {"workflowTemplateRef", "arguments"}
    assert resource["spec"]["workflowTemplateRef"] == {"name": image_update.NAME}
    by_dest = {p["dest"]: p["src"] for p in k8s["parameters"]}
    assert by_dest["metadata.name"] == {"dependencyName": argo.EVENT_NAME, "dataTemplate": d.NAME_TEMPLATE}
    names = [p["name"] for p in resource["spec"]["arguments"]["parameters"]]
    for index, name in enumerate(names):
        assert by_dest[f"spec.arguments.parameters.{index}.value"]["dataKey"] == d.PARAMETERS[name]
    assert names == ["event"]
    assert set(by_dest) == {"metadata.name", "spec.arguments.parameters.0.value"}
    # The template declares what the Sensor passes.
    declared = [p["name"] for p in image_update.build().to_dict()["spec"]["arguments"]["parameters"]]
    assert set(names) <= set(declared)
    assert trigger["rateLimit"]["requestsPerUnit"] > 0


# --- What the Sensor does with a failed trigger (issue 16, item 3) ---------------------------
# Upstream facts, argo-events v1.9.11:
# - pkg/sensors/triggers/standard-k8s/standard-k8s.go Execute, operation create: one Create
#   call whose error (AlreadyExists included) is returned as is.
# - pkg/sensors/listener.go actionFunc: every error is retried with DoWithRetry(retryStrategy)
#   (no retryStrategy: one attempt); after the last failure the dlqTrigger runs, then the event
#   is acked either way (pkg/eventbus/jetstream/sensor/trigger_conn.go processMsg, deferred Ack).
# - trigger_conn.go processMsgs: one goroutine per trigger handles messages one at a time, so
#   the retries of one event hold every event behind it.
# - pkg/shared/util/retry.go Convert2WaitBackoff: an integer `duration` is nanoseconds; an unset
#   jitter means 1 (up to +100 %); k8s.io/apimachinery v0.32.2 pkg/util/wait/backoff.go
#   ExponentialBackoff: `steps` attempts with steps-1 sleeps of duration*factor**i, each made
#   longer by up to jitter*that (wait.go Jitter).
# - pkg/reconciler/sensor/validate.go validateDlqTrigger: a dlqTrigger needs atLeastOnce on the
#   trigger and on the dlqTrigger; validateK8STrigger: a source, and one of these operations.
K8S_OPERATIONS = {"", "create", "patch", "update", "delete"}
UNSET_JITTER = 1.0
#: How long a duplicate delivery may hold the pushes behind it (the issue: "must not stall").
MAX_DUPLICATE_STALL_SECONDS = 5.0


def _go_duration_seconds(value: Any) -> float:
    if isinstance(value, int):
        return value / 1e9  # Convert2WaitBackoff: time.Duration(int64) is nanoseconds
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", value)
    assert match, f"unsupported duration {value!r}"
    return float(match[1]) * {"ms": 0.001, "s": 1.0, "m": 60.0}[match[2]]


def worst_case_retry_seconds(backoff: dict[str, Any] | None) -> float:
    """Longest time DoWithRetry keeps failing an event before giving up (all sleeps, max jitter)."""
    if backoff is None:
        return 0.0
    steps = backoff.get("steps") or 5  # DefaultBackoff.Steps when unset
    duration = _go_duration_seconds(backoff.get("duration", "1s"))
    factor = float(backoff.get("factor", 1.0))
    jitter = float(backoff.get("jitter", UNSET_JITTER))
    total = 0.0
    for _ in range(steps - 1):
        total += duration * (1 + jitter)
        duration *= factor
    return total


def test_the_retry_model_reproduces_the_stall_of_the_old_trigger():
    # The issue measured ~35 s for the former `steps: 5, duration: 2s, factor: 2` (2+4+8+16 s).
    old = {"steps": 5, "duration": "2s", "factor": 2.0, "jitter": 0.2}
    assert worst_case_retry_seconds({**old, "jitter": 0.0}) == 30.0
    assert worst_case_retry_seconds(old) == pytest.approx(36.0)
    assert worst_case_retry_seconds({"steps": 3, "duration": 1}) == pytest.approx(4e-9)  # nanoseconds


def test_a_duplicate_delivery_holds_the_sensor_for_seconds_not_half_a_minute():
    _, _, trigger = _sensor_parts()
    retry = trigger["retryStrategy"]
    assert isinstance(retry["duration"], str), "an integer duration is nanoseconds to Argo Events"
    assert "jitter" in retry, "an unset jitter means up to +100 %"
    stall = worst_case_retry_seconds(retry)
    assert 0 < stall <= MAX_DUPLICATE_STALL_SECONDS
    assert retry["steps"] >= 2, "a transient API error deserves at least one retry"
    # docs/operations.md ("Duplicates and dropped events") states this bound: 3.6 s today.


def test_a_dropped_event_goes_to_a_dead_letter_log():
    _, _, trigger = _sensor_parts()
    dlq = trigger["dlqTrigger"]
    assert trigger["atLeastOnce"] is True and dlq["atLeastOnce"] is True  # validateDlqTrigger
    assert dlq["template"]["name"] == argo.DEAD_LETTER_TRIGGER != trigger["template"]["name"]
    # A log trigger: it cannot fail, needs no RBAC, and prints the event (its SQS body) whole.
    assert set(dlq["template"]) == {"name", "log"}
    assert dlq["template"]["log"].get("intervalSeconds", 0) == 0  # every event, none throttled away
    assert "dlqTrigger" not in dlq  # not recursive (docs/sensors/more-about-sensors-and-triggers.md)
    k8s = trigger["template"]["k8s"]
    assert k8s["operation"] in K8S_OPERATIONS and k8s["source"]


def test_the_argo_events_series_the_docs_name_are_this_sensors():
    """Every `argo_events_*{sensor_name=…,trigger_name=…}` in the docs names this Sensor and its triggers."""
    root = Path(__file__).resolve().parents[2]
    text = "\n".join(p.read_text() for p in (root / "README.md", *sorted((root / "docs").glob("*.md"))))
    series = re.findall(r'argo_events_\w+\{sensor_name="([^"]+)",trigger_name="([^"]+)"\}', text)
    _, _, trigger = _sensor_parts()
    assert {t for _, t in series} == {trigger["template"]["name"], argo.DEAD_LETTER_TRIGGER}
    assert {s for s, _ in series} == {argo.sensor()["metadata"]["name"]}


def _sensor_run(deliveries: list[dict[str, Any]]) -> tuple[list[str], list[str], float]:
    """Play deliveries through the Sensor as v1.9.11 handles them, with an API server that refuses
    a second object of the same name. Returns (Workflows created, events dead-lettered, worst
    time the trigger goroutine was held by failures)."""
    _, dependency, trigger = _sensor_parts()
    existing: list[str] = []
    dead: list[str] = []
    held = 0.0
    for event in deliveries:
        data = {"messageId": "m", "messageAttributes": {}, "body": event}  # jsonBody: true
        if not _sensor_matches(dependency["filters"]["data"], data):
            continue
        name = render_name_template(d.NAME_TEMPLATE, event)
        if name in existing:  # Create → AlreadyExists → retried steps times → dlqTrigger
            held = max(held, worst_case_retry_seconds(trigger["retryStrategy"]))
            dead.append(event["id"])
        else:
            existing.append(name)
    return existing, dead, held


def test_cluster_and_local_intake_agree_on_duplicates():
    push = json.loads((EVENTS / "push.json").read_text())
    again = {**copy.deepcopy(push), "id": "redelivered", "time": "2026-11-16T02:00:00Z"}
    other = copy.deepcopy(push)
    other["id"], other["detail"]["image-tag"] = "other", "1.4.3"
    scan = json.loads((EVENTS / "scan.json").read_text())
    created, dead, held = _sensor_run([push, again, scan, other, again])
    # One Workflow per image, named as the local sensor names it (sensors.definition)...
    assert created == [d.workflow_name(push), d.workflow_name(other)]
    # ...the duplicates are dropped visibly, not silently, and hold the queue only briefly.
    assert dead == ["redelivered", "redelivered"]
    assert 0 < held <= MAX_DUPLICATE_STALL_SECONDS
    # The local sensor refuses the same deliveries by the same name.
    local_names = [d.workflow_name(e) for e in (push, again, other, again) if d.accepts(e)[0]]
    assert sorted(set(local_names)) == sorted(created)


def test_submitted_workflow_validates_against_the_workflow_crd():
    resource = argo.workflow_resource()
    resource = copy.deepcopy(resource)
    resource["metadata"]["name"] = d.workflow_name(json.loads((EVENTS / "push.json").read_text()))
    resource["spec"]["arguments"]["parameters"][0]["value"] = (EVENTS / "push.json").read_text()
    assert schemas.errors(resource) == []


def test_every_argo_events_pod_carries_the_part_of_label():
    # The README finds the pods with `-l app.kubernetes.io/part-of=imagebump`; Argo Events labels
    # pods from spec.template.metadata / spec.jetstream.metadata (v1.9.11 pkg/reconciler/*/resource.go,
    # pkg/reconciler/eventbus/installer/jetstream.go), not from the object's own labels.
    pods = [
        argo.eventbus()["spec"]["jetstream"],
        argo.eventsource()["spec"]["template"],
        argo.sensor()["spec"]["template"],
    ]
    for pod in pods:
        assert pod["metadata"]["labels"]["app.kubernetes.io/part-of"] == "imagebump"


def test_sensor_is_ha_with_kubernetes_leader_election():
    sensor = argo.sensor()
    assert sensor["metadata"]["annotations"]["events.argoproj.io/leader-election"] == "k8s"
    assert sensor["spec"]["replicas"] == 2
    assert sensor["spec"]["template"]["serviceAccountName"] == "imagebump-sensor"

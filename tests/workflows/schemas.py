"""Strict validators for rendered manifests, built from the schema copies in tests/testdata/schemas.

Kubernetes' structural schemas are open where JSON Schema is concerned: an object without
``additionalProperties`` accepts any misspelled key, and ``x-kubernetes-int-or-string`` has
no JSON Schema meaning. :func:`strict` closes objects that list ``properties`` (unless they
preserve unknown fields) and maps int-or-string to ``anyOf: [integer, string]``, so a typo
fails here as the API server's strict field validation would fail it.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

SCHEMAS = Path(__file__).resolve().parent.parent / "testdata" / "schemas"
WORKFLOWS = SCHEMAS / "argo-workflows-v4.0.10"
EVENTS = SCHEMAS / "argo-events-v1.9.11"

_CRD_FILES = {
    "WorkflowTemplate": "workflowtemplates.crd-schema.json",
    "CronWorkflow": "cronworkflows.crd-schema.json",
    "Workflow": "workflows.crd-schema.json",
}
EVENTS_KINDS = ("EventBus", "EventSource", "Sensor")


def strict(schema: Any) -> Any:
    """A copy of ``schema`` with int-or-string mapped and property-listing objects closed."""
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
            return
        if not isinstance(node, dict):
            return
        if node.pop("x-kubernetes-int-or-string", False):
            node.pop("type", None)
            node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        if (
            "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for sub in value.values():
                    walk(sub)
            elif key not in ("enum", "const", "default", "example", "required"):
                walk(value)

    walk(schema)
    return schema


@functools.cache
def crd_validator(kind: str) -> jsonschema.Draft7Validator:
    raw = json.loads((WORKFLOWS / _CRD_FILES[kind]).read_text())
    assert raw["kind"] == kind
    schema = strict(raw["openAPIV3Schema"])
    return jsonschema.Draft7Validator(schema)


@functools.cache
def _events_schema() -> dict[str, Any]:
    raw = json.loads((EVENTS / "schema.json").read_text())
    return {"definitions": strict(raw["definitions"])}


@functools.cache
def events_validator(kind: str) -> jsonschema.Draft7Validator:
    assert kind in EVENTS_KINDS, kind
    schema = {**_events_schema(), "$ref": f"#/definitions/io.argoproj.events.v1alpha1.{kind}"}
    return jsonschema.Draft7Validator(schema)


def validator_for(document: dict[str, Any]) -> jsonschema.Draft7Validator | None:
    """The strict validator for an Argo document, or None for core kinds."""
    kind = document.get("kind")
    if kind in _CRD_FILES:
        return crd_validator(kind)
    if kind in EVENTS_KINDS:
        return events_validator(kind)
    return None


def errors(document: dict[str, Any]) -> list[str]:
    """Every schema violation of an Argo document, as ``path: message`` lines."""
    validator = validator_for(document)
    assert validator is not None, f"no schema for kind {document.get('kind')!r}"
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    ]

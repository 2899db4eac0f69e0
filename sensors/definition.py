"""The ONE definition of what the Sensor accepts, how it names Workflows and what it passes.

Both intakes read this module: :mod:`sensors.argo` renders it into the Argo Events Sensor, and
the local sensor (:mod:`sensors.local`) applies it in Python, so cluster and laptop cannot drift.

Argo Events semantics reproduced here:

- The SQS EventSource with ``jsonBody: true`` wraps the message as ``{"body": <event>, ...}``,
  so Sensor paths start with ``body.``. Python functions take the EventBridge event itself
  (the SQS message body) and strip that prefix.
- A data filter of type ``string`` matches when ANY of its regular expressions is found in
  the value (Go ``regexp.MatchString``: unanchored — hence ``^...$``); all filters must pass
  (``dataLogicalOperator: and``); a missing field fails the filter.
- The Workflow name is the Go/sprig template :data:`NAME_TEMPLATE`; :func:`workflow_name` is
  the same computation in Python (tested against hand-computed SHA-256 values).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

#: Prefix the SQS EventSource puts before the message body in the event's data.
BODY = "body"

#: Sensor data filters: gjson path in the event data → anchored regular expression.
FILTERS: dict[str, str] = {
    "body.source": r"^aws\.ecr$",
    "body.detail-type": r"^ECR Image Action$",
    "body.detail.action-type": r"^PUSH$",
    "body.detail.result": r"^SUCCESS$",
}

#: Workflow parameter → gjson path (dataKey) it is taken from. ``body`` is the raw event JSON.
PARAMETERS: dict[str, str] = {"event": "body"}

#: The WorkflowTemplate a Sensor trigger submits.
WORKFLOW_TEMPLATE = "image-update"
NAME_PREFIX = "image-update-"
NAME_HASH_LENGTH = 16

#: Go template + sprig over ``.Input`` (the event data). Hyphenated keys need ``index``; a
#: missing key yields nil, which ``default ""`` turns into the empty string (a digest-only
#: push has no ``image-tag``). sha256sum hashes the UTF-8 bytes and prints lowercase hex.
NAME_TEMPLATE = (
    NAME_PREFIX
    + '{{ printf "%s|%s|%s"'
    + ' (index .Input.body.detail "repository-name" | default "")'
    + ' (index .Input.body.detail "image-tag" | default "")'
    + ' (index .Input.body.detail "image-digest" | default "")'
    + f" | sha256sum | trunc {NAME_HASH_LENGTH} }}}}"
)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _lookup(event: dict[str, Any], path: str) -> tuple[bool, Any]:
    """Follow a ``body.``-prefixed dotted path (no gjson wildcards are used) into ``event``."""
    parts = path.split(".")
    if parts[0] == BODY:
        parts = parts[1:]
    node: Any = event
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def accepts(event: dict[str, Any]) -> tuple[bool, str]:
    """Would the Sensor trigger for this EventBridge event? Returns (accepted, reason).

    ``reason`` names the first filter that failed, with the value seen, or is ``"accepted"``.
    """
    if not isinstance(event, dict):
        return False, f"event is not a JSON object (got {type(event).__name__})"
    for path, pattern in FILTERS.items():
        found, value = _lookup(event, path)
        if not found:
            return False, f"{path} is missing (want {pattern})"
        text = value if isinstance(value, str) else json.dumps(value)
        if not re.search(pattern, text):
            return False, f"{path} is {text!r} (want {pattern})"
    return True, "accepted"


def _field(event: dict[str, Any], key: str) -> str:
    """``index .Input.body.detail KEY | default ""`` for string-valued (or absent) fields."""
    detail = event.get("detail")
    value = detail.get(key) if isinstance(detail, dict) else None
    if value is None or value == "":
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def name_key(event: dict[str, Any]) -> str:
    """The string :data:`NAME_TEMPLATE` hashes: ``repository|tag|digest``."""
    return "|".join(_field(event, k) for k in ("repository-name", "image-tag", "image-digest"))


def workflow_name(event: dict[str, Any]) -> str:
    """The Workflow name the Sensor gives this event: deterministic and DNS-1123 valid.

    The same image (repository, tag, digest) always gets the same name, so the API server
    refuses a second Workflow for a duplicate delivery.
    """
    digest = hashlib.sha256(name_key(event).encode("utf-8")).hexdigest()
    name = NAME_PREFIX + digest[:NAME_HASH_LENGTH]
    assert _DNS_LABEL.match(name) and len(name) <= 63, name
    return name


def workflow_arguments(body: str) -> dict[str, str]:
    """The Workflow's arguments for an SQS message body: the raw event as ``event``."""
    return {"event": body}

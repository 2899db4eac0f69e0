"""Builders of what an image push looks like, shared by the demo, the benchmarks and the tests.

One home for: the EventBridge "ECR Image Action" event (the SQS message body), the ``put_events``
entry that makes EventBridge emit it, the image manifest moto's ``put_image`` needs, a digest
unique to a name, and the text of a kustomization overlay. Pure: values in, values out; nothing
here talks to AWS or git.

The event's shape is the real one — key for key the team's samples in ``tests/testdata/events/``
(copied from the Amazon ECR user guide's "Amazon ECR events and EventBridge" page): ``version``,
``id``, ``detail-type``, ``source``, ``account``, ``time``, ``region``, ``resources``, and
``detail`` with ``result``, ``repository-name``, ``image-digest``, ``action-type`` and (for a
tagged push) ``image-tag``. Imports the standard library only.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

DETAIL_TYPE = "ECR Image Action"
SOURCE = "aws.ecr"
ACCOUNT = "123456789012"
REGION = "us-west-2"


def digest_for(name: str) -> str:
    """``sha256:<64 hex>`` unique to ``name`` (e.g. ``repository:tag``): a stable made-up digest."""
    return "sha256:" + hashlib.sha256(name.encode()).hexdigest()


def ecr_push_event(
    repository: str,
    digest: str,
    tag: str | None = None,
    *,
    account: str = ACCOUNT,
    region: str = REGION,
    event_id: str | None = None,
    when: str | None = None,
    result: str = "SUCCESS",
    action: str = "PUSH",
) -> dict[str, Any]:
    """The EventBridge event of an ECR push as SQS delivers it (no ``image-tag`` when ``tag`` is None).

    ``event_id`` defaults to a fresh uuid4, ``when`` to now (``YYYY-MM-DDTHH:MM:SSZ``); ``result`` and
    ``action`` make the events a sensor must skip (``FAILURE``, ``DELETE``).
    """
    detail: dict[str, Any] = {
        "result": result,
        "repository-name": repository,
        "image-digest": digest,
        "action-type": action,
    }
    if tag is not None:
        detail["image-tag"] = tag
    return {
        "version": "0",
        "id": event_id or str(uuid.uuid4()),
        "detail-type": DETAIL_TYPE,
        "source": SOURCE,
        "account": account,
        "time": when or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": region,
        "resources": [],
        "detail": detail,
    }


def event_bridge_entry(event: dict[str, Any]) -> dict[str, Any]:
    """The ``put_events`` entry under which EventBridge emits ``event`` (it assigns a new id and time)."""
    account, region = event.get("account") or ACCOUNT, event.get("region") or REGION
    repository = event["detail"]["repository-name"]
    return {
        "Source": event["source"],
        "DetailType": event["detail-type"],
        "Detail": json.dumps(event["detail"]),
        "Resources": [f"arn:aws:ecr:{region}:{account}:repository/{repository}"],
    }


def image_manifest(digest: str) -> str:
    """A Docker v2 image manifest for ``put_image`` (moto needs one; its config digest derives from
    ``digest`` so different images have different manifests)."""
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "size": 1469,
                "digest": digest_for(digest),
            },
            "layers": [],
        }
    )


#: An ``images`` entry's fields in the order kustomize writes them.
IMAGE_FIELDS = ("name", "newName", "newTag", "digest")


def kustomization(
    images: Iterable[tuple[str, str] | Mapping[str, str | None]] | None = None,
    *,
    resources: Iterable[str] = ("../../base",),
    namespace: str | None = None,
    header: str | None = None,
) -> str:
    """A kustomization.yaml overlay: ``resources`` then ``images`` in kustomize's own block style
    (``- name: …`` / ``  newTag: …``); a value YAML would read as something else (``1.0``) is quoted.

    An entry is a ``(name, newTag)`` pair, or a mapping of the entry's fields (``name``, ``newName``,
    ``newTag``, ``digest``; a missing or None field is left out).
    """
    lines = [f"# {header}"] if header else []
    lines += ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization"]
    if namespace:
        lines.append(f"namespace: {namespace}")
    lines.append("resources:")
    lines += [f"- {r}" for r in resources]
    entries = [e if isinstance(e, Mapping) else {"name": e[0], "newTag": e[1]} for e in images or []]
    if entries:
        lines.append("images:")
        for entry in entries:
            unknown = set(entry) - set(IMAGE_FIELDS)
            if unknown:
                raise ValueError(f"images entry {entry!r}: unknown field(s) {sorted(unknown)}")
            fields = [(k, entry[k]) for k in IMAGE_FIELDS if entry.get(k) is not None]
            lines += [f"{'-' if i == 0 else ' '} {k}: {_scalar(str(v))}" for i, (k, v) in enumerate(fields)]
    return "\n".join(lines) + "\n"


def _scalar(value: str) -> str:
    """``value`` plain when YAML reads it back as that string, else double-quoted (``"1.0"``)."""
    import yaml

    try:
        plain = yaml.safe_load(value) == value
    except yaml.YAMLError:
        plain = False
    return value if plain else json.dumps(value)

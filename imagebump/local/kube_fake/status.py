"""The Kubernetes API fake's vocabulary: Status bodies, label selectors, merge patches, constants.

Part of the FAKE Kubernetes API (:mod:`imagebump.local.kube_fake`).
"""

from __future__ import annotations

import base64
import copy
import re
from typing import Any

from steps.kube import api as kube

SERVICE_ACCOUNT = "system:serviceaccount:argocd:imagebump"
TOKEN = "fake-token"
APP_FINALIZER = "resources-finalizer.argocd.argoproj.io"

#: Kinds whose CRD declares a status subresource (argo-cd v3.5.1 manifests/crds: applicationset-crd
#: ``subresources: {status: {}}``; application-crd ``subresources: {}``; appproject-crd none).
STATUS_SUBRESOURCE = frozenset({"ApplicationSet"})

#: The namespaces every Kubernetes cluster starts with.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
NAMESPACE = kube.Resource("Namespace", "v1", "namespaces")

Grant = tuple[str, str, str, str, str]  # namespace ("*" = cluster-wide), apiGroup, resource, name, verb


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class FakeStatus(Exception):
    """An API server Status the fake answers with (the HTTP front sends it as is)."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body["message"])
        self.body = body


class FakeDrop(Exception):
    """The connection is cut before the API server answers (:meth:`FakeKube.fail_write` code 0)."""


#: The Status reason and message the fake answers an injected write failure with, by code.
INJECTED_FAILURES = {
    422: ("Invalid", 'admission webhook "validate.policy.example.com" denied the request: refused by policy'),
    429: ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
    500: ("InternalError", "etcdserver: request timed out"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
}


def parse_selector(selector: str) -> list[tuple[str, str, set[str]]]:
    terms = []
    for term in re.split(r",(?![^(]*\))", selector or ""):
        term = term.strip()
        if not term:
            continue
        if m := re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", term):
            terms.append((m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}))
        elif m := re.fullmatch(r"([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)", term):
            terms.append((m.group(1), "notin" if m.group(2) == "!=" else "in", {m.group(3)}))
        elif m := re.fullmatch(r"(!?)([\w./-]+)", term):
            terms.append((m.group(2), "absent" if m.group(1) else "exists", set()))
        else:
            raise FakeStatus(status_body(400, "BadRequest", f"unable to parse requirement: {term!r}"))
    return terms


def matches(labels: dict[str, str], terms: list[tuple[str, str, set[str]]]) -> bool:
    for key, op, values in terms:
        present = key in labels
        if op == "in" and not (present and labels[key] in values):
            return False
        if op == "notin" and present and labels[key] in values:
            return False
        if op == "exists" and not present:
            return False
        if op == "absent" and present:
            return False
    return True


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge key by key, ``null`` removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def fold_string_data(obj: dict[str, Any]) -> None:
    """The API server merges a Secret's write-only ``stringData`` into ``data`` (stringData wins)."""
    if obj.get("kind") == "Secret" and isinstance(obj.get("stringData"), dict):
        data = dict(obj.get("data") or {})
        for k, v in obj.pop("stringData").items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        obj["data"] = data

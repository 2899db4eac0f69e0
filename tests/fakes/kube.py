"""A FAKE Kubernetes API for the backup/restore tests: in memory, plus a small HTTP front.

Why a fake: no API server can run on this machine, and ``kmock`` 0.8 (tried) ignores
``limit``/``continue`` and label selectors and has no server-side apply — exactly what backup and
restore rely on. So this fake implements the narrow surface imagebump uses
(:class:`steps.kube.api.KubeApi`: paged list in one namespace or all, get, create, replace, delete)
with the server behaviour that matters here:

- it fills in server-populated fields (uid, resourceVersion, creationTimestamp, generation,
  managedFields; an Application's status, as its controller would) so sanitising is tested;
- a replace (PUT) must carry the live ``resourceVersion`` (else 409) and replaces the object
  whole; ``stringData`` is folded into ``data``; kinds with a status subresource keep their
  status (ApplicationSet only: upstream manifests/crds — AppProject and Application have none, so
  their ``status`` is written like any field);
- delete honours finalizers as the API server does (an object with finalizers only gets a
  ``deletionTimestamp``; it goes when the last finalizer is removed), the uid precondition, and
  ``propagationPolicy`` (owned objects are deleted by the garbage collector unless ``Orphan``).
  An Application marked for deletion while it holds ``resources-finalizer.argocd.argoproj.io`` is
  recorded in :attr:`FakeKube.cascaded`: Argo CD would now delete everything it deployed (an
  ApplicationSet holding it, in :attr:`FakeKube.cascaded_sets`: its controller would delete its
  Applications);
- namespaces exist or not: with :attr:`FakeKube.namespaces` a set (:meth:`FakeKube.fresh`, or
  ``seeded(model_namespaces=True)``: Kubernetes' own four; :meth:`FakeKube.seed` and
  :meth:`FakeKube.create_namespace` add one), ``GET /api/v1/namespaces/NAME`` answers 404 for
  a missing one and a create there is refused as the API server does (404 ``namespaces "X" not
  found``); a list or get there finds nothing. ``namespaces`` None (the default: a bare
  ``FakeKube()``, ``seeded()``) means every namespace exists, for tests that do not model them;
- pages with opaque ``continue`` tokens; answers 403 with the API server's Status shape when a
  test forbids a verb, or — given :attr:`FakeKube.grants` — whenever RBAC would (the grants are
  computed from rendered Roles/Bindings by tests/test_rbac.py's rules).

:class:`FakeKubeServer` serves the same store over HTTP on 127.0.0.1:0 with the API server's
paths, so tests drive the REAL adapter (:class:`steps.kube.client.KubernetesApi` over the official
``kubernetes`` client, loaded from a kubeconfig) and, with discovery and OpenAPI v3 documents
served, the real ``kubectl`` (``apply --server-side``). Server-side apply is simplified: applied
top-level fields replace the live ones, labels and annotations are merged; field ownership is not
modelled.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from steps.kube import api as kube
from tests.secret_scan import SECRETS, register

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


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
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


def _parse_selector(selector: str) -> list[tuple[str, str, set[str]]]:
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
            raise FakeStatus(_status(400, "BadRequest", f"unable to parse requirement: {term!r}"))
    return terms


def _matches(labels: dict[str, str], terms: list[tuple[str, str, set[str]]]) -> bool:
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


def _fold_string_data(obj: dict[str, Any]) -> None:
    """The API server merges a Secret's write-only ``stringData`` into ``data`` (stringData wins)."""
    if obj.get("kind") == "Secret" and isinstance(obj.get("stringData"), dict):
        data = dict(obj.get("data") or {})
        for k, v in obj.pop("stringData").items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        obj["data"] = data


@dataclass
class FakeKube:
    """In-memory store implementing :class:`steps.kube.api.KubeApi` (plus test helpers)."""

    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)
    failures: dict[tuple[str, str], int] = field(default_factory=dict)
    #: When set, RBAC is enforced: only these grants (test_rbac's flattened form) are allowed.
    grants: set[Grant] | None = None
    user: str = SERVICE_ACCOUNT
    #: Applications that were marked for deletion holding Argo CD's resources finalizer.
    cascaded: list[tuple[str, str]] = field(default_factory=list)
    #: ApplicationSets marked for deletion holding that finalizer: with progressive sync's
    #: deletionOrder Reverse its controller would now delete the set's Applications itself
    #: (applicationset/controllers/applicationset_controller.go, v3.5.1).
    cascaded_sets: list[tuple[str, str]] = field(default_factory=list)
    #: The namespaces that exist (None: every namespace exists).
    namespaces: set[str] | None = None
    _rv: int = 1000
    _lock: threading.RLock = field(default_factory=threading.RLock)

    # --- test helpers -----------------------------------------------------------------------
    @classmethod
    def fresh(cls) -> FakeKube:
        """A new cluster: only Kubernetes' own namespaces exist (:data:`SYSTEM_NAMESPACES`)."""
        return cls(namespaces=set(SYSTEM_NAMESPACES))

    def forbid(self, verb: str, plural: str) -> None:
        """Answer 403 to ``verb`` (list/get/create/update/delete/patch) on ``plural`` from now on."""
        self.fail(verb, plural, 403)

    def fail(self, verb: str, plural: str, code: int) -> None:
        """Answer ``code`` (403, 404 as for a missing CRD, 500, …) to ``verb`` on ``plural``."""
        self.failures[(verb, plural)] = code

    def create_namespace(self, name: str) -> None:
        """Make namespace ``name`` exist (from now on only the known namespaces exist)."""
        with self._lock:
            self.namespaces = {*(self.namespaces or ()), name}

    def seed(self, obj: dict[str, Any], *, manager: str = "kubectl-client-side-apply") -> dict[str, Any]:
        """Store ``obj`` as if another client created it (its namespace too, when namespaces are
        modelled): server fields and status filled in."""
        resource = kube.resource_for(obj["kind"])
        namespace = obj["metadata"]["namespace"]
        with self._lock:
            if self.namespaces is not None:
                self.namespaces.add(namespace)
            return copy.deepcopy(
                self._create(resource, namespace, copy.deepcopy(obj), manager, keep_status=True)
            )

    def names(self, kind: str, namespace: str) -> list[str]:
        plural = kube.resource_for(kind).plural
        return sorted(n for (p, ns, n) in self.objects if p == plural and ns == namespace)

    def stored(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.objects.get((kube.resource_for(kind).plural, namespace, name)))

    def in_namespace(self, namespace: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for (_, ns, _), o in sorted(self.objects.items()) if ns == namespace]

    def everything(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for _, o in sorted(self.objects.items())]

    def writes(self) -> list[tuple[str, str, str, dict[str, Any]]]:
        return [c for c in self.calls if c[0] in ("create", "update", "delete", "patch")]

    # --- the API --------------------------------------------------------------------------
    def _check(
        self, verb: str, resource: kube.Resource, namespace: str | None, name: str | None = None
    ) -> None:
        code = self.failures.get((verb, resource.plural))
        if code is None and self.grants is not None and not self._granted(verb, resource, namespace, name):
            code = 403
        if code == 403:
            where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
            raise FakeStatus(
                _status(
                    403,
                    "Forbidden",
                    f'{resource.display} is forbidden: User "{self.user}" cannot {verb} resource '
                    f'"{resource.plural}" in API group "{resource.group}"{where}',
                )
            )
        if code == 404:
            raise FakeStatus(_status(404, "NotFound", "the server could not find the requested resource"))
        if code:
            raise FakeStatus(_status(code, "InternalError", "etcdserver: request timed out"))

    def _granted(self, verb: str, resource: kube.Resource, namespace: str | None, name: str | None) -> bool:
        for g_ns, group, plural, g_name, g_verb in self.grants or ():
            if (g_verb, group, plural) != (verb, resource.group, resource.plural):
                continue
            if g_ns != "*" and g_ns != namespace:
                continue
            if g_name != "*" and (verb in ("list", "create") or g_name != name):
                continue
            return True
        return False

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _create(
        self,
        resource: kube.Resource,
        namespace: str,
        obj: dict[str, Any],
        manager: str,
        *,
        keep_status: bool = False,
    ) -> dict:
        _fold_string_data(obj)
        meta = obj.setdefault("metadata", {})
        meta.update(
            namespace=namespace,
            uid=str(uuid.uuid4()),
            resourceVersion=self._next_rv(),
            creationTimestamp="2026-01-02T03:04:05Z",
            managedFields=[
                {
                    "manager": manager,
                    "operation": "Apply",
                    "apiVersion": resource.api_version,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {}},
                }
            ],
        )
        if resource.group:
            meta["generation"] = 1
        if resource.kind in STATUS_SUBRESOURCE and not keep_status:
            obj.pop("status", None)
        if resource.kind == "Application":  # its controller reports at once
            obj.setdefault("status", {"sync": {"status": "Synced"}, "health": {"status": "Healthy"}})
        obj.setdefault("apiVersion", resource.api_version)
        obj.setdefault("kind", resource.kind)
        self.objects[(resource.plural, namespace, meta["name"])] = obj
        return obj

    def list_raw(
        self,
        resource: kube.Resource,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> dict[str, Any]:
        """The list as the API server returns it (items without apiVersion/kind for core kinds)."""
        with self._lock:
            self.calls.append(
                (
                    "list",
                    resource.plural,
                    namespace or "*",
                    {"labelSelector": label_selector, "limit": limit, "continue": continue_token},
                )
            )
            self._check("list", resource, namespace)
            terms = _parse_selector(label_selector or "")
            items = [
                o
                for (p, ns, _), o in sorted(self.objects.items())
                if p == resource.plural
                and (namespace is None or ns == namespace)
                and _matches(o["metadata"].get("labels") or {}, terms)
            ]
            if continue_token:
                try:
                    after = tuple(json.loads(base64.urlsafe_b64decode(continue_token))["after"])
                except (ValueError, KeyError, TypeError):
                    raise FakeStatus(_status(410, "Expired", "invalid continue token")) from None
                items = [o for o in items if (o["metadata"]["namespace"], o["metadata"]["name"]) > after]
            token = None
            if limit and len(items) > limit:
                items = items[:limit]
                last = items[-1]["metadata"]
                token = base64.urlsafe_b64encode(
                    json.dumps({"after": [last["namespace"], last["name"]]}).encode()
                ).decode()
            out = []
            for o in items:
                o = copy.deepcopy(o)
                if not resource.group:  # the real API server leaves these out of core list items
                    o.pop("apiVersion", None)
                    o.pop("kind", None)
                out.append(o)
            meta: dict[str, Any] = {"resourceVersion": str(self._rv)}
            if token:
                meta["continue"] = token
            return {
                "apiVersion": resource.api_version,
                "kind": f"{resource.kind}List",
                "metadata": meta,
                "items": out,
            }

    def namespace_exists(self, name: str) -> bool:
        return self.namespaces is None or name in self.namespaces

    def _require_namespace(self, namespace: str) -> None:
        if not self.namespace_exists(namespace):
            body = _status(404, "NotFound", f'namespaces "{namespace}" not found')
            body["details"] = {"name": namespace, "kind": "namespaces"}
            raise FakeStatus(body)

    def get_namespace_raw(self, name: str) -> dict[str, Any] | None:
        """``GET /api/v1/namespaces/NAME``: the Namespace, or None."""
        with self._lock:
            self.calls.append(("get", NAMESPACE.plural, "", {"name": name}))
            self._check("get", NAMESPACE, None, name)
            if not self.namespace_exists(name):
                return None
            return {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name))},
                "status": {"phase": "Active"},
            }

    def get_raw(self, resource: kube.Resource, namespace: str, name: str) -> dict[str, Any] | None:
        if resource.plural == NAMESPACE.plural and not resource.group:
            return self.get_namespace_raw(name)
        with self._lock:
            self.calls.append(("get", resource.plural, namespace, {"name": name}))
            self._check("get", resource, namespace, name)
            obj = self.objects.get((resource.plural, namespace, name))
            return copy.deepcopy(obj) if obj else None

    def _validate_write(
        self, resource: kube.Resource, namespace: str, name: str, obj: dict[str, Any]
    ) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("name") != name or meta.get("namespace", namespace) != namespace:
            raise FakeStatus(
                _status(400, "BadRequest", "the name/namespace of the object does not match the URL")
            )
        if obj.get("kind") != resource.kind or obj.get("apiVersion") != resource.api_version:
            raise FakeStatus(_status(400, "BadRequest", "apiVersion/kind do not match the URL"))

    def create_raw(
        self, resource: kube.Resource, namespace: str, obj: dict[str, Any], *, field_manager: str | None
    ) -> dict[str, Any]:
        name = (obj.get("metadata") or {}).get("name", "")
        with self._lock:
            self.calls.append(
                ("create", resource.plural, namespace, {"name": name, "obj": copy.deepcopy(obj)})
            )
            self._check("create", resource, namespace, name)
            self._require_namespace(namespace)
            self._validate_write(resource, namespace, name, obj)
            if obj["metadata"].get("resourceVersion"):
                raise FakeStatus(
                    _status(400, "BadRequest", "resourceVersion should not be set on objects to be created")
                )
            if (resource.plural, namespace, name) in self.objects:
                raise FakeStatus(_status(409, "AlreadyExists", f'{resource.display} "{name}" already exists'))
            return copy.deepcopy(
                self._create(resource, namespace, copy.deepcopy(obj), field_manager or "unknown")
            )

    def replace_raw(
        self,
        resource: kube.Resource,
        namespace: str,
        name: str,
        obj: dict[str, Any],
        *,
        field_manager: str | None,
    ) -> dict[str, Any]:
        with self._lock:
            self.calls.append(
                ("update", resource.plural, namespace, {"name": name, "obj": copy.deepcopy(obj)})
            )
            self._check("update", resource, namespace, name)
            self._validate_write(resource, namespace, name, obj)
            key = (resource.plural, namespace, name)
            live = self.objects.get(key)
            if live is None:
                raise FakeStatus(_status(404, "NotFound", f'{resource.display} "{name}" not found'))
            meta = obj.get("metadata") or {}
            if meta.get("resourceVersion") != live["metadata"]["resourceVersion"]:
                raise FakeStatus(
                    _status(
                        409,
                        "Conflict",
                        f"Operation cannot be fulfilled on {resource.display} "
                        f'"{name}": the object has been modified',
                    )
                )
            if meta.get("uid") not in (None, live["metadata"]["uid"]):
                raise FakeStatus(_status(409, "Conflict", "Precondition failed: UID mismatch"))
            new = copy.deepcopy(obj)
            _fold_string_data(new)
            new_meta = new.setdefault("metadata", {})
            for server_field in ("uid", "creationTimestamp", "deletionTimestamp", "managedFields"):
                if server_field in live["metadata"]:
                    new_meta[server_field] = copy.deepcopy(live["metadata"][server_field])
                else:
                    new_meta.pop(server_field, None)
            new_meta["namespace"] = namespace
            if resource.kind in STATUS_SUBRESOURCE:
                new.pop("status", None)
                if "status" in live:
                    new["status"] = copy.deepcopy(live["status"])
            if resource.group:
                generation = live["metadata"].get("generation", 1)
                new_meta["generation"] = generation + (1 if new.get("spec") != live.get("spec") else 0)
            new_meta["resourceVersion"] = (
                self._next_rv() if new != live else live["metadata"]["resourceVersion"]
            )
            self.objects[key] = new
            if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers"):
                self._remove(resource, namespace, name, propagation=None)
            return copy.deepcopy(new)

    def delete_raw(
        self, resource: kube.Resource, namespace: str, name: str, *, uid: str | None, propagation: str | None
    ) -> dict[str, Any] | None:
        with self._lock:
            self.calls.append(
                ("delete", resource.plural, namespace, {"name": name, "uid": uid, "propagation": propagation})
            )
            self._check("delete", resource, namespace, name)
            live = self.objects.get((resource.plural, namespace, name))
            if live is None:
                return None
            if uid and uid != live["metadata"]["uid"]:
                raise FakeStatus(
                    _status(409, "Conflict", "Precondition failed: UID in precondition does not match")
                )
            return self._mark_deleted(resource, namespace, name, propagation)

    def _mark_deleted(
        self, resource: kube.Resource, namespace: str, name: str, propagation: str | None
    ) -> dict:
        live = self.objects[(resource.plural, namespace, name)]
        finalizers = live["metadata"].get("finalizers") or []
        if finalizers:
            if not live["metadata"].get("deletionTimestamp"):
                live["metadata"]["deletionTimestamp"] = "2026-01-02T04:00:00Z"
                live["metadata"]["resourceVersion"] = self._next_rv()
                if resource.kind == "Application" and APP_FINALIZER in finalizers:
                    self.cascaded.append((namespace, name))
                if resource.kind == "ApplicationSet" and APP_FINALIZER in finalizers:
                    self.cascaded_sets.append((namespace, name))
            return copy.deepcopy(live)
        self._remove(resource, namespace, name, propagation=propagation)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success"}

    def _remove(self, resource: kube.Resource, namespace: str, name: str, *, propagation: str | None) -> None:
        """Remove the object; the garbage collector then deletes (or, Orphan, releases) its dependents."""
        gone = self.objects.pop((resource.plural, namespace, name))
        uid = gone["metadata"]["uid"]
        by_plural = {r.plural: r for r in kube.RESOURCES.values()}
        for (plural, ns, dep_name), dep in list(self.objects.items()):
            refs = dep["metadata"].get("ownerReferences") or []
            if ns != namespace or not any(r.get("uid") == uid for r in refs):
                continue
            if propagation == "Orphan":
                dep["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid] or None
                if dep["metadata"]["ownerReferences"] is None:
                    del dep["metadata"]["ownerReferences"]
                dep["metadata"]["resourceVersion"] = self._next_rv()
            elif (plural, ns, dep_name) in self.objects:
                self._mark_deleted(by_plural[plural], ns, dep_name, None)

    def apply_raw(
        self,
        resource: kube.Resource,
        namespace: str,
        name: str,
        obj: dict[str, Any],
        *,
        field_manager: str | None,
        force: bool,
    ) -> dict[str, Any]:
        """Server-side apply (simplified), as kubectl apply --server-side sends it."""
        with self._lock:
            self.calls.append(("patch", resource.plural, namespace, {"name": name, "force": force}))
            self._check("patch", resource, namespace, name)
            if not field_manager:
                raise FakeStatus(_status(422, "Invalid", "PATCH /apply requires fieldManager"))
            self._validate_write(resource, namespace, name, obj)
            meta = obj.get("metadata") or {}
            for server_field in ("uid", "resourceVersion", "managedFields"):
                if server_field in meta:  # a restored uid/resourceVersion would be a failed precondition
                    raise FakeStatus(_status(409, "Conflict", f"metadata.{server_field} must not be applied"))
            key = (resource.plural, namespace, name)
            existing = self.objects.get(key)
            if existing is None:
                self._require_namespace(namespace)
                return copy.deepcopy(self._create(resource, namespace, copy.deepcopy(obj), field_manager))
            merged = copy.deepcopy(existing)
            applied = copy.deepcopy(obj)
            _fold_string_data(applied)
            for k, v in applied.items():
                if k == "metadata":
                    for mk in ("labels", "annotations"):
                        if v.get(mk):
                            merged["metadata"].setdefault(mk, {}).update(v[mk])
                    if "finalizers" in v:
                        merged["metadata"]["finalizers"] = v["finalizers"]
                elif k == "data" and isinstance(v, dict):
                    merged.setdefault("data", {}).update(v)
                elif not (k == "status" and resource.kind in STATUS_SUBRESOURCE):
                    merged[k] = copy.deepcopy(v)
            if merged != existing:
                merged["metadata"]["resourceVersion"] = self._next_rv()
                if resource.group and merged.get("spec") != existing.get("spec"):
                    merged["metadata"]["generation"] = existing["metadata"].get("generation", 1) + 1
            self.objects[key] = merged
            return copy.deepcopy(merged)

    # KubeApi protocol (in-memory use): Status → our errors, exactly as the adapter maps them.
    def _raise(
        self,
        exc: FakeStatus,
        verb: str,
        resource: kube.Resource,
        namespace: str | None,
        name: str | None = None,
    ) -> None:
        raise kube.api_error(
            exc.body["code"],
            verb=verb,
            resource=resource,
            namespace=namespace,
            name=name,
            server_message=exc.body["message"],
        ) from None

    def list(
        self,
        resource: kube.Resource,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> kube.Page:
        try:
            body = self.list_raw(
                resource, namespace, label_selector=label_selector, limit=limit, continue_token=continue_token
            )
        except FakeStatus as exc:
            self._raise(exc, "list", resource, namespace)
        items = [{"apiVersion": resource.api_version, "kind": resource.kind, **o} for o in body["items"]]
        return kube.Page(items=items, continue_token=body["metadata"].get("continue"))

    def get(self, resource: kube.Resource, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.get_raw(resource, namespace, name)
        except FakeStatus as exc:
            self._raise(exc, "get", resource, namespace, name)
            raise  # unreachable

    def create(self, resource: kube.Resource, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.create_raw(resource, namespace, obj, field_manager=kube.FIELD_MANAGER)
        except FakeStatus as exc:
            self._raise(exc, "create", resource, namespace, obj["metadata"]["name"])
            raise  # unreachable

    def replace(self, resource: kube.Resource, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        try:
            return self.replace_raw(resource, namespace, name, obj, field_manager=kube.FIELD_MANAGER)
        except FakeStatus as exc:
            self._raise(exc, "update", resource, namespace, name)
            raise  # unreachable

    def delete(
        self,
        resource: kube.Resource,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        propagation: str | None = None,
    ) -> bool:
        try:
            return self.delete_raw(resource, namespace, name, uid=uid, propagation=propagation) is not None
        except FakeStatus as exc:
            self._raise(exc, "delete", resource, namespace, name)
            raise  # unreachable


_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<gv>[^/]+/[^/]+))(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+))?$"
)


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str
    authorization: str
    body: Any = None


def _discovery() -> dict[str, Any]:
    """Legacy discovery documents (what kubectl maps kinds to resources with) for our five kinds."""

    def resource_list(group_version: str) -> dict[str, Any]:
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": [
                {
                    "name": r.plural,
                    "singularName": r.kind.lower(),
                    "namespaced": True,
                    "kind": r.kind,
                    "verbs": ["create", "delete", "get", "list", "patch", "update"],
                }
                for r in kube.RESOURCES.values()
                if r.api_version == group_version
            ],
        }

    group = {
        "name": "argoproj.io",
        "versions": [{"groupVersion": "argoproj.io/v1alpha1", "version": "v1alpha1"}],
        "preferredVersion": {"groupVersion": "argoproj.io/v1alpha1", "version": "v1alpha1"},
    }
    return {
        "/version": {"major": "1", "minor": "32", "gitVersion": "v1.32.0", "platform": "linux/amd64"},
        "/api": {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        },
        "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]},
        "/apis/argoproj.io": {"kind": "APIGroup", "apiVersion": "v1", **group},
        "/api/v1": resource_list("v1"),
        "/apis/argoproj.io/v1alpha1": resource_list("argoproj.io/v1alpha1"),
    }


def _openapi_v3(group_version_path: str) -> dict[str, Any]:
    """An OpenAPI v3 document declaring ``fieldValidation`` on PATCH, so kubectl validates server-side."""
    paths: dict[str, Any] = {}
    for r in kube.RESOURCES.values():
        base = "/api/v1" if not r.group else f"/apis/{r.api_version}"
        if base.lstrip("/") != group_version_path:
            continue
        gvk = {"group": r.group, "version": r.api_version.rpartition("/")[2], "kind": r.kind}
        param = {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}}
        paths[f"{base}/namespaces/{{namespace}}/{r.plural}/{{name}}"] = {
            "patch": {
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [param],
                "responses": {"200": {"description": "OK"}},
            },
        }
        paths[f"{base}/namespaces/{{namespace}}/{r.plural}"] = {
            "post": {
                "x-kubernetes-action": "post",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [param],
                "responses": {"200": {"description": "OK"}},
            },
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (imagebump fake)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }


class FakeKubeServer:
    """:class:`FakeKube` over HTTP on 127.0.0.1:0, with the API server's URL layout and Status errors.

    ``validator`` (optional) checks every object written with ``fieldValidation=Strict`` (kubectl's
    default) and returns error strings; any error is answered 422 Invalid, as the API server does.
    ``anonymous`` accepts requests without the bearer token: kubectl (client-go) does not send a
    token to a plain-HTTP server, and this fake serves no TLS.
    """

    def __init__(
        self,
        kube_fake: FakeKube,
        *,
        validator: Callable[[dict[str, Any]], list[str]] | None = None,
        anonymous: bool = False,
    ) -> None:
        self.fake = kube_fake
        self.validator = validator
        self.anonymous = anonymous
        self.requests: list[Recorded] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeKubeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def write_kubeconfig(self, path: Path, *, context: str = "fake", namespace: str = "argocd") -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": context,
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": TOKEN}}],
            "contexts": [
                {"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}
            ],
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self
        by_plural = {r.plural: r for r in kube.RESOURCES.values()}
        discovery = _discovery()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the API server does
            disable_nagle_algorithm = True  # headers and body go out as separate writes

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _serve(self, method: str) -> None:
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = yaml.safe_load(raw) if raw else None
                server.requests.append(
                    Recorded(
                        method,
                        parts.path,
                        query,
                        self.headers.get("Content-Type", ""),
                        self.headers.get("Authorization", ""),
                        body,
                    )
                )
                if self.headers.get("Authorization") != f"Bearer {TOKEN}" and not server.anonymous:
                    return self._send(401, _status(401, "Unauthorized", "Unauthorized"))
                if method == "GET" and parts.path in discovery:
                    return self._send(200, discovery[parts.path])
                if method == "GET" and parts.path == "/openapi/v3":
                    return self._send(
                        200,
                        {
                            "paths": {
                                gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash=0"}
                                for gv in ("api/v1", "apis/argoproj.io/v1alpha1")
                            }
                        },
                    )
                if method == "GET" and parts.path.startswith("/openapi/v3/"):
                    return self._send(200, _openapi_v3(parts.path.removeprefix("/openapi/v3/")))
                m = _PATH.match(parts.path)
                if method == "GET" and m and m.group("plural") == "namespaces" and not m.group("gv"):
                    if not m.group("name") or m.group("ns"):
                        return self._send(405, _status(405, "MethodNotAllowed", "not supported by the fake"))
                    name = unquote(m.group("name"))
                    try:
                        found = server.fake.get_namespace_raw(name)
                    except FakeStatus as exc:
                        return self._send(exc.body["code"], exc.body)
                    if found is None:
                        return self._send(404, _status(404, "NotFound", f'namespaces "{name}" not found'))
                    return self._send(200, found)
                resource = by_plural.get(m.group("plural")) if m else None
                if not m or resource is None or (m.group("gv") or "v1") != resource.api_version:
                    return self._send(
                        404, _status(404, "NotFound", "the server could not find the requested resource")
                    )
                ns = unquote(m.group("ns")) if m.group("ns") else None
                name = unquote(m.group("name") or "") or None

                def first(k, query=query):
                    return (query.get(k) or [None])[0]

                try:
                    if method == "GET" and name is None:
                        limit = first("limit")
                        return self._send(
                            200,
                            server.fake.list_raw(
                                resource,
                                ns,
                                label_selector=first("labelSelector"),
                                limit=int(limit) if limit else None,
                                continue_token=first("continue"),
                            ),
                        )
                    if ns is None:
                        return self._send(405, _status(405, "MethodNotAllowed", "namespaced resource"))
                    if method in ("POST", "PUT", "PATCH") and first("fieldValidation") == "Strict":
                        errors = server.validator(body or {}) if server.validator else []
                        if errors:
                            return self._send(422, _status(422, "Invalid", "; ".join(errors)[:2000]))
                    if method == "GET":
                        obj = server.fake.get_raw(resource, ns, name)
                        if obj is None:
                            return self._send(
                                404, _status(404, "NotFound", f'{resource.display} "{name}" not found')
                            )
                        return self._send(200, obj)
                    if method == "POST" and name is None:
                        return self._send(
                            201,
                            server.fake.create_raw(
                                resource, ns, body or {}, field_manager=first("fieldManager")
                            ),
                        )
                    if method == "PUT" and name:
                        return self._send(
                            200,
                            server.fake.replace_raw(
                                resource, ns, name, body or {}, field_manager=first("fieldManager")
                            ),
                        )
                    if method == "DELETE" and name:
                        options = body or {}
                        gone = server.fake.delete_raw(
                            resource,
                            ns,
                            name,
                            uid=(options.get("preconditions") or {}).get("uid"),
                            propagation=options.get("propagationPolicy"),
                        )
                        if gone is None:
                            return self._send(
                                404, _status(404, "NotFound", f'{resource.display} "{name}" not found')
                            )
                        return self._send(200, gone)
                    if (
                        method == "PATCH"
                        and name
                        and self.headers.get("Content-Type") == "application/apply-patch+yaml"
                    ):
                        return self._send(
                            200,
                            server.fake.apply_raw(
                                resource,
                                ns,
                                name,
                                body or {},
                                field_manager=first("fieldManager"),
                                force=first("force") == "true",
                            ),
                        )
                    return self._send(405, _status(405, "MethodNotAllowed", "not supported by the fake"))
                except FakeStatus as exc:
                    return self._send(exc.body["code"], exc.body)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_PATCH(self) -> None:
                self._serve("PATCH")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PUT(self) -> None:
                self._serve("PUT")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

        return Handler


# --- a populated Argo CD installation ------------------------------------------------------------

#: Secret values planted in the seed; tests assert none of them ever shows up in logs or output
#: (and the suite-wide scan, tests/secret_scan.py, fails any test that prints one).
SECRET_VALUES = (
    "hunter2-repo-password",
    "ghp_fakeRepoCredsToken123",
    "cluster-bearer-token-XYZ",
    "repository-write-ssh-private-key",
    "repo-write-creds-pass",
    "server-secretkey-ABC-0123456789-signing-key",
    "admin-bcrypt-hash-$2a$10$fake",
    "slack-token-xoxb-fake",
    "scm-creds-github-app-key",
    "future-type-secret-value",
    "managed-by-only-password",
    "oidc-client-secret-part-of",
)
for _value in SECRET_VALUES:
    register(_value)
    SECRETS.add(base64.b64encode(_value.encode()).decode())

#: Every Secret an Argo CD backup must hold, by what selects it (upstream rule or ours), and the
#: ones it must not. Upstream: cmd/argocd/commands/admin/admin.go isArgoCDSecret (v3.5.1, v2.14.21).
BACKED_UP_SECRETS = {
    "repository-one": "secret-type label repository (common.go LabelValueSecretTypeRepository)",
    "repo-creds-one": "secret-type label repo-creds",
    "cluster-one": "secret-type label cluster",
    "repository-write-one": "secret-type label repository-write (util/db/repository_secrets.go getSecretType)",
    "repo-write-creds-one": "secret-type label repo-write-creds",
    "scm-creds-one": "secret-type label scm-creds",
    "future-type-one": "secret-type label of an unknown value: upstream takes any value",
    "managed-by-only": "annotation managed-by: argocd.argoproj.io, no label",
    "argocd-secret": "by name",
    "argocd-notifications-secret": "by name (ours)",
    "oidc-client": "label app.kubernetes.io/part-of: argocd (referenced from argocd-cm as $oidc-client:…; ours)",
}
NOT_BACKED_UP_SECRETS = ("argocd-redis", "unrelated-tls")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _app(name: str, namespace: str, project: str, i: int, *, finalizer: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"team": "a" if i % 2 else "b"},
        "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": '{"spec": {}}',
            "notifications.argoproj.io/subscribe.on-sync-failed.slack": "alerts",
        },
    }
    if finalizer:
        meta["finalizers"] = [APP_FINALIZER]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": meta,
        "spec": {
            "project": project,
            "source": {
                "repoURL": "https://git.example.com/org/apps",
                "path": f"apps/{name}",
                "targetRevision": "main",
            },
            "destination": {"server": "https://kubernetes.default.svc", "namespace": f"ns-{name}"},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True}},
        },
    }


#: A project role token: the AppProject lists it in spec.roles[].jwtTokens and, as argocd-server
#: keeps it, in status.jwtTokensByRole (server/project/project.go createToken).
PROJECT_TOKEN = {"project": "team-a", "role": "ci", "iat": 1767225600, "id": "6f1c1e2a-ci-token"}


def argocd_objects(
    namespace: str = "argocd", *, apps: int = 60, app_namespaces: tuple[str, ...] = ()
) -> list[dict]:
    """A realistic Argo CD installation: ≥ 50 Applications, projects, sets, every Secret kind, every CM.

    ``app_namespaces``: other namespaces Argo CD manages Applications (and, the first of them,
    ApplicationSets) in; argocd-cmd-params-cm names them. Includes what a backup must NOT take (an
    unlabelled Secret, an unrelated ConfigMap, an Application in a namespace Argo CD does not
    manage) and server-side decorations it must strip.
    """
    ns = namespace
    objs: list[dict[str, Any]] = []
    for name in ("default", "platform", "team-a", "team-b"):
        project: dict[str, Any] = {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AppProject",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "sourceRepos": ["*"],
                "destinations": [{"server": "*", "namespace": "*"}],
                "clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
            },
        }
        if app_namespaces:
            project["spec"]["sourceNamespaces"] = list(app_namespaces)
        if name == PROJECT_TOKEN["project"]:
            token = {"iat": PROJECT_TOKEN["iat"], "id": PROJECT_TOKEN["id"]}
            project["spec"]["roles"] = [
                {
                    "name": PROJECT_TOKEN["role"],
                    "policies": [f"p, proj:{name}:ci, applications, sync, {name}/*, allow"],
                    "jwtTokens": [dict(token)],
                }
            ]
            project["status"] = {"jwtTokensByRole": {PROJECT_TOKEN["role"]: {"items": [dict(token)]}}}
        objs.append(project)
    for set_ns in (ns, *app_namespaces[:1]):
        for name in ("clusters-addons", "preview-envs", "tenants"):
            objs.append(
                {
                    "apiVersion": "argoproj.io/v1alpha1",
                    "kind": "ApplicationSet",
                    "metadata": {"name": name, "namespace": set_ns},
                    "spec": {
                        "generators": [{"clusters": {}}],
                        "template": {
                            "metadata": {"name": "{{name}}-" + name},
                            "spec": {
                                "project": "platform",
                                "source": {
                                    "repoURL": "https://git.example.com/o/r",
                                    "path": name,
                                    "targetRevision": "main",
                                },
                                "destination": {"server": "{{server}}", "namespace": name},
                            },
                        },
                    },
                    "status": {"conditions": [{"type": "ResourcesUpToDate", "status": "True"}]},
                }
            )
    projects = ["default", "platform", "team-a", "team-b"]
    for i in range(apps):
        app = _app(f"app-{i:03d}", ns, projects[i % 4], i)
        if i == 7:
            app["operation"] = {"sync": {"revision": "abc"}}
        if i < 3:
            app["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "argoproj.io/v1alpha1",
                    "kind": "ApplicationSet",
                    "name": "tenants",
                    "uid": str(uuid.uuid4()),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        objs.append(app)
    for j, other in enumerate(app_namespaces):
        for i in range(2):
            objs.append(_app(f"{other}-app-{i}", other, projects[(i + j) % 4], i))
    if app_namespaces:  # Argo CD does not manage this namespace: not backed up, never pruned
        objs.append(_app("stray", "not-managed", "default", 0))
    secret_types = {
        "repository": {
            "type": "git",
            "url": "https://git.example.com/org/apps",
            "password": SECRET_VALUES[0],
            "username": "bot",
        },
        "repo-creds": {"type": "git", "url": "https://git.example.com/org", "password": SECRET_VALUES[1]},
        "cluster": {
            "name": "prod",
            "server": "https://prod.example.com",
            "config": json.dumps({"bearerToken": SECRET_VALUES[2]}),
        },
        "repository-write": {"url": "git@git.example.com:org/apps.git", "sshPrivateKey": SECRET_VALUES[3]},
        "repo-write-creds": {"url": "https://git.example.com/org", "password": SECRET_VALUES[4]},
        "scm-creds": {"githubAppPrivateKey": SECRET_VALUES[8]},
        "future-type": {"token": SECRET_VALUES[9]},
    }
    for stype, data in secret_types.items():
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "Opaque",
                "metadata": {
                    "name": f"{stype}-one",
                    "namespace": ns,
                    "labels": {"argocd.argoproj.io/secret-type": stype},
                    # kubectl apply leaves the whole object, values too, in this annotation
                    "annotations": {
                        "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"stringData": data})
                    },
                },
                "data": {k: _b64(v) for k, v in data.items()},
            }
        )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": "managed-by-only",
                "namespace": ns,
                "annotations": {"managed-by": "argocd.argoproj.io"},
            },
            "data": {"password": _b64(SECRET_VALUES[10])},
        }
    )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": "oidc-client",
                "namespace": ns,
                "labels": {"app.kubernetes.io/part-of": "argocd"},
            },
            "data": {"clientSecret": _b64(SECRET_VALUES[11])},
        }
    )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": "argocd-secret",
                "namespace": ns,
                "labels": {"app.kubernetes.io/part-of": "argocd"},
            },
            "data": {"server.secretkey": _b64(SECRET_VALUES[5]), "admin.password": _b64(SECRET_VALUES[6])},
        }
    )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": "argocd-notifications-secret", "namespace": ns},
            "stringData": {"slack-token": SECRET_VALUES[7]},
        }
    )
    # Not part of a backup:
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": "argocd-redis", "namespace": ns},
            "data": {"auth": _b64("redis-pass")},
        }
    )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": "unrelated-tls", "namespace": ns, "labels": {"app": "web"}},
            "data": {"tls.crt": _b64("crt"), "tls.key": _b64("key")},
        }
    )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "unrelated-cm", "namespace": ns},
            "data": {"a": "b"},
        }
    )
    params = {"server.insecure": "true"}
    if app_namespaces:
        params[APPLICATION_NAMESPACES] = ", ".join(app_namespaces)
        params[APPLICATIONSET_NAMESPACES] = app_namespaces[0]
    cm_data = {
        "argocd-cm": {
            "url": "https://argocd.example.com",
            "timeout.reconciliation": "180s",
            "oidc.config": "clientSecret: $oidc-client:clientSecret\n",
        },
        "argocd-rbac-cm": {"policy.default": "role:readonly", "policy.csv": "g, admins, role:admin\n"},
        "argocd-cmd-params-cm": params,
        "argocd-ssh-known-hosts-cm": {"ssh_known_hosts": "github.com ssh-ed25519 AAAAC3Nza...\n"},
        "argocd-tls-certs-cm": {
            "git.example.com": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
        },
        "argocd-gpg-keys-cm": {"ABCDEF0123456789": "-----BEGIN PGP PUBLIC KEY BLOCK-----\n...\n"},
        "argocd-notifications-cm": {"service.slack": "token: $slack-token\n"},
    }
    for name, data in cm_data.items():
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": {"app.kubernetes.io/part-of": "argocd"},
                },
                "data": data,
            }
        )
    return objs


#: argocd-cmd-params-cm keys (cmd/argocd/commands/admin/admin.go applicationNamespacesCmdParamsKey,
#: applicationsetNamespacesCmdParamsKey).
APPLICATION_NAMESPACES = "application.namespaces"
APPLICATIONSET_NAMESPACES = "applicationsetcontroller.namespaces"


def seeded(
    namespace: str = "argocd",
    *,
    apps: int = 60,
    app_namespaces: tuple[str, ...] = (),
    model_namespaces: bool = False,
) -> FakeKube:
    """A :class:`FakeKube` holding :func:`argocd_objects` (server fields filled in). With
    ``model_namespaces`` only Kubernetes' own namespaces and those the objects are in exist; else
    every namespace does."""
    fake = FakeKube.fresh() if model_namespaces else FakeKube()
    for obj in argocd_objects(namespace, apps=apps, app_namespaces=app_namespaces):
        fake.seed(obj)
    return fake

"""The Kubernetes API fake's store: objects in memory, reads, RBAC/failure checks, and the
:class:`steps.kube.api.KubeApi` protocol over it (Status → our errors, as the real adapter maps them).

Part of the FAKE Kubernetes API (:mod:`imagebump.local.kube_fake`); the writes are
:class:`~imagebump.local.kube_fake.writes.Writes`.
"""

from __future__ import annotations

import base64
import copy
import json
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from imagebump.local.kube_fake.status import (
    INJECTED_FAILURES,
    NAMESPACE,
    SERVICE_ACCOUNT,
    STATUS_SUBRESOURCE,
    SYSTEM_NAMESPACES,
    FakeDrop,
    FakeStatus,
    Grant,
    fold_string_data,
    matches,
    parse_selector,
    status_body,
)
from imagebump.local.kube_fake.writes import Writes
from steps.domain.errors import TransientError
from steps.kube import api as kube


@dataclass
class FakeKube(Writes):
    """In-memory store implementing :class:`steps.kube.api.KubeApi` (plus test helpers).

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
    - a write fails on request: :meth:`FakeKube.fail_write` makes the Nth write from now answer a
      status (422 as an admission webhook refuses, 429, 500, 503) or cuts the connection (code 0,
      over HTTP), once, without doing it — to test a restore that stops part-way;
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
    #: Namespaces being deleted (phase Terminating): read as such, and a create in one is refused
    #: with 403 as the NamespaceLifecycle admission plugin refuses it.
    terminating: set[str] = field(default_factory=set)
    #: Injected write failures: the ordinal of a write (create/update/delete/apply, counted from 1
    #: since the fake was made) → the status code it answers (0: the connection is cut).
    write_failures: dict[int, int] = field(default_factory=dict)
    write_count: int = 0
    #: Set to release a write held by ``fail_write(n, -1)``.
    hung: threading.Event = field(default_factory=threading.Event)
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

    def fail_write(self, n: int, code: int = 500) -> None:
        """Answer the ``n``-th write from now on (1 = the next one) with ``code`` (422 an admission
        refusal, 429, 500, 503; 0 cuts the connection; -1 answers nothing until :attr:`hung` is
        set, a timeout for the client), once; the write is not done."""
        self.write_failures[self.write_count + n] = code

    def _count_write(self) -> None:
        self.write_count += 1
        code = self.write_failures.pop(self.write_count, None)
        if code == -1:  # no answer until the client gives up (or the test ends): a timeout
            self.hung.wait(timeout=10)
            raise FakeDrop()
        if code == 0:
            raise FakeDrop()
        if code is not None:
            reason, message = INJECTED_FAILURES.get(code, ("InternalError", f"injected failure {code}"))
            raise FakeStatus(status_body(code, reason, message))

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
                status_body(
                    403,
                    "Forbidden",
                    f'{resource.display} is forbidden: User "{self.user}" cannot {verb} resource '
                    f'"{resource.plural}" in API group "{resource.group}"{where}',
                )
            )
        if code == 404:
            raise FakeStatus(status_body(404, "NotFound", "the server could not find the requested resource"))
        if code:
            raise FakeStatus(status_body(code, "InternalError", "etcdserver: request timed out"))

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
        fold_string_data(obj)
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
            terms = parse_selector(label_selector or "")
            items = [
                o
                for (p, ns, _), o in sorted(self.objects.items())
                if p == resource.plural
                and (namespace is None or ns == namespace)
                and matches(o["metadata"].get("labels") or {}, terms)
            ]
            if continue_token:
                try:
                    after = tuple(json.loads(base64.urlsafe_b64decode(continue_token))["after"])
                except (ValueError, KeyError, TypeError):
                    raise FakeStatus(status_body(410, "Expired", "invalid continue token")) from None
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
            body = status_body(404, "NotFound", f'namespaces "{namespace}" not found')
            body["details"] = {"name": namespace, "kind": "namespaces"}
            raise FakeStatus(body)
        if namespace in self.terminating:
            raise FakeStatus(
                status_body(
                    403,
                    "Forbidden",
                    f"unable to create new content in namespace {namespace} because it is being terminated",
                )
            )

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
                "metadata": {
                    "name": name,
                    "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                    **({"deletionTimestamp": "2026-12-07T00:00:00Z"} if name in self.terminating else {}),
                },
                "status": {"phase": "Terminating" if name in self.terminating else "Active"},
            }

    def get_raw(self, resource: kube.Resource, namespace: str, name: str) -> dict[str, Any] | None:
        if resource.plural == NAMESPACE.plural and not resource.group:
            return self.get_namespace_raw(name)
        with self._lock:
            self.calls.append(("get", resource.plural, namespace, {"name": name}))
            self._check("get", resource, namespace, name)
            obj = self.objects.get((resource.plural, namespace, name))
            return copy.deepcopy(obj) if obj else None

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
            server_reason=exc.body.get("reason", ""),
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
        except FakeDrop:
            raise TransientError("connection to the API server lost (fake)") from None

    def replace(self, resource: kube.Resource, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        try:
            return self.replace_raw(resource, namespace, name, obj, field_manager=kube.FIELD_MANAGER)
        except FakeStatus as exc:
            self._raise(exc, "update", resource, namespace, name)
            raise  # unreachable
        except FakeDrop:
            raise TransientError("connection to the API server lost (fake)") from None

    def patch(
        self, resource: kube.Resource, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        try:
            return self.patch_raw(resource, namespace, name, patch)
        except FakeStatus as exc:
            self._raise(exc, "patch", resource, namespace, name)
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
        except FakeDrop:
            raise TransientError("connection to the API server lost (fake)") from None

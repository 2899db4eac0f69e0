"""The Kubernetes API fake's writes: create, replace (PUT), delete with finalizers and garbage
collection, server-side apply (simplified) and JSON merge patch.

Part of the FAKE Kubernetes API (:mod:`imagebump.local.kube_fake`): :class:`Writes` is mixed into
:class:`imagebump.local.kube_fake.store.FakeKube`, whose store, lock and checks it uses.
"""

from __future__ import annotations

import copy
from typing import Any

from imagebump.local.kube_fake.status import (
    APP_FINALIZER,
    STATUS_SUBRESOURCE,
    FakeStatus,
    fold_string_data,
    merge_patch,
    status_body,
)
from steps.kube import api as kube


class Writes:
    """What :class:`~imagebump.local.kube_fake.store.FakeKube` does on a write (its ``*_raw`` verbs)."""

    objects: dict[tuple[str, str, str], dict[str, Any]]
    calls: list[tuple[str, str, str, dict[str, Any]]]
    cascaded: list[tuple[str, str]]
    cascaded_sets: list[tuple[str, str]]

    def _validate_write(
        self, resource: kube.Resource, namespace: str, name: str, obj: dict[str, Any]
    ) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("name") != name or meta.get("namespace", namespace) != namespace:
            raise FakeStatus(
                status_body(400, "BadRequest", "the name/namespace of the object does not match the URL")
            )
        if obj.get("kind") != resource.kind or obj.get("apiVersion") != resource.api_version:
            raise FakeStatus(status_body(400, "BadRequest", "apiVersion/kind do not match the URL"))

    def create_raw(
        self, resource: kube.Resource, namespace: str, obj: dict[str, Any], *, field_manager: str | None
    ) -> dict[str, Any]:
        name = (obj.get("metadata") or {}).get("name", "")
        with self._lock:
            self.calls.append(
                ("create", resource.plural, namespace, {"name": name, "obj": copy.deepcopy(obj)})
            )
            self._count_write()
            self._check("create", resource, namespace, name)
            self._require_namespace(namespace)
            self._validate_write(resource, namespace, name, obj)
            if obj["metadata"].get("resourceVersion"):
                raise FakeStatus(
                    status_body(
                        400, "BadRequest", "resourceVersion should not be set on objects to be created"
                    )
                )
            if (resource.plural, namespace, name) in self.objects:
                raise FakeStatus(
                    status_body(409, "AlreadyExists", f'{resource.display} "{name}" already exists')
                )
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
            self._count_write()
            self._check("update", resource, namespace, name)
            self._validate_write(resource, namespace, name, obj)
            key = (resource.plural, namespace, name)
            live = self.objects.get(key)
            if live is None:
                raise FakeStatus(status_body(404, "NotFound", f'{resource.display} "{name}" not found'))
            meta = obj.get("metadata") or {}
            if meta.get("resourceVersion") != live["metadata"]["resourceVersion"]:
                raise FakeStatus(
                    status_body(
                        409,
                        "Conflict",
                        f"Operation cannot be fulfilled on {resource.display} "
                        f'"{name}": the object has been modified',
                    )
                )
            if meta.get("uid") not in (None, live["metadata"]["uid"]):
                raise FakeStatus(status_body(409, "Conflict", "Precondition failed: UID mismatch"))
            new = copy.deepcopy(obj)
            fold_string_data(new)
            refused = immutable_change(resource.kind, live, new)
            if refused:
                raise FakeStatus(
                    status_body(422, "Invalid", f'{resource.display} "{name}" is invalid: {refused}')
                )
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
            self._count_write()
            self._check("delete", resource, namespace, name)
            live = self.objects.get((resource.plural, namespace, name))
            if live is None:
                return None
            if uid and uid != live["metadata"]["uid"]:
                raise FakeStatus(
                    status_body(409, "Conflict", "Precondition failed: UID in precondition does not match")
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
            self._count_write()
            self._check("patch", resource, namespace, name)
            if not field_manager:
                raise FakeStatus(status_body(422, "Invalid", "PATCH /apply requires fieldManager"))
            self._validate_write(resource, namespace, name, obj)
            meta = obj.get("metadata") or {}
            for server_field in ("uid", "resourceVersion", "managedFields"):
                if server_field in meta:  # a restored uid/resourceVersion would be a failed precondition
                    raise FakeStatus(
                        status_body(409, "Conflict", f"metadata.{server_field} must not be applied")
                    )
            key = (resource.plural, namespace, name)
            existing = self.objects.get(key)
            if existing is None:
                self._require_namespace(namespace)
                return copy.deepcopy(self._create(resource, namespace, copy.deepcopy(obj), field_manager))
            merged = copy.deepcopy(existing)
            applied = copy.deepcopy(obj)
            fold_string_data(applied)
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

    def patch_raw(
        self, resource: kube.Resource, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        """JSON merge patch (RFC 7386): what ``kubectl patch --type merge`` and the adapter send."""
        with self._lock:
            self.calls.append(
                ("patch", resource.plural, namespace, {"name": name, "patch": copy.deepcopy(patch)})
            )
            self._check("patch", resource, namespace, name)
            key = (resource.plural, namespace, name)
            live = self.objects.get(key)
            if live is None:
                raise FakeStatus(status_body(404, "NotFound", f'{resource.display} "{name}" not found'))
            merged = merge_patch(live, patch)
            for server_field in ("uid", "namespace", "name", "creationTimestamp", "managedFields"):
                merged["metadata"][server_field] = copy.deepcopy(live["metadata"].get(server_field))
            if resource.kind in STATUS_SUBRESOURCE:
                merged["status"] = copy.deepcopy(live.get("status"))
            if merged != live:
                merged["metadata"]["resourceVersion"] = self._next_rv()
                if resource.group and merged.get("spec") != live.get("spec"):
                    merged["metadata"]["generation"] = live["metadata"].get("generation", 1) + 1
            self.objects[key] = merged
            return copy.deepcopy(merged)


def immutable_change(kind: str, live: dict[str, Any], new: dict[str, Any]) -> str:
    """What Kubernetes refuses in an update of a Secret or ConfigMap ("" none): a Secret's ``type``
    never changes, and once ``immutable: true`` neither ``data`` (``binaryData``) nor ``immutable``
    does (kubernetes pkg/apis/core/validation/validation.go ``ValidateSecretUpdate``,
    ``ValidateConfigMapUpdate``)."""
    if kind not in ("Secret", "ConfigMap"):
        return ""
    if kind == "Secret" and (live.get("type") or "Opaque") != (new.get("type") or "Opaque"):
        return "type: Invalid value: field is immutable"
    if live.get("immutable") is True:
        if new.get("immutable") is not True:
            return "immutable: Forbidden: field is immutable when `immutable` is set"
        for field in ("data", "binaryData"):
            if (live.get(field) or {}) != (new.get(field) or {}):
                return f"{field}: Forbidden: field is immutable when `immutable` is set"
    return ""

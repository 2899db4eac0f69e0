"""Comparing an archived object with the live one, pure: :func:`diff_objects` (what a restore
shows, Secret values masked) and :func:`replacement` (the object a restore PUTs).

Secret values never leave these functions: :func:`mask` replaces them with ``***``. Imports
:mod:`steps.argocd_backup.archive` only.
"""

from __future__ import annotations

import copy
import difflib
from typing import Any

import yaml

from steps.argocd_backup.archive import LAST_APPLIED, sanitise

_MASK = "***"


def mask(obj: dict[str, Any], *, changed: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """A copy whose Secret values are ``***`` (``*** (changed)`` for the keys in ``changed``)."""
    if obj.get("kind") != "Secret":
        return obj
    masked = copy.deepcopy(obj)
    for section in ("data", "stringData"):
        values = masked.get(section)
        if isinstance(values, dict):
            masked[section] = {
                k: f"{_MASK} (changed)" if f"{section}.{k}" in changed else _MASK for k in values
            }
    return masked


def _secret_changes(live: dict[str, Any], desired: dict[str, Any]) -> set[str]:
    changed = set()
    for section in ("data", "stringData"):
        a, b = live.get(section) or {}, desired.get(section) or {}
        changed |= {f"{section}.{k}" for k in a.keys() & b.keys() if a[k] != b[k]}
    return changed


def diff_objects(live: dict[str, Any], desired: dict[str, Any]) -> list[str]:
    """Unified diff lines from ``live`` to ``desired`` (both sanitised); [] when they are equal.

    Every difference counts — a key, label or list entry only the live object has is a removal,
    since a restore makes the object equal to the archive. Secret values are masked (a value
    that changes is ``*** (changed)``; added and removed keys show only their names).
    """
    a, b = sanitise(live), sanitise(desired)
    if a == b:
        return []
    changed = _secret_changes(a, b) if b.get("kind") == "Secret" else set()
    a_text = yaml.safe_dump(mask(a), sort_keys=True, default_flow_style=False)
    b_text = yaml.safe_dump(mask(b, changed=changed), sort_keys=True, default_flow_style=False)
    return list(
        difflib.unified_diff(a_text.splitlines(), b_text.splitlines(), "live", "archive", lineterm="", n=2)
    )


def replacement(desired: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """The full object to PUT so the live object becomes ``desired`` (a replace, not a merge).

    What a backup never holds is kept as the live object has it: the server's metadata (uid,
    resourceVersion — the update's precondition — creationTimestamp, generation, ownerReferences)
    and an Application's or ApplicationSet's ``status`` and an
    Application's ``operation`` (server state: restore neither starts nor cancels a sync). An
    AppProject's status is archive content (its project tokens) and is replaced like the spec.
    kubectl's last-applied annotation is not kept: it is a copy of the object before the restore.
    """
    obj = copy.deepcopy(desired)
    meta = obj.setdefault("metadata", {})
    live_meta = live.get("metadata") or {}
    for name in (
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "generation",
        "ownerReferences",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ):
        if name in live_meta:
            meta[name] = copy.deepcopy(live_meta[name])
    # kubectl's last-applied annotation is a copy of the pre-restore object (a Secret's values too):
    # it goes, so the object equals the archive and a later `kubectl apply` does not diff against it.
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
        if not annotations:
            meta.pop("annotations")
    if obj.get("kind") in ("Application", "ApplicationSet"):
        for name in ("status", "operation"):
            if name in live and name not in obj:
                obj[name] = copy.deepcopy(live[name])
    return obj


def immutable_change(kind: str, live: dict[str, Any], desired: dict[str, Any]) -> str:
    """Why ``live`` cannot be replaced by ``desired`` in place ("" when it can): a Secret's ``type``
    never changes, and a Secret or ConfigMap with ``immutable: true`` keeps its ``data``,
    ``binaryData`` and ``immutable`` (kubernetes ``pkg/apis/core/validation/validation.go``:
    ``ValidateSecretUpdate``, ``ValidateConfigMapUpdate``). Such an object is deleted and created."""
    if kind not in ("Secret", "ConfigMap"):
        return ""
    if kind == "Secret" and (live.get("type") or "Opaque") != (desired.get("type") or "Opaque"):
        return f"its type changes ({live.get('type') or 'Opaque'} → {desired.get('type') or 'Opaque'})"
    if live.get("immutable") is True and (
        desired.get("immutable") is not True
        or any((live.get(f) or {}) != (desired.get(f) or {}) for f in ("data", "binaryData"))
    ):
        return "it is immutable"
    return ""

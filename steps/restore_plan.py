"""A restore's decision, pure: the archive's objects as they should be live, and what to do with
each object — :func:`desired_objects` (where each object goes) and :func:`decide` (create, change,
unchanged, delete or keep, from the live objects :func:`steps.restore.plan` gathered).

Table-tested without a cluster (tests/steps/test_restore_plan.py). Imports :mod:`steps.archive`,
:mod:`steps.argocd_namespaces` and :mod:`steps.errors`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from steps import archive, object_diff
from steps.argocd_namespaces import is_literal
from steps.errors import ConfigError

CREATE, CHANGE, UNCHANGED, DELETE, EXTRA = "create", "change", "unchanged", "delete", "extra"
DEFAULT_NAMESPACE = "argocd"


@dataclass
class Loaded:
    """An archive read and checked: its objects (sanitised), its index (or None), its source."""

    objects: list[dict[str, Any]]
    index: dict[str, Any] | None
    source: str
    plain: bool = False  # a plain `argocd admin export` file: no index, nothing verified


@dataclass
class Entry:
    kind: str
    name: str
    action: str
    obj: dict[str, Any]
    diff: list[str] = field(default_factory=list)
    namespace: str = ""
    live: dict[str, Any] | None = None

    @property
    def key(self) -> archive.Key:
        return (self.kind, self.namespace, self.name)


@dataclass
class Plan:
    namespace: str
    entries: list[Entry] = field(default_factory=list)
    prune: bool = False
    unverified: str = ""

    def count(self, action: str) -> int:
        return sum(1 for e in self.entries if e.action == action)

    def namespaces(self) -> list[str]:
        """Every namespace the plan touches, Argo CD's first."""
        others = sorted({e.namespace for e in self.entries} - {self.namespace})
        return [self.namespace, *others]


def desired_objects(
    loaded: Loaded, namespace: str | None = None
) -> tuple[str, dict[archive.Key, dict[str, Any]]]:
    """Argo CD's target namespace and the archive's objects as they should be live, by key."""
    if namespace is not None and not is_literal(namespace):
        raise ConfigError(
            f"namespace {namespace!r} is not a valid Kubernetes namespace name; pass --namespace NAME"
        )
    source_ns = _source_namespace(loaded)
    target = namespace or source_ns or DEFAULT_NAMESPACE
    desired: dict[archive.Key, dict[str, Any]] = {}
    for obj in loaded.objects:
        ns = (obj.get("metadata") or {}).get("namespace")
        if not ns or ns == source_ns:
            obj = archive.retarget(obj, target)
        obj = archive.with_project_tokens(obj)
        k = archive.key(obj)
        if k in desired:
            raise ConfigError(f"archive {loaded.source} holds {archive.show(k)} twice; nothing was applied")
        desired[k] = obj
    return target, desired


def decide(
    desired: dict[archive.Key, dict[str, Any]],
    live: dict[archive.Key, dict[str, Any] | None],
    others: list[dict[str, Any]],
    *,
    prune: bool,
) -> list[Entry]:
    """What to do with each object; pure. ``live``: each archived key's live object (None: missing);
    ``others``: the live objects of the pruned kinds (those the archive holds are ignored).

    An archived object is ``create`` (not live), ``change`` (any difference) or ``unchanged``, in
    apply order; a live object the archive lacks is ``delete`` with ``prune``, else ``extra``, in
    prune order (:data:`steps.archive.PRUNE_ORDER`).
    """
    entries: list[Entry] = []
    for k, obj in sorted(desired.items(), key=lambda item: archive.sort_key(item[1])):
        kind, ns, name = k
        current = live.get(k)
        if current is None:
            entries.append(Entry(kind, name, CREATE, obj, namespace=ns))
            continue
        diff = object_diff.diff_objects(current, obj)
        entries.append(
            Entry(kind, name, CHANGE if diff else UNCHANGED, obj, diff, namespace=ns, live=current)
        )
    extras = [o for o in others if archive.key(o) not in desired]
    for obj in sorted(extras, key=_prune_key):
        kind, ns, name = archive.key(obj)
        entries.append(Entry(kind, name, DELETE if prune else EXTRA, obj, namespace=ns, live=obj))
    return entries


def _prune_key(obj: dict[str, Any]) -> tuple[int, str, str]:
    kind, ns, name = archive.key(obj)
    return (archive.PRUNE_ORDER.index(kind), ns, name)


def _source_namespace(loaded: Loaded) -> str | None:
    """The archive's Argo CD namespace: the index's; else that of its ConfigMaps/Secrets/projects.

    None for a plain export, whose objects of Argo CD's namespace name no namespace.
    """
    if loaded.index and loaded.index.get("namespace"):
        return str(loaded.index["namespace"])
    for obj in loaded.objects:
        ns = (obj.get("metadata") or {}).get("namespace")
        if obj.get("kind") in ("ConfigMap", "Secret", "AppProject") and ns:
            return str(ns)
    if loaded.plain:
        return None
    raise ConfigError(f"archive {loaded.source} names no namespace; pass --namespace NS")

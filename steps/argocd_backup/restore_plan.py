"""A restore's decision, pure: the archive's objects as they should be live, and what to do with
each object — :func:`desired_objects` (where each object goes) and :func:`plan_restore` (create, change,
unchanged, delete or keep, from the live objects :func:`steps.argocd_backup.restore.plan` gathered).

Table-tested without a cluster (tests/steps/argocd_backup/test_backup_restore_cores.py). Imports :mod:`steps.argocd_backup.archive`,
:mod:`steps.kube.argocd_namespaces` and :mod:`steps.domain.errors`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from steps.argocd_backup import archive, object_diff
from steps.domain.errors import ConfigError
from steps.kube.argocd_namespaces import (
    APPLICATION_NAMESPACES_KEY,
    APPLICATIONSET_NAMESPACES_KEY,
    CMD_PARAMS_CONFIG_MAP,
    is_literal,
    namespace_enabled,
    namespace_patterns,
)

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
    #: Namespaces the restore writes into that do not exist on the cluster (refused with --apply).
    missing_namespaces: list[str] = field(default_factory=list)
    #: namespaces written into that are being deleted (``--apply`` refuses before any write)
    terminating_namespaces: list[str] = field(default_factory=list)

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


# --- what --prune may delete: what the archive's producer would have taken -----------------------
#: Secret types a v1 archive took, by value (steps/argocd_backup/export.py before format v2; ``repo-write``
#: was a misspelling of ``repository-write`` — selected nothing).
V1_SECRET_TYPES = ("repository", "repo-creds", "cluster", "repo-write", "repo-write-creds")


@dataclass(frozen=True)
class PruneScope:
    """Which live objects ``--prune`` may delete: only those the archive's producer would have taken,
    so an object it never selected is never deleted for being absent from it.

    ``secret``: the producer's Secret rule. ``cmd_params``: an argocd-cmd-params-cm naming the other
    namespaces whose Applications / ApplicationSets it took (empty: Argo CD's namespace only).
    ``argocd-secret`` is never in scope (a restore without it would lock everyone out).
    """

    producer: str
    secret: Callable[[dict[str, Any]], bool]
    cmd_params: dict[str, Any] = field(default_factory=dict)

    def covers(self, obj: dict[str, Any], argocd_namespace: str) -> bool:
        kind, ns, name = archive.key(obj)
        if kind == "Secret":
            return name != archive.ARGOCD_SECRET and self.secret(obj)
        setting = {"Application": APPLICATION_NAMESPACES_KEY, "ApplicationSet": APPLICATIONSET_NAMESPACES_KEY}
        if kind in setting:
            patterns = namespace_patterns(self.cmd_params, setting[kind])
            return namespace_enabled(ns, argocd_namespace, patterns, setting=setting[kind])
        return kind in archive.PRUNE_ORDER and ns == argocd_namespace


def _params(applications: list[str], sets: list[str]) -> dict[str, Any]:
    data = {
        APPLICATION_NAMESPACES_KEY: ", ".join(applications),
        APPLICATIONSET_NAMESPACES_KEY: ", ".join(sets),
    }
    return {"data": data}


def prune_scope(loaded: Loaded, target: str, desired: dict[archive.Key, dict[str, Any]]) -> PruneScope | None:
    """The :class:`PruneScope` of the archive's producer; None when it cannot be known (no index, or
    a format this version does not know) — then ``--prune`` is refused.

    - plain ``argocd admin export``: the Secret rule every upstream version shares
      (:func:`steps.argocd_backup.archive.is_upstream_secret`; not argocd-cm references, which only v2.14 follows);
      Applications / ApplicationSets of Argo CD's namespace, and of another namespace only when the
      export holds one of that kind there (upstream takes other namespaces only when told to);
    - format v1: :data:`V1_SECRET_TYPES`, ``argocd-secret``, ``argocd-notifications-secret``;
      Argo CD's namespace only;
    - format v2: :func:`steps.argocd_backup.archive.is_argocd_secret` without argocd-cm references; the namespaces
      the archive's argocd-cmd-params-cm enables;
    - format v3 (current): v2 plus the Secrets the archive's argocd-cm references.
    """
    params = desired.get(("ConfigMap", target, CMD_PARAMS_CONFIG_MAP)) or {}
    if loaded.plain:
        held: dict[str, set[str]] = {"Application": set(), "ApplicationSet": set()}
        for kind, ns, _ in desired:
            if kind in held and ns != target:
                held[kind].add(ns)
        return PruneScope(
            "a plain `argocd admin export` file",
            archive.is_upstream_secret,
            _params(sorted(held["Application"]), sorted(held["ApplicationSet"])),
        )
    fmt = (loaded.index or {}).get("format")
    if fmt == archive.FORMAT_V1:

        def v1_secret(obj: dict[str, Any]) -> bool:
            meta = obj.get("metadata") or {}
            label = (meta.get("labels") or {}).get(archive.SECRET_TYPE_LABEL)
            return meta.get("name") in archive.NAMED_SECRETS or label in V1_SECRET_TYPES

        return PruneScope(f"an imagebump archive of format {fmt}", v1_secret, _params([], []))
    if fmt == archive.FORMAT_V2:
        return PruneScope(f"an imagebump archive of format {fmt}", archive.is_argocd_secret, params)
    if fmt == archive.FORMAT:
        referenced = archive.referenced_secrets(desired.get(("ConfigMap", target, "argocd-cm")))
        return PruneScope(
            f"an imagebump archive of format {fmt}",
            lambda obj: archive.is_argocd_secret(obj, referenced),
            params,
        )
    return None


def unknown_scope_error(loaded: Loaded) -> ConfigError:
    """Why ``--prune`` is refused for an archive whose producer's selection is unknown."""
    if loaded.index is None:
        why = "it has no index, so which objects its backup selected is unknown"
    else:
        why = (
            f"its index names format {loaded.index.get('format')!r}, which this version of imagebump "
            f"does not know (it knows {archive.FORMAT_V1}, {archive.FORMAT_V2}, {archive.FORMAT}), so "
            "which objects its backup selected is unknown"
        )
    return ConfigError(
        f"--prune refused for archive {loaded.source}: {why}, and pruning could delete objects it never "
        "held. Restore without --prune (nothing is deleted), or with the imagebump version that wrote it, "
        "or take a new backup; nothing was applied"
    )


def plan_restore(
    desired: dict[archive.Key, dict[str, Any]],
    live: dict[archive.Key, dict[str, Any] | None],
    others: list[dict[str, Any]],
    *,
    prune: bool,
    scope: PruneScope | None = None,
    namespace: str = "",
) -> list[Entry]:
    """What to do with each object; pure. ``live``: each archived key's live object (None: missing);
    ``others``: the live objects of the pruned kinds (those the archive holds are ignored).

    An archived object is ``create`` (not live, or live but being deleted: :func:`terminating`),
    ``change`` (any difference) or ``unchanged``, in
    apply order; a live object the archive lacks is ``delete`` with ``prune``, else ``extra``, in
    prune order (:data:`steps.argocd_backup.archive.PRUNE_ORDER`) — only when ``scope`` (with Argo CD's
    ``namespace``) covers it, and never ``argocd-secret``.
    """
    entries: list[Entry] = []
    for k, obj in sorted(desired.items(), key=lambda item: archive.sort_key(item[1])):
        kind, ns, name = k
        current = live.get(k)
        if current is None:
            entries.append(Entry(kind, name, CREATE, obj, namespace=ns))
            continue
        if terminating(current):  # going away (its finalizers run): created again once it is gone
            entries.append(Entry(kind, name, CREATE, obj, namespace=ns, live=current))
            continue
        diff = object_diff.diff_objects(current, obj)
        entries.append(
            Entry(kind, name, CHANGE if diff else UNCHANGED, obj, diff, namespace=ns, live=current)
        )
    extras = [
        o
        for o in others
        if archive.key(o) not in desired
        and not (o.get("kind") == "Secret" and archive.key(o)[2] == archive.ARGOCD_SECRET)
        and (scope is None or scope.covers(o, namespace))
    ]
    for obj in sorted(extras, key=_prune_key):
        kind, ns, name = archive.key(obj)
        entries.append(Entry(kind, name, DELETE if prune else EXTRA, obj, namespace=ns, live=obj))
    return entries


def terminating(obj: dict[str, Any] | None) -> bool:
    """Is ``obj`` being deleted (``metadata.deletionTimestamp`` set: the API server removes it once
    its finalizers are gone, e.g. Argo CD's resources-finalizer after deleting what it deployed)?
    Such an object compares equal to the archive (the timestamp is server metadata), yet will not
    be there: a restore creates it again once it is gone."""
    return bool(((obj or {}).get("metadata") or {}).get("deletionTimestamp"))


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

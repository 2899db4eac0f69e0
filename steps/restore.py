"""restore: read a backup archive (S3 or a local file) back into Argo CD — each object made equal
to the archive, in its own namespace.

**Reading.** An imagebump archive (gzip; a name ending in ``.gz``) is checked against its index
(``….index.json`` beside it: for ``X.yaml.gz`` either ``X.index.json`` or
``X.yaml.gz.index.json``): different sha256 bytes are refused, and so is a missing index unless
``--no-verify`` (which skips only the sha256 check; the archive must still parse). A plain
``argocd admin export`` file (not gzip, no index) is accepted and reported as *unverified*; its
objects are sanitised exactly as ours (no ``status`` but an AppProject's project tokens, no
``operation``, no server-populated metadata). Every check happens before the cluster is even
contacted, so a bad archive applies nothing.

**Where.** Objects of the archive's Argo CD namespace (the index's ``namespace``; objects without
one in a plain export) go to ``namespace`` when given, else back where they came from; every
other object (Applications and ApplicationSets of other namespaces) goes to its own namespace.

**What.** Each archived object is compared with the live one: ``create`` (missing), ``change``
(any difference — keys, labels, list entries only the live object has are removals — shown as a
unified diff with Secret values masked: ``***``, a changed value ``*** (changed)``) or
``unchanged``. Live Argo CD objects of the pruned kinds (:data:`steps.archive.PRUNE_ORDER`) that
the archive lacks — selected as a backup selects them, in the namespaces the archive's
``argocd-cmd-params-cm`` enables — are listed as ``not in archive`` and kept, or with ``prune``
deleted. AppProjects get ``status.jwtTokensByRole`` completed from their roles' tokens
(:func:`steps.archive.with_project_tokens`), so project tokens are accepted right away.

**Applying** (``apply``; a dry run otherwise): create (POST) what is missing and replace (PUT,
with the live resourceVersion as precondition; a conflict re-reads and retries) what differs, so
the object equals the archive — what a backup never holds (server metadata, ownerReferences, an
Application's status and operation) stays as the live object has it. Order: ConfigMaps and
Secrets, AppProjects, ApplicationSets, Applications. Then prune: ApplicationSets (deleted with
``propagationPolicy: Orphan`` so the garbage collector does not delete their Applications),
Applications (their finalizers removed first, so Argo CD does not cascade-delete the workloads
they deployed; as upstream's ``argocd admin import --prune``), AppProjects, Secrets. ConfigMaps
are never pruned.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from steps import archive, kube
from steps.errors import ConfigError

log = logging.getLogger(__name__)

CREATE, CHANGE, UNCHANGED, DELETE, EXTRA = "create", "change", "unchanged", "delete", "extra"
DEFAULT_NAMESPACE = "argocd"
_ATTEMPTS = 3


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


def index_candidates(name: str) -> list[str]:
    """Where an archive's index may live: ``X.index.json`` for ``X.yaml.gz``, then ``NAME.index.json``."""
    out = []
    if name.endswith(".yaml.gz"):
        out.append(name[: -len(".yaml.gz")] + ".index.json")
    out.append(name + ".index.json")
    return out


def split_s3_url(url: str) -> tuple[str, str]:
    rest = url[len("s3://") :]
    bucket, _, key = rest.partition("/")
    if not bucket or not key:
        raise ConfigError(f"{url!r} is not an s3://BUCKET/KEY URL of a backup archive")
    return bucket, key


def load(source: str, *, s3: Any = None, verify: bool = True) -> Loaded:
    """Read and check ``source`` (``s3://BUCKET/KEY`` or a file path); nothing touches the cluster."""
    if source.startswith("s3://"):
        data, index_text, index_source = _read_s3(source, s3)
    else:
        data, index_text, index_source = _read_file(source)
    if index_text is None and not archive.is_gzip(data) and not source.endswith(".gz"):
        objects = archive.read_plain(data, source)
        return Loaded(objects=objects, index=None, source=source, plain=True)
    index = None
    if index_text is not None:
        index = archive.parse_index(index_text, index_source)
    if verify:
        if index is None:
            raise ConfigError(
                f"no index beside archive {source} (looked for {', '.join(index_candidates(source))}); "
                "cannot verify its sha256. Put the index beside it, or pass --no-verify to restore "
                "an archive you trust without verification"
            )
        archive.verify(data, index, source)
    # Sanitised again: an archive of an older version (or edited before it was indexed) must not
    # bring back an operation or server fields either.
    objects = [archive.sanitise(o) for o in archive.read_archive(data, source)]
    return Loaded(objects=objects, index=index, source=source)


def _read_file(source: str) -> tuple[bytes, bytes | None, str]:
    path = Path(source)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read archive {source}: {exc.strerror or exc}") from None
    for candidate in index_candidates(str(path)):
        if Path(candidate).is_file():
            return data, Path(candidate).read_bytes(), candidate
    return data, None, ""


def _read_s3(source: str, s3: Any) -> tuple[bytes, bytes | None, str]:
    from botocore.exceptions import ClientError

    from steps.backup_export import s3_error

    bucket, key = split_s3_url(source)
    try:
        data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        raise s3_error(exc, bucket=bucket, key=key, action="read") from None
    for candidate in index_candidates(key):
        try:
            text = s3.get_object(Bucket=bucket, Key=candidate)["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                continue
            raise s3_error(exc, bucket=bucket, key=candidate, action="read") from None
        return data, text, f"s3://{bucket}/{candidate}"
    return data, None, ""


def desired_objects(
    loaded: Loaded, namespace: str | None = None
) -> tuple[str, dict[archive.Key, dict[str, Any]]]:
    """Argo CD's target namespace and the archive's objects as they should be live, by key."""
    if namespace is not None and not archive.is_literal(namespace):
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


def plan(
    api: kube.KubeApi,
    loaded: Loaded,
    *,
    namespace: str | None = None,
    prune: bool = False,
    page_size: int = kube.DEFAULT_PAGE_SIZE,
) -> Plan:
    """What a restore would do, object by object (reads the cluster, writes nothing)."""
    from steps.backup_export import collect_live

    target, desired = desired_objects(loaded, namespace)
    result = Plan(namespace=target, prune=prune)
    if loaded.plain:
        result.unverified = (
            f"unverified: {loaded.source} is a plain `argocd admin export` file (no index, no checksum); "
            "its objects were sanitised as an imagebump archive's are (no operation, no status but "
            "project tokens, no server fields)"
        )
    for k, obj in sorted(desired.items(), key=lambda item: archive.sort_key(item[1])):
        kind, ns, name = k
        live = api.get(kube.resource_for(kind), ns, name)
        if live is None:
            result.entries.append(Entry(kind, name, CREATE, obj, namespace=ns))
            continue
        diff = archive.diff_objects(live, obj)
        result.entries.append(
            Entry(kind, name, CHANGE if diff else UNCHANGED, obj, diff, namespace=ns, live=live)
        )
    params = desired.get(("ConfigMap", target, archive.CMD_PARAMS_CONFIG_MAP))
    extras = [
        o
        for o in collect_live(api, target, kinds=archive.PRUNE_ORDER, cmd_params=params, page_size=page_size)
        if archive.key(o) not in desired
    ]
    for live in sorted(extras, key=_prune_key):
        kind, ns, name = archive.key(live)
        result.entries.append(Entry(kind, name, DELETE if prune else EXTRA, live, namespace=ns, live=live))
    return result


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


_VERBS = {
    False: {
        CREATE: "would create",
        CHANGE: "would change",
        UNCHANGED: "unchanged",
        DELETE: "would delete",
        EXTRA: "not in archive",
    },
    True: {
        CREATE: "created",
        CHANGE: "changed",
        UNCHANGED: "unchanged",
        DELETE: "deleted",
        EXTRA: "not in archive",
    },
}


def render(result: Plan, *, applied: bool = False) -> str:
    """Human-readable report of a plan: one line per object, diffs indented, a summary line."""
    lines = [result.unverified] if result.unverified else []
    verbs = _VERBS[applied]
    for entry in result.entries:
        line = f"{verbs[entry.action]:>14}  {archive.show(entry.key)}"
        finalizers = ((entry.live or {}).get("metadata") or {}).get("finalizers")
        if entry.action == DELETE and entry.kind == "Application" and finalizers:
            line += f" (finalizers {', '.join(finalizers)} removed first: its resources stay)"
        elif entry.action == DELETE and entry.kind == "ApplicationSet":
            line += " (its Applications are orphaned, not deleted)"
        elif entry.action == EXTRA:
            line += " (kept; --prune deletes it)"
        lines.append(line)
        lines.extend(f"                {line}" for line in entry.diff)
    others = result.namespaces()[1:]
    where = f"in namespace {result.namespace}" + (f" (and {', '.join(others)})" if others else "")
    extra = result.count(EXTRA)
    if applied:
        parts = [
            f"{result.count(CREATE)} created",
            f"{result.count(CHANGE)} changed",
            f"{result.count(UNCHANGED)} unchanged",
        ]
        if result.prune:
            parts.append(f"{result.count(DELETE)} deleted")
        if extra:
            parts.append(f"{extra} not in the archive (kept)")
        summary = f"applied: {', '.join(parts)} {where}"
    else:
        parts = [
            f"{result.count(CREATE)} to create",
            f"{result.count(CHANGE)} to change",
            f"{result.count(UNCHANGED)} unchanged",
        ]
        if result.prune:
            parts.append(f"{result.count(DELETE)} to delete")
        if extra:
            parts.append(f"{extra} not in the archive (kept; pass --prune to delete)")
        summary = f"dry run: {', '.join(parts)} {where}; pass --apply to apply"
    lines.append(summary)
    return "\n".join(lines)


def apply(api: kube.KubeApi, result: Plan, *, on_applied: Callable[[Entry], None] | None = None) -> int:
    """Make every archived object equal to the archive, then prune; how many objects were written."""
    written = 0
    for entry in sorted(
        (e for e in result.entries if e.action in (CREATE, CHANGE)), key=lambda e: archive.sort_key(e.obj)
    ):
        _make_equal(api, entry)
        log.info("%s %s", "created" if entry.action == CREATE else "replaced", archive.show(entry.key))
        written += 1
        if on_applied:
            on_applied(entry)
    for entry in (e for e in result.entries if e.action == DELETE):
        _prune(api, entry)
        log.info("pruned %s", archive.show(entry.key))
        written += 1
        if on_applied:
            on_applied(entry)
    return written


def _make_equal(api: kube.KubeApi, entry: Entry) -> None:
    resource = kube.resource_for(entry.kind)
    live = entry.live
    for attempt in range(_ATTEMPTS):
        try:
            if live is None:
                api.create(resource, entry.namespace, entry.obj)
            elif archive.diff_objects(live, entry.obj):
                api.replace(resource, entry.namespace, archive.replacement(entry.obj, live))
            return
        except kube.ConflictError:
            if attempt == _ATTEMPTS - 1:
                raise
            live = api.get(resource, entry.namespace, entry.name)


def _prune(api: kube.KubeApi, entry: Entry) -> None:
    resource = kube.resource_for(entry.kind)
    live = entry.live
    for attempt in range(_ATTEMPTS):
        if live is None:
            return
        try:
            meta = live.get("metadata") or {}
            if entry.kind == "Application" and meta.get("finalizers"):
                # Argo CD's resources-finalizer would delete everything the Application deployed.
                stripped = copy.deepcopy(live)
                stripped["metadata"]["finalizers"] = []
                live = api.replace(resource, entry.namespace, stripped)
            api.delete(
                resource,
                entry.namespace,
                entry.name,
                uid=meta.get("uid"),
                propagation="Orphan" if entry.kind == "ApplicationSet" else None,
            )
            return
        except kube.ConflictError:
            if attempt == _ATTEMPTS - 1:
                raise
            live = api.get(resource, entry.namespace, entry.name)


def restore(
    source: str,
    *,
    api_factory: Callable[[], kube.KubeApi],
    s3: Any = None,
    do_apply: bool = False,
    namespace: str | None = None,
    verify: bool = True,
    prune: bool = False,
) -> tuple[Plan, str]:
    """Load and check ``source``, then plan (and with ``do_apply`` apply); returns plan and report.

    ``api_factory`` is called only after the archive passed every check, so a bad archive never
    even reaches the cluster. ``prune`` without ``do_apply`` only lists what would be deleted.
    """
    loaded = load(source, s3=s3, verify=verify)
    desired_objects(loaded, namespace)  # every check of the archive and the options, before the cluster
    api = api_factory()
    result = plan(api, loaded, namespace=namespace, prune=prune)
    if do_apply:
        apply(api, result)
    return result, render(result, applied=do_apply)

"""restore (``imagebump restore``): a backup archive (S3 or a local file) back into Argo CD, each
object made equal to the archive. What users see of it (the checks, ``--apply``, ``--prune``, the
exit codes): docs/backup-restore.md.

Reads the archive and checks it against its index before the cluster is contacted (a plain
``argocd admin export`` file is accepted as *unverified*), then the live objects. Writes, with
``apply`` only: creates and replaces (the live ``resourceVersion`` as precondition) in the order
ConfigMaps and Secrets, AppProjects, ApplicationSets, Applications; with ``prune``, deletes what the
archive's producer would have taken and the archive lacks (:func:`steps.argocd_backup.restore_plan.prune_scope`),
never cascading to the workloads. Every write makes one object equal to the archive, so the same
restore run again finishes an interrupted one.

Gather → decide → act: :func:`load` reads and checks the archive (:mod:`steps.aws.s3`), :func:`plan`
reads the live objects (:mod:`steps.argocd_backup.live_objects`), the pure
:func:`steps.argocd_backup.restore_plan.plan_restore` says what to do with each, :func:`apply` does
it, :func:`steps.argocd_backup.restore_report.render` writes the report. Never imports
:mod:`steps.argocd_backup.export`.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from steps.argocd_backup import archive, object_diff
from steps.argocd_backup.live_objects import collect_live, namespace_status
from steps.argocd_backup.restore_plan import (
    CHANGE,
    CREATE,
    DEFAULT_NAMESPACE,
    DELETE,
    EXTRA,
    UNCHANGED,
    Entry,
    Loaded,
    Plan,
    desired_objects,
    plan_restore,
    prune_scope,
    terminating,
    unknown_scope_error,
)
from steps.argocd_backup.restore_report import render
from steps.aws import s3 as s3io
from steps.domain.errors import ConfigError, ConflictError, ImagebumpError, TransientError
from steps.kube import api as kube

__all__ = [  # the plan's types and decision live in steps.argocd_backup.restore_plan; restore.CREATE etc. still work
    "CHANGE",
    "CREATE",
    "DEFAULT_NAMESPACE",
    "DELETE",
    "EXTRA",
    "UNCHANGED",
    "Entry",
    "Loaded",
    "Plan",
    "apply",
    "plan_restore",
    "desired_objects",
    "index_candidates",
    "load",
    "plan",
    "render",
    "restore",
]

log = logging.getLogger(__name__)

_ATTEMPTS = 3
#: The wait before a write that lost to another writer (409) is tried again: Argo CD's controller
#: updates a busy Application many times a minute.
CONFLICT_BACKOFF_SECONDS = 0.5


def index_candidates(name: str) -> list[str]:
    """Where an archive's index may live: ``X.index.json`` for ``X.yaml.gz``, then ``NAME.index.json``."""
    out = []
    if name.endswith(".yaml.gz"):
        out.append(name[: -len(".yaml.gz")] + ".index.json")
    out.append(name + ".index.json")
    return out


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
    bucket, key = s3io.split_url(source)
    data = s3io.read(s3, bucket, key)
    assert data is not None  # not missing_ok: a missing archive raised
    for candidate in index_candidates(key):
        text = s3io.read(s3, bucket, candidate, missing_ok=True)
        if text is not None:
            return data, text, f"s3://{bucket}/{candidate}"
    return data, None, ""


def plan(
    api: kube.KubeApi,
    loaded: Loaded,
    *,
    namespace: str | None = None,
    prune: bool = False,
    page_size: int = kube.DEFAULT_PAGE_SIZE,
) -> Plan:
    """What a restore would do, object by object (reads the cluster, writes nothing)."""
    target, desired = desired_objects(loaded, namespace)
    scope = prune_scope(loaded, target, desired)
    if prune and scope is None:
        raise unknown_scope_error(loaded)
    result = Plan(namespace=target, prune=prune)
    if loaded.plain:
        result.unverified = (
            f"unverified: {loaded.source} is a plain `argocd admin export` file (no index, no checksum); "
            "its objects were sanitised as an imagebump archive's are (no operation, no status but "
            "project tokens, no server fields)"
        )
    # gather: the namespaces written into, each archived object's live twin, and the live objects of
    # the pruned kinds the archive's producer would have taken (none when that is unknown)
    written_to = [target, *sorted({k[1] for k in desired} - {target})]
    found = {ns: namespace_status(api, ns) for ns in written_to}
    result.missing_namespaces = [ns for ns in written_to if found[ns] == "missing"]
    result.terminating_namespaces = [ns for ns in written_to if found[ns] == "terminating"]
    live = {k: api.get(kube.resource_for(k[0]), k[1], k[2]) for k in desired}
    others = []
    if scope is not None:
        others = collect_live(
            api,
            target,
            kinds=archive.PRUNE_ORDER,
            cmd_params=scope.cmd_params,
            argocd_cm=desired.get(("ConfigMap", target, "argocd-cm")) or {},
            page_size=page_size,
        )
    # decide (pure)
    result.entries = plan_restore(desired, live, others, prune=prune, scope=scope, namespace=target)
    return result


def missing_namespaces_error(result: Plan) -> ConfigError:
    """Why ``--apply`` refuses a plan that writes into namespaces the cluster does not have."""
    missing = result.missing_namespaces
    creates = "; ".join(f"kubectl create namespace {ns}" for ns in missing)
    hint = ""
    if result.namespace in missing:
        hint = (
            " — or pass --namespace NAME to restore Argo CD's own objects into the namespace Argo CD runs in"
        )
    return ConfigError(
        f"cannot restore: namespace{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
        f"not found on this cluster; nothing was applied. Create {'them' if len(missing) > 1 else 'it'} "
        f"first ({creates}){hint}"
    )


def apply(
    api: kube.KubeApi,
    result: Plan,
    *,
    on_applied: Callable[[Entry], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Make every archived object equal to the archive, then prune; how many objects were written.

    Refused before the first write when the plan writes into a namespace that does not exist.
    Each write is reported as it is done — ``created KIND/NAME -n NS``, ``replaced …``,
    ``deleted …`` — to ``progress`` (default: an INFO log record). A write that fails raises the
    same kind of error it met (:class:`~steps.domain.errors.TransientError` for a 5xx, 429, a lost
    connection or a timeout: exit 75; a refusal such as a 422 or 403: exit 2), saying ``N of M
    writes done; re-run the same command to finish``, the object and the API's reason. Every
    write makes one object equal to the archive (or deletes one it lacks), so re-running the same
    restore after any failure does what is left and finishes it.
    """
    if result.missing_namespaces:
        raise missing_namespaces_error(result)
    if result.terminating_namespaces:
        names = ", ".join(result.terminating_namespaces)
        raise TransientError(
            f"cannot restore: namespace {names} is being deleted (Terminating), so the API server refuses "
            "new objects in it; nothing was applied. Once it is gone, create it again "
            f"({'; '.join(f'kubectl create namespace {ns}' for ns in result.terminating_namespaces)}) "
            "and re-run",
            reason="namespace-terminating",
        )
    say = progress or (lambda line: log.info("%s", line))
    writes = [
        *sorted(
            (e for e in result.entries if e.action in (CREATE, CHANGE)), key=lambda e: archive.sort_key(e.obj)
        ),
        *(e for e in result.entries if e.action == DELETE),
    ]
    written = 0
    for entry in writes:
        verb = {CREATE: "create", CHANGE: "replace", DELETE: "delete"}[entry.action]
        try:
            if entry.action == DELETE:
                _prune(api, entry)
            else:
                _make_equal(api, entry)
        except ImagebumpError as exc:
            # The same kind of error (so the same exit code: 75 transient, 2 refused), saying how far
            # the restore got and that the same command finishes it.
            raise type(exc)(
                f"{written} of {len(writes)} writes done; re-run the same command to finish. "
                f"Could not {verb} {archive.show(entry.key)}: {exc}",
                reason=getattr(exc, "reason", ""),
            ) from exc
        say(f"{verb}d {archive.show(entry.key)}")  # created / replaced / deleted
        written += 1
        if on_applied:
            on_applied(entry)
    return written


#: How long a restore waits for an object being deleted to be gone before it creates it again
#: (then the same command, re-run, finishes it).
GONE_WAIT_SECONDS = 120.0
#: Seconds between two looks at an object being deleted.
GONE_POLL_SECONDS = 2.0
_sleep, _now = time.sleep, time.monotonic  # tests replace them


def _wait_gone(api: kube.KubeApi, resource: kube.Resource, entry: Entry) -> dict[str, Any] | None:
    """Wait until the object being deleted is gone (None), or is there again, created meanwhile (it,
    made equal as any live object); TransientError (re-run) when it takes too long."""
    deadline = _now() + GONE_WAIT_SECONDS
    while True:
        live = api.get(resource, entry.namespace, entry.name)
        if live is None or not terminating(live):
            return live
        if _now() >= deadline:
            finalizers = ", ".join((live.get("metadata") or {}).get("finalizers") or []) or "none"
            raise TransientError(
                f"{archive.show(entry.key)} is still being deleted (finalizers: {finalizers}) after "
                f"{GONE_WAIT_SECONDS:.0f}s; it is created again once it is gone"
            )
        _sleep(GONE_POLL_SECONDS)


def _make_equal(api: kube.KubeApi, entry: Entry) -> None:
    resource = kube.resource_for(entry.kind)
    live = _wait_gone(api, resource, entry) if terminating(entry.live) else entry.live
    for attempt in range(_ATTEMPTS):
        try:
            if live is not None and object_diff.immutable_change(entry.kind, live, entry.obj):
                # not changeable in place: deleted (this very object: its uid) and created as archived
                api.delete(resource, entry.namespace, entry.name, uid=(live.get("metadata") or {}).get("uid"))
                live = None
            if live is None:
                api.create(resource, entry.namespace, entry.obj)
            elif object_diff.diff_objects(live, entry.obj):
                api.replace(resource, entry.namespace, object_diff.replacement(entry.obj, live))
            return
        except ConflictError:
            if attempt == _ATTEMPTS - 1:
                raise
            _sleep(CONFLICT_BACKOFF_SECONDS * (attempt + 1))  # Argo CD writes its Applications often
            live = api.get(resource, entry.namespace, entry.name)


def _prune(api: kube.KubeApi, entry: Entry) -> None:
    resource = kube.resource_for(entry.kind)
    live = entry.live
    for attempt in range(_ATTEMPTS):
        if live is None:
            return
        try:
            meta = live.get("metadata") or {}
            if entry.kind in ("Application", "ApplicationSet") and meta.get("finalizers"):
                # Argo CD's resources-finalizer would delete everything an Application deployed; on an
                # ApplicationSet (progressive sync, deletionOrder Reverse) its controller would delete
                # the set's Applications itself (applicationset/controllers/applicationset_controller.go).
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
        except ConflictError:
            if attempt == _ATTEMPTS - 1:
                raise
            _sleep(CONFLICT_BACKOFF_SECONDS * (attempt + 1))  # Argo CD writes its Applications often
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
    progress: Callable[[str], None] | None = None,
    on_outcome: Callable[[str, dict[str, str]], None] | None = None,
) -> tuple[Plan, str]:
    """Load and check ``source``, then plan (and with ``do_apply`` apply); returns plan and report.

    ``on_outcome(kind, fields)``: told ``restore-finished`` or ``restore-halfway`` (a write failed)
    after an apply, for notifications (issue 36).

    ``api_factory`` is called only after the archive passed every check, so a bad archive never
    even reaches the cluster. ``prune`` without ``do_apply`` only lists what would be deleted.
    ``progress`` receives each write as it is done (:func:`apply`).
    """
    loaded = load(source, s3=s3, verify=verify)
    # every check of the archive and the options, before the cluster
    target, desired = desired_objects(loaded, namespace)
    if prune and prune_scope(loaded, target, desired) is None:
        raise unknown_scope_error(loaded)
    api = api_factory()
    result = plan(api, loaded, namespace=namespace, prune=prune)
    suspect = suspect_note(loaded)
    if do_apply:
        for note in (result.unverified, suspect):  # said before the first write, not only after
            if note and progress:
                progress(note)
        done: list[Entry] = []
        total = sum(e.action in (CREATE, CHANGE, DELETE) for e in result.entries)
        try:
            apply(api, result, progress=progress, on_applied=done.append)
        except ImagebumpError as exc:
            if on_outcome:
                fields = {"archive": source, "applied": str(len(done)), "remaining": str(total - len(done))}
                on_outcome("restore-halfway", {**fields, "error": str(exc)[:300]})
            raise
        if on_outcome:
            on_outcome("restore-finished", {"archive": source, "objects": str(len(done))})
    report = _with_namespaces(render(result, applied=do_apply), result)
    return result, (f"{suspect}\n{report}" if suspect else report)


def suspect_note(loaded: Loaded) -> str:
    """The warning for an archive its backup marked suspect (far fewer objects than the healthy
    backup before it, :mod:`steps.argocd_backup.export`); "" for any other."""
    index = loaded.index or {}
    if not index.get("suspect"):
        return ""
    return (
        f"suspect archive: {loaded.source} was marked suspect when it was written "
        f"({index.get('suspect_reason') or 'far fewer objects than the backup before it'}); "
        "make sure it is the backup you mean to restore"
    )


def _with_namespaces(report: str, result: Plan) -> str:
    """The report with a line per missing namespace just above its summary line (a dry run only:
    ``apply`` refuses such a plan)."""
    if not result.missing_namespaces and not result.terminating_namespaces:
        return report
    body, _, summary = report.rpartition("\n")
    notes = [
        f"  missing namespace {ns}: --apply will refuse; create it first (kubectl create namespace {ns})"
        + (" or pass --namespace NAME" if ns == result.namespace else "")
        for ns in result.missing_namespaces
    ] + [
        f"  namespace {ns} is being deleted: --apply will refuse; once it is gone, create it again"
        for ns in result.terminating_namespaces
    ]
    return "\n".join([*([body] if body else []), *notes, summary])

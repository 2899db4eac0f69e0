"""restore: read a backup archive (S3 or a local file) back into Argo CD's namespace.

Reads the archive and its index (``….index.json`` beside it: for ``X.yaml.gz`` either
``X.index.json`` or ``X.yaml.gz.index.json``), refuses archive bytes whose sha256 differs from
the index, refuses a corrupt gzip/YAML, and only then looks at the cluster. A missing index is
refused too, with the hint ``--no-verify`` (which skips only the sha256 check; the archive must
still parse). Every check happens before the first write, so a bad archive applies nothing.

Dry run (the default) compares each object with the live one (``get``) and reports it as
``create``, ``change`` (with a unified diff; Secret values shown as ``***``, a changed value as
``*** (changed)``) or ``unchanged``. Only what server-side apply would change counts: live fields
the archive does not mention (a label a controller added) are left alone and not reported. ``apply`` server-side-applies the created and changed
objects (field manager ``imagebump``, forced) in a safe order: ConfigMaps and Secrets, then
AppProjects, then ApplicationSets and Applications. ``namespace`` rewrites only
``metadata.namespace``; an Application's ``spec.destination`` is left as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from steps import archive, kube
from steps.errors import ConfigError

log = logging.getLogger(__name__)

CREATE, CHANGE, UNCHANGED = "create", "change", "unchanged"


@dataclass
class Loaded:
    """An archive read and checked: its objects (archive order), its index (or None), its source."""

    objects: list[dict[str, Any]]
    index: dict[str, Any] | None
    source: str


@dataclass
class Entry:
    kind: str
    name: str
    action: str
    obj: dict[str, Any]
    diff: list[str] = field(default_factory=list)


@dataclass
class Plan:
    namespace: str
    entries: list[Entry] = field(default_factory=list)

    def count(self, action: str) -> int:
        return sum(1 for e in self.entries if e.action == action)


def index_candidates(name: str) -> list[str]:
    """Where an archive's index may live: ``X.index.json`` for ``X.yaml.gz``, then ``NAME.index.json``."""
    out = []
    if name.endswith(".yaml.gz"):
        out.append(name[: -len(".yaml.gz")] + ".index.json")
    out.append(name + ".index.json")
    return out


def split_s3_url(url: str) -> tuple[str, str]:
    rest = url[len("s3://"):]
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
    objects = archive.read_archive(data, source)
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


def plan(api: kube.KubeApi, loaded: Loaded, *, namespace: str | None = None) -> Plan:
    """What a restore would do, object by object, in apply order (reads the cluster, writes nothing)."""
    target = namespace or _source_namespace(loaded)
    result = Plan(namespace=target)
    for obj in sorted(loaded.objects, key=archive.sort_key):
        desired = archive.retarget(obj, target)
        resource = kube.resource_for(desired["kind"])
        name = desired["metadata"]["name"]
        live = api.get(resource, target, name)
        if live is None:
            result.entries.append(Entry(desired["kind"], name, CREATE, desired))
            continue
        diff = archive.diff_objects(live, desired)
        result.entries.append(Entry(desired["kind"], name, CHANGE if diff else UNCHANGED, desired, diff))
    return result


def _source_namespace(loaded: Loaded) -> str:
    if loaded.index and loaded.index.get("namespace"):
        return str(loaded.index["namespace"])
    for obj in loaded.objects:
        ns = obj.get("metadata", {}).get("namespace")
        if ns:
            return str(ns)
    raise ConfigError(f"archive {loaded.source} names no namespace; pass --namespace NS")


def render(result: Plan, *, applied: bool = False) -> str:
    """Human-readable report of a plan: one line per object, diffs indented, a summary line."""
    lines = []
    verbs = {CREATE: "created" if applied else "would create", CHANGE: "changed" if applied else "would change",
             UNCHANGED: "unchanged"}
    for entry in result.entries:
        lines.append(f"{verbs[entry.action]:>13}  {entry.kind}/{entry.name}")
        lines.extend(f"               {line}" for line in entry.diff)
    if applied:
        summary = (f"applied: {result.count(CREATE)} created, {result.count(CHANGE)} changed, "
                   f"{result.count(UNCHANGED)} unchanged in namespace {result.namespace}")
    else:
        summary = (f"dry run: {result.count(CREATE)} to create, {result.count(CHANGE)} to change, "
                   f"{result.count(UNCHANGED)} unchanged in namespace {result.namespace}; "
                   "pass --apply to apply")
    lines.append(summary)
    return "\n".join(lines)


def apply(api: kube.KubeApi, result: Plan, *, on_applied: Callable[[Entry], None] | None = None) -> int:
    """Server-side apply the created and changed objects in plan (safe) order; how many applied."""
    applied = 0
    for entry in sorted(result.entries, key=lambda e: archive.sort_key(e.obj)):
        if entry.action == UNCHANGED:
            continue
        api.apply(kube.resource_for(entry.kind), result.namespace, entry.obj)
        log.info("applied %s %s/%s", entry.kind, result.namespace, entry.name)
        applied += 1
        if on_applied:
            on_applied(entry)
    return applied


def restore(
    source: str,
    *,
    api_factory: Callable[[], kube.KubeApi],
    s3: Any = None,
    do_apply: bool = False,
    namespace: str | None = None,
    verify: bool = True,
) -> tuple[Plan, str]:
    """Load and check ``source``, then plan (and with ``do_apply`` apply); returns plan and report.

    ``api_factory`` is called only after the archive passed every check, so a bad archive never
    even reaches the cluster.
    """
    loaded = load(source, s3=s3, verify=verify)
    api = api_factory()
    result = plan(api, loaded, namespace=namespace)
    if do_apply:
        apply(api, result)
    return result, render(result, applied=do_apply)

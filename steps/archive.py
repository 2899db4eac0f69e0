"""The backup archive, as pure functions: what to keep of an object, how it is written and read.

An archive is one gzip-compressed multi-document YAML of sanitised objects in a stable order
(apply order of the kind, then name), so two backups of the same state are byte-identical. Its
index (a small JSON object stored beside it) holds the sha256 of the archive bytes, counts per
kind, the tool version, the creation time, the cluster and the namespace.

Nothing here does I/O. Secret values never leave these functions except inside the archive
bytes: :func:`diff_objects` and :func:`mask` replace them with ``***``.
"""

from __future__ import annotations

import copy
import difflib
import gzip
import hashlib
import json
import zlib
from collections import Counter
from datetime import datetime
from typing import Any

import yaml

from steps.errors import ConfigError
from steps.kube import RESOURCES

FORMAT = "imagebump.argocd-backup/v1"
SECRET_TYPE_LABEL = "argocd.argoproj.io/secret-type"
SECRET_TYPES = ("repository", "repo-creds", "cluster", "repo-write", "repo-write-creds")
CONFIG_MAPS = (
    "argocd-cm",
    "argocd-rbac-cm",
    "argocd-cmd-params-cm",
    "argocd-ssh-known-hosts-cm",
    "argocd-tls-certs-cm",
    "argocd-gpg-keys-cm",
    "argocd-notifications-cm",
)
NAMED_SECRETS = ("argocd-secret", "argocd-notifications-secret")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

#: Server-populated metadata that must not travel to another cluster (or back).
_SERVER_METADATA = (
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    # Owner references name their owner by uid, which is the source cluster's own object: on
    # restore the uid does not exist, and the garbage collector would delete the restored object.
    "ownerReferences",
)
_KIND_ORDER = {kind: i for i, kind in enumerate(RESOURCES)}
_MASK = "***"


def secret_type_selector() -> str:
    """The label selector of Argo CD's repository, credential and cluster Secrets."""
    return f"{SECRET_TYPE_LABEL} in ({','.join(SECRET_TYPES)})"


def sanitise(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` without what the API server populates (status, uid, managedFields, …).

    Applications also lose ``operation``: a restored in-flight sync operation would start a sync.
    """
    clean = copy.deepcopy(obj)
    clean.pop("status", None)
    if clean.get("kind") == "Application":
        clean.pop("operation", None)
    metadata = clean.get("metadata") or {}
    for key in _SERVER_METADATA:
        metadata.pop(key, None)
    annotations = metadata.get("annotations")
    if annotations is not None:
        annotations.pop(LAST_APPLIED, None)
        if not annotations:
            metadata.pop("annotations")
    if metadata.get("labels") == {}:
        metadata.pop("labels")
    clean["metadata"] = metadata
    return clean


def sort_key(obj: dict[str, Any]) -> tuple[int, str, str]:
    """Apply order of the kind (ConfigMap, Secret, AppProject, ApplicationSet, Application), name."""
    kind = obj.get("kind", "")
    return (_KIND_ORDER.get(kind, len(_KIND_ORDER)), kind, obj.get("metadata", {}).get("name", ""))


def counts(objects: list[dict[str, Any]]) -> dict[str, int]:
    """How many objects of each kind, kinds in apply order (every known kind present)."""
    found = Counter(o.get("kind", "") for o in objects)
    return {kind: found.get(kind, 0) for kind in RESOURCES} | {
        k: v for k, v in sorted(found.items()) if k not in RESOURCES
    }


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """One multi-document YAML of ``objects`` in :func:`sort_key` order, keys sorted."""
    ordered = sorted(objects, key=sort_key)
    return yaml.safe_dump_all(ordered, sort_keys=True, default_flow_style=False, explicit_start=True)


def build_archive(objects: list[dict[str, Any]]) -> bytes:
    """Gzip of :func:`to_yaml` with a zero mtime: the same objects give the same bytes."""
    return gzip.compress(to_yaml(objects).encode("utf-8"), compresslevel=9, mtime=0)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_index(
    data: bytes,
    objects: list[dict[str, Any]],
    *,
    cluster: str,
    namespace: str,
    created: datetime,
    version: str,
    archive: str = "",
) -> dict[str, Any]:
    """The index stored beside an archive (no object names or values, only counts)."""
    return {
        "format": FORMAT,
        "archive": archive,
        "sha256": sha256(data),
        "size": len(data),
        "counts": counts(objects),
        "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cluster": cluster,
        "namespace": namespace,
        "tool": "imagebump",
        "version": version,
    }


def json_bytes(index: dict[str, Any]) -> bytes:
    return (json.dumps(index, indent=2, sort_keys=True) + "\n").encode("utf-8")


def parse_index(text: bytes | str, source: str) -> dict[str, Any]:
    try:
        index = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"index {source} is not valid JSON ({exc}); the backup is damaged") from None
    if not isinstance(index, dict) or not isinstance(index.get("sha256"), str):
        raise ConfigError(f"index {source} has no sha256; it is not an imagebump backup index")
    return index


def verify(data: bytes, index: dict[str, Any], source: str) -> None:
    """Refuse archive bytes whose sha256 differs from the index's."""
    actual = sha256(data)
    if actual != index.get("sha256"):
        raise ConfigError(
            f"archive {source} does not match its index (sha256 {actual[:16]}…, index says "
            f"{str(index.get('sha256'))[:16]}…): it was changed or damaged after the backup; "
            "nothing was applied"
        )


def read_archive(data: bytes, source: str) -> list[dict[str, Any]]:
    """Objects of an archive; ConfigError naming ``source`` for bad gzip, YAML or objects."""
    try:
        text = gzip.decompress(data).decode("utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise ConfigError(f"archive {source} is corrupt: not a readable gzip file ({exc}); nothing was applied") from None
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"archive {source} is corrupt: invalid YAML{where}; nothing was applied") from None
    for i, doc in enumerate(documents):
        name = doc.get("metadata", {}).get("name") if isinstance(doc, dict) else None
        if not isinstance(doc, dict) or doc.get("kind") not in RESOURCES or not isinstance(name, str):
            raise ConfigError(
                f"archive {source} is corrupt: document {i + 1} is not a ConfigMap, Secret, AppProject, "
                "ApplicationSet or Application with a name; nothing was applied"
            )
    return documents


def retarget(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A copy of ``obj`` placed in ``namespace`` (only metadata.namespace; spec untouched)."""
    moved = copy.deepcopy(obj)
    moved.setdefault("metadata", {})["namespace"] = namespace
    return moved


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


def project(live: Any, desired: Any) -> Any:
    """``live`` cut down to the fields ``desired`` sets (maps recursively; lists and scalars whole).

    Server-side apply changes only the fields it is given: live fields the archive does not
    mention (a label a controller added, a Secret key added later) are left alone, so they are
    not a change to report.
    """
    if isinstance(live, dict) and isinstance(desired, dict):
        return {k: project(live[k], desired[k]) for k in desired if k in live}
    return live


def diff_objects(live: dict[str, Any], desired: dict[str, Any]) -> list[str]:
    """Unified diff lines of what applying ``desired`` changes in ``live``; Secret values masked.

    [] when applying would change nothing (see :func:`project`).
    """
    b = sanitise(desired)
    a = project(sanitise(live), b)
    if a == b:
        return []
    changed = _secret_changes(a, b) if b.get("kind") == "Secret" else set()
    a_text = yaml.safe_dump(mask(a), sort_keys=True, default_flow_style=False)
    b_text = yaml.safe_dump(mask(b, changed=changed), sort_keys=True, default_flow_style=False)
    return list(
        difflib.unified_diff(a_text.splitlines(), b_text.splitlines(), "live", "archive", lineterm="", n=2)
    )

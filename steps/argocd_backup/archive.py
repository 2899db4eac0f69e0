"""The backup archive, as pure functions: what a backup takes, what it keeps of an object, how it is
written and read, and how an object compares with the live one.

An archive is one gzip-compressed multi-document YAML of sanitised objects in a stable order
(apply order of the kind, then namespace, then name), so two backups of the same state are
byte-identical. Its index (a small JSON object stored beside it) holds the sha256 of the archive
bytes, counts per kind, the tool version, the creation time, the cluster and Argo CD's namespace.
Every object names its namespace: Argo CD's own, or for Applications and ApplicationSets in other
namespaces (``application.namespaces`` / ``applicationsetcontroller.namespaces``) their own.

A plain ``argocd admin export`` file (not gzipped, no index; objects of Argo CD's namespace carry
no namespace, Applications keep ``status`` and ``operation``) is read by :func:`read_plain` and
sanitised exactly as our own objects are.

Nothing here does I/O. Secret values never leave these functions except inside the archive
bytes. Where a namespace pattern matches: :mod:`steps.kube.argocd_namespaces`; comparing an archived
object with the live one: :mod:`steps.argocd_backup.object_diff`.
"""

from __future__ import annotations

import base64
import copy
import gzip
import hashlib
import json
import logging
import zlib
from collections import Counter
from datetime import datetime
from typing import Any

import yaml

from steps.domain.errors import ConfigError
from steps.kube.api import RESOURCES
from steps.kube.argocd_namespaces import CMD_PARAMS_CONFIG_MAP, is_literal

log = logging.getLogger(__name__)

#: The index's ``format``: which selection rules made the archive (restore's ``--prune`` deletes
#: only what the archive's producer would have taken: :func:`steps.argocd_backup.restore_plan.prune_scope`).
#: v1: five secret types by value, Argo CD's namespace only; v2: every secret-type label, the
#: managed-by annotation, part-of Secrets, Applications/ApplicationSets of the enabled namespaces;
#: v3: v2 plus the Secrets argocd-cm's legacy repository keys reference.
FORMAT_V1 = "imagebump.argocd-backup/v1"
FORMAT_V2 = "imagebump.argocd-backup/v2"
FORMAT = "imagebump.argocd-backup/v3"

# --- What a backup takes (upstream facts; argo-cd v3.5.1, same in v2.14.21) -------------------
#: Label every Argo CD repository/credential/cluster Secret carries (common/common.go
#: LabelKeySecretType). A backup takes a Secret with this label WHATEVER its value, as
#: `argocd admin export` does (cmd/argocd/commands/admin/admin.go isArgoCDSecret).
SECRET_TYPE_LABEL = "argocd.argoproj.io/secret-type"
#: The values Argo CD itself writes today (common/common.go LabelValueSecretType*). Informational:
#: selection does not depend on them, so a future type is backed up too.
SECRET_TYPES = ("cluster", "repository", "repo-creds", "repository-write", "repo-write-creds", "scm-creds")
#: Secrets Argo CD created through its API carry this annotation (util/db/secrets.go
#: addSecretMetadata); isArgoCDSecret takes them even without the label.
MANAGED_BY_ANNOTATION = "managed-by"
MANAGED_BY_ARGOCD = "argocd.argoproj.io"
#: Secrets that argocd-cm / argocd-notifications-cm reference as ``$name:key`` must carry this
#: label (Argo CD refuses to read others); upstream's export misses them, we take them.
PART_OF_LABEL = "app.kubernetes.io/part-of"
PART_OF_ARGOCD = "argocd"
ARGOCD_SECRET = "argocd-secret"
#: argocd-cm keys of the legacy (argo-cd 2.x) repository settings, and the fields of each entry
#: that name a Secret (``{name, key}``). Upstream's export takes the Secrets the first five name
#: (cmd/argocd/commands/admin/admin.go getReferencedSecrets, v2.14.21; gone in v3, with the legacy
#: keys); Argo CD 2.x also reads the last two (util/db/repository_legacy.go,
#: util/settings/settings.go Repository), so we take those too.
LEGACY_REPOSITORY_KEYS = ("repositories", "repository.credentials")
LEGACY_SECRET_FIELDS = ("usernameSecret", "passwordSecret", "sshPrivateKeySecret", "tlsClientCertDataSecret")
LEGACY_SECRET_FIELDS += ("tlsClientCertKeySecret", "githubAppPrivateKeySecret", "gcpServiceAccountKey")
#: Secrets taken by name (argocd-secret: isArgoCDSecret; the notifications secret: ours).
NAMED_SECRETS = (ARGOCD_SECRET, "argocd-notifications-secret")
CONFIG_MAPS = (
    "argocd-cm",
    "argocd-rbac-cm",
    CMD_PARAMS_CONFIG_MAP,
    "argocd-ssh-known-hosts-cm",
    "argocd-tls-certs-cm",
    "argocd-gpg-keys-cm",
    "argocd-notifications-cm",
)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

#: Kinds a restore with ``--prune`` deletes when the archive lacks them, in deletion order:
#: ApplicationSets first (so none re-creates an Application being pruned), then Applications,
#: AppProjects, Secrets. ConfigMaps are never pruned (upstream's import refuses to, too).
PRUNE_ORDER = ("ApplicationSet", "Application", "AppProject", "Secret")

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
Key = tuple[str, str, str]  # kind, namespace, name


def key(obj: dict[str, Any]) -> Key:
    """``(kind, namespace, name)``: what identifies an object in an archive and on a cluster."""
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", "")))


def show(k: Key) -> str:
    """``Application/app-1 -n team-a``: one object, as a person reads it."""
    kind, namespace, name = k
    return f"{kind}/{name} -n {namespace}" if namespace else f"{kind}/{name}"


# --- selection ----------------------------------------------------------------------------------
def referenced_secrets(argocd_cm: dict[str, Any] | None) -> frozenset[str]:
    """Names of the Secrets ``argocd-cm``'s legacy ``repositories`` / ``repository.credentials``
    entries reference (:data:`LEGACY_SECRET_FIELDS`); empty without those keys.

    A value that is not a YAML list of mappings references nothing (logged): Argo CD could not read
    it either, and the rest of the backup is still worth taking.
    """
    data = (argocd_cm or {}).get("data") or {}
    names: set[str] = set()
    for setting in LEGACY_REPOSITORY_KEYS:
        if not data.get(setting):
            continue
        try:
            entries = yaml.safe_load(str(data[setting]))
        except yaml.YAMLError:
            entries = None
        if not isinstance(entries, list):
            log.warning("argocd-cm %s is not a YAML list; the Secrets it names are not followed", setting)
            continue
        for entry in (e for e in entries if isinstance(e, dict)):
            for ref in (entry.get(f) for f in LEGACY_SECRET_FIELDS):
                if isinstance(ref, dict) and isinstance(ref.get("name"), str) and ref["name"]:
                    names.add(ref["name"])
    return frozenset(names)


def is_upstream_secret(obj: dict[str, Any]) -> bool:
    """The rule every ``argocd admin export`` shares (admin.go isArgoCDSecret, v2.14.21 and v3.5.1):
    ``argocd-secret``, any ``argocd.argoproj.io/secret-type`` label, or the annotation ``managed-by:
    argocd.argoproj.io``. (v2.14 also takes the Secrets argocd-cm's legacy keys reference.)"""
    meta = obj.get("metadata") or {}
    return (
        meta.get("name") == ARGOCD_SECRET
        or SECRET_TYPE_LABEL in (meta.get("labels") or {})
        or (meta.get("annotations") or {}).get(MANAGED_BY_ANNOTATION) == MANAGED_BY_ARGOCD
    )


def is_argocd_secret(obj: dict[str, Any], referenced: frozenset[str] | set[str] = frozenset()) -> bool:
    """Whether a Secret of Argo CD's namespace belongs in a backup (upstream's rule, and more).

    Upstream's (:func:`is_upstream_secret`), the Secrets named in ``referenced`` (argocd-cm's legacy
    repository keys: :func:`referenced_secrets`, as v2.14's export), and ours: Secrets labelled
    ``app.kubernetes.io/part-of: argocd`` and ``argocd-notifications-secret``.
    """
    meta = obj.get("metadata") or {}
    return (
        is_upstream_secret(obj)
        or meta.get("name") in NAMED_SECRETS
        or meta.get("name") in referenced
        or (meta.get("labels") or {}).get(PART_OF_LABEL) == PART_OF_ARGOCD
    )


# --- sanitising -----------------------------------------------------------------------------------
def sanitise(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` without what the API server or a controller populates.

    Removed: ``status`` (except an AppProject's ``status.jwtTokensByRole``, which project token
    checks read: util/session/sessionmanager.go Parse → AppProject.GetJWTToken), an Application's
    ``operation`` (a restored in-flight sync would start a sync), uid, resourceVersion,
    managedFields, ownerReferences and the rest of :data:`_SERVER_METADATA`, and kubectl's
    last-applied annotation (it holds a copy of the whole object, Secret values included). A
    Secret's ``stringData`` is folded into ``data`` as the API server does.
    """
    clean = copy.deepcopy(obj)
    status = clean.pop("status", None)
    kind = clean.get("kind")
    if kind == "AppProject" and isinstance(status, dict) and status.get("jwtTokensByRole"):
        clean["status"] = {"jwtTokensByRole": status["jwtTokensByRole"]}
    if kind == "Application":
        clean.pop("operation", None)
    if kind == "Secret" and isinstance(clean.get("stringData"), dict):
        data = dict(clean.get("data") or {})
        for k, v in clean.pop("stringData").items():
            data[k] = base64.b64encode(str(v).encode("utf-8")).decode("ascii")
        clean["data"] = data
    metadata = clean.get("metadata") or {}
    for name in _SERVER_METADATA:
        metadata.pop(name, None)
    annotations = metadata.get("annotations")
    if annotations is not None:
        annotations.pop(LAST_APPLIED, None)
        if not annotations:
            metadata.pop("annotations")
    for name in ("labels", "finalizers"):
        if name in metadata and not metadata[name]:
            metadata.pop(name)
    clean["metadata"] = metadata
    return clean


def with_project_tokens(obj: dict[str, Any]) -> dict[str, Any]:
    """An AppProject whose ``status.jwtTokensByRole`` holds every token its roles list in spec.

    Token checks read only the status (AppProject.GetJWTToken); argocd-server copies spec tokens
    into it only at start-up (server/project/project.go NormalizeProjs →
    app_project_types.go syncJWTTokenBetweenStatusAndSpec). An archive made before status was kept,
    or a hand-made one, would otherwise restore projects whose tokens are refused until a restart.
    Unchanged when nothing is missing; other kinds are returned as they are.
    """
    if obj.get("kind") != "AppProject":
        return obj
    roles = [r for r in ((obj.get("spec") or {}).get("roles") or []) if isinstance(r, dict)]
    out = copy.deepcopy(obj)
    by_role = ((out.get("status") or {}).get("jwtTokensByRole")) or {}
    changed = False
    for role in roles:
        spec_tokens = [t for t in role.get("jwtTokens") or [] if isinstance(t, dict)]
        if not spec_tokens:
            continue
        items = list((by_role.get(role.get("name")) or {}).get("items") or [])
        ids = {str(t.get("id") or t.get("iat")) for t in items}
        for token in spec_tokens:
            if str(token.get("id") or token.get("iat")) not in ids:
                items.append(copy.deepcopy(token))
                changed = True
        by_role[role.get("name")] = {"items": sorted(items, key=lambda t: -int(t.get("iat") or 0))}
    if not changed:
        return obj
    out.setdefault("status", {})["jwtTokensByRole"] = by_role
    return out


def sort_key(obj: dict[str, Any]) -> tuple[int, str, str, str]:
    """Apply order of the kind (ConfigMap, Secret, AppProject, ApplicationSet, Application), then
    namespace, then name."""
    kind, namespace, name = key(obj)
    return (_KIND_ORDER.get(kind, len(_KIND_ORDER)), kind, namespace, name)


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


def is_gzip(data: bytes) -> bool:
    return data[:2] == b"\x1f\x8b"


def read_archive(data: bytes, source: str) -> list[dict[str, Any]]:
    """Objects of one of our archives; ConfigError naming ``source`` for bad gzip, YAML or objects."""
    try:
        text = gzip.decompress(data).decode("utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"archive {source} is corrupt: not a readable gzip file ({exc}); nothing was applied"
        ) from None
    return _documents(text, f"archive {source} is corrupt")


def read_plain(data: bytes, source: str) -> list[dict[str, Any]]:
    """Objects of a plain ``argocd admin export`` file (multi-document YAML), sanitised."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(
            f"{source} is neither a gzip'd imagebump archive nor a plain `argocd admin export` YAML file "
            "(not UTF-8 text); nothing was applied"
        ) from None
    what = f"{source} is not a plain `argocd admin export` file"
    return [sanitise(doc) for doc in _documents(text, what)]


def _documents(text: str, what: str) -> list[dict[str, Any]]:
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{what}: invalid YAML{where}; nothing was applied") from None
    seen: set[Key] = set()
    for i, doc in enumerate(documents):
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        kind = doc.get("kind") if isinstance(doc, dict) else None
        if kind not in RESOURCES or not isinstance(name, str) or not name:
            raise ConfigError(
                f"{what}: document {i + 1} is not a ConfigMap, Secret, AppProject, ApplicationSet or "
                "Application with a name; nothing was applied"
            )
        if doc.get("apiVersion") != RESOURCES[kind].api_version:
            raise ConfigError(
                f"{what}: document {i + 1} ({kind}/{name}) has apiVersion {doc.get('apiVersion')!r}, "
                f"expected {RESOURCES[kind].api_version}; nothing was applied"
            )
        namespace = meta.get("namespace")
        if namespace is not None and not (isinstance(namespace, str) and is_literal(namespace)):
            raise ConfigError(
                f"{what}: document {i + 1} ({kind}/{name}) has an invalid namespace; nothing was applied"
            )
        k = key(doc)
        if k in seen:
            raise ConfigError(f"{what}: {show(k)} appears twice; nothing was applied")
        seen.add(k)
    return documents


def retarget(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A copy of ``obj`` placed in ``namespace`` (only metadata.namespace; spec untouched)."""
    moved = copy.deepcopy(obj)
    moved.setdefault("metadata", {})["namespace"] = namespace
    return moved

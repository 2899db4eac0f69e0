"""The live Argo CD objects a backup takes, read through the Kubernetes seam (:mod:`steps.kube.api`).

:func:`collect_live` is the *gather* of backup-export (what goes into an archive) and of restore
(which live objects an archive lacks, for ``--prune``): ConfigMaps by name, Argo CD's Secrets from
one paged list (filtered by :func:`steps.argocd_backup.archive.is_argocd_secret`), AppProjects, and
Applications / ApplicationSets of Argo CD's namespace plus every namespace ``argocd-cmd-params-cm``
enables (:mod:`steps.kube.argocd_namespaces`: plain names are listed one namespace at a time, a pattern
needs one cluster-wide list). A namespace it may not read fails with the grant to add, never a
silently partial result. Imports :mod:`steps.kube.api`, :mod:`steps.argocd_backup.archive`,
:mod:`steps.kube.argocd_namespaces` and :mod:`steps.domain.errors`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import quote

from steps.argocd_backup import archive
from steps.domain.errors import PermissionDeniedError
from steps.kube import api as kube
from steps.kube import argocd_namespaces as namespaces

log = logging.getLogger(__name__)

#: The ClusterRole (get/list of applications and applicationsets only) the README's overlay adds:
#: bound per namespace by a RoleBinding, or cluster-wide when the namespace settings hold patterns.
APP_READER_ROLE = "imagebump-backup-app-reader"
_README = "docs/backup-restore.md"


@dataclass(frozen=True)
class _ClusterScoped(kube.Resource):
    """A cluster-scoped core resource: ``/api/v1/PLURAL/NAME`` (:class:`steps.kube.api.Resource` paths
    are namespaced); only what :func:`namespace_exists` reads."""

    def path(self, namespace: str | None, name: str | None = None) -> str:
        return f"/api/v1/{self.plural}/{quote(name, safe='')}" if name else f"/api/v1/{self.plural}"


NAMESPACE = _ClusterScoped("Namespace", "v1", "namespaces")


def namespace_exists(api: kube.KubeApi, name: str) -> bool | None:
    """Whether namespace ``name`` exists; None when reading it is forbidden (cannot tell).

    A restore checks the namespaces it writes into before the first write: the API server refuses a
    create in a missing namespace (404 ``namespaces "X" not found``), after the objects before it
    were already written.
    """
    found = namespace_status(api, name)
    return None if found is None else found != "missing"


def namespace_status(api: kube.KubeApi, name: str) -> str | None:
    """``missing``, ``terminating`` (being deleted: the API server refuses new objects in it, its
    NamespaceLifecycle admission) or ``active``; None when reading it is forbidden (cannot tell)."""
    try:
        found = api.get(NAMESPACE, "", name)
    except PermissionDeniedError:
        log.warning("may not read namespace %s; cannot check that it exists", name)
        return None
    if found is None:
        return "missing"
    meta, status = found.get("metadata") or {}, found.get("status") or {}
    return (
        "terminating" if meta.get("deletionTimestamp") or status.get("phase") == "Terminating" else "active"
    )


def collect_live(
    api: kube.KubeApi,
    namespace: str,
    *,
    page_size: int = kube.DEFAULT_PAGE_SIZE,
    kinds: tuple[str, ...] = tuple(kube.RESOURCES),
    cmd_params: dict | None = None,
    argocd_cm: dict | None = None,
) -> list[dict]:
    """The live Argo CD objects of ``kinds`` a backup takes, as the API server returns them.

    ``cmd_params`` (an argocd-cmd-params-cm) decides the other namespaces of Applications and
    ApplicationSets, ``argocd_cm`` the Secrets its legacy repository keys reference
    (:func:`steps.argocd_backup.archive.referenced_secrets`); by default the live ones are read. Restore uses this
    to find what ``--prune`` may delete, with the archive's ConfigMaps.
    """
    found: list[dict] = []
    read: dict[str, dict | None] = {}
    wanted = {
        archive.CMD_PARAMS_CONFIG_MAP: cmd_params is None
        and bool({"Application", "ApplicationSet"} & set(kinds)),
        "argocd-cm": argocd_cm is None and "Secret" in kinds,
    }
    for name in archive.CONFIG_MAPS:
        if "ConfigMap" not in kinds and not wanted.get(name):
            continue
        obj = read[name] = api.get(kube.CONFIG_MAP, namespace, name)
        if obj is None:
            log.info("ConfigMap %s/%s not present; not in this backup", namespace, name)
        elif "ConfigMap" in kinds:
            found.append(obj)
    params = cmd_params if cmd_params is not None else read.get(archive.CMD_PARAMS_CONFIG_MAP)
    if "Secret" in kinds:
        referenced = archive.referenced_secrets(argocd_cm if argocd_cm is not None else read.get("argocd-cm"))
        found.extend(
            o
            for o in kube.list_all(api, kube.SECRET, namespace, page_size=page_size)
            if archive.is_argocd_secret(o, referenced)
        )
    if "AppProject" in kinds:
        found.extend(kube.list_all(api, kube.APP_PROJECT, namespace, page_size=page_size))
    for resource, setting in (
        (kube.APPLICATION_SET, namespaces.APPLICATIONSET_NAMESPACES_KEY),
        (kube.APPLICATION, namespaces.APPLICATION_NAMESPACES_KEY),
    ):
        if resource.kind in kinds:
            patterns = namespaces.namespace_patterns(params, setting)
            found.extend(_list_enabled(api, resource, namespace, patterns, setting, page_size))
    return found


def _list_enabled(
    api: kube.KubeApi,
    resource: kube.Resource,
    namespace: str,
    patterns: list[str],
    setting: str,
    page_size: int,
) -> list[dict]:
    """``resource`` in Argo CD's namespace and every namespace ``patterns`` enable."""
    if all(namespaces.is_literal(p) for p in patterns):
        out: list[dict] = []
        for ns in dict.fromkeys([namespace, *patterns]):
            try:
                out.extend(kube.list_all(api, resource, ns, page_size=page_size))
            except PermissionDeniedError as exc:
                if ns == namespace:
                    raise
                raise PermissionDeniedError(
                    f"{exc}. {setting} in {archive.CMD_PARAMS_CONFIG_MAP} has Argo CD manage "
                    f"{resource.plural} in namespace {ns}; for the backup-export step bind ClusterRole "
                    f"{APP_READER_ROLE} there with a RoleBinding ({_README})"
                ) from None
        return out
    try:
        every = list(kube.list_all(api, resource, None, page_size=page_size))
    except PermissionDeniedError as exc:
        shown = ", ".join(p for p in patterns if not namespaces.is_literal(p))
        raise PermissionDeniedError(
            f"{exc}. {setting} in {archive.CMD_PARAMS_CONFIG_MAP} holds patterns ({shown}), which RBAC "
            f"cannot grant namespace by namespace: bind ClusterRole {APP_READER_ROLE} (get/list of "
            f"applications and applicationsets, nothing else) with a ClusterRoleBinding, or list the "
            f"namespaces by name and bind it with a RoleBinding in each ({_README})"
        ) from None
    return [
        o
        for o in every
        if namespaces.namespace_enabled(
            (o.get("metadata") or {}).get("namespace") or "", namespace, patterns, setting=setting
        )
    ]

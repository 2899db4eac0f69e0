"""Argo CD through the Kubernetes API: which Applications deploy an overlay, and asking for a refresh.

Reads Applications (get/list) in Argo CD's namespace and in every namespace ``application.namespaces``
of ``argocd-cmd-params-cm`` enables (:mod:`steps.kube.argocd_namespaces`: plain names are listed one
namespace at a time, a pattern needs one cluster-wide list), and that ConfigMap by name. Writes one
thing: the annotation ``argocd.argoproj.io/refresh: normal`` on the Applications found (a JSON merge
patch of that key only), which Argo CD's application controller removes once it has refreshed the
Application from Git (argo-cd ``pkg/apis/application/v1alpha1/application_annotations.go``).
Imports :mod:`steps.kube.api`, :mod:`steps.kube.argocd_namespaces` and :mod:`steps.domain.errors`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from steps.domain.errors import PermissionDeniedError
from steps.kube import api as kube
from steps.kube import argocd_namespaces as namespaces

log = logging.getLogger(__name__)

REFRESH_ANNOTATION = "argocd.argoproj.io/refresh"
#: Argo CD's ``application.namespaces`` as verify-live should read it (its Role reads no ConfigMap).
APPLICATION_NAMESPACES_ENV = "IMAGEBUMP_ARGOCD_APPLICATION_NAMESPACES"
#: Argo CD's namespace; ``IMAGEBUMP_ARGOCD_NAMESPACE`` (the imagebump-env ConfigMap) overrides it.
DEFAULT_NAMESPACE = "argocd"


def argocd_namespace(environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    return environ.get("IMAGEBUMP_ARGOCD_NAMESPACE") or DEFAULT_NAMESPACE


@dataclass(frozen=True)
class Deployment:
    """One Application deploying the overlay: where, and which of its sources (None: ``spec.source``)."""

    namespace: str
    name: str
    source_index: int | None

    @property
    def display(self) -> str:
        return f"{self.namespace}/{self.name}"


_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>(?!//).+)$")


def normalise_repo_url(url: str) -> str:
    """``host[:port]/owner/repo`` in lower case, whatever the spelling Argo CD was given.

    ``https://GitHub.com/Org/Repo.git/``, ``ssh://git@github.com/org/repo`` and
    ``git@github.com:org/repo.git`` all read ``github.com/org/repo``. An ssh port is dropped (it
    is never the https one); an http(s) port is kept.
    """
    text = url.strip().rstrip("/")
    match = re.match(r"^(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<rest>.*)$", text, re.IGNORECASE)
    if match:
        scheme, rest = match.group("scheme").lower(), match.group("rest")
        authority, _, path = rest.partition("/")
        host = authority.rpartition("@")[2]
        if scheme.startswith("ssh") or scheme.startswith("git"):
            host = host.split(":", 1)[0]
    else:
        scp = _SCP_LIKE.match(text)
        if not scp:
            return text.lower().removesuffix(".git")
        host, path = scp.group("host"), scp.group("path")
    path = path.strip("/").removesuffix(".git").rstrip("/")
    return f"{host}/{path}".lower()


def normalise_path(path: str) -> str:
    """``./overlays/prod/`` → ``overlays/prod``; the repository root is ``""``."""
    parts = [p for p in str(path or "").replace("\\", "/").split("/") if p not in ("", ".")]
    return "/".join(parts)


def follows_branch(target_revision: str, branch: str, default_branch: bool) -> bool:
    """Does ``targetRevision`` track ``branch``? ``HEAD`` and empty track the default branch."""
    revision = (target_revision or "").strip()
    if revision in ("", "HEAD"):
        return default_branch
    return revision in (branch, f"refs/heads/{branch}")


def sources(app: dict[str, Any]) -> list[tuple[int | None, dict[str, Any]]]:
    """``spec.sources[]`` with their index when set (multi-source), else ``spec.source`` (index None)."""
    spec = app.get("spec") or {}
    many = spec.get("sources")
    if isinstance(many, list) and many:
        return [(i, s) for i, s in enumerate(many) if isinstance(s, dict)]
    single = spec.get("source")
    return [(None, single)] if isinstance(single, dict) else []


def deploys(
    app: dict[str, Any], repo_url: str, path: str, branch: str, default_branch: bool
) -> int | None | bool:
    """The index of the source deploying ``repo_url``/``path`` at ``branch`` (None for
    ``spec.source``), or False when none does."""
    want_repo, want_path = normalise_repo_url(repo_url), normalise_path(path)
    for index, source in sources(app):
        if (
            normalise_repo_url(str(source.get("repoURL") or "")) == want_repo
            and normalise_path(str(source.get("path") or "")) == want_path
            and follows_branch(str(source.get("targetRevision") or ""), branch, default_branch)
        ):
            return index
    return False


def deploys_file(
    app: dict[str, Any], repo_url: str, file: str, branch: str, default_branch: bool
) -> int | None | bool:
    """The index of the source through which the Application deploys the Helm values file (or
    helmfile) ``file`` of ``repo_url`` at ``branch`` (None for ``spec.source``), or False (issue 34).

    It does when a source of that repository and branch has the file inside its ``path`` (a Helm
    chart's own values, a helmfile plugin's directory), or a Helm source names it in
    ``helm.valueFiles`` — relative to its ``path``, or ``$ref/…`` through a ``ref:`` source of the
    repository (the chart from a Helm repository, the values from Git: that ``ref`` source's
    revision is the one to compare).
    """
    want_repo, want_file = normalise_repo_url(repo_url), normalise_path(file)
    ours = {
        index: source
        for index, source in sources(app)
        if normalise_repo_url(str(source.get("repoURL") or "")) == want_repo
        and follows_branch(str(source.get("targetRevision") or ""), branch, default_branch)
    }
    refs = {str(s["ref"]): i for i, s in ours.items() if s.get("ref")}
    for index, source in sources(app):
        path = normalise_path(str(source.get("path") or ""))
        if (
            index in ours
            and source.get("path") is not None
            and (not path or want_file.startswith(path + "/"))
        ):
            return index
        helm = source.get("helm") if isinstance(source.get("helm"), dict) else {}
        for value_file in helm.get("valueFiles") or []:
            text = str(value_file)
            if text.startswith("$"):
                ref, _, rest = text[1:].partition("/")
                if ref in refs and normalise_path(rest) == want_file:
                    return refs[ref]
            elif index in ours and _joined(path, text) == want_file:
                return index
    return False


def _joined(path: str, relative: str) -> str:
    import posixpath

    return normalise_path(posixpath.normpath(posixpath.join(path or ".", relative)))


def application_namespaces(api: kube.KubeApi, argocd_ns: str) -> tuple[list[str], list[str]]:
    """(plain namespace names, patterns) where Argo CD manages Applications besides its own.

    The setting ``IMAGEBUMP_ARGOCD_APPLICATION_NAMESPACES`` (Argo CD's ``application.namespaces``
    value, comma-separated names or patterns) when given: verify-live's rendered Role reads no
    ConfigMap. Without it, ``argocd-cmd-params-cm`` is read; when that is forbidden (the rendered
    rights), only Argo CD's namespace is searched, and the log names the setting.
    """
    configured = os.environ.get(APPLICATION_NAMESPACES_ENV)
    if configured is not None:
        patterns = namespaces.namespace_patterns(
            {"data": {namespaces.APPLICATION_NAMESPACES_KEY: configured}},
            namespaces.APPLICATION_NAMESPACES_KEY,
        )
        literal = [p for p in patterns if namespaces.is_literal(p) and p != argocd_ns]
        return literal, [p for p in patterns if not namespaces.is_literal(p)]
    try:
        cmd_params = api.get(kube.CONFIG_MAP, argocd_ns, namespaces.CMD_PARAMS_CONFIG_MAP)
    except PermissionDeniedError as exc:
        log.warning(
            "%s; only Applications in %s are looked at (set %s to Argo CD's application.namespaces to "
            "look in the namespaces it enables)",
            exc,
            argocd_ns,
            APPLICATION_NAMESPACES_ENV,
        )
        return [], []
    patterns = namespaces.namespace_patterns(cmd_params, namespaces.APPLICATION_NAMESPACES_KEY)
    literal = [p for p in patterns if namespaces.is_literal(p) and p != argocd_ns]
    return literal, [p for p in patterns if not namespaces.is_literal(p)]


def find(
    api: kube.KubeApi,
    argocd_ns: str,
    repo_url: str,
    path: str,
    branch: str,
    default_branch: bool,
    file: str | None = None,
) -> list[tuple[Deployment, dict[str, Any]]]:
    """Every Application (Argo CD's namespace and those it enables) deploying the overlay at ``branch``
    (``file``: a Helm values file or helmfile, :func:`deploys_file`)."""
    literal, patterns = application_namespaces(api, argocd_ns)
    apps: list[dict[str, Any]] = []
    if patterns:  # a pattern cannot be listed namespace by namespace: one list over the cluster
        apps = [
            a
            for a in kube.list_all(api, kube.APPLICATION, None)
            if namespaces.namespace_enabled(
                (a.get("metadata") or {}).get("namespace", ""),
                argocd_ns,
                [*literal, *patterns],
                setting=namespaces.APPLICATION_NAMESPACES_KEY,
            )
        ]
    else:
        for ns in [argocd_ns, *literal]:
            apps.extend(kube.list_all(api, kube.APPLICATION, ns))
    found = []
    for app in apps:
        if file is not None:
            index = deploys_file(app, repo_url, file, branch, default_branch)
        else:
            index = deploys(app, repo_url, path, branch, default_branch)
        if index is not False:
            meta = app.get("metadata") or {}
            found.append((Deployment(meta.get("namespace", ""), meta.get("name", ""), index), app))
    return sorted(found, key=lambda pair: pair[0].display)


def refresh(api: kube.KubeApi, deployment: Deployment) -> None:
    """Ask Argo CD to refresh the Application from Git now (its annotation; nothing else written)."""
    api.patch(
        kube.APPLICATION,
        deployment.namespace,
        deployment.name,
        {"metadata": {"annotations": {REFRESH_ANNOTATION: "normal"}}},
    )


def get(api: kube.KubeApi, deployment: Deployment) -> dict[str, Any] | None:
    return api.get(kube.APPLICATION, deployment.namespace, deployment.name)


def configured(environ: Mapping[str, str] | None = None) -> bool:
    """Is there an Argo CD to reach: a pod's ServiceAccount, or a kubeconfig context given locally?"""
    environ = os.environ if environ is None else environ
    return bool(environ.get("KUBERNETES_SERVICE_HOST") or environ.get("IMAGEBUMP_ARGOCD_CONTEXT"))


#: Why push → live is off on this machine (the result ``off``: never on a cluster).
NOT_CONFIGURED = (
    "push → live is off: not in a cluster and no kubeconfig context given "
    "(imagebump run --local / imagebump reconcile --argocd-context CTX)"
)


def connect(context: str | None = None) -> kube.KubeApi:
    """The Kubernetes API: in a pod its ServiceAccount; with ``context`` (or
    ``IMAGEBUMP_ARGOCD_CONTEXT``) that kubeconfig context (``KUBECONFIG`` or ``~/.kube/config``)."""
    from steps.kube.client import KubernetesApi

    context = context or os.environ.get("IMAGEBUMP_ARGOCD_CONTEXT") or None
    return KubernetesApi.from_config(context=context)

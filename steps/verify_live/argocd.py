"""Argo CD: which Applications deploy an overlay (the Kubernetes API, read only), and asking for a
refresh (Argo CD's own API server, or not at all).

Reads Applications (get/list) in Argo CD's namespace and in every namespace ``application.namespaces``
enables (:mod:`steps.kube.argocd_namespaces`: plain names are listed one namespace at a time, a
pattern needs one cluster-wide list), and ``argocd-cmd-params-cm`` by name unless the setting
``IMAGEBUMP_ARGOCD_APPLICATION_NAMESPACES`` gives its value. Writes nothing to the Kubernetes API:
imagebump holds no write right on any Application.

A refresh, by the setting ``IMAGEBUMP_ARGOCD_REFRESH``: ``none`` (the default; Argo CD's Git webhook
or its poll refreshes) or ``api``: ``GET {IMAGEBUMP_ARGOCD_SERVER}/api/v1/applications/{name}?
refresh=normal&appNamespace={ns}`` with the Argo CD account token ``IMAGEBUMP_ARGOCD_TOKEN[_FILE]``.
Argo CD's API server answers it for an account holding only ``applications, get``: it sets the
refresh annotation itself and answers once its controller has refreshed (argo-cd
``server/application/application.go``, ``Server.Get``; ``util/argo/argo.go``, ``RefreshApp``).
Imports :mod:`steps.kube.api`, :mod:`steps.kube.argocd_namespaces`, :mod:`steps.runtime.settings`
and :mod:`steps.domain.errors`.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import re2

from steps.domain.errors import ConfigError, PermissionDeniedError
from steps.kube import api as kube
from steps.kube import argocd_namespaces as namespaces
from steps.runtime import settings

log = logging.getLogger(__name__)

#: How verify-live asks Argo CD to refresh: ``none`` (default) or ``api`` (Argo CD's API server).
REFRESH_ENV = "IMAGEBUMP_ARGOCD_REFRESH"
REFRESH_NONE, REFRESH_API = "none", "api"
#: Argo CD's API server, e.g. ``https://argocd-server.argocd.svc`` (with ``api``).
SERVER_ENV = "IMAGEBUMP_ARGOCD_SERVER"
#: The Argo CD account's token (``…_FILE``: the Secret ``imagebump-argocd`` mounted), with ``api``.
TOKEN_ENV = "IMAGEBUMP_ARGOCD_TOKEN"
#: Optional CA bundle for the API server's certificate (default: the system's).
CA_FILE_ENV = "IMAGEBUMP_ARGOCD_CA_FILE"
#: Seconds one refresh call may take (Argo CD answers once its controller refreshed).
REFRESH_TIMEOUT_SECONDS = 30.0
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

    It does when a source of that repository and branch has the file inside its ``path`` (a
    helmfile plugin's directory, a kustomization's helmCharts), or a Helm source names it in
    ``helm.valueFiles`` — relative to its ``path``, or ``$ref/…`` through a ``ref:`` source of the
    repository (the chart from a Helm repository, the values from Git: that ``ref`` source's
    revision is the one to compare). A Helm source (``helm:`` or ``chart:`` in its spec, or
    ``Helm`` in the Application's ``status.sourceType(s)``) reads of its own directory only the
    chart's ``values.yaml``: ``values-prod.yaml`` beside it is deployed by the Applications that
    list it, not by every Application of the chart (a staging Application would otherwise be waited
    for, and alarmed about, for production's file). ``valueFiles`` are read as Argo CD's repo server
    reads them (``reposerver/repository/repository.go`` ``getResolvedValueFiles``): its build
    variables substituted (``$ARGOCD_APP_NAME``, ``${ARGOCD_APP_NAMESPACE}``, …; ``newEnv``), and
    ``*``, ``?`` and ``[…]`` as globs.
    """
    want_repo, want_file = normalise_repo_url(repo_url), normalise_path(file)
    ours = {
        index: source
        for index, source in sources(app)
        if normalise_repo_url(str(source.get("repoURL") or "")) == want_repo
        and follows_branch(str(source.get("targetRevision") or ""), branch, default_branch)
    }
    refs = {str(s["ref"]): i for i, s in ours.items() if s.get("ref")}
    named = {str(s["ref"]) for _, s in sources(app) if s.get("ref")}  # any repository's
    for index, source in sources(app):
        path = normalise_path(str(source.get("path") or ""))
        inside = source.get("path") is not None and (not path or want_file.startswith(path + "/"))
        if index in ours and inside:
            if not _is_helm(app, index, source) or want_file == _joined(path, "values.yaml"):
                return index
        helm = source.get("helm") if isinstance(source.get("helm"), dict) else {}
        env = _build_env(app, source)
        for value_file in helm.get("valueFiles") or []:
            text = str(value_file)
            ref, _, rest = text[1:].partition("/")
            if text.startswith("$") and ref in named and "/" in text:  # $ref/… (before any substitution)
                if ref in refs and _matches(normalise_path(_envsubst(rest, env)), want_file):
                    return refs[ref]
            elif index in ours and _matches(_joined(path, _envsubst(text, env)), want_file):
                return index
    return False


def _is_helm(app: dict[str, Any], index: int | None, source: dict[str, Any]) -> bool:
    """Whether Argo CD renders ``source`` with Helm: said in its spec, or found (a ``Chart.yaml``)
    and reported in ``status.sourceType`` (``status.sourceTypes[index]`` for multi-source)."""
    if isinstance(source.get("helm"), dict) or source.get("chart"):
        return True
    status = app.get("status") if isinstance(app.get("status"), dict) else {}
    if index is None:
        return status.get("sourceType") == "Helm"
    types = status.get("sourceTypes")
    return isinstance(types, list) and index < len(types) and types[index] == "Helm"


def _build_env(app: dict[str, Any], source: dict[str, Any]) -> dict[str, str]:
    """The build variables Argo CD substitutes in ``valueFiles`` (``newEnv``) that are known before
    a sync; ``ARGOCD_APP_REVISION*`` are not (they read as empty: such a file is not matched)."""
    meta = app.get("metadata") if isinstance(app.get("metadata"), dict) else {}
    spec = app.get("spec") if isinstance(app.get("spec"), dict) else {}
    destination = spec.get("destination") if isinstance(spec.get("destination"), dict) else {}
    return {
        "ARGOCD_APP_NAME": str(meta.get("name") or ""),
        "ARGOCD_APP_NAMESPACE": str(destination.get("namespace") or ""),
        "ARGOCD_APP_PROJECT_NAME": str(spec.get("project") or ""),
        "ARGOCD_APP_SOURCE_REPO_URL": str(source.get("repoURL") or ""),
        "ARGOCD_APP_SOURCE_PATH": str(source.get("path") or ""),
        "ARGOCD_APP_SOURCE_TARGET_REVISION": str(source.get("targetRevision") or ""),
    }


_EXPAND = re.compile(r"\$(?:\{([^}]*)\}|(\$)|([A-Za-z0-9_]+))")


def _envsubst(text: str, env: dict[str, str]) -> str:
    """Go's ``os.Expand`` as Argo CD's ``Env.Envsubst`` calls it: ``$NAME`` and ``${NAME}`` (an unknown
    name reads as empty), ``$$`` is ``$``."""
    return _EXPAND.sub(lambda m: "$" if m.group(2) else env.get(m.group(1) or m.group(3) or "", ""), text)


def _matches(pattern: str, file: str) -> bool:
    """``file`` is ``pattern``, or a match of it as a glob (``*``, ``?``, ``[…]``, ``\\x``; none crosses
    ``/``, as Go's ``filepath.Match``). A malformed glob (``[z-a]``, an open ``[``) matches nothing,
    as Argo CD then renders no manifests from that Application's file."""
    if not any(c in pattern for c in "*?[\\"):
        return pattern == file
    compiled = _glob(pattern)
    return compiled is not None and compiled.fullmatch(file) is not None


@functools.lru_cache(maxsize=128)
def _glob(pattern: str) -> Any:
    """``pattern`` (Go ``filepath.Match`` syntax) as an RE2 expression (linear in the path, whatever
    an Application's author wrote), or None when it is malformed."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\":
            if i + 1 >= n:
                return None
            i += 1
            out.append(_literal(pattern[i]))
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                return None
            body = pattern[i + 1 : end]
            negate = body.startswith("^")
            body = body[1:] if negate else body
            parts = []
            for low, dash, high in re.findall(r"(\\?.)(?:(-)(\\?.))?", body, re.DOTALL):
                low, high = low[-1], high[-1:] if dash else ""
                if dash and high < low:
                    return None
                parts.append(_literal(low) + (f"-{_literal(high)}" if dash else ""))
            out.append("[" + ("^/" if negate else "") + "".join(parts) + "]")
            i = end
        else:
            out.append(_literal(c))
        i += 1
    try:
        return re2.compile("".join(out))
    except re2.error:
        return None


def _literal(c: str) -> str:
    """One character as RE2 reads it literally (in a class too)."""
    return c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}"


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


def list_applications(api: kube.KubeApi, argocd_ns: str) -> list[dict[str, Any]]:
    """Every Application in Argo CD's namespace and those it enables: one list per namespace searched
    (one cluster-wide list with a pattern), whatever the number of overlays asked about."""
    literal, patterns = application_namespaces(api, argocd_ns)
    if patterns:  # a pattern cannot be listed namespace by namespace: one list over the cluster
        return [
            a
            for a in kube.list_all(api, kube.APPLICATION, None)
            if namespaces.namespace_enabled(
                _namespace_of(a),
                argocd_ns,
                [*literal, *patterns],
                setting=namespaces.APPLICATION_NAMESPACES_KEY,
            )
        ]
    apps: list[dict[str, Any]] = []
    for ns in [argocd_ns, *literal]:
        apps.extend(kube.list_all(api, kube.APPLICATION, ns))
    return apps


def _namespace_of(app: dict[str, Any]) -> str:
    meta = app.get("metadata")
    return str(meta.get("namespace", "")) if isinstance(meta, dict) else ""


def select(
    apps: list[dict[str, Any]],
    repo_url: str,
    path: str,
    branch: str,
    default_branch: bool,
    file: str | None = None,
) -> list[tuple[Deployment, dict[str, Any]]]:
    """The Applications of ``apps`` deploying the overlay at ``branch`` (``file``: a Helm values file
    or helmfile, :func:`deploys_file`) (no I/O)."""
    found = []
    for app in apps:
        if not isinstance(app, dict) or not isinstance(app.get("spec") or {}, dict):
            continue
        if file is not None:
            index = deploys_file(app, repo_url, file, branch, default_branch)
        else:
            index = deploys(app, repo_url, path, branch, default_branch)
        if index is not False:
            meta = app.get("metadata") if isinstance(app.get("metadata"), dict) else {}
            found.append((Deployment(str(meta.get("namespace", "")), str(meta.get("name", "")), index), app))
    return sorted(found, key=lambda pair: pair[0].display)


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
    return select(list_applications(api, argocd_ns), repo_url, path, branch, default_branch, file=file)


@dataclass(frozen=True)
class Refresher:
    """How verify-live asks Argo CD to refresh an Application (:data:`REFRESH_ENV`)."""

    mode: str = REFRESH_NONE
    server: str = ""
    token: str = field(default="", repr=False)
    ca_file: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Refresher:
        """The settings, validated (before any I/O): ``api`` needs the server and the token."""
        environ = os.environ if environ is None else environ
        mode = settings.setting(REFRESH_ENV, REFRESH_NONE, environ).lower()
        if mode not in (REFRESH_NONE, REFRESH_API):
            raise ConfigError(
                f"{REFRESH_ENV}={mode[:40]!r}: expected {REFRESH_NONE} (Argo CD's webhook or poll refreshes) "
                f"or {REFRESH_API} (through Argo CD's API server)",
                field=REFRESH_ENV,
            )
        if mode == REFRESH_NONE:
            return cls()
        server = settings.setting(SERVER_ENV, "", environ).rstrip("/")
        if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", server):
            raise ConfigError(
                f"{REFRESH_ENV}=api needs {SERVER_ENV}, Argo CD's API server URL "
                "(e.g. https://argocd-server.argocd.svc)" + (f"; got {server[:80]!r}" if server else ""),
                field=SERVER_ENV,
            )
        token = settings.read_secret(
            TOKEN_ENV,
            environ,
            label="the Argo CD token file",
            absent_file_is_unset=True,
            fix="create the Secret imagebump-argocd (key token) with an Argo CD account's token",
        )
        if not token:
            raise ConfigError(
                f"{REFRESH_ENV}=api needs an Argo CD account token ({TOKEN_ENV} or {TOKEN_ENV}_FILE: the "
                "Secret imagebump-argocd, key token), an account allowed only 'applications, get'",
                field=TOKEN_ENV,
            )
        return cls(REFRESH_API, server, token, settings.setting(CA_FILE_ENV, "", environ))

    def refresh(self, deployment: Deployment) -> None:
        """Ask Argo CD to refresh ``deployment`` now (nothing with ``none``).

        Raises :class:`PermissionDeniedError` when Argo CD refuses the account (401/403); anything
        else (a timeout, a 5xx, no connection) is logged: Argo CD's own poll still refreshes.
        """
        if self.mode != REFRESH_API:
            return
        import http.client
        import ssl
        import urllib.error
        import urllib.parse
        import urllib.request

        query = urllib.parse.urlencode({"refresh": "normal", "appNamespace": deployment.namespace})
        url = f"{self.server}/api/v1/applications/{urllib.parse.quote(deployment.name, safe='')}?{query}"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"})
        context = ssl.create_default_context(cafile=self.ca_file or None) if url.startswith("https") else None
        try:
            with urllib.request.urlopen(request, timeout=REFRESH_TIMEOUT_SECONDS, context=context) as answer:
                answer.read(1 << 20)
        except urllib.error.HTTPError as exc:
            said = exc.read(300).decode("utf-8", "replace").strip()
            if exc.code in (401, 403):
                raise PermissionDeniedError(
                    f"Argo CD's API server ({self.server}) refused to refresh {deployment.display}: HTTP "
                    f"{exc.code} {said[:200]}; the account of {TOKEN_ENV} needs 'applications, get' on it "
                    f"(or set {REFRESH_ENV}=none)"
                ) from None
            log.warning(
                "refreshing %s through %s: HTTP %s %s", deployment.display, self.server, exc.code, said
            )
        except (OSError, ValueError, http.client.HTTPException) as exc:  # Argo CD's poll still refreshes
            log.warning("refreshing %s through %s failed: %s", deployment.display, self.server, exc)


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

"""The narrow Kubernetes seam backup-export and restore use: list (paged, one namespace or the
whole cluster), get, create, replace (update) and delete.

:class:`KubeApi` is the whole surface, keyed by :class:`Resource` (kind, apiVersion, plural).
A restore makes each object equal to the archive, so it creates (POST) what is missing and
replaces (PUT, with the live ``resourceVersion`` as precondition) what differs — never a
server-side apply, which would keep fields other managers own.
:class:`steps.kube.client.KubernetesApi` implements it over the official ``kubernetes`` client's ``ApiClient``
(its configuration, auth and TLS handling; in-cluster service account, else kubeconfig/context),
sending plain REST requests so every kind — core or custom — takes one code path and objects come
back as the API server's JSON, ``apiVersion``/``kind`` included.

API errors become our hierarchy (:func:`api_error`): 401/403 → :class:`PermissionDeniedError`
naming the verb, resource, namespace and the identity to grant it to; 404 → a missing namespace
(``namespaces "X" not found``), an object deleted meanwhile, else a missing CRD; 409 of a write → :class:`ConflictError` (the object changed or appeared meanwhile: re-read
and retry); 400/422 → :class:`ConfigError`; 429/5xx and connection errors → :class:`TransientError`.
Messages never carry object contents (a Secret's data could be echoed back by the server).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

from steps.domain.errors import (
    ConfigError,
    ConflictError,
    ImagebumpError,
    PermissionDeniedError,
    TransientError,
)

FIELD_MANAGER = "imagebump"
DEFAULT_PAGE_SIZE = 250


@dataclass(frozen=True)
class Resource:
    """One namespaced Kubernetes resource type."""

    kind: str
    api_version: str
    plural: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def display(self) -> str:
        """``secrets`` or ``applications.argoproj.io``, as RBAC and kubectl name them."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None, name: str | None = None) -> str:
        """The REST path; ``namespace`` None lists across every namespace (``/apis/G/V/PLURAL``)."""
        base = "/api/v1" if not self.group else f"/apis/{self.api_version}"
        if namespace is None:
            return f"{base}/{self.plural}"
        path = f"{base}/namespaces/{quote(namespace, safe='')}/{self.plural}"
        return f"{path}/{quote(name, safe='')}" if name else path


CONFIG_MAP = Resource("ConfigMap", "v1", "configmaps")
SECRET = Resource("Secret", "v1", "secrets")
APP_PROJECT = Resource("AppProject", "argoproj.io/v1alpha1", "appprojects")
APPLICATION_SET = Resource("ApplicationSet", "argoproj.io/v1alpha1", "applicationsets")
APPLICATION = Resource("Application", "argoproj.io/v1alpha1", "applications")

#: Every kind this module knows, in the order a restore applies them (dependencies first).
RESOURCES: dict[str, Resource] = {
    r.kind: r for r in (CONFIG_MAP, SECRET, APP_PROJECT, APPLICATION_SET, APPLICATION)
}


def describe(api: Any) -> str:
    """Which cluster ``api`` reaches, for messages: ``context prod (server https://…)``.

    Uses the ``context`` and ``server`` attributes :class:`steps.kube.client.KubernetesApi` has
    (an in-memory API has neither: "the cluster")."""
    context, server = getattr(api, "context", None), getattr(api, "server", None)
    if context is None and server is None:
        return "the cluster"
    who = f"context {context}" if context else "the in-cluster service account's cluster"
    return f"{who} (server {server})" if server else who


def resource_for(kind: str) -> Resource:
    try:
        return RESOURCES[kind]
    except KeyError:
        raise ConfigError(
            f"unsupported kind {kind!r} (supported: {', '.join(RESOURCES)})", reason="unsupported-kind"
        ) from None


@dataclass
class Page:
    """One page of a list: its items and the token for the next page (None when last)."""

    items: list[dict[str, Any]] = field(default_factory=list)
    continue_token: str | None = None


class KubeApi(Protocol):
    """What imagebump needs from a Kubernetes API server, and nothing more."""

    def list(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Page:
        """One page of objects in ``namespace`` (None: every namespace), paged by ``limit``/``continue``."""
        ...

    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        ...

    def create(self, resource: Resource, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj`` exactly as given (POST, ``fieldValidation=Strict``: a field the API server does
        not know is refused, never dropped); :class:`ConflictError` when it exists."""
        ...

    def replace(self, resource: Resource, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace the whole object (PUT) if its ``metadata.resourceVersion`` is still the live one,
        else :class:`ConflictError`; fields ``obj`` leaves out are removed (``fieldValidation=Strict``,
        as :meth:`create`)."""
        ...

    def patch(self, resource: Resource, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """JSON merge patch (RFC 7386) of the named object; :class:`ConfigError` when it is gone."""
        ...

    def delete(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        propagation: str | None = None,
    ) -> bool:
        """Delete the object if its uid is still ``uid``; False when it was already gone.

        ``propagation`` is the DeleteOptions ``propagationPolicy`` (``Orphan`` keeps dependents)."""
        ...


def list_all(
    api: KubeApi,
    resource: Resource,
    namespace: str | None,
    *,
    label_selector: str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> Iterator[dict[str, Any]]:
    """Every object of ``resource`` in ``namespace`` (None: all), following ``continue`` tokens.

    A continue token expires (410 Gone, ``ResourceExpired``: the API server keeps a list's snapshot
    for a few minutes, https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks):
    the list then starts again, at most :data:`LIST_RESTARTS` times, and an object already given
    (by namespace and name) is not given twice."""
    token: str | None = None
    given: set[tuple[str, str]] = set()
    restarts = 0
    while True:
        try:
            page = api.list(
                resource, namespace, label_selector=label_selector, limit=page_size, continue_token=token
            )
        except TransientError as exc:
            if token is None or getattr(exc, "reason", "") != "expired" or restarts >= LIST_RESTARTS:
                raise
            restarts += 1
            token = None
            continue
        for item in page.items:
            meta = item.get("metadata") or {}
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            if key in given:
                continue
            given.add(key)
            yield item
        token = page.continue_token or None
        if token is None:
            return


#: How often a list whose continue token expired starts again before the step fails (transient).
LIST_RESTARTS = 3


_USER_RE = re.compile(r'User "([^"]+)"')
#: The NamespaceLifecycle admission plugin's 403 for a write into a namespace being deleted
#: (kubernetes plugin/pkg/admission/namespace/lifecycle): not an RBAC refusal.
_TERMINATING_RE = re.compile(r"because it is being terminated")
#: A validating webhook's refusal, which controller-runtime answers with 403 Forbidden
#: (``admission webhook "NAME" denied the request: …``): not an RBAC refusal either.
_WEBHOOK_RE = re.compile(r'admission webhook "([^"]+)" denied the request')
#: The API server's 404 for a write into a namespace that does not exist, and for an object that is
#: gone (``secrets "x" not found``); any other 404 of a path means the resource type is not served.
_NOT_FOUND_RE = re.compile(r'^(\S+) "[^"]*" not found$')


_VERBS_TO_GRANT = {
    "list": "get/list",
    "get": "get",
    "patch": "get/patch",
    "create": "get/create",
    "update": "get/update",
    "delete": "get/delete",
}


def api_error(
    status: int,
    *,
    verb: str,
    resource: Resource,
    namespace: str | None,
    name: str | None = None,
    server_message: str = "",
    server_reason: str = "",
) -> ImagebumpError:
    """Turn an API server status into our error: verb, resource, namespace, cause and fix.

    ``server_message`` is used only to find the identity refused (``User "…"``) and, for kinds
    other than Secret, as the cause of a 400/422/429/5xx; it is never copied for Secrets (an
    admission webhook may quote the object). ``server_reason`` (the Status ``reason``:
    ``Invalid``, ``InternalError``, …) names the cause for every kind.
    """
    what = f"{resource.display} {name!r}" if name else resource.display
    where = f"in namespace {namespace}" if namespace else "in all namespaces"
    if status == 403 and _TERMINATING_RE.search(server_message) and namespace:
        # NamespaceLifecycle admission, not RBAC: the namespace is being deleted
        return TransientError(
            f"cannot {verb} {what} {where}: namespace {namespace} is being deleted (Terminating, e.g. "
            "waiting on finalizers); once it is gone, create it again and re-run",
            reason="namespace-terminating",
        )
    if status == 403 and _WEBHOOK_RE.search(server_message) and not _USER_RE.search(server_message):
        webhook = _WEBHOOK_RE.search(server_message)
        cause = server_message[:300] if resource.kind != "Secret" else f"webhook {webhook.group(1)}"  # type: ignore[union-attr]
        return ConfigError(
            f"cannot {verb} {what} {where}: refused by an admission webhook ({cause}); "
            "change the object or the webhook's policy, then re-run",
            reason="admission-denied",
        )
    if status in (401, 403):
        match = _USER_RE.search(server_message)
        who = f"'{match.group(1)}'" if match else "the service account (or user) imagebump runs as"
        verbs = _VERBS_TO_GRANT.get(verb, verb)
        reason = "forbidden" if status == 403 else "unauthorized (credentials rejected)"
        binding = "a Role + RoleBinding" if namespace else "a ClusterRole + ClusterRoleBinding"
        return PermissionDeniedError(
            f"cannot {verb} {what} {where}: {reason}; grant {verbs} on {resource.display} "
            f"{where} to {who} ({binding})"
            + ("" if status == 403 else ", or refresh the kubeconfig credentials"),
            reason="forbidden" if status == 403 else "unauthorized",
        )
    gone = _NOT_FOUND_RE.match(server_message.strip()) if status == 404 else None
    if gone and gone.group(1) == "namespaces" and namespace:
        return ConfigError(
            f"cannot {verb} {what} {where}: namespace {namespace} does not exist on this cluster; "
            f"create it first (kubectl create namespace {namespace})",
            reason="namespace-missing",
        )
    if gone and gone.group(1) in (resource.plural, resource.display):
        return ConfigError(
            f"cannot {verb} {what} {where}: it no longer exists (deleted meanwhile); re-run", reason="gone"
        )
    if status == 404:
        return ConfigError(
            f"cannot {verb} {what} {where}: the API server does not serve {resource.display} "
            f"({resource.api_version}); is Argo CD installed (its CRDs) on this cluster?",
            reason="not-served",
        )
    if status == 410:  # a list's continue token expired (ResourceExpired): the list starts again
        return TransientError(
            f"cannot {verb} {what} {where}: the list's continue token expired (410 Gone); retry",
            reason="expired",
        )
    if status == 409 and verb in ("create", "update", "delete", "patch"):
        return ConflictError(
            f"cannot {verb} {what} {where}: it was changed or created meanwhile (409 Conflict); re-run",
            reason="conflict",
        )
    if resource.kind == "Secret" or not server_message:
        cause = f": {server_reason}" if server_reason else ""
    else:
        cause = f": {server_message[:300]}"
    if status in (422, 400) and "unknown field" in server_message:
        # fieldValidation=Strict: the cluster's CRD (or Kubernetes) does not know a field of the
        # object; without Strict the API server would drop it and only warn
        return ConfigError(
            f"cannot {verb} {what} {where}: the API server does not know some of its fields ({status})"
            f"{cause}; the cluster's CRDs are older than the object (install the Argo CD version it "
            "came from, or newer), then re-run",
            reason="unknown-field",
        )
    if status in (409, 422, 400):
        return ConfigError(
            f"cannot {verb} {what} {where}: rejected by the API server ({status}){cause}", reason="rejected"
        )
    if status == 429 or status >= 500:
        return TransientError(
            f"cannot {verb} {what} {where}: API server answered {status}; retry later"
            + (f" ({cause[2:]})" if cause else ""),
            reason="unavailable",
        )
    return ConfigError(f"cannot {verb} {what} {where}: API server answered {status}", reason="refused")

"""The narrow Kubernetes seam backup-export and restore use: list (paged, one namespace or the
whole cluster), get, create, replace (update) and delete.

:class:`KubeApi` is the whole surface, keyed by :class:`Resource` (kind, apiVersion, plural).
A restore makes each object equal to the archive, so it creates (POST) what is missing and
replaces (PUT, with the live ``resourceVersion`` as precondition) what differs — never a
server-side apply, which would keep fields other managers own.
:class:`KubernetesApi` implements it over the official ``kubernetes`` client's ``ApiClient``
(its configuration, auth and TLS handling; in-cluster service account, else kubeconfig/context),
sending plain REST requests so every kind — core or custom — takes one code path and objects come
back as the API server's JSON, ``apiVersion``/``kind`` included.

API errors become our hierarchy (:func:`api_error`): 401/403 → :class:`PermissionDeniedError`
naming the verb, resource, namespace and the identity to grant it to; 404 of a list → a missing
CRD; 409 of a write → :class:`ConflictError` (the object changed or appeared meanwhile: re-read
and retry); 400/422 → :class:`ConfigError`; 429/5xx and connection errors → :class:`TransientError`.
Messages never carry object contents (a Secret's data could be echoed back by the server).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

from steps.errors import (
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


def resource_for(kind: str) -> Resource:
    try:
        return RESOURCES[kind]
    except KeyError:
        raise ConfigError(f"unsupported kind {kind!r} (supported: {', '.join(RESOURCES)})") from None


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
        """Create ``obj`` exactly as given (POST); :class:`ConflictError` when it exists."""
        ...

    def replace(self, resource: Resource, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace the whole object (PUT) if its ``metadata.resourceVersion`` is still the live one,
        else :class:`ConflictError`; fields ``obj`` leaves out are removed."""
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
    """Every object of ``resource`` in ``namespace`` (None: all), following ``continue`` tokens."""
    token: str | None = None
    while True:
        page = api.list(
            resource, namespace, label_selector=label_selector, limit=page_size, continue_token=token
        )
        yield from page.items
        token = page.continue_token or None
        if token is None:
            return


_USER_RE = re.compile(r'User "([^"]+)"')


_VERBS_TO_GRANT = {
    "list": "get/list",
    "get": "get",
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
) -> ImagebumpError:
    """Turn an API server status into our error: verb, resource, namespace, cause and fix.

    ``server_message`` is used only to find the identity refused (``User "…"``) and, for kinds
    other than Secret, as the cause of a 400/422; it is never copied for Secrets.
    """
    what = f"{resource.display} {name!r}" if name else resource.display
    where = f"in namespace {namespace}" if namespace else "in all namespaces"
    if status in (401, 403):
        match = _USER_RE.search(server_message)
        who = f"'{match.group(1)}'" if match else "the service account (or user) imagebump runs as"
        verbs = _VERBS_TO_GRANT.get(verb, verb)
        reason = "forbidden" if status == 403 else "unauthorized (credentials rejected)"
        binding = "a Role + RoleBinding" if namespace else "a ClusterRole + ClusterRoleBinding"
        return PermissionDeniedError(
            f"cannot {verb} {what} {where}: {reason}; grant {verbs} on {resource.display} "
            f"{where} to {who} ({binding})"
            + ("" if status == 403 else ", or refresh the kubeconfig credentials")
        )
    if status == 404:
        return ConfigError(
            f"cannot {verb} {what} {where}: the API server does not serve {resource.display} "
            f"({resource.api_version}); is Argo CD installed (its CRDs) on this cluster?"
        )
    if status == 409 and verb in ("create", "update", "delete"):
        return ConflictError(
            f"cannot {verb} {what} {where}: it was changed or created meanwhile (409 Conflict); re-run"
        )
    if status in (409, 422, 400):
        cause = "" if resource.kind == "Secret" else f": {server_message[:300]}"
        return ConfigError(f"cannot {verb} {what} {where}: rejected by the API server ({status}){cause}")
    if status == 429 or status >= 500:
        return TransientError(f"cannot {verb} {what} {where}: API server answered {status}; retry later")
    return ConfigError(f"cannot {verb} {what} {where}: API server answered {status}")


class KubernetesApi:
    """:class:`KubeApi` over the official ``kubernetes`` client (REST through its ``ApiClient``)."""

    def __init__(self, api_client: Any, *, timeout: float = 60.0) -> None:
        self._client = api_client
        self._timeout = timeout

    @classmethod
    def from_config(cls, context: str | None = None, kubeconfig: str | None = None) -> KubernetesApi:
        """In-cluster service account when running in a pod (and no context given), else kubeconfig.

        ``kubeconfig`` defaults to ``$KUBECONFIG`` (read now, not at import), else ``~/.kube/config``.
        """
        from kubernetes import client, config

        configuration = client.Configuration()
        if not context and not kubeconfig and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)
        else:
            path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
            try:
                config.load_kube_config(
                    config_file=path,
                    context=context or None,
                    client_configuration=configuration,
                    persist_config=False,
                )
            except (config.ConfigException, OSError) as exc:
                raise ConfigError(
                    f"cannot load Kubernetes configuration from {path}"
                    + (f" (context {context!r})" if context else "")
                    + f": {exc}; set KUBECONFIG or --context"
                ) from None
        return cls(client.ApiClient(configuration))

    def _request(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        resource: Resource,
        namespace: str | None,
        name: str | None = None,
        query: list[tuple[str, str]] | None = None,
        body: dict[str, Any] | None = None,
        content_type: str | None = None,
        missing_ok: bool = False,
    ) -> dict[str, Any] | None:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        request = self._client.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._client.call_api(*request, _request_timeout=self._timeout)
            data = response.read()
        except ImagebumpError:
            raise
        except Exception as exc:  # urllib3 connection/TLS errors and kubernetes' ApiException
            status = getattr(exc, "status", None)
            if isinstance(status, int) and status:
                raise api_error(
                    status,
                    verb=verb,
                    resource=resource,
                    namespace=namespace,
                    name=name,
                    server_message=str(getattr(exc, "body", "") or ""),
                ) from None
            where = f"in namespace {namespace}" if namespace else "in all namespaces"
            raise TransientError(
                f"cannot {verb} {resource.display} {where}: API server unreachable ({type(exc).__name__})"
            ) from None
        if response.status == 404 and missing_ok:
            return None
        if not 200 <= response.status < 300:
            message = ""
            try:
                message = str(json.loads(data or b"{}").get("message", ""))
            except (ValueError, AttributeError):
                pass
            raise api_error(
                response.status,
                verb=verb,
                resource=resource,
                namespace=namespace,
                name=name,
                server_message=message,
            )
        return json.loads(data) if data else {}

    def list(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Page:
        query: list[tuple[str, str]] = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if limit:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        body = (
            self._request(
                "GET",
                resource.path(namespace),
                verb="list",
                resource=resource,
                namespace=namespace,
                query=query,
            )
            or {}
        )
        items = []
        for item in body.get("items") or []:
            # Lists of core kinds leave out each item's apiVersion/kind; put them back.
            item.setdefault("apiVersion", resource.api_version)
            item.setdefault("kind", resource.kind)
            items.append(item)
        return Page(items=items, continue_token=(body.get("metadata") or {}).get("continue") or None)

    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        obj = self._request(
            "GET",
            resource.path(namespace, name),
            verb="get",
            resource=resource,
            namespace=namespace,
            name=name,
            missing_ok=True,
        )
        if obj is not None:
            obj.setdefault("apiVersion", resource.api_version)
            obj.setdefault("kind", resource.kind)
        return obj

    def create(self, resource: Resource, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        return (
            self._request(
                "POST",
                resource.path(namespace),
                verb="create",
                resource=resource,
                namespace=namespace,
                name=obj["metadata"]["name"],
                query=[("fieldManager", FIELD_MANAGER)],
                body=obj,
                content_type="application/json",
            )
            or {}
        )

    def replace(self, resource: Resource, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        if not obj["metadata"].get("resourceVersion"):
            raise ValueError("replace needs metadata.resourceVersion (the precondition)")
        return (
            self._request(
                "PUT",
                resource.path(namespace, name),
                verb="update",
                resource=resource,
                namespace=namespace,
                name=name,
                query=[("fieldManager", FIELD_MANAGER)],
                body=obj,
                content_type="application/json",
            )
            or {}
        )

    def delete(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        propagation: str | None = None,
    ) -> bool:
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            options["preconditions"] = {"uid": uid}
        if propagation:
            options["propagationPolicy"] = propagation
        gone = self._request(
            "DELETE",
            resource.path(namespace, name),
            verb="delete",
            resource=resource,
            namespace=namespace,
            name=name,
            body=options,
            content_type="application/json",
            missing_ok=True,
        )
        return gone is not None

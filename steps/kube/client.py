"""The production :class:`steps.kube.api.KubeApi`: the official ``kubernetes`` client's ``ApiClient``
(its configuration, auth and TLS; in-cluster service account, else kubeconfig/context), sending
plain REST requests so every kind — core or custom — takes one code path and objects come back as
the API server's JSON. Statuses become our errors through :func:`steps.kube.api.api_error`.
Imports :mod:`steps.kube.api` and :mod:`steps.domain.errors`; ``kubernetes`` only when a client is built.
"""

from __future__ import annotations

import json
import os
from typing import Any

from steps.domain.errors import ConfigError, ImagebumpError, TransientError
from steps.kube.api import FIELD_MANAGER, Page, Resource, api_error


class KubernetesApi:
    """:class:`KubeApi` over the official ``kubernetes`` client (REST through its ``ApiClient``)."""

    def __init__(self, api_client: Any, *, timeout: float = 60.0, context: str = "") -> None:
        self._client = api_client
        self._timeout = timeout
        #: The kubeconfig context in use ("" in a pod: the service account) and its API server's URL,
        #: for messages (:func:`steps.kube.api.describe`).
        self.context = context
        self.server = str(getattr(getattr(api_client, "configuration", None), "host", "") or "")

    @classmethod
    def from_config(
        cls, context: str | None = None, kubeconfig: str | None = None, *, timeout: float = 60.0
    ) -> KubernetesApi:
        """In-cluster service account when running in a pod (and no context given), else kubeconfig.

        ``kubeconfig`` defaults to ``$KUBECONFIG`` (read now, not at import), else ``~/.kube/config``;
        ``timeout`` bounds each request (seconds).
        """
        from kubernetes import client, config

        configuration = client.Configuration()
        if not context and not kubeconfig and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)
            return cls(client.ApiClient(configuration), timeout=timeout)
        path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
        names, current = _contexts(path)
        if context and names and context not in names:
            raise ConfigError(
                f"context {context!r} is not in the kubeconfig {path}; its contexts: {', '.join(sorted(names))} "
                "(pass one of them as --context, or set KUBECONFIG to the file that has it)",
                reason="unknown-context",
            )
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
                + f": {exc}; set KUBECONFIG or --context",
                reason="bad-kubeconfig",
            ) from None
        return cls(client.ApiClient(configuration), timeout=timeout, context=context or current)

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
                message, reason = _status_of(getattr(exc, "body", b"") or b"")
                raise api_error(
                    status,
                    verb=verb,
                    resource=resource,
                    namespace=namespace,
                    name=name,
                    server_message=message,
                    server_reason=reason,
                ) from None
            what = f"{resource.display} {name!r}" if name else resource.display
            where = f"in namespace {namespace}" if namespace else "in all namespaces"
            server = f"{self.server or '(no server)'}" + (
                f" (context {self.context})" if self.context else ""
            )
            if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
                raise TransientError(
                    f"cannot {verb} {what} {where}: API server {server} did not answer within "
                    f"{self._timeout:g}s ({type(exc).__name__}); retry later",
                    reason="timeout",
                ) from None
            raise TransientError(
                f"cannot {verb} {what} {where}: API server unreachable: tried {server}, "
                f"{type(exc).__name__}; check the network, or that --context names the cluster meant",
                reason="unreachable",
            ) from None
        if response.status == 404 and missing_ok:
            return None
        if not 200 <= response.status < 300:
            message, reason = _status_of(data)
            raise api_error(
                response.status,
                verb=verb,
                resource=resource,
                namespace=namespace,
                name=name,
                server_message=message,
                server_reason=reason,
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
                query=[("fieldManager", FIELD_MANAGER), ("fieldValidation", "Strict")],
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
                query=[("fieldManager", FIELD_MANAGER), ("fieldValidation", "Strict")],
                body=obj,
                content_type="application/json",
            )
            or {}
        )

    def patch(self, resource: Resource, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return (
            self._request(
                "PATCH",
                resource.path(namespace, name),
                verb="patch",
                resource=resource,
                namespace=namespace,
                name=name,
                query=[("fieldManager", FIELD_MANAGER)],
                body=patch,
                content_type="application/merge-patch+json",
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


def _contexts(path: str) -> tuple[list[str], str]:
    """The context names of the kubeconfig ``path`` (``a:b`` merged, as kubectl does) and its current
    context; nothing when it cannot be read (loading it then says why)."""
    from kubernetes.config.kube_config import KubeConfigMerger

    try:
        merged = KubeConfigMerger(path).config
    except Exception:  # noqa: BLE001 - unreadable: load_kube_config reports it
        return [], ""
    value = getattr(merged, "value", merged) or {}
    if not isinstance(value, dict):
        return [], ""
    items = (getattr(c, "value", c) for c in value.get("contexts") or [])  # dicts, or ConfigNodes of them
    names = [str(c.get("name", "")) for c in items if isinstance(c, dict)]
    return names, str(value.get("current-context") or "")


def _status_of(body: bytes | str) -> tuple[str, str]:
    """The ``message`` and ``reason`` of an API server Status body ("" for what it lacks)."""
    try:
        status = json.loads(body or b"{}")
    except (ValueError, TypeError):
        return (body.decode(errors="replace") if isinstance(body, bytes) else str(body))[:300], ""
    if not isinstance(status, dict):
        return "", ""
    return str(status.get("message", "") or ""), str(status.get("reason", "") or "")

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

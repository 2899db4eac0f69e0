"""The Kubernetes API fake over HTTP: :class:`FakeKubeServer` on 127.0.0.1:0 with the API server's
URL layout, Status errors, discovery and OpenAPI v3 documents (so the real ``kubectl`` and the real
``kubernetes`` client talk to it).

Part of the FAKE Kubernetes API (:mod:`imagebump.local.kube_fake`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from imagebump.local.kube_fake.status import TOKEN, FakeDrop, FakeStatus, status_body
from imagebump.local.kube_fake.store import FakeKube
from steps.kube import api as kube

_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<gv>[^/]+/[^/]+))(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+))?$"
)


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str
    authorization: str
    body: Any = None


def _discovery() -> dict[str, Any]:
    """Legacy discovery documents (what kubectl maps kinds to resources with) for our five kinds."""

    def resource_list(group_version: str) -> dict[str, Any]:
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": [
                {
                    "name": r.plural,
                    "singularName": r.kind.lower(),
                    "namespaced": True,
                    "kind": r.kind,
                    "verbs": ["create", "delete", "get", "list", "patch", "update"],
                }
                for r in kube.RESOURCES.values()
                if r.api_version == group_version
            ],
        }

    group = {
        "name": "argoproj.io",
        "versions": [{"groupVersion": "argoproj.io/v1alpha1", "version": "v1alpha1"}],
        "preferredVersion": {"groupVersion": "argoproj.io/v1alpha1", "version": "v1alpha1"},
    }
    return {
        "/version": {"major": "1", "minor": "32", "gitVersion": "v1.32.0", "platform": "linux/amd64"},
        "/api": {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        },
        "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]},
        "/apis/argoproj.io": {"kind": "APIGroup", "apiVersion": "v1", **group},
        "/api/v1": resource_list("v1"),
        "/apis/argoproj.io/v1alpha1": resource_list("argoproj.io/v1alpha1"),
    }


def _openapi_v3(group_version_path: str) -> dict[str, Any]:
    """An OpenAPI v3 document declaring ``fieldValidation`` on PATCH, so kubectl validates server-side."""
    paths: dict[str, Any] = {}
    for r in kube.RESOURCES.values():
        base = "/api/v1" if not r.group else f"/apis/{r.api_version}"
        if base.lstrip("/") != group_version_path:
            continue
        gvk = {"group": r.group, "version": r.api_version.rpartition("/")[2], "kind": r.kind}
        param = {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}}
        paths[f"{base}/namespaces/{{namespace}}/{r.plural}/{{name}}"] = {
            "patch": {
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [param],
                "responses": {"200": {"description": "OK"}},
            },
        }
        paths[f"{base}/namespaces/{{namespace}}/{r.plural}"] = {
            "post": {
                "x-kubernetes-action": "post",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [param],
                "responses": {"200": {"description": "OK"}},
            },
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (imagebump fake)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }


class FakeKubeServer:
    """:class:`FakeKube` over HTTP on 127.0.0.1:0, with the API server's URL layout and Status errors.

    ``validator`` (optional) checks every object written with ``fieldValidation=Strict`` (kubectl's
    default) and returns error strings; any error is answered 422 Invalid, as the API server does.
    ``anonymous`` accepts requests without the bearer token: kubectl (client-go) does not send a
    token to a plain-HTTP server, and this fake serves no TLS.
    """

    def __init__(
        self,
        kube_fake: FakeKube,
        *,
        validator: Callable[[dict[str, Any]], list[str]] | None = None,
        anonymous: bool = False,
    ) -> None:
        self.fake = kube_fake
        self.validator = validator
        self.anonymous = anonymous
        self.requests: list[Recorded] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeKubeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def write_kubeconfig(self, path: Path, *, context: str = "fake", namespace: str = "argocd") -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": context,
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": TOKEN}}],
            "contexts": [
                {"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}
            ],
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self
        by_plural = {r.plural: r for r in kube.RESOURCES.values()}
        discovery = _discovery()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the API server does
            disable_nagle_algorithm = True  # headers and body go out as separate writes

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _serve(self, method: str) -> None:
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = yaml.safe_load(raw) if raw else None
                server.requests.append(
                    Recorded(
                        method,
                        parts.path,
                        query,
                        self.headers.get("Content-Type", ""),
                        self.headers.get("Authorization", ""),
                        body,
                    )
                )
                if self.headers.get("Authorization") != f"Bearer {TOKEN}" and not server.anonymous:
                    return self._send(401, status_body(401, "Unauthorized", "Unauthorized"))
                if method == "GET" and parts.path in discovery:
                    return self._send(200, discovery[parts.path])
                if method == "GET" and parts.path == "/openapi/v3":
                    return self._send(
                        200,
                        {
                            "paths": {
                                gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash=0"}
                                for gv in ("api/v1", "apis/argoproj.io/v1alpha1")
                            }
                        },
                    )
                if method == "GET" and parts.path.startswith("/openapi/v3/"):
                    return self._send(200, _openapi_v3(parts.path.removeprefix("/openapi/v3/")))
                m = _PATH.match(parts.path)
                if method == "GET" and m and m.group("plural") == "namespaces" and not m.group("gv"):
                    if not m.group("name") or m.group("ns"):
                        return self._send(
                            405, status_body(405, "MethodNotAllowed", "not supported by the fake")
                        )
                    name = unquote(m.group("name"))
                    try:
                        found = server.fake.get_namespace_raw(name)
                    except FakeStatus as exc:
                        return self._send(exc.body["code"], exc.body)
                    if found is None:
                        return self._send(404, status_body(404, "NotFound", f'namespaces "{name}" not found'))
                    return self._send(200, found)
                resource = by_plural.get(m.group("plural")) if m else None
                if not m or resource is None or (m.group("gv") or "v1") != resource.api_version:
                    return self._send(
                        404, status_body(404, "NotFound", "the server could not find the requested resource")
                    )
                ns = unquote(m.group("ns")) if m.group("ns") else None
                name = unquote(m.group("name") or "") or None

                def first(k, query=query):
                    return (query.get(k) or [None])[0]

                try:
                    if method == "GET" and name is None:
                        limit = first("limit")
                        return self._send(
                            200,
                            server.fake.list_raw(
                                resource,
                                ns,
                                label_selector=first("labelSelector"),
                                limit=int(limit) if limit else None,
                                continue_token=first("continue"),
                            ),
                        )
                    if ns is None:
                        return self._send(405, status_body(405, "MethodNotAllowed", "namespaced resource"))
                    if method in ("POST", "PUT", "PATCH") and first("fieldValidation") == "Strict":
                        refused = _strict_refusal(server.validator, resource, body or {})
                        if refused is not None:
                            return self._send(refused["code"], refused)
                    if method == "GET":
                        obj = server.fake.get_raw(resource, ns, name)
                        if obj is None:
                            return self._send(
                                404, status_body(404, "NotFound", f'{resource.display} "{name}" not found')
                            )
                        return self._send(200, obj)
                    if method == "POST" and name is None:
                        return self._send(
                            201,
                            server.fake.create_raw(
                                resource, ns, body or {}, field_manager=first("fieldManager")
                            ),
                        )
                    if method == "PUT" and name:
                        return self._send(
                            200,
                            server.fake.replace_raw(
                                resource, ns, name, body or {}, field_manager=first("fieldManager")
                            ),
                        )
                    if method == "DELETE" and name:
                        options = body or {}
                        gone = server.fake.delete_raw(
                            resource,
                            ns,
                            name,
                            uid=(options.get("preconditions") or {}).get("uid"),
                            propagation=options.get("propagationPolicy"),
                        )
                        if gone is None:
                            return self._send(
                                404, status_body(404, "NotFound", f'{resource.display} "{name}" not found')
                            )
                        return self._send(200, gone)
                    if (
                        method == "PATCH"
                        and name
                        and self.headers.get("Content-Type") == "application/merge-patch+json"
                    ):
                        return self._send(200, server.fake.patch_raw(resource, ns, name, body or {}))
                    if (
                        method == "PATCH"
                        and name
                        and self.headers.get("Content-Type") == "application/apply-patch+yaml"
                    ):
                        return self._send(
                            200,
                            server.fake.apply_raw(
                                resource,
                                ns,
                                name,
                                body or {},
                                field_manager=first("fieldManager"),
                                force=first("force") == "true",
                            ),
                        )
                    return self._send(405, status_body(405, "MethodNotAllowed", "not supported by the fake"))
                except FakeStatus as exc:
                    return self._send(exc.body["code"], exc.body)
                except FakeDrop:
                    self.close_connection = True  # no answer at all: the client sees the connection lost
                    return None

            def do_GET(self) -> None:
                self._serve("GET")

            def do_PATCH(self) -> None:
                self._serve("PATCH")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PUT(self) -> None:
                self._serve("PUT")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

        return Handler


def _strict_refusal(validator: Any, resource: kube.Resource, body: dict[str, Any]) -> dict[str, Any] | None:
    """The Status a strict write of ``body`` gets (None: accepted): an unknown field is the decoder's
    400 BadRequest (``strict decoding error: unknown field "spec.x"``), any other schema error 422."""
    errors = validator(body) if validator else []
    unknown = _unknown_fields(errors)
    if unknown:
        kind = body.get("kind", resource.kind)
        version = resource.api_version.rpartition("/")[2]
        message = (
            f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: '
            + ", ".join(f'unknown field "{u}"' for u in unknown)
        )
        return status_body(400, "BadRequest", message[:2000])
    if errors:
        return status_body(422, "Invalid", "; ".join(errors)[:2000])
    return None


_ADDITIONAL = re.compile(
    r"^(?P<path>[^:]*): Additional properties are not allowed \((?P<names>.*) (?:was|were) unexpected\)"
)


def _unknown_fields(errors: list[str]) -> list[str]:
    """The fields a strict decode refuses (``spec.x``), from a validator's "Additional properties are
    not allowed ('x' was unexpected)" errors; the API server answers them with 400 BadRequest and
    ``strict decoding error: unknown field "spec.x"`` (apimachinery's strict JSON decoder)."""
    found = []
    for error in errors:
        m = _ADDITIONAL.match(error)
        if not m:
            continue
        base = "" if m["path"] in ("", "(root)") else m["path"] + "."
        found += [base + name for name in re.findall(r"'([^']+)'", m["names"])]
    return found

"""A FAKE Kubernetes API for the backup/restore tests: in memory, plus a small HTTP front.

Why a fake: no API server can run on this machine, and ``kmock`` 0.8 (tried) ignores
``limit``/``continue`` and label selectors and has no server-side apply — exactly what backup and
restore rely on. So this fake implements only the narrow surface imagebump uses
(:class:`steps.kube.KubeApi`: paged list with label selectors, get, server-side apply), with the
server behaviour that matters here: it fills in server-populated fields (uid, resourceVersion,
creationTimestamp, generation, managedFields, status) so sanitising is tested, it pages with
opaque ``continue`` tokens, and it answers 403 with the API server's Status shape when told to.

:class:`FakeKubeServer` serves the same store over HTTP on 127.0.0.1:0 with the API server's
paths, so tests drive the REAL adapter (:class:`steps.kube.KubernetesApi` over the official
``kubernetes`` client, loaded from a kubeconfig) and record each request's shape.

Server-side apply is simplified: applied top-level fields replace the live ones, labels and
annotations are merged, status and server fields are kept. Field ownership is not modelled.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from steps import kube

SERVICE_ACCOUNT = "system:serviceaccount:argocd:imagebump"
TOKEN = "fake-token"


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


class FakeStatus(Exception):
    """An API server Status the fake answers with (the HTTP front sends it as is)."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body["message"])
        self.body = body


def _parse_selector(selector: str) -> list[tuple[str, str, set[str]]]:
    terms = []
    for term in re.split(r",(?![^(]*\))", selector or ""):
        term = term.strip()
        if not term:
            continue
        if m := re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", term):
            terms.append((m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}))
        elif m := re.fullmatch(r"([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)", term):
            terms.append((m.group(1), "notin" if m.group(2) == "!=" else "in", {m.group(3)}))
        elif m := re.fullmatch(r"(!?)([\w./-]+)", term):
            terms.append((m.group(2), "absent" if m.group(1) else "exists", set()))
        else:
            raise FakeStatus(_status(400, "BadRequest", f"unable to parse requirement: {term!r}"))
    return terms


def _matches(labels: dict[str, str], terms: list[tuple[str, str, set[str]]]) -> bool:
    for key, op, values in terms:
        present = key in labels
        if op == "in" and not (present and labels[key] in values):
            return False
        if op == "notin" and present and labels[key] in values:
            return False
        if op == "exists" and not present:
            return False
        if op == "absent" and present:
            return False
    return True


@dataclass
class FakeKube:
    """In-memory store implementing :class:`steps.kube.KubeApi` (plus test helpers)."""

    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)
    failures: dict[tuple[str, str], int] = field(default_factory=dict)
    _rv: int = 1000
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- test helpers -----------------------------------------------------------------------
    def forbid(self, verb: str, plural: str) -> None:
        """Answer 403 to ``verb`` (list/get/patch) on ``plural`` from now on."""
        self.fail(verb, plural, 403)

    def fail(self, verb: str, plural: str, code: int) -> None:
        """Answer ``code`` (403, 404 as for a missing CRD, 500, …) to ``verb`` on ``plural``."""
        self.failures[(verb, plural)] = code

    def seed(self, obj: dict[str, Any], *, manager: str = "kubectl-client-side-apply") -> dict[str, Any]:
        """Store ``obj`` as if another client created it: server fields and status filled in."""
        resource = kube.resource_for(obj["kind"])
        namespace = obj["metadata"]["namespace"]
        with self._lock:
            return copy.deepcopy(self._create(resource, namespace, copy.deepcopy(obj), manager))

    def names(self, kind: str, namespace: str) -> list[str]:
        plural = kube.resource_for(kind).plural
        return sorted(n for (p, ns, n) in self.objects if p == plural and ns == namespace)

    def stored(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.objects.get((kube.resource_for(kind).plural, namespace, name)))

    def in_namespace(self, namespace: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for (_, ns, _), o in sorted(self.objects.items()) if ns == namespace]

    # --- the API --------------------------------------------------------------------------
    def _check(self, verb: str, resource: kube.Resource, namespace: str) -> None:
        code = self.failures.get((verb, resource.plural))
        if code == 403:
            raise FakeStatus(_status(
                403, "Forbidden",
                f'{resource.display} is forbidden: User "{SERVICE_ACCOUNT}" cannot {verb} resource '
                f'"{resource.plural}" in API group "{resource.group}" in the namespace "{namespace}"',
            ))
        if code == 404:
            raise FakeStatus(_status(404, "NotFound", "the server could not find the requested resource"))
        if code:
            raise FakeStatus(_status(code, "InternalError", "etcdserver: request timed out"))

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _create(self, resource: kube.Resource, namespace: str, obj: dict[str, Any], manager: str) -> dict:
        meta = obj.setdefault("metadata", {})
        meta.update(
            namespace=namespace, uid=str(uuid.uuid4()), resourceVersion=self._next_rv(),
            creationTimestamp="2026-01-02T03:04:05Z",
            managedFields=[{"manager": manager, "operation": "Apply", "apiVersion": resource.api_version,
                            "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}],
        )
        if resource.group:
            meta["generation"] = 1
        if resource.kind == "Application":
            obj.setdefault("status", {"sync": {"status": "Synced"}, "health": {"status": "Healthy"}})
        obj.setdefault("apiVersion", resource.api_version)
        obj.setdefault("kind", resource.kind)
        self.objects[(resource.plural, namespace, meta["name"])] = obj
        return obj

    def list_raw(self, resource: kube.Resource, namespace: str, *, label_selector: str | None = None,
                 limit: int | None = None, continue_token: str | None = None) -> dict[str, Any]:
        """The list as the API server returns it (items without apiVersion/kind for core kinds)."""
        with self._lock:
            self.calls.append(("list", resource.plural, namespace,
                               {"labelSelector": label_selector, "limit": limit, "continue": continue_token}))
            self._check("list", resource, namespace)
            terms = _parse_selector(label_selector or "")
            items = [
                o for (p, ns, _), o in sorted(self.objects.items())
                if p == resource.plural and ns == namespace
                and _matches(o["metadata"].get("labels") or {}, terms)
            ]
            start = ""
            if continue_token:
                try:
                    start = json.loads(base64.urlsafe_b64decode(continue_token))["after"]
                except (ValueError, KeyError):
                    raise FakeStatus(_status(410, "Expired", "invalid continue token")) from None
                items = [o for o in items if o["metadata"]["name"] > start]
            token = None
            if limit and len(items) > limit:
                items = items[:limit]
                token = base64.urlsafe_b64encode(
                    json.dumps({"after": items[-1]["metadata"]["name"]}).encode()).decode()
            out = []
            for o in items:
                o = copy.deepcopy(o)
                if not resource.group:  # the real API server leaves these out of core list items
                    o.pop("apiVersion", None)
                    o.pop("kind", None)
                out.append(o)
            meta: dict[str, Any] = {"resourceVersion": str(self._rv)}
            if token:
                meta["continue"] = token
            return {"apiVersion": resource.api_version, "kind": f"{resource.kind}List", "metadata": meta,
                    "items": out}

    def get_raw(self, resource: kube.Resource, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            self.calls.append(("get", resource.plural, namespace, {"name": name}))
            self._check("get", resource, namespace)
            obj = self.objects.get((resource.plural, namespace, name))
            return copy.deepcopy(obj) if obj else None

    def apply_raw(self, resource: kube.Resource, namespace: str, name: str, obj: dict[str, Any], *,
                  field_manager: str | None, force: bool) -> dict[str, Any]:
        with self._lock:
            self.calls.append(("patch", resource.plural, namespace, {"name": name, "force": force}))
            self._check("patch", resource, namespace)
            if not field_manager:
                raise FakeStatus(_status(422, "Invalid", "PATCH /apply requires fieldManager"))
            meta = obj.get("metadata") or {}
            if meta.get("name") != name or meta.get("namespace", namespace) != namespace:
                raise FakeStatus(_status(400, "BadRequest", "the name/namespace of the object does not "
                                                            "match the request URL"))
            if obj.get("kind") != resource.kind or obj.get("apiVersion") != resource.api_version:
                raise FakeStatus(_status(400, "BadRequest", "apiVersion/kind do not match the URL"))
            for server_field in ("uid", "resourceVersion", "managedFields"):
                if server_field in meta:  # a restored uid/resourceVersion would be a failed precondition
                    raise FakeStatus(_status(409, "Conflict", f"metadata.{server_field} must not be applied"))
            key = (resource.plural, namespace, name)
            existing = self.objects.get(key)
            if existing is None:
                return copy.deepcopy(self._create(resource, namespace, copy.deepcopy(obj), field_manager))
            merged = copy.deepcopy(existing)
            for k, v in obj.items():
                if k == "metadata":
                    for mk in ("labels", "annotations"):
                        if v.get(mk):
                            merged["metadata"].setdefault(mk, {}).update(v[mk])
                    for mk in ("finalizers",):
                        if mk in v:
                            merged["metadata"][mk] = v[mk]
                elif k != "status":
                    merged[k] = copy.deepcopy(v)
            if merged != existing:
                merged["metadata"]["resourceVersion"] = self._next_rv()
                if resource.group and merged.get("spec") != existing.get("spec"):
                    merged["metadata"]["generation"] = existing["metadata"].get("generation", 1) + 1
            self.objects[key] = merged
            return copy.deepcopy(merged)

    # KubeApi protocol (in-memory use): Status → our errors, exactly as the adapter maps them.
    def _raise(self, exc: FakeStatus, verb: str, resource: kube.Resource, namespace: str,
               name: str | None = None) -> None:
        raise kube.api_error(exc.body["code"], verb=verb, resource=resource, namespace=namespace, name=name,
                             server_message=exc.body["message"]) from None

    def list(self, resource: kube.Resource, namespace: str, *, label_selector: str | None = None,
             limit: int | None = None, continue_token: str | None = None) -> kube.Page:
        try:
            body = self.list_raw(resource, namespace, label_selector=label_selector, limit=limit,
                                 continue_token=continue_token)
        except FakeStatus as exc:
            self._raise(exc, "list", resource, namespace)
        items = [{"apiVersion": resource.api_version, "kind": resource.kind, **o} for o in body["items"]]
        return kube.Page(items=items, continue_token=body["metadata"].get("continue"))

    def get(self, resource: kube.Resource, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.get_raw(resource, namespace, name)
        except FakeStatus as exc:
            self._raise(exc, "get", resource, namespace, name)
            raise  # unreachable

    def apply(self, resource: kube.Resource, namespace: str, obj: dict[str, Any], *,
              force: bool = True) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        try:
            return self.apply_raw(resource, namespace, name, obj, field_manager=kube.FIELD_MANAGER, force=force)
        except FakeStatus as exc:
            self._raise(exc, "patch", resource, namespace, name)
            raise  # unreachable


_PATH = re.compile(r"^/(?:api/v1|apis/(?P<gv>[^/]+/[^/]+))/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)"
                   r"(?:/(?P<name>[^/]+))?$")


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str
    authorization: str
    body: Any = None


class FakeKubeServer:
    """:class:`FakeKube` over HTTP on 127.0.0.1:0, with the API server's URL layout and Status errors."""

    def __init__(self, kube_fake: FakeKube) -> None:
        self.fake = kube_fake
        self.requests: list[Recorded] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

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
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": TOKEN}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}],
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self
        by_plural = {r.plural: r for r in kube.RESOURCES.values()}

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
                server.requests.append(Recorded(method, parts.path, query, self.headers.get("Content-Type", ""),
                                                self.headers.get("Authorization", ""), body))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._send(401, _status(401, "Unauthorized", "Unauthorized"))
                m = _PATH.match(parts.path)
                resource = by_plural.get(m.group("plural")) if m else None
                if not m or resource is None or (m.group("gv") or "v1") != resource.api_version:
                    return self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
                ns, name = unquote(m.group("ns")), unquote(m.group("name") or "") or None
                first = lambda k: (query.get(k) or [None])[0]  # noqa: E731
                try:
                    if method == "GET" and name is None:
                        limit = first("limit")
                        return self._send(200, server.fake.list_raw(
                            resource, ns, label_selector=first("labelSelector"),
                            limit=int(limit) if limit else None, continue_token=first("continue")))
                    if method == "GET":
                        obj = server.fake.get_raw(resource, ns, name)
                        if obj is None:
                            return self._send(404, _status(404, "NotFound", f'{resource.display} "{name}" not found'))
                        return self._send(200, obj)
                    if method == "PATCH" and name and self.headers.get("Content-Type") == "application/apply-patch+yaml":
                        return self._send(200, server.fake.apply_raw(
                            resource, ns, name, body or {}, field_manager=first("fieldManager"),
                            force=first("force") == "true"))
                    return self._send(405, _status(405, "MethodNotAllowed", "not supported by the fake"))
                except FakeStatus as exc:
                    return self._send(exc.body["code"], exc.body)

            def do_GET(self) -> None:  # noqa: N802
                self._serve("GET")

            def do_PATCH(self) -> None:  # noqa: N802
                self._serve("PATCH")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

            def do_PUT(self) -> None:  # noqa: N802
                self._serve("PUT")

        return Handler


# --- a populated Argo CD namespace ------------------------------------------------------------

#: Secret values planted in the seed; tests assert none of them ever shows up in logs or output.
SECRET_VALUES = (
    "hunter2-repo-password",
    "ghp_fakeRepoCredsToken123",
    "cluster-bearer-token-XYZ",
    "repo-write-ssh-private-key",
    "repo-write-creds-pass",
    "server-secretkey-ABC",
    "admin-bcrypt-hash-$2a$10$fake",
    "slack-token-xoxb-fake",
)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def argocd_objects(namespace: str = "argocd", *, apps: int = 60) -> list[dict[str, Any]]:
    """A realistic Argo CD namespace: ≥ 50 Applications, projects, sets, every secret type, every CM.

    Includes things backup must NOT take (an unlabelled Secret, an unrelated ConfigMap, a Secret
    with an unknown secret-type) and server-side decorations it must strip.
    """
    ns = namespace
    objs: list[dict[str, Any]] = []
    for name in ("default", "platform", "team-a", "team-b"):
        objs.append({"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
                     "metadata": {"name": name, "namespace": ns},
                     "spec": {"sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": "*"}],
                              "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}})
    for name in ("clusters-addons", "preview-envs", "tenants"):
        objs.append({"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
                     "metadata": {"name": name, "namespace": ns},
                     "spec": {"generators": [{"clusters": {}}],
                              "template": {"metadata": {"name": "{{name}}-" + name},
                                           "spec": {"project": "platform",
                                                    "source": {"repoURL": "https://git.example.com/o/r",
                                                               "path": name, "targetRevision": "main"},
                                                    "destination": {"server": "{{server}}",
                                                                    "namespace": name}}}}})
    for i in range(apps):
        app = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
               "metadata": {"name": f"app-{i:03d}", "namespace": ns,
                            "labels": {"team": "a" if i % 2 else "b"},
                            "annotations": {
                                "kubectl.kubernetes.io/last-applied-configuration": '{"spec": {}}',
                                "notifications.argoproj.io/subscribe.on-sync-failed.slack": "alerts"},
                            "finalizers": ["resources-finalizer.argocd.argoproj.io"]},
               "spec": {"project": ["default", "platform", "team-a", "team-b"][i % 4],
                        "source": {"repoURL": "https://git.example.com/org/apps", "path": f"apps/{i:03d}",
                                   "targetRevision": "main"},
                        "destination": {"server": "https://kubernetes.default.svc", "namespace": f"ns-{i:03d}"},
                        "syncPolicy": {"automated": {"prune": True, "selfHeal": True}}},
               "operation": {"sync": {"revision": "abc"}} if i == 7 else None}
        if app["operation"] is None:
            del app["operation"]
        if i < 3:
            app["metadata"]["ownerReferences"] = [{"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
                                                   "name": "tenants", "uid": str(uuid.uuid4()),
                                                   "controller": True, "blockOwnerDeletion": True}]
        objs.append(app)
    secret_types = {
        "repository": {"type": "git", "url": "https://git.example.com/org/apps", "password": SECRET_VALUES[0],
                       "username": "bot"},
        "repo-creds": {"type": "git", "url": "https://git.example.com/org", "password": SECRET_VALUES[1]},
        "cluster": {"name": "prod", "server": "https://prod.example.com",
                    "config": json.dumps({"bearerToken": SECRET_VALUES[2]})},
        "repo-write": {"url": "git@git.example.com:org/apps.git", "sshPrivateKey": SECRET_VALUES[3]},
        "repo-write-creds": {"url": "https://git.example.com/org", "password": SECRET_VALUES[4]},
    }
    for stype, data in secret_types.items():
        objs.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                     "metadata": {"name": f"{stype}-one", "namespace": ns,
                                  "labels": {"argocd.argoproj.io/secret-type": stype},
                                  # kubectl apply leaves the whole object, values too, in this annotation
                                  "annotations": {"kubectl.kubernetes.io/last-applied-configuration":
                                                  json.dumps({"stringData": data})}},
                     "data": {k: _b64(v) for k, v in data.items()}})
    objs.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                 "metadata": {"name": "argocd-secret", "namespace": ns,
                              "labels": {"app.kubernetes.io/part-of": "argocd"}},
                 "data": {"server.secretkey": _b64(SECRET_VALUES[5]), "admin.password": _b64(SECRET_VALUES[6])}})
    objs.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                 "metadata": {"name": "argocd-notifications-secret", "namespace": ns},
                 "stringData": {"slack-token": SECRET_VALUES[7]}})
    # Not part of a backup:
    objs.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                 "metadata": {"name": "argocd-redis", "namespace": ns}, "data": {"auth": _b64("redis-pass")}})
    objs.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                 "metadata": {"name": "weird", "namespace": ns,
                              "labels": {"argocd.argoproj.io/secret-type": "something-else"}},
                 "data": {"x": _b64("y")}})
    objs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unrelated-cm", "namespace": ns},
                 "data": {"a": "b"}})
    cm_data = {
        "argocd-cm": {"url": "https://argocd.example.com", "timeout.reconciliation": "180s"},
        "argocd-rbac-cm": {"policy.default": "role:readonly", "policy.csv": "g, admins, role:admin\n"},
        "argocd-cmd-params-cm": {"server.insecure": "true"},
        "argocd-ssh-known-hosts-cm": {"ssh_known_hosts": "github.com ssh-ed25519 AAAAC3Nza...\n"},
        "argocd-tls-certs-cm": {"git.example.com": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
        "argocd-gpg-keys-cm": {"ABCDEF0123456789": "-----BEGIN PGP PUBLIC KEY BLOCK-----\n...\n"},
        "argocd-notifications-cm": {"service.slack": "token: $slack-token\n"},
    }
    for name, data in cm_data.items():
        objs.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": name, "namespace": ns,
                                  "labels": {"app.kubernetes.io/part-of": "argocd"}},
                     "data": data})
    return objs


def seeded(namespace: str = "argocd", *, apps: int = 60) -> FakeKube:
    """A :class:`FakeKube` holding :func:`argocd_objects` (server fields filled in)."""
    fake = FakeKube()
    for obj in argocd_objects(namespace, apps=apps):
        fake.seed(obj)
    return fake

"""The real-client adapter (steps.kube.client.KubernetesApi) against the FAKE API server over HTTP.

:mod:`tests.fakes.kube` stands in for the API server (no real one runs here; kmock 0.8 lacks
paging, selectors and server-side apply). These tests check what the official client puts on the
wire — paths, query parameters, bodies, bearer token — and how statuses map to our errors.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from steps.domain.errors import ConfigError, PermissionDeniedError, TransientError
from steps.kube import api as kube
from steps.kube import client as kube_client
from tests.fakes.kube import FakeKube, FakeKubeServer, seeded


@pytest.fixture()
def fake() -> FakeKube:
    return seeded("argocd", apps=5)


@pytest.fixture()
def server(fake: FakeKube) -> Iterator[FakeKubeServer]:
    with FakeKubeServer(fake) as srv:
        yield srv


@pytest.fixture()
def api(server: FakeKubeServer, tmp_path: Path) -> kube_client.KubernetesApi:
    return kube_client.KubernetesApi.from_config(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc")))


def test_list_sends_selector_limit_continue_and_token(api, server):
    items = list(kube.list_all(api, kube.APPLICATION, "argocd", page_size=2))
    assert [i["metadata"]["name"] for i in items] == [f"app-{i:03d}" for i in range(5)]
    requests = [r for r in server.requests if r.path.endswith("/applications")]
    assert [r.path for r in requests] == ["/apis/argoproj.io/v1alpha1/namespaces/argocd/applications"] * 3
    assert requests[0].query == {"limit": ["2"]}
    assert set(requests[1].query) == {"limit", "continue"}
    assert all(r.authorization == "Bearer fake-token" and r.method == "GET" for r in requests)

    page = api.list(kube.SECRET, "argocd", label_selector="argocd.argoproj.io/secret-type in (cluster)")
    assert server.requests[-1].path == "/api/v1/namespaces/argocd/secrets"
    assert server.requests[-1].query == {"labelSelector": ["argocd.argoproj.io/secret-type in (cluster)"]}
    assert [(i["kind"], i["apiVersion"], i["metadata"]["name"]) for i in page.items] == [
        ("Secret", "v1", "cluster-one")
    ], "core list items get their kind back"
    assert page.continue_token is None


def test_get_returns_object_or_none(api):
    assert api.get(kube.CONFIG_MAP, "argocd", "argocd-cm")["data"]["url"] == "https://argocd.example.com"
    assert api.get(kube.CONFIG_MAP, "argocd", "nope") is None


def test_list_across_all_namespaces(api, server, fake):
    fake.seed(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "elsewhere", "namespace": "team-a"},
            "spec": {"project": "default"},
        }
    )
    items = list(kube.list_all(api, kube.APPLICATION, None, page_size=4))
    assert server.requests[-1].path == "/apis/argoproj.io/v1alpha1/applications"
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items] == [
        ("argocd", f"app-{i:03d}") for i in range(5)
    ] + [("team-a", "elsewhere")]


def test_create_replace_delete_on_the_wire(api, server, fake):
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "argocd-cm", "namespace": "other"},
        "data": {"url": "https://dr.example.com"},
    }
    live = api.create(kube.CONFIG_MAP, "other", obj)
    request = server.requests[-1]
    assert (request.method, request.path) == ("POST", "/api/v1/namespaces/other/configmaps")
    # strict: a field the API server does not know is refused, never silently dropped
    assert request.query == {"fieldManager": ["imagebump"], "fieldValidation": ["Strict"]}
    assert request.body == obj
    with pytest.raises(kube.ConflictError):
        api.create(kube.CONFIG_MAP, "other", obj)

    replaced = {
        **obj,
        "metadata": {**obj["metadata"], "resourceVersion": live["metadata"]["resourceVersion"]},
        "data": {"other": "key"},
    }
    api.replace(kube.CONFIG_MAP, "other", replaced)
    request = server.requests[-1]
    assert (request.method, request.path) == ("PUT", "/api/v1/namespaces/other/configmaps/argocd-cm")
    assert fake.stored("ConfigMap", "other", "argocd-cm")["data"] == {"other": "key"}, (
        "a replace, not a merge"
    )
    with pytest.raises(kube.ConflictError):
        api.replace(kube.CONFIG_MAP, "other", replaced)  # the resourceVersion is stale now

    with pytest.raises(kube.ConflictError):
        api.delete(kube.CONFIG_MAP, "other", "argocd-cm", uid="not-its-uid")
    assert api.delete(
        kube.CONFIG_MAP, "other", "argocd-cm", uid=live["metadata"]["uid"], propagation="Orphan"
    )
    request = server.requests[-1]
    assert (request.method, request.path) == ("DELETE", "/api/v1/namespaces/other/configmaps/argocd-cm")
    assert request.body["preconditions"] == {"uid": live["metadata"]["uid"]}
    assert request.body["propagationPolicy"] == "Orphan"
    assert fake.stored("ConfigMap", "other", "argocd-cm") is None
    assert api.delete(kube.CONFIG_MAP, "other", "argocd-cm") is False, "already gone"


@pytest.mark.parametrize(
    ("verb", "plural", "code", "call", "error", "reason", "text"),
    [
        pytest.param(
            "list",
            "secrets",
            403,
            lambda a: a.list(kube.SECRET, "argocd"),
            PermissionDeniedError,
            "forbidden",
            "cannot list secrets in namespace argocd: forbidden; grant get/list on secrets",
            id="403-list",
        ),
        pytest.param(
            "get",
            "configmaps",
            403,
            lambda a: a.get(kube.CONFIG_MAP, "argocd", "argocd-cm"),
            PermissionDeniedError,
            "forbidden",
            "cannot get configmaps 'argocd-cm' in namespace argocd: forbidden",
            id="403-get",
        ),
        pytest.param(
            "create",
            "appprojects",
            403,
            lambda a: a.create(
                kube.APP_PROJECT,
                "argocd",
                {"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject", "metadata": {"name": "p"}},
            ),
            PermissionDeniedError,
            "forbidden",
            "grant get/create on appprojects.argoproj.io in namespace argocd",
            id="403-create",
        ),
        pytest.param(
            "list",
            "applications",
            403,
            lambda a: a.list(kube.APPLICATION, None),
            PermissionDeniedError,
            "forbidden",
            "cannot list applications.argoproj.io in all namespaces: forbidden; grant get/list on "
            "applications.argoproj.io in all namespaces to 'system:serviceaccount:argocd:imagebump' "
            "(a ClusterRole + ClusterRoleBinding)",
            id="403-list-cluster-wide",
        ),
        pytest.param(
            "list",
            "applicationsets",
            404,
            lambda a: a.list(kube.APPLICATION_SET, "argocd"),
            ConfigError,
            "not-served",
            "",
            id="404-missing-crd",
        ),
        pytest.param(
            "list",
            "applications",
            500,
            lambda a: a.list(kube.APPLICATION, "argocd"),
            TransientError,
            "unavailable",
            "",
            id="500",
        ),
    ],
)
def test_statuses_become_our_errors(api, fake, verb, plural, code, call, error, reason, text):
    """``text`` is what no field carries: for a refusal, what to grant to whom."""
    fake.fail(verb, plural, code)
    with pytest.raises(error) as info:
        call(api)
    assert (type(info.value), info.value.reason) == (error, reason)
    if text:
        assert text in str(info.value)


def test_unreachable_api_server_is_transient(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kc = tmp_path / "kc"
    kc.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: x, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: x, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\n"
    )
    api = kube_client.KubernetesApi.from_config(kubeconfig=str(kc))
    with pytest.raises(TransientError) as info:
        api.list(kube.SECRET, "argocd")
    assert info.value.reason == "unreachable"


def test_a_context_is_found_in_merged_kubeconfigs_without_a_current_context(tmp_path, server):
    """KUBECONFIG=a:b, neither file naming a current context: --context picks one, and a missing
    one is refused listing every context of both files."""
    a = server.write_kubeconfig(tmp_path / "a", context="one")
    a.write_text(a.read_text().replace("current-context: one\n", ""))
    b = server.write_kubeconfig(tmp_path / "b", context="two")
    b.write_text(b.read_text().replace("current-context: two\n", ""))
    api = kube_client.KubernetesApi.from_config(context="two", kubeconfig=f"{a}:{b}")
    assert (api.context, api.server) == ("two", server.url)
    assert api.get(kube.CONFIG_MAP, "argocd", "argocd-cm") is not None
    with pytest.raises(ConfigError, match="its contexts: one, two") as info:  # the choices, from both files
        kube_client.KubernetesApi.from_config(context="three", kubeconfig=f"{a}:{b}")
    assert info.value.reason == "unknown-context"


def test_bad_kubeconfig_or_context_is_a_config_error(tmp_path, server):
    kc = server.write_kubeconfig(tmp_path / "kc")
    with pytest.raises(ConfigError) as info:
        kube_client.KubernetesApi.from_config(context="nope", kubeconfig=str(kc))
    assert info.value.reason == "unknown-context"
    with pytest.raises(ConfigError) as info:
        kube_client.KubernetesApi.from_config(kubeconfig=str(tmp_path / "missing"))
    assert info.value.reason == "bad-kubeconfig"


@pytest.mark.parametrize(
    ("message", "error", "reason"),
    [
        pytest.param(
            'configmaps "argocd-cm" is forbidden: User "system:serviceaccount:imagebump:restore" cannot '
            'create resource "configmaps" in API group "" in the namespace "argocd"',
            PermissionDeniedError,
            "forbidden",
            id="rbac",
        ),
        pytest.param(
            'configmaps "argocd-cm" is forbidden: unable to create new content in namespace argocd because '
            "it is being terminated",
            TransientError,
            "namespace-terminating",
            id="namespace-terminating",
        ),
        pytest.param(
            'admission webhook "validation.gatekeeper.sh" denied the request: [must-have-owner] missing label',
            ConfigError,
            "admission-denied",
            id="webhook",
        ),
    ],
)
def test_a_403_names_its_real_cause(message: str, error: type, reason: str) -> None:
    """Not every 403 is RBAC: the NamespaceLifecycle admission plugin refuses writes into a
    namespace being deleted, and controller-runtime webhooks deny with 403 Forbidden."""
    found = kube.api_error(
        403,
        verb="create",
        resource=kube.CONFIG_MAP,
        namespace="argocd",
        name="argocd-cm",
        server_message=message,
    )
    assert (type(found), found.reason) == (error, reason)
    if error is not PermissionDeniedError:
        assert "grant" not in str(found)  # no RBAC advice for what RBAC did not refuse


def test_a_list_whose_continue_token_expired_starts_again_and_gives_each_object_once() -> None:
    """410 Gone (ResourceExpired) for an expired continue token: the list starts again; objects
    already given are not given twice; a second expiry after the restarts run out is transient."""
    names = [f"app-{i}" for i in range(5)]

    class Expiring:
        def __init__(self, expiries: int) -> None:
            self.expiries, self.calls = expiries, 0

        def list(self, resource, namespace, *, label_selector=None, limit=None, continue_token=None):
            self.calls += 1
            start = int(continue_token or 0)
            if continue_token and self.expiries:
                self.expiries -= 1
                raise kube.api_error(410, verb="list", resource=resource, namespace=namespace)
            items = [{"metadata": {"namespace": "argocd", "name": n}} for n in names[start : start + 2]]
            more = str(start + 2) if start + 2 < len(names) else None
            return kube.Page(items, more)

    api = Expiring(expiries=1)
    got = [o["metadata"]["name"] for o in kube.list_all(api, kube.APPLICATION, "argocd", page_size=2)]
    assert got == names and api.calls == 5  # page 1, expired, page 1 again, pages 2 and 3
    with pytest.raises(TransientError):
        list(
            kube.list_all(Expiring(expiries=kube.LIST_RESTARTS + 1), kube.APPLICATION, "argocd", page_size=2)
        )

"""The FAKE Kubernetes API for tests (:mod:`imagebump.local.kube_fake`, where it lives so the demo
can run it from an installed package) and a populated Argo CD installation to seed it with.

Every name the tests used from here before the move is re-exported.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from imagebump.local.kube_fake import (
    APP_FINALIZER,
    NAMESPACE,
    SERVICE_ACCOUNT,
    STATUS_SUBRESOURCE,
    SYSTEM_NAMESPACES,
    TOKEN,
    FakeKube,
    FakeKubeServer,
    FakeStatus,
    Grant,
    Recorded,
    merge_patch,
)
from tests.secret_scan import SECRETS, register

__all__ = [
    "APP_FINALIZER",
    "NAMESPACE",
    "SERVICE_ACCOUNT",
    "STATUS_SUBRESOURCE",
    "SYSTEM_NAMESPACES",
    "TOKEN",
    "FakeKube",
    "FakeKubeServer",
    "FakeStatus",
    "Grant",
    "Recorded",
    "merge_patch",
]

# --- a populated Argo CD installation ------------------------------------------------------------

#: Secret values planted in the seed; tests assert none of them ever shows up in logs or output
#: (and the suite-wide scan, tests/secret_scan.py, fails any test that prints one).
SECRET_VALUES = (
    "hunter2-repo-password",
    "ghp_fakeRepoCredsToken123",
    "cluster-bearer-token-XYZ",
    "repository-write-ssh-private-key",
    "repo-write-creds-pass",
    "server-secretkey-ABC-0123456789-signing-key",
    "admin-bcrypt-hash-$2a$10$fake",
    "slack-token-xoxb-fake",
    "scm-creds-github-app-key",
    "future-type-secret-value",
    "managed-by-only-password",
    "oidc-client-secret-part-of",
)
for _value in SECRET_VALUES:
    register(_value)
    SECRETS.add(base64.b64encode(_value.encode()).decode())

#: Every Secret an Argo CD backup must hold, by what selects it (upstream rule or ours), and the
#: ones it must not. Upstream: cmd/argocd/commands/admin/admin.go isArgoCDSecret (v3.5.1, v2.14.21).
BACKED_UP_SECRETS = {
    "repository-one": "secret-type label repository (common.go LabelValueSecretTypeRepository)",
    "repo-creds-one": "secret-type label repo-creds",
    "cluster-one": "secret-type label cluster",
    "repository-write-one": "secret-type label repository-write (util/db/repository_secrets.go getSecretType)",
    "repo-write-creds-one": "secret-type label repo-write-creds",
    "scm-creds-one": "secret-type label scm-creds",
    "future-type-one": "secret-type label of an unknown value: upstream takes any value",
    "managed-by-only": "annotation managed-by: argocd.argoproj.io, no label",
    "argocd-secret": "by name",
    "argocd-notifications-secret": "by name (ours)",
    "oidc-client": "label app.kubernetes.io/part-of: argocd (referenced from argocd-cm as $oidc-client:…; ours)",
}
NOT_BACKED_UP_SECRETS = ("argocd-redis", "unrelated-tls")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _app(name: str, namespace: str, project: str, i: int, *, finalizer: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"team": "a" if i % 2 else "b"},
        "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": '{"spec": {}}',
            "notifications.argoproj.io/subscribe.on-sync-failed.slack": "alerts",
        },
    }
    if finalizer:
        meta["finalizers"] = [APP_FINALIZER]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": meta,
        "spec": {
            "project": project,
            "source": {
                "repoURL": "https://git.example.com/org/apps",
                "path": f"apps/{name}",
                "targetRevision": "main",
            },
            "destination": {"server": "https://kubernetes.default.svc", "namespace": f"ns-{name}"},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True}},
        },
    }


#: A project role token: the AppProject lists it in spec.roles[].jwtTokens and, as argocd-server
#: keeps it, in status.jwtTokensByRole (server/project/project.go createToken).
PROJECT_TOKEN = {"project": "team-a", "role": "ci", "iat": 1767225600, "id": "6f1c1e2a-ci-token"}


def argocd_objects(
    namespace: str = "argocd", *, apps: int = 60, app_namespaces: tuple[str, ...] = ()
) -> list[dict]:
    """A realistic Argo CD installation: ≥ 50 Applications, projects, sets, every Secret kind, every CM.

    ``app_namespaces``: other namespaces Argo CD manages Applications (and, the first of them,
    ApplicationSets) in; argocd-cmd-params-cm names them. Includes what a backup must NOT take (an
    unlabelled Secret, an unrelated ConfigMap, an Application in a namespace Argo CD does not
    manage) and server-side decorations it must strip.
    """
    ns = namespace
    objs: list[dict[str, Any]] = []
    for name in ("default", "platform", "team-a", "team-b"):
        project: dict[str, Any] = {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AppProject",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "sourceRepos": ["*"],
                "destinations": [{"server": "*", "namespace": "*"}],
                "clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
            },
        }
        if app_namespaces:
            project["spec"]["sourceNamespaces"] = list(app_namespaces)
        if name == PROJECT_TOKEN["project"]:
            token = {"iat": PROJECT_TOKEN["iat"], "id": PROJECT_TOKEN["id"]}
            project["spec"]["roles"] = [
                {
                    "name": PROJECT_TOKEN["role"],
                    "policies": [f"p, proj:{name}:ci, applications, sync, {name}/*, allow"],
                    "jwtTokens": [dict(token)],
                }
            ]
            project["status"] = {"jwtTokensByRole": {PROJECT_TOKEN["role"]: {"items": [dict(token)]}}}
        objs.append(project)
    for set_ns in (ns, *app_namespaces[:1]):
        for name in ("clusters-addons", "preview-envs", "tenants"):
            objs.append(
                {
                    "apiVersion": "argoproj.io/v1alpha1",
                    "kind": "ApplicationSet",
                    "metadata": {"name": name, "namespace": set_ns},
                    "spec": {
                        "generators": [{"clusters": {}}],
                        "template": {
                            "metadata": {"name": "{{name}}-" + name},
                            "spec": {
                                "project": "platform",
                                "source": {
                                    "repoURL": "https://git.example.com/o/r",
                                    "path": name,
                                    "targetRevision": "main",
                                },
                                "destination": {"server": "{{server}}", "namespace": name},
                            },
                        },
                    },
                    "status": {"conditions": [{"type": "ResourcesUpToDate", "status": "True"}]},
                }
            )
    projects = ["default", "platform", "team-a", "team-b"]
    for i in range(apps):
        app = _app(f"app-{i:03d}", ns, projects[i % 4], i)
        if i == 7:
            app["operation"] = {"sync": {"revision": "abc"}}
        if i < 3:
            app["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "argoproj.io/v1alpha1",
                    "kind": "ApplicationSet",
                    "name": "tenants",
                    "uid": str(uuid.uuid4()),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        objs.append(app)
    for j, other in enumerate(app_namespaces):
        for i in range(2):
            objs.append(_app(f"{other}-app-{i}", other, projects[(i + j) % 4], i))
    if app_namespaces:  # Argo CD does not manage this namespace: not backed up, never pruned
        objs.append(_app("stray", "not-managed", "default", 0))
    secret_types = {
        "repository": {
            "type": "git",
            "url": "https://git.example.com/org/apps",
            "password": SECRET_VALUES[0],
            "username": "bot",
        },
        "repo-creds": {"type": "git", "url": "https://git.example.com/org", "password": SECRET_VALUES[1]},
        "cluster": {
            "name": "prod",
            "server": "https://prod.example.com",
            "config": json.dumps({"bearerToken": SECRET_VALUES[2]}),
        },
        "repository-write": {"url": "git@git.example.com:org/apps.git", "sshPrivateKey": SECRET_VALUES[3]},
        "repo-write-creds": {"url": "https://git.example.com/org", "password": SECRET_VALUES[4]},
        "scm-creds": {"githubAppPrivateKey": SECRET_VALUES[8]},
        "future-type": {"token": SECRET_VALUES[9]},
    }
    for stype, data in secret_types.items():
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "Opaque",
                "metadata": {
                    "name": f"{stype}-one",
                    "namespace": ns,
                    "labels": {"argocd.argoproj.io/secret-type": stype},
                    # kubectl apply leaves the whole object, values too, in this annotation
                    "annotations": {
                        "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"stringData": data})
                    },
                },
                "data": {k: _b64(v) for k, v in data.items()},
            }
        )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": "managed-by-only",
                "namespace": ns,
                "annotations": {"managed-by": "argocd.argoproj.io"},
            },
            "data": {"password": _b64(SECRET_VALUES[10])},
        }
    )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": "oidc-client",
                "namespace": ns,
                "labels": {"app.kubernetes.io/part-of": "argocd"},
            },
            "data": {"clientSecret": _b64(SECRET_VALUES[11])},
        }
    )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": "argocd-secret",
                "namespace": ns,
                "labels": {"app.kubernetes.io/part-of": "argocd"},
            },
            "data": {"server.secretkey": _b64(SECRET_VALUES[5]), "admin.password": _b64(SECRET_VALUES[6])},
        }
    )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": "argocd-notifications-secret", "namespace": ns},
            "stringData": {"slack-token": SECRET_VALUES[7]},
        }
    )
    # Not part of a backup:
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": "argocd-redis", "namespace": ns},
            "data": {"auth": _b64("redis-pass")},
        }
    )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": "unrelated-tls", "namespace": ns, "labels": {"app": "web"}},
            "data": {"tls.crt": _b64("crt"), "tls.key": _b64("key")},
        }
    )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "unrelated-cm", "namespace": ns},
            "data": {"a": "b"},
        }
    )
    params = {"server.insecure": "true"}
    if app_namespaces:
        params[APPLICATION_NAMESPACES] = ", ".join(app_namespaces)
        params[APPLICATIONSET_NAMESPACES] = app_namespaces[0]
    cm_data = {
        "argocd-cm": {
            "url": "https://argocd.example.com",
            "timeout.reconciliation": "180s",
            "oidc.config": "clientSecret: $oidc-client:clientSecret\n",
        },
        "argocd-rbac-cm": {"policy.default": "role:readonly", "policy.csv": "g, admins, role:admin\n"},
        "argocd-cmd-params-cm": params,
        "argocd-ssh-known-hosts-cm": {"ssh_known_hosts": "github.com ssh-ed25519 AAAAC3Nza...\n"},
        "argocd-tls-certs-cm": {
            "git.example.com": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
        },
        "argocd-gpg-keys-cm": {"ABCDEF0123456789": "-----BEGIN PGP PUBLIC KEY BLOCK-----\n...\n"},
        "argocd-notifications-cm": {"service.slack": "token: $slack-token\n"},
    }
    for name, data in cm_data.items():
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": {"app.kubernetes.io/part-of": "argocd"},
                },
                "data": data,
            }
        )
    return objs


#: argocd-cmd-params-cm keys (cmd/argocd/commands/admin/admin.go applicationNamespacesCmdParamsKey,
#: applicationsetNamespacesCmdParamsKey).
APPLICATION_NAMESPACES = "application.namespaces"
APPLICATIONSET_NAMESPACES = "applicationsetcontroller.namespaces"


def seeded(
    namespace: str = "argocd",
    *,
    apps: int = 60,
    app_namespaces: tuple[str, ...] = (),
    model_namespaces: bool = False,
) -> FakeKube:
    """A :class:`FakeKube` holding :func:`argocd_objects` (server fields filled in). With
    ``model_namespaces`` only Kubernetes' own namespaces and those the objects are in exist; else
    every namespace does."""
    fake = FakeKube.fresh() if model_namespaces else FakeKube()
    for obj in argocd_objects(namespace, apps=apps, app_namespaces=app_namespaces):
        fake.seed(obj)
    return fake

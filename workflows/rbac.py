"""Namespace, ServiceAccounts, Roles and RoleBindings — one privilege set per component.

Plain dicts (core kinds need no Hera). Who gets what:

- ``imagebump-workflow`` (commit-pr, the workflow's own pods) and ``imagebump-ecr-reader``
  (resolve-image, edit-kustomize; IRSA role for ECR read): what Argo's executor needs,
  create/patch ``workflowtaskresults``, nothing else.
- ``imagebump-backup``: the executor's rights here, read-only on Argo CD's objects in its
  namespace (Applications, ApplicationSets, AppProjects, Secrets, ConfigMaps); S3 via IRSA.
- ``imagebump-live`` (verify-live): the executor's rights here; in Argo CD's namespace get/list/watch
  Applications, nothing more: no write on any Application (RBAC cannot narrow a patch to one
  annotation, so a patch right would let that pod's token repoint every Application). A refresh,
  when configured, goes through Argo CD's API server with an Argo CD account limited to
  ``applications, get`` (Secret ``imagebump-argocd``). The namespaces ``application.namespaces`` enables come from the
  setting ``IMAGEBUMP_ARGOCD_APPLICATION_NAMESPACES`` (imagebump-env), not from Argo CD's ConfigMaps;
  each needs the same Application rights bound there (docs/push-to-live.md shows the Role).
- ``imagebump-ecr-reader`` also reads (get, list) Applications in Argo CD's namespace: reconcile's
  promotion gate (``promoteAfter``, issue 35), nothing more.
- ``imagebump-sensor``: create Workflows (the Sensor's ``k8s`` trigger), hold its leader-election
  Lease (``events.argoproj.io/leader-election: k8s``).
- ``imagebump-eventsource``: no Kubernetes rights; SQS via IRSA.

The IRSA role ARNs are placeholders (``ACCOUNT_ID``); docs/install.md shows the patch.
"""

from __future__ import annotations

from steps.argocd_backup import archive
from workflows import names as n

IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"

#: ServiceAccount → IAM role name created by manifests/aws/cloudformation.yaml.
IRSA_ROLES = {
    n.SA_ECR_READER: "imagebump-ecr-reader",
    n.SA_BACKUP: "imagebump-backup",
    n.SA_EVENTSOURCE: "imagebump-eventsource",
}

_EXECUTOR_RULES = [
    {"apiGroups": ["argoproj.io"], "resources": ["workflowtaskresults"], "verbs": ["create", "patch"]},
]


#: The Role (in Argo CD's namespace) verify-live's ServiceAccount is bound to.
LIVE_ROLE = "imagebump-live"

#: The Sensor's Lease (argo-events v1.9.11 pkg/sensors/listener.go: ``sensor-<sensor name>``).
SENSOR_LEASE = f"sensor-{n.SENSOR}"


def sensor_rules() -> list[dict]:
    """What the Sensor's pod does with the Kubernetes API, and nothing more.

    - ``k8s`` trigger, ``operation: create``: one Create of the Workflow (argo-events v1.9.11
      pkg/sensors/triggers/standard-k8s/standard-k8s.go; no Get: ``liveObject`` is for
      ``update`` only; no policy set, so no watch of the created Workflow). The Workflows
      controller resolves the ``workflowTemplateRef`` itself, so the Sensor never reads templates.
    - ``dead-letter`` (a ``log`` trigger): no API call.
    - Kubernetes leader election (client-go ``LeaseLock``, pkg/shared/leaderelection): get and
      update its own Lease; create cannot be limited by name (RBAC has no name at create time).
    """
    return [
        {"apiGroups": ["argoproj.io"], "resources": ["workflows"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [SENSOR_LEASE],
            "verbs": ["get", "update"],
        },
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    ]


def live_rules() -> list[dict]:
    """What verify-live (and reconcile's live states) do with Argo CD's objects, and nothing more."""
    return [
        # Read only: a refresh goes through Argo CD's API server (steps/verify_live/argocd.py Refresher)
        {"apiGroups": ["argoproj.io"], "resources": ["applications"], "verbs": ["get", "list", "watch"]},
    ]


#: The promotion gate (issue 35): the reconcile pod (``imagebump-ecr-reader``, which also reads ECR)
#: reads Argo CD's Applications to decide ``promoteAfter`` — get and list, nothing more.
GATE_ROLE = "imagebump-argocd-gate"


def gate_documents() -> list[dict]:
    rules = [{"apiGroups": ["argoproj.io"], "resources": ["applications"], "verbs": ["get", "list"]}]
    return [
        role(GATE_ROLE, rules, namespace=n.ARGOCD_NAMESPACE),
        role_binding(GATE_ROLE, GATE_ROLE, [n.SA_ECR_READER], namespace=n.ARGOCD_NAMESPACE),
    ]


def _meta(name: str, namespace: str = n.NAMESPACE, **extra) -> dict:
    return {"name": name, "namespace": namespace, "labels": dict(n.LABELS), **extra}


def namespace() -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": n.NAMESPACE, "labels": dict(n.LABELS)},
    }


def service_account(name: str) -> dict:
    extra = {}
    if name in IRSA_ROLES:
        extra["annotations"] = {IRSA_ANNOTATION: f"arn:aws:iam::ACCOUNT_ID:role/{IRSA_ROLES[name]}"}
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, **extra)}
    if name == n.SA_EVENTSOURCE:
        sa["automountServiceAccountToken"] = False  # talks to SQS only; IRSA uses its own projected token
    return sa


def role(name: str, rules: list[dict], namespace: str = n.NAMESPACE) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(name, namespace),
        "rules": rules,
    }


def role_binding(name: str, role_name: str, subjects: list[str], namespace: str = n.NAMESPACE) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(name, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name},
        "subjects": [{"kind": "ServiceAccount", "name": s, "namespace": n.NAMESPACE} for s in subjects],
    }


def documents() -> list[dict]:
    """Every RBAC object, in apply order."""
    accounts = [n.SA_WORKFLOW, n.SA_ECR_READER, n.SA_BACKUP, n.SA_LIVE, n.SA_SENSOR, n.SA_EVENTSOURCE]
    accounts.append(n.SA_NOTIFY)
    return [
        namespace(),
        *(service_account(name) for name in accounts),
        role("imagebump-executor", _EXECUTOR_RULES),
        role_binding(
            "imagebump-executor",
            "imagebump-executor",
            [n.SA_WORKFLOW, n.SA_ECR_READER, n.SA_BACKUP, n.SA_LIVE, n.SA_NOTIFY],
        ),
        # notify (the exit handler) reads its own Workflow's nodes: get, nothing else.
        role(
            "imagebump-notify", [{"apiGroups": ["argoproj.io"], "resources": ["workflows"], "verbs": ["get"]}]
        ),
        role_binding("imagebump-notify", "imagebump-notify", [n.SA_NOTIFY]),
        role("imagebump-sensor", sensor_rules()),
        role_binding("imagebump-sensor", "imagebump-sensor", [n.SA_SENSOR]),
        role(
            "imagebump-backup-reader",
            [
                {
                    "apiGroups": ["argoproj.io"],
                    "resources": ["applications", "applicationsets", "appprojects"],
                    "verbs": ["get", "list"],
                },
                # Secrets are listed by label (RBAC cannot filter by label); ConfigMaps only got by name.
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]},
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": list(archive.CONFIG_MAPS),
                    "verbs": ["get"],
                },
            ],
            namespace=n.ARGOCD_NAMESPACE,
        ),
        role_binding(
            "imagebump-backup-reader",
            "imagebump-backup-reader",
            [n.SA_BACKUP],
            namespace=n.ARGOCD_NAMESPACE,
        ),
        role(LIVE_ROLE, live_rules(), namespace=n.ARGOCD_NAMESPACE),
        role_binding(LIVE_ROLE, LIVE_ROLE, [n.SA_LIVE], namespace=n.ARGOCD_NAMESPACE),
        *gate_documents(),  # issue 35: the promotion gate reads Applications
    ]

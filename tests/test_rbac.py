"""RBAC in ``manifests/`` grants each ServiceAccount exactly what its step needs (issue 8, item 4).

Reads every rendered document under ``manifests/``, resolves each RoleBinding/ClusterRoleBinding to
its Role/ClusterRole, and flattens the rules into grants ``(namespace, apiGroup, resource,
resourceName, verb)`` per ServiceAccount (``*`` where a rule leaves a field open). The result must
equal ``tests/testdata/rbac-expected.yaml`` exactly: a widening fails, and so does a permission the
expectation does not know. Bindings to Users/Groups, wildcard rules and missing roles fail too.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "manifests"
EXPECTED = ROOT / "tests" / "testdata" / "rbac-expected.yaml"
RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")

Grant = tuple[str, str, str, str, str]  # namespace, apiGroup, resource, resourceName, verb


def documents() -> list[dict]:
    docs = []
    for path in sorted(MANIFESTS.rglob("*.yaml")):
        if path.parent.name == "aws":  # CloudFormation (IAM, not Kubernetes RBAC; its own tags)
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind"):
                docs.append(doc)
    return docs


def flatten(rules: list[dict], namespace: str) -> set[Grant]:
    grants: set[Grant] = set()
    for rule in rules:
        assert not rule.get("nonResourceURLs"), f"nonResourceURLs granted: {rule}"
        for group in rule.get("apiGroups") or [""]:
            for resource in rule["resources"]:
                for name in rule.get("resourceNames") or ["*"]:
                    for verb in rule["verbs"]:
                        grants.add((namespace, group, resource, name, verb))
    return grants


def effective_permissions(docs: list[dict]) -> dict[str, set[Grant]]:
    """``namespace/serviceaccount`` → every grant reaching it through a binding."""
    roles = {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    granted: dict[str, set[Grant]] = defaultdict(set)
    for doc in docs:
        if doc["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        where = doc["metadata"].get("namespace", "") if doc["kind"] == "RoleBinding" else "*"
        ref = doc["roleRef"]
        role_ns = where if ref["kind"] == "Role" else ""
        role = roles.get((ref["kind"], role_ns, ref["name"]))
        assert role is not None, (
            f"{doc['kind']} {doc['metadata']['name']} refers to missing {ref['kind']} {ref['name']}"
        )
        for subject in doc.get("subjects") or []:
            assert subject["kind"] == "ServiceAccount", (
                f"binding {doc['metadata']['name']} grants to {subject}"
            )
            sa = f"{subject.get('namespace', where)}/{subject['name']}"
            granted[sa] |= flatten(role.get("rules") or [], where)
    return granted


def expected_permissions() -> dict[str, set[Grant]]:
    data = yaml.safe_load(EXPECTED.read_text())
    out: dict[str, set[Grant]] = {}
    for name, grants in data["serviceAccounts"].items():
        flat: set[Grant] = set()
        for g in grants:
            flat |= flatten([g], g["namespace"])
        out[f"imagebump/{name}"] = flat
    return out


def _show(grants: set[Grant]) -> list[str]:
    return sorted(
        f"{ns}: {group or 'core'}/{res}{'' if name == '*' else '/' + name} {verb}"
        for ns, group, res, name, verb in grants
    )


DOCS = documents()
ACTUAL = effective_permissions(DOCS)
EXPECTED_GRANTS = expected_permissions()


def test_manifests_hold_rbac() -> None:
    assert {d["kind"] for d in DOCS} & set(RBAC_KINDS), "no RBAC rendered under manifests/"


def test_every_service_account_is_in_the_expectation() -> None:
    accounts = {
        f"{d['metadata']['namespace']}/{d['metadata']['name']}" for d in DOCS if d["kind"] == "ServiceAccount"
    }
    assert accounts == set(EXPECTED_GRANTS), "add each ServiceAccount (and only those) to rbac-expected.yaml"
    assert set(ACTUAL) <= accounts, (
        f"bindings to ServiceAccounts that are not rendered: {set(ACTUAL) - accounts}"
    )


@pytest.mark.parametrize("account", sorted(EXPECTED_GRANTS))
def test_service_account_permissions_are_exactly_the_expected(account) -> None:
    actual, expected = ACTUAL.get(account, set()), EXPECTED_GRANTS[account]
    wider, narrower = actual - expected, expected - actual
    assert not wider and not narrower, (
        f"{account}: granted but not needed: {_show(wider)}; needed but not granted: {_show(narrower)}"
    )


def test_no_wildcards_and_no_cluster_scope() -> None:
    for ns, group, resource, _name, verb in set().union(*ACTUAL.values()):
        assert "*" not in (group, resource, verb), (ns, group, resource, verb)
        assert ns != "*", f"cluster-wide grant {group}/{resource} {verb}"


def test_eventsource_does_not_mount_a_token() -> None:
    sa = next(
        d for d in DOCS if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == "imagebump-eventsource"
    )
    assert sa.get("automountServiceAccountToken") is False


# --- The Sensor's rights follow from its triggers (issue 16, item 3) ---------------------------
#: Kubernetes API calls the Sensor pod makes, per trigger (argo-events v1.9.11):
#: - k8s trigger (pkg/sensors/triggers/standard-k8s/standard-k8s.go Execute): `create` → Create;
#:   `update` → Get, then Update (Create when absent); `patch` → Get, then Patch (Create when
#:   absent); `delete` → Get, then Delete. `liveObject` adds a Get (update only); a trigger
#:   `policy.k8s` watches the created object (pkg/sensors/policy).
#: - log trigger (pkg/sensors/triggers/log/log.go): none.
#: - leader election `events.argoproj.io/leader-election: k8s` (pkg/shared/leaderelection,
#:   client-go LeaseLock): get/update of the Lease `sensor-<name>` (pkg/sensors/listener.go),
#:   create of it the first time.
K8S_TRIGGER_VERBS = {
    "create": {"create"},
    "update": {"get", "create", "update"},
    "patch": {"get", "create", "patch"},
    "delete": {"get", "delete"},
}
LEASE_VERBS_BY_NAME = {"get", "update"}
LEASE_VERBS_ANY_NAME = {"create"}


def _plural(kind: str) -> str:
    return (
        kind.lower() + "s"
    )  # pkg/sensors/triggers/triggers.go GetGroupVersionResource (no exception applies)


def sensor_needs(sensor: dict) -> set[Grant]:
    ns = sensor["metadata"]["namespace"]
    needed: set[Grant] = set()
    triggers = list(sensor["spec"]["triggers"])
    triggers += [t["dlqTrigger"] for t in sensor["spec"]["triggers"] if t.get("dlqTrigger")]
    for trigger in triggers:
        template = trigger["template"]
        kinds = set(template) - {"name", "conditions", "conditionsReset"}
        assert kinds <= {"k8s", "log"}, f"no model of the API calls of trigger kinds {kinds}"
        if "k8s" in template:
            k8s = template["k8s"]
            assert not trigger.get("policy") and not k8s.get("liveObject"), "extend the model"
            resource = k8s["source"]["resource"]
            group = resource["apiVersion"].rpartition("/")[0]
            for verb in K8S_TRIGGER_VERBS[k8s.get("operation") or "create"]:
                needed.add(
                    (resource["metadata"].get("namespace", ns), group, _plural(resource["kind"]), "*", verb)
                )
    if sensor["metadata"].get("annotations", {}).get("events.argoproj.io/leader-election") == "k8s":
        lease = f"sensor-{sensor['metadata']['name']}"
        needed |= {(ns, "coordination.k8s.io", "leases", lease, v) for v in LEASE_VERBS_BY_NAME}
        needed |= {(ns, "coordination.k8s.io", "leases", "*", v) for v in LEASE_VERBS_ANY_NAME}
    return needed


def test_the_sensor_holds_exactly_what_its_triggers_and_leader_election_use() -> None:
    (sensor,) = [d for d in DOCS if d["kind"] == "Sensor"]
    account = f"{sensor['metadata']['namespace']}/{sensor['spec']['template']['serviceAccountName']}"
    needed = sensor_needs(sensor)
    assert ("imagebump", "argoproj.io", "workflows", "*", "create") in needed
    actual = ACTUAL[account]
    assert actual == needed, (
        f"granted but not used: {_show(actual - needed)}; used but not granted: {_show(needed - actual)}"
    )


def test_verify_live_holds_no_write_right_on_any_application() -> None:
    """Issue 30 item 12: RBAC cannot narrow a patch to one annotation, so a patch (or update) right
    would let the pod's token repoint every Application; verify-live reads only."""
    grants = ACTUAL.get("imagebump/imagebump-live", set())
    on_apps = {
        verb
        for _ns, group, resource, _name, verb in grants
        if (group, resource) == ("argoproj.io", "applications")
    }
    assert on_apps == {"get", "list", "watch"}

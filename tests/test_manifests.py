"""Every committed manifest: strictly valid (CRD / Argo Events schema, or Kubernetes' own for
core kinds), consistent with each other, and installable by the image the Dockerfile builds."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

import imagebump
from tests.workflows import schemas
from workflows import argocd_backup
from workflows import common as c

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "manifests"
KUBERNETES_VERSION = "1.33.0"


def _documents() -> list[tuple[str, dict[str, Any]]]:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    found = []
    for rel in kustomization["resources"]:
        for doc in yaml.safe_load_all((MANIFESTS / rel).read_text()):
            found.append((rel, doc))
    return found


DOCUMENTS = _documents()
ARGO = [(rel, doc) for rel, doc in DOCUMENTS if schemas.validator_for(doc) is not None]
CORE = [(rel, doc) for rel, doc in DOCUMENTS if schemas.validator_for(doc) is None]


def _id(item: tuple[str, dict[str, Any]]) -> str:
    return f"{item[1]['kind']}/{item[1]['metadata']['name']}"


def test_every_kind_is_covered():
    kinds = {doc["kind"] for _, doc in DOCUMENTS}
    assert {"WorkflowTemplate", "CronWorkflow", "EventBus", "EventSource", "Sensor"} <= kinds
    assert {"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Namespace"} <= kinds


@pytest.mark.parametrize("item", ARGO, ids=_id)
def test_argo_documents_validate_strictly(item):
    _, document = item
    assert schemas.errors(document) == []


@pytest.mark.parametrize("item", CORE, ids=_id)
def test_core_documents_pass_kubernetes_validate_strict(item):
    _, document = item
    kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize(
    ("path", "key"),
    [
        pytest.param(("spec", "templates", 0), "retryStrateg", id="template-field"),
        pytest.param(("spec",), "podGc", id="spec-field"),
        pytest.param(("spec", "templates", 0, "script"), "imagePullPolicyy", id="container-field"),
        pytest.param(
            ("spec", "templates", 0, "retryStrategy", "backoff"), "maxDurations", id="backoff-field"
        ),
    ],
)
def test_a_misspelled_field_is_caught_in_the_workflow_template(path, key):
    document = copy.deepcopy(next(doc for _, doc in ARGO if doc["kind"] == "WorkflowTemplate"))
    node = document
    for part in path:
        node = node[part]
    node[key] = "x"
    assert any(f"'{key}' was unexpected" in error for error in schemas.errors(document))


def test_int_or_string_accepts_both_and_nothing_else():
    document = copy.deepcopy(next(doc for _, doc in ARGO if doc["kind"] == "WorkflowTemplate"))
    strategy = document["spec"]["templates"][0]["retryStrategy"]
    for value in (3, "3"):
        strategy["limit"] = value
        assert schemas.errors(document) == []
    strategy["limit"] = [3]
    assert schemas.errors(document)


def test_a_misspelled_field_is_caught_in_a_core_kind():
    role = copy.deepcopy(next(doc for _, doc in CORE if doc["kind"] == "Role"))
    role["rules"][0]["verb"] = ["get"]
    with pytest.raises(kubernetes_validate.ValidationError, match="verb"):
        kubernetes_validate.validate(role, KUBERNETES_VERSION, strict=True)


def test_every_object_names_its_namespace():
    for _, doc in DOCUMENTS:
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") in (c.NAMESPACE, c.ARGOCD_NAMESPACE), _id((_, doc))


def _walk(node: Any, key: str) -> list[Any]:
    found = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                found.append(v)
            found.extend(_walk(v, key))
    elif isinstance(node, list):
        for item in node:
            found.extend(_walk(item, key))
    return found


def test_service_accounts_used_exist():
    defined = {doc["metadata"]["name"] for _, doc in DOCUMENTS if doc["kind"] == "ServiceAccount"}
    used = {sa for _, doc in DOCUMENTS for sa in _walk(doc, "serviceAccountName")}
    bound = {s["name"] for _, doc in DOCUMENTS if doc["kind"] == "RoleBinding" for s in doc["subjects"]}
    assert used <= defined
    assert bound <= defined


def test_configmaps_referenced_by_templates_are_shipped():
    shipped = {doc["metadata"]["name"] for _, doc in DOCUMENTS if doc["kind"] == "ConfigMap"}
    referenced = set()
    for _, doc in ARGO:
        referenced |= {ref["name"] for ref in _walk(doc, "configMapKeyRef")}
        referenced |= {ref["name"] for ref in _walk(doc, "configMap")}
    assert referenced <= shipped
    backup = next(doc for _, doc in DOCUMENTS if doc["metadata"]["name"] == c.BACKUP_CONFIGMAP)
    assert set(argocd_backup.SETTINGS) == set(backup["data"])


def test_rbac_is_least_privilege():
    roles = {
        (d["metadata"]["namespace"], d["metadata"]["name"]): d for _, d in DOCUMENTS if d["kind"] == "Role"
    }
    executor = roles[(c.NAMESPACE, "imagebump-executor")]
    assert executor["rules"] == [
        {"apiGroups": ["argoproj.io"], "resources": ["workflowtaskresults"], "verbs": ["create", "patch"]}
    ]
    backup = roles[(c.ARGOCD_NAMESPACE, "imagebump-backup-reader")]
    assert {v for rule in backup["rules"] for v in rule["verbs"]} == {"get", "list"}
    sensor = roles[(c.NAMESPACE, "imagebump-sensor")]
    leases = [r for r in sensor["rules"] if r["resources"] == ["leases"]]
    assert leases and leases[0]["apiGroups"] == ["coordination.k8s.io"]
    workflows = [r for r in sensor["rules"] if r["resources"] == ["workflows"]]
    assert "create" in workflows[0]["verbs"] and "delete" not in workflows[0]["verbs"]
    for role in roles.values():
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"]


def test_irsa_annotations_match_the_cloudformation_roles():
    template = (MANIFESTS / "aws" / "cloudformation.yaml").read_text()
    for _, doc in DOCUMENTS:
        arn = doc["metadata"].get("annotations", {}).get("eks.amazonaws.com/role-arn")
        if doc["kind"] == "ServiceAccount" and arn:
            suffix = arn.rsplit("/", 1)[1].removeprefix("imagebump-")
            assert f'"${{NamePrefix}}-{suffix}"' in template, arn


def test_cron_workflow_is_daily_utc_and_never_overlaps():
    cron = next(doc for _, doc in ARGO if doc["kind"] == "CronWorkflow")["spec"]
    assert cron["timezone"] == "UTC"
    assert isinstance(cron["schedules"], list) and len(cron["schedules"]) == 1
    minute, hour, *rest = cron["schedules"][0].split()
    assert minute.isdigit() and hour.isdigit() and rest == ["*", "*", "*"]
    assert cron["concurrencyPolicy"] == "Forbid"
    assert cron["startingDeadlineSeconds"] > 0
    assert cron["successfulJobsHistoryLimit"] > 0 and cron["failedJobsHistoryLimit"] > 0
    assert cron["workflowSpec"]["serviceAccountName"] == c.SA_BACKUP


def test_every_image_is_the_package_image_built_by_the_dockerfile():
    images = {image for _, doc in ARGO for image in _walk(doc, "image") if isinstance(image, str)}
    assert images == {imagebump.IMAGE}
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install" in dockerfile and "COPY steps" in dockerfile
    users = re.findall(r"^USER (\d+)", dockerfile, flags=re.M)
    assert users == [f"{c.UID}:{c.UID}"] or users == [str(c.UID)]
    assert imagebump.IMAGE_REPOSITORY in dockerfile


def test_backup_export_wiring_follows_the_step_contract():
    import inspect

    from steps import backup_export
    from steps._runtime import kebab

    cron = next(doc for _, doc in ARGO if doc["kind"] == "CronWorkflow")["spec"]["workflowSpec"]
    templates = {t["name"]: t for t in cron["templates"]}
    export = templates["backup-export"]
    assert export["script"]["args"] == ["-m", "hera.workflows.runner", "-e", "steps.backup_export:run"]
    inputs = {p["name"] for p in export["inputs"]["parameters"]}
    assert inputs == set(inspect.signature(backup_export.run).parameters)
    outputs = {p["name"] for p in export["outputs"]["parameters"]}
    assert outputs == {kebab(f) for f in backup_export.BackupExportOutput.model_fields}
    assert export["serviceAccountName"] == c.SA_BACKUP
    assert export["script"]["securityContext"]["readOnlyRootFilesystem"] is True

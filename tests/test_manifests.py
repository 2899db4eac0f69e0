"""Every committed manifest: strictly valid (CRD / Argo Events schema, or Kubernetes' own for
core kinds), consistent with each other, and installable by the image the Dockerfile builds."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

import imagebump
from tests.workflows import schemas
from workflows import argocd_backup, pod_security
from workflows import names as n

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
            assert doc["metadata"].get("namespace") in (n.NAMESPACE, n.ARGOCD_NAMESPACE), _id((_, doc))


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
    backup = next(doc for _, doc in DOCUMENTS if doc["metadata"]["name"] == n.BACKUP_CONFIGMAP)
    assert set(argocd_backup.SETTINGS) == set(backup["data"])


def test_rbac_is_least_privilege():
    roles = {
        (d["metadata"]["namespace"], d["metadata"]["name"]): d for _, d in DOCUMENTS if d["kind"] == "Role"
    }
    executor = roles[(n.NAMESPACE, "imagebump-executor")]
    assert executor["rules"] == [
        {"apiGroups": ["argoproj.io"], "resources": ["workflowtaskresults"], "verbs": ["create", "patch"]}
    ]
    backup = roles[(n.ARGOCD_NAMESPACE, "imagebump-backup-reader")]
    assert {v for rule in backup["rules"] for v in rule["verbs"]} == {"get", "list"}
    sensor = roles[(n.NAMESPACE, "imagebump-sensor")]
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
    assert cron["workflowSpec"]["serviceAccountName"] == n.SA_BACKUP


def test_every_image_is_the_package_image_built_by_the_dockerfile():
    images = {image for _, doc in ARGO for image in _walk(doc, "image") if isinstance(image, str)}
    assert images == {imagebump.IMAGE}
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install" in dockerfile and "COPY steps" in dockerfile
    users = re.findall(r"^USER (\d+)", dockerfile, flags=re.MULTILINE)
    assert users == [f"{pod_security.UID}:{pod_security.UID}"] or users == [str(pod_security.UID)]
    assert imagebump.IMAGE_REPOSITORY in dockerfile


def _step_modules(env: dict[str, str] | None = None) -> dict[str, str]:
    """Every module a fresh interpreter holds once it has imported each rendered step's module and
    its ``LAZY_IMPORTS``: name → file ("" for a built-in)."""
    code = textwrap.dedent(
        f"""
        import importlib, json, sys
        for entry in {sorted(_entrypoints())!r}:
            module = importlib.import_module(entry.split(":")[0])
            for name in getattr(module, "LAZY_IMPORTS", ()):
                importlib.import_module(name)
        print(json.dumps({{n: getattr(m, "__file__", None) or "" for n, m in list(sys.modules.items())}}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_the_image_drops_setuptools_which_no_step_imports():
    """The python 3.11 image keeps setuptools and wheel; setuptools' ``distutils-precedence.pth``
    runs at every interpreter start, so every step pod paid it. The runtime stage uninstalls both,
    which is safe only while no step imports them (their lazy imports included)."""
    dockerfile = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    runtime = dockerfile.rsplit("\nFROM ", 1)[1]
    removed = [
        line.split("pip uninstall", 1)[1].split("&&", 1)[0].split()
        for line in runtime.splitlines()
        if line.startswith("RUN") and "pip uninstall" in line
    ]
    assert removed and {"setuptools", "wheel"} <= set(removed[0])
    env = {**os.environ, "SETUPTOOLS_USE_DISTUTILS": "stdlib"}  # this venv's own .pth: not a step's import
    modules = _step_modules(env)
    loaded = {name.split(".")[0] for name in modules}
    assert not loaded & {"setuptools", "pkg_resources", "wheel", "_distutils_hack", "distutils"}


def _entrypoints() -> set[str]:
    """Every ``module:function`` a rendered template's script runs (``-e``)."""
    found = set()
    for _, doc in ARGO:
        for args in _walk(doc, "args"):
            if isinstance(args, list) and "-e" in args:
                found.add(args[args.index("-e") + 1])
    return found


def test_the_image_compiles_every_module_a_step_imports_standard_library_included():
    """A pod cannot write bytecode (read-only root filesystem, ``PYTHONDONTWRITEBYTECODE=1``): a module
    the build did not compile is compiled from source on every step start. The python base image
    ships its standard library with no bytecode at all (its Dockerfile deletes every ``*.pyc``:
    docker-library/python#615), so the Dockerfile's ``compileall`` has to name the directory of every
    module each step imports — its lazy imports included — and exclude none of them."""
    dockerfile = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    command = next(
        line for line in dockerfile.splitlines() if "compileall" in line and line.startswith("RUN")
    )
    keys = re.findall(r'get_paths\(\)\["(\w+)"\]', command)
    assert "stdlib" in keys and "purelib" in keys
    excluded = re.search(r"-x '([^']+)'", command)
    paths = sysconfig.get_paths()
    roots = [Path(paths[key]) for key in keys]
    entrypoints = sorted(_entrypoints())
    assert len(entrypoints) >= 5
    sources = [Path(f) for f in _step_modules().values() if f.endswith(".py")]
    assert any(f.name == "typing.py" for f in sources)  # the standard library is among them
    # The project's own packages are installed into purelib by the wheel.
    outside = [
        f
        for f in sources
        if not f.is_relative_to(ROOT)
        and (
            not any(f.is_relative_to(root) for root in roots) or (excluded and re.search(excluded[1], str(f)))
        )
    ]
    assert outside == []


def test_backup_export_wiring_follows_the_step_contract():
    import inspect

    from steps.argocd_backup import export as backup_export
    from steps.runtime.harness import kebab

    cron = next(doc for _, doc in ARGO if doc["kind"] == "CronWorkflow")["spec"]["workflowSpec"]
    templates = {t["name"]: t for t in cron["templates"]}
    export = templates["backup-export"]
    assert export["script"]["args"] == [
        "-m",
        "steps.runtime.launcher",
        "-e",
        "steps.argocd_backup.export:run",
    ]
    inputs = {p["name"] for p in export["inputs"]["parameters"]}
    assert inputs == set(inspect.signature(backup_export.run).parameters)
    outputs = {p["name"] for p in export["outputs"]["parameters"]}
    assert outputs == {kebab(f) for f in backup_export.BackupExportOutput.model_fields}
    assert export["serviceAccountName"] == n.SA_BACKUP
    assert export["script"]["securityContext"]["readOnlyRootFilesystem"] is True


# --- Parameters from ConfigMaps: what the Workflows controller does (issue 16, item 1) --------
# Upstream facts, argo-workflows v4.0.10:
# - workflow/controller/controller.go newTypedConfigMapInformer: the controller only watches
#   ConfigMaps that carry the label key below (LabelSelector = the key).
# - workflow/common/configmap.go GetConfigMapValue: a ConfigMap whose label value is not
#   "Parameter" is refused ("needs to have the label ..."); a missing one or a missing key is an error.
# - workflow/controller/operator.go setGlobalParameters: on any such error a parameter with
#   valueFrom.default takes the default; one without fails the Workflow ("failed to set global
#   parameters: ...") before any pod starts.
CONFIGMAP_TYPE_LABEL = "workflows.argoproj.io/configmap-type"
PARAMETER_LABEL_VALUE = "Parameter"


class ControllerRefused(Exception):
    """The Workflow is marked Failed at start with this message."""


def _controller_config_map_value(configmaps: dict[str, dict], name: str, key: str) -> str:
    """GetConfigMapValue over the informer's view (only ConfigMaps with the label key)."""
    visible = {
        n: cm for n, cm in configmaps.items() if CONFIGMAP_TYPE_LABEL in cm["metadata"].get("labels", {})
    }
    if name not in visible:
        raise ControllerRefused(
            f"ConfigMap '{name}' does not exist. Please make sure it has the label "
            f"{CONFIGMAP_TYPE_LABEL}: {PARAMETER_LABEL_VALUE} to be detectable by the controller"
        )
    cm = visible[name]
    if cm["metadata"]["labels"][CONFIGMAP_TYPE_LABEL] != PARAMETER_LABEL_VALUE:
        raise ControllerRefused(
            f"ConfigMap '{name}' needs to have the label {CONFIGMAP_TYPE_LABEL}: {PARAMETER_LABEL_VALUE} to load parameters"
        )
    if key not in cm.get("data", {}):
        raise ControllerRefused(f"ConfigMap '{name}' does not have the key '{key}'")
    return cm["data"][key]


def controller_global_parameters(arguments: list[dict], configmaps: dict[str, dict]) -> dict[str, str]:
    """setGlobalParameters for `value` and `valueFrom.configMapKeyRef` arguments."""
    values = {}
    for param in arguments:
        if "value" in param:
            values[param["name"]] = str(param["value"])
            continue
        ref = param["valueFrom"]["configMapKeyRef"]
        try:
            values[param["name"]] = _controller_config_map_value(configmaps, ref["name"], ref["key"])
        except ControllerRefused as exc:
            if "default" not in param["valueFrom"]:
                raise ControllerRefused(
                    f"failed to set global parameter {param['name']} from configmap with name {ref['name']} "
                    f"and key {ref['key']}: {exc}"
                ) from None
            values[param["name"]] = param["valueFrom"]["default"]
    return values


def _backup_arguments() -> list[dict]:
    cron = next(doc for _, doc in ARGO if doc["kind"] == "CronWorkflow")
    return cron["spec"]["workflowSpec"]["arguments"]["parameters"]


def _shipped_configmaps() -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for _, doc in DOCUMENTS if doc["kind"] == "ConfigMap"}


def test_configmaps_behind_parameters_carry_the_label_the_controller_selects():
    referenced = {
        p["valueFrom"]["configMapKeyRef"]["name"]
        for _, doc in ARGO
        for args in _walk(doc, "arguments")
        for p in args.get("parameters", [])
        if "configMapKeyRef" in p.get("valueFrom", {})
    }
    assert referenced == {n.BACKUP_CONFIGMAP}
    for name in referenced:
        labels = _shipped_configmaps()[name]["metadata"]["labels"]
        assert labels[CONFIGMAP_TYPE_LABEL] == PARAMETER_LABEL_VALUE, name
    assert n.PARAMETER_CONFIGMAP_LABELS == {CONFIGMAP_TYPE_LABEL: PARAMETER_LABEL_VALUE}


def test_the_shipped_backup_configmap_starts_the_backup_with_its_values():
    shipped = _shipped_configmaps()
    values = controller_global_parameters(_backup_arguments(), shipped)
    assert values == shipped[n.BACKUP_CONFIGMAP]["data"]


def test_without_the_label_the_optional_settings_default_and_the_bucket_fails_clearly():
    unlabelled = copy.deepcopy(_shipped_configmaps())
    del unlabelled[n.BACKUP_CONFIGMAP]["metadata"]["labels"][CONFIGMAP_TYPE_LABEL]
    with pytest.raises(ControllerRefused) as refused:
        controller_global_parameters(_backup_arguments(), unlabelled)
    message = str(refused.value)
    assert "failed to set global parameter bucket" in message
    assert f"{CONFIGMAP_TYPE_LABEL}: {PARAMETER_LABEL_VALUE}" in message


def test_every_backup_setting_but_the_bucket_defaults_to_the_steps_own_default():
    import inspect

    from steps.argocd_backup import export as backup_export

    signature = inspect.signature(backup_export.run).parameters
    for param in _backup_arguments():
        default = param["valueFrom"].get("default")
        if param["name"] in argocd_backup.REQUIRED:
            assert default is None and signature[param["name"]].default is inspect.Parameter.empty
            assert "Required" in param["description"] and n.BACKUP_CONFIGMAP in param["description"]
        else:
            assert default == str(signature[param["name"]].default), param["name"]
    # Only the bucket set: every other setting falls back, nothing fails.
    only_bucket = copy.deepcopy(_shipped_configmaps())
    only_bucket[n.BACKUP_CONFIGMAP]["data"] = {"bucket": "my-argocd-backups"}
    values = controller_global_parameters(_backup_arguments(), only_bucket)
    assert values["bucket"] == "my-argocd-backups" and values["keep"] == "30"
    del only_bucket[n.BACKUP_CONFIGMAP]["data"]["bucket"]
    with pytest.raises(ControllerRefused, match="does not have the key 'bucket'"):
        controller_global_parameters(_backup_arguments(), only_bucket)


def _readme_overlay() -> str:
    readme = (ROOT / "docs" / "install.md").read_text()
    blocks = [
        textwrap.dedent(b)
        for _, b in re.findall(r"^( *)```yaml\n(.*?)^\1```", readme, flags=re.DOTALL | re.MULTILINE)
    ]
    (overlay,) = [b for b in blocks if b.startswith("# my-imagebump/kustomization.yaml")]
    return overlay


def test_the_readme_overlay_keeps_the_parameter_label_through_kustomize(tmp_path):
    """`behavior: merge` of the overlay docs/install.md shows, rendered by the real `kubectl kustomize`."""
    overlay = _readme_overlay()
    remote = re.search(r"^\s*- (https://github\.com/\S+//manifests\S*)", overlay, flags=re.MULTILINE)
    assert remote, "docs/install.md's overlay no longer lists the manifests as a resource"
    root = tmp_path / "my-imagebump"
    root.mkdir()
    # The docs' own alternative to the remote URL: "or a path to manifests/".
    local = os.path.relpath(MANIFESTS, root)
    (root / "kustomization.yaml").write_text(overlay.replace(remote[1], local))
    (root / "rules.yaml").write_text((ROOT / "examples" / "rules.yaml").read_text())
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with kustomize) is needed: this test renders docs/install.md's overlay"
    done = subprocess.run(
        [kubectl, "kustomize", str(root)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    rendered = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(done.stdout) if d}
    backup = rendered[("ConfigMap", n.BACKUP_CONFIGMAP)]
    assert backup["metadata"]["labels"][CONFIGMAP_TYPE_LABEL] == PARAMETER_LABEL_VALUE
    configmaps = {name: doc for (kind, name), doc in rendered.items() if kind == "ConfigMap"}
    cron = rendered[("CronWorkflow", argocd_backup.NAME)]
    values = controller_global_parameters(cron["spec"]["workflowSpec"]["arguments"]["parameters"], configmaps)
    assert values["bucket"] == "my-argocd-backups"  # the overlay's literal
    assert values["namespace"] == n.ARGOCD_NAMESPACE  # the base's value, merged

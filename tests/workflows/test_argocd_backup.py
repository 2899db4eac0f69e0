"""argocd-backup: what a user reads when its bucket is not set, as the README says it.

The controller's start-up failure is computed by the model of upstream's setGlobalParameters /
GetConfigMapValue in tests/test_manifests.py (argo-workflows v4.0.10 workflow/common/configmap.go,
workflow/controller/operator.go, cited there); the step's own message by the step's settings code.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from steps.argocd_backup.settings import BackupSettings, ConfigMapKeys
from steps.domain.errors import ConfigError
from tests.test_manifests import (
    CONFIGMAP_TYPE_LABEL,
    ControllerRefused,
    _backup_arguments,
    _shipped_configmaps,
    controller_global_parameters,
)
from workflows import argocd_backup
from workflows import names as n

ROOT = Path(__file__).resolve().parents[2]


def _readme_backup_settings() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("The CronWorkflow reads its settings from the ConfigMap `imagebump-backup`")
    return " ".join(readme[start : readme.index("Writers of one overlay are serialised", start)].split())


def _refusal(configmaps: dict) -> str:
    with pytest.raises(ControllerRefused) as refused:
        controller_global_parameters(_backup_arguments(), configmaps)
    # operator.go markWorkflowFailed(..., "failed to set global parameters: " + err)
    return f"failed to set global parameters: {refused.value}"


def test_the_readme_quotes_the_controllers_message_for_a_missing_bucket():
    section = _readme_backup_settings()
    no_key = copy.deepcopy(_shipped_configmaps())
    del no_key[n.BACKUP_CONFIGMAP]["data"]["bucket"]
    labelled = _refusal(no_key)
    assert "label" not in labelled  # the label is named only when it is what is missing
    assert labelled in section
    del no_key[n.BACKUP_CONFIGMAP]["metadata"]["labels"][CONFIGMAP_TYPE_LABEL]
    unlabelled = _refusal(no_key)
    tail = unlabelled.split("key bucket: ", 1)[1]
    assert tail in section and CONFIGMAP_TYPE_LABEL in tail
    assert not re.search(r"naming the ConfigMap, the key and the label", section)


def test_the_readme_quotes_the_steps_message_for_the_shipped_placeholder():
    shipped = argocd_backup.settings_configmap()["data"]
    with pytest.raises(ConfigError) as error:
        BackupSettings.parse(source=ConfigMapKeys(namespace=n.NAMESPACE), **shipped)
    assert str(error.value) in _readme_backup_settings()
    assert argocd_backup.REQUIRED == ("bucket",)  # no valueFrom.default: a missing key fails at start

"""argocd-backup: what a user reads when its bucket is not set (docs/install.md, after the rights table).

The controller's start-up failure is computed by the model of upstream's setGlobalParameters /
GetConfigMapValue in tests/test_manifests.py (argo-workflows v4.0.10 workflow/common/configmap.go,
workflow/controller/operator.go, cited there); the step's own message by the step's settings code.
"""

from __future__ import annotations

import copy

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


def _refusal(configmaps: dict) -> str:
    with pytest.raises(ControllerRefused) as refused:
        controller_global_parameters(_backup_arguments(), configmaps)
    # operator.go markWorkflowFailed(..., "failed to set global parameters: " + err)
    return f"failed to set global parameters: {refused.value}"


def test_a_missing_bucket_fails_at_start_naming_the_label_only_when_it_is_missing():
    no_key = copy.deepcopy(_shipped_configmaps())
    del no_key[n.BACKUP_CONFIGMAP]["data"]["bucket"]
    labelled = _refusal(no_key)
    assert "bucket" in labelled and n.BACKUP_CONFIGMAP in labelled
    assert "label" not in labelled  # the label is named only when it is what is missing
    del no_key[n.BACKUP_CONFIGMAP]["metadata"]["labels"][CONFIGMAP_TYPE_LABEL]
    unlabelled = _refusal(no_key)
    assert "bucket" in unlabelled and n.BACKUP_CONFIGMAP in unlabelled
    assert CONFIGMAP_TYPE_LABEL in unlabelled.split("key bucket: ", 1)[1]


def test_the_shipped_placeholder_fails_the_step_naming_the_key_the_configmap_and_its_namespace():
    shipped = argocd_backup.settings_configmap()["data"]
    with pytest.raises(ConfigError) as error:
        BackupSettings.parse(source=ConfigMapKeys(namespace=n.NAMESPACE), **shipped)
    message = str(error.value)
    assert shipped["bucket"] in message and "placeholder" in message
    assert "`bucket`" in message and n.BACKUP_CONFIGMAP in message and n.NAMESPACE in message
    assert argocd_backup.REQUIRED == ("bucket",)  # no valueFrom.default: a missing key fails at start

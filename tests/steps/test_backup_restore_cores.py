"""The pure cores of backup-export and restore, table-tested without Kubernetes or S3.

:class:`steps.argocd_backup.settings.BackupSettings` (the one home of the backup's settings and their
defaults), :mod:`steps.argocd_backup.retention` (archive names, what expires) and
:func:`steps.argocd_backup.restore_plan.plan_restore` (what a restore does with each object). No fake, no server: these
functions take values and return values.
"""

from __future__ import annotations

import argparse
import inspect
from datetime import UTC, datetime

import pytest

from steps.argocd_backup import export as backup_export
from steps.argocd_backup import restore_plan, retention
from steps.argocd_backup.settings import DEFAULTS, BackupSettings
from steps.domain.errors import ConfigError


# --- settings ------------------------------------------------------------------------------------
def test_one_home_for_the_defaults_the_step_and_the_cli_read() -> None:
    assert DEFAULTS == {
        "prefix": "argocd-backups",
        "cluster": "in-cluster",
        "namespace": "argocd",
        "kms_key_id": "",
        "keep": 30,
        "keep_days": 0,
    }
    step = inspect.signature(backup_export.run).parameters
    assert list(step) == list(BackupSettings.model_fields)  # the step's parameters are the settings
    assert {n: p.default for n, p in step.items() if n != "bucket"} == DEFAULTS
    assert step["bucket"].default is inspect.Parameter.empty  # required, as the CronWorkflow says

    from imagebump.commands import backup

    parser = argparse.ArgumentParser()
    backup.add_parser(parser.add_subparsers())
    args = parser.parse_args(["backup", "--bucket", "b-1"])
    assert backup.settings_of(args) == BackupSettings(bucket="b-1", **DEFAULTS)
    args = parser.parse_args(["backup", "--bucket", "b-1", "--keep", "0", "--kms-key-id", ""])
    assert backup.settings_of(args).keep == 0 and backup.settings_of(args).kms_key_id == ""
    helptext = parser._subparsers._group_actions[0].choices["backup"].format_help()
    for flag, default in (("--prefix", "argocd-backups"), ("--cluster", "in-cluster"), ("--keep", "30")):
        assert flag in helptext and f"default: {default})" in " ".join(helptext.split())


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"bucket": "B!"}, "bucket 'B!' is not a valid S3 bucket name; pass --bucket NAME", id="bucket"
        ),
        pytest.param({"bucket": None}, "bucket None is not a valid S3 bucket name", id="bucket-none"),
        pytest.param({"bucket": "ok-b", "prefix": "a/../b"}, "prefix 'a/../b' is not a usable", id="prefix"),
        pytest.param(
            {"bucket": "ok-b", "cluster": "/"}, "cluster '/' is not a usable S3 key segment", id="cluster"
        ),
        pytest.param(
            {"bucket": "ok-b", "namespace": "Argo"}, "namespace 'Argo' is not a valid Kubernetes", id="ns"
        ),
        pytest.param(
            {"bucket": "ok-b", "keep": -1}, "keep (-1) and keep-days (0) must be 0 (off)", id="keep"
        ),
        pytest.param({"bucket": "ok-b", "keep_days": -2}, "keep (30) and keep-days (-2)", id="keep-days"),
        pytest.param(
            {"bucket": "ok-b", "keep": "many"}, "backup setting keep: Input should be", id="keep-type"
        ),
        pytest.param({"bucket": "ok-b", "kms": "x"}, "backup setting kms: Extra inputs", id="unknown"),
        pytest.param({}, "backup setting bucket: Field required", id="no-bucket"),
    ],
)
def test_bad_settings_are_one_config_error_naming_the_setting(values, message) -> None:
    with pytest.raises(ConfigError) as info:
        BackupSettings.parse(**values)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("prefix", "cluster", "expected"),
    [
        ("argocd-backups", "in-cluster", "argocd-backups/in-cluster/"),
        ("/a/b/", "prod-eu", "a/b/prod-eu/"),
        ("", "prod", "prod/"),
        ("x", "eu/prod", "x/eu/prod/"),
    ],
)
def test_prefix_path(prefix, cluster, expected) -> None:
    assert BackupSettings.parse(bucket="ok-b", prefix=prefix, cluster=cluster).prefix_path == expected


def test_settings_take_numbers_as_the_workflow_passes_them() -> None:
    settings = BackupSettings.parse(bucket="ok-b", keep="14", keep_days="7")
    assert (settings.keep, settings.keep_days) == (14, 7)


# --- archive names ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("p/c/2026/01/02/030405Z.yaml.gz", (datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), 0)),
        ("p/c/2026/01/02/030405Z-3.yaml.gz", (datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), 3)),
        ("p/c/2026/01/02/030405Z.index.json", None),
        ("p/c/notes.txt", None),
    ],
)
def test_archive_time(key, expected) -> None:
    assert retention.archive_time(key) == expected


def test_archive_and_index_keys() -> None:
    created = datetime(2026, 12, 1, 3, 0, 0, tzinfo=UTC)
    base = retention.archive_key("argocd-backups/prod-eu/", created)
    assert base == "argocd-backups/prod-eu/2026/12/01/030000Z"
    assert retention.index_key(base + "-1.yaml.gz") == base + "-1.index.json"


# --- restore's decision -------------------------------------------------------------------------------
def _obj(kind: str, name: str, ns: str = "argocd", **extra) -> dict:
    api = "v1" if kind in ("ConfigMap", "Secret") else "argoproj.io/v1alpha1"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns}, **extra}


CM = _obj("ConfigMap", "argocd-cm", data={"a": "1"})
APP = _obj("Application", "app", "team-a", spec={"project": "default"})
PROJ = _obj("AppProject", "default", spec={})
SET = _obj("ApplicationSet", "gen", spec={})
SECRET = _obj("Secret", "repo", data={"password": "c2VjcmV0"})


def _key(o: dict) -> tuple[str, str, str]:
    return (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"])


@pytest.mark.parametrize(
    ("desired", "live", "others", "prune", "expected"),
    [
        pytest.param([CM], {}, [], False, [("ConfigMap", "create")], id="missing-is-created"),
        pytest.param([CM], {_key(CM): CM}, [], False, [("ConfigMap", "unchanged")], id="equal"),
        pytest.param(
            [CM], {_key(CM): {**CM, "data": {"a": "2"}}}, [], False, [("ConfigMap", "change")], id="differs"
        ),
        pytest.param(
            [CM],
            {_key(CM): {**CM, "metadata": {**CM["metadata"], "resourceVersion": "9", "uid": "u"}}},
            [],
            False,
            [("ConfigMap", "unchanged")],
            id="server-metadata-is-no-change",
        ),
        pytest.param(
            [APP, PROJ, CM],
            {},
            [],
            False,
            [("ConfigMap", "create"), ("AppProject", "create"), ("Application", "create")],
            id="apply-order",
        ),
        pytest.param(
            [],
            {},
            [SECRET, APP, SET, PROJ],
            False,
            [
                ("ApplicationSet", "extra"),
                ("Application", "extra"),
                ("AppProject", "extra"),
                ("Secret", "extra"),
            ],
            id="extras-kept-in-prune-order",
        ),
        pytest.param(
            [],
            {},
            [APP, SET],
            True,
            [("ApplicationSet", "delete"), ("Application", "delete")],
            id="prune-deletes",
        ),
        pytest.param(
            [APP],
            {_key(APP): APP},
            [APP],
            True,
            [("Application", "unchanged")],
            id="archived-objects-are-never-pruned",
        ),
    ],
)
def test_decide(desired, live, others, prune, expected) -> None:
    entries = restore_plan.plan_restore({_key(o): o for o in desired}, live, others, prune=prune)
    assert [(e.kind, e.action) for e in entries] == expected


def test_decide_masks_secret_values_in_the_diff() -> None:
    live = {_key(SECRET): {**SECRET, "data": {"password": "b2xk"}}}
    (entry,) = restore_plan.plan_restore({_key(SECRET): SECRET}, live, [], prune=False)
    assert entry.action == "change"
    text = "\n".join(entry.diff)
    assert "*** (changed)" in text and "c2VjcmV0" not in text and "b2xk" not in text

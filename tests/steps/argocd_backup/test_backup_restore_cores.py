"""The pure cores of backup-export and restore, table-tested without Kubernetes or S3.

:class:`steps.argocd_backup.settings.BackupSettings` (the one home of the backup's settings and their
defaults), :mod:`steps.argocd_backup.retention` (archive names, what expires) and
:func:`steps.argocd_backup.restore_plan.plan_restore` (what a restore does with each object). No fake, no server: these
functions take values and return values.
"""

from __future__ import annotations

import argparse
import inspect
import random
from datetime import UTC, datetime, timedelta

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
    ("values", "setting", "fix"),
    [
        pytest.param({"bucket": "B!"}, "bucket", "pass --bucket NAME", id="bucket"),
        pytest.param({"bucket": None}, "bucket", "", id="bucket-none"),
        pytest.param({"bucket": "ok-b", "prefix": "a/../b"}, "prefix", "", id="prefix"),
        pytest.param({"bucket": "ok-b", "cluster": "/"}, "cluster", "", id="cluster"),
        pytest.param({"bucket": "ok-b", "namespace": "Argo"}, "namespace", "", id="ns"),
        pytest.param({"bucket": "ok-b", "keep": -1}, "keep", "", id="keep"),
        pytest.param({"bucket": "ok-b", "keep_days": -2}, "keep_days", "", id="keep-days"),
        pytest.param({"bucket": "ok-b", "keep": "many"}, "keep", "", id="keep-type"),
        pytest.param({"bucket": "ok-b", "kms": "x"}, "kms", "", id="unknown"),
        pytest.param({}, "bucket", "", id="no-bucket"),
    ],
)
def test_bad_settings_are_one_config_error_naming_the_setting(values, setting, fix) -> None:
    """The setting is the error's field; ``fix`` is how to set it where the values came from."""
    with pytest.raises(ConfigError) as info:
        BackupSettings.parse(**values)
    assert info.value.field == setting
    if fix:
        assert fix in str(info.value)


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


# --- retention: exactly this cluster's archives; never the last good one -----------------------------
PROD = "argocd-backups/prod/"


def _archive(prefix: str, day: int, second: int = 0) -> str:
    return f"{prefix}2026/01/{day:02d}/0300{second:02d}Z.yaml.gz"


@pytest.mark.parametrize(
    "foreign",
    [
        pytest.param(_archive("argocd-backups/prod/eu/", 1), id="cluster-prod/eu-under-prod"),
        pytest.param(_archive("argocd-backups/prod/argocd-backups/prod/", 1), id="nested-install-prefix"),
        pytest.param(_archive("argocd-backups/prod/keep/", 1), id="copy-kept-under-keep"),
        pytest.param("argocd-backups/prod/2026/01/01/030000Z.yaml.gz.bak", id="suffixed-name"),
        pytest.param("argocd-backups/prod/2026/13/01/030000Z.yaml.gz", id="not-a-date"),
        pytest.param("argocd-backups/prod/x2026/01/01/030000Z.yaml.gz", id="segment-not-a-year"),
        pytest.param("argocd-backups/production/2026/01/01/030000Z.yaml.gz", id="cluster-name-prefix"),
    ],
)
def test_retention_considers_only_this_clusters_exact_archive_keys(foreign) -> None:
    own = [_archive(PROD, d) for d in (2, 3)]
    listing = [foreign, retention.index_key(foreign) if foreign.endswith(".yaml.gz") else foreign, *own]
    expired = retention.select_expired(
        listing, prefix=PROD, keep=1, keep_days=0, now=datetime(2026, 2, 1, tzinfo=UTC), protect=own[-1]
    )
    assert expired == [own[0]]
    assert retention.archive_time(foreign, PROD) is None


def _index(counts: dict[str, int], suspect: bool = False) -> dict:
    return {"counts": counts, "suspect": suspect}


GOOD = {"ConfigMap": 7, "Secret": 11, "AppProject": 4, "ApplicationSet": 3, "Application": 60}


@pytest.mark.parametrize(
    ("counts", "suspect"),
    [
        pytest.param(GOOD, False, id="same"),
        pytest.param({**GOOD, "Application": 31}, False, id="some-apps-gone-is-normal"),
        pytest.param({**GOOD, "Application": 0}, True, id="no-applications-where-there-were-some"),
        pytest.param(
            {"ConfigMap": 7, "Secret": 11, "AppProject": 1, "Application": 2}, True, id="under-half"
        ),
    ],
)
def test_a_backup_far_smaller_than_the_last_healthy_one_is_suspect(counts, suspect) -> None:
    reason = retention.shrink_reason(counts, GOOD, "030000Z.yaml.gz")
    assert bool(reason) is suspect
    if suspect:
        assert "030000Z.yaml.gz" in reason


def _simulate(runs: list[str], keep: int, keep_days: int = 0) -> tuple[dict[str, dict], list[str]]:
    """The bucket after ``runs`` (``good``: a full Argo CD; ``shrunk``: a tenth of it; ``empty``: no
    Argo CD found — the backup refuses and writes nothing), as backup-export decides: the suspect
    mark against the newest healthy archive, then retention. Returns the indexes left and the keys
    of the healthy archives ever written."""
    bucket: dict[str, dict] = {}
    healthy_written: list[str] = []
    for i, run in enumerate(runs):
        if run == "empty":
            continue  # refused: nothing written (tested against S3 in test_backup_retention.py)
        counts = GOOD if run == "good" else {"ConfigMap": 7, "Secret": 11, "AppProject": 1, "Application": 0}
        keys = retention.archives(list(bucket), PROD)
        baseline = next((k for k in keys if not bucket[k]["suspect"]), None)
        reason = retention.shrink_reason(counts, bucket[baseline]["counts"], baseline) if baseline else ""
        created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=i)
        key = retention.archive_key(PROD, created) + ".yaml.gz"
        bucket[key] = _index(counts, bool(reason))
        if not reason:
            healthy_written.append(key)
        flags = {k: v["suspect"] for k, v in bucket.items()}
        for gone in retention.select_expired(
            list(bucket), prefix=PROD, keep=keep, keep_days=keep_days, now=created, protect=key, suspect=flags
        ):
            del bucket[gone]
    return bucket, healthy_written


def test_three_good_backups_survive_three_backups_of_a_broken_argo_cd() -> None:
    bucket, good = _simulate(["good"] * 3 + ["shrunk"] * 3, keep=3)
    assert set(good) <= set(bucket)
    assert [v["suspect"] for v in bucket.values()].count(True) == 3


def test_a_real_shrink_settles_after_keep_healthy_backups() -> None:
    """--accept-shrink (or a recovered Argo CD) makes healthy archives again; once `keep` of them
    follow the suspect ones, the old archives expire as usual."""
    bucket, good = _simulate(["good"] * 3 + ["shrunk"] * 2 + ["good"] * 3, keep=3)
    assert sorted(bucket) == sorted(good[-3:])


@pytest.mark.parametrize("seed", range(40))
def test_no_sequence_of_runs_loses_the_newest_healthy_archive(seed) -> None:
    """Property over random sequences of good / shrunk / empty runs and retention settings: the
    newest healthy archive ever written is always in the bucket, and so are at least
    min(keep, healthy written) healthy archives."""
    rng = random.Random(seed)
    runs = [rng.choice(["good", "shrunk", "empty"]) for _ in range(rng.randint(1, 25))]
    keep, keep_days = rng.choice([(1, 0), (2, 0), (3, 0), (0, 1), (0, 3), (2, 2)])
    bucket, good = _simulate(runs, keep=keep, keep_days=keep_days)
    if good:
        assert good[-1] in bucket, (runs, keep, keep_days)
        assert sum(1 for k in good if k in bucket) >= min(max(keep, 1), len(good)), (runs, keep, keep_days)


def test_the_newest_healthy_archive_stays_when_newer_ones_have_no_readable_index() -> None:
    """Archives whose index is missing or damaged cannot be verified at restore: they do not count
    as healthy, so the newest archive that does is kept whatever the rules say."""
    keys = [_archive(PROD, d) for d in (1, 2, 3, 4)]
    flags = {keys[0]: False, keys[1]: False, keys[2]: None, keys[3]: None}
    expired = retention.select_expired(
        keys,
        prefix=PROD,
        keep=2,
        keep_days=0,
        now=datetime(2026, 2, 1, tzinfo=UTC),
        protect=keys[3],
        suspect=flags,
    )
    assert expired == [keys[0]]

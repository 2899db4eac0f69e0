"""Backup outcomes become messages (issue 36): a restore that finished or stopped halfway (told by
:func:`steps.argocd_backup.restore.restore`), sent by ``imagebump restore`` to the destinations.
(backup-export failed and a suspect archive: the CronWorkflow's exit handler,
tests/steps/notify/test_workflow_outcomes.py and tests/e2e/test_notify_exit_handler.py.)"""

from __future__ import annotations

import pytest

from steps.argocd_backup import restore
from steps.domain.errors import PermissionDeniedError
from steps.notify.decide import Outcome
from steps.notify.step import send_now
from tests.steps.argocd_backup.test_restore import TOTAL, backup, empty, s3, source  # noqa: F401 - fixtures
from tests.steps.notify.receivers import Receiver


def test_a_finished_restore_says_so_with_its_count(empty, backup, s3):  # noqa: F811
    told: list[tuple[str, dict]] = []
    restore.restore(
        backup.url, api_factory=empty.factory, s3=s3, do_apply=True, on_outcome=lambda *a: told.append(a)
    )
    assert told == [("restore-finished", {"archive": backup.url, "objects": str(TOTAL)})]


def test_a_restore_stopped_halfway_says_how_far_it_got(empty, backup, s3):  # noqa: F811
    empty.fake.forbid("create", "applications")
    told: list[tuple[str, dict]] = []
    with pytest.raises(PermissionDeniedError):
        restore.restore(
            backup.url, api_factory=empty.factory, s3=s3, do_apply=True, on_outcome=lambda *a: told.append(a)
        )
    ((kind, fields),) = told
    assert kind == "restore-halfway" and fields["archive"] == backup.url
    applied, remaining = int(fields["applied"]), int(fields["remaining"])
    assert applied > 0 and remaining > 0 and applied + remaining == TOTAL


def test_a_dry_run_says_nothing(empty, backup, s3):  # noqa: F811
    told: list = []
    restore.restore(backup.url, api_factory=empty.factory, s3=s3, on_outcome=lambda *a: told.append(a))
    assert told == []


def test_send_now_sends_once_and_never_raises(tmp_path):
    env = {
        "IMAGEBUMP_NOTIFY_FILE": str(tmp_path / "absent"),
        "IMAGEBUMP_NOTIFY_LEDGER_DIR": str(tmp_path / "ledger"),
    }
    halfway = Outcome("restore-halfway", "restore-1", "s3://b/a.yaml.gz", {"applied": "3", "remaining": "9"})
    with Receiver("teams") as teams:
        report = send_now([halfway], {**env, "IMAGEBUMP_NOTIFY_TEAMS_URL": teams.url})
        assert report.counts == {"sent": 1}
        assert send_now([halfway], {**env, "IMAGEBUMP_NOTIFY_TEAMS_URL": teams.url}).counts == {
            "duplicate": 1
        }
    facts = teams.received[0].json["attachments"][0]["content"]["body"][1]["facts"]
    assert {f["title"]: f["value"] for f in facts}["remaining"] == "9"
    bad = tmp_path / "bad.yaml"
    bad.write_text("destinations: 3")
    assert send_now([halfway], {**env, "IMAGEBUMP_NOTIFY_FILE": str(bad)}).counts == {}

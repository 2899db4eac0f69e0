"""``imagebump run --local`` hands the exit handler what a cluster would (issue 36): the
``imagebump-notify`` Secret from this machine's settings, never those secrets in the steps' env."""

from __future__ import annotations

import json

import pytest

from imagebump.commands.run import step_environment
from imagebump.local import notify_outcomes
from steps.notify import config
from steps.notify.decide import NotifyConfigError


def test_the_settings_become_the_secret_the_exit_handler_reads(tmp_path):
    environ = {
        "IMAGEBUMP_NOTIFY_FILE": str(tmp_path / "absent"),
        "IMAGEBUMP_NOTIFY_SLACK_URL": "https://hooks.slack.com/services/T/B/secret-part",
        "IMAGEBUMP_NOTIFY_WEBHOOK_URL": "https://receiver.example/hook",
        "IMAGEBUMP_NOTIFY_WEBHOOK_SECRET": "whsec-abcdefabcdef",
    }
    secret = notify_outcomes.executor_secrets(environ)
    text = secret["imagebump-notify"]["notify.yaml"]
    back = config.parse(json.loads(text))
    assert {d.name: (d.kind, d.url, d.secret) for d in back.destinations.values()} == {
        "slack": ("slack", environ["IMAGEBUMP_NOTIFY_SLACK_URL"], ""),
        "webhook": ("webhook", environ["IMAGEBUMP_NOTIFY_WEBHOOK_URL"], "whsec-abcdefabcdef"),
    }
    # the steps' environment carries none of them
    env = step_environment({**environ, "IMAGEBUMP_NOTIFY_LEDGER_DIR": "/x"}, None, None)
    assert not any(v in env.values() for k, v in environ.items() if k != "IMAGEBUMP_NOTIFY_FILE")
    assert env["IMAGEBUMP_NOTIFY_LEDGER_DIR"] == "/x"


def test_no_settings_no_secret_and_a_bad_file_is_refused_before_the_first_event(tmp_path):
    assert notify_outcomes.executor_secrets({"IMAGEBUMP_NOTIFY_FILE": str(tmp_path / "absent")}) == {}
    bad = tmp_path / "notify.yaml"
    bad.write_text("destinations: {team: {type: pager, url: x}}")
    with pytest.raises(NotifyConfigError, match="team"):
        notify_outcomes.executor_secrets({"IMAGEBUMP_NOTIFY_FILE": str(bad)})


def test_the_ledger_directory_is_absolute(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (value,) = notify_outcomes.ledger_environment({}).values()
    assert value.startswith(str(tmp_path)) and value.endswith("notifications")

"""Notifications (issue 36) against real HTTP receivers on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import re
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steps.notify import config, send, signature
from steps.notify.decide import (
    ALARMS,
    FIELDS,
    GITHUB_ONLY,
    NOOPS,
    NotifyConfigError,
    Outcome,
    Routing,
    decide,
)
from steps.notify.ledger import FileLedger
from steps.notify.payloads import one_line
from steps.notify.step import notify, parse_outcomes, with_workflow_failure
from tests.secret_scan import register
from tests.steps.notify.receivers import Receiver

SECRET = register("whsec-0123456789abcdef")  # the suite-wide scan fails any test that prints it
NOW = 1_800_000_000.0


def _fields(kind: str) -> dict[str, str]:
    return {name: f"{name}-value" for name in FIELDS[kind]}


def _cfg(slack: Receiver, teams: Receiver, hook: Receiver, **routing) -> config.NotifyConfig:
    return config.parse(
        {
            "destinations": {
                "slack": {"type": "slack", "url": slack.url},
                "teams": {"type": "teams", "url": teams.url},
                "hook": {"type": "webhook", "url": hook.url, "secret": SECRET},
            },
            **routing,
        }
    )


class _Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def receivers():
    with Receiver("slack") as slack, Receiver("teams") as teams, Receiver("webhook") as hook:
        yield slack, teams, hook


@pytest.mark.parametrize("kind", sorted(GITHUB_ONLY))
def test_a_status_only_outcome_sends_nothing_to_the_teams_channels(kind, receivers, tmp_path):
    """``idle``/``not-verified`` end GitHub's ``imagebump/live``; Slack, Teams and webhooks hear nothing."""
    outcome = Outcome(kind, "event-1", "github.com/acme/gitops/overlays/prod", _fields(kind))
    report = notify([outcome], _cfg(*receivers), FileLedger(tmp_path), sleep=_Sleeps(), clock=lambda: NOW)
    assert report.counts == {}
    assert [len(r.received) for r in receivers] == [0, 0, 0]


@pytest.mark.parametrize("kind", sorted(set(FIELDS) - GITHUB_ONLY))
def test_each_outcome_sends_exactly_one_message_per_destination_with_its_fields(kind, receivers, tmp_path):
    slack, teams, hook = receivers
    outcome = Outcome(kind, "event-1", "github.com/acme/gitops/overlays/prod", _fields(kind))
    report = notify([outcome], _cfg(*receivers), FileLedger(tmp_path), sleep=_Sleeps(), clock=lambda: NOW)
    assert report.counts == {"sent": 3}
    assert [len(r.received) for r in receivers] == [1, 1, 1]
    text = slack.received[0].json["text"]
    facts = teams.received[0].teams_facts
    payload = hook.received[0].json
    assert payload["outcome"] == kind and payload["alarm"] == (kind in ALARMS)
    for name, value in _fields(kind).items():
        assert value in text
        assert facts[name] == value
        assert payload["fields"][name] == value


def test_the_webhook_signature_verifies_as_a_receiver_would_and_old_timestamps_are_rejected(
    receivers, tmp_path
):
    _, _, hook = receivers
    notify(
        [Outcome("live", "e", "t", _fields("live"))],
        _cfg(*receivers),
        FileLedger(tmp_path),
        clock=lambda: NOW,
    )
    got = hook.received[0]
    header = got.headers[signature.HEADER]
    assert signature.verify(SECRET, header, got.body, now=NOW + 10)
    assert not signature.verify(SECRET, header, got.body, now=NOW + signature.TOLERANCE + 1)  # replayed later
    assert not signature.verify(SECRET, header, got.body + b" ", now=NOW)  # body changed
    assert not signature.verify("another-secret", header, got.body, now=NOW)
    assert not signature.verify(SECRET, "v1=00", got.body, now=NOW)


@pytest.mark.parametrize("kind", sorted(NOOPS))
def test_no_ops_send_nothing(kind, receivers, tmp_path):
    report = notify([Outcome(kind, "e", "t")], _cfg(*receivers), FileLedger(tmp_path))
    assert sum(report.counts.values()) == 0
    assert all(not r.received for r in receivers)


def test_a_redelivered_event_and_a_resubmitted_workflow_send_nothing_new(receivers, tmp_path):
    outcome = Outcome("pr-opened", "event-7", "t", _fields("pr-opened"))
    cfg = _cfg(*receivers)
    first = notify([outcome], cfg, FileLedger(tmp_path / "ledger"))
    # a retry in the same pod, a redelivery, and a resubmit in a new pod (a new ledger object
    # over the same durable record)
    again = notify([outcome, outcome], cfg, FileLedger(tmp_path / "ledger"))
    assert first.counts == {"sent": 3}
    assert again.counts == {"duplicate": 6}
    assert [len(r.received) for r in receivers] == [1, 1, 1]
    # another outcome of the same event and target is news
    later = notify([Outcome("live", "event-7", "t", _fields("live"))], cfg, FileLedger(tmp_path / "ledger"))
    assert later.counts == {"sent": 3}


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_receiver_answering_errors_is_retried_a_bounded_number_of_times_then_counted(
    status, tmp_path, caplog
):
    with Receiver("slack", status=status) as slack:
        cfg = config.parse({"destinations": {"s": {"type": "slack", "url": slack.url}}})
        sleeps = _Sleeps()
        report = notify(
            [Outcome("failed", "e", "t", _fields("failed"))], cfg, FileLedger(tmp_path), sleep=sleeps
        )
    assert report.counts == {"failed": 1}
    assert len(slack.received) == send.ATTEMPTS
    assert len(sleeps) == send.ATTEMPTS - 1
    assert any(r.levelno == logging.WARNING and "failed" in r.getMessage() for r in caplog.records)
    assert "notifications_total" in send.metrics_text() and 'result="failed"' in send.metrics_text()


def test_a_failed_send_is_tried_again_by_the_next_run(tmp_path):
    outcome = Outcome("mismatch", "e", "t", _fields("mismatch"))
    with Receiver("slack", status=500) as down:
        cfg = config.parse({"destinations": {"s": {"type": "slack", "url": down.url}}})
        assert notify([outcome], cfg, FileLedger(tmp_path), sleep=_Sleeps()).counts == {"failed": 1}
    with Receiver("slack") as up:
        cfg = config.parse({"destinations": {"s": {"type": "slack", "url": up.url}}})
        assert notify([outcome], cfg, FileLedger(tmp_path), sleep=_Sleeps()).counts == {"sent": 1}
        assert notify([outcome], cfg, FileLedger(tmp_path), sleep=_Sleeps()).counts == {"duplicate": 1}
    assert len(up.received) == 1


def test_a_slow_receiver_times_out_and_does_not_hold_the_others(tmp_path):
    hold = threading.Event()
    with Receiver("slack", hold=hold) as slow, Receiver("teams") as teams:
        cfg = config.parse(
            {
                "destinations": {
                    "slow": {"type": "slack", "url": slow.url},
                    "t": {"type": "teams", "url": teams.url},
                }
            }
        )
        report = notify(
            [Outcome("timeout", "e", "t", _fields("timeout"))],
            cfg,
            FileLedger(tmp_path),
            sleep=_Sleeps(),
            timeout=0.2,
        )
        hold.set()
    assert report.counts == {"failed": 1, "sent": 1}
    assert len(teams.received) == 1


def test_a_receiver_that_is_down_is_counted_not_raised(tmp_path):
    with Receiver("slack") as gone:
        url = gone.url
    cfg = config.parse({"destinations": {"s": {"type": "slack", "url": url}}})
    report = notify(
        [Outcome("failed", "e", "t", _fields("failed"))], cfg, FileLedger(tmp_path), sleep=_Sleeps()
    )
    assert report.counts == {"failed": 1}


def test_routing_alarms_to_one_channel_the_rest_to_another_and_rules_choose_theirs():
    routing = Routing(default=("team",), alarms=("ops",), others=("feed",))
    assert [m.destination for m in decide(Outcome("mismatch", "e", "t"), routing)] == ["ops"]
    assert [m.destination for m in decide(Outcome("committed", "e", "t"), routing)] == ["feed"]
    assert [
        m.destination for m in decide(Outcome("committed", "e", "t", rule_notify=("a", "b")), routing)
    ] == [
        "a",
        "b",
    ]
    assert [m.destination for m in decide(Outcome("live", "e", "t"), Routing(default=("team",)))] == ["team"]
    with pytest.raises(NotifyConfigError, match="'nowhere'"):
        decide(Outcome("live", "e", "t", rule_notify=("nowhere",)), routing, known=["team", "ops", "feed"])


def test_a_workflow_that_failed_without_an_alarm_becomes_failed_with_its_link():
    found = parse_outcomes(
        json.dumps([{"kind": "unchanged", "target": "t", "fields": {"image": "i:1"}}]), "e"
    )
    failures = json.dumps(
        [{"displayName": "commit-pr(0)", "message": "exit 75", "templateName": "commit-pr"}]
    )
    out = with_workflow_failure(found, "Failed", failures, "e", "https://argo/workflows/ns/wf")
    assert out[-1].kind == "failed" and out[-1].fields["workflow_link"] == "https://argo/workflows/ns/wf"
    assert with_workflow_failure(found, "Succeeded", "", "e", "u") == found
    backup = with_workflow_failure([], "Error", "null", "run-1", "u", backup=True)
    assert [o.kind for o in backup] == ["backup-failed"]


@pytest.mark.parametrize(
    "data, fault",
    [
        pytest.param({}, "destinations", id="no-destinations"),
        pytest.param({"destinations": {"x": {"type": "irc", "url": "u"}}}, "'x'", id="unknown-type"),
        pytest.param(
            {"destinations": {"x": {"type": "webhook", "url": "u"}}}, "secret", id="webhook-unsigned"
        ),
        pytest.param(
            {"destinations": {"x": {"type": "slack", "url": "u"}}, "alarms": ["y"]},
            "'y'",
            id="alarms-unknown",
        ),
    ],
)
def test_a_bad_notifications_file_names_the_field(data, fault):
    with pytest.raises(NotifyConfigError, match=fault):
        config.parse(data)


def test_environment_destinations_and_secret_files(tmp_path):
    (tmp_path / "secret").write_text(SECRET + "\n")
    cfg = config.load(
        {
            config.FILE_ENV: str(tmp_path / "absent.yaml"),
            "IMAGEBUMP_NOTIFY_SLACK_URL": "https://hooks.slack.example/services/T/B/X",
            "IMAGEBUMP_NOTIFY_WEBHOOK_URL": "https://receiver.example/hook",
            "IMAGEBUMP_NOTIFY_WEBHOOK_SECRET_FILE": str(tmp_path / "secret"),
        }
    )
    assert set(cfg.destinations) == {"slack", "webhook"}
    assert cfg.destinations["webhook"].secret == SECRET
    assert SECRET not in repr(cfg) and "hooks.slack.example" not in repr(cfg)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=12, max_size=24))
def test_no_secret_ever_appears_in_a_message_a_log_or_an_output(token, tmp_path_factory, caplog):
    tmp = tmp_path_factory.mktemp("ledger")
    caplog.clear()
    with Receiver("slack", status=500) as down, Receiver("webhook") as hook:
        cfg = config.parse(
            {
                "destinations": {
                    "down": {"type": "slack", "url": f"{down.url}?token={token}"},
                    "hook": {"type": "webhook", "url": f"{hook.url}/{token}", "secret": token + "s"},
                }
            }
        )
        report = notify(
            [Outcome("failed", "e", "t", _fields("failed"))], cfg, FileLedger(tmp), sleep=_Sleeps()
        )
    bodies = b"".join(r.body for r in down.received + hook.received).decode()
    logs = "\n".join(r.getMessage() for r in caplog.records) + "\n".join(report.failures)
    for secret in (token, token + "s"):
        assert secret not in bodies
        assert secret not in logs
        assert secret not in str(report.counts)


def test_a_rule_names_its_notification_destinations_and_refuses_a_bad_list():
    from steps.domain.errors import RuleFieldError
    from steps.rules.schema import parse_rule

    base = {
        "registryURI": "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/app",
        "githubRepository": "https://github.com/o/r/apps/app",
    }
    assert parse_rule({**base, "notify": ["team", "ops"]}).notify == ["team", "ops"]
    assert parse_rule({**base, "notify": None}).notify == []
    with pytest.raises(RuleFieldError, match="notify"):
        parse_rule({**base, "notify": "team"})


def test_the_receiver_snippet_in_the_docs_verifies_our_signature():
    import re
    import time
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "notifications.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    scope: dict = {}
    exec(snippet, scope)  # noqa: S102 - the documentation's own code
    body = b'{"outcome":"live"}'
    now = int(time.time())
    assert scope["verify"](SECRET.encode(), signature.sign(SECRET, body, now), body)
    assert not scope["verify"](SECRET.encode(), signature.sign(SECRET, body, now - 301), body)


def test_the_catalogue_names_every_outcome_its_fields_and_its_producer():
    """docs/notifications.md's catalogue is what :data:`steps.notify.decide.FIELDS` sends: every
    outcome, every field, and what sends it (issue 36: no message without a producer)."""
    import re
    from pathlib import Path

    from steps.notify.decide import ALARMS, FIELDS

    doc = (Path(__file__).resolve().parents[3] / "docs" / "notifications.md").read_text()
    section = doc.split("## The message catalogue", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| `")]
    seen = {}
    for outcomes, alarm, fields, producer in rows:
        for kind in re.findall(r"`([a-z-]+)`", outcomes):
            seen[kind] = (alarm.strip() == "yes", set(re.findall(r"`([a-z_]+)`", fields)), producer.strip())
    assert set(seen) == set(FIELDS)
    for kind, (alarm, fields, producer) in seen.items():
        assert alarm == (kind in ALARMS), kind
        assert set(FIELDS[kind]) <= fields, kind
        assert producer, f"{kind}: the catalogue names no producer"


# what the audit saw: a git author ident and a hold reason that pinged the channel and made a link
INJECTION = "rollback by Ann <!channel> (r:2 → r:1) <http://evil.example|click> & <@U012AB3CD> &amp;"


def test_slack_shows_data_as_text_never_a_ping_a_mention_or_a_link(tmp_path):
    fields = {"image": "r:1", "overlay": "apps/x", "by": "Ann <!channel>", "commit": "abc1234"}
    outcome = Outcome("held", "e", "t <!here>", {**fields, "reason": INJECTION})
    with Receiver("slack") as slack:
        cfg = config.parse({"destinations": {"s": {"type": "slack", "url": slack.url}}})
        assert notify([outcome], cfg, FileLedger(tmp_path), sleep=_Sleeps()).counts == {"sent": 1}
    (got,) = slack.received
    assert got.slack_controls == []
    assert INJECTION in got.slack_shown and "Ann <!channel>" in got.slack_shown


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40) | st.sampled_from(
    ["<!channel>", "<!here|here>", "<http://x.example|click>", "&lt;!channel&gt;", "a & b", "<@U1>"]
)


@given(target=_TEXT, key=st.sampled_from(["reason", "by", "x-extra"]), value=_TEXT, alarm=st.booleans())
def test_slack_text_holds_no_control_sequence_and_no_unescaped_character_from_data(target, key, value, alarm):
    from steps.notify.decide import Message
    from steps.notify.payloads import body

    kind = "mismatch" if alarm else "held"
    message = Message("s", "k", kind, alarm, "title", "e", target, {key: value, "image": value})
    text = body("slack", message)["text"]
    assert "<" not in text and ">" not in text  # so no `<!…`, no `<http…`: Slack parses only `<…>`
    assert re.fullmatch(r"(?:[^&]|&(?:amp|lt|gt);)*", text, re.S)
    shown = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert one_line(target) in shown and (value == "" or one_line(value) in shown)
    # every line is ours: the title, then one `• *field*: value` per field (data starts none)
    facts = [line for line in text.split("\n")[1:] if line]
    assert len(facts) == (2 if value != "" else 0) and all(f.startswith("• *") for f in facts)


@given(
    value=st.builds(
        lambda parts, seps: "".join(p + s for p, s in zip(parts, seps, strict=False)),
        st.lists(_TEXT, min_size=1, max_size=4),
        st.lists(st.sampled_from(["\n", "\r\n", "\u2028", "\x85", "\n\n", "\v"]), min_size=1, max_size=4),
    )
    | _TEXT
    | st.sampled_from(
        ["- a", "1. b", "# h", "> q", "    code", "***", "---", "[x](http://e.example)", "&amp;"]
    )
)
def test_data_never_formats_a_teams_card_or_starts_a_line(value):
    """Teams renders Markdown (a CommonMark subset) in a card's text and facts: whatever a value
    holds, the card shows it as plain text on one line — no link, emphasis, list, heading, quote,
    code or entity — with CommonMark itself (markdown-it, HTML off as in cards) as the oracle."""
    from markdown_it import MarkdownIt

    from steps.notify.decide import Message
    from steps.notify.payloads import body

    message = Message("t", "k", "mismatch", True, "title", "e", value, {"reason": value, "k:" + value: "v"})
    card = body("teams", message)["attachments"][0]["content"]
    md = MarkdownIt("commonmark", {"html": False})
    texts = [card["body"][0]["text"]] + [
        part for fact in card["body"][1]["facts"] for part in (fact["title"], fact["value"])
    ]
    for text in texts:
        assert "\n" not in text and "\r" not in text
        tokens = md.parse(text)
        if not text.strip():  # blanks only (an NBSP, a space): nothing a card could format
            continue
        assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"], text
        children = tokens[1].children or []
        assert {c.type for c in children} <= {"text"}, (text, [c.type for c in children])
    if value:  # the reason's value, as the card shows it
        reason = card["body"][1]["facts"][0]["value"]
        shown = "".join(c.content for t in md.parse(reason) if t.type == "inline" for c in t.children or [])
        # (CommonMark shows U+0000 as U+FFFD: the renderer's own, not markup from data)
        assert shown.strip() == one_line(value).replace("\0", "\ufffd").strip()

"""Delivery against receivers that redirect, speak no HTTP, rate-limit or trickle, and a run's time
budget: what each receiver got, the counts, and what the ledger holds afterwards."""

from __future__ import annotations

import http.client
import time
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from steps.domain.errors import TransientError
from steps.notify import config, send
from steps.notify.decide import FIELDS, Outcome, decide
from steps.notify.ledger import FileLedger
from steps.notify.step import notify
from tests.secret_scan import register
from tests.steps.notify.receivers import Receiver

SECRET = register("whsec-limits-0123456789abcdef")
NOW = 1_800_000_000.0


class Clock:
    """Wall and monotonic time that only a sleep (or a slow post) moves."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now - NOW

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _outcome(kind: str = "failed", event: str = "e") -> Outcome:
    return Outcome(kind, event, "github.com/acme/gitops/overlays/prod", {f: f"{f}-v" for f in FIELDS[kind]})


def _claims(path) -> set[str]:
    return {p.name for p in path.iterdir()} if path.exists() else set()


def _run(cfg, ledger, clock: Clock, outcomes=None, **kw):
    return notify(
        outcomes or [_outcome()],
        cfg,
        ledger,
        sleep=clock.sleep,
        clock=clock.time,
        monotonic=clock.monotonic,
        **kw,
    )


# -- redirects ------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_never_followed_and_fails_the_message_at_once(status, tmp_path):
    with Receiver("webhook") as elsewhere:
        with Receiver("webhook", status=status, headers={"Location": f"{elsewhere.url}/steal"}) as moved:
            cfg = config.parse(
                {"destinations": {"h": {"type": "webhook", "url": moved.url, "secret": SECRET}}}
            )
            clock = Clock()
            report = _run(cfg, FileLedger(tmp_path), clock)
    assert report.counts == {"failed": 1}
    assert len(moved.received) == 1 and clock.sleeps == []  # permanent: not retried
    assert elsewhere.received == []  # neither the body nor the signature went anywhere else
    assert _claims(tmp_path) == set()  # given back: once the URL is fixed, a rerun sends it


# -- answers that are no HTTP ---------------------------------------------------------------------


def test_an_answer_that_is_no_http_fails_that_message_only_and_gives_its_claim_back(tmp_path):
    with Receiver("slack", garbage=True) as bad, Receiver("slack") as good:
        cfg = config.parse(
            {
                "destinations": {
                    "bad": {"type": "slack", "url": bad.url},
                    "good": {"type": "slack", "url": good.url},
                }
            }
        )
        first = _run(cfg, FileLedger(tmp_path), Clock())
        (good_message,) = [m for m in decide(_outcome(), cfg.routing) if m.destination == "good"]
        assert _claims(tmp_path) == {good_message.key}
        again = _run(cfg, FileLedger(tmp_path), Clock())
    assert first.counts == {"failed": 1, "sent": 1}
    assert len(bad.received) == 2 * send.ATTEMPTS  # transient: retried, and tried again by the rerun
    assert again.counts == {"failed": 1, "duplicate": 1}
    assert len(good.received) == 1


@pytest.mark.parametrize(
    "exc",
    [
        pytest.param(http.client.BadStatusLine("x"), id="BadStatusLine"),
        pytest.param(http.client.IncompleteRead(b""), id="IncompleteRead"),
        pytest.param(http.client.LineTooLong("header"), id="LineTooLong"),
        pytest.param(http.client.InvalidURL("x"), id="InvalidURL"),
    ],
)
def test_every_http_client_exception_is_a_transient_failure_of_its_message(exc, tmp_path):
    answers: list[str] = []

    def post(url, body, headers, deadline):
        answers.append(url)
        if url.endswith("/bad"):
            raise exc
        return 200

    cfg = config.parse(
        {
            "destinations": {
                "bad": {"type": "slack", "url": "https://hooks.example/bad"},
                "good": {"type": "slack", "url": "https://hooks.example/good"},
            }
        }
    )
    report = _run(cfg, FileLedger(tmp_path), Clock(), post=post)
    assert report.counts == {"failed": 1, "sent": 1}
    assert answers.count("https://hooks.example/bad") == send.ATTEMPTS
    assert len(_claims(tmp_path)) == 1


class BrokenLedger:
    """A ledger whose claim or release fails as S3 may (a transient error, a lost connection)."""

    def __init__(self, claim_fails_for: int = -1, release_fails: bool = False) -> None:
        self.keys: set[str] = set()
        self.calls = 0
        self.claim_fails_for = claim_fails_for
        self.release_fails = release_fails

    def claim(self, key: str) -> bool:
        self.calls += 1
        if self.calls == self.claim_fails_for:
            raise TransientError("S3 unreachable")
        if key in self.keys:
            return False
        self.keys.add(key)
        return True

    def sent(self, key: str) -> None:
        pass  # a claim is kept once it was sent: nothing more to record here

    def release(self, key: str) -> None:
        if self.release_fails:
            raise ConnectionResetError("S3 reset")
        self.keys.discard(key)


def test_a_ledger_that_fails_loses_no_count_and_stops_no_other_message():
    outcomes = [_outcome(event=f"e{i}") for i in range(3)]
    sent: list[str] = []

    def post(url, body, headers, deadline):
        sent.append(headers["X-Imagebump-Delivery"])
        return 500 if len(sent) <= send.ATTEMPTS else 200  # the first message fails for good

    cfg = config.parse({"destinations": {"s": {"type": "slack", "url": "https://hooks.example/s"}}})
    ledger = BrokenLedger(claim_fails_for=2, release_fails=True)
    report = _run(cfg, ledger, Clock(), outcomes, post=post)
    # e0 failed (its release failed too), e1's claim failed (not sent), e2 sent
    assert report.counts == {"failed": 2, "sent": 1}
    assert len(set(sent)) == 2


def test_the_step_exits_0_whatever_delivery_meets(tmp_path, monkeypatch):
    from steps.notify import step as notify_step

    monkeypatch.setenv("IMAGEBUMP_NOTIFY_FILE", str(tmp_path / "absent.yaml"))
    monkeypatch.setenv("IMAGEBUMP_NOTIFY_SLACK_URL", "https://hooks.example/T/B/X")
    monkeypatch.setenv("IMAGEBUMP_NOTIFY_LEDGER_DIR", str(tmp_path / "ledger"))
    monkeypatch.delenv("IMAGEBUMP_NOTIFY_LEDGER_BUCKET", raising=False)
    monkeypatch.setattr(notify_step, "read_workflow", lambda name, env=None: {})

    def boom(*args, **kwargs):
        raise KeyError("surprise")

    monkeypatch.setattr(notify_step, "deliver", boom)
    out = notify_step.run(outcomes='[{"kind": "live", "target": "t"}]', workflow_name="wf")  # no SystemExit
    assert out["failed"] == 1


# -- 429 and Retry-After --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "retry_after, waits",
    [
        pytest.param("7", [7.0, 7.0], id="seconds"),
        pytest.param(
            format_datetime(datetime.fromtimestamp(NOW + 20, UTC), usegmt=True), [20.0, 2.0], id="http-date"
        ),
        pytest.param("0", [1.0, 2.0], id="zero-keeps-the-backoff"),
        pytest.param("soon", [1.0, 2.0], id="unreadable-keeps-the-backoff"),
    ],
)
def test_a_429_waits_as_long_as_retry_after_says(retry_after, waits, tmp_path):
    with Receiver("slack", status=429, headers={"Retry-After": retry_after}) as limited:
        cfg = config.parse({"destinations": {"s": {"type": "slack", "url": limited.url}}})
        clock = Clock()
        report = _run(cfg, FileLedger(tmp_path), clock)
    assert report.counts == {"failed": 1}
    assert len(limited.received) == send.ATTEMPTS
    # an HTTP date is read against the wall clock, which the first wait moved on to that date
    assert clock.sleeps == waits
    assert _claims(tmp_path) == set()


def test_a_retry_after_beyond_the_cap_or_the_budget_ends_the_tries_and_gives_the_claim_back(tmp_path):
    with Receiver("slack", status=429, headers={"Retry-After": str(int(send.RETRY_AFTER_CAP) + 1)}) as capped:
        cfg = config.parse({"destinations": {"s": {"type": "slack", "url": capped.url}}})
        clock = Clock()
        assert _run(cfg, FileLedger(tmp_path / "a"), clock).counts == {"failed": 1}
    assert len(capped.received) == 1 and clock.sleeps == []
    with Receiver("slack", status=429, headers={"Retry-After": "7"}) as limited:
        cfg = config.parse({"destinations": {"s": {"type": "slack", "url": limited.url}}})
        clock = Clock()
        assert _run(cfg, FileLedger(tmp_path / "b"), clock, budget=10).counts == {"failed": 1}
    assert clock.sleeps == [7.0] and len(limited.received) == 2  # a second wait would outlive the run
    assert _claims(tmp_path / "a") == _claims(tmp_path / "b") == set()


# -- the run's budget and a request's whole time ---------------------------------------------------


def test_messages_left_when_the_budget_is_spent_are_not_tried_nor_claimed_and_a_rerun_sends_them(tmp_path):
    clock = Clock()
    deadlines: list[float] = []
    got: list[str] = []

    def slow_post(url, body, headers, deadline):  # each receiver takes 100 s to answer
        deadlines.append(deadline)
        clock.now += 100
        got.append(headers["X-Imagebump-Delivery"])
        return 200

    cfg = config.parse({"destinations": {"s": {"type": "slack", "url": "https://hooks.example/s"}}})
    outcomes = [_outcome(event=f"e{i}") for i in range(5)]
    report = _run(cfg, FileLedger(tmp_path), clock, outcomes, post=slow_post, budget=240, timeout=100)
    assert report.counts == {"sent": 3, "failed": 2}
    assert _claims(tmp_path) == set(got) and len(got) == 3
    assert deadlines == [100, 100, 40]  # a request never outlives the run
    rerun = _run(cfg, FileLedger(tmp_path), Clock(), outcomes, post=lambda *a: 200)
    assert rerun.counts == {"duplicate": 3, "sent": 2}


def test_the_budget_leaves_the_pods_deadline_a_margin():
    """The rendered templates' ``activeDeadlineSeconds`` (Kubernetes kills the pod then) outlast the
    time delivery may take by a margin for the pod's start and its Workflow read."""
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[3] / "manifests" / "workflows"
    budgets = {"notify": send.BUDGET, "notify-verifying": send.VERIFYING_BUDGET}
    seen = set()
    for path in root.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            spec = (doc or {}).get("spec") or {}
            spec = spec.get("workflowSpec", spec)
            for template in spec.get("templates") or []:
                if template.get("name") in budgets:
                    seen.add(template["name"])
                    assert budgets[template["name"]] + 30 <= template["activeDeadlineSeconds"], path.name
    assert seen == set(budgets)


def test_a_receiver_that_trickles_its_answer_is_cut_at_the_requests_deadline(tmp_path):
    with Receiver("slack", trickle=0.02) as trickling:  # 2 kB at 50 bytes/s: ~40 s in all
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            send.http_post(trickling.url, b'{"text": "x"}', {"Content-Type": "application/json"}, 0.3)
        took = time.monotonic() - started
        cfg = config.parse({"destinations": {"s": {"type": "slack", "url": trickling.url}}})
        report = notify([_outcome()], cfg, FileLedger(tmp_path), sleep=lambda s: None, timeout=0.3)
    assert took < 2.0  # every read came within the socket timeout; the whole request did not
    assert report.counts == {"failed": 1} and _claims(tmp_path) == set()

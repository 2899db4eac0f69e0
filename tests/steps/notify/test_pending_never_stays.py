"""``imagebump/live``: a ``pending`` never stays (docs/notifications.md), whatever the routing.

notify-verifying sets ``pending`` on the github destinations the commit's ``committed`` outcome is
routed to; the exit handler's end of it (``live``, ``mismatch``, ``timeout``, ``idle``,
``not-verified``) must reach each of them, even when ``alarms:``, ``others:`` or a rule's ``notify:``
send the end elsewhere."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from steps.notify import config
from steps.notify.decide import STATUS_ENDS, Outcome, idempotency_key
from steps.notify.github import CONTEXT, STATES
from steps.notify.step import notify
from steps.notify.verifying import mark_pending

REPO = "https://github.com/acme/gitops"
TARGET = f"{REPO}/overlays/prod"
DESTINATIONS = {
    "gh": {"type": "github"},
    "gh2": {"type": "github"},
    "team": {"type": "slack", "url": "https://hooks.slack.example/services/T/B/X"},
    "ops": {"type": "webhook", "url": "https://receiver.example/hook", "secret": "s" * 24},
}


class MemoryLedger:
    def __init__(self) -> None:
        self.keys: set[str] = set()

    def claim(self, key: str) -> bool:
        if key in self.keys:
            return False
        self.keys.add(key)
        return True

    def sent(self, key: str) -> None:
        pass  # a claim is kept once it was sent: nothing more to record here

    def release(self, key: str) -> None:
        self.keys.discard(key)


class StatusForge:
    """The commit statuses GitHub holds, per commit, in the order they were set."""

    def __init__(self) -> None:
        self.statuses: dict[str, list[str]] = {}

    def set_status(self, sha: str, *, state: str, context: str, **_: object) -> bool:
        assert context == CONTEXT
        self.statuses.setdefault(sha, []).append(state)
        return True


def _committed(event: str, sha: str, rule: tuple[str, ...]) -> Outcome:
    fields = {"repo": REPO, "overlay": "overlays/prod", "commit": sha, "link": sha, "verifying": "true"}
    return Outcome("committed", event, TARGET, fields, rule)


def _end(kind: str, event: str, sha: str, rule: tuple[str, ...]) -> Outcome:
    fields = {"repo": REPO, "overlay": "overlays/prod", "commit": sha, "application": "argocd/api"}
    return Outcome(kind, event, TARGET, fields, rule)


def _ok(*_: object, **__: object) -> int:
    return 200


def test_the_ends_of_a_status_are_every_state_but_pending():
    assert {k for k, v in STATES.items() if v != "pending"} == STATUS_ENDS


names = st.sampled_from(sorted(DESTINATIONS))
name_lists = st.lists(names, min_size=1, max_size=3, unique=True)


@settings(max_examples=150, deadline=None)
@given(
    default=name_lists,
    alarms=st.none() | name_lists,
    others=st.none() | name_lists,
    rule=st.lists(names, max_size=3, unique=True),
    ends=st.lists(st.sampled_from(sorted(STATUS_ENDS)), min_size=1, max_size=3),
)
# the audit's cases: gh in default, alarms elsewhere; gh in others only; gh in a rule's list only
@example(default=["team", "gh"], alarms=["ops"], others=None, rule=[], ends=["mismatch", "timeout"])
@example(default=["team"], alarms=None, others=["gh"], rule=[], ends=["timeout"])
@example(default=["team"], alarms=["ops"], others=None, rule=["gh"], ends=["mismatch"])
def test_no_github_status_is_left_pending_once_its_end_arrives(default, alarms, others, rule, ends):
    doc: dict = {"destinations": DESTINATIONS, "default": default}
    if alarms is not None:
        doc["alarms"] = alarms
    if others is not None:
        doc["others"] = others
    cfg = config.parse(doc)
    ledger, forge = MemoryLedger(), StatusForge()
    pushes = [(f"ev-{i}", f"{i + 1:040x}", kind) for i, kind in enumerate(ends)]
    for event, sha, _ in pushes:  # notify-verifying, beside verify-live
        mark_pending(_committed(event, sha, tuple(rule)), cfg, ledger, forge_for=lambda _: forge, post=_ok)
    exit_handler = [
        o for e, s, k in pushes for o in (_committed(e, s, tuple(rule)), _end(k, e, s, tuple(rule)))
    ]
    report = notify(exit_handler, cfg, ledger, forge_for=lambda _: forge, post=_ok, sleep=lambda s: None)

    assert report.counts.get("failed", 0) == 0
    for event, sha, kind in pushes:
        states = forge.statuses.get(sha, [])
        if "pending" in states:
            assert states[-1] == STATES[kind], (sha, states)
        # per destination: every github destination that set pending also set the end
        for name in ("gh", "gh2"):
            if idempotency_key(event, TARGET, "committed", name) in ledger.keys:
                assert idempotency_key(event, TARGET, kind, name) in ledger.keys, (name, kind)


@pytest.mark.parametrize("kind", ["mismatch", "timeout"])
def test_an_alarm_routed_to_alarms_still_ends_the_pending_status_on_github(kind, github_fake, tmp_path):
    """The GitHub fake: ``alarms: [ops]`` no longer leaves ``imagebump/live`` pending."""
    from steps.forge import github as gh
    from steps.forge.pull_requests import GitHubForge
    from steps.notify.ledger import FileLedger

    token = next(iter(github_fake.tokens))
    settings_ = gh.GitHubSettings(api_url=github_fake.url, token=token)
    fast = gh.RetryPolicy(max_retries=1, base_delay=0.0, max_delay=0.0, sleep=lambda s: None)

    def forge_for(repo_url: str) -> GitHubForge:
        _host, owner, repo = gh.parse_repo_url(repo_url)
        return GitHubForge(owner, repo, gh.client(settings_, retry=fast), secrets=(token,))

    cfg = config.parse({"destinations": DESTINATIONS, "default": ["team", "gh"], "alarms": ["ops"]})
    sha = "a" * 40
    ledger = FileLedger(tmp_path)
    mark_pending(_committed("ev-1", sha, ()), cfg, ledger, forge_for=forge_for)
    notify(
        [_committed("ev-1", sha, ()), _end(kind, "ev-1", sha, ())],
        cfg,
        ledger,
        forge_for=forge_for,
        post=_ok,
        sleep=lambda s: None,
    )
    assert github_fake.status_of("acme", "gitops", sha, CONTEXT) == "failure"

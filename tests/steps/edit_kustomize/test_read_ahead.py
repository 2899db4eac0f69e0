"""edit-kustomize reads the history's first answer while ECR answers the push times (issue 33):
the two waits overlap instead of adding up, the answer is read once, and a read-ahead that fails
changes no outcome — a plan that changes nothing never needed it, one that changes reads it again.

Against a real ``git http-backend`` remote and moto's ECR, as tests/steps/domain/test_intent.py.
"""

from __future__ import annotations

import threading

import pytest

from steps import entry_history
from steps.domain.errors import TransientError
from steps.edit_kustomize import step as edit_step
from steps.entry_history import ReadAhead, Verdict, rollback_verdict
from tests.steps.domain import test_intent as _intent
from tests.steps.domain.test_intent import BROKEN, FILE, _target, _text, _uri

plan_step = edit_step.run.__wrapped__
_env = _intent._env  # the autouse fixture: git and AWS settings
ecr = _intent.ecr  # the ECR repository holding 1.4.1 and 1.5.0


def _count_first_reads(monkeypatch: pytest.MonkeyPatch, fail: int = 0) -> dict[str, object]:
    """Wrap :func:`steps.entry_history.only_imagebump`: count its calls, signal the first one, and
    raise a TransientError from the first ``fail`` calls."""
    seen: dict[str, object] = {"calls": 0, "read": threading.Event()}
    original = entry_history.only_imagebump

    def counted(*args, **kwargs):
        seen["calls"] = int(seen["calls"]) + 1
        seen["read"].set()  # type: ignore[attr-defined]
        if int(seen["calls"]) <= fail:
            raise TransientError("the remote failed for now")
        return original(*args, **kwargs)

    monkeypatch.setattr(entry_history, "only_imagebump", counted)
    return seen


def test_the_history_is_read_while_ecr_answers_and_only_once(make_remote, ecr, monkeypatch) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    seen = _count_first_reads(monkeypatch)
    original_ask = edit_step._Ecr.ask
    asked_after_the_read: list[bool] = []

    def ask_waiting_for_the_read(self, keys):
        # a sequential step would ask ECR first and never see the read: the wait would run out
        asked_after_the_read.append(seen["read"].wait(timeout=20))  # type: ignore[attr-defined]
        return original_ask(self, keys)

    monkeypatch.setattr(edit_step._Ecr, "ask", ask_waiting_for_the_read)
    out = plan_step(_target(remote, image, "1.5.0", BROKEN))
    assert out.plan.decision == "update" and out.changed
    assert asked_after_the_read == [True]
    assert seen["calls"] == 1  # the verdict took the answer read ahead
    assert out.plan.history_clean  # nobody but imagebump touched the file (it was only created)


@pytest.mark.parametrize(
    ("holds", "pushed", "decision", "reads"),
    [
        # older than what the overlay holds: a plan that changes nothing never needed the history
        pytest.param("1.5.0", "1.4.1", "stale", 1, id="stale-never-reads-again"),
        # newer: the rollback check reads the history again, and the update goes ahead
        pytest.param("1.4.1", "1.5.0", "update", 2, id="update-reads-again"),
    ],
)
def test_a_failed_read_ahead_changes_no_outcome(
    make_remote, ecr, monkeypatch, holds, pushed, decision, reads
) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, holds)})
    seen = _count_first_reads(monkeypatch, fail=1)
    out = plan_step(_target(remote, image, pushed, BROKEN if pushed == "1.5.0" else None))
    assert out.plan.decision == decision and out.changed is (decision == "update")
    assert seen["calls"] == reads
    if decision == "update":
        assert out.plan.history_clean


def test_a_plan_that_changes_still_fails_when_the_history_cannot_be_read(
    make_remote, ecr, monkeypatch
) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    _count_first_reads(monkeypatch, fail=2)
    with pytest.raises(TransientError):
        plan_step(_target(remote, image, "1.5.0", BROKEN))


@pytest.mark.parametrize(
    ("ahead", "reads"),
    [
        (ReadAhead("base", FILE, 20, True), 0),
        (ReadAhead("another", FILE, 20, True), 1),
        (ReadAhead("base", "another/kustomization.yaml", 20, True), 1),
        (ReadAhead("base", FILE, 5, True), 1),
        (None, 1),
    ],
)
def test_the_verdict_takes_an_answer_only_for_its_own_base_file_and_bound(monkeypatch, ahead, reads) -> None:
    calls: list[tuple] = []

    def only_imagebump(repo, rev, file, limit, **asks):
        calls.append((rev, file, limit))
        return True

    monkeypatch.setattr(entry_history, "only_imagebump", only_imagebump)
    verdict = rollback_verdict(
        object(),
        "base",
        FILE,
        "api",
        order="push-time",
        new=None,
        new_pushed_at=None,
        pushed_at=lambda _entry: None,
        ahead=ahead,
        limit=20,
    )
    assert verdict == Verdict(None, only_imagebump=True)
    assert calls == [("base", FILE, 20)] * reads

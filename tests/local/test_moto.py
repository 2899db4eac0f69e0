"""moto as our tests, the demo and the bench run it: an emulator that loses a message would make our
own "never lose an event" checks fail for a loss that is not ours, and one that spends the steps'
CPUs on work AWS does on its own machines would slow every measured event by what is not ours."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from imagebump.local import builders
from imagebump.local.moto import keep_every_sqs_message, parse_each_event_path_once


class _WatchedLock:
    """An ``RLock`` that says when someone had to wait for it."""

    def __init__(self, waited: threading.Event) -> None:
        self._lock = threading.RLock()
        self._waited = waited
        self._is_owned = self._lock._is_owned  # type: ignore[attr-defined]
        self._release_save = self._lock._release_save  # type: ignore[attr-defined]
        self._acquire_restore = self._lock._acquire_restore  # type: ignore[attr-defined]

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        self._waited.set()
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    __enter__ = acquire

    def __exit__(self, *exc: object) -> None:
        self.release()


ACCOUNT, REGION = "123456789012", "us-west-2"


def _backend() -> Any:
    from moto.sqs.models import sqs_backends

    keep_every_sqs_message()
    return sqs_backends[ACCOUNT][REGION]


def _delete_racing(
    backend: Any, name: str, receipt_handle: str, after: int | None, other: Callable[[], None]
) -> None:
    """Delete one message while ``other`` runs on another thread at the worst moment: after the
    delete has read ``after + 1`` of the queue's messages (all of them: ``None``) and before it
    has written what is left. ``other`` either acts there or waits for the delete; this goes on as
    soon as one of the two is true, so it never sleeps."""
    queue = backend.get_queue(name)
    settled = threading.Event()
    queue._messages_lock = threading.Condition(_WatchedLock(settled))
    deleting = threading.get_ident()
    racers: list[threading.Thread] = []

    def race() -> None:
        other()
        settled.set()

    def fire() -> None:
        if not racers and threading.get_ident() == deleting:
            racers.append(threading.Thread(target=race, daemon=True))
            racers[0].start()
            assert settled.wait(timeout=60), "the other call neither acted nor waited"

    class Messages(list):
        def __iter__(self):
            for i, message in enumerate(list.__iter__(self)):
                yield message
                if i == after:
                    fire()
            if after is None:
                fire()

    queue._messages = Messages(queue._messages)
    backend.delete_message(name, receipt_handle)
    assert racers, "the delete did not read that far: the test no longer reaches the race"
    racers[0].join(timeout=60)


def _bodies(backend: Any, name: str) -> list[str]:
    return sorted(m.body for m in backend.receive_message(name, 10, 0, 30))


def test_a_message_delivered_while_another_is_deleted_stays_in_the_queue() -> None:
    backend = _backend()
    name = f"moto-delete-{uuid.uuid4().hex[:8]}"
    backend.create_queue(name)
    try:
        backend.send_message(name, "first")
        (received,) = backend.receive_message(name, 1, 0, 30)
        _delete_racing(
            backend, name, received.receipt_handle, None, lambda: backend.send_message(name, "delivered")
        )
        assert _bodies(backend, name) == ["delivered"]
    finally:
        backend.delete_queue(name)


def test_a_message_dead_lettered_while_another_is_deleted_costs_no_third_message() -> None:
    """A receive moves B past its ``maxReceiveCount`` to the DLQ while A is deleted: C, sent after
    both and never received, must still be in the queue, and B only in the DLQ."""
    backend = _backend()
    name = f"moto-dlq-{uuid.uuid4().hex[:8]}"
    dlq = backend.create_queue(f"{name}-dlq")
    policy = {"deadLetterTargetArn": dlq.queue_arn, "maxReceiveCount": "2"}
    backend.create_queue(name, RedrivePolicy=json.dumps(policy))
    try:
        backend.send_message(name, "B")
        (b,) = backend.receive_message(name, 1, 0, 0)  # received once, visible again at once
        backend.send_message(name, "A")
        received = backend.receive_message(name, 2, 0, 30)  # B's second receive, and A's first
        assert sorted(m.body for m in received) == ["A", "B"]
        backend.change_message_visibility(name, b.receipt_handle, 0)  # B's next receive dead-letters it
        backend.send_message(name, "C")
        a = next(m for m in received if m.body == "A")
        _delete_racing(backend, name, a.receipt_handle, 1, lambda: backend.receive_message(name, 10, 0, 0))
        assert _bodies(backend, name) == ["C"]
        assert _bodies(backend, f"{name}-dlq") == ["B"]
    finally:
        backend.delete_queue(name)
        backend.delete_queue(f"{name}-dlq")


def test_eventbridge_parses_each_input_path_once_and_delivers_the_same_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rule's target gets the same event with the paths parsed once as with a parser per path
    per delivery, and the second delivery builds no parser at all."""
    from jsonpath_ng import ext
    from moto.events.utils import EventTemplateParser

    built: list[str] = []
    unpatched = getattr(ext.parse, "__wrapped__", ext.parse)  # a moto server in this process patched it

    def counting(path: str, *args: Any, **kwargs: Any) -> Any:
        built.append(path)
        return unpatched(path, *args, **kwargs)

    monkeypatch.setattr(ext, "parse", counting)
    # what moto's PutEvents hands a rule's targets (models.py: a Time, and the ingestion time, in seconds)
    pushed = builders.ecr_push_event("team/api", "sha256:" + "a" * 64, "1.2.3")
    event = {**pushed, "time": 1796688000.0, "ingestion-time": 1796688000.5}

    def deliver() -> dict[str, Any]:
        return EventTemplateParser.parse(input_template="", input_paths_map={}, event=event)

    before = deliver()
    per_delivery = len(built)
    assert per_delivery > 1
    parse_each_event_path_once()
    parse_each_event_path_once()  # idempotent: one cache, not a cache of a cache
    assert deliver() == before
    assert len(built) == 2 * per_delivery
    assert deliver() == before
    assert len(built) == 2 * per_delivery

"""The mutex registry: named locks that serialise, and are forgotten when no one uses them."""

from __future__ import annotations

import threading

from workflows.local.mutexes import MutexRegistry


def test_a_name_is_held_by_one_caller_at_a_time_and_forgotten_after() -> None:
    reg = MutexRegistry()
    reg.acquire("repo/overlays/prod")
    waited = threading.Event()
    got = threading.Event()

    def second() -> None:
        reg.acquire("repo/overlays/prod", waited.set)
        got.set()
        reg.release("repo/overlays/prod")

    thread = threading.Thread(target=second)
    thread.start()
    assert waited.wait(10), "the second caller was told it waits"
    assert not got.wait(0.2), "the second caller got the lock while the first held it"
    reg.acquire("repo/overlays/stg")  # another name does not wait
    assert reg.names() == ["repo/overlays/prod", "repo/overlays/stg"]
    reg.release("repo/overlays/prod")
    assert got.wait(10)
    thread.join(10)
    reg.release("repo/overlays/stg")
    assert reg.names() == [], "a long-running process does not keep one lock per overlay it touched"


def test_a_free_name_calls_no_on_wait() -> None:
    reg = MutexRegistry()
    calls: list[str] = []
    reg.acquire("a", lambda: calls.append("waited"))
    reg.release("a")
    assert calls == []

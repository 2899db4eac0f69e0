"""Named locks for ``synchronization.mutexes``: what serialises writers of one overlay.

One registry per process by default (:data:`PROCESS_MUTEXES`), shared by every executor, so a
running ``image-update`` and an ``image-reconcile`` that reaches the same overlay by
``templateRef`` wait for each other, as on a cluster. A name lives only while someone holds it or
waits for it: the registry forgets it when the last user releases it, so a long-running
``imagebump run --local`` does not collect one lock per overlay it ever touched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0  # holders and waiters


class MutexRegistry:
    """Named, non-reentrant locks created on first use and dropped when no one uses them."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    def acquire(self, name: str, on_wait: Callable[[], None] | None = None) -> None:
        """Block until ``name`` is held by the caller; ``on_wait()`` first if someone else holds it."""
        with self._guard:
            entry = self._entries.setdefault(name, _Entry())
            entry.users += 1
        if not entry.lock.acquire(blocking=False):
            if on_wait is not None:
                on_wait()
            entry.lock.acquire()

    def release(self, name: str) -> None:
        """Release ``name`` (held by the caller); forget it if no one else holds or waits for it."""
        with self._guard:
            entry = self._entries[name]
            entry.lock.release()
            entry.users -= 1
            if entry.users == 0:
                del self._entries[name]

    def names(self) -> list[str]:
        """The names currently held or waited for."""
        with self._guard:
            return sorted(self._entries)


#: The registry every executor of this process uses unless it is given its own.
PROCESS_MUTEXES = MutexRegistry()

__all__ = ["PROCESS_MUTEXES", "MutexRegistry"]

"""Where a step's time goes: named phases summed per process, reported once when the step ends.

:func:`timed` wraps the operations that wait on something or do real work (each git command by
its subcommand, with the files written for it: a sparse clone's template under ``git clone``, a
seeded repository's objects and refs under ``git seed``; building an ECR client, an ECR call,
loading the rules, finding, reading and editing the kustomization, making and removing the scratch
directory, writing log records and the outputs);
:func:`steps.runtime.harness.step_entry` logs the sums in one ``step-timings`` record at the end of a
step process (``seconds``: the step's own wall time; ``phases``: seconds per phase). A phase timed
on another thread than the main one is named ``… (background)``: it overlaps the others (e.g.
edit-kustomize builds its ECR client while its clone runs). The benchmark reads these records to
account for every step's time (bench/e2e.py); operators read them in a step's log.

Imports nothing of the project: every layer may use it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()
_PHASES: dict[str, float] = {}
_OPEN = threading.local()  # per thread: the seconds spent in phases nested in each open phase


@contextmanager
def timed(phase: str) -> Iterator[None]:
    """Add the time spent inside to this process's ``phase``, less the time of the phases timed
    within it (``history`` around its ``git fetch`` counts only its own work), so a thread's
    phases never add up to more than its time."""
    nested: list[float] = getattr(_OPEN, "stack", None) or []
    _OPEN.stack = nested
    nested.append(0.0)
    start = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        inner = nested.pop()
        if nested:
            nested[-1] += elapsed
        if threading.current_thread() is not threading.main_thread():
            phase += " (background)"
        with _LOCK:
            _PHASES[phase] = _PHASES.get(phase, 0.0) + max(elapsed - inner, 0.0)


def take() -> dict[str, float]:
    """The phases summed so far (rounded to 0.1 ms), and start afresh."""
    with _LOCK:
        phases = {name: round(seconds, 4) for name, seconds in _PHASES.items()}
        _PHASES.clear()
    return phases


def git_phase(args: list[str] | tuple[str, ...]) -> str:
    """``git SUBCOMMAND`` for ``git ARGS`` (``-c key=value`` and other options before it skipped)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-c", "-C"):
            skip = True
        elif not arg.startswith("-"):
            return f"git {arg}"
    return "git"


__all__ = ["git_phase", "take", "timed"]

"""A lost push race: how long to wait before re-applying on the new base, and the log record of it.

Both modes push with a lease or to a moving branch; a rejection (the remote moved on) is retried
after :func:`backoff`, logged by :func:`lost_race` with the fields a burst report counts.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

#: The backoff's bounds (seconds): its unit is one rejected push, clamped to these; its cap.
BACKOFF_BASE_MIN, BACKOFF_BASE_MAX, BACKOFF_CAP = 0.02, 0.5, 1.0

#: How many of the base branch's newest commits a lost race fetches (commits and trees, no file):
#: enough to reach the base the step held before (in a burst each other writer lands one commit
#: per race), so the commit made on the new base can still say that only imagebump touched its file
#: (``Imagebump-History``; :func:`steps.commit_pr.rollbacks.reapply`). Without it a burst's next event
#: on the overlay read its history deeper than its clone: one more fetch per event (bench, 200 pushes
#: into 20 overlays: 145 of 200 events). A base further behind simply gets no such line.
RACE_DEPTH = 8


def backoff(
    attempt: int, base: float = 0.05, cap: float = BACKOFF_CAP, rng: random.Random | None = None
) -> float:
    """Seconds to wait after losing push race number ``attempt`` (1 = the first loss) before
    fetching the new base and trying again.

    The first retry goes at once: the fetch itself spaces the writers by a round trip, and a fixed
    minimum sleep would be several times one attempt. Later ones wait "full jitter" in
    ``[0, min(cap, base·2^(attempt−2))]``, ``base`` being about one push round trip (the caller
    passes how long the rejected push took), so many writers on one branch spread out without a
    sleep that dominates the drain. No backoff at all doubled the lost races in a 27-writer burst
    (each loss is a fetch, reset, commit and push of CPU); issue 15's research, bench/README.md.
    ``rng``: the random source (tests inject a seeded one; default the module's).
    """
    if attempt <= 1:
        return 0.0
    base = min(max(base, BACKOFF_BASE_MIN), BACKOFF_BASE_MAX)
    return (rng or random).uniform(0.0, min(cap, base * (2 ** (attempt - 2))))


@dataclass
class Pacer:
    """The clock, sleep and random source of one step's push retries, injected (tests pass fakes:
    no real sleep, a seeded jitter). :meth:`started` before a push; :meth:`lost` after a rejection
    logs the loss (:func:`lost_race`), waits :func:`backoff` and returns the delay."""

    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random | None = None
    _pushed: float = field(default=0.0, init=False)

    def started(self) -> None:
        self._pushed = self.clock()

    def lost(self, what: str, attempt: int, attempts: int) -> float:
        delay = backoff(attempt, base=self.clock() - self._pushed, rng=self.rng)
        lost_race(what, attempt, attempts, delay)
        if delay > 0:
            self.sleep(delay)
        return delay


def lost_race(what: str, attempt: int, attempts: int, delay: float) -> None:
    """Log one lost push race with the fields a burst report counts (``push_lost``, ``backoff_s``)."""
    log.info(
        "%s rejected (the remote moved on), attempt %d/%d; re-applying on the new base in %.3fs",
        what,
        attempt,
        attempts,
        delay,
        extra={"fields": {"push_lost": attempt, "backoff_s": round(delay, 4)}},
    )

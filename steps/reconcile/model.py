"""reconcile's model: what the ECR scan hands the Git phase, and what reconcile cost.

:class:`Overlay` (one target overlay and its running newest allowed image), :class:`PushTimes`
(one repository's push times, compact), :class:`Unreadable` (a target whose ECR repository could
not be listed) and :class:`Calls` (reconcile's call counters). No I/O: gathered by
:mod:`steps.reconcile.ecr_scan`, read by :mod:`steps.reconcile.overlay_read` and :mod:`steps.reconcile.step`.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from steps.domain.models import ImagesEntry, Target
from steps.reconcile.decide import pick_newest
from steps.reconcile.report import ErrorKind


class Calls:
    """What reconcile cost, counted from every thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ecr = self.git = self.clones = 0

    def add(self, what: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + n)


class PushTimes:
    """ECR push times of one repository's images, by digest and by tag: what the Git phase asks for
    the image an overlay holds (or a proposal branch proposes), which may be any image of the
    repository, allowed or not. Kept only for repositories a ``push-time`` rule maps.

    Compact, because it is the one part of a scan that grows with images: 16 bytes per digest and
    per tag (a 64-bit hash of the key and the time, in two arrays sorted by hash after the listing,
    :meth:`freeze`), where a dict of strings to datetimes took ~300 bytes. Two keys of one
    repository sharing a 64-bit hash is a 1-in-10⁸ event at a million keys.
    """

    __slots__ = ("_keys", "_times")

    def __init__(self) -> None:
        self._keys = array("q")
        self._times = array("d")

    def add(self, image: Any) -> None:
        if image.pushed_at is None:
            return
        at = _utc(image.pushed_at).timestamp()
        for key in (("digest", image.digest), *(("tag", tag) for tag in image.tags)):
            self._keys.append(hash(key))
            self._times.append(at)

    def freeze(self) -> PushTimes:
        """Sort by hash (after the last :meth:`add`), so :meth:`of` can bisect."""
        order = sorted(range(len(self._keys)), key=self._keys.__getitem__)
        self._keys = array("q", (self._keys[i] for i in order))
        self._times = array("d", (self._times[i] for i in order))
        return self

    def _get(self, key: tuple[str, str]) -> float | None:
        h = hash(key)
        i = bisect_left(self._keys, h)
        return self._times[i] if i < len(self._keys) and self._keys[i] == h else None

    def of(self, entry: ImagesEntry | None) -> datetime | None:
        """Push time of what ``entry`` names: by its digest when it has one, else by its tag —
        :func:`steps.domain.never_downgrade.image_key`, the very lookup edit-kustomize asks ECR
        with, so a moved tag cannot make reconcile and an event disagree about a rollback."""
        from steps.domain.never_downgrade import image_key

        if entry is None:
            return None
        tag, digest = image_key(entry.newTag, entry.digest)
        key = ("digest", digest) if digest else ("tag", tag) if tag else None
        at = self._get(key) if key is not None else None
        return None if at is None else datetime.fromtimestamp(at, UTC)


def _utc(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)


class Overlay:
    """One target overlay, and the newest allowed image for it seen so far (a running maximum).

    Memory is bounded by the rules, not by the images: the running newest per order, the first
    candidate of each (rule, order) (so :func:`~steps.reconcile.decide.pick_newest` can still name
    every rule and order when it refuses to choose), and the tags of the newest image.
    """

    __slots__ = ("key", "times", "_best", "_reps", "_same")

    def __init__(self, key: tuple[str, str, str], times: dict[str, PushTimes] | None = None) -> None:
        self.key = key
        #: image URI → its repository's push times (shared by every overlay of one scan)
        self.times: dict[str, PushTimes] = times if times is not None else {}
        self._best: dict[str, Target] = {}  # order → newest candidate of that order so far
        self._reps: dict[tuple[int, str], Target] = {}  # (rule, order) → its first candidate
        self._same: dict[str, tuple[str | None, set[str]]] = {}  # order → (newest's digest, its tags)

    @property
    def candidates(self) -> list[Target]:
        """The candidates kept (at most two per rule): the first one seen comes first."""
        kept = list(self._reps.values())
        kept += [b for b in self._best.values() if all(b is not k for k in kept)]
        return kept

    def add_image(self, digest: str | None, targets: Sequence[Target]) -> None:
        """The targets one image's tags yield for this overlay (in tag order)."""
        for c in targets:
            self._reps.setdefault((c.rule, c.settings.order), c)
            if c.settings.order == "none":
                continue
            current = self._best.get(c.settings.order)
            best, _ = pick_newest([current, c] if current is not None else [c])
            if best is not None:
                self._best[c.settings.order] = best
        for order in {c.settings.order for c in targets}:
            best = self._best.get(order)
            if best is None or best.digest != digest:
                continue
            tags = {c.tag for c in targets if c.settings.order == order and c.tag}
            known, same = self._same.get(order, (None, set()))
            self._same[order] = (digest, same | tags if known == digest else tags)

    def merge(self, other: Overlay) -> None:
        """Fold in what another repository's images yield for the same overlay (``other`` second)."""
        for rep, c in other._reps.items():
            self._reps.setdefault(rep, c)
        for order, theirs in other._best.items():
            mine = self._best.get(order)
            best = theirs if mine is None else (pick_newest([mine, theirs])[0] or mine)
            self._best[order] = best
            mine_same = self._same.get(order, (None, set()))
            their_same = other._same.get(order, (None, set()))
            merged: set[str] = set()
            for digest, tags in (mine_same, their_same):
                if digest is not None and digest == best.digest:
                    merged |= tags
            self._same[order] = (best.digest, merged)

    def newest(self) -> tuple[Target | None, str]:
        """The newest candidate by the rule's order, or None and why (:func:`pick_newest`)."""
        orders = {order for _, order in self._reps}
        if len(orders) == 1:
            (order,) = orders
            if order in self._best:
                return self._best[order], ""
        return pick_newest(self.candidates)

    def same_image_tags(self, newest: Target | None) -> frozenset[str]:
        """Every allowed tag of the newest image (the overlay may hold another tag of it)."""
        if newest is None:
            return frozenset()
        digest, tags = self._same.get(newest.settings.order, (None, set()))
        return frozenset(tags) if digest == newest.digest else frozenset()

    def pushed_at(self, entry: ImagesEntry | None, image: str) -> datetime | None:
        """ECR push time of what ``entry`` names when it names ``image`` (None: unknown)."""
        if entry is None or (entry.newName or entry.name) != image:
            return None
        times = self.times.get(image)
        return times.of(entry) if times is not None else None


@dataclass
class Unreadable:
    """A target of an ECR repository whose images could not be listed: reported ``unknown``."""

    repo_url: str
    path: str
    env: str
    reason: str
    error: ErrorKind

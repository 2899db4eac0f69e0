"""Order: may a new image replace the one an overlay holds? Never an older over a newer.

Reads and writes nothing (pure). :func:`judge_update` returns ``update``, ``current`` (nothing to do)
or ``stale`` (the new image is older, or not comparable under the rule's order), always with a
reason that names both images.

Orders (rule field ``order``):

- ``push-time`` (default): ECR push times. An older push is stale. When the current image's push
  time is unknown (the overlay holds a tag ECR no longer has, or none), the update goes ahead and
  the reason says so.
- ``semver``: Semantic Versioning 2.0.0 precedence, a leading ``v`` allowed. A new tag that is not
  a version is stale under this order; a current tag that is not one is replaced.
- ``none``: always update, unless identical.

Identical (same tag and same digest) is ``current`` under every order; so is the same digest
under another tag (the content is already deployed).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from steps.domain.models import DEFAULT_ORDER, Decision, image_ref

__all__ = ["SemVer", "compare_semver", "judge_update", "parse_semver"]

_SEMVER_RE = re.compile(
    r"v?(?P<major>0|[1-9][0-9]*)\.(?P<minor>0|[1-9][0-9]*)\.(?P<patch>0|[1-9][0-9]*)"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+(?P<build>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)


#: A parsed version (:func:`parse_semver`): major, minor, patch, pre-release identifiers (None: a release).
SemVer = tuple[int, int, int, tuple[tuple[int, int | str], ...] | None]


def parse_semver(tag: str | None) -> SemVer | None:
    """``v1.2.3-rc.1`` → a key that sorts by SemVer precedence; None if ``tag`` is not a version.

    Build metadata is ignored; a pre-release sorts before its release; numeric identifiers sort
    numerically and before alphanumeric ones.
    """
    if not tag:
        return None
    m = _SEMVER_RE.fullmatch(tag)
    if not m:
        return None
    pre = m["pre"]
    if pre is not None:
        idents = pre.split(".")
        if any(i.isdigit() and len(i) > 1 and i.startswith("0") for i in idents):
            return None  # leading zeros are not allowed in numeric identifiers
        key = tuple((0, int(i)) if i.isdigit() else (1, i) for i in idents)
    else:
        key = None
    return int(m["major"]), int(m["minor"]), int(m["patch"]), key


def compare_semver(a: SemVer, b: SemVer) -> int:
    """SemVer 2.0.0 precedence of two :func:`parse_semver` results: -1, 0 or 1 (like ``cmp``)."""
    if a[:3] != b[:3]:
        return -1 if a[:3] < b[:3] else 1
    pa, pb = a[3], b[3]
    if pa == pb:
        return 0
    if pa is None:  # release > pre-release
        return 1
    if pb is None:
        return -1
    return -1 if pa < pb else 1  # tuple order: numeric (0, n) before alphanumeric (1, s), shorter first


def _describe(tag: str | None, digest: str | None) -> str:
    return image_ref(tag, digest, short=True)


def _utc(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _fmt(t: datetime) -> str:
    return _utc(t).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def judge_update(
    *,
    current_tag: str | None,
    current_digest: str | None,
    current_pushed_at: datetime | None,
    new_tag: str | None,
    new_digest: str | None,
    new_pushed_at: datetime | None,
    order: str = DEFAULT_ORDER,
) -> tuple[Decision, str]:
    """Decide whether the new image replaces the current one, and say why.

    Args:
        current_tag: the overlay's ``newTag``; None if unset.
        current_digest: the overlay's ``digest``; None if unset.
        current_pushed_at: ECR push time of the current image, None if unknown.
        new_tag: the pushed tag; None for a digest-only push.
        new_digest: the pushed digest (None if it is not to be written).
        new_pushed_at: ECR push time of the pushed image.
        order: ``push-time``, ``semver`` or ``none``.

    Returns:
        ``(decision, reason)`` with decision ``update``, ``current`` or ``stale``.
    """
    new = _describe(new_tag, new_digest)
    cur = _describe(current_tag, current_digest)
    if current_tag == new_tag and current_digest == new_digest:
        return "current", f"already at {cur}"
    if current_digest and new_digest and current_digest == new_digest:
        return "current", f"digest {new_digest[:19]} is already deployed as {cur}; {new} is the same image"
    if current_tag is None and current_digest is None:
        return "update", f"no tag or digest set yet; setting {new}"

    if order == "none":
        return "update", f"{cur} → {new} (order: none)"

    if order == "semver":
        new_v = parse_semver(new_tag)
        if new_v is None:
            return (
                "stale",
                f"tag {new_tag or '(none, digest-only push)'} is not a semantic version and the rule "
                f"orders by semver; keeping {cur}",
            )
        cur_v = parse_semver(current_tag)
        if cur_v is None:
            return (
                "update",
                f"current tag {current_tag or '(none)'} is not a semantic version; replacing it with {new}",
            )
        c = compare_semver(new_v, cur_v)
        if c < 0:
            return "stale", f"{new_tag} is an older version than the current {current_tag}; keeping {cur}"
        if c == 0 and new_tag != current_tag:
            return "current", f"{new_tag} is the same version as the current {current_tag}"
        if c == 0:
            return "update", f"{new_tag} re-pushed with a new digest: {cur} → {new}"
        return "update", f"{new_tag} is newer than {current_tag} (semver)"

    if order != "push-time":
        raise ValueError(f"unknown order {order!r}: expected push-time, semver or none")
    if current_pushed_at is None:
        return "update", f"push time of the current {cur} is unknown (not in ECR?); updating to {new}"
    if new_pushed_at is None:
        return "update", f"push time of {new} is unknown; updating from {cur}"
    if _utc(new_pushed_at) < _utc(current_pushed_at):
        return (
            "stale",
            f"{new} was pushed at {_fmt(new_pushed_at)}, before the current {cur} "
            f"(pushed at {_fmt(current_pushed_at)}); keeping {cur}",
        )
    return (
        "update",
        f"{new} pushed at {_fmt(new_pushed_at)} is not older than {cur} "
        f"(pushed at {_fmt(current_pushed_at)})",
    )

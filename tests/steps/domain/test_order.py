"""steps.domain.version_order.judge_update: never an older image over a newer one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from steps.domain.version_order import judge_update, parse_semver

T0 = datetime(2026, 11, 16, 1, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64


def run(cur: tuple, new: tuple, order: str = "push-time") -> tuple[str, str]:
    return judge_update(
        current_tag=cur[0],
        current_digest=cur[1],
        current_pushed_at=cur[2],
        new_tag=new[0],
        new_digest=new[1],
        new_pushed_at=new[2],
        order=order,
    )


CASES = [
    # push-time (default)
    pytest.param(("a", D1, T0), ("b", D2, T1), "push-time", "update", "not older", id="pt-newer"),
    pytest.param(
        ("a", D1, T1),
        ("b", D2, T0),
        "push-time",
        "stale",
        "2026-11-16T01:00:00Z, before the current a@",
        id="pt-older",
    ),
    pytest.param(("a", D1, T0), ("b", D2, T0), "push-time", "update", "not older", id="pt-same-time"),
    pytest.param(
        ("a", D1, None),
        ("b", D2, T0),
        "push-time",
        "update",
        "push time of the current a@",
        id="pt-current-unknown",
    ),
    pytest.param(
        ("a", None, T0),
        ("b", None, None),
        "push-time",
        "update",
        "push time of b is unknown",
        id="pt-new-unknown",
    ),
    pytest.param(("a", D1, T1), ("a", D1, T0), "push-time", "current", "already at a@", id="pt-identical"),
    pytest.param(
        ("a", None, T0), ("a", None, T0), "push-time", "current", "already at a", id="pt-identical-no-digest"
    ),
    pytest.param(
        ("a", D1, T0), ("b", D1, T0), "push-time", "current", "same image", id="pt-same-digest-other-tag"
    ),
    pytest.param(
        ("1.4.2", D1, T0), ("1.4.2", D2, T1), "push-time", "update", "not older", id="pt-tag-repushed"
    ),
    pytest.param(
        (None, None, None),
        ("b", D2, T0),
        "push-time",
        "update",
        "no tag or digest set yet",
        id="pt-nothing-set",
    ),
    pytest.param(
        ("a", D1, datetime(2026, 11, 16, 1, 10)),
        ("b", D2, T1),
        "push-time",
        "stale",
        "before",
        id="pt-naive-is-utc",
    ),
    pytest.param(("a", D1, T0), (None, D2, T1), "push-time", "update", "", id="pt-digest-only-newer"),
    # semver
    pytest.param(
        ("v1.2.3", D1, T1),
        ("v1.10.0", D2, T0),
        "semver",
        "update",
        "newer than v1.2.3",
        id="sv-newer-despite-older-push",
    ),
    pytest.param(
        ("1.10.0", D1, T0),
        ("1.9.9", D2, T1),
        "semver",
        "stale",
        "1.9.9 is an older version than the current 1.10.0",
        id="sv-older",
    ),
    pytest.param(
        ("1.0.0", D1, T0),
        ("1.0.0-rc.1", D2, T1),
        "semver",
        "stale",
        "older version",
        id="sv-prerelease-before-release",
    ),
    pytest.param(
        ("1.0.0-rc.2", D1, T0),
        ("1.0.0-rc.10", D2, T1),
        "semver",
        "update",
        "newer",
        id="sv-numeric-prerelease",
    ),
    pytest.param(
        ("1.0.0-alpha", D1, T0),
        ("1.0.0-alpha.1", D2, T1),
        "semver",
        "update",
        "newer",
        id="sv-longer-prerelease",
    ),
    pytest.param(
        ("1.0.0-rc.1", D1, T0), ("1.0.0", D2, T1), "semver", "update", "newer", id="sv-release-after-rc"
    ),
    pytest.param(
        ("v1.2.3", D1, T0), ("1.2.3", D2, T1), "semver", "current", "same version", id="sv-v-prefix-same"
    ),
    pytest.param(("1.2.3", D1, T0), ("1.2.3", D2, T1), "semver", "update", "re-pushed", id="sv-repushed"),
    pytest.param(
        ("1.2.3", D1, T0),
        ("latest", D2, T1),
        "semver",
        "stale",
        "latest is not a semantic version",
        id="sv-new-not-semver",
    ),
    pytest.param(
        ("1.2.3", D1, T0),
        ("01.2.3", D2, T1),
        "semver",
        "stale",
        "not a semantic version",
        id="sv-leading-zero",
    ),
    pytest.param(
        ("1.2.3", D1, T0), ("1.2", D2, T1), "semver", "stale", "not a semantic version", id="sv-two-parts"
    ),
    pytest.param(("1.2.3", D1, T0), (None, D2, T1), "semver", "stale", "digest-only", id="sv-digest-only"),
    pytest.param(
        ("abc1234", D1, T0),
        ("1.0.0", D2, T1),
        "semver",
        "update",
        "current tag abc1234 is not a semantic version",
        id="sv-current-not-semver",
    ),
    # none
    pytest.param(("b", D2, T1), ("a", D1, T0), "none", "update", "order: none", id="none-older-updates"),
    pytest.param(("a", D1, T0), ("a", D1, T0), "none", "current", "already", id="none-identical"),
]


@pytest.mark.parametrize(("cur", "new", "order", "decision", "fragment"), CASES)
def test_decide(cur: tuple, new: tuple, order: str, decision: str, fragment: str) -> None:
    got, reason = run(cur, new, order)
    assert got == decision, reason
    assert fragment in reason
    assert reason


def test_stale_reason_names_both_tags_and_times() -> None:
    decision, reason = run(("new-one", D1, T1), ("old-one", D2, T0))
    assert decision == "stale"
    for part in ("new-one", "old-one", "2026-11-16T01:00:00Z", "2026-11-16T01:05:00Z"):
        assert part in reason


def test_unknown_order_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown order"):
        run(("a", D1, T0), ("b", D2, T1), "newest")


@pytest.mark.parametrize(
    ("tag", "ok"),
    [
        ("1.2.3", True),
        ("v1.2.3", True),
        ("1.2.3-rc.1", True),
        ("V1.2.3", False),
        ("1.2", False),
        ("1.2.3-01", False),
        (None, False),
    ],
    ids=["plain", "v", "prerelease", "capital-v", "two-parts", "prerelease-leading-zero", "none"],
)
def test_parse_semver(tag: str | None, ok: bool) -> None:
    assert (parse_semver(tag) is not None) == ok

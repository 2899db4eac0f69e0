"""The pure cores, table-tested without ECR or git: never_downgrade, edit-kustomize's and
resolve-image's ``decide``, the image-reference formatter and the entry comparison.

ECR facts are given as data (:data:`steps.domain.never_downgrade.PushTimes`), exactly what the steps
gather before they decide; nothing here opens a socket or runs git.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from steps.aws.ecr import EcrImage
from steps.domain import never_downgrade
from steps.domain.errors import ConfigError, ImageNotFoundError
from steps.domain.models import (
    Image,
    ImagesEntry,
    Plan,
    entry_ref,
    entry_sets,
    image_ref,
    same_entry,
    short_digest,
)
from steps.edit_kustomize import decide as edit_kustomize
from steps.resolve_image import decide as resolve_image
from steps.resolve_image.step import ResolveImageInput
from steps.rules import RuleSet, load_rules
from tests.steps.commit_pr.support import DIGEST_A, DIGEST_B, IMAGE, kustomization, target

OLD_AT = datetime(2026, 11, 1, tzinfo=UTC)
NEW_AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LATER_AT = datetime(2026, 12, 24, tzinfo=UTC)


def _t(**kw):
    pushed_at = kw.pop("pushed_at", NEW_AT)
    image = kw.pop("image", IMAGE)
    return target("https://github.com/team/gitops", **kw).model_copy(
        update={"pushed_at": pushed_at, "image": image}
    )


def _e(tag: str | None = "1.0.0", digest: str | None = None, name: str = "api", new_name: str | None = IMAGE):
    return ImagesEntry(name=name, newName=new_name, newTag=tag, digest=digest)


# --- formatting and comparison ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        pytest.param(("1.4.2", DIGEST_A), {"name": "api"}, f"api:1.4.2@{DIGEST_A}", id="full"),
        pytest.param((None, DIGEST_A), {"name": "api"}, f"api@{DIGEST_A}", id="digest-only-named"),
        pytest.param((None, DIGEST_A), {}, DIGEST_A, id="digest-only-bare"),
        pytest.param(("1.4.2", None), {}, "1.4.2", id="tag-only"),
        pytest.param((None, None), {"name": "api"}, "api", id="nothing-named"),
        pytest.param((None, None), {"none": "(unset)"}, "(unset)", id="nothing"),
        pytest.param(("1.4.2", DIGEST_A), {"one": True}, "1.4.2", id="one-prefers-tag"),
        pytest.param((None, DIGEST_A), {"one": True, "short": True}, "sha256:aaaaaaaaaaaa", id="one-short"),
        pytest.param(("t", DIGEST_A), {"short": True, "mark": "…"}, "t@sha256:aaaaaaaaaaaa…", id="mark"),
    ],
)
def test_image_ref(args, kwargs, expected) -> None:
    assert image_ref(*args, **kwargs) == expected


def test_short_digest_and_entry_ref() -> None:
    assert short_digest(DIGEST_A) == "sha256:aaaaaaaaaaaa" and short_digest(None) == ""
    assert short_digest("sha256:abc") == "sha256:abc"  # nothing cut: no mark
    assert entry_ref(None) == "(none)" and entry_ref(_e(None)) == "(unset)"
    assert entry_ref(_e(None, DIGEST_B)) == "sha256:bbbbbbbbbbbb" and entry_ref(_e("2.0")) == "2.0"


def test_image_reference_is_what_docker_pull_takes() -> None:
    img = Image(account="123456789012", region="us-west-2", repository="team/api", tag="1.0", digest=DIGEST_A)
    assert img.reference == f"123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api:1.0@{DIGEST_A}"


@pytest.mark.parametrize(
    ("entry", "wanted", "sets", "same"),
    [
        pytest.param(_e("1.0"), _e("1.0"), True, True, id="equal"),
        pytest.param(_e("1.0", ""), _e("1.0", None), True, True, id="empty-is-none"),
        pytest.param(_e("1.0"), _e("1.1"), False, False, id="other-tag"),
        pytest.param(_e("1.0", DIGEST_A), _e("1.0", DIGEST_B), False, False, id="other-digest"),
        pytest.param(_e("1.0", new_name="x"), _e("1.0", new_name=None), True, False, id="wanted-no-newName"),
        pytest.param(_e("1.0", new_name="x"), _e("1.0", new_name="y"), False, False, id="other-newName"),
    ],
)
def test_entry_comparisons(entry, wanted, sets, same) -> None:
    assert entry_sets(entry, wanted) is sets
    assert same_entry(entry, wanted) is same


def test_same_entry_of_absent_entries() -> None:
    assert same_entry(None, None) and not same_entry(None, _e()) and not same_entry(_e(), None)


# --- which ECR facts a decision needs ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("target_kw", "entry", "expected"),
    [
        pytest.param({}, _e("1.0.0"), [("1.0.0", None)], id="push-time-asks-the-current"),
        pytest.param({"pushed_at": None}, _e("1.0.0"), [("1.0.0", None), ("1.1.0", None)], id="and-the-new"),
        pytest.param(
            {"digest": DIGEST_B, "pushed_at": None},
            _e(None, DIGEST_A),
            [(None, DIGEST_A), (None, DIGEST_B)],
            id="by-digest",
        ),
        pytest.param({"order": "semver"}, _e("1.0.0"), [], id="semver-needs-none"),
        pytest.param({"order": "none"}, _e("1.0.0"), [], id="none-needs-none"),
        pytest.param({}, _e("1.1.0"), [], id="same-image"),
        pytest.param({}, _e(None), [], id="entry-pins-nothing"),
        pytest.param({}, _e("1.0.0", new_name="other/image"), [], id="entry-of-another-image"),
        pytest.param({"image": "nginx"}, _e("1.0.0", new_name="nginx"), [], id="not-ecr"),
    ],
)
def test_lookups(target_kw, entry, expected) -> None:
    assert never_downgrade.lookups(_t(**target_kw), entry) == expected


# --- edit-kustomize against the base -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("target_kw", "file_tag", "known", "decision", "changed", "reason"),
    [
        pytest.param({}, "1.0.0", {("1.0.0", None): OLD_AT}, "update", True, "", id="newer-push"),
        pytest.param({}, "1.0.0", {("1.0.0", None): LATER_AT}, "stale", False, "", id="older-push"),
        pytest.param({}, "1.0.0", {("1.0.0", None): None}, "update", True, "unknown", id="current-unknown"),
        pytest.param({}, "1.1.0", {}, "current", False, "1.1.0", id="same"),
        pytest.param({"order": "semver", "tag": "0.9.0"}, "1.0.0", {}, "stale", False, "", id="semver-older"),
        pytest.param({"order": "semver", "tag": "1.0.1"}, "1.0.0", {}, "update", True, "", id="semver-newer"),
        pytest.param({"order": "none", "tag": "0.1"}, "1.0.0", {}, "update", True, "", id="none-always"),
    ],
)
def test_edit_kustomize_decide(target_kw, file_tag, known, decision, changed, reason) -> None:
    t = _t(**target_kw)
    plan = edit_kustomize.decide(
        t, kustomization(file_tag), "overlays/prod/kustomization.yaml", "c0ffee", "main", known
    )
    assert (plan.decision, plan.changed) == (decision, changed), plan.reason
    assert reason in plan.reason
    assert plan.old.newTag == file_tag and plan.new.newTag == t.tag
    assert plan.base_commit == "c0ffee" and plan.base_branch == "main" and plan.image_name == "api"


def test_edit_kustomize_decide_names_the_entries_when_the_image_is_missing() -> None:
    with pytest.raises(ImageNotFoundError, match=r"found: web.*add it under images:"):
        edit_kustomize.decide(_t(), "images:\n- name: web\n  newTag: '1'\n", "k.yaml", "c", "main", {})


# --- edit-kustomize against the proposal branch ------------------------------------------------------


def _planned(**kw) -> Plan:
    base = {
        "changed": True,
        "decision": "update",
        "reason": "newer",
        "file": "overlays/prod/kustomization.yaml",
        "image_name": "api",
        "old": _e("1.0.0"),
        "new": _e("1.1.0"),
    }
    return Plan(**(base | kw))


@pytest.mark.parametrize(
    ("provider", "proposed", "known", "changed", "pr_decision", "decision"),
    [
        pytest.param("local", None, {}, True, None, "update", id="no-branch"),
        pytest.param("local", _e("1.1.0"), {}, False, "current", "current", id="local-same-final"),
        pytest.param("github", _e("1.1.0"), {}, True, "current", "update", id="github-same-travels"),
        pytest.param(
            "local", _e("2.0.0"), {("2.0.0", None): LATER_AT}, False, "stale", "stale", id="local-newer"
        ),
        pytest.param(
            "github", _e("2.0.0"), {("2.0.0", None): LATER_AT}, True, "stale", "update", id="github-newer"
        ),
        pytest.param(
            "local", _e("0.9.0"), {("0.9.0", None): OLD_AT}, True, "update", "update", id="older-replaced"
        ),
    ],
)
def test_against_branch(provider, proposed, known, changed, pr_decision, decision) -> None:
    t = _t(mode="pr", provider=provider)
    plan = never_downgrade.against_branch(t, _planned(), "imagebump/prod/x", proposed, known)
    assert (plan.changed, plan.pr_decision, plan.decision) == (changed, pr_decision, decision)
    assert plan.pr_branch == "imagebump/prod/x" and plan.pr_entry == proposed
    if pr_decision == "stale":
        assert "newer than 1.1.0" in plan.pr_reason
    if provider == "github" and pr_decision in ("current", "stale"):
        assert "commit-pr skips unless" in plan.reason


def test_branch_lookups_skip_a_branch_that_proposes_the_plan() -> None:
    t = _t(mode="pr", pushed_at=None)
    assert never_downgrade.branch_lookups(t, _planned(), _e("1.1.0")) == []
    assert never_downgrade.branch_lookups(t, _planned(), None) == []
    assert never_downgrade.branch_lookups(t, _planned(), _e("2.0.0")) == [("2.0.0", None), ("1.1.0", None)]


# --- commit-pr's re-check on the newest base ---------------------------------------------------------


@pytest.mark.parametrize(
    ("order", "current", "refused", "reason"),
    [
        pytest.param("push-time", _e("1.0.0"), False, "", id="unchanged-since-plan"),
        pytest.param("push-time", _e("1.1.0"), True, "already sets api to 1.1.0", id="landed"),
        pytest.param(
            "push-time", _e("1.5.0"), True, "without knowing which was pushed later", id="moved-push-time"
        ),
        pytest.param(
            "semver", _e("1.5.0"), True, "changed since the plan (1.0.0 → 1.5.0)", id="moved-semver-newer"
        ),
        pytest.param("semver", _e("1.0.5"), False, "", id="moved-semver-older"),
        pytest.param("none", _e("1.5.0"), False, "", id="moved-order-none"),
        pytest.param("push-time", None, False, "", id="no-entry"),
    ],
)
def test_recheck(order, current, refused, reason) -> None:
    why = never_downgrade.recheck(_t(order=order), _planned(), current)
    assert (why is not None) is refused, why
    assert reason in (why or "")


# --- reconcile: the sweep against the overlay and its proposal branch ---------------------------------

SWEEP_CASES = [
    # (mode, order, overlay entry, its push time, branch entry, its push time) → state, reason
    pytest.param("commit", "push-time", _e("1.0.0"), OLD_AT, None, None, "behind", "", id="older-overlay"),
    pytest.param(
        "commit", "push-time", _e("1.1.0"), None, None, None, "current", "holds the newest", id="same"
    ),
    pytest.param(
        "commit",
        "push-time",
        _e("hotfix"),
        LATER_AT,
        None,
        None,
        "ahead",
        "never touched",
        id="newer-overlay",
    ),
    pytest.param(
        "commit", "semver", _e("1.2.0"), None, _e("1.1.0"), None, "ahead", "never touched", id="semver-newer"
    ),
    pytest.param(
        "commit",
        "push-time",
        _e("1.0.0"),
        OLD_AT,
        _e("1.1.0"),
        None,
        "behind",
        "",
        id="commit-ignores-branches",
    ),
    pytest.param(
        "pr",
        "push-time",
        _e("1.0.0"),
        OLD_AT,
        _e("1.1.0"),
        None,
        "proposed",
        "already proposes",
        id="proposed",
    ),
    pytest.param(
        "pr",
        "push-time",
        _e("1.0.0"),
        OLD_AT,
        _e("0.9.0"),
        OLD_AT,
        "behind",
        "proposes the older",
        id="older-pr",
    ),
    pytest.param(
        "pr",
        "push-time",
        _e("1.0.0"),
        OLD_AT,
        _e("hotfix"),
        LATER_AT,
        "ahead",
        "never touched",
        id="newer-pr",
    ),
]


@pytest.mark.parametrize(
    ("mode", "order", "current", "current_at", "proposed", "proposed_at", "state", "why"), SWEEP_CASES
)
def test_sweep_verdict(mode, order, current, current_at, proposed, proposed_at, state, why) -> None:
    """reconcile's never-downgrade verdicts live here with the others: an overlay or a living
    proposal that holds something newer than the newest allowed image is ``ahead``, never touched."""
    newest = _t(mode=mode, order=order, provider="github")
    got, reason = never_downgrade.reconcile_verdict(
        newest=newest,
        tag=newest.tag,
        digest=None,
        current=current,
        current_pushed_at=current_at,
        branch="imagebump/prod/x",
        proposed=proposed,
        proposed_pushed_at=proposed_at,
    )
    assert got == state, reason
    assert why in reason
    if mode == "pr" and proposed is not None:
        assert "imagebump/prod/x" in reason


# --- resolve-image -------------------------------------------------------------------------------------

RULES = load_rules(
    "- registryURI: 123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api\n"
    "  githubRepository: https://github.com/team/gitops/overlays/prod\n"
)


def _img(**kw) -> Image:
    base = {"account": "123456789012", "region": "us-west-2", "repository": "team/api", "tag": "1.1.0"}
    return Image(**(base | kw))


@pytest.mark.parametrize(
    ("img", "manual", "found", "targets", "error", "reason"),
    [
        pytest.param(_img(), False, EcrImage(DIGEST_A, ("1.1.0",), NEW_AT), 1, None, "", id="match"),
        pytest.param(_img(), False, None, 0, None, "deleted since the push", id="gone"),
        pytest.param(_img(), True, None, 0, "check the tag", "", id="manual-gone"),
        pytest.param(_img(digest=DIGEST_B), False, EcrImage(DIGEST_A), 0, None, "moved from", id="tag-moved"),
        pytest.param(
            _img(digest=DIGEST_B), True, EcrImage(DIGEST_A), 0, "give the tag alone", "", id="manual-moved"
        ),
        pytest.param(
            _img(tag=None, digest=DIGEST_A), True, None, 0, "check the digest", "", id="digest-gone"
        ),
        pytest.param(
            _img(repository="team/web"), False, EcrImage(DIGEST_A), 0, None, "no rule", id="no-rule"
        ),
    ],
)
def test_resolve_image_decide(img, manual, found, targets, error, reason) -> None:
    if error:
        with pytest.raises(ConfigError, match=error):
            resolve_image.decide(img, manual=manual, account=img.account, found=found, rules=RULES)
        return
    out = resolve_image.decide(img, manual=manual, account=img.account, found=found, rules=RULES)
    assert len(out.targets) == targets and reason in out.reason
    if targets:
        assert out.image.digest == DIGEST_A and out.image.pushed_at == NEW_AT
        assert out.targets[0].tag == "1.1.0" and out.targets[0].digest == DIGEST_A


def test_resolve_image_input_wants_exactly_one() -> None:
    for kw, word in (({}, "neither"), ({"event": "{}", "image": "x"}, "both")):
        with pytest.raises(ConfigError, match=word):
            ResolveImageInput.of(**kw)
    assert ResolveImageInput.of(image="x").manual
    assert isinstance(RULES, RuleSet)

"""steps.rules: loading the in-house rules format and matching images against it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from steps.domain.errors import RulesError
from steps.domain.events import parse_image_reference
from steps.domain.models import Image
from steps.rules import RuleSet, load_rules, load_rules_file
from tests.fixtures.hang_guard import run_guarded

ROOT = Path(__file__).resolve().parents[3]
RULES = Path(__file__).resolve().parents[2] / "testdata" / "rules"
IN_HOUSE = RULES / "in-house.yaml"
REG = "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com"
DIGEST = "sha256:" + "ab" * 32


def image(ref: str) -> Image:
    return parse_image_reference(ref)


@pytest.fixture(scope="module")
def in_house() -> RuleSet:
    return load_rules_file(IN_HOUSE)


# --- the in-house example, verbatim -------------------------------------------------------------


def test_in_house_file_is_the_design_example_verbatim() -> None:
    text = IN_HOUSE.read_text()
    assert text.startswith("- githubRepository: https://github.com/AAA/BBB/services/$1/$2/$3/overlays/stg\n")
    assert "registryURI: 123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/hoge/fuga/$1/$2:$3.*\n" in text


IN_HOUSE_CASES = [
    pytest.param(
        f"{REG}/hoge/a/b/c:abc1234",
        [(0, "https://github.com/AAA/BBB", "services/a/b/c/overlays/stg")],
        {1: "does not match"},
        id="rule0-match-short-sha",
    ),
    pytest.param(
        f"{REG}/hoge/a/b/c:" + "0123456789abcdef0123456789abcdef01234567",
        [(0, "https://github.com/AAA/BBB", "services/a/b/c/overlays/stg")],
        {1: "does not match"},
        id="rule0-match-full-sha",
    ),
    pytest.param(
        f"{REG}/hoge/a/b/c:v1.2.3",
        [],
        {0: "not allowed by allowImageTag", 1: "does not match"},
        id="rule0-not-allowed",
    ),
    pytest.param(f"{REG}/hoge/a/b/c:abc123", [], {0: "not allowed"}, id="rule0-six-hex-too-short"),
    pytest.param(f"{REG}/hoge/a/b/c:ABC1234", [], {0: "not allowed"}, id="rule0-uppercase-hex-not-allowed"),
    pytest.param(
        f"{REG}/hoge/a/b/c:latest", [], {0: "denied by denyImageTag entry 'latest'"}, id="rule0-latest-denied"
    ),
    pytest.param(
        f"{REG}/hoge/fuga/api/web:v1-2",
        [(1, "https://github.com/AAA/AAAAAA", "services/api/web/v1/overlays/stg")],
        {0: "not allowed"},
        id="rule1-tag-pattern-captures-v1",
    ),
    pytest.param(
        f"{REG}/hoge/fuga/api/web:prod.20240101",
        [(1, "https://github.com/AAA/AAAAAA", "services/api/web/prod/overlays/stg")],
        {0: "not allowed"},
        id="rule1-dot-rest",
    ),
    pytest.param(
        f"{REG}/hoge/fuga/api/web:stg",
        [(1, "https://github.com/AAA/AAAAAA", "services/api/web/stg/overlays/stg")],
        {0: "not allowed"},
        id="rule1-empty-rest",
    ),
    pytest.param(
        f"{REG}/hoge/fuga/api/web:abc1234",
        [
            (0, "https://github.com/AAA/BBB", "services/fuga/api/web/overlays/stg"),
            (1, "https://github.com/AAA/AAAAAA", "services/api/web/abc1234/overlays/stg"),
        ],
        {},
        id="both-rules-two-targets",
    ),
    pytest.param(f"{REG}/hoge/fuga/api/web:latest", [], {0: "denied", 1: "denied"}, id="both-deny-latest"),
    pytest.param(
        f"{REG}/hoge/fuga/api/web:_x",
        [],
        {1: "does not match the tag pattern"},
        id="rule1-tag-starts-with-underscore",
    ),
    pytest.param(
        f"{REG}/hoge/fuga/api:abc1234",
        [],
        {0: "does not match", 1: "does not match"},
        id="miss-too-few-segments",
    ),
    pytest.param(
        f"{REG}/hoge/a/b/c/d:abc1234",
        [],
        {0: "does not match", 1: "does not match"},
        id="miss-too-many-segments",
    ),
    pytest.param(
        f"{REG}/team/web:abc1234",
        [],
        {0: "repository team/web does not match", 1: "does not match"},
        id="miss-other-repo",
    ),
    pytest.param(
        "210987654321.dkr.ecr.ap-northeast-1.amazonaws.com/hoge/a/b/c:abc1234",
        [],
        {0: "registry 210987654321", 1: "is not 123456789012"},
        id="miss-other-account",
    ),
    pytest.param(
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/hoge/a/b/c:abc1234",
        [],
        {0: "is not"},
        id="miss-other-region",
    ),
]


@pytest.mark.parametrize(("ref", "targets", "skipped"), IN_HOUSE_CASES)
def test_in_house_example(in_house: RuleSet, ref: str, targets: list, skipped: dict) -> None:
    match = in_house.match(image(ref), all_reasons=True)
    assert [(t.rule, t.repo_url, t.path) for t in match.targets] == targets
    reasons = {s.rule: s.reason for s in match.skipped}
    assert set(reasons) | {t.rule for t in match.targets} == {0, 1}
    for rule, fragment in skipped.items():
        assert fragment in reasons[rule]
    for t in match.targets:
        assert (
            t.env == "staging"
            and t.settings.mode == "pr"
            and t.settings.order == "push-time"
            and t.settings.provider == "github"
        )
        assert t.image == image(ref).uri and t.tag == image(ref).tag


def test_indexed_match_equals_full_scan(in_house: RuleSet) -> None:
    for param in IN_HOUSE_CASES:
        img = image(param.values[0])
        assert in_house.match(img).targets == in_house.match(img, all_reasons=True).targets


def test_rules_key_form_is_the_same(in_house: RuleSet) -> None:
    text = "rules:\n" + "".join("  " + line + "\n" for line in IN_HOUSE.read_text().splitlines())
    keyed = load_rules(text)
    img = image(f"{REG}/hoge/fuga/api/web:abc1234")
    assert keyed.match(img).targets == in_house.match(img).targets


# --- digest-only pushes -------------------------------------------------------------------------


def test_digest_only_push(in_house: RuleSet) -> None:
    match = in_house.match(image(f"{REG}/hoge/fuga/api/web@{DIGEST}"))
    assert match.targets == []
    reasons = {s.rule: s.reason for s in match.skipped}
    assert "digest-only push (no tag): the rule has an allowImageTag list" in reasons[0]
    assert "digest-only push (no tag): registryURI has the tag pattern '$3.*'" in reasons[1]


def test_digest_only_push_matches_rule_with_only_deny() -> None:
    rules = load_rules(
        f"- registryURI: {REG}/team/$1\n"
        "  githubRepository: https://github.com/o/r/apps/$1\n"
        "  denyImageTag: [latest]\n"
    )
    (target,) = rules.match(image(f"{REG}/team/api@{DIGEST}")).targets
    assert target.tag is None and target.digest == DIGEST and target.path == "apps/api"


# --- semantics ---------------------------------------------------------------------------------


def one(rules_yaml: str, ref: str):
    return load_rules(rules_yaml).match(image(ref), all_reasons=True)


SEMANTICS = [
    pytest.param(
        f"- registryURI: {REG}/team/api\n  githubRepository: https://ghe.example.com/o/r/deploy/prod/\n",
        f"{REG}/team/api:1",
        ("https://ghe.example.com/o/r", "deploy/prod"),
        id="literal-rule-trailing-slash",
    ),
    pytest.param(
        f"- registryURI: {REG}/team/api\n  githubRepository: http://127.0.0.1:8080/o/r/overlays/dev\n",
        f"{REG}/team/api:1",
        ("http://127.0.0.1:8080/o/r", "overlays/dev"),
        id="local-http-port",
    ),
    pytest.param(
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r.git\n",
        f"{REG}/team/api:1",
        ("https://github.com/o/r", "."),
        id="repo-root-and-dot-git",
    ),
    pytest.param(
        f"- registryURI: {REG}/$1/$2\n  githubRepository: https://github.com/$1/gitops/$2\n",
        f"{REG}/team/api:1",
        ("https://github.com/team/gitops", "api"),
        id="capture-in-owner",
    ),
    pytest.param(
        f"- registryURI: {REG}/svc-$1\n  githubRepository: https://github.com/o/r/$1\n",
        f"{REG}/svc-api:1",
        ("https://github.com/o/r", "api"),
        id="capture-inside-segment",
    ),
    pytest.param(
        f"- registryURI: {REG}/$1/$1\n  githubRepository: https://github.com/o/r/$1\n",
        f"{REG}/api/web:1",
        "does not match",
        id="repeated-capture-must-agree",
    ),
    pytest.param(
        f"- registryURI: {REG}/$1/app:$1-.*\n  githubRepository: https://github.com/o/r/$1\n",
        f"{REG}/prod/app:stg-1",
        "$1 is 'prod' in the repository but 'stg' in the tag",
        id="capture-across-repo-and-tag-must-agree",
    ),
    pytest.param(
        f"- registryURI: {REG}/$1/app:$1-.*\n  githubRepository: https://github.com/o/r/$1\n",
        f"{REG}/prod/app:prod-1",
        ("https://github.com/o/r", "prod"),
        id="capture-across-repo-and-tag-agree",
    ),
    pytest.param(
        f"- registryURI: {REG}/team/api:v[0-9]+\n  githubRepository: https://github.com/o/r/x\n",
        f"{REG}/team/api:v12x",
        "does not match the tag pattern",
        id="tag-pattern-is-full-match",
    ),
    pytest.param(
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/a/../../etc\n",
        f"{REG}/team/api:1",
        "'..' would leave",
        id="dotdot-in-path-refused",
    ),
    pytest.param(
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/a/%2e%2e/b\n",
        f"{REG}/team/api:1",
        "would leave",
        id="encoded-dotdot-refused",
    ),
    pytest.param(
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/a//b\n",
        f"{REG}/team/api:1",
        "empty path segment",
        id="empty-segment-refused",
    ),
    pytest.param(
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/./b\n",
        f"{REG}/team/api:1",
        "'.' would leave",
        id="dot-segment-refused",
    ),
    pytest.param(
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/a\n"
        "  allowImageTag: ['1', 'regexp:v.*']\n"
        "  denyImageTag: ['regexp:v0\\..*']\n",
        f"{REG}/team/api:v0.1",
        "denied by denyImageTag entry 'regexp:v0\\..*'",
        id="deny-wins-over-allow",
    ),
    pytest.param(
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/a\n"
        "  allowImageTag: ['1', 'regexp:v.*']\n",
        f"{REG}/team/api:1",
        ("https://github.com/o/r", "a"),
        id="allow-literal",
    ),
    pytest.param(
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/a\n"
        "  allowImageTag: ['1']\n",
        f"{REG}/team/api:12",
        "not allowed",
        id="allow-literal-is-exact",
    ),
    pytest.param(
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/a\n"
        "  allowImageTag: ['regexp:1']\n",
        f"{REG}/team/api:12",
        "not allowed",
        id="allow-regexp-is-full-match",
    ),
]


@pytest.mark.parametrize(("rules_yaml", "ref", "expected"), SEMANTICS)
def test_semantics(rules_yaml: str, ref: str, expected: tuple | str) -> None:
    match = one(rules_yaml, ref)
    if isinstance(expected, tuple):
        assert [(t.repo_url, t.path) for t in match.targets] == [expected], match.skipped
    else:
        assert match.targets == []
        (skipped,) = match.skipped
        assert expected in skipped.reason


def test_optional_fields_reach_the_target() -> None:
    (target,) = (
        load_rules_file(RULES / "example.yaml")
        .match(image("123456789012.dkr.ecr.us-west-2.amazonaws.com/team/web:v2.0.0"))
        .targets
    )
    shown = {"rule", "env", "mode", "order", "write_digest", "labels", "reviewers", "provider"}
    assert {k: v for k, v in target.model_dump(mode="json").items() if k in shown} == {
        "rule": 1,
        "env": "production",
        "mode": "pr",
        "order": "semver",
        "write_digest": True,
        "labels": ["imagebump", "production"],
        "reviewers": ["platform-team"],
        "provider": "github",
    }
    (commit,) = (
        load_rules_file(RULES / "example.yaml")
        .match(image("123456789012.dkr.ecr.us-west-2.amazonaws.com/team/web:abc1234"))
        .targets
    )
    assert (commit.settings.mode, commit.settings.base_branch, commit.env) == ("commit", "main", "staging")
    (named,) = (
        load_rules_file(RULES / "example.yaml")
        .match(image("123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api:release-eu-7"))
        .targets
    )
    assert (named.settings.image_name, named.path) == ("api", "apps/api/overlays/eu")


def test_same_overlay_from_two_rules_is_one_target() -> None:
    rules = load_rules(
        f"- registryURI: {REG}/team/$1\n  githubRepository: https://github.com/o/r/apps/$1\n"
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/apps/api\n"
    )
    match = rules.match(image(f"{REG}/team/api:1"))
    assert [t.rule for t in match.targets] == [0]
    assert "same overlay" in match.skipped[0].reason and "rule 0" in match.skipped[0].reason


def test_same_overlay_spelled_in_two_cases_on_github_is_one_target(monkeypatch) -> None:
    """``https://github.com/O/R.git`` and ``https://github.com/o/r`` are one repository on GitHub:
    two rules for one overlay are one target, not two writers of one file."""
    monkeypatch.delenv("IMAGEBUMP_GITHUB_API_URL", raising=False)
    rules = load_rules(
        f"- registryURI: {REG}/team/$1\n  githubRepository: https://github.com/O/R.git/apps/$1\n"
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/apps/api\n"
    )
    match = rules.match(image(f"{REG}/team/api:1"))
    assert [(t.rule, t.repo_url) for t in match.targets] == [(0, "https://github.com/O/R")]
    assert "same overlay" in match.skipped[0].reason and "rule 0" in match.skipped[0].reason


def test_unknown_account_matches_by_region_and_names_the_rules_account() -> None:
    rules = load_rules(f"- registryURI: {REG}/team/$1\n  githubRepository: https://github.com/o/r/apps/$1\n")
    img = Image(account="", region="ap-northeast-1", repository="team/api", tag="1")
    (target,) = rules.match(img).targets
    assert target.image == f"{REG}/team/api"


# --- bad rules files -------------------------------------------------------------------------

OK = f"registryURI: {REG}/team/$1\n  githubRepository: https://github.com/o/r/apps/$1\n"
GOOD_RULE = "- " + OK


def rule(extra: str = "", *, uri: str = f"{REG}/team/$1", git: str = "https://github.com/o/r/apps/$1") -> str:
    text = f"- registryURI: '{uri}'\n  githubRepository: '{git}'\n"
    return GOOD_RULE + text + "".join(f"  {line}\n" for line in extra.splitlines() if line)


BAD_RULES = [
    pytest.param("a: [\n", {"reason": "invalid-yaml"}, "", id="yaml-syntax"),
    pytest.param("", {"reason": "no-rules"}, "", id="empty-file"),
    pytest.param("rules:\n", {"reason": "no-rules"}, "", id="rules-key-null"),
    pytest.param("just text\n", {"reason": "not-a-list"}, "", id="scalar-top"),
    pytest.param("rulez:\n- x: 1\n", {"reason": "top-level-keys"}, "", id="top-typo"),
    pytest.param("- 1\n", {"rule": 0, "field": "(rule)"}, "must be a mapping", id="rule-not-mapping"),
    pytest.param(
        GOOD_RULE + "- registryURI: x\n  githubRepository: https://github.com/o/r\n",
        {"rule": 1, "field": "registryURI"},
        "",
        id="bad-uri-host",
    ),
    pytest.param(
        GOOD_RULE + f"- registryURI: {REG}/a\n",
        {"rule": 1, "field": "githubRepository"},
        "is required",
        id="missing-github",
    ),
    pytest.param(
        GOOD_RULE + "- githubRepository: https://github.com/o/r\n",
        {"rule": 1, "field": "registryURI"},
        "is required",
        id="missing-registry",
    ),
    pytest.param(
        rule("githubRepo: x"), {"rule": 1, "field": "githubRepo"}, "unknown field", id="unknown-field-typo"
    ),
    pytest.param(
        rule("allowImageTags: [x]"),
        {"rule": 1, "field": "allowImageTags"},
        "unknown field",
        id="unknown-plural",
    ),
    pytest.param(
        rule("mode: merge"), {"rule": 1, "field": "mode"}, "must be one of pr, commit", id="bad-mode"
    ),
    pytest.param(
        rule("order: newest"),
        {"rule": 1, "field": "order"},
        "must be one of push-time, semver, none",
        id="bad-order",
    ),
    pytest.param(
        rule("provider: gitlab"),
        {"rule": 1, "field": "provider"},
        "must be one of github, local",
        id="bad-provider",
    ),
    pytest.param(
        rule("writeDigest: 'yes'"),
        {"rule": 1, "field": "writeDigest"},
        "must be true or false",
        id="writedigest-string",
    ),
    pytest.param(rule("labels: bug"), {"rule": 1, "field": "labels"}, "must be a list", id="labels-scalar"),
    pytest.param(
        rule("reviewers: [1]"), {"rule": 1, "field": "reviewers[0]"}, "must be a string", id="reviewer-number"
    ),
    pytest.param(rule("env: 1"), {"rule": 1, "field": "env"}, "must be a string", id="env-number"),
    pytest.param(
        rule("baseBranch: 'a..b'"),
        {"rule": 1, "field": "baseBranch"},
        "'a..b' is not a valid branch name",
        id="bad-branch",
    ),
    pytest.param(rule("imageName: 'a b'"), {"rule": 1, "field": "imageName"}, "", id="image-name-space"),
    pytest.param(
        rule("allowImageTag: 'regexp:x'"),
        {"rule": 1, "field": "allowImageTag"},
        "must be a list",
        id="allow-not-list",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:(']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "invalid regular expression",
        id="allow-bad-regex",
    ),
    pytest.param(
        rule("denyImageTag: [ok, 'regexp:[a-']"),
        {"rule": 1, "field": "denyImageTag[1]"},
        "invalid regular expression",
        id="deny-bad-regex",
    ),
    pytest.param(
        rule("allowImageTag: ['v*']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "'v*' is not a valid image tag",
        id="allow-glob",
    ),
    pytest.param(
        rule("allowImageTag: [1.10]"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "must be a string",
        id="allow-float",
    ),
    # RE2 refuses what needs backtracking: each is named, with the rule and the field (issue 12).
    pytest.param(
        rule("allowImageTag: ['regexp:(a)\\1']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "regular expression '(a)\\\\1' uses a backreference",
        id="re2-backreference",
    ),
    pytest.param(
        rule("denyImageTag: ['x', 'regexp:(?P<v>a)-(?P=v)']"),
        {"rule": 1, "field": "denyImageTag[1]"},
        "regular expression '(?P<v>a)-(?P=v)' uses a backreference",
        id="re2-named-backreference",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:(?!latest$).*']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "regular expression",
        id="re2-lookahead",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:(?=v)v1']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "uses lookaround",
        id="re2-positive-lookahead",
    ),
    pytest.param(
        rule("denyImageTag: ['regexp:.*(?<=-rc)']"),
        {"rule": 1, "field": "denyImageTag[0]"},
        "regular expression",
        id="re2-lookbehind",
    ),
    pytest.param(
        rule("denyImageTag: ['regexp:.*(?<!-rc)']"),
        {"rule": 1, "field": "denyImageTag[0]"},
        "uses lookaround",
        id="re2-negative-lookbehind",
    ),
    pytest.param(
        rule(uri=f"{REG}/team/api:(?=v).*"),
        {"rule": 1, "field": "registryURI"},
        "regular expression",
        id="re2-lookahead-tag",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:(?>a+)b']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "atomic group or a possessive",
        id="re2-atomic",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:a++b']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "atomic group or a possessive",
        id="re2-possessive",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:(a)?(?(1)b|c)']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "conditional group",
        id="re2-conditional",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:(?x) a b']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "inline flag RE2 does not support",
        id="re2-verbose",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:v1\\Z']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "write $ (or \\z)",
        id="python-end-of-string",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:a{,3}']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "write {0,3}",
        id="python-empty-lower-count",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:a{4294967296}']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "regular expression 'a{4294967296}' repeats 4294967296 times",
        id="count-overflow",
    ),
    pytest.param(
        rule(uri=f"{REG}/team/api:v{{2,99999999999999999999}}"),
        {"rule": 1, "field": "registryURI"},
        "regular expression",
        id="count-overflow-tag-pattern",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:a{1001}']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "more than the 1000 RE2 allows",
        id="count-over-1000",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:a{3,2}']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "empty range {3,2}",
        id="count-reversed",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:v1\u00e9']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "non-ASCII character",
        id="non-ascii",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:(?:(?:[a-z0-9]?){22}){22}-']"),
        {"rule": 1, "field": "allowImageTag[0]"},
        "regular expression '(?:(?:[a-z0-9]?){22}){22}-' brings this rule's patterns to",
        id="program-budget-one-pattern",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:(?:[a-z]{0,60}){0,5}', 'regexp:(?:[0-9]{0,60}){0,5}']"),
        {"rule": 1, "field": "allowImageTag[1]"},
        "regular expression",
        id="program-budget-whole-rule",
    ),
    pytest.param(
        rule(uri=f"{REG}/team/api:v(["),
        {"rule": 1, "field": "registryURI"},
        "invalid regular expression",
        id="bad-tag-pattern",
    ),
    pytest.param(
        rule(uri=f"{REG}/team/api:"), {"rule": 1, "field": "registryURI"}, "", id="empty-tag-pattern"
    ),
    pytest.param(
        rule(uri=f"{REG}/Team/$1"),
        {"rule": 1, "field": "registryURI"},
        "repository part 'Team/$1' can never match",
        id="uppercase-repo",
    ),
    pytest.param(
        rule(uri=f"{REG}/team//$1"),
        {"rule": 1, "field": "registryURI"},
        "repository part",
        id="empty-segment-repo",
    ),
    pytest.param(rule(uri=f"{REG}/"), {"rule": 1, "field": "registryURI"}, "", id="no-repo"),
    pytest.param(
        rule(uri=f"{REG}/team/$0"),
        {"rule": 1, "field": "registryURI"},
        "$0 is not a capture",
        id="dollar-zero",
    ),
    pytest.param(
        rule(uri="$1.dkr.ecr.ap-northeast-1.amazonaws.com/team/x"),
        {"rule": 1, "field": "registryURI"},
        "",
        id="capture-in-host",
    ),
    pytest.param(
        rule(uri="docker.io/team/x"),
        {"rule": 1, "field": "registryURI"},
        "'docker.io/team/x'",
        id="not-ecr-host",
    ),
    pytest.param(
        rule(git="https://github.com/o/r/apps/$2"),
        {"rule": 1, "field": "githubRepository"},
        "$2 is not captured",
        id="uncaptured-var",
    ),
    pytest.param(
        rule(git="ssh://git@github.com/o/r"),
        {"rule": 1, "field": "githubRepository"},
        "'ssh://git@github.com/o/r' must be",
        id="ssh-url",
    ),
    pytest.param(
        rule(git="https://x:tok@github.com/o/r/a/$1"),
        {"rule": 1, "field": "githubRepository"},
        "must not contain credentials",
        id="credentials",
    ),
    pytest.param(
        rule(git="https://github.com/o"),
        {"rule": 1, "field": "githubRepository"},
        "'https://github.com/o' must name",
        id="no-repo-in-url",
    ),
    pytest.param(
        rule(git="https://github.com/o/r/a?ref=$1"),
        {"rule": 1, "field": "githubRepository"},
        "'https://github.com/o/r/a?ref=***' must not contain a query",
        id="query",
    ),
    pytest.param(
        rule(git="https://git hub.com/o/r"),
        {"rule": 1, "field": "githubRepository"},
        "host 'git hub.com'",
        id="space-in-host",
    ),
    pytest.param(
        GOOD_RULE + "- registryURI: 1\n  githubRepository: x\n",
        {"rule": 1, "field": "registryURI"},
        "must be a string",
        id="uri-number",
    ),
    pytest.param("- registryURI: a\n  registryURI: b\n", {"reason": "invalid-yaml"}, "", id="duplicate-key"),
]


@pytest.mark.parametrize(("text", "expected", "fragment"), BAD_RULES)
def test_bad_rules_files(text: str, expected: dict, fragment: str) -> None:
    """The rule and the field at fault (or, for the file as a whole, why) are fields of the error;
    ``fragment`` is what no field carries: the cause or the fix the message must name."""
    with pytest.raises(RulesError) as info:
        load_rules(text, source="rules.yaml")
    message = str(info.value)
    assert message.startswith("rules.yaml: ")  # the file to fix
    assert {key: getattr(info.value, key) for key in expected} == expected
    if fragment:
        assert fragment in message, message


def test_missing_rules_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(RulesError) as info:
        load_rules_file(tmp_path / "nope.yaml")
    assert (info.value.reason, info.value.field) == ("no-file", "IMAGEBUMP_RULES_FILE")


def test_empty_list_is_valid() -> None:
    assert len(load_rules("[]\n")) == 0
    assert len(load_rules("rules: []\n")) == 0


@pytest.mark.parametrize(
    "pattern",
    [
        pytest.param(r"v?[0-9]+\.[0-9]+\.[0-9]+", id="semver"),
        pytest.param(r"(\d+\.){2}\d+", id="separated-group"),
        pytest.param(r"(?:[a-z]+-)*[a-z0-9]+", id="dash-separated"),
        pytest.param(r"[0-9a-f]{7,40}", id="sha"),
        pytest.param(r"(\d{2})+", id="fixed-width-group"),
        pytest.param(r"^[0-9a-f]{7,40}$", id="design-sha"),
        pytest.param(r"(\d+\.){3}\d+", id="bounded-separated-group"),
        pytest.param(r"(foo|bar)+", id="alternation-distinct-starts"),
        pytest.param(r"v[0-9]+(-(rc|beta)[0-9]+)?", id="optional-alternation-not-repeated"),
        pytest.param(r"(-?[0-9])+", id="optional-before-required"),
        pytest.param(r"[[:alpha:]]+-[0-9]{1,3}", id="posix-class-and-count"),
        pytest.param(r"v}+", id="literal-brace-then-plus"),
        pytest.param(r"(?i)V[0-9]+", id="case-insensitive-flag"),
    ],
)
def test_safe_patterns_are_accepted(pattern: str) -> None:
    load_rules(rule(f"allowImageTag: ['regexp:{pattern}']"))


# --- linear-time matching (issue 12) ------------------------------------------------------------


def _is_re2(pattern: object) -> bool:
    return type(pattern).__module__ == "re2" and not isinstance(pattern, re.Pattern)


A127 = "a" * 127


def lrule(extra: str = "", *, uri: str = f"{REG}/team/$1") -> str:
    """Rule 0 (team/$1, no pattern) plus rule 1 with ``extra``, into another overlay."""
    return rule(extra, uri=uri, git="https://github.com/o/r/other/$1")


#: (rules, a near-miss tag of 128 characters that almost matches then fails, a matching tag, patterns)
LINEAR = [
    # The three shapes the issue measured (the old shape check let them through: polynomial time).
    pytest.param(
        lrule("allowImageTag: ['regexp:.*.*.*.*.*.*-']"), A127 + "a", A127 + "-", 3, id="dot-star-six-times"
    ),
    pytest.param(
        lrule(uri=f"{REG}/team/$1:" + "[a-z]*" * 7 + "-"),
        A127 + "0",
        A127 + "-",
        3,
        id="class-star-seven-times",
    ),
    pytest.param(
        lrule("allowImageTag: ['regexp:v?" + "[0-9]*\\.?" * 6 + "[0-9]*-?[0-9a-z]*']"),
        "1" * 127 + "_",
        "1" * 127 + "a",
        3,
        id="semver-optional-dots",
    ),
    # What the old check refused as exponential is fine for RE2: accepted, and linear.
    pytest.param(lrule("allowImageTag: ['regexp:(a+)+$']"), A127 + "b", "a" * 128, 3, id="nested-plus"),
    pytest.param(
        lrule("denyImageTag: ['regexp:(\\w+\\.?)*x']"), "a" * 128, A127 + "x", 3, id="word-dot-star"
    ),
    pytest.param(
        lrule("allowImageTag: ['regexp:(a|a?)+$', 'regexp:(.*a){20}']"),
        A127 + "b",
        "a" * 128,
        4,
        id="alternations",
    ),
    pytest.param(lrule(uri=f"{REG}/team/$1:(a|a)*$"), A127 + "b", "a" * 128, 3, id="alternation-tag-pattern"),
]


@pytest.mark.parametrize(("rules_yaml", "near_miss", "matching", "count"), LINEAR)
def test_user_patterns_are_compiled_by_re2_and_match_correctly(
    rules_yaml: str, near_miss: str, matching: str, count: int
) -> None:
    """Every compiled user pattern is RE2's (linear in the tag); the timings are in bench/hostile.py."""
    ruleset = load_rules(rules_yaml)
    patterns = [p for r in ruleset.rules for p in r.patterns()]
    assert len(patterns) == count  # the repository parts, the tag patterns, every regexp: entry
    assert all(_is_re2(p) for p in patterns), patterns
    api = f"{REG}/team/api"
    assert len(near_miss) == len(matching) == 128
    near = ruleset.match(image(f"{api}:{near_miss}"), all_reasons=True)
    hit = ruleset.match(image(f"{api}:{matching}"), all_reasons=True)
    if "denyImageTag" in rules_yaml:  # a deny pattern: the near miss passes, the match is denied
        assert [t.rule for t in near.targets] == [0, 1] and [t.rule for t in hit.targets] == [0]
    else:
        assert [t.rule for t in near.targets] == [0]  # only the plain rule 0 takes the near miss
        assert [t.rule for t in hit.targets] == [0, 1]


def test_every_rule_pattern_of_the_design_examples_is_re2(in_house: RuleSet) -> None:
    for ruleset in (in_house, load_rules_file(RULES / "example.yaml")):
        for r in ruleset.rules:
            assert r.patterns() and all(_is_re2(p) for p in r.patterns())


@pytest.mark.parametrize(
    ("uri", "tag", "expected"),
    [
        pytest.param("app:$1-$1", "prod-prod", "prod", id="twice-in-tag-agree"),
        pytest.param("app:$1-$1", "prod-stg", "$1 captured both 'prod' and 'stg'", id="twice-in-tag-differ"),
        pytest.param("app:$1-[0-9]+-$1", "eu-7-eu", "eu", id="twice-around-a-pattern"),
        pytest.param("$1/app:$1\\..*", "prod.3", "prod", id="repository-and-tag-agree"),
    ],
)
def test_a_repeated_capture_is_compared_explicitly(uri: str, tag: str, expected: str) -> None:
    rules = load_rules(f"- registryURI: '{REG}/{uri}'\n  githubRepository: https://github.com/o/r/$1\n")
    repository = "prod/app" if uri.startswith("$1/") else "app"
    match = rules.match(image(f"{REG}/{repository}:{tag}"), all_reasons=True)
    if match.targets:
        assert [t.path for t in match.targets] == [expected]
    else:
        assert expected in match.skipped[0].reason


def test_repository_prefix_and_match_repository() -> None:
    rules = load_rules(
        f"- registryURI: {REG}/hoge/fuga/$1/$2\n  githubRepository: https://github.com/o/r/$1/$2\n"
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/api\n"
        f"- registryURI: {REG}/$1/$1\n  githubRepository: https://github.com/o/r/$1\n"
    )
    first, literal, twice = rules.rules
    assert (first.repository_prefix, literal.repository_prefix, twice.repository_prefix) == (
        "hoge/fuga/",
        "team/api",
        "",
    )
    assert first.match_repository("hoge/fuga/a/b") == {1: "a", 2: "b"}
    assert first.match_repository("hoge/fuga/a") is None
    assert literal.match_repository("team/api") == {}
    assert twice.match_repository("x/x") == {1: "x"} and twice.match_repository("x/y") is None


def test_a_huge_count_exits_2_naming_rule_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``regexp:a{4294967296}`` was an OverflowError (exit 3); now a clear error, exit 2."""
    from imagebump.cli import main

    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(rule("allowImageTag: ['regexp:a{4294967296}']"))
    assert main(["explain", "--rules", str(rules_file), f"{REG}/team/api:1"]) == 2
    err = capsys.readouterr().err
    assert "rule 1: allowImageTag[0]: regular expression 'a{4294967296}' repeats 4294967296 times" in err
    assert "Traceback" not in err and "OverflowError" not in err


# --- YAML: merge keys, alias bombs, secrets in messages ------------------------------------------


def test_merge_keys_load_with_the_written_key_overriding() -> None:
    rules = load_rules(
        "- &base\n"
        f"  registryURI: {REG}/team/$1\n"
        "  githubRepository: https://github.com/o/r/apps/$1/overlays/staging\n"
        "  env: staging\n"
        "  denyImageTag: [latest]\n"
        "- <<: *base\n"
        "  githubRepository: https://github.com/o/r/apps/$1/overlays/prod\n"
        "  env: production\n"
        "- <<: [{mode: commit}, *base]\n"
        "  env: dev\n"
    )
    staging, prod, dev = rules.rules
    assert (staging.env, prod.env, dev.env) == ("staging", "production", "dev")
    assert prod.git_path_template.endswith("/overlays/prod") and prod.registry_uri == staging.registry_uri
    assert [f.text for f in prod.deny] == ["latest"] and (dev.settings.mode, prod.settings.mode) == (
        "commit",
        "pr",
    )


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            f"- registryURI: {REG}/a\n  githubRepository: https://github.com/o/r\n  env: a\n  env: b\n",
            id="plain",
        ),
        pytest.param(
            f"- &b {{registryURI: '{REG}/a', githubRepository: 'https://github.com/o/r'}}\n- <<: *b\n  env: a\n  env: b\n",
            id="after-a-merge",
        ),
    ],
)
def test_a_key_written_twice_is_still_refused(text: str) -> None:
    with pytest.raises(RulesError, match="'env'") as info:  # names the key written twice
        load_rules(text)
    assert info.value.reason == "invalid-yaml"


_LEVELS = ["&a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"] + [
    f"&{n} [{', '.join([f'*{p}'] * 10)}]" for p, n in zip("abcdefgh", "bcdefghi")
]
#: A few hundred bytes whose plain repr is 10⁹ strings ('billion laughs').
BOMB = "[" + ", ".join(_LEVELS) + "]"


def _load_in_child(text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """load_rules in a child with a deadline and a memory cap: a regression fails, it does not hang the suite."""
    payload = tmp_path / "rules.yaml"
    payload.write_text(text)
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
        "from steps.rules import load_rules, RulesError\n"
        "try:\n"
        f"    load_rules(open({str(payload)!r}).read())\n"
        "except RulesError as exc:\n"
        "    import json\n"
        "    print(json.dumps({'reason': exc.reason, 'rule': exc.rule, 'field': exc.field, 'message': str(exc)}))\n"
    )
    try:
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail("loading a 'billion laughs' rules file did not finish in 60 s")


@pytest.mark.parametrize(
    ("field", "line"),
    [
        pytest.param("labels", f"  labels: [{BOMB}]\n", id="labels"),
        pytest.param("registryURI", None, id="registryURI"),
        pytest.param("mode", f"  mode: {BOMB}\n", id="mode"),
        pytest.param("writeDigest", f"  writeDigest: {BOMB}\n", id="writeDigest"),
    ],
)
def test_an_alias_bomb_is_refused_at_load_naming_rule_and_field(
    field: str, line: str | None, tmp_path: Path
) -> None:
    """A 'billion laughs' value once took 107 s and 5.5 GB to print in the error; now: refused cheaply."""
    if field == "registryURI":
        text = f"- registryURI: {BOMB}\n  githubRepository: https://github.com/o/r/apps/x\n"
    else:
        text = f"- registryURI: {REG}/team/$1\n  githubRepository: https://github.com/o/r/apps/$1\n" + line
    assert len(text.encode()) < 700
    proc = _load_in_child(text, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    refused = json.loads(proc.stdout)
    assert (refused["reason"], refused["rule"], refused["field"]) == ("alias-bomb", 0, field), refused
    message = refused["message"]
    assert len(message) < 400 and "lol" not in message, message  # never the value


@pytest.mark.parametrize("field", ["labels", "mode", "writeDigest", "registryURI"])
def test_a_large_value_is_shown_as_a_short_excerpt(field: str) -> None:
    """Under the alias limit (10⁴ nodes), a wrong value is still only excerpted in the message."""
    value = "[" + ", ".join(_LEVELS[:4]) + "]"
    text = f"- registryURI: {REG}/team/$1\n  githubRepository: https://github.com/o/r/apps/$1\n"
    if field == "registryURI":
        text = f"- registryURI: {value}\n  githubRepository: https://github.com/o/r/apps/x\n"
    else:
        text += f"  {field}: {'[' + value + ']' if field == 'labels' else value}\n"
    with pytest.raises(RulesError) as info:
        load_rules(text)
    assert (info.value.rule, info.value.field) == (0, f"{field}[0]" if field == "labels" else field)
    assert len(str(info.value)) < 400


@pytest.mark.parametrize(
    "git",
    [
        pytest.param("https://github.com/o/r/apps/$1?access_token=ghp_SECRET0123456789", id="query"),
        pytest.param("https://github.com/o/r/apps/$1?ghp_SECRET0123456789", id="bare-query"),
        pytest.param("https://github.com/o/r/apps/$1#ghp_SECRET0123456789", id="fragment"),
        pytest.param("https://github.com?access_token=ghp_SECRET0123456789/o/r", id="query-in-host"),
        pytest.param("ssh://user:ghp_SECRET0123456789@github.com/o/r", id="ssh-password"),
        pytest.param("ftp://ghp_SECRET0123456789@github.com/o/r", id="token-as-user"),
    ],
)
def test_a_secret_in_github_repository_is_redacted(git: str) -> None:
    with pytest.raises(RulesError) as info:
        load_rules(f"- registryURI: {REG}/team/$1\n  githubRepository: '{git}'\n")
    assert (info.value.rule, info.value.field) == (0, "githubRepository")
    assert "ghp_SECRET0123456789" not in str(info.value) and "***" in str(info.value), str(info.value)


# --- many rules ---------------------------------------------------------------------------------


def test_ten_thousand_rules_load_and_match_correctly() -> None:
    lines = []
    for i in range(10_000):
        if i % 3 == 0:
            lines.append(
                f"- registryURI: {REG}/team{i}/$1\n  githubRepository: https://github.com/o/r{i}/apps/$1\n"
            )
        elif i % 3 == 1:
            lines.append(
                f"- registryURI: {REG}/svc/app{i}:$1-.*\n  githubRepository: https://github.com/o/r/apps/{i}/$1\n"
                "  allowImageTag: ['regexp:[a-z]+-[0-9a-f]{7}']\n"
            )
        else:
            lines.append(
                f"- registryURI: {REG}/$1/app{i}\n  githubRepository: https://github.com/$1/gitops/app{i}\n"
            )
    rules = load_rules("".join(lines))
    assert len(rules) == 10_000

    m = rules.match(image(f"{REG}/team9999/web:1"))
    assert [(t.rule, t.repo_url, t.path) for t in m.targets] == [
        (9999, "https://github.com/o/r9999", "apps/web")
    ]
    m = rules.match(image(f"{REG}/svc/app9997:prod-abcdef0"))
    assert [(t.rule, t.path) for t in m.targets] == [(9997, "apps/9997/prod")]
    m = rules.match(image(f"{REG}/acme/app9998:1"))
    assert [(t.rule, t.repo_url, t.path) for t in m.targets] == [
        (9998, "https://github.com/acme/gitops", "app9998")
    ]
    assert rules.match(image(f"{REG}/nobody/nothing/here:1")).targets == []
    # The index narrows the search: only the rules of the right shape are tried.
    assert len(rules.candidates(image(f"{REG}/team9999/web:1"))) < 4000
    assert len(rules.candidates(image(f"{REG}/svc/app9997:x"))) < 4000
    # And it finds what a full scan finds.
    for ref in (f"{REG}/team9999/web:1", f"{REG}/svc/app9997:prod-abcdef0", f"{REG}/acme/app9998:1"):
        assert rules.match(image(ref)).targets == rules.match(image(ref), all_reasons=True).targets


# --- repositories a rule can match (moved from test_reconcile: one home, Rule) ----------------


def _rule_for(template: str):
    """The compiled rule whose registryURI has the repository part ``template``."""
    text = f"- registryURI: '{REG}/{template}'\n  githubRepository: https://github.com/o/r/apps\n"
    (rule,) = load_rules(text).rules
    return rule


def repository_prefix(template: str) -> str:
    return _rule_for(template).repository_prefix


def repository_matches(template: str, name: str) -> bool:
    return _rule_for(template).match_repository(name) is not None


@pytest.mark.parametrize(
    ("template", "prefix"),
    [
        pytest.param("team/$1", "team/", id="one-variable"),
        pytest.param("hoge/$1/$2/$3", "hoge/", id="three-variables"),
        pytest.param("$1/api", "", id="variable-first"),
        pytest.param("team/app-$1", "team/app-", id="variable-inside-a-segment"),
        pytest.param("team/api", "team/api", id="fixed-name"),
    ],
)
def test_repository_prefix(template: str, prefix: str) -> None:
    assert repository_prefix(template) == prefix


@pytest.mark.parametrize(
    ("template", "name", "matches"),
    [
        pytest.param("team/$1", "team/api", True, id="one-segment"),
        pytest.param("team/$1", "team/a/b", False, id="too-deep"),
        pytest.param("team/$1", "teamx/api", False, id="prefix-lookalike"),
        pytest.param("team/$1", "team", False, id="too-shallow"),
        pytest.param("hoge/$1/$2", "hoge/a/b", True, id="two-segments"),
        pytest.param("team/app-$1", "team/app-web", True, id="inside-a-segment"),
        pytest.param("team/app-$1", "team/app-", False, id="empty-variable"),
        pytest.param("$1/api", "any/api", True, id="variable-first"),
        pytest.param("team/a.b", "team/aXb", False, id="dot-is-literal"),
        pytest.param("t/$1-$2", "t/a-b", True, id="two-variables-in-a-segment"),
        pytest.param("t/$1-$2", "t/a-", False, id="second-variable-empty"),
        pytest.param("t/$1$2", "t/a", False, id="adjacent-variables-need-two-characters"),
        pytest.param("t/$1$2", "t/ab", True, id="adjacent-variables"),
        pytest.param("t/x$1y$2z", "t/xAyyBz", True, id="pieces-found-leftmost"),
    ],
)
def test_repository_matches(template: str, name: str, matches: bool) -> None:
    assert repository_matches(template, name) is matches


def test_a_hostile_repository_name_cannot_make_matching_hang() -> None:
    """Whoever creates ECR repositories chooses their names: matching is one scan, never backtracking
    (a backtracking regular expression needs hours on this pair). A child process with a deadline
    guards against a hang; nothing is timed."""
    program = (
        "from steps.rules import load_rules\n"
        "template = 't/' + ''.join(f'a${i}' for i in range(1, 21)) + 'b'\n"
        f"registry = {REG!r}\n"
        "(rule,) = load_rules(f'- registryURI: {registry}/{template}\\n  githubRepository: https://github.com/o/r\\n').rules\n"
        "print(rule.match_repository('t/' + 'a' * 255) is not None)\n"
    )
    done = run_guarded(program, what="Rule.match_repository on a hostile name", timeout=60)
    assert done.stdout.strip() == "False", done.stderr


# --- the declared schema (issue 14): one model, the YAML keys as aliases, closed choices ------------


def test_the_schema_declares_every_yaml_key_as_an_alias() -> None:
    import msgspec

    from steps.domain.errors import RuleFieldError
    from steps.rules import KNOWN_FIELDS, REQUIRED_FIELDS, RuleSpec
    from steps.rules.schema import parse_rule

    assert KNOWN_FIELDS == (
        "registryURI",
        "githubRepository",
        "allowImageTag",
        "denyImageTag",
        "env",
        "mode",
        "baseBranch",
        "imageName",
        "writeDigest",
        "order",
        "labels",
        "reviewers",
        "provider",
        "commitMethod",
        "requireVerified",
        "valuesFile",  # issue 34: Helm values files and helmfile releases
        "valuesKeys",
        "helmfile",
        "notify",  # issue 36: the rule's notification destinations
        "promoteAfter",  # issue 35: the promotion gate
        "gate",
    )
    assert REQUIRED_FIELDS == ("registryURI", "githubRepository")
    spec = parse_rule(
        {
            "registryURI": f" {REG}/team/$1 ",
            "githubRepository": "https://github.com/o/r/apps/$1",
            "writeDigest": True,
            "baseBranch": "release",
            "imageName": "api",
            "allowImageTag": ["regexp:v.*"],
        }
    )
    assert (spec.registry_uri, spec.write_digest, spec.base_branch, spec.image_name) == (
        f"{REG}/team/$1",
        True,
        "release",
        "api",
    )
    assert spec.allow_image_tag == ["regexp:v.*"] and spec.deny_image_tag == []
    assert msgspec.convert(  # the struct itself says the same (its checks strip the URI)
        {"registryURI": f" {REG}/team/$1 ", "githubRepository": "https://github.com/o/r/apps/$1"}, RuleSpec
    ) == RuleSpec(registry_uri=f"{REG}/team/$1", github_repository="https://github.com/o/r/apps/$1")
    python_names = {"registry_uri": f"{REG}/a", "github_repository": "https://github.com/o/r"}
    with pytest.raises(RuleFieldError) as info:  # the Python names are not YAML keys: a user writes those
        parse_rule(python_names)
    assert (info.value.field, info.value.message.split(";")[0]) == ("registry_uri", "unknown field")
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(python_names, RuleSpec)


@pytest.mark.parametrize(
    ("field", "choices"),
    [
        pytest.param("mode", ("pr", "commit"), id="mode"),
        pytest.param("order", ("push-time", "semver", "none"), id="order"),
        pytest.param("provider", ("github", "local"), id="provider"),
    ],
)
def test_closed_choices_accept_each_choice_and_name_them_all_when_refusing(
    field: str, choices: tuple
) -> None:
    for choice in choices:
        (compiled,) = load_rules(rule(f"{field}: {choice}").replace(GOOD_RULE, "")).rules
        assert getattr(compiled.settings, field) == choice
    for wrong in ("PR", "Semver", "''", "[pr]", "1", "null"):
        with pytest.raises(RulesError) as info:
            load_rules(rule(f"{field}: {wrong}"))
        assert (info.value.rule, info.value.field) == (1, field)
        assert f"must be one of {', '.join(choices)}, got " in str(info.value)  # the fix: every choice


@pytest.mark.parametrize(
    ("extra", "field", "fragment"),
    [
        pytest.param(
            "writeDigest: 1", "writeDigest", "must be true or false, got number 1", id="bool-not-number"
        ),
        pytest.param(
            "writeDigest: 'true'", "writeDigest", "must be true or false, got string", id="bool-not-str"
        ),
        pytest.param("env: [a]", "env", "must be a string, got list", id="str-not-list"),
        pytest.param("labels: {a: 1}", "labels", "must be a list, got mapping", id="list-not-mapping"),
        pytest.param("1: x", "1", "unknown field; known fields: registryURI,", id="non-string-key"),
    ],
)
def test_strict_types_are_named_with_field_and_fix(extra: str, field: str, fragment: str) -> None:
    """The rule and field are the error's; the type expected and the type found are the message's."""
    with pytest.raises(RulesError) as info:
        load_rules(rule(extra))
    assert (info.value.rule, info.value.field) == (1, field)
    assert fragment in str(info.value), str(info.value)


def test_a_required_field_written_twice_is_refused_as_yaml() -> None:
    with pytest.raises(RulesError) as info:
        load_rules(rule("registryURI: ''"))
    assert info.value.reason == "invalid-yaml"


def test_null_optional_fields_mean_their_defaults() -> None:
    (compiled,) = load_rules(
        rule("env:\nlabels:\nreviewers:\nwriteDigest:\nallowImageTag:\nbaseBranch:").replace(GOOD_RULE, "")
    ).rules
    assert (
        compiled.env,
        compiled.settings.labels,
        compiled.settings.write_digest,
        compiled.allow,
        compiled.settings.base_branch,
    ) == (
        "",
        (),
        False,
        (),
        None,
    )


def test_a_huge_aliased_value_is_shown_as_a_short_excerpt() -> None:
    """msgspec's own error text may print the input (``Invalid enum value '…'``, whole); the message is
    built from a bounded excerpt instead, whichever field is at fault."""
    from steps.domain.errors import RuleFieldError
    from steps.rules.schema import parse_rule
    from steps.rules.show import key_shown

    big = "x" * 50_000
    text = rule(f"env: &e ['{big}', '{big}']\nlabels: *e")
    with pytest.raises(RulesError) as info:
        load_rules(text)
    message = str(info.value)
    assert "rule 1: env: must be a string, got list" in message and len(message) < 400
    for raw, field in (
        ({"registryURI": big, "githubRepository": 7, "mode": big}, "githubRepository"),
        ({"registryURI": big, "githubRepository": big, "mode": big}, "mode"),
        (
            {"registryURI": big, "githubRepository": big, "promoteAfter": {"env": big, "soak": big}},
            "promoteAfter.soak",
        ),
        (
            {"registryURI": big, "githubRepository": big, "valuesKeys": {big: 1}},
            f"valuesKeys[{key_shown(big)}]",
        ),
    ):
        with pytest.raises(RuleFieldError) as refused:
            parse_rule(raw)
        assert (
            refused.value.field == field and big not in str(refused.value) and len(str(refused.value)) < 400
        )


def test_closed_choices_and_their_defaults_are_declared_once() -> None:
    """mode / order / provider: one declaration (steps.domain.models) that the rules schema, the compiled
    rule, the targets and the ordering all use, so a rule that says nothing gets the same defaults
    everywhere, and the choices a rules file may name are the ones a target may carry."""
    import inspect
    from typing import get_args

    from steps.domain import models
    from steps.domain import version_order as order
    from steps.rules import MODES, ORDERS, PROVIDERS, schema

    assert (schema.Mode, schema.Order, schema.Provider) == (models.Mode, models.Order, models.Provider)
    assert (MODES, ORDERS, PROVIDERS) == tuple(
        get_args(t) for t in (models.Mode, models.Order, models.Provider)
    )
    defaults = {
        "mode": models.DEFAULT_MODE,
        "order": models.DEFAULT_ORDER,
        "provider": models.DEFAULT_PROVIDER,
    }
    assert defaults == {"mode": "pr", "order": "push-time", "provider": "github"}
    declared = {f.name: f for f in schema.FIELDS}
    for field, default in defaults.items():
        assert declared[field].default == default and not declared[field].required
        assert getattr(models.RuleSettings(), field) == default
    assert inspect.signature(order.judge_update).parameters["order"].default == models.DEFAULT_ORDER
    (target,) = (
        load_rules(
            f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/overlays/prod\n"
        )
        .match(image(f"{REG}/team/api:1.0.0"))
        .targets
    )
    assert (target.settings.mode, target.settings.order, target.settings.provider) == (
        "pr",
        "push-time",
        "github",
    )


@pytest.mark.parametrize(
    ("extra", "field", "keys"),
    [
        pytest.param({"helmfile": ["a"]}, "helmfile", ("file", "release"), id="helmfile-not-a-mapping"),
        pytest.param(
            {"valuesKeys": ["a"]}, "valuesKeys", ("repository", "tag"), id="valuesKeys-not-a-mapping"
        ),
        pytest.param(
            {"helmfile": {"file": "h.yaml", "release": "api", "bogus": 1}},
            "helmfile[bogus]",
            ("file", "release", "environment"),
            id="helmfile-unknown-key",
        ),
        pytest.param(
            {"helmfile": {"file": "h.yaml"}}, "helmfile[release]", ("file", "release"), id="no-release"
        ),
        pytest.param(
            {"helmfile": {"file": "", "release": "api"}}, "helmfile[file]", ("file", "release"), id="empty"
        ),
        pytest.param(
            {"valuesKeys": {1: "x", "repository": "image.repository", "tag": "image.tag"}},
            "valuesKeys[1]",
            ("repository", "tag", "registry", "digest"),
            id="valuesKeys-key-not-a-string",
        ),
    ],
)
def test_a_problem_inside_helmfile_or_values_keys_names_that_field_and_its_own_keys(
    extra, field, keys
) -> None:
    """Not "(rule): must be a mapping with registryURI…" for ``helmfile: [a]``, nor the rule's
    top-level fields as the known keys of ``helmfile``: the field at fault, and what it takes."""
    from steps.domain.errors import RuleFieldError
    from steps.rules.schema import KNOWN_FIELDS, parse_rule

    with pytest.raises(RuleFieldError) as refused:
        parse_rule(
            {
                "registryURI": "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api",
                "githubRepository": "o/r",
                **extra,
            }
        )
    said = str(refused.value).partition(": ")[2]
    assert refused.value.field == field, str(refused.value)
    assert all(key in said for key in keys), said
    assert not [f for f in KNOWN_FIELDS if f not in keys and f"{f}," in said], (
        said
    )  # not the rule's own fields

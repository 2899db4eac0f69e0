"""steps.rules: loading the in-house rules format and matching images against it."""

from __future__ import annotations

from pathlib import Path

import pytest

from steps.errors import RulesError
from steps.events import parse_image_reference
from steps.models import Image
from steps.rules import RuleSet, load_rules, load_rules_file

RULES = Path(__file__).parent.parent / "testdata" / "rules"
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
        assert t.env == "staging" and t.mode == "pr" and t.order == "push-time" and t.provider == "github"
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
    assert target.model_dump(
        include={"rule", "env", "mode", "order", "write_digest", "labels", "reviewers", "provider"}
    ) == {
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
    assert (commit.mode, commit.base_branch, commit.env) == ("commit", "main", "staging")
    (named,) = (
        load_rules_file(RULES / "example.yaml")
        .match(image("123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api:release-eu-7"))
        .targets
    )
    assert (named.image_name, named.path) == ("api", "apps/api/overlays/eu")


def test_same_overlay_from_two_rules_is_one_target() -> None:
    rules = load_rules(
        f"- registryURI: {REG}/team/$1\n  githubRepository: https://github.com/o/r/apps/$1\n"
        f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r/apps/api\n"
    )
    match = rules.match(image(f"{REG}/team/api:1"))
    assert [t.rule for t in match.targets] == [0]
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
    pytest.param("a: [\n", "not valid YAML", id="yaml-syntax"),
    pytest.param("", "no rules", id="empty-file"),
    pytest.param("rules:\n", "no rules", id="rules-key-null"),
    pytest.param("just text\n", "expected a list of rules", id="scalar-top"),
    pytest.param("rulez:\n- x: 1\n", "only 'rules:'", id="top-typo"),
    pytest.param("- 1\n", "rule 0: (rule): must be a mapping", id="rule-not-mapping"),
    pytest.param(
        GOOD_RULE + "- registryURI: x\n  githubRepository: https://github.com/o/r\n",
        "rule 1: registryURI",
        id="bad-uri-host",
    ),
    pytest.param(
        GOOD_RULE + f"- registryURI: {REG}/a\n", "rule 1: githubRepository: is required", id="missing-github"
    ),
    pytest.param(
        GOOD_RULE + "- githubRepository: https://github.com/o/r\n",
        "rule 1: registryURI: is required",
        id="missing-registry",
    ),
    pytest.param(rule("githubRepo: x"), "rule 1: githubRepo: unknown field", id="unknown-field-typo"),
    pytest.param(rule("allowImageTags: [x]"), "rule 1: allowImageTags: unknown field", id="unknown-plural"),
    pytest.param(rule("mode: merge"), "rule 1: mode: must be one of pr, commit", id="bad-mode"),
    pytest.param(
        rule("order: newest"), "rule 1: order: must be one of push-time, semver, none", id="bad-order"
    ),
    pytest.param(
        rule("provider: gitlab"), "rule 1: provider: must be one of github, local", id="bad-provider"
    ),
    pytest.param(
        rule("writeDigest: 'yes'"), "rule 1: writeDigest: must be true or false", id="writedigest-string"
    ),
    pytest.param(rule("labels: bug"), "rule 1: labels: must be a list", id="labels-scalar"),
    pytest.param(rule("reviewers: [1]"), "rule 1: reviewers[0]: must be a string", id="reviewer-number"),
    pytest.param(rule("env: 1"), "rule 1: env: must be a string", id="env-number"),
    pytest.param(
        rule("baseBranch: 'a..b'"), "rule 1: baseBranch: 'a..b' is not a valid branch name", id="bad-branch"
    ),
    pytest.param(rule("imageName: 'a b'"), "rule 1: imageName:", id="image-name-space"),
    pytest.param(
        rule("allowImageTag: 'regexp:x'"), "rule 1: allowImageTag: must be a list", id="allow-not-list"
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:(']"),
        "rule 1: allowImageTag[0]: invalid regular expression",
        id="allow-bad-regex",
    ),
    pytest.param(
        rule("denyImageTag: [ok, 'regexp:[a-']"),
        "rule 1: denyImageTag[1]: invalid regular expression",
        id="deny-bad-regex",
    ),
    pytest.param(
        rule("allowImageTag: ['v*']"),
        "rule 1: allowImageTag[0]: 'v*' is not a valid image tag",
        id="allow-glob",
    ),
    pytest.param(
        rule("allowImageTag: [1.10]"), "rule 1: allowImageTag[0]: must be a string", id="allow-float"
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:(a+)+']"),
        "rule 1: allowImageTag[0]: regular expression '(a+)+' nests",
        id="redos-allow",
    ),
    pytest.param(
        rule("denyImageTag: ['regexp:(\\w+\\.?)*x']"),
        "rule 1: denyImageTag[0]: regular expression",
        id="redos-deny",
    ),
    pytest.param(
        rule(uri=f"{REG}/team/api:(.*)*"), "rule 1: registryURI: regular expression", id="redos-tag-pattern"
    ),
    # Repeated alternations whose branches overlap backtrack exponentially too (hostile corpus).
    pytest.param(
        rule("allowImageTag: ['regexp:(a|a)*$']"),
        "rule 1: allowImageTag[0]: regular expression '(a|a)*$' repeats an alternation",
        id="redos-overlapping-alternation",
    ),
    pytest.param(
        rule("allowImageTag: ['x', 'regexp:(a|a?)+$']"),
        "rule 1: allowImageTag[1]: regular expression '(a|a?)+$' repeats an alternation",
        id="redos-optional-alternation",
    ),
    pytest.param(
        rule("denyImageTag: ['regexp:(v|v1)+']"), "use a character class", id="redos-prefix-alternation-hint"
    ),
    pytest.param(
        rule(uri=f"{REG}/team/api:(a|a)*$"),
        "rule 1: registryURI: regular expression '(a|a)*$' repeats an alternation",
        id="redos-alternation-tag-pattern",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:(a?){30}$']"),
        "rule 1: allowImageTag[0]: regular expression '(a?){30}$' nests",
        id="redos-bounded-optional",
    ),
    pytest.param(
        rule("allowImageTag: ['regexp:(a?a?)+$']"), "rule 1: allowImageTag[0]: regular expression", id="redos-optionals"
    ),
    pytest.param(
        rule(uri=f"{REG}/team/api:v(["),
        "rule 1: registryURI: invalid regular expression",
        id="bad-tag-pattern",
    ),
    pytest.param(rule(uri=f"{REG}/team/api:"), "rule 1: registryURI: ", id="empty-tag-pattern"),
    pytest.param(
        rule(uri=f"{REG}/Team/$1"),
        "rule 1: registryURI: repository part 'Team/$1' can never match",
        id="uppercase-repo",
    ),
    pytest.param(
        rule(uri=f"{REG}/team//$1"), "rule 1: registryURI: repository part", id="empty-segment-repo"
    ),
    pytest.param(rule(uri=f"{REG}/"), "rule 1: registryURI:", id="no-repo"),
    pytest.param(rule(uri=f"{REG}/team/$0"), "rule 1: registryURI: $0 is not a capture", id="dollar-zero"),
    pytest.param(
        rule(uri="$1.dkr.ecr.ap-northeast-1.amazonaws.com/team/x"),
        "rule 1: registryURI:",
        id="capture-in-host",
    ),
    pytest.param(rule(uri="docker.io/team/x"), "rule 1: registryURI: 'docker.io/team/x'", id="not-ecr-host"),
    pytest.param(
        rule(git="https://github.com/o/r/apps/$2"),
        "rule 1: githubRepository: $2 is not captured",
        id="uncaptured-var",
    ),
    pytest.param(
        rule(git="ssh://git@github.com/o/r"),
        "rule 1: githubRepository: 'ssh://git@github.com/o/r' must be",
        id="ssh-url",
    ),
    pytest.param(
        rule(git="https://x:tok@github.com/o/r/a/$1"),
        "rule 1: githubRepository: must not contain credentials",
        id="credentials",
    ),
    pytest.param(
        rule(git="https://github.com/o"),
        "rule 1: githubRepository: 'https://github.com/o' must name",
        id="no-repo-in-url",
    ),
    pytest.param(
        rule(git="https://github.com/o/r/a?ref=$1"),
        "rule 1: githubRepository: 'https://github.com/o/r/a?ref=$1' must not",
        id="query",
    ),
    pytest.param(
        rule(git="https://git hub.com/o/r"),
        "rule 1: githubRepository: host 'git hub.com'",
        id="space-in-host",
    ),
    pytest.param(
        GOOD_RULE + "- registryURI: 1\n  githubRepository: x\n",
        "rule 1: registryURI: must be a string",
        id="uri-number",
    ),
    pytest.param("- registryURI: a\n  registryURI: b\n", "not valid YAML", id="duplicate-key"),
]


@pytest.mark.parametrize(("text", "fragment"), BAD_RULES)
def test_bad_rules_files(text: str, fragment: str) -> None:
    with pytest.raises(RulesError) as info:
        load_rules(text, source="rules.yaml")
    message = str(info.value)
    assert message.startswith("rules.yaml: ")
    assert fragment in message, message


def test_missing_rules_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(RulesError, match="IMAGEBUMP_RULES_FILE"):
        load_rules_file(tmp_path / "nope.yaml")


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
    ],
)
def test_safe_patterns_are_accepted(pattern: str) -> None:
    load_rules(rule(f"allowImageTag: ['regexp:{pattern}']"))


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

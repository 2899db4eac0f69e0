"""The hostile-input corpus: table data only (the tests are in ``test_corpus.py``).

Each table row is ``pytest.param(<input...>, <expectation>, id=...)``. An expectation is one of

- ``Error(cls, pattern)``: the entry point raises ``cls`` (from :mod:`steps.domain.errors`) and the
  message matches the regular expression ``pattern`` (it names the problem);
- ``Skipped(pattern)``: a :class:`steps.domain.events.Skip` (or an equivalent "nothing to do") whose
  reason matches ``pattern``.

Inputs mix every trick we know of: malformed and oversized bodies, wrong JSON types, Unicode
look-alikes (fullwidth letters, Cyrillic homoglyphs, zero-width spaces, RTL override, NUL), shell
/ YAML / path metacharacters, catastrophic regular expressions, YAML bombs, duplicate keys,
multi-document files, symlinks out of the repository and a kustomization far larger than any real
one. The base event is ``tests/testdata/events/push.json`` (AWS's documented sample shape).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from steps.domain.errors import ConfigError, InvalidEventError, KustomizationError, RulesError

ROOT = Path(__file__).resolve().parents[2]
BASE_EVENT: dict = json.loads((ROOT / "tests" / "testdata" / "events" / "push.json").read_text())
MAX_BODY_BYTES = 262144  # steps.domain.events.MAX_BODY_BYTES (SQS's own limit); asserted in the tests

ACCOUNT = "123456789012"
REGION = "us-west-2"
REGISTRY = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com"
DIGEST = "sha256:" + "7" * 64


@dataclass(frozen=True)
class Error:
    cls: type[Exception]
    pattern: str = ""  # what the message must say that no field of the error carries
    reason: str = ""
    field: str | None = None
    rule: int | None = None


@dataclass(frozen=True)
class Skipped:
    pattern: str


def event(**changes) -> str:
    """The sample push with top-level changes; ``detail__KEY`` changes a detail field (None deletes)."""
    ev = copy.deepcopy(BASE_EVENT)
    for key, value in changes.items():
        target, name = (ev["detail"], key[len("detail__") :]) if key.startswith("detail__") else (ev, key)
        name = (
            name.replace("_", "-") if target is ev["detail"] else name.replace("detail_type", "detail-type")
        )
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value
    return json.dumps(ev)


def detail(**changes) -> str:
    return event(**{f"detail__{k}": v for k, v in changes.items()})


# Metacharacter payloads that must never be taken as a name, a tag or a path.
SHELL = "$(rm -rf /)"
YAML_BANG = "!!python/object/apply:os.system"

# -- 1. SQS bodies → steps.domain.events.parse_event -----------------------------------------------------

_padding = "x" * (MAX_BODY_BYTES + 1)
_multibyte = "é" * (MAX_BODY_BYTES // 2 + 1)  # fewer characters than the limit, more bytes

EVENT_CASES = [
    # malformed
    pytest.param("", Error(InvalidEventError, reason="empty"), id="body-empty"),
    pytest.param(" \n\t ", Error(InvalidEventError, reason="empty"), id="body-whitespace"),
    pytest.param("this is not json", Error(InvalidEventError, reason="not-json"), id="body-not-json"),
    pytest.param(event()[:-7], Error(InvalidEventError, reason="not-json"), id="body-truncated-json"),
    pytest.param(b"\xff\xfe{\x00}", Error(InvalidEventError, reason="not-text"), id="body-invalid-utf8"),
    pytest.param(
        "[" * 50000 + "]" * 50000, Error(InvalidEventError, reason="not-json"), id="body-deeply-nested"
    ),
    pytest.param(
        '{"a": NaN, "source": "aws.ecr"',
        Error(InvalidEventError, reason="not-json"),
        id="body-json-nan-unclosed",
    ),
    # oversized (> 256 KiB, SQS's limit)
    pytest.param(
        event(padding=_padding),
        Error(InvalidEventError, reason="too-large"),
        id="body-oversized-str",
    ),
    pytest.param(
        event(padding=_padding).encode(),
        Error(InvalidEventError, reason="too-large"),
        id="body-oversized-bytes",
    ),
    pytest.param(
        event(padding=_multibyte),
        Error(InvalidEventError, reason="too-large"),
        id="body-oversized-multibyte",
    ),
    # wrong types
    pytest.param("[]", Error(InvalidEventError, reason="wrong-type"), id="type-array"),
    pytest.param('"PUSH"', Error(InvalidEventError, reason="wrong-type"), id="type-string"),
    pytest.param("null", Error(InvalidEventError, reason="wrong-type"), id="type-null"),
    pytest.param("42", Error(InvalidEventError, reason="wrong-type"), id="type-number"),
    pytest.param(
        event(detail="PUSH"),
        Error(InvalidEventError, reason="wrong-type", field="detail"),
        id="type-detail-string",
    ),
    pytest.param(
        detail(repository_name=42),
        Error(InvalidEventError, reason="wrong-type", field="detail.repository-name"),
        id="type-repository-number",
    ),
    pytest.param(
        detail(repository_name=["team/api"]),
        Error(InvalidEventError, reason="wrong-type", field="detail.repository-name"),
        id="type-repository-list",
    ),
    pytest.param(
        detail(image_tag=True),
        Error(InvalidEventError, reason="wrong-type", field="detail.image-tag"),
        id="type-tag-bool",
    ),
    pytest.param(
        detail(image_tag={"$ne": ""}),
        Error(InvalidEventError, reason="wrong-type", field="detail.image-tag"),
        id="type-tag-object",
    ),
    pytest.param(
        event(id={"a": 1}), Error(InvalidEventError, reason="wrong-type", field="id"), id="type-id-object"
    ),
    pytest.param(
        event(region=["us-west-2"]),
        Error(InvalidEventError, reason="wrong-type", field="region"),
        id="type-region-list",
    ),
    pytest.param(
        detail(repository_name=None),
        Error(InvalidEventError, reason="missing", field="detail.repository-name"),
        id="missing-repository",
    ),
    pytest.param(
        detail(image_tag=None, image_digest=None),
        Error(InvalidEventError, reason="missing", field="detail.image-digest"),
        id="missing-tag-and-digest",
    ),
    pytest.param(
        event(time="yesterday; rm -rf /"), Error(InvalidEventError, reason="invalid-time"), id="bad-time"
    ),
    pytest.param(
        event(account="12345678901x"), Error(InvalidEventError, reason="invalid-account"), id="bad-account"
    ),
    pytest.param(
        event(region="us-west-2/../../x"),
        Error(InvalidEventError, reason="invalid-region"),
        id="bad-region-path",
    ),
    # unicode tricks in the repository name
    pytest.param(
        detail(repository_name="ｔｅａｍ/ａｐｉ"),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-fullwidth",
    ),
    pytest.param(
        detail(repository_name="tеam/api"),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-cyrillic-homoglyph",
    ),
    pytest.param(
        detail(repository_name="team/\u200bapi"),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-zero-width-space",
    ),
    pytest.param(
        detail(repository_name="team/api\u202egpj.exe"),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-rtl-override",
    ),
    pytest.param(
        detail(repository_name="team/api\u0000"),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-nul",
    ),
    pytest.param(
        detail(repository_name="team/api\n"),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-trailing-newline",
    ),
    # shell / YAML / path metacharacters in the repository name
    pytest.param(
        detail(repository_name=SHELL),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-shell-subst",
    ),
    pytest.param(
        detail(repository_name="team/api;reboot"),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-semicolon",
    ),
    pytest.param(
        detail(repository_name="team/`id`"),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-backticks",
    ),
    pytest.param(
        detail(repository_name="team/../../etc"),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-dot-dot",
    ),
    pytest.param(
        detail(repository_name="%2e%2e/%2e%2e/etc"),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-percent-encoded-dot-dot",
    ),
    pytest.param(
        detail(repository_name="team/api: x"),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-yaml-colon",
    ),
    pytest.param(
        detail(repository_name="team/api #x"),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-yaml-comment",
    ),
    pytest.param(
        detail(repository_name="*anchor"),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-yaml-alias",
    ),
    pytest.param(
        detail(repository_name=YAML_BANG),
        Error(InvalidEventError, reason="invalid-repository"),
        id="repo-yaml-python-tag",
    ),
    # ... and in the tag
    pytest.param(
        detail(image_tag=SHELL), Error(InvalidEventError, reason="invalid-tag"), id="tag-shell-subst"
    ),
    pytest.param(
        detail(image_tag="1.0;rm -rf /"),
        Error(InvalidEventError, reason="invalid-tag"),
        id="tag-semicolon",
    ),
    pytest.param(
        detail(image_tag="`reboot`"), Error(InvalidEventError, reason="invalid-tag"), id="tag-backticks"
    ),
    pytest.param(
        detail(image_tag="../../etc/passwd"),
        Error(InvalidEventError, reason="invalid-tag"),
        id="tag-dot-dot",
    ),
    pytest.param(
        detail(image_tag="%2e%2e%2f"), Error(InvalidEventError, reason="invalid-tag"), id="tag-percent"
    ),
    pytest.param(
        detail(image_tag="1.0: x"), Error(InvalidEventError, reason="invalid-tag"), id="tag-yaml-colon"
    ),
    pytest.param(
        detail(image_tag="#1"), Error(InvalidEventError, reason="invalid-tag"), id="tag-yaml-comment"
    ),
    pytest.param(
        detail(image_tag="*anchor"), Error(InvalidEventError, reason="invalid-tag"), id="tag-yaml-alias"
    ),
    pytest.param(
        detail(image_tag=YAML_BANG), Error(InvalidEventError, reason="invalid-tag"), id="tag-yaml-python"
    ),
    pytest.param(
        detail(image_tag="1.0\nimages: []"),
        Error(InvalidEventError, reason="invalid-tag"),
        id="tag-newline-injection",
    ),
    pytest.param(
        detail(image_tag="--upload-pack=touch /tmp/x"),
        Error(InvalidEventError, reason="invalid-tag"),
        id="tag-option-injection",
    ),
    pytest.param(
        detail(image_tag="1.0\u200b"), Error(InvalidEventError, reason="invalid-tag"), id="tag-zero-width"
    ),
    pytest.param(
        detail(image_tag="１.０"), Error(InvalidEventError, reason="invalid-tag"), id="tag-fullwidth"
    ),
    pytest.param(detail(image_tag="1.0\u202e"), Error(InvalidEventError, reason="invalid-tag"), id="tag-rtl"),
    pytest.param(detail(image_tag="1.0\x00"), Error(InvalidEventError, reason="invalid-tag"), id="tag-nul"),
    pytest.param(
        detail(image_tag="a" * 129), Error(InvalidEventError, reason="invalid-tag"), id="tag-too-long"
    ),
    pytest.param(
        detail(image_digest="sha256:../../" + "a" * 58),
        Error(InvalidEventError, reason="invalid-digest"),
        id="digest-path",
    ),
    pytest.param(
        detail(image_digest="sha256:" + "A" * 64),
        Error(InvalidEventError, reason="invalid-digest"),
        id="digest-uppercase",
    ),
    # valid events that are not pushes: a skip with a reason, never an error
    pytest.param(event(source="aws.ecr\u200b"), Skipped("not an ECR event"), id="skip-source-zero-width"),
    pytest.param(event(source="аws.ecr"), Skipped("not an ECR event"), id="skip-source-homoglyph"),
    pytest.param(detail(action_type="PUSH "), Skipped("is not a push"), id="skip-action-trailing-space"),
    pytest.param(
        detail(action_type="DELETE", repository_name=SHELL),
        Skipped("is not a push"),
        id="skip-delete-with-hostile-name",
    ),
    pytest.param(detail(result="SUCCESS\u0000"), Skipped("not 'SUCCESS'"), id="skip-result-nul"),
]

# -- 2. manual image references → steps.domain.events.parse_image_reference --------------------------------

REFERENCE_CASES = [
    pytest.param("", Error(InvalidEventError, reason="empty"), id="ref-empty"),
    pytest.param(SHELL, Error(InvalidEventError, reason="not-ecr-reference"), id="ref-shell"),
    pytest.param(
        f"{REGISTRY}/team/api:{SHELL}",
        Error(InvalidEventError, "not an ECR image reference|tag"),
        id="ref-tag-shell",
    ),
    pytest.param(
        f"{REGISTRY}/team/api:--upload-pack=x",
        Error(InvalidEventError, reason="invalid-tag"),
        id="ref-tag-option",
    ),
    pytest.param(
        f"{REGISTRY}/ｔｅａｍ/api:1.0",
        Error(InvalidEventError, reason="invalid-repository"),
        id="ref-repo-fullwidth",
    ),
    pytest.param(
        f"{ACCOUNT}.dkr.ecr.{REGION}.аmazonaws.com/team/api:1.0",
        Error(InvalidEventError, reason="not-ecr-reference"),
        id="ref-host-homoglyph",
    ),
    pytest.param(
        f"{REGISTRY}/team/../../etc:1.0",
        Error(InvalidEventError, reason="invalid-repository"),
        id="ref-repo-dot-dot",
    ),
    pytest.param(
        f"{REGISTRY}/team/api:1.0\x00", Error(InvalidEventError, reason="invalid-tag"), id="ref-tag-nul"
    ),
    pytest.param(f"{REGISTRY}/team/api", Error(InvalidEventError, reason="no-version"), id="ref-no-tag"),
    pytest.param(
        f"https://{REGISTRY}/team/api:1.0",
        Error(InvalidEventError, reason="not-ecr-reference"),
        id="ref-with-scheme",
    ),
    pytest.param(
        f"user:secret@{REGISTRY}/team/api:1.0",
        Error(InvalidEventError, reason="not-ecr-reference"),
        id="ref-with-credentials",
    ),
    pytest.param(
        f"{REGISTRY}/team/api@sha256:{'g' * 64}",
        Error(InvalidEventError, reason="invalid-digest"),
        id="ref-bad-digest",
    ),
]

# -- 3. rules files → steps.rules.load_rules ----------------------------------------------------

RULE = (
    f"- registryURI: {REGISTRY}/team/$1\n"
    "  githubRepository: https://github.com/org/gitops/services/$1/overlays/prod\n"
)

_LAUGHS = ["&a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"] + [
    f"&{n} [{', '.join([f'*{p}'] * 10)}]" for p, n in zip("abcdefgh", "bcdefghi")
]


def yaml_bomb(indent: str = "") -> str:
    """A 'billion laughs' mapping: 9 levels of 10 aliases (10⁹ strings once expanded)."""
    return "".join(f"{indent}l{i}: {level}\n" for i, level in enumerate(_LAUGHS))


#: Catastrophic regular expressions: each must be refused at load, or matching must stay fast.
#: With RE2 (issue 12) all of these load and match in linear time; the last three are the polynomial
#: shapes the old backtracking check let through (40 s at 60 characters).
REDOS_PATTERNS = [
    pytest.param("(a+)+$", id="redos-nested-plus"),
    pytest.param("(a*)*$", id="redos-nested-star"),
    pytest.param("([a-z]+)*$", id="redos-class-star"),
    pytest.param("(.*a){20}$", id="redos-bounded-outer"),
    pytest.param("(a|a)*$", id="redos-overlapping-alternation"),
    pytest.param("(a|a?)+$", id="redos-optional-alternation"),
    pytest.param("(\\w+\\d*)+-$", id="redos-word-digit"),
    pytest.param(".*.*.*.*.*.*-", id="redos-polynomial-dot-star"),
    pytest.param("[a-z]*" * 7 + "-", id="redos-polynomial-class-star"),
    pytest.param("v?" + "[0-9]*\\.?" * 6 + "[0-9]*-", id="redos-polynomial-semver"),
]

_BOMB_VALUE = "[" + ", ".join(_LAUGHS) + "]"  # a few hundred bytes, 10⁹ strings once expanded

RULES_CASES = [
    # What RE2 cannot do (it would need backtracking) is refused at load, naming rule and field.
    pytest.param(
        RULE + "  allowImageTag: ['regexp:(a)\\1']\n",
        Error(RulesError, r"backreference", rule=0, field="allowImageTag[0]"),
        id="rules-re2-backreference",
    ),
    pytest.param(
        RULE + "  denyImageTag: ['regexp:(?!v[0-9]).*']\n",
        Error(RulesError, r"lookaround", rule=0, field="denyImageTag[0]"),
        id="rules-re2-lookahead",
    ),
    pytest.param(
        RULE.replace("team/$1", "team/$1:(?<=v).*"),
        Error(RulesError, "lookaround", rule=0, field="registryURI"),
        id="rules-re2-lookbehind-tag-pattern",
    ),
    pytest.param(
        RULE + "  allowImageTag: ['regexp:a{4294967296}']\n",
        Error(RulesError, r"4294967296", rule=0, field="allowImageTag[0]"),
        id="rules-count-overflow",
    ),
    pytest.param(
        RULE + "  allowImageTag: ['regexp:" + "(?:(?:[a-z0-9]?){22}){22}" + "-']\n",
        Error(RulesError, r"RE2 instructions", rule=0, field="allowImageTag[0]"),
        id="rules-program-too-large",
    ),
    pytest.param(
        RULE.replace("/overlays/prod", "/overlays/prod?access_token=ghp_hostile0123456789"),
        Error(RulesError, r"access_token=\*\*\*", rule=0, field="githubRepository"),
        id="rules-url-query-token",
    ),
    pytest.param(
        RULE + "  allowImageTag: ['regexp:(unclosed']\n",
        Error(RulesError, "invalid regular expression"),
        id="rules-bad-regex",
    ),
    pytest.param(
        "x-laughs:\n"
        + yaml_bomb("  ")
        + "rules:\n"
        + RULE.replace("- ", "  - ", 1).replace("\n  g", "\n    g"),
        Error(RulesError, reason="top-level-keys"),
        id="rules-billion-laughs-beside",
    ),
    pytest.param(
        "- &r\n" + yaml_bomb("  ") + "  registryURI: x\n",
        Error(RulesError, rule=0),
        id="rules-billion-laughs-in-rule",
    ),
    pytest.param(
        RULE + "  labels: &l [" + ", ".join(["x"] * 10) + "]\n  reviewers: [*l, *l, *l, *l, *l]\n",
        Error(RulesError, "must be a string", rule=0, field="reviewers[0]"),
        id="rules-alias-list-in-list",
    ),
    pytest.param(
        RULE + "  env: staging\n  env: production\n",
        Error(RulesError, "'env'", reason="invalid-yaml"),
        id="rules-duplicate-field",
    ),
    pytest.param(
        "rules: []\nrules:\n" + RULE,
        Error(RulesError, "'rules'", reason="invalid-yaml"),
        id="rules-duplicate-top-key",
    ),
    pytest.param(
        RULE + "---\n" + RULE,
        Error(RulesError, "not valid YAML|single document|documents"),
        id="rules-multi-document",
    ),
    pytest.param(
        "- !!python/object/apply:os.system ['touch MARKER']\n",
        Error(RulesError, reason="invalid-yaml"),
        id="rules-python-object",
    ),
    pytest.param(
        RULE + "  env: !!python/name:os.system\n",
        Error(RulesError, reason="invalid-yaml"),
        id="rules-python-name",
    ),
    pytest.param(RULE + "  env: \x00\n", Error(RulesError, reason="invalid-yaml"), id="rules-nul"),
    pytest.param(
        RULE.replace("https://github.com", "https://ghp_secret@github.com"),
        Error(RulesError, "must not contain credentials"),
        id="rules-url-credentials",
    ),
    pytest.param(
        RULE.replace("https://github.com/org/gitops/services/$1/overlays/prod", "file:///etc/passwd"),
        Error(RulesError, rule=0, field="githubRepository"),
        id="rules-url-file-scheme",
    ),
    pytest.param(
        RULE.replace("https://github.com/org/gitops/services/$1/overlays/prod", "'ext::sh -c touch% /tmp/x'"),
        Error(RulesError, rule=0, field="githubRepository"),
        id="rules-url-ext-transport",
    ),
    pytest.param(
        RULE.replace(f"{REGISTRY}", f"{ACCOUNT}.dkr.ecr.{REGION}.аmazonaws.com"),
        Error(RulesError, rule=0, field="registryURI"),
        id="rules-registry-homoglyph",
    ),
    pytest.param(
        RULE.replace("team/$1", "ｔｅａｍ/$1"),
        Error(RulesError, rule=0, field="registryURI"),
        id="rules-repository-fullwidth",
    ),
    pytest.param(
        RULE + "  baseBranch: --upload-pack=touch /tmp/x\n",
        Error(RulesError, rule=0, field="baseBranch"),
        id="rules-branch-option",
    ),
    pytest.param(
        RULE + "  baseBranch: ../../etc\n",
        Error(RulesError, rule=0, field="baseBranch"),
        id="rules-branch-dot-dot",
    ),
    pytest.param(
        RULE + f"  mode: '{SHELL}'\n",
        Error(RulesError, "must be one of", rule=0, field="mode"),
        id="rules-mode-shell",
    ),
    pytest.param(
        RULE + "  writeDigest: 'yes'\n",
        Error(RulesError, "must be true or false", rule=0, field="writeDigest"),
        id="rules-wrong-type-bool",
    ),
    pytest.param(
        RULE + f"  denyImageTag: ['{SHELL}']\n",
        Error(RulesError, rule=0, field="denyImageTag[0]"),
        id="rules-deny-shell-literal",
    ),
    pytest.param(
        f"- registryURI: [{REGISTRY}/team/x]\n  githubRepository: https://github.com/o/r/p\n",
        Error(RulesError, "must be a string", rule=0, field="registryURI"),
        id="rules-wrong-type-list",
    ),
]

#: A 'billion laughs' value in a field (a few hundred bytes): refused at load, cheaply, naming rule and
#: field — never expanded into the error message (once 107 s and 5.5 GB). Run in a child process
#: with a memory cap, so a regression fails instead of taking the test runner down.
RULES_BOMB_CASES = [
    pytest.param(
        RULE + f"  labels: [{_BOMB_VALUE}]\n",
        Error(RulesError, rule=0, field="labels", reason="alias-bomb"),
        id="rules-bomb-labels",
    ),
    pytest.param(
        RULE + f"  mode: {_BOMB_VALUE}\n",
        Error(RulesError, rule=0, field="mode", reason="alias-bomb"),
        id="rules-bomb-mode",
    ),
    pytest.param(
        RULE + f"  writeDigest: {_BOMB_VALUE}\n",
        Error(RulesError, rule=0, field="writeDigest", reason="alias-bomb"),
        id="rules-bomb-write-digest",
    ),
    pytest.param(
        RULE.replace(f"{REGISTRY}/team/$1", _BOMB_VALUE),
        Error(RulesError, rule=0, field="registryURI", reason="alias-bomb"),
        id="rules-bomb-registry-uri",
    ),
]

# -- 4. kustomizations → steps.kustomize (pure) -------------------------------------------------------

KUSTOMIZATION = (
    "apiVersion: kustomize.config.k8s.io/v1beta1\n"
    "kind: Kustomization\n"
    "resources:\n"
    "- ../../base\n"
    "images:\n"
    f"- name: {REGISTRY}/team/api\n"
    "  newTag: '1.0'\n"
)

#: (kustomization text, image name to set, tag) → expected error. set_image and get_image both run.
KUSTOMIZATION_CASES = [
    pytest.param(
        KUSTOMIZATION + "images: []\n",
        f"{REGISTRY}/team/api",
        "2.0",
        Error(KustomizationError, reason="duplicate-key"),
        id="kust-duplicate-images",
    ),
    pytest.param(
        KUSTOMIZATION + "  newTag: '3.0'\n",
        f"{REGISTRY}/team/api",
        "2.0",
        Error(KustomizationError, reason="duplicate-key"),
        id="kust-duplicate-newtag",
    ),
    pytest.param(
        KUSTOMIZATION + "---\n" + KUSTOMIZATION,
        f"{REGISTRY}/team/api",
        "2.0",
        Error(KustomizationError, reason="multiple-documents"),
        id="kust-multi-document",
    ),
    pytest.param(
        "---\n---\n" + KUSTOMIZATION,
        f"{REGISTRY}/team/api",
        "2.0",
        Error(KustomizationError, reason="multiple-documents"),
        id="kust-empty-leading-documents",
    ),
    pytest.param(
        "- " + KUSTOMIZATION.replace("\n", "\n  "),
        f"{REGISTRY}/team/api",
        "2.0",
        Error(KustomizationError, reason="not-a-mapping"),
        id="kust-top-level-list",
    ),
    pytest.param(
        KUSTOMIZATION.replace("kind:", "kind:\x00"),
        f"{REGISTRY}/team/api",
        "2.0",
        Error(KustomizationError, reason="invalid-yaml"),
        id="kust-nul",
    ),
    pytest.param(
        KUSTOMIZATION.replace("images:\n", "images: &i\n") + "x: *i\n",
        f"{REGISTRY}/team/api",
        "2.0",
        Error(KustomizationError, reason="anchor"),
        id="kust-anchored-images",
    ),
    pytest.param(
        KUSTOMIZATION.replace("team/api", "tеam/api"),
        f"{REGISTRY}/team/api",
        "2.0",
        Error(KustomizationError, "not in kustomization.yaml"),
        id="kust-homoglyph-entry-not-matched",
    ),
    pytest.param(
        KUSTOMIZATION.replace("team/api", "team/api\u200b"),
        f"{REGISTRY}/team/api",
        "2.0",
        Error(KustomizationError, "not in kustomization.yaml"),
        id="kust-zero-width-entry-not-matched",
    ),
    pytest.param(
        KUSTOMIZATION,
        f"{REGISTRY}/team/api",
        SHELL,
        Error(ConfigError, reason="invalid-tag", field="tag"),
        id="kust-set-shell-tag",
    ),
    pytest.param(
        KUSTOMIZATION,
        f"{REGISTRY}/team/api",
        "1.0\nimages: []",
        Error(ConfigError, reason="invalid-tag", field="tag"),
        id="kust-set-newline-tag",
    ),
    pytest.param(
        KUSTOMIZATION,
        f"{REGISTRY}/team/api",
        "*anchor",
        Error(ConfigError, reason="invalid-tag", field="tag"),
        id="kust-set-alias-tag",
    ),
    # tags YAML does not define: kustomize ignores them, an edit refuses them in one line (issue 12)
    pytest.param(
        KUSTOMIZATION.replace("'1.0'", "!Ref '1.0'"),
        f"{REGISTRY}/team/api",
        "2.0",
        Error(KustomizationError, r"^kustomization.yaml: .*'!Ref' at line 7[^\n]*$", reason="unknown-tag"),
        id="kust-unknown-tag-ref",
    ),
    pytest.param(
        KUSTOMIZATION + "x: !!python/object/apply:os.system ['id']\n",
        f"{REGISTRY}/team/api",
        "2.0",
        Error(
            KustomizationError,
            r"^kustomization.yaml: .*'tag:yaml.org,2002:python/object",
            reason="unknown-tag",
        ),
        id="kust-unknown-tag-python",
    ),
]

#: set-image on a kustomization that is a symbolic link (overlay ``apps/api/overlays/prod`` of a git
#: work tree that also holds ``shared/kustomization.yaml``): (link target, exit code). A link that
#: leaves the repository or points into .git is refused; one that stays inside is edited through.
SET_IMAGE_LINK_CASES = [
    pytest.param("/etc/passwd", 2, id="set-image-link-etc-passwd"),
    pytest.param("../" * 16 + "etc/passwd", 2, id="set-image-link-relative-outside"),
    pytest.param("../../../../.git/config", 2, id="set-image-link-into-dot-git"),
    pytest.param("../../../../shared/kustomization.yaml", 0, id="set-image-link-inside"),
]

#: The size the issue measured (27,000 entries, just under the 1 MiB limit): once 91 s an edit.
LARGE_KUSTOMIZATION = KUSTOMIZATION + "".join(
    f"- name: team/app{i:05d}\n  newTag: '1.0'\n" for i in range(27_000)
)

BOMB_KUSTOMIZATION = (
    KUSTOMIZATION + "x-laughs:\n" + yaml_bomb("  ") + "  l9: [" + ", ".join(["*i"] * 10) + "]\n"
)
PYTHON_TAG_KUSTOMIZATION = KUSTOMIZATION + "x-evil: !!python/object/apply:os.system ['touch MARKER']\n"

# -- 5. git-level: edit-kustomize / commit-pr against a real remote -----------------------------------

OVERLAY = "apps/api/overlays/prod"

#: (files, symlinks, overlay path) → the expected error from edit_kustomize.run (nothing pushed).
REPO_CASES = [
    pytest.param(
        {},
        {f"{OVERLAY}/kustomization.yaml": "/etc/passwd"},
        OVERLAY,
        Error(ConfigError, "symbolic link"),
        id="repo-kustomization-symlink-etc-passwd",
    ),
    pytest.param(
        {},
        {f"{OVERLAY}/kustomization.yaml": "../" * 16 + "etc/passwd"},
        OVERLAY,
        Error(ConfigError, "symbolic link"),
        id="repo-kustomization-symlink-relative-outside",
    ),
    # a dangling link out of the repository is no kustomization at all (is_file() is false): refused
    pytest.param(
        {},
        {f"{OVERLAY}/kustomization.yaml": "../../../../../outside/kustomization.yaml"},
        OVERLAY,
        Error(KustomizationError, "no kustomization|symbolic link"),
        id="repo-kustomization-symlink-dangling",
    ),
    pytest.param(
        {}, {OVERLAY: "/etc"}, OVERLAY, Error(ConfigError, "symbolic link"), id="repo-overlay-symlink-etc"
    ),
    pytest.param(
        {},
        {OVERLAY: "../../../.."},
        OVERLAY,
        Error(ConfigError, "symbolic link"),
        id="repo-overlay-symlink-parent",
    ),
    pytest.param(
        {f"{OVERLAY}/kustomization.yaml": KUSTOMIZATION},
        {},
        "../outside",
        Error(ConfigError, "'..'"),
        id="repo-path-dot-dot",
    ),
    pytest.param(
        {f"{OVERLAY}/kustomization.yaml": KUSTOMIZATION},
        {},
        "/etc",
        Error(ConfigError, "relative"),
        id="repo-path-absolute",
    ),
    pytest.param(
        {f"{OVERLAY}/kustomization.yaml": KUSTOMIZATION},
        {},
        "%2e%2e/%2e%2e/etc",
        Error(KustomizationError, "does not exist"),
        id="repo-path-percent-encoded",
    ),
    pytest.param(
        {f"{OVERLAY}/kustomization.yaml": KUSTOMIZATION},
        {},
        SHELL,
        Error(KustomizationError, "does not exist"),
        id="repo-path-shell",
    ),
    pytest.param(
        {f"{OVERLAY}/kustomization.yaml": KUSTOMIZATION},
        {},
        "--upload-pack=touch x",
        Error(KustomizationError, "does not exist"),
        id="repo-path-option",
    ),
    pytest.param(
        {f"{OVERLAY}/kustomization.yaml": KUSTOMIZATION + "images: []\n"},
        {},
        OVERLAY,
        Error(KustomizationError, reason="duplicate-key"),
        id="repo-duplicate-keys",
    ),
    pytest.param(
        {f"{OVERLAY}/kustomization.yaml": KUSTOMIZATION + "---\n" + KUSTOMIZATION},
        {},
        OVERLAY,
        Error(KustomizationError, reason="multiple-documents"),
        id="repo-multi-document",
    ),
    pytest.param(
        {f"{OVERLAY}/kustomization.yaml": KUSTOMIZATION.encode().decode() + "x: \x00\n"},
        {},
        OVERLAY,
        Error(KustomizationError, reason="invalid-yaml"),
        id="repo-nul-byte",
    ),
]

#: A kustomization larger than any real one (5 MiB of harmless comment lines). Its entry already
#: holds the pushed tag, so a reader without a size limit only pays for parsing it once.
HUGE_KUSTOMIZATION = KUSTOMIZATION.replace("'1.0'", "'2.0'") + ("# " + "x" * 98 + "\n") * (
    5 * 1024 * 1024 // 101
)
SIZE_PATTERN = r"(?i)too (large|big)|larger than|bytes|KiB|MiB|size"

# -- 6. the local sensor: invalid bodies go to the DLQ, never silently deleted ------------------------

#: Bodies that reach the queue (SQS refuses > 256 KiB itself) and must end in the DLQ.
DLQ_BODIES = [
    "this is not json",
    "[1, 2, 3]",
    detail(repository_name=SHELL),
    detail(image_tag="1.0\u202e\x00"),
    detail(repository_name=None),
]

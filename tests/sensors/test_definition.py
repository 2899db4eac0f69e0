"""sensors.definition on the real event samples: filters, Workflow names, arguments.

No Go toolchain runs here, so the Sensor's sprig name template is checked two ways: by a
small interpreter of exactly the Go-template constructs it uses (below), and against SHA-256
values computed independently with coreutils' ``sha256sum``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from sensors import definition as d

EVENTS = Path(__file__).resolve().parents[1] / "testdata" / "events"
DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def load(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


@pytest.mark.parametrize(
    ("sample", "accepted", "reason"),
    [
        pytest.param("push.json", True, "accepted", id="push"),
        pytest.param("push-digest-only.json", True, "accepted", id="push-digest-only"),
        pytest.param("push-no-account.json", True, "accepted", id="push-no-account"),
        pytest.param("delete.json", False, "body.detail.action-type is 'DELETE'", id="delete"),
        pytest.param("push-failed.json", False, "body.detail.result is 'FAILURE'", id="failed"),
        pytest.param(
            "update-storage-class.json",
            False,
            "body.detail.action-type is 'UPDATE_STORAGE_CLASS'",
            id="update-storage-class",
        ),
        pytest.param("scan.json", False, "body.detail-type is 'ECR Image Scan'", id="scan"),
        pytest.param(
            "replication.json", False, "body.detail-type is 'ECR Replication Action'", id="replication"
        ),
    ],
)
def test_accepts_real_samples(sample, accepted, reason):
    ok, why = d.accepts(load(sample))
    assert ok is accepted
    assert why.startswith(reason), why


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        pytest.param(lambda e: e.update(source="aws.ecr.fake"), "body.source is 'aws.ecr.fake'", id="suffix"),
        pytest.param(lambda e: e.update(source="xaws.ecr"), "body.source is 'xaws.ecr'", id="prefix"),
        pytest.param(lambda e: e.update(source="awsXecr"), "body.source is 'awsXecr'", id="dot-is-literal"),
        pytest.param(
            lambda e: e["detail"].update({"action-type": "PUSHED"}), "body.detail.action-type", id="push-ed"
        ),
        pytest.param(lambda e: e["detail"].pop("result"), "body.detail.result is missing", id="missing"),
        pytest.param(
            lambda e: e.update(detail="x"), "body.detail.action-type is missing", id="detail-not-object"
        ),
    ],
)
def test_filters_are_anchored_and_exact(mutate, reason):
    event = load("push.json")
    mutate(event)
    ok, why = d.accepts(event)
    assert not ok
    assert why.startswith(reason), why


def test_accepts_refuses_non_objects():
    assert d.accepts([]) == (False, "event is not a JSON object (got list)")


def test_every_filter_is_anchored():
    for path, pattern in d.FILTERS.items():
        assert path.startswith("body."), path
        assert pattern.startswith("^") and pattern.endswith("$"), pattern


# --- Workflow names -------------------------------------------------------------------------

#: sha256sum of "repository|tag|digest|account|region", computed with coreutils
#: (printf '%s' ... | sha256sum).
HAND_COMPUTED = {
    "push.json": "ec4726507efd687581cbdf1c1ca1cc72bc07fd114060861f2aa3b6eb1e932592",
    "push-digest-only.json": "501edb5d4d3ce5da2635a71a358094094be87a44fcbb639584771fb675f877e1",
    "push-no-account.json": "54f32e36ff48c9b0f4a4a4e9ab0f88043644325ab884129d71ca7760ceaaf238",
}


@pytest.mark.parametrize("sample", sorted(HAND_COMPUTED))
def test_workflow_name_matches_hand_computed_sha256(sample):
    assert d.workflow_name(load(sample)) == "image-update-" + HAND_COMPUTED[sample][:16]


def test_workflow_name_is_dns_valid_and_stable():
    event = load("push.json")
    name = d.workflow_name(event)
    assert DNS_1123.match(name) and len(name) <= 63
    redelivered = copy.deepcopy(event)
    redelivered["id"] = "another-delivery"
    redelivered["time"] = "2026-11-16T02:00:00Z"
    assert d.workflow_name(redelivered) == name


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("image-digest", "sha256:" + "0" * 64, id="digest"),
        pytest.param("image-tag", "1.4.3", id="tag"),
        pytest.param("repository-name", "team/web", id="repository"),
    ],
)
def test_workflow_name_differs_for_a_different_image(field, value):
    event = load("push.json")
    other = copy.deepcopy(event)
    other["detail"][field] = value
    assert d.workflow_name(other) != d.workflow_name(event)


@pytest.mark.parametrize(
    ("field", "value"),
    [pytest.param("account", "210987654321", id="account"), pytest.param("region", "eu-west-1", id="region")],
)
def test_the_same_repository_tag_and_digest_in_another_registry_is_another_workflow(field, value):
    """One queue fed by two registries (cross-account or cross-region forwarding, replication): the
    second push is another image, not a duplicate the API server should refuse."""
    event = load("push.json")
    other = copy.deepcopy(event)
    other[field] = value
    assert d.workflow_name(other) != d.workflow_name(event)
    assert render_name_template(d.NAME_TEMPLATE, other) == d.workflow_name(other)


def test_missing_tag_and_empty_tag_name_the_same_workflow():
    # sprig: `index` of a missing key is nil, `default ""` makes it "" — same as an empty tag.
    digest_only = load("push-digest-only.json")
    empty_tag = copy.deepcopy(digest_only)
    empty_tag["detail"]["image-tag"] = ""
    assert d.workflow_name(digest_only) == d.workflow_name(empty_tag) != d.workflow_name(load("push.json"))


# A faithful interpreter of the Go-template subset NAME_TEMPLATE uses: literal text, one
# action holding a pipeline of commands; commands `printf FMT ARG...`, `index .Input.a.b KEY`,
# `default X`, `sha256sum`, `trunc N`; parenthesised sub-pipelines; piped values are passed as
# the LAST argument (text/template semantics).


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=False, punctuation_chars="()|")
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)


def _eval_pipeline(tokens: list[str], data: dict[str, Any]) -> Any:
    commands: list[list[Any]] = [[]]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "|":
            commands.append([])
        elif token == "(":
            depth, j = 1, i + 1
            while depth:
                depth += {"(": 1, ")": -1}.get(tokens[j], 0)
                j += 1
            commands[-1].append(("value", _eval_pipeline(tokens[i + 1 : j - 1], data)))
            i = j
            continue
        else:
            commands[-1].append(("token", token))
        i += 1
    value: Any = None
    for n, command in enumerate(commands):
        args = [_arg(part, data) for part in command[1:]]
        if n:
            args.append(value)
        value = _call(command[0][1], args)
    return value


def _arg(part: tuple[str, Any], data: dict[str, Any]) -> Any:
    kind, item = part
    if kind == "value":
        return item
    if item.startswith('"'):
        return json.loads(item)  # Go string literal (no escapes used here)
    if item.startswith(".Input"):
        node: Any = data
        for key in item.split(".")[2:]:
            node = node.get(key) if isinstance(node, dict) else None
        return node
    return int(item)


def _go_s(value: Any) -> str:
    return "%!s(<nil>)" if value is None else str(value)


def _call(name: str, args: list[Any]) -> Any:
    if name == "printf":
        fmt, rest = args[0], args[1:]
        assert fmt.count("%s") == len(rest)
        return fmt.replace("%s", "{}").format(*map(_go_s, rest))
    if name == "index":
        mapping, key = args
        return mapping.get(key) if isinstance(mapping, dict) else None
    if name == "default":
        fallback, given = args
        return fallback if given in (None, "", 0, False, [], {}) else given
    if name == "sha256sum":
        (text,) = args
        return hashlib.sha256(text.encode()).hexdigest()
    if name == "trunc":
        length, text = args
        return text[:length]
    raise AssertionError(f"NAME_TEMPLATE uses {name!r}, which this interpreter does not model")


def render_name_template(template: str, body: dict[str, Any]) -> str:
    """Evaluate NAME_TEMPLATE over Argo Events' ``.Input`` (the SQS data: {"body": event})."""
    match = re.fullmatch(r"(?s)(.*?)\{\{(.*)\}\}(.*)", template)
    assert match, template
    before, action, after = match.groups()
    return before + str(_eval_pipeline(_tokens(action), {"body": body})) + after


@pytest.mark.parametrize("sample", ["push.json", "push-digest-only.json", "push-no-account.json"])
def test_sprig_template_and_python_agree(sample):
    event = load(sample)
    assert render_name_template(d.NAME_TEMPLATE, event) == d.workflow_name(event)


def test_template_interpreter_sees_nil_without_default():
    # Proves the interpreter models Go's nil (so `default ""` in the template matters).
    template = 'x-{{ printf "%s" (index .Input.body.detail "image-tag") }}'
    assert render_name_template(template, load("push-digest-only.json")) == "x-%!s(<nil>)"


def test_workflow_arguments_pass_the_raw_body():
    body = (EVENTS / "push.json").read_text()
    assert d.workflow_arguments(body) == {"event": body}
    assert set(d.PARAMETERS) == set(d.workflow_arguments(body))


# --- the raw body as the cluster reads it: gjson's unescaping, Go's %s and regular expressions ------


def _body(detail_json: str, action: str = '"PUSH"') -> str:
    """An SQS body written by hand, so escapes reach the decoder exactly as written."""
    return (
        '{"version":"0","id":"e1","detail-type":"ECR Image Action","source":"aws.ecr",'
        '"detail":{"result":"SUCCESS","action-type":' + action + "," + detail_json + "}}"
    )


def _hash_name(key: str) -> str:
    return "image-update-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


@pytest.mark.parametrize(
    ("repository_json", "key_repository"),
    [
        # tidwall/gjson gjson.go `unescape`: utf8.EncodeRune writes U+FFFD for a lone surrogate
        pytest.param(r'"\ud800"', "\ufffd", id="lone-high-surrogate"),
        pytest.param(r'"a\udc00b"', "a\ufffdb", id="lone-low-surrogate"),
        # a surrogate always consumes the next \u escape: utf16.DecodeRune of a bad pair is U+FFFD
        pytest.param(r'"\ud800\u0041z"', "\ufffdz", id="high-surrogate-swallows-the-next-escape"),
        pytest.param(r'"\ud83d\ude00"', "\U0001f600", id="valid-pair"),
        pytest.param(r'"team\/api\u00e9"', "team/api\u00e9", id="plain-escapes"),
    ],
)
def test_names_from_the_raw_body_follow_gjson(repository_json, key_repository):
    body = _body('"repository-name":' + repository_json + ',"image-tag":"1.0","image-digest":"sha256:d"')
    assert d.name_key(body) == f"{key_repository}|1.0|sha256:d||"
    assert d.workflow_name(body) == _hash_name(f"{key_repository}|1.0|sha256:d||")
    assert DNS_1123.match(d.workflow_name(body))


def test_a_parsed_event_with_a_lone_surrogate_names_like_the_body():
    body = _body(r'"repository-name":"\ud800","image-tag":"1.0"')
    assert d.workflow_name(json.loads(body)) == d.workflow_name(body) == _hash_name("\ufffd|1.0|||")


@pytest.mark.parametrize(
    ("tag_json", "key_tag"),
    [
        # sprig `default` treats 0, false, null, "" and empty collections as empty
        pytest.param("0", "", id="zero"),
        pytest.param("false", "", id="false"),
        pytest.param("null", "", id="null"),
        pytest.param("[]", "", id="empty-list"),
        # fmt's %s of a non-string: %!s(TYPE=VALUE), float64 printed as %v ('g', shortest)
        pytest.param("5", "%!s(float64=5)", id="int"),
        pytest.param("1234567", "%!s(float64=1.234567e+06)", id="large-int"),
        pytest.param("0.00001", "%!s(float64=1e-05)", id="small-float"),
        pytest.param("true", "%!s(bool=true)", id="true"),
        pytest.param('{"b":"x","a":1}', "map[a:%!s(float64=1) b:x]", id="object"),
        pytest.param('["x",null]', "[x %!s(<nil>)]", id="list"),
    ],
)
def test_non_string_fields_print_as_go_prints_them(tag_json, key_tag):
    body = _body('"repository-name":"team/api","image-tag":' + tag_json)
    assert d.name_key(body) == f"team/api|{key_tag}|||"


def test_duplicate_keys_filters_see_the_first_names_see_the_last():
    # gjson.GetBytes (filters) stops at the first match; Value() (the name template) keeps the last
    body = _body(
        '"repository-name":"first","repository-name":"last","image-tag":"1"',
        action='"PUSH","action-type":"DELETE"',
    )
    assert d.accepts(body) == (True, "accepted")
    assert d.name_key(body) == "last|1|||"


@pytest.mark.parametrize(
    ("action_json", "accepted"),
    [
        pytest.param('"PUSH"', True, id="exact"),
        pytest.param(r'"PUSH\n"', False, id="trailing-newline"),  # Go: $ is the end of the text
        pytest.param(r'"PUSH\n\n"', False, id="two-newlines"),
        pytest.param(r'"\nPUSH"', False, id="leading-newline"),
        pytest.param(r'"PUSH\u0000"', False, id="trailing-nul"),
    ],
)
def test_filters_use_go_end_of_text(action_json, accepted):
    body = _body('"repository-name":"team/api","image-tag":"1"', action=action_json)
    assert d.accepts(body)[0] is accepted
    assert d.accepts(json.loads(body))[0] is accepted


@pytest.mark.parametrize(
    ("pattern", "text", "found"),
    [
        pytest.param("ecr", "aws.ecr.x", True, id="unanchored-stays-unanchored"),
        pytest.param("^aws", "aws.ecr", True, id="start-anchor"),
        pytest.param("ecr$", "aws.ecr\n", False, id="end-anchor-is-end-of-text"),
        pytest.param(r"ecr\z", "aws.ecr\n", False, id="go-z-escape"),
        pytest.param("[$]", "a$b", True, id="dollar-in-class-is-literal"),
        pytest.param(r"a\$", "a$", True, id="escaped-dollar-is-literal"),
        pytest.param("[]$]x", "]x", True, id="bracket-first-in-class"),
        pytest.param(r"^\d+$", "\u0663", False, id="digits-are-ascii-in-go"),
    ],
)
def test_go_regex_semantics(pattern, text, found):
    assert bool(d._go_regex(pattern).search(text)) is found


def test_every_filter_translates():
    for pattern in d.FILTERS.values():
        assert d._go_regex(pattern).pattern.endswith(r"\Z")

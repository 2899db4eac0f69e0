"""steps.domain.events: ECR events and image references → Image, Skip or InvalidEventError."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from steps.domain.errors import InvalidEventError
from steps.domain.events import (
    MAX_BODY_BYTES,
    Skip,
    parse_event,
    parse_image_reference,
    parse_repository_uri,
    validate_digest,
    validate_repository_name,
    validate_tag,
)
from steps.domain.models import Image

EVENTS = Path(__file__).parents[2] / "testdata" / "events"
DIGEST = "sha256:7f5b2640fe6fb4f46592dfd3410c4a79dac4f89e4782432e0378abcd12340000"
REGISTRY = "123456789012.dkr.ecr.us-west-2.amazonaws.com"


def sample(name: str) -> str:
    return (EVENTS / name).read_text()


def push(**changes: Any) -> dict:
    """push.json with top-level changes; ``detail__key`` changes a detail field; None deletes."""
    event = json.loads(sample("push.json"))
    for key, value in changes.items():
        target, name = (
            (event["detail"], key[len("detail__") :]) if key.startswith("detail__") else (event, key)
        )
        name = name.replace("_", "-") if target is event["detail"] or name == "detail_type" else name
        if value is _DELETE:
            target.pop(name, None)
        else:
            target[name] = value
    return event


_DELETE = object()


# --- the shared samples ------------------------------------------------------------------------


def test_push_sample_is_an_image() -> None:
    image = parse_event(sample("push.json"))
    assert image == Image(
        account="123456789012",
        region="us-west-2",
        repository="team/api",
        tag="1.4.2",
        digest=DIGEST,
        pushed_at=datetime(2026, 11, 16, 1, 54, 34, tzinfo=UTC),
        event_id="13cde686-328b-6117-af20-0e5566167481",
    )
    assert image.uri == f"{REGISTRY}/team/api"


def test_digest_only_push_is_an_image_without_tag() -> None:
    image = parse_event(sample("push-digest-only.json"))
    assert isinstance(image, Image)
    assert image.tag is None and image.digest == DIGEST


def test_push_without_account_leaves_account_empty() -> None:
    image = parse_event(sample("push-no-account.json"))
    assert isinstance(image, Image)
    assert image.account == ""
    assert image.repository == "team/api"


@pytest.mark.parametrize("body_type", [str, bytes, dict], ids=["str", "bytes", "dict"])
def test_body_types(body_type: type) -> None:
    text = sample("push.json")
    body: Any = {str: text, bytes: text.encode(), dict: json.loads(text)}[body_type]
    assert isinstance(parse_event(body), Image)


# --- skips: valid events that are not a successful push -----------------------------------------

SKIPS = [
    pytest.param(sample("push-failed.json"), "'FAILURE'", id="sample-push-failed"),
    pytest.param(sample("delete.json"), "'DELETE' is not a push", id="sample-delete"),
    pytest.param(
        sample("update-storage-class.json"), "'UPDATE_STORAGE_CLASS'", id="sample-update-storage-class"
    ),
    pytest.param(sample("scan.json"), "'ECR Image Scan'", id="sample-scan"),
    pytest.param(sample("replication.json"), "'ECR Replication Action'", id="sample-replication"),
    pytest.param(push(source="aws.s3"), "not an ECR event", id="other-source"),
    pytest.param(
        push(**{"detail-type": "ECR Pull Through Cache Action"}), "not an image push", id="other-detail-type"
    ),
    pytest.param(push(detail__action_type="PULL"), "'PULL' is not a push", id="unknown-action"),
    pytest.param(push(detail__result="PENDING"), "'PENDING'", id="result-pending"),
    pytest.param(push(detail__action_type="push"), "'push' is not a push", id="lowercase-push-action"),
    pytest.param(
        push(source="aws.ecr ", detail=None), "not an ECR event", id="source-trailing-space-skips-first"
    ),
]


@pytest.mark.parametrize(("body", "fragment"), SKIPS)
def test_skips(body: str | dict, fragment: str) -> None:
    result = parse_event(json.dumps(body) if isinstance(body, dict) else body)
    assert isinstance(result, Skip), result
    assert fragment in result.reason
    assert result.event_id


# --- errors: bodies that are not a valid ECR event ----------------------------------------------

BIG = json.dumps(push(padding="x" * MAX_BODY_BYTES))

BAD = [
    pytest.param(BIG, {"reason": "too-large"}, id="oversized-str"),
    pytest.param(BIG.encode(), {"reason": "too-large"}, id="oversized-bytes"),
    pytest.param("", {"reason": "empty"}, id="empty"),
    pytest.param("   \n", {"reason": "empty"}, id="whitespace-only"),
    pytest.param("not json", {"reason": "not-json"}, id="non-json"),
    pytest.param('{"source": "aws.ecr",', {"reason": "not-json"}, id="truncated-json"),
    pytest.param(b"\xff\xfe{}", {"reason": "not-text"}, id="not-utf8"),
    pytest.param("[]", {"reason": "wrong-type"}, id="array-body"),
    pytest.param('"a string"', {"reason": "wrong-type"}, id="json-string-body"),
    pytest.param(json.dumps(json.dumps(push())), {"reason": "wrong-type"}, id="json-in-json-string"),
    pytest.param("null", {"reason": "wrong-type"}, id="null-body"),
    pytest.param("42", {"reason": "wrong-type"}, id="number-body"),
    pytest.param(push(detail=None), {"reason": "wrong-type", "field": "detail"}, id="null-detail"),
    pytest.param(push(detail=[]), {"reason": "wrong-type", "field": "detail"}, id="array-detail"),
    pytest.param(push(detail=_DELETE), {"reason": "missing", "field": "detail"}, id="missing-detail"),
    pytest.param(push(source=_DELETE), {"reason": "missing", "field": "source"}, id="missing-source"),
    pytest.param(push(source=1), {"reason": "wrong-type", "field": "source"}, id="numeric-source"),
    pytest.param(
        push(**{"detail-type": _DELETE}),
        {"reason": "missing", "field": "detail-type"},
        id="missing-detail-type",
    ),
    pytest.param(
        push(detail__action_type=_DELETE),
        {"reason": "missing", "field": "detail.action-type"},
        id="missing-action-type",
    ),
    pytest.param(
        push(detail__result=_DELETE), {"reason": "missing", "field": "detail.result"}, id="missing-result"
    ),
    pytest.param(
        push(detail__repository_name=_DELETE),
        {"reason": "missing", "field": "detail.repository-name"},
        id="missing-repository-name",
    ),
    pytest.param(
        push(detail__repository_name=7),
        {"reason": "wrong-type", "field": "detail.repository-name"},
        id="numeric-repository",
    ),
    pytest.param(
        push(detail__repository_name="Team/API"), {"reason": "invalid-repository"}, id="uppercase-repo"
    ),
    pytest.param(
        push(detail__repository_name="team//api"), {"reason": "invalid-repository"}, id="empty-segment-repo"
    ),
    pytest.param(
        push(detail__repository_name="team/a__b"),
        {"reason": "invalid-repository"},
        id="double-separator-repo",
    ),
    pytest.param(
        push(detail__repository_name="team/api/"), {"reason": "invalid-repository"}, id="trailing-slash-repo"
    ),
    pytest.param(push(detail__repository_name="../api"), {"reason": "invalid-repository"}, id="dotdot-repo"),
    pytest.param(push(detail__repository_name="a"), {"reason": "invalid-repository"}, id="one-char-repo"),
    pytest.param(
        push(detail__repository_name="a" * 257), {"reason": "invalid-repository"}, id="too-long-repo"
    ),
    pytest.param(
        push(detail__repository_name="te\u0430m/api"), {"reason": "invalid-repository"}, id="cyrillic-a-repo"
    ),
    pytest.param(
        push(detail__repository_name="team/api\n"), {"reason": "invalid-repository"}, id="newline-repo"
    ),
    pytest.param(push(detail__image_tag="1.4 2"), {"reason": "invalid-tag"}, id="tag-with-space"),
    pytest.param(
        push(detail__image_tag=142), {"reason": "wrong-type", "field": "detail.image-tag"}, id="numeric-tag"
    ),
    pytest.param(push(detail__image_tag=True), {"reason": "wrong-type"}, id="boolean-tag"),
    pytest.param(push(detail__image_tag=""), {"reason": "invalid-tag"}, id="empty-tag"),
    pytest.param(push(detail__image_tag=".hidden"), {"reason": "invalid-tag"}, id="tag-leading-dot"),
    pytest.param(push(detail__image_tag="-rc1"), {"reason": "invalid-tag"}, id="tag-leading-dash"),
    pytest.param(push(detail__image_tag="a" * 129), {"reason": "invalid-tag"}, id="tag-129-chars"),
    pytest.param(push(detail__image_tag="v1.0\uff0e1"), {"reason": "invalid-tag"}, id="fullwidth-dot-tag"),
    pytest.param(push(detail__image_tag="1.4.2:latest"), {"reason": "invalid-tag"}, id="tag-with-colon"),
    pytest.param(push(detail__image_digest="sha256:abc"), {"reason": "invalid-digest"}, id="short-digest"),
    pytest.param(
        push(detail__image_digest=DIGEST.upper().replace("SHA256", "sha256")),
        {"reason": "invalid-digest"},
        id="uppercase-digest",
    ),
    pytest.param(
        push(detail__image_digest=DIGEST.replace("sha256", "sha512")),
        {"reason": "invalid-digest"},
        id="sha512-digest",
    ),
    pytest.param(
        push(detail__image_digest=DIGEST[:-1] + "\u0660"),
        {"reason": "invalid-digest"},
        id="arabic-digit-digest",
    ),
    pytest.param(
        push(detail__image_tag=_DELETE, detail__image_digest=_DELETE),
        {"reason": "missing", "field": "detail.image-digest"},
        id="no-tag-no-digest",
    ),
    pytest.param(
        push(detail__image_tag=_DELETE, detail__image_digest=None),
        {"reason": "wrong-type", "field": "detail.image-digest"},
        id="null-digest-no-tag",
    ),
    pytest.param(push(region=_DELETE), {"reason": "missing", "field": "region"}, id="missing-region"),
    pytest.param(push(region="US-WEST-2"), {"reason": "invalid-region"}, id="uppercase-region"),
    pytest.param(
        push(account=123456789012), {"reason": "wrong-type", "field": "account"}, id="numeric-account"
    ),
    pytest.param(push(account="12345678901"), {"reason": "invalid-account"}, id="short-account"),
    pytest.param(push(account="\uff11" * 12), {"reason": "invalid-account"}, id="fullwidth-digit-account"),
    pytest.param(push(time="yesterday"), {"reason": "invalid-time", "field": "time"}, id="bad-time"),
    pytest.param(push(id=5), {"reason": "wrong-type", "field": "id"}, id="numeric-id"),
]


@pytest.mark.parametrize(("body", "expected"), BAD)
def test_bad_events(body: str | bytes | dict, expected: dict) -> None:
    if isinstance(body, dict):
        body = json.dumps(body)
    with pytest.raises(InvalidEventError) as info:
        parse_event(body)
    assert {key: getattr(info.value, key) for key in expected} == expected
    assert "\n" not in str(info.value)


def test_at_least_25_bad_or_odd_events() -> None:
    assert len(BAD) + len(SKIPS) >= 25


ODD_BUT_VALID = [
    pytest.param("\ufeff" + sample("push.json"), {"tag": "1.4.2"}, id="utf8-bom"),
    pytest.param(b"\xef\xbb\xbf" + sample("push.json").encode(), {"tag": "1.4.2"}, id="utf8-bom-bytes"),
    pytest.param(push(detail__image_tag=None), {"tag": None}, id="null-tag-is-digest-only"),
    pytest.param(
        push(detail__image_digest=_DELETE), {"digest": None, "tag": "1.4.2"}, id="tag-without-digest"
    ),
    pytest.param(push(account=None), {"account": ""}, id="null-account"),
    pytest.param(push(time=_DELETE), {"pushed_at": None}, id="no-time"),
    pytest.param(push(id=_DELETE), {"event_id": None}, id="no-id"),
    pytest.param(push(extra={"x": 1}, detail__new_field="x"), {"tag": "1.4.2"}, id="unknown-fields-ignored"),
    pytest.param(push(detail__image_tag="a" * 128), {"tag": "a" * 128}, id="tag-128-chars"),
    pytest.param(push(detail__image_tag="_x.Y-1"), {"tag": "_x.Y-1"}, id="tag-all-classes"),
    pytest.param(
        push(detail__repository_name="a-b_c.d/e_f/g"), {"repository": "a-b_c.d/e_f/g"}, id="repo-separators"
    ),
    pytest.param(push(detail__repository_name="ab"), {"repository": "ab"}, id="repo-2-chars"),
    pytest.param(push(region="us-gov-west-1"), {"region": "us-gov-west-1"}, id="govcloud-region"),
    pytest.param(json.dumps(push(), indent=None, separators=(",", ":")), {"tag": "1.4.2"}, id="compact-json"),
]


@pytest.mark.parametrize(("body", "expected"), ODD_BUT_VALID)
def test_odd_but_valid_events(body: str | bytes | dict, expected: dict) -> None:
    if isinstance(body, dict):
        body = json.dumps(body)
    image = parse_event(body)
    assert isinstance(image, Image)
    for key, value in expected.items():
        assert getattr(image, key) == value


def test_body_of_exactly_the_limit_is_read() -> None:
    base = json.dumps(push(padding=""))
    body = base[:-1] + " " * (MAX_BODY_BYTES - len(base)) + "}"
    assert len(body.encode()) == MAX_BODY_BYTES
    assert isinstance(parse_event(body), Image)


def test_dict_input_is_not_mutated() -> None:
    event = push()
    before = copy.deepcopy(event)
    parse_event(event)
    assert event == before


# --- image references ------------------------------------------------------------------------

REFS = [
    pytest.param(f"{REGISTRY}/team/api:1.4.2", ("team/api", "1.4.2", None), id="tag"),
    pytest.param(f"{REGISTRY}/team/api@{DIGEST}", ("team/api", None, DIGEST), id="digest"),
    pytest.param(f"{REGISTRY}/team/api:1.4.2@{DIGEST}", ("team/api", "1.4.2", DIGEST), id="tag-and-digest"),
    pytest.param(f"  {REGISTRY}/team/api:1.4.2\n", ("team/api", "1.4.2", None), id="surrounding-space"),
    pytest.param(f"{REGISTRY}/a/b/c/d:x", ("a/b/c/d", "x", None), id="deep-repo"),
]


@pytest.mark.parametrize(("ref", "expected"), REFS)
def test_image_references(ref: str, expected: tuple) -> None:
    image = parse_image_reference(ref)
    assert (image.repository, image.tag, image.digest) == expected
    assert (image.account, image.region) == ("123456789012", "us-west-2")


BAD_REFS = [
    pytest.param("", "empty", id="empty"),
    pytest.param("team/api:1.4.2", "not-ecr-reference", id="no-registry"),
    pytest.param("docker.io/library/nginx:1", "not-ecr-reference", id="docker-hub"),
    pytest.param(f"{REGISTRY}/team/api", "no-version", id="no-tag-no-digest"),
    pytest.param(f"{REGISTRY}/Team/api:1", "invalid-repository", id="uppercase-repo"),
    pytest.param(f"{REGISTRY}/team/api:1 2", "invalid-tag", id="tag-space"),
    pytest.param(f"{REGISTRY}/team/api:", "invalid-tag", id="empty-tag"),
    pytest.param(f"{REGISTRY}/team/api@sha256:xyz", "invalid-digest", id="bad-digest"),
    pytest.param(f"https://{REGISTRY}/team/api:1", "not-ecr-reference", id="url-scheme"),
    pytest.param(
        "12345678901.dkr.ecr.us-west-2.amazonaws.com/team/api:1",
        "not-ecr-reference",
        id="short-account",
    ),
    pytest.param(
        "123456789012.dkr.ecr.US-WEST-2.amazonaws.com/team/api:1",
        "not-ecr-reference",
        id="uppercase-region",
    ),
]


@pytest.mark.parametrize(("ref", "reason"), BAD_REFS)
def test_bad_image_references(ref: str, reason: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        parse_image_reference(ref)
    assert info.value.reason == reason


def test_parse_repository_uri() -> None:
    assert parse_repository_uri(f"{REGISTRY}/team/api") == ("123456789012", "us-west-2", "team/api")
    with pytest.raises(InvalidEventError) as info:
        parse_repository_uri(f"{REGISTRY}/team/api:1")
    assert info.value.reason == "has-version"
    with pytest.raises(InvalidEventError) as info:
        parse_repository_uri("team/api")
    assert info.value.reason == "not-ecr-reference"


@pytest.mark.parametrize(
    ("validate", "value", "ok"),
    [
        pytest.param(validate_tag, "latest", True, id="tag-ok"),
        pytest.param(validate_tag, "a" * 129, False, id="tag-long"),
        pytest.param(validate_digest, DIGEST, True, id="digest-ok"),
        pytest.param(validate_digest, DIGEST + "0", False, id="digest-long"),
        pytest.param(validate_repository_name, "team/api", True, id="repo-ok"),
        pytest.param(validate_repository_name, "team/-api", False, id="repo-leading-dash"),
    ],
)
def test_validators(validate: Any, value: str, ok: bool) -> None:
    if ok:
        assert validate(value) == value
    else:
        with pytest.raises(InvalidEventError):
            validate(value)


@pytest.mark.parametrize(
    ("validate", "value", "reason"),
    [
        pytest.param(validate_tag, ".hidden", "invalid-tag", id="tag"),
        pytest.param(validate_tag, "1.0\u200b", "invalid-tag", id="tag-zero-width"),
        pytest.param(validate_digest, "sha256:" + "A" * 64, "invalid-digest", id="digest-uppercase"),
    ],
)
def test_one_check_for_tags_and_digests_whose_error_class_the_caller_picks(
    validate: Any, value: str, reason: str
) -> None:
    """One pattern and one check (issue 14): an event's tag is an InvalidEventError, a user's
    ``set-image`` argument a ConfigError that is not an event error; both name the field and value."""
    from steps.domain.errors import ConfigError
    from steps.kustomize import parse_image_spec

    with pytest.raises(InvalidEventError) as event:
        validate(value, field="detail.image-tag")
    assert (event.value.reason, event.value.field) == (reason, "detail.image-tag")
    with pytest.raises(ConfigError) as info:
        validate(value, field="tag", error=ConfigError)
    assert not isinstance(info.value, InvalidEventError)
    assert (info.value.reason, info.value.field) == (reason, "tag")
    assert repr(value) in str(info.value)  # the value at fault, as written
    separator = ":" if validate is validate_tag else "@"
    with pytest.raises(ConfigError) as spec:  # set-image's spec goes through the same check
        parse_image_spec(f"api{separator}{value}")
    assert not isinstance(spec.value, InvalidEventError)
    assert spec.value.reason == reason

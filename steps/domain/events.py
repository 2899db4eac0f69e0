"""ECR push events and image references → one validated :class:`steps.domain.models.Image`.

Reads: an SQS message body holding the raw EventBridge event (no envelope), or a manual image
reference ``ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:TAG][@sha256:DIGEST]``.
Writes: nothing (pure).
Skips: events that are not a successful push (another source or detail-type, DELETE,
UPDATE_STORAGE_CLASS, ``result`` other than SUCCESS, scans, replication) become a :class:`Skip`
with a reason — not an error. A malformed body (too big, not JSON, wrong types, missing fields)
raises :class:`steps.domain.errors.InvalidEventError` naming the field at fault.

Names are validated as ECR validates them, so a value that passes here is one ECR could hold.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from steps.domain.contract import Contract
from steps.domain.errors import ImagebumpError, InvalidEventError
from steps.domain.models import Image

#: SQS's (and EventBridge's) maximum message size.
MAX_BODY_BYTES = 262144

# ECR's own grammars (CreateRepository / PutImage API reference). fullmatch + ASCII-only classes,
# so Unicode look-alikes and trailing newlines never pass.
_REPOSITORY_RE = re.compile(r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*")
#: An image tag (ECR's grammar, also Docker's): the one pattern; :func:`validate_tag` is the one check.
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
#: An image digest: :func:`validate_digest` is the one check.
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
_ACCOUNT_RE = re.compile(r"[0-9]{12}")
_REGION_RE = re.compile(r"[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}")
_REGISTRY_RE = re.compile(r"(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com")

PUSH_SOURCE = "aws.ecr"
PUSH_DETAIL_TYPE = "ECR Image Action"


class Skip(Contract, kw_only=True):
    """An event that is valid but is not a successful image push: nothing to do, and why."""

    reason: str
    event_id: str | None = None


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def validate_repository_name(name: Any, *, field: str = "repository") -> str:
    """Return ``name`` if it is a valid ECR repository name, else raise InvalidEventError."""
    if not isinstance(name, str):
        raise InvalidEventError(f"{field} must be a string, got {_type_name(name)}", reason="wrong-type")
    if not 2 <= len(name) <= 256:
        raise InvalidEventError(
            f"{field} {name!r} must be 2 to 256 characters long, got {len(name)}", reason="invalid-repository"
        )
    if not name.isascii() or not _REPOSITORY_RE.fullmatch(name):
        raise InvalidEventError(
            f"{field} {name!r} is not a valid ECR repository name: use lowercase letters, digits and "
            "'.', '_', '-' between them, segments separated by '/'",
            reason="invalid-repository",
        )
    return name


def validate_tag(tag: Any, *, field: str = "tag", error: type[ImagebumpError] = InvalidEventError) -> str:
    """Return ``tag`` if it is a valid image tag (:data:`TAG_RE`), else raise ``error``.

    The one check of a tag (events, image references, ``set-image`` specs, edits): the caller picks
    the error class — :class:`InvalidEventError` for an event, :class:`ConfigError` for a user's
    argument — and names the field.
    """
    if not isinstance(tag, str):
        raise error(f"{field} must be a string, got {_type_name(tag)}", reason="wrong-type", field=field)
    if not tag.isascii() or not TAG_RE.fullmatch(tag):
        raise error(
            f"invalid {field} {tag!r}: not a valid image tag: 1 to 128 of A-Z a-z 0-9 _ . -, "
            "not starting with '.' or '-'",
            reason="invalid-tag",
            field=field,
        )
    return tag


def validate_digest(
    digest: Any, *, field: str = "digest", error: type[ImagebumpError] = InvalidEventError
) -> str:
    """Return ``digest`` if it is ``sha256:`` followed by 64 lowercase hex digits, else raise ``error``."""
    if not isinstance(digest, str):
        raise error(f"{field} must be a string, got {_type_name(digest)}", reason="wrong-type", field=field)
    if not digest.isascii() or not DIGEST_RE.fullmatch(digest):
        raise error(
            f"invalid {field} {digest!r}: not a valid image digest: expected 'sha256:' and 64 lowercase "
            "hex digits",
            reason="invalid-digest",
            field=field,
        )
    return digest


def validate_account(account: Any, *, field: str = "account") -> str:
    """Return ``account`` if it is a 12-digit AWS account id."""
    if not isinstance(account, str):
        raise InvalidEventError(f"{field} must be a string, got {_type_name(account)}", reason="wrong-type")
    if not account.isascii() or not _ACCOUNT_RE.fullmatch(account):
        raise InvalidEventError(
            f"{field} {account!r} is not an AWS account id (12 digits)", reason="invalid-account"
        )
    return account


def validate_region(region: Any, *, field: str = "region") -> str:
    """Return ``region`` if it looks like an AWS region name (``us-west-2``)."""
    if not isinstance(region, str):
        raise InvalidEventError(f"{field} must be a string, got {_type_name(region)}", reason="wrong-type")
    if not region.isascii() or not _REGION_RE.fullmatch(region):
        raise InvalidEventError(
            f"{field} {region!r} is not an AWS region name (like us-west-2)", reason="invalid-region"
        )
    return region


def parse_repository_uri(uri: str) -> tuple[str, str, str]:
    """``ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO`` → ``(account, region, repo)`` (no tag allowed)."""
    if not isinstance(uri, str):
        raise InvalidEventError(
            f"repository URI must be a string, got {_type_name(uri)}", reason="wrong-type"
        )
    host, sep, repository = uri.partition("/")
    m = _REGISTRY_RE.fullmatch(host) if host.isascii() else None
    if not sep or not m:
        raise InvalidEventError(
            f"{uri!r} is not an ECR repository URI: expected ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPOSITORY",
            reason="not-ecr-reference",
        )
    if ":" in repository or "@" in repository:
        raise InvalidEventError(
            f"{uri!r} is a repository URI and must not carry a tag or digest", reason="has-version"
        )
    return (
        m["account"],
        validate_region(m["region"], field=f"region in {uri!r}"),
        validate_repository_name(repository, field="repository"),
    )


def parse_image_reference(ref: str) -> Image:
    """Parse ``ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:TAG][@sha256:DIGEST]`` into an Image.

    At least a tag or a digest is required. Surrounding whitespace is ignored.

    Raises:
        InvalidEventError: the reference is not an ECR image reference, naming the part at fault.
    """
    if not isinstance(ref, str):
        raise InvalidEventError(
            f"image reference must be a string, got {_type_name(ref)}", reason="wrong-type"
        )
    text = ref.strip()
    if not text:
        raise InvalidEventError(
            "image reference is empty: give ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:TAG][@sha256:DIGEST]",
            reason="empty",
        )
    name, at, digest = text.partition("@")
    tag: str | None = None
    slash = name.find("/")
    colon = name.rfind(":")
    if colon > slash >= 0:
        name, tag = name[:colon], name[colon + 1 :]
    host = name.partition("/")[0]
    if "/" not in name or not (host.isascii() and _REGISTRY_RE.fullmatch(host)):
        raise InvalidEventError(
            f"{text!r} is not an ECR image reference: expected "
            "ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:TAG][@sha256:DIGEST]",
            reason="not-ecr-reference",
        )
    account, region, repository = parse_repository_uri(name)
    if tag is not None:
        validate_tag(tag, field="tag")
    if at:
        validate_digest(digest, field="digest")
    if tag is None and not at:
        raise InvalidEventError(
            f"image reference {text!r} has neither a tag nor a digest: add :TAG or @sha256:DIGEST",
            reason="no-version",
        )
    return Image(account=account, region=region, repository=repository, tag=tag, digest=digest or None)


def _decode(body: str | bytes | dict) -> dict:
    if isinstance(body, dict):
        return body
    if isinstance(body, (bytes, bytearray)):
        raw = bytes(body)
        if len(raw) > MAX_BODY_BYTES:
            raise InvalidEventError(
                f"event body is {len(raw)} bytes, over the {MAX_BODY_BYTES}-byte limit", reason="too-large"
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidEventError(
                f"event body is not UTF-8 text: {exc.reason} at byte {exc.start}", reason="not-text"
            ) from None
    elif isinstance(body, str):
        text = body
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_BODY_BYTES:
            raise InvalidEventError(
                f"event body is {size} bytes, over the {MAX_BODY_BYTES}-byte limit", reason="too-large"
            )
    else:
        raise InvalidEventError(
            f"event body must be text, bytes or an object, got {type(body).__name__}", reason="wrong-type"
        )
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise InvalidEventError(
            "event body is empty: expected the EventBridge event as a JSON object", reason="empty"
        )
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        detail = (
            f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else "nested too deeply"
        )
        raise InvalidEventError(f"event body is not JSON: {detail}", reason="not-json") from None
    if not isinstance(value, dict):
        raise InvalidEventError(
            f"event body must be a JSON object (the EventBridge event), got {_type_name(value)}",
            reason="wrong-type",
        )
    return value


def _field(obj: dict, key: str, path: str, kind: type | tuple[type, ...], *, required: bool = True) -> Any:
    if key not in obj or (obj[key] is None and not required):
        if required:
            raise InvalidEventError(f"event field {path!r} is missing", reason="missing", field=path)
        return None
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        want = {str: "a string", dict: "an object"}.get(kind, getattr(kind, "__name__", str(kind)))  # type: ignore[call-overload]
        raise InvalidEventError(
            f"event field {path!r} must be {want}, got {_type_name(value)}", reason="wrong-type", field=path
        )
    return value


def _parse_time(value: str, path: str) -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidEventError(
            f"event field {path!r} is not an ISO 8601 time: {value!r}", reason="invalid-time", field=path
        ) from None


def parse_event(body: str | bytes | dict) -> Image | Skip:
    """Parse an SQS body (the raw EventBridge event) into an Image, or a Skip with a reason.

    ``account`` may be missing (moto's EventBridge omits it): the Image then has ``account=""``
    and resolve-image fills it from ECR. A push without ``image-tag`` is a digest-only push.
    ``pushed_at`` is the event's ``time``; resolve-image replaces it with ECR's push time.

    Raises:
        InvalidEventError: the body is too big, not JSON, or a field is missing or of the wrong type.
    """
    event = _decode(body)
    event_id = event.get("id") if isinstance(event.get("id"), str) else None
    if "id" in event and event["id"] is not None and event_id is None:
        raise InvalidEventError(
            f"event field 'id' must be a string, got {_type_name(event['id'])}",
            reason="wrong-type",
            field="id",
        )
    source = _field(event, "source", "source", str)
    detail_type = _field(event, "detail-type", "detail-type", str)
    if source != PUSH_SOURCE:
        return Skip(
            reason=f"event source is {source!r}, not {PUSH_SOURCE!r}: not an ECR event", event_id=event_id
        )
    if detail_type != PUSH_DETAIL_TYPE:
        return Skip(
            reason=f"event detail-type is {detail_type!r}, not {PUSH_DETAIL_TYPE!r}: not an image push",
            event_id=event_id,
        )
    detail = _field(event, "detail", "detail", dict)
    action = _field(detail, "action-type", "detail.action-type", str)
    if action != "PUSH":
        return Skip(reason=f"ECR image action {action!r} is not a push", event_id=event_id)
    result = _field(detail, "result", "detail.result", str)
    if result != "SUCCESS":
        return Skip(reason=f"ECR push result is {result!r}, not 'SUCCESS'", event_id=event_id)

    repository = validate_repository_name(
        _field(detail, "repository-name", "detail.repository-name", str),
        field="event field 'detail.repository-name'",
    )
    tag = _field(detail, "image-tag", "detail.image-tag", str, required=False)
    if tag is not None:
        validate_tag(tag, field="event field 'detail.image-tag'")
    digest = _field(detail, "image-digest", "detail.image-digest", str, required=tag is None)
    if digest is not None:
        validate_digest(digest, field="event field 'detail.image-digest'")
    region = validate_region(_field(event, "region", "region", str), field="event field 'region'")
    account = _field(event, "account", "account", str, required=False)
    account = validate_account(account, field="event field 'account'") if account is not None else ""
    time = _field(event, "time", "time", str, required=False)
    pushed_at = _parse_time(time, "time") if time is not None else None
    return Image(
        account=account,
        region=region,
        repository=repository,
        tag=tag,
        digest=digest,
        pushed_at=pushed_at,
        event_id=event_id,
    )

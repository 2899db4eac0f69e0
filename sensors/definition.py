r"""The ONE definition of what the Sensor accepts, how it names Workflows and what it passes.

Both intakes read this module: :mod:`sensors.argo` renders it into the Argo Events Sensor, and
the local sensor (:mod:`sensors.local`) applies it in Python, so cluster and laptop cannot drift.

Argo Events semantics reproduced here:

- The SQS EventSource with ``jsonBody: true`` wraps the message as ``{"body": <event>, ...}``,
  so Sensor paths start with ``body.``. Python functions take the EventBridge event itself
  (the SQS message body) and strip that prefix.
- A data filter of type ``string`` matches when ANY of its regular expressions is found in
  the value (Go ``regexp.Match``: unanchored — hence ``^...$``); all filters must pass
  (``dataLogicalOperator: and``); a missing field fails the filter. The value is
  ``gjson.GetBytes(data, path).String()`` (argo-events ``pkg/sensors/dependencies/filter.go``,
  ``filterData``): the FIRST of duplicate keys, strings unescaped as gjson does, ``null`` as ``""``.
  The expressions are Go's: without the ``m`` flag ``$`` means end of text (Python's ``\Z``), so
  ``"PUSH\n"`` does not match ``^PUSH$`` — :func:`accepts` translates them (:func:`_go_regex`).
- The Workflow name is the Go/sprig template :data:`NAME_TEMPLATE`; :func:`workflow_name` is
  the same computation in Python (tested against hand-computed SHA-256 values). The template runs
  over ``gjson.ParseBytes(data).Value()`` (argo-events ``pkg/sensors/triggers/params.go``,
  ``getValueWithTemplate``): gjson's unescape turns every invalid UTF-16 surrogate escape
  (``"\ud800"``, and a high surrogate followed by any other ``\u`` escape, which it swallows) into
  U+FFFD (tidwall/gjson ``gjson.go``, ``unescape``), the LAST of duplicate keys wins, numbers are
  float64 and non-string values print as Go's ``%s`` prints them. Pass the SQS body (``str``) to
  compute names and filters exactly as the cluster does; a parsed ``dict`` is treated the same way
  as far as a dict allows (lone surrogates become U+FFFD).
"""

from __future__ import annotations

import functools
import hashlib
import json
import json.decoder
import json.scanner
import re
from decimal import Decimal
from typing import Any

from steps.domain.regex_tokens import regex_tokens
from workflows import names

#: Prefix the SQS EventSource puts before the message body in the event's data.
BODY = "body"

#: Sensor data filters: gjson path in the event data → anchored regular expression.
FILTERS: dict[str, str] = {
    "body.source": r"^aws\.ecr$",
    "body.detail-type": r"^ECR Image Action$",
    "body.detail.action-type": r"^PUSH$",
    "body.detail.result": r"^SUCCESS$",
}

#: Workflow parameter → gjson path (dataKey) it is taken from. ``body`` is the raw event JSON.
PARAMETERS: dict[str, str] = {"event": "body"}

#: The WorkflowTemplate a Sensor trigger submits.
WORKFLOW_TEMPLATE = names.IMAGE_UPDATE
NAME_PREFIX = f"{WORKFLOW_TEMPLATE}-"
NAME_HASH_LENGTH = 16

#: Go template + sprig over ``.Input`` (the event data). Hyphenated keys need ``index``; a
#: missing key yields nil, which ``default ""`` turns into the empty string (a digest-only
#: push has no ``image-tag``). sha256sum hashes the UTF-8 bytes and prints lowercase hex.
#: The registry's account and region are part of the image: one queue fed by two registries
#: (cross-account or cross-region forwarding, replication) holds pushes of the same repository,
#: tag and digest that are different images, each with its own Workflow.
NAME_TEMPLATE = (
    NAME_PREFIX
    + '{{ printf "%s|%s|%s|%s|%s"'
    + ' (index .Input.body.detail "repository-name" | default "")'
    + ' (index .Input.body.detail "image-tag" | default "")'
    + ' (index .Input.body.detail "image-digest" | default "")'
    + ' (index .Input.body "account" | default "")'
    + ' (index .Input.body "region" | default "")'
    + f" | sha256sum | trunc {NAME_HASH_LENGTH} }}}}"
)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


# --- the event as gjson reads it -------------------------------------------------------------------

_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_STRING_BODY = re.compile(r'((?:[^"\\]|\\.)*)"', re.DOTALL)
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _rune(text: str) -> int:
    """gjson ``runeit``: four hex digits (``strconv.ParseUint``; 0 when they are not hex)."""
    return int(text, 16) if _HEX4.fullmatch(text) else 0


def _gjson_unescape(raw: str) -> str:
    """The body of a JSON string as gjson's ``unescape`` decodes it (tidwall/gjson gjson.go).

    A ``\\uXXXX`` surrogate always consumes a following ``\\uXXXX`` escape; an invalid pair or a
    lone surrogate becomes U+FFFD (Go's ``utf16.DecodeRune`` / ``utf8.EncodeRune``), where Python's
    json keeps the lone surrogate (which cannot even be encoded as UTF-8).
    """
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c != "\\":
            out.append("\ufffd" if _SURROGATE.match(c) else c)
            i += 1
            continue
        i += 1
        if i >= n:
            break
        e = raw[i]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            i += 1
            continue
        if e != "u" or i + 5 > n:
            break  # gjson stops at what it cannot unescape
        r = _rune(raw[i + 1 : i + 5])
        i += 5
        if 0xD800 <= r <= 0xDFFF and n - i >= 6 and raw[i] == "\\" and raw[i + 1] == "u":
            r2 = _rune(raw[i + 2 : i + 6])
            i += 6
            r = (
                0x10000 + ((r - 0xD800) << 10) + (r2 - 0xDC00)
                if (0xD800 <= r < 0xDC00 and 0xDC00 <= r2 < 0xE000)
                else 0xFFFD
            )
        out.append("\ufffd" if 0xD800 <= r <= 0xDFFF else chr(r))
    return "".join(out)


def _gjson_scanstring(s: str, end: int, strict: bool = True) -> tuple[str, int]:
    """``json.decoder.scanstring`` with gjson's unescaping (the body is valid JSON already)."""
    m = _STRING_BODY.match(s, end)
    if m is None:
        raise json.JSONDecodeError("Unterminated string starting at", s, end - 1)
    return _gjson_unescape(m.group(1)), m.end()


def _gjson_decoder(first_key_wins: bool) -> json.JSONDecoder:
    hook = (lambda pairs: dict(reversed(pairs))) if first_key_wins else None
    decoder = json.JSONDecoder(object_pairs_hook=hook)
    decoder.parse_string = _gjson_scanstring  # string values; keys stay as json decodes them
    decoder.scan_once = json.scanner.py_make_scanner(decoder)
    return decoder


def gjson_loads(body: str, *, first_key_wins: bool = False) -> Any:
    """The SQS body as gjson gives it to the Sensor.

    ``first_key_wins=False``: ``ParseBytes(data).Value()``, what the name template sees (the last
    of duplicate keys). ``True``: what ``GetBytes(data, path)`` finds, what filters see.
    """
    return _gjson_decoder(first_key_wins).decode(body)


def _sanitise(value: Any) -> Any:
    """A parsed event's strings with lone surrogates as U+FFFD (what gjson makes of them)."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_sanitise(k): _sanitise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_sanitise(v) for v in value]
    return value


def _event(event: dict[str, Any] | str, *, first_key_wins: bool = False) -> Any:
    if isinstance(event, str):
        try:
            return gjson_loads(event, first_key_wins=first_key_wins)
        except RecursionError:  # nesting deeper than the pure-Python scanner goes: json's own parser
            return _sanitise(json.loads(event))
    return _sanitise(event)


# --- Go semantics for filter values and the name template --------------------------------------------


def _digits(value: float) -> tuple[str, int]:
    """Shortest round-trip decimal digits of ``value`` (no sign) and the decimal point position."""
    sign, digits, exponent = Decimal(repr(abs(value))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    exponent += len(digits) - len(text)
    return text, len(text) + int(exponent)


def _go_float_f(value: float) -> str:
    """``strconv.FormatFloat(v, 'f', -1, 64)``."""
    if value == 0:
        return "-0" if str(value).startswith("-") else "0"
    digits, point = _digits(value)
    if point <= 0:
        text = "0." + "0" * -point + digits
    elif point >= len(digits):
        text = digits + "0" * (point - len(digits))
    else:
        text = digits[:point] + "." + digits[point:]
    return ("-" if value < 0 else "") + text


def _go_float_v(value: float) -> str:
    """``fmt``'s ``%v`` of a float64: ``strconv.FormatFloat(v, 'g', -1, 64)``."""
    if value == 0:
        return "-0" if str(value).startswith("-") else "0"
    digits, point = _digits(value)
    exp = point - 1
    if exp < -4 or exp >= 6:  # shortest: Go decides with precision 6
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{'-' if value < 0 else ''}{mantissa}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    return _go_float_f(value)


def _go_s(value: Any) -> str:
    """``fmt.Sprintf("%s", v)`` of a value of gjson's ``Value()`` (string, float64, bool, nil, map, slice)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "%!s(<nil>)"
    if isinstance(value, bool):
        return f"%!s(bool={'true' if value else 'false'})"
    if isinstance(value, (int, float)):
        return f"%!s(float64={_go_float_v(float(value))})"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_s(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_s(v) for v in value) + "]"
    return str(value)


def _sprig_empty(value: Any) -> bool:
    """sprig's ``empty`` (what ``default`` tests): nil, "", 0, false, empty map or list."""
    if isinstance(value, (str, dict, list)):
        return not value
    return value is None or value is False or value == 0


def _gjson_string(value: Any) -> str:
    """``gjson.Result.String()`` of a found value, as a filter compares it."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float_f(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)  # gjson: the raw JSON text


@functools.lru_cache(maxsize=64)
def _go_regex(pattern: str) -> re.Pattern[str]:
    """A Go (RE2) expression as a Python one with the same meaning where our filters need it.

    Go without the ``m`` flag: ``$`` and ``\\z`` match only at the end of the text, where Python's
    ``$`` also matches before a final newline — so both become ``\\Z``. ``\\d``, ``\\w``, ``\\s``
    and ``\\b`` are ASCII in Go (``re.ASCII``). Matching stays unanchored (``search``).
    """
    out: list[str] = []
    for kind, start, end in regex_tokens(pattern):
        piece = pattern[start:end]
        if kind == "escape":
            out.append(r"\Z" if piece == r"\z" else piece)
        elif kind == "class":
            out.append(piece)
        elif piece == "(" and re.match(r"\(\?[a-zA-Z-]*m", pattern[start:]):
            raise ValueError(f"filter {pattern!r}: the m flag is not supported by the local sensor")
        else:
            out.append(r"\Z" if piece == "$" else piece)
    return re.compile("".join(out), re.ASCII)


def _lookup(event: dict[str, Any], path: str) -> tuple[bool, Any]:
    """Follow a ``body.``-prefixed dotted path (no gjson wildcards are used) into ``event``."""
    parts = path.split(".")
    if parts[0] == BODY:
        parts = parts[1:]
    node: Any = event
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def accepts(event: dict[str, Any] | str) -> tuple[bool, str]:
    """Would the Sensor trigger for this EventBridge event? Returns (accepted, reason).

    ``event`` is the SQS body (``str``, read as gjson reads it) or the parsed event. ``reason``
    names the first filter that failed, with the value seen, or is ``"accepted"``.
    """
    if isinstance(event, str):
        event = _event(event, first_key_wins=True)
    if not isinstance(event, dict):
        return False, f"event is not a JSON object (got {type(event).__name__})"
    for path, pattern in FILTERS.items():
        found, value = _lookup(event, path)
        if not found:
            return False, f"{path} is missing (want {pattern})"
        text = _gjson_string(value)
        if not _go_regex(pattern).search(text):
            return False, f"{path} is {text!r} (want {pattern})"
    return True, "accepted"


def _field(event: dict[str, Any], key: str, *, top: bool = False) -> str:
    """``index .Input.body.detail KEY | default ""`` (``top``: ``index .Input.body KEY``), printed
    by ``printf "%s"``."""
    holder = event if top else event.get("detail")
    value = holder.get(key) if isinstance(holder, dict) else None
    return "" if _sprig_empty(value) else _go_s(value)


def name_key(event: dict[str, Any] | str) -> str:
    """The string :data:`NAME_TEMPLATE` hashes: ``repository|tag|digest|account|region`` (see
    :func:`workflow_name`)."""
    event = _event(event)
    if not isinstance(event, dict):
        return "||||"
    image = [_field(event, k) for k in ("repository-name", "image-tag", "image-digest")]
    return "|".join(image + [_field(event, k, top=True) for k in ("account", "region")])


def workflow_name(event: dict[str, Any] | str) -> str:
    """The Workflow name the Sensor gives this event: deterministic and DNS-1123 valid.

    The same image (repository, tag, digest, in one registry: account and region) always gets the
    same name, so the API server refuses a second Workflow for a duplicate delivery. ``event`` is the SQS body (``str``: the
    name is then exactly the cluster's, whatever the body holds) or the parsed event.
    """
    digest = hashlib.sha256(name_key(event).encode("utf-8")).hexdigest()
    name = NAME_PREFIX + digest[:NAME_HASH_LENGTH]
    assert _DNS_LABEL.match(name) and len(name) <= 63, name
    return name


def workflow_arguments(body: str) -> dict[str, str]:
    """The Workflow's arguments for an SQS message body: the raw event as ``event``."""
    return {"event": body}

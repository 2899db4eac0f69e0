"""What Helm reads a plain (unquoted) YAML scalar as: the oracle of the values tests.

Helm reads values files with sigs.k8s.io/yaml, whose YAML-to-JSON step decodes with its go-yaml v2
fork; a plain scalar is typed by go-yaml v2's ``resolve`` (gopkg.in/yaml.v2 resolve.go, v2.4):

* the table: ``~ null Null NULL`` and the empty scalar are null; ``y Y yes Yes YES on On ON true
  True TRUE`` and ``n N no No NO off Off OFF false False FALSE`` booleans; ``.inf .Inf .INF``
  (signed) and ``.nan .NaN .NAN`` floats; ``<<`` the merge key;
* a scalar starting with ``.``: a float if ``strconv.ParseFloat`` reads it;
* a scalar starting with a digit, ``+`` or ``-``: a timestamp if ``parseTimestamp`` reads it (four
  digits, ``-``, then one of ``2006-1-2T15:4:5.999999999Z07:00``, ``2006-1-2t15:4:5.999999999Z07:00``,
  ``2006-1-2 15:4:5.999999999``, ``2006-1-2``); else, every ``_`` dropped, an int if
  ``strconv.ParseInt(s, 0, 64)`` (or ``ParseUint``) reads it (Go's base-0 syntax: ``0x``, ``0o``,
  ``0b`` prefixes, a leading ``0`` octal); else a float if it matches ``yamlStyleFloat`` and
  ``ParseFloat`` reads it; else an int if it is ``0b``/``-0b`` binary;
* anything else: a string.

Only the answer "a string, the same text" matters here: anything else deploys another tag (``1.10``
renders ``1.1``). Written from go-yaml v2's documented behaviour; no upstream code.
"""

from __future__ import annotations

import re
from datetime import datetime

_TABLE = {
    "~", "null", "Null", "NULL", "",
    "y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE",
    "n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE",
    ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF",
    ".nan", ".NaN", ".NAN", "<<",
}  # fmt: skip
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# Go's integer literal syntax for strconv.ParseInt(s, 0, 64) (underscores already dropped)
_GO_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")  # what Go's ParseFloat reads from a leading dot
_BINARY = re.compile(r"-?0b[01]+")
_TIMESTAMP = re.compile(
    r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
    r"(?:(?:[Tt]|[ ])[0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(?:\.[0-9]{1,9})?(?:Z|[-+][0-9]{2}:[0-9]{2})?)?"
)


def _go_int(plain: str) -> bool:
    if not _GO_INT.fullmatch(plain):
        return False
    digits = plain.lstrip("+-")
    base = {"x": 16, "o": 8, "b": 2}.get(
        digits[1:2].lower(), 8 if digits.startswith("0") and len(digits) > 1 else 10
    )
    body = digits[2:] if base in (16, 2) or digits[1:2].lower() == "o" else digits
    value = int(body or "0", base) * (-1 if plain.startswith("-") else 1)
    return -(2**63) <= value < 2**64  # ParseInt, else ParseUint


def _timestamp(text: str) -> bool:
    if not _TIMESTAMP.fullmatch(text):
        return False
    y, m, d = (int(p) for p in re.split(r"[-Tt ]", text)[:3])
    try:
        datetime(y, m, d)
    except ValueError:
        return False
    return True


def helm_reads_as_text(plain: str) -> bool:
    """Whether Helm reads the plain scalar ``plain`` as the string ``plain`` (go-yaml v2)."""
    if plain in _TABLE:
        return False
    if plain[:1] == ".":
        return not _DOT_FLOAT.fullmatch(plain)
    if plain[:1] in "+-0123456789":
        bare = plain.replace("_", "")
        if _timestamp(plain) or _go_int(bare) or _FLOAT.fullmatch(bare) or _BINARY.fullmatch(bare):
            return False
    return True

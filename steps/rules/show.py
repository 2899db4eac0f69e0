"""Showing user values in messages: bounded excerpts, URL secrets redacted, YAML kinds named.

URLs are masked by :func:`steps.runtime.redact.redact_url` (the one home of redaction).

Aliases in YAML share objects, so a 591-byte file can hold a list whose plain ``repr`` is
gigabytes: every message of the rules package shows a value only through :func:`excerpt`, which
never walks more than a few items.
"""

from __future__ import annotations

import reprlib
from typing import Any

from steps.runtime.redact import redact_url

#: Bounded repr: at most a few items per level, two levels, short strings.
_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 80
EXCERPT_LEN = 120


def excerpt(value: Any, *, secret_urls: bool = False) -> str:
    """A short, bounded repr of ``value`` for a message (never the whole of a large value)."""
    shown = _REPR.repr(value)
    if secret_urls:
        shown = redact_url(shown)
    if len(shown) > EXCERPT_LEN:
        shown = shown[: EXCERPT_LEN - 3] + "..."
    return shown


def shown(value: Any, name: str) -> str:
    """``value`` as a message about field ``name`` may show it (``githubRepository``: redacted)."""
    return excerpt(value, secret_urls=name.startswith("githubRepository"))


def key_shown(key: Any) -> str:
    """A mapping key as a message names it: as written when short, else a bounded excerpt."""
    return key if isinstance(key, str) and len(key) <= 60 else excerpt(key)


def kind(value: Any) -> str:
    """What YAML wrote, in YAML's words: ``null``, ``boolean``, ``number``, ``mapping``, ``list``…"""
    if value is None:
        return "null"
    return {
        bool: "boolean",
        int: "number",
        float: "number",
        dict: "mapping",
        list: "list",
        str: "string",
    }.get(type(value), type(value).__name__)

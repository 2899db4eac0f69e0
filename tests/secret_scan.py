"""A suite-wide scan for secrets in what tests capture (issue 8, item 4).

Fixtures that mint a secret (the git token, GitHub fake tokens) call :func:`register`. After every
test phase, ``tests/conftest.py`` hands the report's captured stdout, stderr and log records (DEBUG
and up, see ``log_level`` in pyproject) and its exception text to :func:`find_leaks`; a hit turns
the test into a failure that names where the secret appeared (never the secret itself).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable

#: Everything that must never be printed: tokens and the forms git/HTTP would carry them in.
SECRETS: set[str] = set()

_USERS = ("x-access-token", "imagebump", "git", "")


def register(secret: str) -> str:
    """Remember ``secret`` and its HTTP Basic forms; return it (for use in fixtures)."""
    SECRETS.add(secret)
    for user in _USERS:
        SECRETS.add(base64.b64encode(f"{user}:{secret}".encode()).decode())
    return secret


def find_leaks(sections: Iterable[tuple[str, str]], secrets: Iterable[str] = SECRETS) -> list[str]:
    """Names of the ``(name, text)`` sections that contain any of ``secrets``."""
    wanted = [s for s in secrets if s]
    return [name for name, text in sections if text and any(s in text for s in wanted)]


def redact(text: str, secrets: Iterable[str] = SECRETS) -> str:
    """``text`` with every one of ``secrets`` replaced by ``***`` (longest first)."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text

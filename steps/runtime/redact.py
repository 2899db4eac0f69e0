"""The one redaction of imagebump: no secret reaches a log record, an output or an error text.

Two sources of secrets:

- *registered* secrets (:func:`register_secret`): every token the process holds — the git tokens
  from the environment (``steps.runtime.harness`` registers them when a step starts), each
  :class:`steps.git.auth.GitAuth`, GitHub tokens — with their base64 and HTTP Basic
  (``user:secret``) forms;
- secret-*shaped* text: ``Authorization`` header values, passwords in URLs, ``access_token=``-style
  query values, GitHub token shapes and PEM private keys.

:func:`redact` replaces both with ``***``. ``shapes=False`` keeps to the credential shapes that
can occur in git's output (the header and URL passwords): git's stdout carries repository file
content that callers parse, and must not be rewritten beyond the credentials.
:func:`mask_secrets` replaces only given secrets (with their encoded forms) and no shapes: for text
whose structure must survive, as the local executor's JSON log lines (:mod:`workflows.local.logs`).
:func:`redact_url` masks everything secret-like in a URL a user wrote (credentials, query values,
fragment): the rules' messages show ``githubRepository`` through it.

Imports only the standard library; everything in ``steps`` (and the local runtime) may import it.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Iterable

REDACTED = "***"
#: The user names a token is paired with in HTTP Basic auth by the hosts imagebump talks to.
BASIC_USERS = ("x-access-token", "imagebump", "git", "oauth2")

_SECRETS: set[str] = set()

_CREDENTIALS = [
    (re.compile(r"(?i)(authorization:\s*\w+\s+)\S+"), rf"\1{REDACTED}"),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@"), rf"\1{REDACTED}@"),
]
_SHAPES = [
    (
        re.compile(r"(?i)([?&](?:access_token|private_token|token|password|secret|sig|signature)=)[^&\s#]+"),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), REDACTED),
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL
        ),
        REDACTED,
    ),
]


def secret_forms(secret: str, basic_users: Iterable[str] = BASIC_USERS) -> list[str]:
    """``secret`` and every encoding of it that may show up in text, longest first.

    Raw, base64 (padded and not), and base64 of ``user:secret`` for each of ``basic_users``.
    A secret under 4 characters yields nothing (replacing it would mangle ordinary text).
    """
    return list(_forms(secret or "", tuple(basic_users)))


@functools.lru_cache(maxsize=64)
def _forms(secret: str, basic_users: tuple[str, ...]) -> tuple[str, ...]:
    """:func:`secret_forms`, computed once per secret: every git command's output and arguments
    are redacted with the clone's token (a dozen base64 encodings each time otherwise)."""
    secret = secret.strip()
    if len(secret) < 4:
        return ()
    forms = {secret}
    for raw in (secret, *(f"{user}:{secret}" for user in basic_users)):
        encoded = base64.b64encode(raw.encode()).decode()
        forms.update({encoded, encoded.rstrip("=")})
    return tuple(sorted(forms, key=len, reverse=True))


def register_secret(secret: str, *, basic_users: Iterable[str] = BASIC_USERS) -> None:
    """Never show ``secret`` (nor its base64 and HTTP Basic forms) in any redacted text again."""
    _SECRETS.update(secret_forms(secret, basic_users))


def redact(text: str, secrets: Iterable[str | None] = (), *, shapes: bool = True) -> str:
    """``text`` with registered secrets, ``secrets`` and secret-shaped values replaced by ``***``.

    Args:
        text: any text (a message, a log record, a command's output).
        secrets: more secrets to remove (with their encoded forms) besides the registered ones.
        shapes: also mask query tokens, GitHub token shapes and PEM keys (not only headers and
            URL passwords). False for git's output, which carries file content callers parse.
    """
    if not text:
        return text
    text = _replace(text, _SECRETS.union(*(secret_forms(secret or "") for secret in secrets)))
    for pattern, replacement in _CREDENTIALS + (_SHAPES if shapes else []):
        text = pattern.sub(replacement, text)
    return text


def mask_secrets(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with each of ``secrets`` and its base64 and HTTP Basic forms replaced by ``***``.

    Nothing else is touched (no registered secrets, no secret-shaped patterns), so text with a
    structure of its own (a JSON line, whose ``"`` a header pattern could swallow) keeps it.
    """
    if not text:
        return text
    return _replace(text, set().union(*(secret_forms(secret or "") for secret in secrets)))


def _replace(text: str, forms: set[str]) -> str:
    for form in sorted(forms, key=len, reverse=True):
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def redact_url(text: str) -> str:
    """``text`` with URL credentials (``user:pass@``, ``token@``), query values and fragments as ``***``.

    ``git@`` (SSH's conventional user, not a secret) is kept. Stricter than :func:`redact`'s URL
    rule: a URL a user wrote in a rules file is shown back to them, so any query value is masked.
    """
    text = re.sub(r"(?i)\b([a-z][a-z0-9+.-]*://)(?!git@)[^/@?#\s'\"]*@", r"\1***@", text)
    text = re.sub(r"([?&;][^=&;#\s'\"]*=)[^&;#\s'\"]*", r"\1***", text)  # ?access_token=… → …=***
    text = re.sub(r"\?(?![^&;#\s'\"]*=)[^&;#\s'\"]+", "?***", text)  # ?ghp_… (a bare value)
    return re.sub(r"#[^\s'\"]*", "#***", text)

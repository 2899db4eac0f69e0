"""The one home for reading settings and secrets from a step's environment.

A setting is ``$NAME``; a secret is ``$NAME`` or the contents of the file ``$NAME_FILE`` (what a
mounted Kubernetes Secret gives). :func:`read_secret` is the only reader of ``*_FILE`` variables;
its errors name the variable and the fix. Every secret read here is registered with
:mod:`steps.redact` so no log record or message can show it.

Callers choose what an absent or empty file means: a mounted *optional* Secret that does not
exist is an empty directory, so for the read token an absent file means "no token" while for the
write token it is an error.

Step settings models live next to their step's reader (``steps.commit_settings`` for commit-pr).
Imports only :mod:`steps.errors` and :mod:`steps.redact`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from steps.errors import ConfigError
from steps.redact import register_secret

#: The most a secret file may hold (a token, a PEM key): a bigger one is a wrong mount.
MAX_SECRET_BYTES = 64 * 1024


def setting(name: str, default: str = "", env: Mapping[str, str] | None = None) -> str:
    """``$NAME`` stripped, or ``default`` when unset or blank."""
    env = os.environ if env is None else env
    return (env.get(name) or "").strip() or default


def read_secret(
    name: str,
    env: Mapping[str, str] | None = None,
    *,
    label: str = "the secret file",
    absent_file_is_unset: bool = False,
    empty_file_is_error: bool = False,
    fix: str = "mount the secret there or fix the variable",
) -> str | None:
    """``$NAME``, else the contents of the file ``$NAME_FILE`` (stripped); None when neither is set.

    Args:
        name: the variable, e.g. ``IMAGEBUMP_GIT_TOKEN``.
        env: the environment (default ``os.environ``).
        label: what the file is, for messages ("the git token file").
        absent_file_is_unset: a ``$NAME_FILE`` that does not exist means "not set" (an optional
            Secret that is not there) instead of an error.
        empty_file_is_error: an empty file is a :class:`ConfigError` instead of "not set".
        fix: how to fix an unreadable file, appended to the message.

    Raises:
        ConfigError: the file cannot be read (or is empty, with ``empty_file_is_error``); the
            message names ``$NAME_FILE``, the path and ``fix``, never the contents.
    """
    env = os.environ if env is None else env
    value = (env.get(name) or "").strip()
    if value:
        register_secret(value)
        return value
    path = (env.get(f"{name}_FILE") or "").strip()
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SECRET_BYTES + 1)
    except FileNotFoundError:
        if absent_file_is_unset:
            return None
        raise ConfigError(f"cannot read {label} {path} ({name}_FILE): it does not exist; {fix}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {label} {path} ({name}_FILE): {exc.strerror}; {fix}") from None
    if len(raw) > MAX_SECRET_BYTES:
        raise ConfigError(f"{label} {path} ({name}_FILE) is larger than {MAX_SECRET_BYTES} bytes; {fix}")
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigError(f"{label} {path} ({name}_FILE) is not UTF-8 text; {fix}") from None
    if not text:
        if empty_file_is_error:
            raise ConfigError(f"{label} {path} ({name}_FILE) is empty")
        return None
    register_secret(text)
    return text


def register_secrets_from_environment(names: tuple[str, ...], env: Mapping[str, str] | None = None) -> None:
    """Register ``$NAME`` and the contents of ``$NAME_FILE`` of each name, quietly (best effort).

    For the log redaction set up when a step starts: an absent or unreadable file is not an error
    here (the step reports it if it needs the secret).
    """
    env = os.environ if env is None else env
    for name in names:
        register_secret(env.get(name) or "")
        path = (env.get(f"{name}_FILE") or "").strip()
        if path:
            try:
                register_secret(Path(path).read_bytes()[:4096].decode("utf-8"))
            except (OSError, UnicodeDecodeError):
                pass

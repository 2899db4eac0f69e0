"""The one home for reading settings and secrets from a step's environment.

A setting is ``$NAME``; a secret is ``$NAME`` or the contents of the file ``$NAME_FILE`` (what a
mounted Kubernetes Secret gives). :func:`read_secret` and, for a secret that only ever comes as a
file (a GitHub App's private key), :func:`read_secret_file` are the only readers of secret files;
their errors name the variable and the fix. Every secret read here is registered with
:mod:`steps.runtime.redact` so no log record or message can show it.

Callers choose what an absent or empty file means: a mounted *optional* Secret that does not
exist is an empty directory, so for the read token an absent file means "no token" while for the
write token it is an error.

The plain settings several steps read live here too (the rules file, the commit identity); a
step's own typed settings model lives with the step (:mod:`steps.commit_pr.settings`,
:mod:`steps.argocd_backup.settings`). Imports only :mod:`steps.domain.errors` and
:mod:`steps.runtime.redact`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from steps.domain.errors import ConfigError
from steps.runtime.redact import register_secret

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
    return read_secret_file(
        f"{name}_FILE",
        env,
        label=label,
        absent_file_is_unset=absent_file_is_unset,
        empty_file_is_error=empty_file_is_error,
        fix=fix,
    )


def read_secret_file(
    variable: str,
    env: Mapping[str, str] | None = None,
    *,
    label: str = "the secret file",
    absent_file_is_unset: bool = False,
    empty_file_is_error: bool = False,
    fix: str = "mount the secret there or fix the variable",
) -> str | None:
    """The contents of the file ``$VARIABLE`` names (stripped, registered as a secret); None when
    the variable is not set. For secrets that only ever come as a file (a GitHub App's private key);
    :func:`read_secret` reads ``$NAME`` or ``$NAME_FILE`` through it. Same arguments and errors."""
    env = os.environ if env is None else env
    path = (env.get(variable) or "").strip()
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SECRET_BYTES + 1)
    except FileNotFoundError:
        if absent_file_is_unset:
            return None
        raise ConfigError(
            f"cannot read {label} {path} ({variable}): it does not exist; {fix}",
            reason="file-missing",
            field=variable,
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read {label} {path} ({variable}): {exc.strerror}; {fix}",
            reason="file-unreadable",
            field=variable,
        ) from None
    if len(raw) > MAX_SECRET_BYTES:
        raise ConfigError(
            f"{label} {path} ({variable}) is larger than {MAX_SECRET_BYTES} bytes; {fix}",
            reason="file-too-large",
            field=variable,
        )
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigError(
            f"{label} {path} ({variable}) is not UTF-8 text; {fix}", reason="file-not-text", field=variable
        ) from None
    if not text:
        if empty_file_is_error:
            raise ConfigError(f"{label} {path} ({variable}) is empty", reason="file-empty", field=variable)
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


# --- resolve-image and reconcile -----------------------------------------------------------------

RULES_FILE_ENV = "IMAGEBUMP_RULES_FILE"
DEFAULT_RULES_FILE = "/etc/imagebump/rules/rules.yaml"


def rules_file(env: Mapping[str, str] | None = None) -> str:
    """Where the rules are mounted: ``$IMAGEBUMP_RULES_FILE`` or the default path."""
    return setting(RULES_FILE_ENV, DEFAULT_RULES_FILE, env)


# --- git ------------------------------------------------------------------------------------------

READ_TOKEN_FILE_ENV = "IMAGEBUMP_GIT_READ_TOKEN_FILE"


# --- commits (git.commit; commit-pr validates them: steps.commit_pr.settings) ---------------------------------------------------------------------------------

AUTHOR_NAME_ENV = "IMAGEBUMP_GIT_AUTHOR_NAME"
AUTHOR_EMAIL_ENV = "IMAGEBUMP_GIT_AUTHOR_EMAIL"
DEFAULT_AUTHOR_NAME = "imagebump"
DEFAULT_AUTHOR_EMAIL = "imagebump@users.noreply.github.com"


#: The GitHub App trio (steps.forge.github reads them); all three set means "the App is configured".
GITHUB_APP_ENVS = (
    "IMAGEBUMP_GITHUB_APP_ID",
    "IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE",
    "IMAGEBUMP_GITHUB_APP_INSTALLATION_ID",
)


def github_app_configured(env: Mapping[str, str] | None = None) -> bool:
    """Are all three GitHub App settings given (cheap: nothing is read or validated here)?"""
    env = os.environ if env is None else env
    return all(env.get(name) for name in GITHUB_APP_ENVS)


def author_identity(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``(name, email)`` of commits: ``$IMAGEBUMP_GIT_AUTHOR_NAME`` / ``$IMAGEBUMP_GIT_AUTHOR_EMAIL``,
    else the defaults (not validated: :class:`steps.commit_pr.settings.CommitPrSettings` validates
    them for commit-pr)."""
    return setting(AUTHOR_NAME_ENV, DEFAULT_AUTHOR_NAME, env), setting(
        AUTHOR_EMAIL_ENV, DEFAULT_AUTHOR_EMAIL, env
    )

"""Git's credentials and environment: a token in an HTTP header, never in argv, URL or config.

:class:`GitAuth` holds a token (read by :func:`GitAuth.from_env` through :mod:`steps.runtime.settings`);
:func:`git_env` builds the environment every git process gets: the token only as an
``http.<origin>/.extraHeader`` (``Authorization: Basic base64(x-access-token:TOKEN)``) through
``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_n`` / ``GIT_CONFIG_VALUE_n``; no prompts, no credential
helper, no user or system configuration, no hooks of a cloned repository, none of the caller's
``GIT_*`` variables. :func:`check_url` refuses URLs with credentials or odd schemes.

No process runs here (that is :mod:`steps.git`); imports only :mod:`steps.domain.errors`,
:mod:`steps.runtime.redact` and :mod:`steps.runtime.settings`.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from steps.domain.errors import ConfigError
from steps.runtime.redact import BASIC_USERS, REDACTED, redact, register_secret
from steps.runtime.settings import READ_TOKEN_FILE_ENV, read_secret, setting

__all__ = ["READ_SECRET", "WRITE_SECRET", "GitAuth", "anonymous_read_fix", "check_url", "git_env", "origin"]

_TOKEN_USER = "x-access-token"
#: The optional Secret holding the read token on a cluster (key ``token``; workflows/names.py).
READ_SECRET = "imagebump-git-read"
#: The Secret holding the write token (key ``token``) or a GitHub App's keys (workflows/names.py).
WRITE_SECRET = "imagebump-git"


class GitAuth:
    """An access token for Git over HTTPS. Its ``repr`` never shows the token.

    The token is sent as HTTP Basic ``x-access-token:TOKEN`` (what GitHub, GitHub Enterprise,
    GitLab and Gitea accept for tokens).
    """

    __slots__ = ("_token", "username")

    def __init__(self, token: str, username: str = _TOKEN_USER) -> None:
        token = token.strip()
        if not token:
            raise ConfigError("the git token is empty; set a non-empty token")
        if any(c in token for c in "\r\n\0"):
            raise ConfigError("the git token contains a line break or NUL; check the token file")
        self._token = token
        self.username = username
        register_secret(token, basic_users=(username, *BASIC_USERS))  # never in any log record either

    def __repr__(self) -> str:
        return f"GitAuth(username={self.username!r}, token={REDACTED!r})"

    __str__ = __repr__

    @property
    def token(self) -> str:
        return self._token

    @property
    def header(self) -> str:
        """The ``Authorization`` header line git sends (a secret)."""
        basic = base64.b64encode(f"{self.username}:{self._token}".encode()).decode()
        return f"Authorization: Basic {basic}"

    def secrets(self) -> list[str]:
        """Every form of the token that could show up in text: raw and base64 encodings."""
        forms = {self._token}
        for raw in (f"{self.username}:{self._token}", self._token):
            encoded = base64.b64encode(raw.encode()).decode()
            forms.add(encoded)
            forms.add(encoded.rstrip("="))
        return sorted(forms, key=len, reverse=True)

    @classmethod
    def from_env(cls, write: bool, required: bool | None = None) -> GitAuth | None:
        """The token for git from the environment (or a mounted file), through :mod:`steps.runtime.settings`.

        Args:
            write: True for the write token (``IMAGEBUMP_GIT_TOKEN`` or
                ``IMAGEBUMP_GIT_TOKEN_FILE``), False for the optional read token
                (``IMAGEBUMP_GIT_READ_TOKEN`` or ``IMAGEBUMP_GIT_READ_TOKEN_FILE``).
            required: raise :class:`ConfigError` when no token is configured. Defaults to
                ``write``: the read token falls back to anonymous access (None). A token file
                that does not exist is "no token" unless required (an absent optional Secret
                mounts an empty directory).
        """
        name = "IMAGEBUMP_GIT_TOKEN" if write else "IMAGEBUMP_GIT_READ_TOKEN"
        required = write if required is None else required
        token = read_secret(
            name, label="the git token file", absent_file_is_unset=not required, empty_file_is_error=True
        )
        if not token:
            if required:
                where = (
                    f" On a cluster the token comes from the Secret `{WRITE_SECRET}` (key `token`): "
                    f"kubectl -n imagebump create secret generic {WRITE_SECRET} --from-file=token=./write-token "
                    "(or a GitHub App's keys, see docs/install.md); without a cluster: export "
                    f"{name} for `imagebump run --local`."
                    if write
                    else ""
                )
                raise ConfigError(
                    f"no git token: set {name} or {name}_FILE (a file holding the token) "
                    f"for the step that pushes.{where}"
                )
            return None
        return cls(token)


def anonymous_read_fix() -> str:
    """What to do when the remote refuses a read made without a token (names the Secret)."""
    file_name = setting(READ_TOKEN_FILE_ENV)
    looked = f" ({file_name} does not exist)" if file_name else ""
    return (
        f"No read token is configured{looked}, so the clone was anonymous. For a private repository "
        f"create the `{READ_SECRET}` Secret: kubectl -n imagebump create secret generic {READ_SECRET} "
        "--from-file=token=./read-token (without a cluster: export IMAGEBUMP_GIT_TOKEN for "
        "`imagebump run --local`, or IMAGEBUMP_GIT_READ_TOKEN)"
    )


def origin(url: str) -> str | None:
    """``scheme://host[:port]/`` of an http(s) URL, the scope git's ``http.<url>.*`` keys take."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return urlunsplit((parts.scheme, parts.netloc, "/", "", ""))


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.username or parts.password:
        raise ConfigError(
            f"repository URL {redact(url, shapes=False)} holds credentials; remove them and provide the token "
            "through IMAGEBUMP_GIT_TOKEN / IMAGEBUMP_GIT_READ_TOKEN (or their _FILE variants)"
        )
    if parts.scheme not in ("http", "https", "file"):
        raise ConfigError(f"repository URL {url!r} must be https:// (or http:// for a local remote)")
    return url


# Environment variables that must not reach git from the caller: they could redirect the
# repository, inject configuration or print headers.
_KEEP_GIT_VARS = {"GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GIT_SSL_NO_VERIFY"}


def git_env(auth: GitAuth | None, url: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("GIT_") and k not in _KEEP_GIT_VARS)
        and not k.startswith("IMAGEBUMP_GIT_")
        and k not in ("SSH_ASKPASS", "CURL_CA_BUNDLE_DEBUG")
    }
    env.update(
        {
            "LC_ALL": "C",
            "LANGUAGE": "C",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "",  # set but empty: git skips askpass altogether
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TRACE_REDACT": "1",
        }
    )
    config: list[tuple[str, str]] = [
        ("credential.helper", ""),  # no helper may store or supply credentials
        ("protocol.version", "2"),
        ("advice.detachedHead", "false"),
        ("gc.auto", "0"),
        ("maintenance.auto", "false"),
        ("core.hooksPath", os.devnull),  # a cloned repository's hooks never run here
        ("commit.gpgSign", "false"),
        ("http.lowSpeedLimit", "1000"),
        ("http.lowSpeedTime", "60"),
    ]
    if auth is not None:
        scope = origin(url) if url else None
        key = f"http.{scope}.extraHeader" if scope else "http.extraHeader"
        config.append((key, auth.header))
    env["GIT_CONFIG_COUNT"] = str(len(config))
    for i, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    env.update(extra or {})
    return env

"""GitHub REST client construction (githubkit), with our auth, retry and error policy.

Reads (environment only, never parameters):

- ``IMAGEBUMP_GITHUB_API_URL`` — API base; default ``https://api.github.com``, GitHub Enterprise
  Server is ``https://HOST/api/v3``.
- Token auth: ``IMAGEBUMP_GIT_TOKEN`` or ``IMAGEBUMP_GIT_TOKEN_FILE`` (the same write token git
  pushes with; a fine-grained PAT with contents + pull-requests write).
- GitHub App auth (takes precedence when all three are set): ``IMAGEBUMP_GITHUB_APP_ID``,
  ``IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE``, ``IMAGEBUMP_GITHUB_APP_INSTALLATION_ID``.

GitHub App: githubkit 0.16.1's ``AppInstallationAuthStrategy`` does cache the installation token
(in its process-wide ``MemCacheStrategy``, until one minute before ``expires_at``), but it keeps the
token inside the httpx auth flow, and git needs the same token to push. So we mint the installation
token through githubkit ourselves (``apps.create_installation_access_token`` under the App's JWT),
cache it per (API URL, app, installation) until one minute before it expires, and use it for both
the API (``TokenAuthStrategy``) and git. githubkit signs the JWT with PyJWT (its ``auth-app``
extra); when PyJWT is absent we sign RS256 with ``cryptography``.

Retries: githubkit's ``auto_retry`` hook (``RetryDecisionFunc``) is given :class:`RetryPolicy`:
rate limits (403/429 with ``Retry-After``, or ``x-ratelimit-remaining: 0`` with
``x-ratelimit-reset``) are retried after the time the server names — unless that is longer than
``max_wait``, then we give up with a :class:`~steps.domain.errors.TransientError` and let Argo retry the
step later; 5xx, timeouts and connection errors are retried with jittered exponential backoff.
githubkit's own default retries a rate limit only once and 5xx after 1/4/9 s without jitter.

Errors leave this module as our hierarchy (:func:`translate`): 401/403 → ``PermissionDeniedError``,
404/422 → ``ConfigError``, rate limit / 5xx / network → ``TransientError``. Messages name method,
path and GitHub's message, never a header or token.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import random
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
from githubkit import GitHub
from githubkit.auth import BaseAuthStrategy
from githubkit.exception import (
    GitHubException,
    RateLimitExceeded,
    RequestError,
    RequestFailed,
    RequestTimeout,
)
from githubkit.retry import RetryOption

from steps.domain.errors import ConfigError, ImagebumpError, PermissionDeniedError, TransientError
from steps.domain.repo_url import (
    API_URL_ENV as API_URL_ENV,  # one name of the setting (repo_url: GitHub hosts)
)
from steps.domain.repo_url import (
    parse_repo_url as parse_repo_url,  # re-exported (it lives apart from githubkit)
)
from steps.git.auth import GitAuth
from steps.runtime.redact import redact
from steps.runtime.settings import github_app_configured, read_secret, read_secret_file

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
TOKEN_ENV = "IMAGEBUMP_GIT_TOKEN"
APP_ID_ENV = "IMAGEBUMP_GITHUB_APP_ID"
APP_KEY_FILE_ENV = "IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE"
APP_INSTALLATION_ENV = "IMAGEBUMP_GITHUB_APP_INSTALLATION_ID"
USER_AGENT = "imagebump"


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class GitHubSettings:
    """Where the API is and how to authenticate. ``repr`` never shows a secret."""

    api_url: str = DEFAULT_API_URL
    token: str | None = field(default=None, repr=False)
    app_id: str | None = None
    app_private_key: str | None = field(default=None, repr=False)
    app_installation_id: int | None = None

    @property
    def uses_app(self) -> bool:
        return bool(self.app_id and self.app_private_key and self.app_installation_id)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> GitHubSettings:
        """Read the settings from the environment (see the module docstring).

        Raises:
            ConfigError: App settings are incomplete or unreadable, or no credentials at all.
        """
        env = os.environ if env is None else env
        api_url = (env.get(API_URL_ENV) or DEFAULT_API_URL).rstrip("/")
        if not re.match(r"^https?://[^/\s@]+(/\S*)?$", api_url):
            raise ConfigError(
                f"{API_URL_ENV}={api_url!r} is not an http(s) URL; "
                "use https://api.github.com or https://HOST/api/v3 for GitHub Enterprise"
            )
        app_id = env.get(APP_ID_ENV) or None
        key_file = env.get(APP_KEY_FILE_ENV) or None
        installation = env.get(APP_INSTALLATION_ENV) or None
        app_given = [
            name
            for name, v in (
                (APP_ID_ENV, app_id),
                (APP_KEY_FILE_ENV, key_file),
                (APP_INSTALLATION_ENV, installation),
            )
            if v
        ]
        if app_given and len(app_given) != 3:
            missing = sorted({APP_ID_ENV, APP_KEY_FILE_ENV, APP_INSTALLATION_ENV} - set(app_given))
            raise ConfigError(f"GitHub App auth is half configured: set {', '.join(missing)} too (or none)")
        private_key = None
        installation_id = None
        if app_given:
            private_key = read_secret_file(
                APP_KEY_FILE_ENV,
                env,
                label="the GitHub App private key file",
                empty_file_is_error=True,
                fix="mount the App's private key there",
            )  # registered for redaction, like every secret
            if private_key is None or "PRIVATE KEY" not in private_key:
                raise ConfigError(f"{APP_KEY_FILE_ENV} {key_file!r} is not a PEM private key")
            try:
                installation_id = int(installation)  # type: ignore[arg-type]
            except ValueError:
                raise ConfigError(f"{APP_INSTALLATION_ENV}={installation!r} is not a number") from None
        token = read_secret(TOKEN_ENV, env, label="the token file")
        if not app_given and not token:
            raise ConfigError(
                f"no GitHub credentials: set {TOKEN_ENV} (or {TOKEN_ENV}_FILE), or the GitHub App trio "
                f"{APP_ID_ENV}, {APP_KEY_FILE_ENV}, {APP_INSTALLATION_ENV}"
            )
        return cls(api_url, token, app_id, private_key, installation_id)


# --------------------------------------------------------------------------- retries


class RetryPolicy:
    """githubkit ``auto_retry`` decision: honour rate-limit waits, back off on 5xx and network errors.

    Args:
        max_retries: retries per request (not counting the first try).
        max_wait: the longest rate-limit wait we sit out in-process (seconds); beyond it we give up
            and the step fails as transient (Argo's retryStrategy comes back later).
        base_delay: first backoff for 5xx/network errors; doubles per retry, jittered ×0.5–1.5.
        max_delay: cap of one backoff.
    """

    def __init__(
        self, max_retries: int = 4, max_wait: float = 90.0, base_delay: float = 0.5, max_delay: float = 15.0
    ) -> None:
        self.max_retries = max_retries
        self.max_wait = max_wait
        self.base_delay = base_delay
        self.max_delay = max_delay

    def backoff(self, retry_count: int) -> float:
        delay = min(self.max_delay, self.base_delay * (2**retry_count))
        return delay * random.uniform(0.5, 1.5)

    def __call__(self, exc: GitHubException, retry_count: int) -> RetryOption:
        if retry_count >= self.max_retries:
            return RetryOption(False)
        if isinstance(exc, RateLimitExceeded):
            wait = exc.retry_after.total_seconds()
            if wait > self.max_wait:
                log.warning(
                    "GitHub rate limit: reset in %.0fs is longer than %.0fs; giving up", wait, self.max_wait
                )
                return RetryOption(False)
            # Retry-After is a minimum; a little jitter keeps parallel steps from arriving together.
            wait = max(wait, 0.05) + random.uniform(0, 0.25)
            log.warning(
                "GitHub rate limit on %s %s; retrying in %.1fs",
                exc.request.method,
                exc.request.url.path,
                wait,
            )
            return RetryOption(True, timedelta(seconds=wait))
        if isinstance(exc, RequestFailed):
            if exc.response.status_code >= 500:
                wait = self.backoff(retry_count)
                log.warning(
                    "GitHub %s on %s %s; retrying in %.1fs",
                    exc.response.status_code,
                    exc.request.method,
                    exc.request.url.path,
                    wait,
                )
                return RetryOption(True, timedelta(seconds=wait))
            return RetryOption(False)
        if isinstance(exc, RequestError):  # timeouts, connection refused/reset
            wait = self.backoff(retry_count)
            log.warning("GitHub request failed (%s); retrying in %.1fs", type(exc.exc).__name__, wait)
            return RetryOption(True, timedelta(seconds=wait))
        return RetryOption(False)


# --------------------------------------------------------------------------- errors


def error_text(exc: RequestFailed) -> str:
    """GitHub's ``message`` plus each ``errors[].message`` (or the raw body's start)."""
    try:
        data = exc.response.raw_response.json()
    except Exception:  # noqa: BLE001 - any non-JSON body
        return exc.response.raw_response.text[:200]
    if not isinstance(data, dict):
        return str(data)[:200]
    parts = [str(data.get("message", ""))]
    for err in data.get("errors") or []:
        if isinstance(err, dict) and err.get("message"):
            parts.append(str(err["message"]))
        elif isinstance(err, dict) and err.get("code"):
            parts.append(f"{err.get('field', '')} {err['code']}".strip())
    return "; ".join(p for p in parts if p)


def translate(exc: GitHubException, what: str, secrets: tuple[str | None, ...] = ()) -> ImagebumpError:
    """Turn a githubkit exception into our hierarchy; the message names ``what``, status and cause."""
    if isinstance(exc, RateLimitExceeded):
        reset = exc.retry_after.total_seconds()
        err: ImagebumpError = TransientError(
            f"{what}: GitHub rate limit exceeded (HTTP {exc.response.status_code}, retry after {reset:.0f}s); "
            "the step will be retried"
        )
    elif isinstance(exc, RequestFailed):
        status = exc.response.status_code
        req = f"{exc.request.method} {exc.request.url.path}"
        detail = error_text(exc)
        if status in (401, 403):
            err = PermissionDeniedError(
                f"{what}: GitHub refused {req} with HTTP {status} ({detail}); "
                "give the token/App contents and pull-requests write access to this repository"
            )
        elif status >= 500:
            err = TransientError(f"{what}: GitHub answered {req} with HTTP {status} ({detail}); retried")
        elif status == 404:
            err = ConfigError(
                f"{what}: GitHub answered {req} with HTTP 404 ({detail}); check the repository URL and "
                f"{API_URL_ENV}, and that the credentials can see the repository"
            )
        else:
            err = ConfigError(f"{what}: GitHub refused {req} with HTTP {status} ({detail})")
    elif isinstance(exc, RequestTimeout):
        err = TransientError(
            f"{what}: GitHub request timed out ({exc.request.method} {exc.request.url.path})"
        )
    elif isinstance(exc, RequestError):
        err = TransientError(f"{what}: cannot reach GitHub ({type(exc.exc).__name__}: {exc.exc})")
    else:
        err = TransientError(f"{what}: {type(exc).__name__}: {exc}")
    err.args = (redact(str(err), secrets),)
    return err


# --------------------------------------------------------------------------- GitHub App tokens


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def app_jwt(app_id: str, private_key: str, now: datetime | None = None) -> str:
    """An RS256 JWT authenticating as the App (iat 60 s in the past, valid 9 minutes)."""
    now = now or datetime.now(UTC)
    iat = int((now - timedelta(seconds=60)).timestamp())
    claims = {"iat": iat, "exp": iat + 9 * 60, "iss": str(app_id)}
    try:
        import jwt  # PyJWT, githubkit's `auth-app` extra

        return jwt.encode(claims, private_key, algorithm="RS256")
    except ImportError:
        pass
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding

    try:
        key = serialization.load_pem_private_key(private_key.encode(), password=None)
    except (ValueError, TypeError):
        raise ConfigError(f"{APP_KEY_FILE_ENV} does not hold a readable unencrypted PEM RSA key") from None
    header = {"alg": "RS256", "typ": "JWT"}
    signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())  # type: ignore[union-attr]
    return f"{signing_input}.{_b64url(signature)}"


@dataclass
class _BearerAuthStrategy(BaseAuthStrategy):
    """``Authorization: Bearer <App JWT>`` (TokenAuthStrategy would send ``token <jwt>``)."""

    jwt: str = field(repr=False)

    def get_auth_flow(self, github: object) -> httpx.Auth:
        return _BearerAuth(self.jwt)


class _BearerAuth(httpx.Auth):
    def __init__(self, token: str) -> None:
        self._token = token

    def auth_flow(self, request: httpx.Request):
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request


_TOKEN_CACHE: dict[tuple[str, str, int], tuple[str, datetime]] = {}
_TOKEN_LOCK = threading.Lock()


def clear_token_cache() -> None:
    """Forget cached installation tokens (tests)."""
    with _TOKEN_LOCK:
        _TOKEN_CACHE.clear()


def installation_token(settings: GitHubSettings, *, retry: RetryPolicy | None = None) -> str:
    """The App installation token, minted through githubkit and cached until 1 minute before expiry."""
    assert settings.uses_app
    key = (settings.api_url, str(settings.app_id), int(settings.app_installation_id or 0))
    with _TOKEN_LOCK:
        cached = _TOKEN_CACHE.get(key)
        if cached and cached[1] - timedelta(minutes=1) > datetime.now(UTC):
            return cached[0]
        jwt_token = app_jwt(str(settings.app_id), str(settings.app_private_key))
        gh = GitHub(_BearerAuthStrategy(jwt_token), **_client_options(settings, retry))
        try:
            resp = gh.rest.apps.create_installation_access_token(settings.app_installation_id)
            data = resp.parsed_data
        except GitHubException as exc:
            raise translate(exc, f"GitHub App {settings.app_id} installation token", (jwt_token,)) from None
        expires = datetime.strptime(data.expires_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        _TOKEN_CACHE[key] = (data.token, expires)
        log.info("minted GitHub App installation token (expires %s)", data.expires_at)
        return data.token


# --------------------------------------------------------------------------- the client


def _client_options(settings: GitHubSettings, retry: RetryPolicy | None) -> dict:
    return {
        "base_url": settings.api_url + "/",
        "user_agent": USER_AGENT,
        "timeout": 30.0,
        # Never serve a stale PR list from an HTTP cache: "find the open PR" must be fresh.
        "http_cache": False,
        "auto_retry": retry or RetryPolicy(),
    }


def client_options(settings: GitHubSettings, retry: RetryPolicy | None = None) -> dict:
    """The keyword arguments every githubkit client of ours is built with (base URL, timeout, retries)."""
    return _client_options(settings, retry)


def app_git_auth(settings: GitHubSettings | None = None) -> GitAuth:
    """Git credentials from the GitHub App: its installation token (reads and pushes over HTTPS)."""
    settings = settings or GitHubSettings.from_env()
    if not settings.uses_app:
        raise ConfigError(
            f"no GitHub App configured: set {APP_ID_ENV}, {APP_KEY_FILE_ENV}, {APP_INSTALLATION_ENV}"
        )
    return GitAuth(installation_token(settings))


def read_auth() -> GitAuth | None:
    """Git's read credentials: ``IMAGEBUMP_GIT_READ_TOKEN[_FILE]``; else, when a GitHub App is
    configured, its installation token (one machine with only the App's settings); else None
    (anonymous)."""
    auth = GitAuth.from_env(write=False)
    if auth is None and github_app_configured():
        return app_git_auth()
    return auth


def api_token(settings: GitHubSettings, *, retry: RetryPolicy | None = None) -> str:
    """The token the API (and git, under App auth) uses."""
    if settings.uses_app:
        return installation_token(settings, retry=retry)
    assert settings.token
    return settings.token


def client(settings: GitHubSettings | None = None, *, retry: RetryPolicy | None = None) -> GitHub:
    """A githubkit ``GitHub`` for ``settings`` (default: from the environment)."""
    settings = settings or GitHubSettings.from_env()
    return GitHub(api_token(settings, retry=retry), **_client_options(settings, retry))

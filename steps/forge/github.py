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

Retries: githubkit's ``auto_retry`` hook (``RetryDecisionFunc``) is given :class:`RetryPolicy`
(or, for a step, :class:`RateLimitBudget`: one budget of waits for all its requests). Rate limits
follow GitHub's rules (:func:`rate_limit_wait`): ``Retry-After`` (seconds or an HTTP-date), else
``x-ratelimit-remaining: 0`` until ``x-ratelimit-reset``, else — a secondary limit that names no
wait, a 429, a malformed value — at least a minute, doubling per retry; every wait is at least
:data:`RATE_LIMIT_FLOOR` (doubling), so ``Retry-After: 0`` or a past reset still spends the budget. A
wait beyond what is left of the budget gives up with a :class:`~steps.domain.errors.TransientError`
(exit 75: Argo retries the step later). 5xx, timeouts and connection errors are retried with
jittered exponential backoff. The policy sleeps itself, through :data:`CLOCK` (tests inject one), and
hands githubkit a 1 µs wait: githubkit 0.16.1 sleeps 60 s, uncounted, for a zero wait, and parses
``Retry-After`` with ``int()`` — a response hook (:func:`keep_rate_limit_headers`) keeps the headers
as sent and drops what githubkit cannot parse, so a garbage header is a rate limit, not a traceback.

Errors leave this module as our hierarchy (:func:`translate`): 401/403 → ``PermissionDeniedError``,
404/422 → ``ConfigError``, rate limit (a secondary one without ``Retry-After`` too) / 5xx / network /
an answer that is not the JSON expected → ``TransientError``. Messages name method,
path and GitHub's message, never a header or token.
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
from githubkit import GitHub
from githubkit.auth import BaseAuthStrategy
from githubkit.exception import (
    GitHubException,
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
                "use https://api.github.com or https://HOST/api/v3 for GitHub Enterprise",
                field=API_URL_ENV,
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
                raise ConfigError(
                    f"{APP_KEY_FILE_ENV} {key_file!r} is not a PEM private key",
                    reason="not-a-pem-key",
                    field=APP_KEY_FILE_ENV,
                )
            try:
                installation_id = int(installation)  # type: ignore[arg-type]
            except ValueError:
                raise ConfigError(
                    f"{APP_INSTALLATION_ENV}={installation!r} is not a number", field=APP_INSTALLATION_ENV
                ) from None
        token = read_secret(TOKEN_ENV, env, label="the token file")
        if not app_given and not token:
            raise ConfigError(
                f"no GitHub credentials: set {TOKEN_ENV} (or {TOKEN_ENV}_FILE), or the GitHub App trio "
                f"{APP_ID_ENV}, {APP_KEY_FILE_ENV}, {APP_INSTALLATION_ENV}"
            )
        return cls(api_url, token, app_id, private_key, installation_id)


# --------------------------------------------------------------------------- retries

#: GitHub on a secondary rate limit that names no wait: "wait for at least one minute before
#: retrying. If your request continues to fail due to a secondary rate limit, wait for an
#: exponentially increasing amount of time between retries" (docs.github.com/en/rest/using-the-rest-api/
#: rate-limits-for-the-rest-api, "Exceeding the rate limit"). 60 s, 120 s, 240 s, … per request.
SECONDARY_WAIT = 60.0
#: The least one rate-limit wait costs, doubling per retry of the same request up to
#: :data:`SECONDARY_WAIT`: a ``Retry-After: 0`` or a reset in the past still spends the budget, so a
#: server that keeps answering so cannot keep a step busy (and hammering GitHub) for ever.
RATE_LIMIT_FLOOR = 1.0
#: What githubkit is told to sleep after we slept ourselves: a zero ``timedelta`` would make it sleep
#: 60 s, uncounted (githubkit 0.16.1 core.py: ``time.sleep(retry_after.total_seconds() if retry_after
#: else 60)``).
_TICK = timedelta(microseconds=1)
#: The rate-limit headers as GitHub sent them, kept on the response before githubkit reads them.
_SENT = "imagebump_rate_limit_headers"
_DIGITS = re.compile(r"[0-9]{1,11}")


class Clock:
    """Time as the retry policy sees it: the wall clock and sleeping. Tests swap :data:`CLOCK` (or
    give a policy its own ``sleep`` and ``clock``) instead of sleeping."""

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


#: The clock every :class:`RetryPolicy` uses unless given its own (looked up when it waits).
CLOCK = Clock()


def retry_after_seconds(value: str, now: float) -> float | None:
    """Seconds a ``Retry-After`` value asks for, or None when it is neither form RFC 9110 (10.2.3)
    allows: ``delay-seconds`` (digits) or an HTTP-date (its distance from ``now``, negative when past)."""
    text = value.strip()
    if _DIGITS.fullmatch(text):
        return float(int(text))
    if not text or text[0].isdigit() or text[0] in "+-.":
        return None  # "1.5", "-5", twelve digits and more: not a form GitHub or RFC 9110 uses
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp() - now


@dataclass(frozen=True)
class RateLimited:
    """A rate-limit answer and the wait it costs (seconds, :data:`RATE_LIMIT_FLOOR` at least)."""

    wait: float
    kind: str  # "retry-after", "reset", "secondary" (no usable wait named: a minute, doubling)
    told: str = ""  # what the server named, for the log ("Retry-After: 'abc'")


def rate_limit_wait(
    status: int, headers: Mapping[str, str], message: str, now: float, retry_count: int = 0
) -> RateLimited | None:
    """Is this answer a rate limit, and how long to wait before retry number ``retry_count + 1``? Pure.

    GitHub's rules (docs.github.com, "Exceeding the rate limit"): a 403 or 429 with ``retry-after``
    waits that long; with ``x-ratelimit-remaining: 0`` until ``x-ratelimit-reset`` (epoch seconds);
    a secondary limit (the message says so) naming neither waits a minute, then exponentially
    longer. A 429 is a rate limit whatever its message. A malformed value (``Retry-After: abc``,
    ``1.5``, a reset of 10^14 is only far away) names no usable wait: the minute rule. Every wait is
    at least :data:`RATE_LIMIT_FLOOR` doubled per retry (capped at a minute). None: not a rate limit
    (a 403 that refuses for lack of rights).

    Args:
        headers: the response's headers, names lower-case, as GitHub sent them.
        message: GitHub's error message (:func:`error_text`).
    """
    if status not in (403, 429):
        return None
    floor = min(SECONDARY_WAIT, RATE_LIMIT_FLOOR * 2.0 ** min(retry_count, 16))
    minute = SECONDARY_WAIT * 2.0 ** min(retry_count, 16)
    lowered = message.lower()
    secondary = "secondary rate limit" in lowered or "abuse" in lowered
    retry_after = headers.get("retry-after")
    if retry_after is not None:
        seconds = retry_after_seconds(retry_after, now)
        told = f"Retry-After: {retry_after.strip()[:40]!r}"
        if seconds is not None:
            return RateLimited(max(seconds, floor), "retry-after", told)
        return RateLimited(minute, "secondary", told)  # a rate limit naming no usable wait
    if (headers.get("x-ratelimit-remaining") or "").strip() == "0":
        reset = (headers.get("x-ratelimit-reset") or "").strip()
        told = f"x-ratelimit-reset: {reset[:40]!r}"
        if reset.isascii() and reset.isdigit():  # a reset of 10^14 is only far away (no float overflow)
            epoch = float(int(reset[:15])) if len(reset) <= 15 else 1e15
            return RateLimited(max(epoch - now, floor), "reset", told)
        return RateLimited(minute, "secondary", told)
    if secondary or status == 429:
        return RateLimited(minute, "secondary", "no Retry-After")
    return None


def sent_headers(response: httpx.Response) -> dict[str, str]:
    """The rate-limit headers as GitHub sent them (before :func:`keep_rate_limit_headers` made them
    safe for githubkit), names lower-case."""
    kept = response.extensions.get(_SENT)
    if isinstance(kept, dict):
        return dict(kept)
    return {k.lower(): v for k, v in response.headers.items()}


def keep_rate_limit_headers(response: httpx.Response) -> None:
    """httpx response hook: keep a 403/429's rate-limit headers as sent, and drop the values githubkit
    0.16.1 cannot parse (it calls ``int()`` on ``Retry-After`` and ``datetime.fromtimestamp`` on the
    reset: ``abc``, ``1.5``, an HTTP-date or a reset of 10^14 raised out of the client as a
    traceback). :func:`rate_limit_wait` reads the kept values."""
    if response.status_code not in (403, 429):
        return
    names = ("retry-after", "x-ratelimit-remaining", "x-ratelimit-reset")
    response.extensions = {
        **response.extensions,
        _SENT: {n: response.headers[n] for n in names if n in response.headers},
    }
    for name in ("retry-after", "x-ratelimit-reset"):
        value = response.headers.get(name)
        if value is not None and not _DIGITS.fullmatch(value.strip()):
            del response.headers[name]


def _rate_limited(exc: GitHubException, now: float, retry_count: int = 0) -> RateLimited | None:
    if not isinstance(exc, RequestFailed):  # RateLimitExceeded is a RequestFailed
        return None
    response = exc.response.raw_response
    return rate_limit_wait(response.status_code, sent_headers(response), error_text(exc), now, retry_count)


class RetryPolicy:
    """githubkit ``auto_retry`` decision: wait out rate limits within a budget, back off on 5xx and
    network errors — sleeping itself, through ``sleep``, so every wait is counted (and tests inject
    a clock instead of sleeping).

    Args:
        max_retries: retries per request for 5xx and network errors (not counting the first try);
            for rate limits too unless ``rate_limit_retries`` says otherwise.
        max_wait: the budget: seconds of waits (rate limits and backoffs) one client sits out in
            all; a wait beyond what is left gives up, and the step fails as transient (exit 75:
            Argo's retryStrategy comes back later).
        base_delay: first backoff for 5xx/network errors; doubles per retry, jittered ×0.5–1.5.
        max_delay: cap of one backoff.
        rate_limit_retries: retries per request for rate limits (None: as many as the budget allows).
        sleep, clock: default :data:`CLOCK`'s (tests inject a fake clock).
    """

    def __init__(
        self,
        max_retries: int = 4,
        max_wait: float = 90.0,
        base_delay: float = 0.5,
        max_delay: float = 15.0,
        *,
        rate_limit_retries: int | None = -1,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.max_retries = max_retries
        self.max_wait = max_wait
        self.budget = max_wait
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.rate_limit_retries = max_retries if rate_limit_retries == -1 else rate_limit_retries
        self._sleep = sleep
        self._clock = clock
        self.waited = 0.0  # seconds slept in all
        self.limited = 0  # rate-limit answers met
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._clock() if self._clock else CLOCK.now()

    def sleep(self, seconds: float) -> None:
        (self._sleep or CLOCK.sleep)(seconds)

    def backoff(self, retry_count: int) -> float:
        delay = min(self.max_delay, self.base_delay * (2**retry_count))
        return delay * random.uniform(0.5, 1.5)

    def _spend(self, wait: float, jitter: bool) -> float | None:
        """Take ``wait`` (plus ≤ 0.25 s of jitter) from the budget; None when it does not fit."""
        with self._lock:
            left = self.budget - self.waited
            if wait > left:
                return None
            if jitter:  # a little jitter keeps parallel steps from arriving together
                wait += random.uniform(0, min(0.25, left - wait))
            self.waited += wait
            return wait

    def __call__(self, exc: GitHubException, retry_count: int) -> RetryOption:
        limited = _rate_limited(exc, self.now(), retry_count)
        if limited is not None:
            with self._lock:
                self.limited += 1
            if self.rate_limit_retries is not None and retry_count >= self.rate_limit_retries:
                return RetryOption(False)
            wait = self._spend(limited.wait, jitter=True)
            if wait is None:
                log.warning(
                    "GitHub rate limit on %s %s (%s) asks for %.0fs; only %.0fs of the budget left: "
                    "giving up for now (the step is retried later)",
                    exc.request.method,
                    exc.request.url.path,
                    limited.told,
                    limited.wait,
                    max(self.budget - self.waited, 0.0),
                )
                return RetryOption(False)
            log.warning(
                "GitHub rate limit on %s %s (HTTP %d, %s); waiting %.2fs",
                exc.request.method,
                exc.request.url.path,
                exc.response.status_code,  # type: ignore[attr-defined]
                limited.told,
                wait,
                extra={"fields": {"rate_limited": True, "rate_limit_wait_s": round(wait, 3)}},
            )
            self.sleep(wait)
            return RetryOption(True, _TICK)
        if retry_count >= self.max_retries:
            return RetryOption(False)
        fresh_token = (
            isinstance(exc, RequestFailed) and exc.response.status_code == 401 and minted_recently(self.now())
        )
        if isinstance(exc, RequestFailed) and exc.response.status_code < 500 and not fresh_token:
            return RetryOption(False)
        if not isinstance(exc, (RequestFailed, RequestError)):
            return RetryOption(False)
        wait = self._spend(self.backoff(retry_count), jitter=False)
        if wait is None:
            return RetryOption(False)
        if isinstance(exc, RequestFailed):
            log.warning(
                "GitHub %s on %s %s; retrying in %.1fs",
                exc.response.status_code,
                exc.request.method,
                exc.request.url.path,
                wait,
            )
        else:  # timeouts, connection refused/reset
            log.warning("GitHub request failed (%s); retrying in %.1fs", type(exc.exc).__name__, wait)
        self.sleep(wait)
        return RetryOption(True, _TICK)


class RateLimitBudget(RetryPolicy):
    """:class:`RetryPolicy` whose waits share one budget (seconds) per step.

    A rate limit is retried as often as it comes, after the wait GitHub names (at least
    :data:`RATE_LIMIT_FLOOR`, doubling per retry; a minute, doubling, when it
    names none), while the waits add up to no more than ``budget``; 5xx and network errors as the
    base policy says, their backoffs counted too.
    """

    def __init__(
        self,
        budget: float,
        max_retries: int = 4,
        *,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(
            max_retries=max_retries, max_wait=budget, rate_limit_retries=None, sleep=sleep, clock=clock
        )


# --------------------------------------------------------------------------- errors


def error_text(exc: RequestFailed) -> str:
    """GitHub's ``message`` plus each ``errors[].message`` (or the raw body's start)."""
    try:
        data = exc.response.raw_response.json()
    except Exception:  # noqa: BLE001 - any non-JSON body
        return exc.response.raw_response.text[:200]
    if not isinstance(data, dict):
        return str(data)[:200]
    parts = [str(data.get("message", ""))[:500]]
    errors = data.get("errors")
    for err in errors if isinstance(errors, list) else []:
        if isinstance(err, dict) and err.get("message"):
            parts.append(str(err["message"])[:500])
        elif isinstance(err, dict) and err.get("code"):
            parts.append(f"{err.get('field', '')} {err['code']}".strip()[:200])
    return "; ".join(p for p in parts if p)


def translate(exc: Exception, what: str, secrets: tuple[str | None, ...] = ()) -> ImagebumpError:
    """Turn what a GitHub call raised into our hierarchy; the message names ``what``, status and cause.

    A rate limit (also a secondary one without ``Retry-After``, :func:`rate_limit_wait`), a 5xx, a
    timeout or an answer that is not the JSON expected (a ``ValueError`` from parsing it) is
    transient; 401/403 refused (:class:`PermissionDeniedError`); 404/422 a :class:`ConfigError`.
    """
    limited = _rate_limited(exc, CLOCK.now()) if isinstance(exc, GitHubException) else None
    if limited is not None:
        err: ImagebumpError = TransientError(
            f"{what}: GitHub rate limit exceeded (HTTP {exc.response.status_code}, {limited.told}); "  # type: ignore[attr-defined]
            "the step will be retried",
            reason="rate-limited",
        )
    elif isinstance(exc, RequestFailed):
        status = exc.response.status_code
        req = f"{exc.request.method} {exc.request.url.path}"
        detail = error_text(exc)
        if status in (401, 403):
            err = PermissionDeniedError(
                f"{what}: GitHub refused {req} with HTTP {status} ({detail}); "
                "give the token/App contents and pull-requests write access to this repository",
                reason="refused",
            )
        elif status >= 500:
            err = TransientError(
                f"{what}: GitHub answered {req} with HTTP {status} ({detail}); retried", reason="server-error"
            )
        elif status == 404:
            err = ConfigError(
                f"{what}: GitHub answered {req} with HTTP 404 ({detail}); check the repository URL and "
                f"{API_URL_ENV}, and that the credentials can see the repository",
                reason="not-found",
            )
        else:
            err = ConfigError(f"{what}: GitHub refused {req} with HTTP {status} ({detail})", reason="refused")
    elif isinstance(exc, RequestTimeout):
        err = TransientError(
            f"{what}: GitHub request timed out ({exc.request.method} {exc.request.url.path})",
            reason="timeout",
        )
    elif isinstance(exc, RequestError):
        err = TransientError(
            f"{what}: cannot reach GitHub ({type(exc.exc).__name__}: {exc.exc})", reason="unreachable"
        )
    elif isinstance(exc, ValueError):  # the body is not the JSON (or the shape) GitHub documents
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        err = TransientError(
            f"{what}: GitHub's answer is not the JSON expected ({type(exc).__name__}: {first}); retried",
            reason="bad-answer",
        )
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
        raise ConfigError(
            f"{APP_KEY_FILE_ENV} does not hold a readable unencrypted PEM RSA key",
            reason="not-a-pem-key",
            field=APP_KEY_FILE_ENV,
        ) from None
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
        _MINTED_AT.clear()


def expiry(value: object) -> datetime:
    """An installation token's ``expires_at`` (ISO 8601, ``Z`` or an offset, fractional seconds
    allowed) as an aware datetime; ValueError naming the value when it is none."""
    text = str(value).strip()
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T[0-9:.]+(Z|[+-]\d{2}:?\d{2})?", text, flags=re.ASCII):
        raise ValueError(f"expires_at {text[:40]!r} is not an ISO 8601 time")
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))  # ValueError when out of range
    return when if when.tzinfo else when.replace(tzinfo=UTC)


#: A newly minted installation token may answer 401 for a few seconds, until GitHub's replicas
#: know it: a 401 this soon after minting is retried (octokit/auth-app.js retries it for 5 s:
#: "Retrying after 401 response to account for token replication delay").
TOKEN_REPLICATION_SECONDS = 5.0
_MINTED_AT: list[float] = []  # when this process last minted an installation token (CLOCK time)


def minted_recently(now: float) -> bool:
    """Did this process mint an installation token within :data:`TOKEN_REPLICATION_SECONDS`?"""
    return bool(_MINTED_AT) and now - _MINTED_AT[-1] < TOKEN_REPLICATION_SECONDS


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
        what = f"GitHub App {settings.app_id} installation token"
        try:
            resp = gh.rest.apps.create_installation_access_token(settings.app_installation_id)
            data = resp.parsed_data
            expires = expiry(data.expires_at)
        except (GitHubException, ValueError) as exc:
            raise translate(exc, what, (jwt_token,)) from None
        _TOKEN_CACHE[key] = (data.token, expires)
        _MINTED_AT[:] = [CLOCK.now()]
        log.info("minted GitHub App installation token (expires %s)", data.expires_at)
        return data.token


# --------------------------------------------------------------------------- the client


def _client_options(
    settings: GitHubSettings, retry: RetryPolicy | None, request_hooks: tuple[Callable, ...] = ()
) -> dict:
    return {
        "base_url": settings.api_url + "/",
        "user_agent": USER_AGENT,
        "timeout": 30.0,
        # Never serve a stale PR list from an HTTP cache: "find the open PR" must be fresh.
        "http_cache": False,
        "auto_retry": retry or RetryPolicy(),
        "event_hooks": {"request": list(request_hooks), "response": [keep_rate_limit_headers]},
    }


def client_options(
    settings: GitHubSettings, retry: RetryPolicy | None = None, request_hooks: tuple[Callable, ...] = ()
) -> dict:
    """The keyword arguments every githubkit client of ours is built with (base URL, timeout, retries,
    the response hook that keeps rate-limit headers safe, and ``request_hooks``)."""
    return _client_options(settings, retry, request_hooks)


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

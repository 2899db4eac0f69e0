"""The AWS credentials the lean ECR client (:mod:`steps.aws.ecr_http`) finds itself: the providers
of botocore's chain it reproduces exactly, in botocore's order (botocore/credentials.py
``create_credential_resolver``), and why it leaves the rest to botocore.

botocore asks, in order: the environment (``EnvProvider``), a profile's ``role_arn``
(``AssumeRoleProvider``: a config file), the profile providers (web identity — from a profile or from
``AWS_ROLE_ARN`` / ``AWS_WEB_IDENTITY_TOKEN_FILE`` —, SSO, the shared credentials file, login,
``credential_process``, the config file), ``AWS_CREDENTIAL_FILE`` (``OriginalEC2Provider``), a boto2
config (``BotoProvider``: ``BOTO_CONFIG``, ``/etc/boto.cfg``, ``~/.boto``), the container endpoint
(``ContainerProvider``: ECS, EKS Pod Identity), and the instance metadata service. The first that
answers wins. Reproduced here:

* the environment: ``AWS_ACCESS_KEY_ID`` (not empty) and ``AWS_SECRET_ACCESS_KEY`` (not empty),
  with the session token of ``AWS_SECURITY_TOKEN`` then ``AWS_SESSION_TOKEN`` (the first not
  empty); not with ``AWS_CREDENTIAL_EXPIRATION`` (botocore refreshes those from the environment);
* web identity (EKS IAM Roles for Service Accounts) from the environment, the first of the profile
  providers (``AssumeRoleWithWebIdentityProvider``; no profile and no config file, so only its
  variables): ``AWS_WEB_IDENTITY_TOKEN_FILE`` (not empty) with ``AWS_ROLE_ARN`` (not empty: botocore
  raises without it) and ``AWS_ROLE_SESSION_NAME`` (when empty or unset, ``botocore-session-<epoch
  seconds>`` of when the client is made). :class:`WebIdentity` says so; the STS exchange itself is
  :mod:`steps.aws.sts_http`'s;
* the container endpoint, when nothing before it could answer (no keys, no web identity variable, no
  ``AWS_CREDENTIAL_FILE``, no boto2 config; :func:`steps.aws.ecr_http.route` has made sure there is no
  profile and no shared file): ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`` (on
  ``http://169.254.170.2``), else ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` over ``http`` to a loopback
  address or one of botocore's hosts, with the ``Authorization`` header read from
  ``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`` (again at every fetch) else
  ``AWS_CONTAINER_AUTHORIZATION_TOKEN``; fetched as botocore's ``ContainerMetadataFetcher`` fetches
  (botocore/utils.py: ``Accept: application/json``, 2 s timeout, 3 attempts each followed by a 1 s
  sleep) and refreshed as its ``RefreshableCredentials`` are: before a request, when less than
  15 minutes remain, and a failed refresh is an error only when less than 10 minutes remain.

Both temporary kinds are refreshed as botocore's ``RefreshableCredentials`` are
(:class:`RefreshingCredentials`): before a request, when less than 15 minutes remain; a failed
refresh is an error only when less than 10 minutes remain. Web identity credentials are fetched at
their first use, as botocore's ``DeferredRefreshableCredentials`` are.

Nothing here logs, and no error carries a secret: a failure names the URL, never the token.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from steps.aws.sigv4 import Credentials
from steps.domain.errors import CredentialsError

#: botocore/utils.py ``ContainerMetadataFetcher``
CONTAINER_HOST = "169.254.170.2"
CONTAINER_ALLOWED_HOSTS = ("169.254.170.2", "169.254.170.23", "fd00:ec2::23", "localhost")
FETCH_TIMEOUT = 2.0
FETCH_ATTEMPTS = 3
FETCH_SLEEP = 1.0
#: botocore/credentials.py ``RefreshableCredentials``
ADVISORY_REFRESH = 15 * 60
MANDATORY_REFRESH = 10 * 60
_HTTP_URL = re.compile(r"http://([A-Za-z0-9.-]+)(?::([0-9]{1,5}))?(/[^\s]*)?")


@dataclass(frozen=True)
class WebIdentity:
    """botocore's web identity provider answers, from these variables: the role to assume, the file
    holding the service account's token (read at each fetch: the kubelet rotates it) and the session
    name. The token itself is never held here."""

    role_arn: str
    token_file: str
    session_name: str
    #: ``AWS_ROLE_SESSION_NAME`` is set (even empty): botocore then sends the session name before the
    #: role (its arguments' order)
    session_name_set: bool = False


def _boto2_configs(environ: Mapping[str, str]) -> list[str]:
    if "BOTO_CONFIG" in environ:
        return [environ["BOTO_CONFIG"]]
    home = environ.get("HOME") or os.path.expanduser("~")
    return ["/etc/boto.cfg", os.path.join(home, ".boto")]


def _allowed(host: str) -> bool:
    """botocore's check of a full URI's host over plain http: a loopback address or its list."""
    import ipaddress

    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
    except ValueError:
        pass
    return host in CONTAINER_ALLOWED_HOSTS


def from_environment(
    environ: Mapping[str, str],
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> Credentials | WebIdentity | ContainerCredentials | str:
    """The credentials botocore's chain would find first, when they come from a provider reproduced
    here; else why botocore must look (a profile or a shared file is :func:`steps.aws.ecr_http.route`'s
    to rule out before)."""
    if environ.get("AWS_ACCESS_KEY_ID"):
        if not environ.get("AWS_SECRET_ACCESS_KEY"):
            return "AWS_SECRET_ACCESS_KEY is empty"
        if "AWS_CREDENTIAL_EXPIRATION" in environ:
            return "AWS_CREDENTIAL_EXPIRATION is set (refreshable credentials)"
        token = next(
            (environ[n] for n in ("AWS_SECURITY_TOKEN", "AWS_SESSION_TOKEN") if environ.get(n)), None
        )
        return Credentials(environ["AWS_ACCESS_KEY_ID"], environ["AWS_SECRET_ACCESS_KEY"], token)
    if environ.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        if not environ.get("AWS_ROLE_ARN"):
            return "AWS_WEB_IDENTITY_TOKEN_FILE is set without AWS_ROLE_ARN (botocore's error to raise)"
        # botocore/credentials.py BaseAssumeRoleCredentialFetcher._generate_assume_role_name
        session_name = environ.get("AWS_ROLE_SESSION_NAME") or f"botocore-session-{int(clock())}"
        return WebIdentity(
            environ["AWS_ROLE_ARN"],
            environ["AWS_WEB_IDENTITY_TOKEN_FILE"],
            session_name,
            session_name_set="AWS_ROLE_SESSION_NAME" in environ,
        )
    for name in ("AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CREDENTIAL_FILE"):
        if name in environ:
            return f"{name} is set (a provider before the container's)"
    if any(os.path.exists(path) for path in _boto2_configs(environ)):
        return "a boto2 config exists (a provider before the container's)"
    if "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI" in environ:
        url = f"http://{CONTAINER_HOST}{environ['AWS_CONTAINER_CREDENTIALS_RELATIVE_URI']}"
    elif "AWS_CONTAINER_CREDENTIALS_FULL_URI" in environ:
        url = environ["AWS_CONTAINER_CREDENTIALS_FULL_URI"]
    else:
        return "no keys in the environment and no container endpoint (instance metadata, …)"
    match = _HTTP_URL.fullmatch(url)
    if match is None or not _allowed(match[1]):
        return "the container credentials URL is not plain http to an allowed host"
    return ContainerCredentials(url, environ, sleep=sleep)


class RefreshingCredentials:
    """Temporary credentials refreshed as botocore's ``RefreshableCredentials`` are (see the module
    docstring); a subclass fetches them (``_fetch``: the credentials and their expiry, or None for
    none). Call it for the credentials to sign with: the first call fetches when nothing was loaded
    (botocore's ``DeferredRefreshableCredentials``)."""

    def __init__(self, *, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._credentials: Credentials | None = None
        self._expiry: datetime | None = None

    def load(self) -> None:
        """Fetch now (botocore's container provider fetches when the client is made). Raises what
        fetching raises."""
        with self._lock:
            self._credentials, self._expiry = self._fetch()

    def _fetch(self) -> tuple[Credentials, datetime | None]:
        raise NotImplementedError

    def __call__(self) -> Credentials:
        # botocore's RefreshableCredentials._refresh: in the advisory window one caller refreshes and
        # the others sign with what there is; in the mandatory window (or before the first fetch)
        # every caller waits for the refresh
        if self._needs(ADVISORY_REFRESH):
            if self._lock.acquire(blocking=False):
                try:
                    if self._needs(ADVISORY_REFRESH):
                        self._refresh(mandatory=self._needs(MANDATORY_REFRESH))
                finally:
                    self._lock.release()
            elif self._needs(MANDATORY_REFRESH):
                with self._lock:
                    if self._needs(MANDATORY_REFRESH):
                        self._refresh(mandatory=True)
        if self._credentials is None:  # cannot be: a first fetch that fails raises
            raise RuntimeError("no credentials were fetched")
        return self._credentials

    def _needs(self, window: float) -> bool:
        """botocore's ``refresh_needed``: nothing fetched yet, or less than ``window`` seconds left."""
        if self._credentials is None:
            return True
        remaining = self._remaining()
        return remaining is not None and remaining < window

    def _refresh(self, *, mandatory: bool) -> None:
        """botocore's ``_protected_refresh``: a failed fetch is raised only when ``mandatory``."""
        try:
            self._credentials, self._expiry = self._fetch()
        except Exception:
            if mandatory:
                raise
            return
        left = self._remaining()
        if left is not None and left < 0:  # botocore raises RuntimeError here too
            raise RuntimeError("Credentials were refreshed, but the refreshed credentials are still expired.")

    def _remaining(self) -> float | None:
        return None if self._expiry is None else (self._expiry - self._now()).total_seconds()


class ContainerCredentials(RefreshingCredentials):
    """Credentials from the container endpoint, fetched and refreshed as botocore's
    ``ContainerProvider`` does (see the module docstring). Call it for the credentials to sign with."""

    def __init__(
        self,
        url: str,
        environ: Mapping[str, str],
        *,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__(now=now)
        match = _HTTP_URL.fullmatch(url)
        if match is None:
            raise ValueError("not a plain http URL")
        self.url = url
        self._host, self._port, self._path = match[1], int(match[2] or 80), match[3] or "/"
        self._environ = dict(environ)
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"ContainerCredentials(url={self.url!r})"

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        token = None
        if "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE" in self._environ:
            with open(self._environ["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"]) as file:
                token = file.read()
        elif "AWS_CONTAINER_AUTHORIZATION_TOKEN" in self._environ:
            token = self._environ["AWS_CONTAINER_AUTHORIZATION_TOKEN"]
        if token is not None:
            if "\r" in token or "\n" in token:
                raise ValueError("Auth token value is not a legal header value")
            headers["Authorization"] = token
        return headers

    def _fetch(self) -> tuple[Credentials, datetime | None]:
        headers = self._headers()
        attempts = 0
        while True:
            try:
                data = self._get(headers)
                break
            except CredentialsError:
                self._sleep(FETCH_SLEEP)
                attempts += 1
                if attempts >= FETCH_ATTEMPTS:
                    raise
        expiry = data["Expiration"]
        if isinstance(expiry, str):
            expiry = datetime.fromisoformat(expiry)
        if expiry is not None and (not isinstance(expiry, datetime) or expiry.tzinfo is None):
            # botocore would compare a zone-less time with an aware one and fail: its to do
            raise ValueError("the container's Expiration has no time zone")
        return Credentials(data["AccessKeyId"], data["SecretAccessKey"], data["Token"]), expiry

    def _get(self, headers: dict[str, str]) -> dict:
        import http.client

        conn = http.client.HTTPConnection(self._host, self._port, timeout=FETCH_TIMEOUT)
        try:
            conn.request("GET", self._path, headers=headers)
            response = conn.getresponse()
            text = response.read().decode("utf-8")
        except (OSError, http.client.HTTPException) as exc:
            raise CredentialsError(
                f"Received error when attempting to retrieve container metadata from {self.url}: "
                f"{type(exc).__name__}"
            ) from None
        finally:
            conn.close()
        if response.status != 200:
            raise CredentialsError(f"Received non 200 response {response.status} from container metadata")
        try:
            return json.loads(text)
        except ValueError:
            raise CredentialsError("Unable to parse JSON returned from container metadata services") from None


__all__ = [
    "ContainerCredentials",
    "CredentialsError",
    "RefreshingCredentials",
    "WebIdentity",
    "from_environment",
]

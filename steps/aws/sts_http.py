"""Web identity credentials (EKS IAM Roles for Service Accounts) with the standard library: STS's
``AssumeRoleWithWebIdentity`` asked as botocore's ``AssumeRoleWithWebIdentityProvider`` asks it, for
the lean ECR client (:mod:`steps.aws.ecr_http`).

What botocore does (botocore/credentials.py ``AssumeRoleWithWebIdentityCredentialFetcher``): at the
first request that needs credentials (``DeferredRefreshableCredentials``), and again when they near
their expiry, it reads the token file (whole, as text: the kubelet rotates it) and makes a new STS
client, unsigned (``Config(signature_version=UNSIGNED)``), in the region of the client being built.
That client sends ``POST /`` with ``Content-Type: application/x-www-form-urlencoded; charset=utf-8``
and the form ``Action=AssumeRoleWithWebIdentity&Version=2011-06-15`` then the arguments in the order
the fetcher built them (``RoleSessionName`` first when ``AWS_ROLE_SESSION_NAME`` is set, then
``RoleArn``, else ``RoleArn`` then the default session name; ``WebIdentityToken`` last), encoded
by ``urllib.parse.urlencode`` (botocore/awsrequest.py ``_prepare_body``). STS answers XML:
``AssumeRoleWithWebIdentityResult/Credentials/{AccessKeyId,SecretAccessKey,SessionToken,Expiration}``,
or ``ErrorResponse/Error/{Code,Message}``.

The endpoint is :func:`steps.aws.ecr_http.sts_endpoint`'s (``AWS_ENDPOINT_URL_STS``, then
``AWS_ENDPOINT_URL``, else ``https://sts.{region}.amazonaws.com``: ``sts_regional_endpoints`` is
``regional`` by default). Retries are botocore's default for that client, ``standard`` mode with 3
attempts (botocore/retries/standard.py): throttling codes, a 429 that is not one of the operation's
modelled errors, 500/502/503/504, ``RequestTimeout`` codes, connection failures and
``IDPCommunicationError`` (botocore/retries/special.py) are retried after ``random() * min(scale *
2 ** (attempt - 1), 20)`` seconds (1 s scale for throttling, 0.05 s otherwise). Each fetch has a new
client and so a full retry quota, which 3 attempts never spend. Connect and read timeouts: 60 s.

Errors: STS's refusals are :class:`StsApiError`, no answer :class:`StsConnectionError` (botocore's
messages, naming the URL). Neither carries the token or the credentials: STS's message is cleaned
of the token should it quote it.
"""

from __future__ import annotations

import random
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from steps import __version__
from steps.aws.credentials import CredentialsError, RefreshingCredentials, WebIdentity
from steps.aws.sigv4 import Credentials
from steps.aws.transport import (
    ENDPOINT,
    THROTTLING_CODES,
    TRANSIENT_CODES,
    TRANSIENT_STATUSES,
    backoff,
    tls_context,
)
from steps.domain.errors import StsApiError, StsConnectionError

OPERATION = "AssumeRoleWithWebIdentity"
API_VERSION = "2011-06-15"
CONTENT_TYPE = "application/x-www-form-urlencoded; charset=utf-8"
#: What CloudTrail records as these calls' ``userAgent``: this client and imagebump's version.
USER_AGENT = f"imagebump-sts-http/{__version__}"
#: botocore's defaults for a client made without timeouts
CONNECT_TIMEOUT = 60.0
READ_TIMEOUT = 60.0
#: botocore/retries/standard.py ``DEFAULT_MAX_ATTEMPTS`` (the STS client's retry mode is ``standard``)
MAX_ATTEMPTS = 3
#: botocore/retries/special.py ``RetryIDPCommunicationError``
IDP_COMMUNICATION_ERROR = "IDPCommunicationError"
#: The error codes STS's model gives AssumeRoleWithWebIdentity (a 429 with one of them is not
#: retried as throttling); a test derives them from the installed botocore.
MODELLED_ERRORS = frozenset(
    {
        "MalformedPolicyDocument",
        "PackedPolicyTooLarge",
        "IDPRejectedClaim",
        "IDPCommunicationError",
        "InvalidIdentityToken",
        "ExpiredTokenException",
        "RegionDisabledException",
    }
)


def form(identity: WebIdentity, token: str) -> bytes:
    """The request body botocore's query serializer writes for ``identity`` and ``token``."""
    arguments = [("RoleArn", identity.role_arn), ("RoleSessionName", identity.session_name)]
    if identity.session_name_set:
        arguments.reverse()
    pairs = [("Action", OPERATION), ("Version", API_VERSION), *arguments, ("WebIdentityToken", token)]
    return urlencode(pairs).encode("ascii")  # botocore/awsrequest.py _prepare_body: urlencode, UTF-8


class WebIdentityCredentials(RefreshingCredentials):
    """The role's credentials, fetched from STS at their first use and refreshed as botocore's are
    (:class:`steps.aws.credentials.RefreshingCredentials`). Call it for the credentials to sign with."""

    def __init__(
        self,
        identity: WebIdentity,
        endpoint: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        random: Callable[[], float] = random.random,
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
    ) -> None:
        super().__init__(now=now)
        match = ENDPOINT.fullmatch(endpoint)
        if match is None:
            raise ValueError(f"not a plain http(s)://host[:port] endpoint: {endpoint!r}")
        self.identity, self.endpoint = identity, endpoint.rstrip("/")
        self._https = match[1] == "https"
        self._host = match[2]
        self._port = int(match[3]) if match[3] else (443 if self._https else 80)
        self._host_header = (
            self._host if self._port == (443 if self._https else 80) else f"{self._host}:{self._port}"
        )
        self._url = self.endpoint + "/"
        self._sleep, self._random = sleep, random
        self._connect_timeout, self._read_timeout = connect_timeout, read_timeout

    def __repr__(self) -> str:
        return f"WebIdentityCredentials(role_arn={self.identity.role_arn!r}, endpoint={self.endpoint!r})"

    def _fetch(self) -> tuple[Credentials, datetime | None]:
        with open(self.identity.token_file) as file:  # as botocore's FileWebIdentityTokenLoader reads it
            token = file.read()
        body = form(self.identity, token)
        attempt = 1
        while True:
            failure: Exception
            try:
                status, headers, data = self._exchange(body, attempt)
            except StsConnectionError as exc:
                failure, status, headers = exc, 0, {}
            else:
                if status < 301:  # botocore's parsers take 3xx from 301 as errors
                    return self._credentials_in(data)
                failure = _error(status, data, token)
            code = failure.code if isinstance(failure, StsApiError) else None
            throttling = code in THROTTLING_CODES or (status == 429 and code not in MODELLED_ERRORS)
            retryable = (
                throttling
                or code in TRANSIENT_CODES
                or code == IDP_COMMUNICATION_ERROR
                or status in TRANSIENT_STATUSES
                or isinstance(failure, StsConnectionError)
            )
            if attempt >= MAX_ATTEMPTS or not retryable:
                raise failure
            self._sleep(backoff(attempt, throttling, headers, self._random()))
            attempt += 1

    @staticmethod
    def _credentials_in(data: bytes) -> tuple[Credentials, datetime]:
        try:
            root = ET.fromstring(data)
        except ET.ParseError:
            raise CredentialsError(f"STS answered {OPERATION} with XML that does not parse") from None
        found = _child(_child(root, "AssumeRoleWithWebIdentityResult"), "Credentials")
        values = {name: _text(found, name) for name in ("AccessKeyId", "SecretAccessKey", "SessionToken")}
        expiration = _text(found, "Expiration")
        if None in values.values() or expiration is None:
            raise CredentialsError(f"STS answered {OPERATION} without complete credentials")
        return (
            Credentials(values["AccessKeyId"], values["SecretAccessKey"], values["SessionToken"]),
            _expiry(expiration),
        )

    def _exchange(self, body: bytes, attempt: int) -> tuple[int, dict[str, str], bytes]:
        import http.client
        import ssl

        headers = {
            "Host": self._host_header,
            "Content-Type": CONTENT_TYPE,
            "User-Agent": USER_AGENT,
            "amz-sdk-request": f"attempt={attempt}; max={MAX_ATTEMPTS}",
        }
        if self._https:
            conn: Any = http.client.HTTPSConnection(
                self._host, self._port, timeout=self._connect_timeout, context=tls_context()
            )
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self._connect_timeout)
        try:
            try:
                conn.connect()
            except TimeoutError:
                raise StsConnectionError(f'Connect timeout on endpoint URL: "{self._url}"') from None
            except ssl.SSLError as exc:
                raise StsConnectionError(f"SSL validation failed for {self._url} {exc}") from None
            except OSError:
                raise StsConnectionError(f'Could not connect to the endpoint URL: "{self._url}"') from None
            conn.sock.settimeout(self._read_timeout)
            try:
                conn.request("POST", "/", body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except TimeoutError:
                raise StsConnectionError(f'Read timeout on endpoint URL: "{self._url}"') from None
            except (OSError, http.client.HTTPException):
                raise StsConnectionError(
                    "Connection was closed before we received a valid response from endpoint URL: "
                    f'"{self._url}".'
                ) from None
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        finally:
            conn.close()


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child(node: ET.Element | None, name: str) -> ET.Element | None:
    if node is None:
        return None
    return next((child for child in node if _local(child.tag) == name), None)


def _text(node: ET.Element | None, name: str) -> str | None:
    child = _child(node, name)
    return None if child is None else (child.text or "")


def _expiry(text: str) -> datetime:
    """botocore's timestamp parser for ``Expiration`` (ISO 8601 as STS sends it, or epoch seconds)."""
    try:
        return datetime.fromtimestamp(float(text), UTC)
    except ValueError:
        pass
    parsed = datetime.fromisoformat(text.strip())
    if parsed.tzinfo is None:  # botocore would compare it with an aware time and fail: its to do
        raise ValueError("STS's Expiration has no time zone")
    return parsed


def _error(status: int, data: bytes, token: str) -> StsApiError:
    """botocore/parsers.py: a 5xx with no body or an HTML one is the status and its reason phrase;
    otherwise ``Error/Code`` and ``Error/Message`` of STS's XML (the token cut out of the message)."""
    from http.client import responses

    stripped = data.strip()
    if status >= 500 and (not stripped or stripped.startswith(b"<html>")):
        return StsApiError(str(status), status, responses.get(status, ""))
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        return StsApiError(str(status), status, responses.get(status, ""))
    error = root if _local(root.tag) == "Error" else _child(root, "Error")
    if error is None:
        error = _child(_child(root, "Errors"), "Error")
    code = _text(error, "Code") or str(status)
    message = _text(error, "Message") or ""
    if token.strip():
        message = message.replace(token.strip(), "(the token)")
    return StsApiError(code, status, message, _text(root, "RequestId") or "")


__all__ = ["StsApiError", "StsConnectionError", "WebIdentityCredentials", "form"]

"""ECR over its own protocol with the standard library: the lean client of the steps' event path.

resolve-image and edit-kustomize ask ECR two or three small questions per event (DescribeImages by
tag or digest, DescribeRepositories, BatchGetImage, and the DescribeImages pages of the untagged-digest
index check). Importing botocore and building its client costs a fresh step process ~0.25-0.45 s of
CPU for them (issue 33); this module asks the same questions in a few milliseconds, and answers with
the dicts botocore's client returns (its shapes, timestamps as timezone-aware datetimes, a
``ResponseMetadata``), so :mod:`steps.aws.ecr`'s lookups work unchanged on either client.

The wire protocol (botocore/data/ecr/2015-09-21/service-2.json: ``protocol: json``, ``jsonVersion:
1.1``, ``targetPrefix: AmazonEC2ContainerRegistry_V20150921``, ``signingName: ecr``): ``POST /`` with
``X-Amz-Target: AmazonEC2ContainerRegistry_V20150921.<Operation>``, ``Content-Type:
application/x-amz-json-1.1``, the parameters as a JSON body, signed with Signature Version 4
(:mod:`steps.aws.sigv4`).

:func:`route` decides, from the environment, whether this client may answer exactly as botocore's
would; when it may not, :func:`steps.aws.ecr.make_client` builds botocore's client as before. The
lean client is taken only when every input botocore would read is one this module reproduces:

* credentials: the providers of botocore's chain :mod:`steps.aws.credentials` reproduces, when one
  of them is the one botocore would use (botocore/credentials.py ``create_credential_resolver``):
  keys in the environment (``AWS_ACCESS_KEY_ID`` …, first in the chain), else web identity from the
  environment (IRSA: ``AWS_WEB_IDENTITY_TOKEN_FILE`` and ``AWS_ROLE_ARN``, STS asked by
  :mod:`steps.aws.sts_http` at :func:`sts_endpoint`), else the container endpoint (ECS, EKS Pod
  Identity: ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`` / ``_FULL_URI``) when no provider before it
  could answer. SSO, profiles and the instance metadata service are botocore's;
* no shared config or credentials file (``AWS_CONFIG_FILE``, ``AWS_SHARED_CREDENTIALS_FILE``, their
  ``~/.aws`` defaults) and no ``AWS_PROFILE`` / ``AWS_DEFAULT_PROFILE``: a profile can set endpoints,
  FIPS or a CA bundle, and a missing one is botocore's error to raise;
* the endpoint: ``AWS_ENDPOINT_URL_ECR``, then ``AWS_ENDPOINT_URL`` (botocore/configprovider.py
  ``ConfiguredEndpointProvider``), both skipped when ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` is true;
  a plain ``http(s)://host[:port][/]`` only. Otherwise the regional endpoint ECR's endpoint rule set
  (botocore/data/ecr/2015-09-21/endpoint-rule-set-1.json) gives the ``aws`` partition
  (botocore/data/partitions.json) without FIPS or dual-stack: ``https://api.ecr.{region}.amazonaws.com``,
  for a region of the shape ``xx-name-N`` that partition's ``regionRegex`` matches;
* none of ``AWS_USE_FIPS_ENDPOINT`` / ``AWS_USE_DUALSTACK_ENDPOINT`` true, ``AWS_DATA_PATH``,
  ``AWS_DEFAULTS_MODE``, a proxy (``HTTP(S)_PROXY``), nor ``AWS_CA_BUNDLE`` or ``SSLKEYLOGFILE``
  for an ``https`` endpoint (ECR's or, with web identity, STS's); with web identity also none of
  ``AWS_RETRY_MODE``, ``AWS_MAX_ATTEMPTS`` (they set the STS client's retries) nor
  ``AWS_STS_REGIONAL_ENDPOINTS`` other than ``regional``. TLS trusts what botocore trusts: certifi's bundle
  (botocore/httpsession.py ``where``).

Retries are botocore's ``standard`` mode as :func:`steps.aws.ecr.make_client` configures it
(``max_attempts: 5`` retries: 6 attempts; botocore/retries/standard.py): throttling codes, a 429
that is not a modelled error, 500/502/503/504, ``RequestTimeout`` codes and connection failures are
retried after ``random() * min(scale * 2 ** (attempt - 1), 20)`` seconds (``scale`` 1 s for
throttling, 0.05 s otherwise; ``x-amz-retry-after`` raises it up to 5 s more), within a retry quota of
500 (a retry costs 14, a throttled one 5; a success gives back what its retry took, or 1). Connect
timeout 5 s, read timeout 20 s.

Errors: ECR's refusals are :class:`EcrApiError` (code, HTTP status, message, and a botocore-shaped
``response``); no answer at all is :class:`EcrConnectionError`, with botocore's messages. Neither ever
carries a credential.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from steps import __version__
from steps.aws.credentials import ContainerCredentials, RefreshingCredentials, WebIdentity, from_environment
from steps.aws.sigv4 import Credentials, sign
from steps.aws.transport import (  # shared with steps.aws.sts_http
    ENDPOINT,
    THROTTLING_CODES,
    TRANSIENT_CODES,
    TRANSIENT_STATUSES,
    backoff,
    tls_context,
)
from steps.domain.errors import DroppedConnection as _Dropped
from steps.domain.errors import EcrApiError, EcrConnectionError, EcrPaginationError

SERVICE = "ecr"
TARGET_PREFIX = "AmazonEC2ContainerRegistry_V20150921"
CONTENT_TYPE = "application/x-amz-json-1.1"
#: What CloudTrail records as these calls' ``userAgent``: this client and imagebump's version.
USER_AGENT = f"imagebump-ecr-http/{__version__}"
#: The ``aws`` partition's ``regionRegex`` in botocore/data/partitions.json (a test compares it with
#: the installed botocore's). botocore matches partitions in order and ``aws`` comes first.
AWS_PARTITION_REGEX = r"^(us|eu|ap|sa|ca|me|af|il|mx)\-\w+\-\d+$"
#: The regions this client resolves itself: the ones that regex matches, in plain ASCII (``\w``
#: and ``$`` also take other letters, ``_`` and a trailing newline: botocore's to resolve).
_AWS_REGION = re.compile(r"(?:us|eu|ap|sa|ca|me|af|il|mx)-[a-z]+-[0-9]+")
AWS_DNS_SUFFIX = "amazonaws.com"
#: A region botocore signs for at a configured endpoint: a host label (botocore/utils.py
#: ``validate_region_name``), here in lower case only.
_REGION_LABEL = re.compile(r"(?![0-9]+$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 20.0
#: botocore's ``max_attempts: 5`` in the client config counts retries; the first attempt adds one
#: (botocore/args.py ``_compute_retry_max_attempts``).
MAX_ATTEMPTS = 6
QUOTA_CAPACITY = 500
RETRY_COST = 14
THROTTLING_RETRY_COST = 5
NO_RETRY_INCREMENT = 1

#: What each operation takes and answers, from ECR's model (service-2.json; a test derives the same
#: from the installed botocore's): the input members, the errors the operation models (a 429 with
#: one of those is not retried as throttling), and the output shape — a dict for a structure (its
#: members), a one-item list for a list, ``{"<map>": value}`` for a map, ``"timestamp"`` for a
#: timestamp and None for a scalar kept as it is. botocore keeps only the modelled members.
OPERATIONS: dict[str, dict[str, Any]] = {
    "DescribeImages": {
        "input": ("registryId", "repositoryName", "imageIds", "nextToken", "maxResults", "filter"),
        "errors": (
            "ServerException",
            "InvalidParameterException",
            "RepositoryNotFoundException",
            "ImageNotFoundException",
        ),
        "output": {
            "imageDetails": [
                {
                    "registryId": None,
                    "repositoryName": None,
                    "imageDigest": None,
                    "imageTags": [None],
                    "imageSizeInBytes": None,
                    "imagePushedAt": "timestamp",
                    "imageScanStatus": {"status": None, "description": None},
                    "imageScanFindingsSummary": {
                        "imageScanCompletedAt": "timestamp",
                        "vulnerabilitySourceUpdatedAt": "timestamp",
                        "findingSeverityCounts": {"<map>": None},
                    },
                    "imageManifestMediaType": None,
                    "artifactMediaType": None,
                    "lastRecordedPullTime": "timestamp",
                    "subjectManifestDigest": None,
                    "imageStatus": None,
                    "lastArchivedAt": "timestamp",
                    "lastActivatedAt": "timestamp",
                }
            ],
            "nextToken": None,
        },
    },
    "DescribeRepositories": {
        "input": ("registryId", "repositoryNames", "nextToken", "maxResults"),
        "errors": ("ServerException", "InvalidParameterException", "RepositoryNotFoundException"),
        "output": {
            "repositories": [
                {
                    "repositoryArn": None,
                    "registryId": None,
                    "repositoryName": None,
                    "repositoryUri": None,
                    "createdAt": "timestamp",
                    "imageTagMutability": None,
                    "imageTagMutabilityExclusionFilters": [{"filterType": None, "filter": None}],
                    "imageScanningConfiguration": {"scanOnPush": None},
                    "encryptionConfiguration": {"encryptionType": None, "kmsKey": None},
                }
            ],
            "nextToken": None,
        },
    },
    "BatchGetImage": {
        "input": ("registryId", "repositoryName", "imageIds", "acceptedMediaTypes"),
        "errors": (
            "ServerException",
            "InvalidParameterException",
            "RepositoryNotFoundException",
            "LimitExceededException",
            "UnableToGetUpstreamImageException",
        ),
        "output": {
            "images": [
                {
                    "registryId": None,
                    "repositoryName": None,
                    "imageId": {"imageDigest": None, "imageTag": None},
                    "imageManifest": None,
                    "imageManifestMediaType": None,
                }
            ],
            "failures": [
                {
                    "imageId": {"imageDigest": None, "imageTag": None},
                    "failureCode": None,
                    "failureReason": None,
                }
            ],
        },
    },
}
#: botocore/data/ecr/2015-09-21/paginators-1.json: the paginated operations this client serves
#: (input and output token ``nextToken``, page size ``maxResults``).
PAGINATORS = {"describe_images": "DescribeImages", "describe_repositories": "DescribeRepositories"}


# --- route: may this client answer as botocore would? -----------------------------------------------


@dataclass(frozen=True)
class Route:
    """Where and as whom to ask ECR; ``fallback`` says why botocore must ask instead ("" = it need not)."""

    endpoint: str = ""
    credentials: Credentials | RefreshingCredentials | None = None
    fallback: str = ""


def _true(value: str | None) -> bool:
    """botocore/utils.py ``ensure_boolean`` of an environment value."""
    return value is not None and value.lower() == "true"


def regional_endpoint(region: str) -> str | None:
    """ECR's endpoint for ``region`` as botocore resolves it without FIPS or dual-stack, for a region
    of the ``aws`` partition this module recognises; None for any other (botocore's to resolve)."""
    if _AWS_REGION.fullmatch(region) is None or re.match(AWS_PARTITION_REGEX, region) is None:
        return None
    return f"https://api.ecr.{region}.{AWS_DNS_SUFFIX}"


def configured_endpoint(environ: Mapping[str, str], service: str = "ECR") -> str | None:
    """The endpoint URL the environment configures for ``service`` (its service id, upper case:
    ``ECR``, ``STS``) in botocore's order, or None."""
    if _true(environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")):
        return None
    for name in (f"AWS_ENDPOINT_URL_{service}", "AWS_ENDPOINT_URL"):
        if environ.get(name):
            return environ[name]
    return None


def sts_endpoint(region: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """Where botocore's web identity fetcher would ask STS for ``region`` (the ECR client's): the
    configured ``AWS_ENDPOINT_URL_STS`` / ``AWS_ENDPOINT_URL``, else STS's regional endpoint
    (botocore/data/sts/2011-06-15/endpoint-rule-set-1.json with ``UseGlobalEndpoint`` false, as
    ``sts_regional_endpoints`` defaults to ``regional``; the ``aws`` partition, no FIPS or
    dual-stack). Returns ``(endpoint, "")``, or ``("", why botocore must ask)`` when a setting of
    that client is one this module does not reproduce."""
    for name in ("AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS"):
        if name in environ:
            return "", f"{name} is set (the STS client's retries)"
    if environ.get("AWS_STS_REGIONAL_ENDPOINTS", "regional") != "regional":
        return "", "AWS_STS_REGIONAL_ENDPOINTS is not 'regional'"
    configured = configured_endpoint(environ, "STS")
    if configured is not None:
        if _REGION_LABEL.fullmatch(region) is None:
            return "", f"region {region!r} is not a plain host label"
        if ENDPOINT.fullmatch(configured) is None:
            return "", "the configured STS endpoint URL is not a plain http(s)://host[:port]"
        return configured.rstrip("/"), ""
    if _AWS_REGION.fullmatch(region) is None or re.match(AWS_PARTITION_REGEX, region) is None:
        return "", f"region {region!r} is not one of the aws partition's (STS)"
    return f"https://sts.{region}.{AWS_DNS_SUFFIX}", ""


def _shared_files(environ: Mapping[str, str]) -> list[str]:
    """The shared config and credentials files botocore would read (``~`` is ``HOME``'s)."""
    home = environ.get("HOME") or os.path.expanduser("~")

    def expand(path: str) -> str:
        return home + path[1:] if path == "~" or path.startswith("~/") else os.path.expanduser(path)

    return [
        expand(environ.get("AWS_CONFIG_FILE") or "~/.aws/config"),
        expand(environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials"),
    ]


def route(region: str, environ: Mapping[str, str] | None = None) -> Route:
    """Whether this client answers for ``region`` exactly as botocore's would, where and with which
    credentials (see the module docstring for what it reads)."""
    env = os.environ if environ is None else environ
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        if name in env:
            return Route(fallback=f"{name} is set")
    for name in ("AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT"):
        if _true(env.get(name)):
            return Route(fallback=f"{name} is true")
    for name in ("AWS_DATA_PATH", "AWS_DEFAULTS_MODE"):
        if name in env:
            return Route(fallback=f"{name} is set")
    if any(env.get(name) for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy")):
        return Route(fallback="a proxy is configured")
    for path in _shared_files(env):
        if os.path.exists(path):
            return Route(fallback="a shared AWS config or credentials file exists")
    credentials = from_environment(env)
    if isinstance(credentials, str):
        return Route(fallback=credentials)
    configured = configured_endpoint(env)
    if configured is not None:
        if _REGION_LABEL.fullmatch(region) is None:
            return Route(fallback=f"region {region!r} is not a plain host label")
        if ENDPOINT.fullmatch(configured) is None:
            return Route(fallback="the configured endpoint URL is not a plain http(s)://host[:port]")
        endpoint = configured.rstrip("/")
    else:
        regional = regional_endpoint(region)
        if regional is None:
            return Route(fallback=f"region {region!r} is not one of the aws partition's")
        endpoint = regional
    endpoints = [endpoint]
    if isinstance(credentials, WebIdentity):
        sts, fallback = sts_endpoint(region, env)
        if fallback:
            return Route(fallback=fallback)
        endpoints.append(sts)
    if any(url.startswith("https:") for url in endpoints):
        for name in ("AWS_CA_BUNDLE", "SSLKEYLOGFILE"):
            if name in env:
                return Route(fallback=f"{name} is set")
    if isinstance(credentials, WebIdentity):
        from steps.aws.sts_http import WebIdentityCredentials

        return Route(endpoint=endpoint, credentials=WebIdentityCredentials(credentials, endpoints[1]))
    return Route(endpoint=endpoint, credentials=credentials)


#: Called by a warm interpreter that forks steps (workflows.local.forkserver_server): the TLS context
#: is pure data (no environment), so a forked step finds it loaded.
WARM_UP = ("tls_context",)


# --- the client --------------------------------------------------------------------------------------


def _parse(shape: Any, value: Any) -> Any:
    """``value`` as botocore's JSON parser leaves it for ``shape`` (see :data:`OPERATIONS`)."""
    if shape == "timestamp":
        return _timestamp(value)
    if isinstance(shape, list):
        return [_parse(shape[0], item) for item in value] if isinstance(value, list) else value
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return value
        if "<map>" in shape:
            return {key: _parse(shape["<map>"], item) for key, item in value.items()}
        return {
            name: _parse(member, value[name]) for name, member in shape.items() if value.get(name) is not None
        }
    return value


def _timestamp(value: Any) -> Any:
    """botocore's timestamp parser (botocore/utils.py ``parse_timestamp``) for what ECR sends: epoch
    seconds, as an aware datetime in the local zone (botocore's ``tzlocal()``; UTC in a pod)."""
    if isinstance(value, bool):
        return value
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        parsed = datetime.fromisoformat(str(value))
        return parsed if parsed.tzinfo is None else parsed.astimezone()
    return datetime.fromtimestamp(seconds, UTC).astimezone()


class _Quota:
    """botocore/retries/quota.py ``RetryQuota``."""

    def __init__(self) -> None:
        self.available = QUOTA_CAPACITY
        self._lock = threading.Lock()

    def acquire(self, amount: int) -> bool:
        with self._lock:
            if amount > self.available:
                return False
            self.available -= amount
            return True

    def release(self, amount: int) -> None:
        with self._lock:
            self.available = min(QUOTA_CAPACITY, self.available + amount)


class _Paginator:
    def __init__(self, client: EcrClient, operation: str) -> None:
        self._client, self._operation = client, operation

    def paginate(self, PaginationConfig: Mapping[str, Any] | None = None, **params: Any) -> Iterator[dict]:  # noqa: N803 - botocore's name
        """Every page, as botocore's paginator gives them (``PageSize`` is ``maxResults``)."""
        size = (PaginationConfig or {}).get("PageSize")
        if size is not None:
            params["maxResults"] = size
        seen: set[str] = set()
        while True:
            page = self._client.call(self._operation, params)
            yield page
            token = page.get("nextToken")
            if not token:
                return
            if token in seen:
                raise EcrPaginationError(f"the same next token was received twice: {token}")
            seen.add(token)
            params = {**params, "nextToken": token}


class EcrClient:
    """ECR's read operations the steps' event path uses, over ``http.client`` (see the module docstring).

    ``describe_images``, ``describe_repositories`` and ``batch_get_image`` take botocore's keyword
    arguments and return botocore's dicts; ``get_paginator`` serves ``describe_images`` and
    ``describe_repositories``. Safe to share between threads (each call takes its own connection
    from a small pool). ``sleep``, ``now`` and ``random`` are injectable for tests.
    """

    def __init__(
        self,
        region: str,
        endpoint: str,
        credentials: Credentials | Callable[[], Credentials],
        *,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        random: Callable[[], float] = random.random,
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
    ) -> None:
        match = ENDPOINT.fullmatch(endpoint)
        if match is None:
            raise ValueError(f"not a plain http(s)://host[:port] endpoint: {endpoint!r}")
        self.region, self.endpoint = region, endpoint.rstrip("/")
        self._credentials = credentials
        self._https = match[1] == "https"
        self._host = match[2]
        self._port = int(match[3]) if match[3] else (443 if self._https else 80)
        default_port = 443 if self._https else 80
        # the Host header, as botocore/auth.py _host_from_url writes it
        self._host_header = self._host if self._port == default_port else f"{self._host}:{self._port}"
        self._url = self.endpoint + "/"
        self._sleep, self._now, self._random = sleep, now, random
        self._connect_timeout, self._read_timeout = connect_timeout, read_timeout
        self._idle: list[Any] = []
        self._pool_lock = threading.Lock()
        self._quota = _Quota()
        # What the first call needs, loaded now: the "ecr client" phase, and in edit-kustomize on the
        # thread that builds the client while the clone runs.
        import http.client  # noqa: F401

        if self._https:
            tls_context()

    def __repr__(self) -> str:
        return f"EcrClient(region={self.region!r}, endpoint={self.endpoint!r})"

    # botocore's method names
    def describe_images(self, **params: Any) -> dict[str, Any]:
        return self.call("DescribeImages", params)

    def describe_repositories(self, **params: Any) -> dict[str, Any]:
        return self.call("DescribeRepositories", params)

    def batch_get_image(self, **params: Any) -> dict[str, Any]:
        return self.call("BatchGetImage", params)

    def get_paginator(self, name: str) -> _Paginator:
        if name not in PAGINATORS:
            raise ValueError(f"no paginator {name!r} in the lean ECR client (it has {sorted(PAGINATORS)})")
        return _Paginator(self, PAGINATORS[name])

    def close(self) -> None:
        with self._pool_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # --- one operation, with botocore's standard retries

    def call(self, operation: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """``operation`` with ``params``; its parsed answer, or :class:`EcrApiError` /
        :class:`EcrConnectionError` once the retries are spent."""
        spec = OPERATIONS[operation]
        unknown = sorted(set(params) - set(spec["input"]))
        if unknown:
            raise ValueError(f"{operation} takes no parameter {', '.join(unknown)}")
        body = json.dumps(dict(params)).encode("utf-8")  # botocore/serialize.py JSONSerializer
        attempt = 1
        acquired = 0
        while True:
            failure: Exception
            try:
                status, headers, data = self._send(operation, body, attempt)
            except EcrConnectionError as exc:
                failure, status, headers = exc, 0, {}
            else:
                if status < 300:
                    self._quota.release(acquired or NO_RETRY_INCREMENT)
                    parsed = _parse(spec["output"], self._json(data))
                    parsed["ResponseMetadata"] = {
                        "RequestId": headers.get("x-amzn-requestid", ""),
                        "HTTPStatusCode": status,
                        "HTTPHeaders": headers,
                        "RetryAttempts": attempt - 1,
                    }
                    return parsed
                failure = self._error(operation, status, headers, data)
            code = failure.code if isinstance(failure, EcrApiError) else None
            throttling = code in THROTTLING_CODES or (status == 429 and code not in spec["errors"])
            retryable = (
                throttling
                or code in TRANSIENT_CODES
                or status in TRANSIENT_STATUSES
                or isinstance(failure, EcrConnectionError)
            )
            if attempt >= MAX_ATTEMPTS or not retryable:
                raise failure
            cost = THROTTLING_RETRY_COST if throttling else RETRY_COST
            if not self._quota.acquire(cost):
                raise failure
            acquired = cost
            self._sleep(backoff(attempt, throttling, headers, self._random()))
            attempt += 1

    @staticmethod
    def _json(data: bytes) -> Any:
        """botocore/parsers.py ``_parse_body_as_json``: {} for no body, ``{"message": text}`` for one
        that is not JSON."""
        if not data:
            return {}
        text = data.decode("utf-8")
        try:
            return json.loads(text)
        except ValueError:
            return {"message": text}

    def _error(self, operation: str, status: int, headers: dict[str, str], data: bytes) -> EcrApiError:
        """botocore/parsers.py: a 5xx with no body or an HTML one is the status and its reason phrase;
        otherwise ``__type`` (after ``:`` is cut, after ``#`` kept) or the status, and ``message``."""
        request_id = headers.get("x-amzn-requestid", "")
        stripped = data.strip()
        if status >= 500 and (not stripped or stripped.startswith(b"<html>")):
            from http.client import responses

            return EcrApiError(operation, str(status), status, responses.get(status, ""), request_id)
        body = self._json(data)
        if not isinstance(body, dict):
            body = {}
        message = body.get("message", body.get("Message", ""))
        code = body.get("__type", str(status))
        if isinstance(code, str):
            code = code.split(":", 1)[0]
            code = code.rsplit("#", 1)[1] if "#" in code else code
        return EcrApiError(operation, str(code), status, str(message), request_id)

    # --- one HTTP exchange

    def _take(self) -> tuple[Any, bool]:
        """A connection from the pool (reused: True) or a new one (not connected yet)."""
        with self._pool_lock:
            if self._idle:
                return self._idle.pop(), True
        import http.client

        if self._https:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=self._connect_timeout, context=tls_context()
            ), False
        return http.client.HTTPConnection(self._host, self._port, timeout=self._connect_timeout), False

    def _give_back(self, conn: Any) -> None:
        with self._pool_lock:
            if len(self._idle) < 10:
                self._idle.append(conn)
                return
        conn.close()

    def _send(self, operation: str, body: bytes, attempt: int) -> tuple[int, dict[str, str], bytes]:
        headers = sign(
            method="POST",
            host=self._host_header,
            path="/",
            headers={"X-Amz-Target": f"{TARGET_PREFIX}.{operation}", "Content-Type": CONTENT_TYPE},
            body=body,
            credentials=self._credentials
            if isinstance(self._credentials, Credentials)
            else self._credentials(),
            region=self.region,
            service=SERVICE,
            now=self._now(),
        )
        headers["Host"] = self._host_header
        headers["User-Agent"] = USER_AGENT
        headers["amz-sdk-request"] = f"attempt={attempt}; max={MAX_ATTEMPTS}"
        conn, reused = self._take()
        try:
            return self._exchange(conn, headers, body)
        except _Dropped:
            conn.close()
            if not reused:
                raise EcrConnectionError(_closed(self._url)) from None
        # A kept-alive connection the server closed meanwhile: urllib3 finds it dropped before using
        # it and opens another; so does this, without counting an attempt.
        conn, _ = self._take_new()
        try:
            return self._exchange(conn, headers, body)
        except _Dropped:
            conn.close()
            raise EcrConnectionError(_closed(self._url)) from None

    def _take_new(self) -> tuple[Any, bool]:
        with self._pool_lock:
            idle, self._idle = self._idle, []
        for stale in idle:
            stale.close()
        return self._take()

    def _exchange(self, conn: Any, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        import http.client
        import ssl

        if conn.sock is None:
            try:
                conn.connect()
            except TimeoutError:
                conn.close()
                raise EcrConnectionError(f'Connect timeout on endpoint URL: "{self._url}"') from None
            except ssl.SSLError as exc:
                conn.close()
                raise EcrConnectionError(f"SSL validation failed for {self._url} {exc}") from None
            except OSError:
                conn.close()
                raise EcrConnectionError(f'Could not connect to the endpoint URL: "{self._url}"') from None
            conn.sock.settimeout(self._read_timeout)
        try:
            conn.request("POST", "/", body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except TimeoutError:
            conn.close()
            raise EcrConnectionError(f'Read timeout on endpoint URL: "{self._url}"') from None
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
            raise _Dropped() from exc
        except (OSError, http.client.HTTPException):
            conn.close()
            raise EcrConnectionError(_closed(self._url)) from None
        answer: dict[str, str] = {}
        for name, value in response.getheaders():  # a repeated header's values joined, as urllib3 does
            key = name.lower()
            answer[key] = f"{answer[key]}, {value}" if key in answer else value
        if response.will_close:
            conn.close()
        else:
            self._give_back(conn)
        return response.status, answer, data


def _closed(url: str) -> str:
    return f'Connection was closed before we received a valid response from endpoint URL: "{url}".'


def lean_client(region: str, environ: Mapping[str, str] | None = None) -> EcrClient | None:
    """This module's client for ``region`` when it answers as botocore's would; None otherwise.

    Credentials from the container endpoint are fetched now, as botocore fetches them when it makes
    its client; if that fails, botocore makes the client and fetches again, and raises its own error.
    Web identity credentials are fetched at the first call, as botocore's are; an STS failure is then
    that call's error (:mod:`steps.aws.sts_http`), as it would be botocore's.
    """
    chosen = route(region, environ)
    if chosen.fallback or chosen.credentials is None:
        return None
    if isinstance(chosen.credentials, ContainerCredentials):
        try:
            chosen.credentials.load()
        except Exception:  # noqa: BLE001 - botocore's to report, in its words
            return None
    return EcrClient(region, chosen.endpoint, chosen.credentials)


__all__ = [
    "EcrApiError",
    "EcrClient",
    "EcrConnectionError",
    "EcrPaginationError",
    "Route",
    "lean_client",
    "route",
]

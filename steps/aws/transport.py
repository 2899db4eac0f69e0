"""What the lean AWS clients of the step pods share (:mod:`steps.aws.ecr_http`, :mod:`steps.aws.sts_http`):
the endpoint URL shape they take, botocore's standard retry mode's constants and error codes, the
``x-amz-retry-after`` header, and the TLS context. Standard library only.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import Any

#: A configured endpoint the lean clients take as it is: scheme, lower-case host or IPv4 address, port.
ENDPOINT = re.compile(r"(https?)://([a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::([0-9]{1,5}))?/?")

#: botocore/retries/standard.py's backoff: its cap, the base of each kind, and the most a
#: ``x-amz-retry-after`` may add.
MAX_BACKOFF = 20.0
THROTTLING_SCALE = 1.0
NON_THROTTLING_SCALE = 0.05
RETRY_AFTER_MAX_ADDITIONAL = 5.0
#: botocore/retries/standard.py: ``ThrottledRetryableChecker._THROTTLED_ERROR_CODES``
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
#: botocore/retries/standard.py: ``TransientRetryableChecker``
TRANSIENT_CODES = frozenset({"RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete"})
TRANSIENT_STATUSES = frozenset({500, 502, 503, 504})


# --- TLS ---------------------------------------------------------------------------------------------

_TLS: Any = None
_TLS_LOCK = threading.Lock()


def ca_bundle() -> str:
    """The CA bundle botocore verifies ECR's certificate with (botocore/httpsession.py: certifi's
    ``where()``, else botocore's own ``cacert.pem``), found without importing either."""
    from importlib.util import find_spec

    for package, name in (("certifi", "cacert.pem"), ("botocore", "cacert.pem")):
        spec = find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            path = os.path.join(list(spec.submodule_search_locations)[0], name)
            if os.path.isfile(path):
                return path
    raise FileNotFoundError("no CA bundle: neither certifi nor botocore is installed")


def tls_context() -> Any:
    """The TLS context for ``https`` endpoints, built once per process (loading the bundle is the
    cost) and from no environment, so a warm interpreter may build it before it forks: botocore's
    (botocore/httpsession.py ``create_urllib3_context``: TLS client, no compression, no session
    tickets, post-handshake auth, certificates required) on :func:`ca_bundle` only, with the host
    name checked (urllib3 checks it for botocore). ``SSLKEYLOGFILE``, which botocore reads, is left
    to botocore (:func:`route`)."""
    global _TLS
    with _TLS_LOCK:
        if _TLS is None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_TICKET
            context.post_handshake_auth = True
            context.verify_mode = ssl.CERT_REQUIRED
            context.check_hostname = True
            context.load_verify_locations(cafile=ca_bundle())
            _TLS = context
        return _TLS


def backoff(attempt: int, throttling: bool, headers: Mapping[str, str], rand: float) -> float:
    """Seconds before attempt ``attempt + 1`` in botocore's standard retry mode
    (botocore/retries/standard.py ``ExponentialBackoff`` and ``_get_retry_after_delay``): full jitter
    over ``scale·2^(attempt−1)`` capped at 20 s (``scale`` 1 s after throttling, 50 ms otherwise),
    raised to ``x-amz-retry-after`` up to 5 s past it. ``rand``: a draw from [0, 1)."""
    scale = THROTTLING_SCALE if throttling else NON_THROTTLING_SCALE
    delay = rand * min(scale * 2 ** (attempt - 1), MAX_BACKOFF)
    after = retry_after(headers)
    if after is not None:
        delay = max(delay, min(after, RETRY_AFTER_MAX_ADDITIONAL + delay))
    return delay


def retry_after(headers: Mapping[str, str]) -> float | None:
    """botocore/retries/standard.py ``_get_retry_after_delay``: ``x-amz-retry-after`` in milliseconds."""
    value = headers.get("x-amz-retry-after")
    if value is None:
        return None
    try:
        seconds = int(value) / 1000.0
    except (ValueError, OverflowError):
        return None
    return seconds if seconds >= 0 else None

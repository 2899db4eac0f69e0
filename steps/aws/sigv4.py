"""AWS Signature Version 4 for a JSON-protocol request: the ``Authorization`` header, computed as
botocore's ``SigV4Auth`` computes it (botocore/auth.py), with the standard library only.

The steps' lean ECR client (:mod:`steps.aws.ecr_http`) signs with it; tests prove, for generated
requests, that its header equals botocore's own signer's. The algorithm is AWS's ("Create a signed
AWS API request", AWS Identity and Access Management User Guide, Signature Version 4):

* the canonical request: method, the normalised path, the sorted query, every header but the ones
  botocore leaves out (``SIGNED_HEADERS_BLACKLIST``) lower-cased and sorted with its value trimmed
  and inner whitespace collapsed, the list of those names, and the SHA-256 of the body;
* the string to sign: ``AWS4-HMAC-SHA256``, the time, the scope (``DATE/REGION/SERVICE/aws4_request``)
  and the SHA-256 of the canonical request;
* the signature: HMAC-SHA256 chained over the date, the region, the service and ``aws4_request``
  from ``"AWS4" + secret``, then over the string to sign.

Secrets never leave this module but as the signature: :class:`Credentials` does not show them in its
``repr``, and nothing here logs.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from datetime import datetime

#: Headers botocore does not sign (botocore/auth.py ``SIGNED_HEADERS_BLACKLIST``): a proxy or the
#: HTTP layer may change them on the way.
UNSIGNED_HEADERS = frozenset(
    {
        "baggage",
        "connection",
        "expect",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "traceparent",
        "tracestate",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "x-amzn-trace-id",
    }
)
ALGORITHM = "AWS4-HMAC-SHA256"
#: botocore/auth.py ``SIGV4_TIMESTAMP``
TIMESTAMP_FORMAT = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class Credentials:
    """An access key, its secret and the session token of temporary credentials (None for a user's
    long-term key). The secret and the token are kept out of ``repr``."""

    access_key: str
    secret_key: str = field(repr=False)
    token: str | None = field(default=None, repr=False)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def _canonical_headers(headers: dict[str, str]) -> tuple[str, str]:
    """(canonical headers, signed header names) of ``headers`` (names given once each)."""
    signed = {name.lower(): value for name, value in headers.items() if name.lower() not in UNSIGNED_HEADERS}
    names = sorted(signed)
    canonical = "\n".join(f"{name}:{' '.join(signed[name].split())}" for name in names)
    return canonical, ";".join(names)


def sign(
    *,
    method: str,
    host: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    credentials: Credentials,
    region: str,
    service: str,
    now: datetime,
) -> dict[str, str]:
    """``headers`` with ``X-Amz-Date``, ``X-Amz-Security-Token`` (temporary credentials) and
    ``Authorization`` added, as botocore's ``SigV4Auth.add_auth`` leaves a request with no query.

    ``host`` is the ``Host`` header's value (lower case, the port only when not the scheme's
    default: botocore/auth.py ``_host_from_url``); it is signed and sent. ``path`` must be
    normalised already (``/`` for ECR). ``now`` is a UTC time (naive or aware).
    """
    stamp = now.strftime(TIMESTAMP_FORMAT)
    day = stamp[:8]
    out = {
        name: value for name, value in headers.items() if name.lower() not in ("authorization", "x-amz-date")
    }
    out["X-Amz-Date"] = stamp
    if credentials.token:
        out = {name: value for name, value in out.items() if name.lower() != "x-amz-security-token"}
        out["X-Amz-Security-Token"] = credentials.token
    to_sign = {name: value for name, value in out.items() if name.lower() != "host"}
    to_sign["host"] = host
    canonical_headers, signed_names = _canonical_headers(to_sign)
    canonical_request = "\n".join(
        (
            method.upper(),
            path,
            "",  # no query string
            canonical_headers + "\n",
            signed_names,
            hashlib.sha256(body).hexdigest(),
        )
    )
    scope = f"{day}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(
        (ALGORITHM, stamp, scope, hashlib.sha256(canonical_request.encode("utf-8")).hexdigest())
    )
    key = _hmac(f"AWS4{credentials.secret_key}".encode(), day)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    out["Authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
        f"SignedHeaders={signed_names}, Signature={signature}"
    )
    return out


__all__ = ["Credentials", "sign"]

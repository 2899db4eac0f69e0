"""The signature of the generic JSON webhook: HMAC-SHA256 over a timestamp and the body, the scheme
Stripe uses (``t=…,v1=…``). GitHub's ``X-Hub-Signature-256: sha256=<hex>`` is an HMAC-SHA256 of the
body alone, with no timestamp, so a receiver of GitHub's cannot refuse a replayed request; ours can.

Header ``X-Imagebump-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`` keyed with
the destination's secret. A receiver recomputes the HMAC over the exact bytes it received, compares
in constant time, and rejects a timestamp older (or newer) than its tolerance (default 300 s), so a
captured request cannot be replayed later. Pure: the clock is a parameter.
"""

from __future__ import annotations

import hashlib
import hmac

HEADER = "X-Imagebump-Signature"
#: Seconds a receiver accepts between the timestamp and its own clock.
TOLERANCE = 300


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The header value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(secret: str, header: str, body: bytes, now: float, tolerance: int = TOLERANCE) -> bool:
    """What a receiver runs: True when ``header`` signs ``body`` and its timestamp is fresh."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > tolerance:
        return False
    expected = sign(secret, body, timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))

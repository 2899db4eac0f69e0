"""Delivery: each message once (the ledger), with timeouts and a bounded retry.

A destination that is down, slow or answering 5xx never raises: after :data:`ATTEMPTS` tries
the message is logged (redacted) and counted as ``failed``; the claim is released so a later run
of the same outcome may try again. Results: ``sent``, ``duplicate`` (the ledger holds the key:
a retry, a redelivery, a resubmit), ``failed``. The clock, the sleeper and the HTTP post are
parameters, so tests need no real sleeps.
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from steps.domain.errors import ImagebumpError
from steps.notify import github
from steps.notify.config import Destination
from steps.notify.decide import GITHUB_ONLY, Message
from steps.notify.ledger import Ledger
from steps.notify.payloads import encode
from steps.notify.signature import HEADER, sign
from steps.runtime.redact import redact

log = logging.getLogger("imagebump.notify")

METRIC = "notifications_total"
RESULTS = ("sent", "duplicate", "failed")
ATTEMPTS = 3
TIMEOUT = 5.0
BACKOFF = (1.0, 2.0)

#: ``notifications_total{result}`` of this process (the step also outputs its own counts).
TOTALS: Counter[str] = Counter()

Post = Callable[[str, bytes, Mapping[str, str], float], int]


def http_post(url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> int:
    """POST ``body``; the HTTP status (an HTTP error's status is returned, not raised)."""
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - configured URL
            response.read()
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@dataclass
class Report:
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


def _once(
    destination: Destination, message: Message, post: Post, clock: Callable[[], float], timeout: float
) -> str:
    body = encode(destination.kind, message)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "imagebump",
        "X-Imagebump-Delivery": message.key,
    }
    if destination.kind == "webhook":
        headers[HEADER] = sign(destination.secret, body, int(clock()))
    try:
        status = post(destination.url, body, headers, timeout)
    except (OSError, TimeoutError) as exc:  # refused, reset, timed out (urllib wraps them in OSError)
        return f"{type(exc).__name__}"
    if 200 <= status < 300:
        return ""
    return f"HTTP {status}"


def _github(message: Message, forge_for: github.ForgeFor | None) -> str:
    try:
        return github.send(message, forge_for or github.default_forge_for)
    except (ImagebumpError, OSError) as exc:  # no credentials, GitHub unreachable: counted, not raised
        return type(exc).__name__


def deliver(
    messages: Iterable[Message],
    destinations: Mapping[str, Destination],
    ledger: Ledger,
    *,
    post: Post = http_post,
    forge_for: github.ForgeFor | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
    attempts: int = ATTEMPTS,
    timeout: float = TIMEOUT,
) -> Report:
    """Send each message not sent before; never raises for a destination's failure."""
    report = Report()
    for message in messages:
        destination = destinations[message.destination]
        # no secret in any message: a step's error text, a URL the outcome carries
        message = replace(message, fields={k: redact(v) for k, v in message.fields.items()})
        if destination.kind == github.KIND and not github.applies(message):
            continue  # nothing for GitHub to show: not a message
        if destination.kind != github.KIND and message.kind in GITHUB_ONLY:
            continue  # a status's end, not news for the team's channels
        if not ledger.claim(message.key):
            result = "duplicate"
        else:
            error = ""
            for attempt in range(attempts):
                error = (
                    _github(message, forge_for)
                    if destination.kind == github.KIND
                    else _once(destination, message, post, clock, timeout)
                )
                retryable = error and not (error.startswith("HTTP 4") and error != "HTTP 429")
                if not retryable or attempt == attempts - 1:
                    break
                sleep(BACKOFF[min(attempt, len(BACKOFF) - 1)])
            if error:
                ledger.release(message.key)
                result = "failed"
                text = redact(
                    f"notification {message.kind} for {message.target} to {destination.name} "
                    f"({destination.kind}) failed after {attempts} attempt(s): {error}",
                    [destination.url, destination.secret],
                )
                report.failures.append(text)
                log.warning(text, extra={"destination": destination.name, "result": "failed"})
            else:
                result = "sent"
        report.counts[result] += 1
        TOTALS[result] += 1
    return report


def metrics_text(totals: Mapping[str, int] = TOTALS) -> str:
    """``notifications_total{result}`` in Prometheus' text format."""
    lines = [
        f"# HELP {METRIC} Notifications by result: sent, duplicate (already sent), failed.",
        f"# TYPE {METRIC} counter",
    ]
    lines += [f'{METRIC}{{result="{r}"}} {totals.get(r, 0)}' for r in RESULTS]
    return "\n".join(lines) + "\n"

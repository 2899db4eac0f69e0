"""Delivery: each message once (the ledger), with timeouts, a bounded retry and a time budget.

A destination that is down, slow, answering 5xx, redirecting or speaking no HTTP never raises:
after :data:`ATTEMPTS` tries the message is logged (redacted) and counted as ``failed``; the claim
is released so a later run of the same outcome may try again. Nothing one message meets (a ledger
that fails, an exception nobody expected) stops the others or loses the counts. Results: ``sent``,
``duplicate`` (the ledger holds the key: a retry, a redelivery, a resubmit), ``failed``.

Time is bounded twice: each request has :data:`REQUEST_DEADLINE` in all (a receiver trickling its
answer a byte at a time meets it, not only one socket read's :data:`TIMEOUT`), and the run has a
budget (:data:`BUDGET`, below the exit handler pod's ``activeDeadlineSeconds``): once spent, the
messages left are not tried and not claimed, so a rerun sends them. A 429's ``Retry-After``
(seconds or an HTTP date) is honoured; a wait beyond :data:`RETRY_AFTER_CAP` or the budget ends the
message's tries instead. Delivery is at least once per destination: a request that timed out
after the receiver accepted it is sent again. The clocks, the sleeper and the HTTP post are
parameters, so tests need no real sleeps.
"""

from __future__ import annotations

import email.utils
import functools
import http.client
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC

from steps.domain.errors import ImagebumpError, TransientError
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
#: One socket operation (connect, one read).
TIMEOUT = 5.0
#: A request's whole life: connecting, sending, and reading the whole answer.
REQUEST_DEADLINE = 10.0
BACKOFF = (1.0, 2.0)
#: The longest ``Retry-After`` waited for; a longer one ends the message's tries (a later run sends it).
RETRY_AFTER_CAP = 30.0
#: ``activeDeadlineSeconds`` of the exit handler's pod and of notify-verifying's (workflows/notify.py
#: renders these): Kubernetes kills a pod that outlives it.
EXIT_HANDLER_DEADLINE = 300
VERIFYING_DEADLINE = 120
#: What a pod needs besides delivering: starting, reading its Workflow, writing its outputs.
MARGIN = 60.0
#: The time a run spends delivering, at most.
BUDGET = EXIT_HANDLER_DEADLINE - MARGIN
VERIFYING_BUDGET = VERIFYING_DEADLINE - MARGIN
#: The most of an answer's body read (Slack answers ``ok``; nothing in it is used).
MAX_ANSWER = 64 * 1024

#: ``notifications_total{result}`` of this process (the step also outputs its own counts).
TOTALS: Counter[str] = Counter()


@dataclass(frozen=True)
class Reply:
    """What a receiver answered: its status and its ``Retry-After`` header (``""`` when none)."""

    status: int
    retry_after: str = ""


#: ``post(url, body, headers, deadline)``: the receiver's :class:`Reply` (or only its status);
#: ``deadline`` is the request's whole time in seconds.
Post = Callable[[str, bytes, Mapping[str, str], float], "Reply | int"]


class _Watchdog:
    """Shuts the request's sockets down once its deadline passes: a read blocked on a receiver that
    trickles its answer then ends (socket timeouts bound one read only)."""

    def __init__(self, seconds: float) -> None:
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                self._shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # closed already


def _watched(base: type[http.client.HTTPConnection]) -> type[http.client.HTTPConnection]:
    class Watched(base):  # type: ignore[valid-type,misc]
        def __init__(self, *args: object, watchdog: _Watchdog, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            self._watchdog = watchdog

        def connect(self) -> None:
            super().connect()
            self._watchdog.watch(self.sock)

    return Watched


_HTTPConnection = _watched(http.client.HTTPConnection)
_HTTPSConnection = _watched(http.client.HTTPSConnection)


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_HTTPConnection, watchdog=self._watchdog), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        conn = functools.partial(_HTTPSConnection, watchdog=self._watchdog)
        return self.do_open(conn, req, context=self._context)  # type: ignore[attr-defined]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: urllib would send a 301/302/303 again as a GET without the body, to
    whatever host ``Location`` names, with our headers (the webhook's signature) and count it sent.
    A 3xx is answered as itself (an :class:`urllib.error.HTTPError`)."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def http_post(url: str, body: bytes, headers: Mapping[str, str], deadline: float) -> Reply:
    """POST ``body``; the receiver's answer (an HTTP error's status is returned, not raised).

    ``deadline``: the request's whole time (each socket operation also has :data:`TIMEOUT`). A
    request past it raises :class:`TimeoutError`; one that meets no HTTP raises what
    :mod:`http.client` raises (an :class:`http.client.HTTPException`) or an :class:`OSError`.
    """
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    with _Watchdog(deadline) as watchdog:
        opener = urllib.request.build_opener(_NoRedirect, _HTTPHandler(watchdog), _HTTPSHandler(watchdog))
        try:
            with opener.open(request, timeout=min(TIMEOUT, deadline)) as response:
                response.read(MAX_ANSWER)
                if watchdog.fired:  # a read cut short returns what came, without an error
                    raise TimeoutError(f"no whole answer within {deadline:g} s")
                return Reply(response.status, response.headers.get("Retry-After", ""))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, (exc.headers or {}).get("Retry-After", "") or "")
        except (OSError, http.client.HTTPException):
            if watchdog.fired:
                raise TimeoutError(f"no whole answer within {deadline:g} s") from None
            raise


def retry_after(value: str, now: float) -> float | None:
    """Seconds ``Retry-After`` asks for: delay-seconds or an HTTP date (RFC 9110 section 10.2.3)."""
    value = (value or "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


@dataclass
class Report:
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Try:
    """One attempt: ``error`` (``""``: delivered), whether trying again may help, and how long the
    receiver asked to be left alone (``Retry-After``, seconds)."""

    error: str = ""
    retryable: bool = False
    wait: float | None = None


def _once(
    destination: Destination, message: Message, post: Post, clock: Callable[[], float], deadline: float
) -> _Try:
    body = encode(destination.kind, message)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "imagebump",
        "X-Imagebump-Delivery": message.key,
    }
    if destination.kind == "webhook":
        headers[HEADER] = sign(destination.secret, body, int(clock()))
    try:
        answer = post(destination.url, body, headers, deadline)
    except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out, not HTTP
        return _Try(type(exc).__name__, retryable=True)
    reply = answer if isinstance(answer, Reply) else Reply(int(answer))
    status = reply.status
    if 200 <= status < 300:
        return _Try()
    if 300 <= status < 400:  # never followed: the receiver moved or is not what was configured
        return _Try(f"HTTP {status} (redirects are not followed; configure the final URL)")
    if status == 429:
        return _Try(f"HTTP {status}", retryable=True, wait=retry_after(reply.retry_after, clock()))
    return _Try(f"HTTP {status}", retryable=status >= 500)


def _github(message: Message, forge_for: github.ForgeFor | None) -> _Try:
    try:
        error = github.send(message, forge_for or github.default_forge_for)
    except TransientError as exc:  # 5xx, a rate limit, a timeout: another try may do
        return _Try(type(exc).__name__, retryable=True)
    except ImagebumpError as exc:  # refused (401/403), not found (404), invalid (422): it would again
        return _Try(type(exc).__name__)
    except (OSError, http.client.HTTPException) as exc:  # GitHub unreachable
        return _Try(type(exc).__name__, retryable=True)
    return _Try(error)


def deliver(
    messages: Iterable[Message],
    destinations: Mapping[str, Destination],
    ledger: Ledger,
    *,
    post: Post = http_post,
    forge_for: github.ForgeFor | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
    attempts: int = ATTEMPTS,
    timeout: float = REQUEST_DEADLINE,
    budget: float = BUDGET,
) -> Report:
    """Send each message not sent before; never raises.

    ``clock``: wall time (the webhook's signature, ``Retry-After`` dates); ``monotonic``: the
    budget's and the waits' time; ``timeout``: a request's whole time; ``budget``: the run's."""
    report = Report()
    ends = monotonic() + budget
    for message in messages:
        try:
            result = _deliver_one(
                message,
                destinations,
                ledger,
                report,
                post,
                forge_for,
                sleep,
                clock,
                monotonic,
                attempts,
                timeout,
                ends,
            )
        except Exception as exc:  # noqa: BLE001 - one message's surprise never stops the others
            result = "failed"
            text = f"notification {message.kind} for {message.target} to {message.destination}: {type(exc).__name__}"
            report.failures.append(text)
            log.warning(text, extra={"destination": message.destination, "result": "failed"})
        if result:
            report.counts[result] += 1
            TOTALS[result] += 1
    return report


def _deliver_one(
    message: Message,
    destinations: Mapping[str, Destination],
    ledger: Ledger,
    report: Report,
    post: Post,
    forge_for: github.ForgeFor | None,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    monotonic: Callable[[], float],
    attempts: int,
    timeout: float,
    ends: float,
) -> str:
    """``message``'s result (``""``: not a message for its destination)."""
    destination = destinations[message.destination]
    # no secret in any message: a step's error text, a URL the outcome carries
    message = replace(message, fields={k: redact(v) for k, v in message.fields.items()})
    if destination.kind == github.KIND and not github.applies(message):
        return ""  # nothing for GitHub to show: not a message
    if destination.kind != github.KIND and message.kind in GITHUB_ONLY:
        return ""  # a status's end, not news for the team's channels

    def failed(error: str, tried: int) -> str:
        text = redact(
            f"notification {message.kind} for {message.target} to {destination.name} "
            f"({destination.kind}) failed after {tried} attempt(s): {error}",
            [destination.url, destination.secret],
        )
        report.failures.append(text)
        log.warning(text, extra={"destination": destination.name, "result": "failed"})
        return "failed"

    if monotonic() >= ends:  # out of time: not tried and not claimed, so a rerun sends it
        return failed("the run's time budget is spent", 0)
    try:
        claimed = ledger.claim(message.key)
    except Exception as exc:  # noqa: BLE001 - an unreachable ledger: not sent, the others still go
        return failed(f"the ledger could not be written ({type(exc).__name__})", 0)
    if not claimed:
        return "duplicate"
    outcome, tried = _Try("not tried"), 0
    for attempt in range(attempts):
        left = ends - monotonic()
        if left <= 0:
            break
        tried += 1
        try:
            if destination.kind == github.KIND:
                outcome = _github(message, forge_for)
            else:
                outcome = _once(destination, message, post, clock, min(timeout, left))
        except Exception as exc:  # noqa: BLE001 - unforeseen: this message failed, its claim goes back
            outcome = _Try(type(exc).__name__)
        if not outcome.error or not outcome.retryable or attempt == attempts - 1:
            break
        delay = BACKOFF[min(attempt, len(BACKOFF) - 1)]
        if outcome.wait is not None:
            if outcome.wait > RETRY_AFTER_CAP:
                outcome = replace(outcome, error=f"{outcome.error} (Retry-After {outcome.wait:g} s)")
                break
            delay = max(delay, outcome.wait)
        if monotonic() + delay >= ends:
            break
        sleep(delay)
    if not outcome.error:
        try:
            ledger.sent(message.key)
        except Exception as exc:  # noqa: BLE001 - sent all the same; its claim may be re-sent after the lease
            log.warning(
                "notification %s for %s: sent, but not marked sent in the ledger (%s); it may be "
                "sent again once its claim's lease ends",
                message.kind,
                message.target,
                type(exc).__name__,
            )
        return "sent"
    try:
        ledger.release(message.key)
    except Exception as exc:  # noqa: BLE001 - counted failed all the same; taken over after the lease
        log.warning(
            "notification %s for %s: its claim could not be given back (%s); a run after its "
            "lease ends sends it",
            message.kind,
            message.target,
            type(exc).__name__,
        )
    return failed(outcome.error, tried)


def metrics_text(totals: Mapping[str, int] = TOTALS) -> str:
    """``notifications_total{result}`` in Prometheus' text format."""
    lines = [
        f"# HELP {METRIC} Notifications by result: sent, duplicate (already sent), failed.",
        f"# TYPE {METRIC} counter",
    ]
    lines += [f'{METRIC}{{result="{r}"}} {totals.get(r, 0)}' for r in RESULTS]
    return "\n".join(lines) + "\n"

"""Real HTTP receivers on 127.0.0.1 for the notification tests: Slack-, Teams- and webhook-shaped.

Slack's incoming webhooks answer ``200 ok`` (text/plain) to a JSON ``{"text": …}``; Teams'
Workflows webhooks answer ``202 Accepted`` to a ``message`` with an Adaptive Card attachment
(api.slack.com/messaging/webhooks; learn.microsoft.com, "Create incoming webhooks with
Workflows for Microsoft Teams"). Each receiver refuses a body that is not its shape with 400, as
the services do. ``status`` makes it answer an error; ``hold`` makes it answer only after the
event is set (a slow receiver: the client's timeout fires first).

What real receivers also answer, and the tests make these do:

- ``status=429`` with ``headers={"Retry-After": …}``: Slack's rate limit answers ``429 Too Many
  Requests`` with ``Retry-After`` in seconds (api.slack.com/apis/rate-limits); RFC 9110
  section 10.2.3 also allows an HTTP date, as proxies and other webhooks send.
- ``status=301/302/307…`` with ``headers={"Location": …}``: a moved endpoint or a proxy's login page
  (RFC 9110 section 15.4); a client that follows a 302 re-sends it as a GET to wherever it points.
- ``garbage``: an answer that is no HTTP at all (a TLS port spoken to in plain HTTP, a broken
  proxy); ``trickle``: the answer written one byte every ``trickle`` seconds (a receiver, or a
  middlebox, that keeps a connection alive without ever finishing its answer).
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def teams_shown(markdown: str) -> str:
    """The text an Adaptive Card shows for one line of its Markdown (escapes read back)."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark", {"html": False}).parseInline(markdown)
    return "".join(child.content for token in tokens for child in token.children or [])


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.body)

    @property
    def slack_controls(self) -> list[str]:
        """What Slack parses in a message's ``text`` as a control sequence rather than text: each
        ``<…>`` (``<!channel>``/``<!here>`` pings, ``<@U…>`` mentions, ``<http…|label>`` links);
        ``&lt;``, ``&gt;``, ``&amp;`` show as the characters they escape
        (api.slack.com/reference/surfaces/formatting#escaping)."""
        return re.findall(r"<([^<>]*)>", self.json.get("text", ""))

    @property
    def slack_shown(self) -> str:
        """The ``text`` as Slack shows it once its three escapes are read back."""
        text = self.json.get("text", "")
        return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")

    @property
    def teams_facts(self) -> dict[str, str]:
        """The card's facts as Teams shows them: a FactSet's titles and values are Markdown (a
        CommonMark subset, learn.microsoft.com/microsoftteams/platform/task-modules-and-cards/cards/
        cards-format), read here by CommonMark itself (markdown-it, HTML off as in cards)."""
        facts = self.json["attachments"][0]["content"]["body"][1]["facts"]
        return {teams_shown(f["title"]): teams_shown(f["value"]) for f in facts}


@dataclass
class Receiver:
    shape: str  # slack | teams | webhook
    status: int = 0  # 0: the shape's success status
    hold: threading.Event | None = None
    headers: dict[str, str] = field(default_factory=dict)
    garbage: bool = False
    trickle: float = 0.0
    received: list[Received] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook/{self.shape}"

    def _accepts(self, body: bytes) -> bool:
        try:
            data = json.loads(body)
        except ValueError:
            return False
        if self.shape == "slack":
            return isinstance(data.get("text"), str) and bool(data["text"])
        if self.shape == "teams":
            attachments = data.get("attachments") or []
            return (
                data.get("type") == "message"
                and all(
                    a.get("contentType") == "application/vnd.microsoft.card.adaptive"
                    and a["content"].get("type") == "AdaptiveCard"
                    for a in attachments
                )
                and bool(attachments)
            )
        return isinstance(data, dict)

    def __enter__(self) -> Receiver:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if owner.hold is not None:
                    owner.hold.wait(5)
                owner.received.append(Received(self.path, dict(self.headers.items()), body))
                status = owner.status or (202 if owner.shape == "teams" else 200)
                if not owner.status and not owner._accepts(body):
                    status = 400
                payload = b"ok" if status < 300 else b"error"
                try:
                    if owner.garbage:
                        self.wfile.write(b"NOT HTTP\r\n\r\n")
                        return
                    if owner.trickle:
                        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n" + b"o" * 2000
                        for byte in answer:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            time.sleep(owner.trickle)  # the receiver's pace, not the code's under test
                        return
                    self.send_response(status)
                    for name, value in owner.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (timeout)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.hold is not None:
            self.hold.set()
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()

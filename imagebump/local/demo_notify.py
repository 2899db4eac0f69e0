"""The demo's notifications: a webhook receiver on 127.0.0.1 that prints what it receives.

:func:`demo_receiver` starts it and connects the world's executors to it as a cluster would be
connected: the ``imagebump-notify`` Secret holds one signed ``webhook`` destination (its URL and a
fresh random secret) and the "already sent" record is a directory of the demo's own. The Workflow's
exit handler (``notify``, ``onExit``) then sends each outcome once; the receiver checks each
signature as a receiver should (docs/notifications.md) and keeps the messages.
:func:`notification_lines` is the report's section: one line per message, the alarms marked.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: The destination's name in the demo's notifications file.
DESTINATION = "demo-receiver"


@dataclass
class DemoReceiver:
    """What the receiver got: each message's JSON, whether its signature held."""

    secret: str = field(default_factory=lambda: "demo-" + secrets.token_hex(16), repr=False)
    messages: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self, body: bytes, header: str) -> int:
        from steps.notify.signature import verify

        if not verify(self.secret, header, body, time.time()):
            return 401
        with self._lock:
            self.messages.append(json.loads(body))
        return 200


@contextmanager
def demo_receiver(world: Any, ledger_dir: Path) -> Iterator[DemoReceiver]:
    """Start the receiver and point the world's exit handler at it (until the block ends)."""
    from workflows import names

    receiver = DemoReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status = receiver.take(body, self.headers.get("X-Imagebump-Signature", ""))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/imagebump"
    destination = {"type": "webhook", "url": receiver.url, "secret": receiver.secret}
    notify_file = json.dumps({"destinations": {DESTINATION: destination}})
    world.set_extra_secrets({names.NOTIFY_SECRET: {names.NOTIFY_KEY: notify_file}})
    world.extra_env["IMAGEBUMP_NOTIFY_LEDGER_DIR"] = str(ledger_dir)
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def notification_lines(messages: list[dict[str, Any]]) -> list[str]:
    """``received committed — …/overlays/staging (image …)`` per message; alarms marked ``alarm:``."""
    lines = []
    for m in messages:
        fields = m.get("fields") or {}
        facts = ", ".join(
            f"{k} {v}"
            for k, v in fields.items()
            if v and k in ("image", "link", "seconds", "application", "git_image", "running_image")
        )
        mark = "alarm: " if m.get("alarm") else ""
        lines.append(f"received {mark}{m.get('outcome', '?')} — {m.get('target', '')} ({facts})")
    return lines or ["received nothing"]

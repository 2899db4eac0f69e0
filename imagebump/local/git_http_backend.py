"""The HTTP side of the local Git remote: ``git http-backend`` as CGI behind a threaded server.

:class:`BackendServer` (a ``ThreadingHTTPServer`` on 127.0.0.1:0) and its request handler do what
a Git host's front end does before the backend: HTTP Basic auth whose password must be the token
(``401`` with ``WWW-Authenticate: Basic realm="imagebump"`` without or with wrong credentials, or
``403`` / ``404`` as ``anonymous_status`` says; anonymous reads when ``anonymous_read``), the
injected ``503`` answers of ``fail_rate`` (seeded), the path check (``/OWNER/NAME[.git]/<service>``
only), and then run ``git http-backend`` with a clean environment and parse its CGI output.
It logs nothing (requests carry tokens). :mod:`imagebump.local.git_server` owns the lifecycle
and the repositories; this module imports only the standard library.
"""

from __future__ import annotations

import base64
import hmac
import os
import random
import re
import subprocess
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["OWNER_REPO", "REALM", "BackendServer", "git_env"]

REALM = "imagebump"
OWNER_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
# The paths git http-backend serves below a repository.
_SERVICE_SUFFIX = re.compile(r"/(info/refs|git-upload-pack|git-receive-pack|HEAD|objects/.+|info/.+)$")
_BACKEND_TIMEOUT = 300


def git_env(home: Path) -> dict[str, str]:
    """A clean environment for git commands the server runs: no user/system config, no tokens."""
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
    }


def _exec_path() -> str:
    out = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


class _Handler(BaseHTTPRequestHandler):
    server: BackendServer
    protocol_version = "HTTP/1.0"  # one request per connection: simple and robust for CGI

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing: request lines may be sensitive and tests read stderr."""

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    # --- helpers -----------------------------------------------------------------------------

    def _reply(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            # The client went away (a killed git, a step's timeout): nothing to answer, no traceback.
            self.close_connection = True

    def _user(self) -> str | None:
        """The Basic user name when the password is the token; None when missing or wrong."""
        header = self.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic" or not value:
            return None
        try:
            user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        if not hmac.compare_digest(password.encode(), self.server.token.encode()):
            return None
        return user or "git"

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    # trailers until an empty line
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()  # CRLF after each chunk
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self) -> None:
        srv = self.server
        body = self._read_body() if self.command == "POST" else b""
        if srv.should_fail():
            self._reply(
                503,
                b"503 Service Unavailable (injected by fail_rate)\n",
                {"Content-Type": "text/plain", "Retry-After": "0"},
            )
            return
        user = self._user()
        path, _, query = self.path.partition("?")
        credentials = bool(self.headers.get("Authorization"))
        if user is None and not (not credentials and srv.anonymous_read and _is_read(path, query)):
            status = 401 if credentials else srv.anonymous_status
            if status == 401:
                self._reply(
                    401,
                    b"401 Unauthorized: send the token as HTTP Basic password\n",
                    {
                        "Content-Type": "text/plain",
                        "WWW-Authenticate": f'Basic realm="{REALM}"',
                    },
                )
            else:
                self._reply(
                    status,
                    f"{status} {'Forbidden' if status == 403 else 'Not Found'}\n".encode(),
                    {"Content-Type": "text/plain"},
                )
            return
        path_info = _normalise_path(path)
        if path_info is None:
            self._reply(404, b"404 Not Found\n", {"Content-Type": "text/plain"})
            return
        if path_info.endswith("/info/refs") and "service=git-upload-pack" in query:
            srv.count_session(path_info[1 : -len("/info/refs")].removesuffix(".git"))
        env = git_env(srv.root)
        env.update(
            {
                "GIT_PROJECT_ROOT": str(srv.root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": path_info,
                "QUERY_STRING": query,
                "REQUEST_METHOD": self.command,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": user or "",  # dropped below for an anonymous read
                "REMOTE_ADDR": self.client_address[0],
                "SERVER_PROTOCOL": "HTTP/1.1",
                "GATEWAY_INTERFACE": "CGI/1.1",
            }
        )
        if user is None:
            del env["REMOTE_USER"]
        if encoding := self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = encoding  # git clients gzip large POST bodies
        if protocol := self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = protocol  # protocol v2: needed for partial-clone filters
        try:
            proc = subprocess.run(
                [srv.backend], input=body, env=env, capture_output=True, timeout=_BACKEND_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            self._reply(504, b"504 git http-backend timed out\n", {"Content-Type": "text/plain"})
            return
        status, headers, payload = _parse_cgi(proc.stdout)
        if proc.returncode != 0 and status == 200 and not payload:
            status = 500
        self._reply(status, payload, headers)


def _is_read(path: str, query: str) -> bool:
    """Does this request only read (upload-pack, dumb-HTTP files), never push (receive-pack)?"""
    return "git-receive-pack" not in path and "service=git-receive-pack" not in query


def _normalise_path(path: str) -> str | None:
    """``/owner/name[.git]/<service>`` → ``/owner/name.git/<service>``; None when malformed."""
    match = _SERVICE_SUFFIX.search(path)
    if not match:
        return None
    repo = path[: match.start()].strip("/")
    if not OWNER_REPO.match(repo) or ".." in repo.split("/"):
        return None
    if not repo.endswith(".git"):
        repo += ".git"
    return f"/{repo}{match.group(0)}"


def _parse_cgi(output: bytes) -> tuple[int, dict[str, str], bytes]:
    """Split CGI output into status, headers and body (``Status:`` sets the HTTP status)."""
    sep = output.find(b"\r\n\r\n")
    skip = 4
    lf = output.find(b"\n\n")
    if sep < 0 or (0 <= lf < sep):
        sep, skip = lf, 2
    if sep < 0:
        return 500, {"Content-Type": "text/plain"}, b"git http-backend gave no headers\n"
    status = 200
    headers: dict[str, str] = {}
    for line in output[:sep].decode("latin-1").splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not key:
            continue
        if key.lower() == "status":
            status = int(value.split()[0])
        elif key.lower() != "content-length":
            headers[key] = value
    return status, headers, output[sep + skip :]


class BackendServer(ThreadingHTTPServer):
    """Serves ``root``'s bare repositories on 127.0.0.1:0; one thread (and one backend process) per request."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(
        self,
        root: Path,
        token: str,
        fail_rate: float,
        seed: int,
        anonymous_read: bool = False,
        anonymous_status: int = 401,
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root
        self.token = token
        self.anonymous_read = anonymous_read
        self.anonymous_status = anonymous_status
        self.fail_rate = fail_rate
        self.backend = str(Path(_exec_path()) / "git-http-backend")
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.sessions: dict[str, int] = {}

    def count_session(self, owner_repo: str) -> None:
        """One more read session (clone, fetch or ls-remote: each starts with ``info/refs``)."""
        with self._lock:
            self.sessions[owner_repo] = self.sessions.get(owner_repo, 0) + 1

    def should_fail(self) -> bool:
        if self.fail_rate <= 0:
            return False
        with self._lock:
            return self._random.random() < self.fail_rate

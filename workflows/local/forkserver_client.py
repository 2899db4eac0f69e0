"""The fork server's client: start ``python -m MODULE ...`` step processes from a warm interpreter.

The local executor pays a Python start and 1–2 s of imports for every step of every event; this
client asks the fork server (:mod:`workflows.local.forkserver_server`, "the step zygote" in logs)
to ``fork()`` a child that becomes the command instead — same command, own process, session,
directory, streams and exactly the environment given (why and for which commands:
:class:`ForkServerClient`). :func:`shared` gives one server per interpreter and project, started on
first use, restarted if it dies; ``IMAGEBUMP_LOCAL_PREFORK=0`` turns it off.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

#: Environment variables a step may carry that do not change how the interpreter starts.
_HARMLESS_PYTHON_ENV = frozenset({"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"})
READY_TIMEOUT = 120.0


class ForkServerError(RuntimeError):
    """The zygote could not start, could not fork, or died while the command ran.

    ``started`` tells which: False — nothing ran, the caller may start the command as a new process
    instead; True — it ran and its outcome is unknown (its process group has been killed).
    """

    def __init__(self, message: str, *, started: bool) -> None:
        super().__init__(message)
        self.started = started


@dataclass
class _Pending:
    pid: int | None = None
    status: int | None = None
    #: the exit code the child wrote on its status pipe just before ``os._exit`` (its outputs are
    #: written and its stdout and stderr closed by then): the outcome, without waiting for the
    #: kernel to tear the process down (~4 ms for a copy of the warm interpreter) and the zygote to
    #: reap it. None when the child died without writing it: the zygote's status tells.
    reported: int | None = None
    error: str | None = None
    started: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class ForkedOutcome:
    """How a forked command ended: ``returncode`` as :class:`subprocess.Popen`'s; ``timed_out``
    when ``timeout`` passed and its process group was killed."""

    returncode: int
    timed_out: bool
    pid: int
    stdout: bytes = b""
    stderr: bytes = b""


class _Pipes:
    """The child's stdout, stderr and status pipes, read to their end on the caller's own thread
    (one selector; no thread per pipe: each thread started would wait to be scheduled before the
    request is even sent, on the step's path).

    ``read(deadline)`` returns True when stdout and stderr are at EOF and the status pipe has either
    given the exit code (``"%d\\n"``, the child's last word) or reached EOF without it; False when
    ``deadline`` (monotonic) passed before the child reported its exit code (once it has, its pipes
    are read to their end whatever the deadline, as :meth:`subprocess.Popen.communicate` does).
    """

    def __init__(self, out_r: int, err_r: int, status_r: int) -> None:
        self.out_r, self.err_r, self.status_r = out_r, err_r, status_r
        self.chunks: dict[int, list[bytes]] = {out_r: [], err_r: [], status_r: []}
        self.open = {out_r, err_r, status_r}
        self.reported: int | None = None
        self._selector = selectors.DefaultSelector()
        for fd in self.open:
            self._selector.register(fd, selectors.EVENT_READ)

    def _done(self) -> bool:
        return (
            self.out_r not in self.open
            and self.err_r not in self.open
            and (self.status_r not in self.open or self.reported is not None)
        )

    def read(self, deadline: float | None) -> bool:
        while not self._done():
            # the deadline is the child's: once it has ended, its pipes are read to their end
            timeout = None if deadline is None or self.reported is not None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                return False
            for key, _ in self._selector.select(timeout):
                fd = key.fd
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                if chunk:
                    self.chunks[fd].append(chunk)
                else:
                    self._close(fd)
                if fd == self.status_r and self.reported is None:
                    data = b"".join(self.chunks[fd])
                    if data.endswith(b"\n") and data.strip().lstrip(b"-").isdigit():
                        self.reported = int(data)
        return True

    def _close(self, fd: int) -> None:
        if fd in self.open:
            self.open.discard(fd)
            self._selector.unregister(fd)
            os.close(fd)

    def close(self) -> None:
        for fd in list(self.open):
            self._close(fd)
        self._selector.close()

    def output(self, fd: int) -> bytes:
        return b"".join(self.chunks[fd])


class ForkServerClient:
    """A client for one :mod:`workflows.local.forkserver_server` process.

    Args:
        python: the interpreter to run (the one that replaces ``python`` in templates).
        pythonpath: its ``PYTHONPATH`` (the project root), so the same modules import.
        preload: modules imported once, before any fork.
        base_env: the zygote's own environment (``PATH``, ``LANG``); never a secret — children get
            only the environment each request names.

    Every step of the WorkflowTemplate runs ``python -m steps.runtime.launcher -e steps.x:run``. In a
    pod that costs a Python start plus 1–2 s of imports (Hera's runner imports all of
    ``hera.workflows``; the steps import pydantic, boto3, githubkit), and a cluster pays it once per
    pod anyway. The local executor pays it for every step of every event on one machine, where it
    was ~75% of an event's time (``python -m bench``, scenario "waste").

    So the local executor asks a fork server (:mod:`workflows.local.forkserver_server`; "the step
    zygote" in logs and messages) — a Python process that has done those imports once — to ``fork()`` a child that becomes the command: its own process, session,
    working directory, stdout/stderr files and exactly the environment given, with ``MODULE`` run as
    ``__main__`` the way ``python -m`` runs it. The template's command is unchanged; what changes is
    only how its interpreter is started (as gunicorn's ``--preload``, Android's zygote or
    :mod:`multiprocessing`'s ``forkserver`` do).

    Only commands that are exactly ``<the executor's python> -m MODULE ...``, with no ``PYTHON*``
    environment beyond ``PYTHONPATH`` (the zygote's own), ``PYTHONDONTWRITEBYTECODE`` and
    ``PYTHONUNBUFFERED``, are eligible (:meth:`ForkServerClient.eligible`); anything else is started as a new
    process as before. ``IMAGEBUMP_LOCAL_PREFORK=0`` (or ``LocalExecutor(prefork=False)``) turns it off.
    """

    def __init__(
        self, python: str, pythonpath: str, preload: Iterable[str], base_env: Mapping[str, str] | None = None
    ) -> None:
        self.python = python
        self.pythonpath = pythonpath
        self.preload = tuple(dict.fromkeys(preload))
        env = {k: v for k, v in (base_env or {}).items() if not k.startswith("PYTHON")}
        env.setdefault("PATH", os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"))
        env.setdefault("LANG", os.environ.get("LANG", "C.UTF-8"))
        env["PYTHONPATH"] = pythonpath
        self.env = env
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        self.failed_preload: list[str] = []
        self.starts = 0
        self.refused: str | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def eligible(self, argv: list[str], env: Mapping[str, str]) -> bool:
        """Whether ``argv`` run with ``env`` is what a fork of this zygote becomes."""
        if len(argv) < 3 or argv[0] != self.python or argv[1] != "-m" or not argv[2]:
            return False
        for key, value in env.items():
            if key.startswith("PYTHON") and key not in _HARMLESS_PYTHON_ENV:
                if key != "PYTHONPATH" or value != self.pythonpath:
                    return False
        return True

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self._sock is not None

    def _start(self) -> None:
        if self.refused:
            raise ForkServerError(self.refused, started=False)
        # SEQPACKET: one request (and its two descriptors) per message, never glued to the next
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            proc = subprocess.Popen(
                [self.python, "-m", "workflows.local.forkserver_server", str(child.fileno()), *self.preload],
                env=self.env,
                cwd="/",
                pass_fds=[child.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            child.close()
        parent.settimeout(READY_TIMEOUT)
        reader = parent.makefile("rb")
        try:
            line = reader.readline()
        except OSError:
            line = b""
        if not line:
            proc.kill()
            proc.wait()
            parent.close()
            raise ForkServerError(
                f"the step zygote ({self.python} -m workflows.local.forkserver_server) did not start "
                f"(exit code {proc.poll()})",
                started=False,
            )
        ready = json.loads(line)
        if not ready.get("ready"):
            proc.wait()
            parent.close()
            # Not transient: do not pay for the imports again on every step.
            self.refused = f"the step zygote refused to start: {ready.get('error')}"
            raise ForkServerError(self.refused, started=False)
        parent.settimeout(None)
        self.failed_preload = list(ready.get("failed") or [])
        self._proc, self._sock = proc, parent
        self.starts += 1
        threading.Thread(
            target=self._read, args=(proc, parent, reader), name="zygote-reader", daemon=True
        ).start()

    def _read(self, proc: subprocess.Popen[bytes], sock: socket.socket, reader) -> None:
        try:
            for line in reader:
                message = json.loads(line)
                with self._lock:
                    pending = self._pending.get(message.get("id"))
                if pending is None:
                    continue
                if "pid" in message:
                    pending.pid = message["pid"]
                    pending.started.set()
                elif "status" in message:
                    pending.status = message["status"]
                    pending.done.set()
                elif "error" in message:
                    pending.error = message["error"]
                    pending.started.set()
                    pending.done.set()
        except (OSError, ValueError):
            pass
        # The zygote is gone: everything it was running is lost (it killed its children or died).
        proc.wait()
        with self._lock:
            if self._proc is proc:
                self._proc, self._sock = None, None
            lost = list(self._pending.values())
        for pending in lost:
            if not pending.done.is_set():
                if pending.pid is not None:  # orphaned by a zygote that died without killing it
                    kill_group(pending.pid)
                pending.error = pending.error or f"the step zygote exited (code {proc.returncode})"
                pending.started.set()
                pending.done.set()
        try:
            sock.close()
        except OSError:
            pass

    def close(self) -> None:
        """Stop the zygote (it kills the steps it is still running)."""
        with self._lock:
            sock, proc = self._sock, self._proc
            self._sock = None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def ensure_started(self) -> None:
        """Start the zygote if it is not running (what :meth:`run` does on first use)."""
        with self._lock:
            self._ensure_started_locked()

    def _ensure_started_locked(self) -> None:
        if not self.alive():
            try:
                self._start()
            except OSError as exc:
                raise ForkServerError(f"the step zygote could not be started: {exc}", started=False) from None

    # -- running ---------------------------------------------------------------------------

    def run(
        self, argv: list[str], *, cwd: str, env: Mapping[str, str], timeout: float | None = None
    ) -> ForkedOutcome:
        """Fork a child that runs ``argv``; wait for it (killing its process group at ``timeout``) and
        for its stdout and stderr to close, as :meth:`subprocess.Popen.communicate` does.

        Raises:
            ForkServerError: the zygote could not be started, could not fork, or died before the
                command ended (its outcome is unknown; the caller treats it as a failed start).
        """
        with self._lock:
            self._ensure_started_locked()
            self._next_id += 1
            request_id = self._next_id
            pending = self._pending[request_id] = _Pending()
            sock = self._sock
        assert sock is not None
        request = {"id": request_id, "argv": list(argv), "cwd": cwd, "env": dict(env)}
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        status_r, status_w = os.pipe()
        pipes = _Pipes(out_r, err_r, status_r)
        try:
            data = json.dumps(request).encode() + b"\n"
            try:
                with self._send_lock:
                    # one message: all of it or an error
                    socket.send_fds(sock, [data], [out_w, err_w, status_w])
            finally:
                os.close(out_w)
                os.close(err_w)
                os.close(status_w)
            deadline = None if timeout is None else time.monotonic() + timeout
            pending.started.wait()
            if pending.pid is None:
                raise ForkServerError(pending.error or "the step zygote did not fork", started=False)
            timed_out = not pipes.read(deadline)
            if not timed_out and pipes.reported is None:
                # it ended without its last word (a signal, a crash): the zygote's status tells
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                timed_out = not pending.done.wait(remaining)
            if timed_out:
                kill_group(pending.pid)
                pipes.read(None)
            if pipes.reported is not None:
                pending.reported = pipes.reported
                pending.done.set()  # ended: the zygote's reader must not kill its group if the zygote dies
            pending.done.wait()
            status = pending.reported if pending.status is None else pending.status
            if status is None:
                raise ForkServerError(pending.error or "the step zygote lost the process", started=True)
            return ForkedOutcome(status, timed_out, pending.pid, pipes.output(out_r), pipes.output(err_r))
        except OSError as exc:
            raise ForkServerError(
                f"the step zygote is not reachable: {exc}", started=pending.pid is not None
            ) from None
        finally:
            pipes.close()
            with self._lock:
                self._pending.pop(request_id, None)


def kill_group(pid: int) -> None:
    """SIGKILL ``pid``'s process group, or ``pid`` alone if it has not made its own group yet."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            continue


_SHARED: dict[tuple[str, str], ForkServerClient] = {}
_SHARED_LOCK = threading.Lock()


def shared(python: str, pythonpath: str, preload: Iterable[str]) -> ForkServerClient:
    """The zygote of this process for ``(python, pythonpath)``; created (not started) on first call.

    ``preload`` counts only the first time; a module imported later is imported by the child.
    """
    key = (python, pythonpath)
    with _SHARED_LOCK:
        zygote = _SHARED.get(key)
        if zygote is None:
            zygote = _SHARED[key] = ForkServerClient(python, pythonpath, preload)
        return zygote


def enabled_by_default() -> bool:
    """``IMAGEBUMP_LOCAL_PREFORK`` is not ``0``/``false``/``no``/``off``."""
    return os.environ.get("IMAGEBUMP_LOCAL_PREFORK", "1").strip().lower() not in ("0", "false", "no", "off")


__all__ = [
    "ForkedOutcome",
    "ForkServerClient",
    "ForkServerError",
    "enabled_by_default",
    "kill_group",
    "shared",
]

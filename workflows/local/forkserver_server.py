"""The fork server: a warm interpreter that forks step processes (client: :mod:`.forkserver_client`).

``python -m workflows.local.forkserver_server FD MODULE...`` imports the modules named once, then
serves requests on the Unix socket ``FD``: each request (a ``python -m MODULE ARG...`` command, its
working directory, environment and three pipes) gets a forked child that becomes that command,
started fresh; replies are JSON messages (ready, forked, exited). The protocol: :func:`serve`.
"""

import array
import ctypes
import importlib
import json
import mmap
import os
import select
import signal
import socket
import sys

from workflows.local.forkserver_client import kill_group  # the client's helper; it imports only the stdlib


def _child(request: dict, fds: list[int], keep_closed: list[int], touched: "_Touched | None" = None) -> None:
    """In the forked child: become ``python -m MODULE ARG...`` and never return (once its exit code
    is reported, it tells ``touched`` which pages it copied)."""
    code = 1
    status = fds[2]
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in keep_closed:
            try:
                os.close(fd)
            except OSError:
                pass
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds[:2]:
            if fd > 2:
                os.close(fd)
        os.set_inheritable(status, False)  # the step's own processes never hold it
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import tempfile

        tempfile.tempdir = None  # a cached TMPDIR from this process would be shared by every step
        sys.dont_write_bytecode = bool(request["env"].get("PYTHONDONTWRITEBYTECODE"))
        argv = request["argv"]
        module = argv[2]
        sys.argv = [argv[0], *argv[3:]]  # runpy puts the module's file in argv[0], as ``-m`` does
        # ``-m`` executes the module afresh as __main__; its imports stay warm. (Left in
        # sys.modules, runpy would warn on every step's stderr that it was imported already.)
        sys.modules.pop(module, None)
        import runpy

        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code & 0xFF
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:  # what a fresh interpreter prints for an uncaught exception
            import traceback

            traceback.print_exc()
            code = 1
    except BaseException:
        try:
            import traceback

            traceback.print_exc()
        except BaseException:
            pass
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)  # the caller's pipes close here (unless a process the step left holds them)
            os.dup2(null, 2)
            os.write(status, b"%d\n" % code)
            os.close(status)  # the caller reads to EOF: here, not when the kernel closes it at exit
        except BaseException:
            pass
        if touched is not None:
            try:
                touched.record()  # after the exit code: not on the step's path
            except BaseException:
                pass
        os._exit(code)


PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
#: pagemap(5) entry bits: the page is present; it is mapped by this process alone (since Linux 4.2)
_PRESENT, _EXCLUSIVE = 1 << 63, 1 << 56
#: How many pages a spare writes between two looks at its socket (a request never waits for more)
_TOUCH_BATCH = 256


class _Touched:
    """Which pages of this interpreter its children write, learned from them, so that the next
    spare copies them before it is needed, off the step's path.

    A forked child shares this interpreter's memory copy-on-write: the first write to each page
    (a reference count, most often) is a page fault and a 4 KiB copy. A step's child writes ~2,000-
    3,500 of them (resolve-image 3,300: 9 ms of its 23 ms here). Each child, once its exit code is
    reported (off the step's path), counts the pages of this interpreter's writable memory it holds
    alone (``/proc/self/pagemap``: copied on its writes) in a map shared by all children; each spare,
    while it waits for its request, writes (the same byte back) the pages that at least half of the
    children wrote, in batches between looks at its socket, so the copies are made before the step
    starts. Nothing else changes: the same bytes, the same process. Where pagemap cannot be read,
    nothing is learned and nothing is touched.
    """

    def __init__(self) -> None:
        self.regions: list[tuple[int, int, int]] = []  # (start, end, index of its first page)
        pages = 0
        for start, end in _writable_regions():
            self.regions.append((start, end, pages))
            pages += (end - start) // PAGE
        self.pages = pages
        # shared with every child forked from now on: [children (4 bytes)] + one count per page
        self.counts = mmap.mmap(-1, 4 + max(pages, 1))

    def record(self) -> None:
        """In a child that has ended its work: count the pages it copied (never raises)."""
        try:
            fd = os.open("/proc/self/pagemap", os.O_RDONLY)
        except OSError:
            return
        try:
            counts = self.counts
            for start, end, first in self.regions:
                entries = array.array("Q")
                entries.frombytes(os.pread(fd, (end - start) // PAGE * 8, start // PAGE * 8))
                for i, entry in enumerate(entries):
                    if entry & _PRESENT and entry & _EXCLUSIVE:
                        at = 4 + first + i
                        if counts[at] < 255:
                            counts[at] += 1
            children = int.from_bytes(counts[:4], "little")
            counts[:4] = min(children + 1, 1 << 30).to_bytes(4, "little")
        except (OSError, ValueError):
            pass
        finally:
            os.close(fd)

    def touch(self, sock: socket.socket) -> None:
        """In a spare: write the pages most children wrote, until done or a request is waiting."""
        children = int.from_bytes(self.counts[:4], "little")
        if not children:
            return
        least = max(1, (children + 1) // 2)
        counts = self.counts[4 : 4 + self.pages]
        live = _writable_regions()  # still mapped and writable here (never write anywhere else)
        todo = []
        for start, end, first in self.regions:
            spans = [(max(start, lo), min(end, hi)) for lo, hi in live if lo < end and hi > start]
            for lo, hi in spans:
                offset = first + (lo - start) // PAGE
                for i in range((hi - lo) // PAGE):
                    if counts[offset + i] >= least:
                        todo.append(lo + i * PAGE)
        for n, address in enumerate(todo):
            if n % _TOUCH_BATCH == 0 and select.select([sock], [], [], 0)[0]:
                return  # the request is here: the step itself copies the rest as it goes
            byte = ctypes.c_ubyte.from_address(address)
            byte.value = byte.value  # the same value: only the copy-on-write copy is made


def _writable_regions() -> list[tuple[int, int]]:
    """This process's private writable mappings (``rw-p``: its heap, its anonymous memory, the data
    of its libraries), not the stack and the kernel's own pages."""
    regions = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split()
                if len(parts) < 2 or parts[1] != "rw-p":
                    continue
                if len(parts) > 5 and parts[5].startswith("[") and parts[5] != "[heap]":
                    continue
                start, end = (int(x, 16) for x in parts[0].split("-"))
                regions.append((start, end))
    except OSError:
        return []
    return regions


class _Spare:
    """A child forked ahead of the next request, waiting on a socket of its own for it — as
    Android's zygote keeps unspecialized app processes ready — so the fork of this interpreter
    (~4 ms here: its page tables are copied) is not on the step's path. It becomes the step with
    :func:`_child`, exactly as a child forked on request does; a new spare is forked once it is
    handed out, while the step runs. It ends with this process (its socket's EOF)."""

    def __init__(self, keep_closed: list[int], touched: _Touched | None = None) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.set_wakeup_fd(-1)  # before closing it: a signal must never write into a reused fd
                ours.close()
                for fd in keep_closed:  # the caller's socket above all: its EOF says this process ended
                    os.close(fd)
                if touched is not None:
                    try:
                        touched.touch(theirs)  # the copies the step would make, made while it waits
                    except Exception:  # noqa: BLE001 - the step makes them itself
                        pass
                data, fds, _flags, _addr = socket.recv_fds(theirs, 1 << 20, 4)
                theirs.close()
                if data:
                    _child(json.loads(data), fds, [], touched)
                code = 0  # this process ended before it had a request for it
            finally:
                os._exit(code)
        theirs.close()
        self.pid, self.sock = pid, ours

    def hand(self, data: bytes, fds: list[int]) -> bool:
        """Give it the request and its descriptors (False: it is gone; fork another way)."""
        try:
            if os.waitpid(self.pid, os.WNOHANG)[0] == self.pid:
                return False  # it died waiting (and is reaped now)
            socket.send_fds(self.sock, [data], fds)
            return True
        except OSError:  # ChildProcessError included: reaped already
            return False
        finally:
            self.sock.close()

    def end(self) -> None:
        self.sock.close()
        kill_group(self.pid)


def _send(sock: socket.socket, message: dict) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def _warm_up(packages: set[str]) -> None:
    """Pure data every step computes the same way, computed once here instead of in every child:
    each module of ``packages`` imported by now (named, lazily listed, or imported by those) that
    has a ``WARM_UP`` tuple (names of functions without arguments that read no environment)."""
    for name, module in sorted(sys.modules.items()):
        warm_up = getattr(module, "WARM_UP", ()) if name.partition(".")[0] in packages else ()
        for fn in warm_up if isinstance(warm_up, tuple) else ():
            try:
                getattr(module, fn)()
            except BaseException:  # the child computes it itself when it needs it
                pass


def serve(fd: int, modules: list[str]) -> int:
    """Import ``modules``, then fork a child per request on the socket ``fd`` until it closes.

    Started by :class:`~workflows.local.forkserver_client.ForkServerClient` as
    ``python -m workflows.local.forkserver_server FD MODULE...``. It
    imports the modules named (Hera's runner, the steps' modules: what every step process would
    otherwise import again, 1–2 s of CPU each time) and the ones each of them lists in a module-level
    ``LAZY_IMPORTS`` tuple (what a step imports only while it runs, e.g. boto3), runs the ``WARM_UP``
    functions of every module of those packages it now holds, then serves requests on the Unix socket ``FD``.
    Each request — one message on the SEQPACKET socket, JSON ``{"id", "argv", "cwd", "env"}`` where ``argv`` is ``[python, "-m",
    MODULE, ARG...]``, sent with three file descriptors (``SCM_RIGHTS``: the write ends of the caller's
    stdout, stderr and status pipes) — gets a child made by ``fork()`` that becomes what that command
    would have been, started fresh:

    * its own session and process group (``setsid``), so a deadline kills it and the git it runs;
    * stdin ``/dev/null``, stdout and stderr the two descriptors that came with the request;
    * the working directory and EXACTLY the environment given (nothing of this process's own), with
      ``tempfile``'s cached directory cleared so ``TMPDIR`` is the step's own private directory;
    * default signal handlers, ``sys.argv`` as ``python -m`` sets it, and ``MODULE`` run as
      ``__main__`` by :func:`runpy.run_module`, exactly as ``python -m`` does; its exit status is the
      process's (``SystemExit`` code, 1 with a traceback for an uncaught exception);
    * at its end it flushes and closes its stdout and stderr, writes its exit status (``"%d\n"``) on
      the status pipe and calls ``os._exit``: the caller has the outcome while the kernel still tears
      the process down (~4 ms here for a copy of this interpreter); a child that dies without writing
      it (a signal, a crash) is known by the status this process sends when it reaps it.

    One child is forked ahead of the next request and waits for it on a socket of its own
    (:class:`_Spare`, as Android's zygote keeps unspecialized app processes ready): the request's
    child is that one, so the fork (~4 ms for a copy of this interpreter) is off the step's path; the
    next spare is forked while the step runs. A spare that died waiting is replaced by a fork on request.

    Nothing runs in this process after the imports but this loop: it starts no thread (and refuses to
    serve if an import started one), so ``fork`` is safe, and a child shares nothing with another child or with later requests (each is a copy of the
    interpreter as it stood after the imports; memory is copy-on-write, ``random`` is reseeded by the
    interpreter at fork).

    Replies are JSON messages, each ending in a newline: ``{"ready": true, "pid", "failed"}`` once the imports are done (``failed``
    lists modules that did not import: the child imports them itself and reports the error the way a
    fresh process would), then per request ``{"id", "pid"}`` when forked and ``{"id", "status"}``
    when it ended (``status`` as :attr:`subprocess.Popen.returncode`: the exit code, or ``-signal``),
    or ``{"id", "error"}`` if it could not be forked.

    When the socket closes (the executor ended, even by SIGKILL) every child still running is killed
    with its process group and this process exits: no step outlives the executor that started it.
    SIGINT is ignored (a Ctrl-C in the terminal is the executor's to handle); SIGTERM ends it.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    failed = []
    queue = list(modules)
    while queue:
        name = queue.pop(0)
        try:
            module = importlib.import_module(name)
        except BaseException:  # the child will import it itself and report the error
            failed.append(name)
            continue
        # What the module imports only while it runs (``LAZY_IMPORTS``: a tuple of module names).
        lazy = getattr(module, "LAZY_IMPORTS", ())
        if isinstance(lazy, tuple):
            queue += [m for m in lazy if isinstance(m, str) and m not in sys.modules]
    _warm_up({name.partition(".")[0] for name in modules})
    import threading

    # fork() copies only the calling thread: a lock another thread held would stay locked forever
    # in every child. If an import started a thread, refuse to serve; the caller starts steps as
    # new processes instead.
    threads = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if threads:
        _send(
            sock,
            {
                "ready": False,
                "error": f"an import started threads ({', '.join(threads)}); "
                "forking from this interpreter would not be safe",
            },
        )
        return 1
    import gc

    gc.collect()
    gc.freeze()  # keep the imported objects out of collections: fewer copied pages per child
    try:
        touched: _Touched | None = _Touched()
    except (OSError, ValueError):
        touched = None
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, object] = {}
    _send(sock, {"ready": True, "pid": os.getpid(), "failed": failed})
    ours = [sock.fileno(), wake_r, wake_w]
    spare: _Spare | None = None
    try:
        while True:
            if spare is None:
                try:
                    spare = _Spare(ours, touched)
                except OSError:  # no spare now: the next request is forked when it comes
                    pass
            readable, _, _ = select.select([sock, wake_r], [], [])
            if wake_r in readable:
                try:
                    while os.read(wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
            while children or spare is not None:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                if spare is not None and pid == spare.pid:  # gone before it had a request
                    spare.sock.close()
                    spare = None
                request_id = children.pop(pid, None)
                if request_id is not None:
                    _send(sock, {"id": request_id, "status": os.waitstatus_to_exitcode(status)})
            if sock in readable:
                # One message is one request with its two descriptors (a SEQPACKET socket).
                data, fds, flags, _addr = socket.recv_fds(sock, 1 << 20, 4)
                if not data:
                    return 0
                request = json.loads(data)
                try:
                    if len(fds) != 3 or flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC):
                        raise OSError("the request came without its stdout, stderr and status descriptors")
                    handed, spare = spare, None
                    if handed is not None and handed.hand(data, fds):
                        pid = handed.pid
                    else:
                        if handed is not None:
                            handed.end()
                        pid = os.fork()
                except OSError as exc:
                    _send(sock, {"id": request["id"], "error": f"could not start: {exc}"})
                    pid = -1
                if pid == 0:
                    _child(request, fds, ours, touched)
                for fd in fds:  # the child has its copies; the caller sees EOF when it ends
                    os.close(fd)
                if pid > 0:
                    children[pid] = request["id"]
                    _send(sock, {"id": request["id"], "pid": pid})
    except (BrokenPipeError, ConnectionResetError):
        return 0
    finally:
        if spare is not None:
            spare.end()
        for pid in list(children):
            kill_group(pid)


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1]), sys.argv[2:]))

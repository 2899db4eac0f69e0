"""The process layer of git: :func:`run_git` runs ``git``, the one place any git process starts.

Each command gets the environment of :func:`steps.git.auth.git_env` (the token only in an HTTP
header through ``GIT_CONFIG_*``, never in a URL, ``.git/config`` or argv; no prompts; no user or
system configuration); every form of the token is removed from its output (:func:`redact`); a
failure becomes :mod:`steps.domain.errors` (:func:`steps.git.failures.classify`). Also the two remote
queries that need no clone: :func:`default_branch` and :func:`ls_remote`.

Why not GitPython: measured (docs/development.md), importing it costs each step
70-100 ms while its ``Git`` command object forks the same ``git`` per command with no gain;
everything we need (partial/sparse clones, force-with-lease, header-only auth) is a plain git
argument or environment variable anyway.
"""

from __future__ import annotations

import os
import select
import selectors
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from steps.domain.errors import ConfigError, GitCommandError, TransientError
from steps.git.auth import GitAuth, check_url, git_env, origin
from steps.git.failures import classify, describe
from steps.runtime.redact import redact as _redact
from steps.runtime.timing import git_phase, timed

__all__ = ["DEFAULT_TIMEOUT", "default_branch", "ls_remote", "redact", "run_git"]

DEFAULT_TIMEOUT = 300.0
#: The returncode :func:`run_git` gives a command it ended for writing more than ``max_stdout`` (no
#: process exits with it).
OVER_LIMIT = 1000


def redact(text: str, auth: GitAuth | None = None) -> str:
    """``text`` without the token, its base64 forms, Authorization values or URL passwords.

    Only the credential shapes (:func:`steps.runtime.redact.redact` with ``shapes=False``): git's output
    carries repository files that callers parse, and must stay as it is apart from credentials.
    """
    return _redact(text, auth.secrets() if auth is not None else (), shapes=False)


# --- running git --------------------------------------------------------------------------------


def run_git(
    args: Sequence[str],
    cwd: Path | str | None = None,
    auth: GitAuth | None = None,
    check: bool = True,
    *,
    url: str | None = None,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    what: str | None = None,
    raw_stdout: bool = False,
    max_stdout: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``git ARGS`` in ``cwd``; the single place git runs.

    Args:
        args: arguments after ``git``. Never put a token here.
        cwd: working directory (None: the current one).
        auth: token to send (as an HTTP header through the environment), or None.
        check: raise a classified error when git fails.
        url: the remote's URL; scopes the auth header to its origin (recommended).
        input: text for git's stdin.
        env: extra environment (e.g. ``GIT_AUTHOR_DATE``).
        timeout: seconds before the command is killed (a :class:`TransientError`).
        what: what the command was for, used in error messages ("clone of …").
        raw_stdout: stdout as the bytes git wrote (objects, e.g. ``cat-file --batch``), neither
            decoded nor redacted: only for commands whose output is repository content.
        max_stdout: read at most this many bytes of stdout: once git writes more, it is killed and
            the result is :data:`OVER_LIMIT` (returncode) with an empty stdout (a file too large to
            read never reaches memory whole, and one within the limit costs no process to size it
            first).

    Returns:
        The completed process, its stdout and stderr already redacted (stdout: see ``raw_stdout``).

    Raises:
        PushRejected, PermissionDeniedError, ConfigError, TransientError, GitCommandError.
    """
    argv = ["git", *args]
    try:
        with timed(git_phase(args)):
            proc = _run(argv, cwd, git_env(auth, url, env), input, timeout, raw_stdout, max_stdout)
    except subprocess.TimeoutExpired:
        raise TransientError(
            f"{what or describe(args)} timed out after {timeout:.0f}s; the remote may be slow "
            "or unreachable — retry later"
        ) from None
    except FileNotFoundError:
        raise GitCommandError("git is not installed (no 'git' on PATH); install git") from None
    if not raw_stdout:
        proc.stdout = redact(proc.stdout, auth)
    proc.stderr = redact(proc.stderr, auth)
    proc.args = [redact(str(a), auth) for a in argv]
    if proc.returncode == OVER_LIMIT:
        return proc  # ended by us: its output is over max_stdout, not a failure of git's
    if check and proc.returncode != 0:
        raise classify(
            proc.stderr,
            args=args,
            what=what,
            url=url,
            returncode=proc.returncode,
            anonymous=auth is None and origin(url or "") is not None,
        )
    return proc


def _run(
    argv: list[str],
    cwd: Path | str | None,
    env: dict[str, str],
    input: str | None,
    timeout: float,
    raw_stdout: bool = False,
    max_stdout: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, timeout=…)`` on this thread alone, without polling.

    With a timeout, ``subprocess`` waits for the exit by polling ``waitpid`` with growing sleeps
    after git has closed its pipes (0.5 ms doubling to 50 ms: milliseconds per command); a timer
    thread that kills git instead costs a thread per command, and starting one waits for the new
    thread to be scheduled (up to milliseconds on a busy machine) before git even starts. Here one
    selector writes ``input`` and drains both pipes until ``timeout`` (:func:`_communicate`), then
    the exit is awaited on a pidfd (the kernel says when git has ended) within what is left of
    it. A git that outlives ``timeout`` is killed (then ``TimeoutExpired``, as ``subprocess.run``
    raises); one that writes more than ``max_stdout`` bytes is killed too (returncode
    :data:`OVER_LIMIT`).
    """
    deadline = time.monotonic() + timeout
    with subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        data = None if input is None else input.encode("utf-8")
        out, err, drained = _communicate(process, data, deadline, max_stdout)
        if out is None:  # over max_stdout
            process.kill()
            process.wait()
            return subprocess.CompletedProcess(argv, OVER_LIMIT, b"" if raw_stdout else "", "")
        if not drained or not _exited(process, deadline):
            process.kill()
            rest_out, rest_err, _ = _communicate(process, None, None)
            process.wait()
            raise subprocess.TimeoutExpired(
                argv,
                timeout,
                out + rest_out if raw_stdout else (out + rest_out).decode("utf-8", "replace"),
                (err + rest_err).decode("utf-8", "replace"),
            )
        # Decoded by hand, not in text mode: text mode turns CRLF into LF, and a file's bytes read
        # with ``cat-file`` must survive as they are.
        stdout = out if raw_stdout else out.decode("utf-8", "replace")
        stderr = err.decode("utf-8", "replace")
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def _communicate(
    process: subprocess.Popen[bytes], data: bytes | None, deadline: float | None, limit: int | None = None
) -> tuple[bytes | None, bytes, bool]:
    """Write ``data`` to the process's stdin (then close it) while reading its stdout and stderr to
    EOF, as :meth:`subprocess.Popen.communicate` does: ``(stdout, stderr, True)``, or what was read
    and False when ``deadline`` passed first; once stdout holds more than ``limit`` bytes, ``None``
    for stdout (the caller ends the process)."""
    assert process.stdout is not None and process.stderr is not None
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    read_out = 0
    pending = memoryview(data or b"")
    with selectors.DefaultSelector() as selector:
        selector.register(out_fd, selectors.EVENT_READ)
        selector.register(err_fd, selectors.EVENT_READ)
        stdin = process.stdin
        stdin_fd = -1
        if stdin is not None and not stdin.closed:
            if pending:
                stdin_fd = stdin.fileno()
                os.set_blocking(stdin_fd, False)
                selector.register(stdin_fd, selectors.EVENT_WRITE)
            else:
                stdin.close()
        while selector.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return b"".join(chunks[out_fd]), b"".join(chunks[err_fd]), False
            for key, _ in selector.select(left):
                if key.fd == stdin_fd:
                    try:
                        pending = pending[os.write(key.fd, pending[: select.PIPE_BUF * 16]) :]
                    except BrokenPipeError:  # git stopped reading: its exit status tells why
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(key.fd)
                        stdin.close()  # type: ignore[union-attr]
                    continue
                chunk = os.read(key.fd, 65536)
                if chunk:
                    chunks[key.fd].append(chunk)
                    if key.fd == out_fd and limit is not None:
                        read_out += len(chunk)
                        if read_out > limit:  # what was read is dropped: it is no whole answer
                            return None, b"".join(chunks[err_fd]), False
                else:
                    selector.unregister(key.fd)
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd]), True


def _exited(process: subprocess.Popen[bytes], deadline: float) -> bool:
    """Wait until the process has ended (its pipes are closed already), at most until ``deadline``;
    reaps it. A pidfd wakes this thread the moment it ends; where there is none, ``wait``."""
    left = max(0.0, deadline - time.monotonic())
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux 5.3+: subprocess's own (polling) wait
        try:
            process.wait(left)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        if not select.select([pidfd], [], [], left)[0]:
            return False
    finally:
        os.close(pidfd)
    process.wait()  # ended: reaps at once
    return True


# --- remote queries -----------------------------------------------------------------------------


def default_branch(repo_url: str, auth: GitAuth | None = None) -> str:
    """The branch the remote's ``HEAD`` points to (``git ls-remote --symref URL HEAD``)."""
    check_url(repo_url)
    proc = run_git(
        ["ls-remote", "--symref", repo_url, "HEAD"],
        auth=auth,
        url=repo_url,
        what=f"reading the default branch of {repo_url}",
    )
    for line in proc.stdout.splitlines():
        if line.startswith("ref: ") and line.endswith("\tHEAD"):
            return line[len("ref: ") : -len("\tHEAD")].removeprefix("refs/heads/")
    raise ConfigError(
        f"the remote {repo_url} has no default branch (empty repository?); set baseBranch in the rule"
    )


def ls_remote(repo_url: str, ref: str, auth: GitAuth | None = None) -> str | None:
    """The sha the remote's ``ref`` (a branch name or full ref) points to, or None if absent."""
    check_url(repo_url)
    full = ref if ref.startswith("refs/") else f"refs/heads/{ref}"
    proc = run_git(
        ["ls-remote", repo_url, full], auth=auth, url=repo_url, what=f"looking up {full} in {repo_url}"
    )
    for line in proc.stdout.splitlines():
        sha, _, name = line.partition("\t")
        if name == full:
            return sha
    return None

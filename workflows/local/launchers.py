"""How a step's process is started: one :class:`Launcher` interface, two ways.

* :class:`FreshProcessLauncher` — a new interpreter (``subprocess.Popen``, its own session).
* :class:`ForkServerLauncher` — a ``python -m MODULE`` command forked from the warm fork server
  (:mod:`workflows.local.forkserver_client`); anything it cannot fork is started fresh instead,
  and a fork server that dies while the step runs makes the outcome unknown (``returncode`` None).

Either way the step gets exactly the argv, working directory and environment the sandbox
prepared, and a deadline kills its whole process group.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from workflows.local.forkserver_client import ForkServerClient, ForkServerError

#: ``report(event, message)``: something the launcher did that the run's log should say
#: (``zygote-lost``, ``zygote-unavailable``).
Report = Callable[[str, str], None]


@dataclass(frozen=True)
class Outcome:
    """How a step's process ended. ``returncode`` is None when it is unknown (the process was lost);
    ``timed_out`` when the deadline passed and its process group was killed."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False


class Launcher(Protocol):
    def launch(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        timeout: float | None,
        report: Report,
    ) -> Outcome:
        """Run ``argv`` to its end (or ``timeout``) and return how it ended; never raises for the step."""
        ...


class FreshProcessLauncher:
    """Every step a new process, as a pod would start it."""

    def launch(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        timeout: float | None,
        report: Report,
    ) -> Outcome:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        killed = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            killed = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
        return Outcome(proc.returncode, out, err, killed)


class ForkServerLauncher:
    """``python -m MODULE`` steps forked from ``client``; the rest (and all when it cannot start) fresh."""

    def __init__(self, client: ForkServerClient, fallback: Launcher | None = None) -> None:
        self.client = client
        self.fallback = fallback or FreshProcessLauncher()

    def launch(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        timeout: float | None,
        report: Report,
    ) -> Outcome:
        if self.client.eligible(argv, env):
            try:
                forked = self.client.run(argv, cwd=cwd, env=env, timeout=timeout)
            except ForkServerError as exc:
                if exc.started:
                    report("zygote-lost", str(exc))
                    return Outcome(None, b"", f"the step's process was lost: {exc}".encode())
                report("zygote-unavailable", str(exc))
            else:
                return Outcome(forked.returncode, forked.stdout, forked.stderr, forked.timed_out)
        return self.fallback.launch(argv, cwd=cwd, env=env, timeout=timeout, report=report)


__all__ = ["ForkServerLauncher", "FreshProcessLauncher", "Launcher", "Outcome", "Report"]

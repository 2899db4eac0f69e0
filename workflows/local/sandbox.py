"""Pod emulation: one attempt of a script template in its own process, temp dir and environment.

What a step gets, mirroring its pod: a fresh ``tempfile.mkdtemp()`` (its cwd, ``HOME``
and ``TMPDIR``, removed after); its Secret/ConfigMap/emptyDir ``volumeMounts`` materialised under
``<tmp>/mounts/<path>`` (with ``/tmp`` and ``/argo``; see :mod:`paths`); its rendered ``source``
at ``/argo/staging/script``, appended to its arguments as Argo does; ONLY the environment the
template declares (``value``, ``secretKeyRef``/``configMapKeyRef``, ``envFrom``; container paths
rewritten into the temp dir) over a minimal base (``PATH``, ``PYTHONPATH``, ``LANG``) and the
caller's explicit passthrough. The process itself is started by a
:class:`~workflows.local.launchers.Launcher`; its outputs are read back from their
``valueFrom.path`` files.
"""

from __future__ import annotations

import atexit
import functools
import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from workflows.local.errors import NodeError
from workflows.local.launchers import Launcher, Report
from workflows.local.logs import json_record, tail
from workflows.local.paths import (
    DEFAULT_OUTPUTS_DIRECTORY,
    IMPLICIT_MOUNTS,
    STAGING_SCRIPT,
    container_path,
    host_path,
    mount_points,
)
from workflows.local.results import ERROR, FAILED, SUCCEEDED, Phase


@dataclass(frozen=True)
class AttemptOutcome:
    """One process run of a script template."""

    phase: Phase
    exit_code: int | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    result: str | None = None  # stdout, for ``outputs.result``
    message: str = ""
    stderr_tail: str = ""
    #: the step's (redacted) stderr, to forward to the run's log; "" when the process was lost
    step_log: str = ""


_trash: queue.SimpleQueue[str | None] = queue.SimpleQueue()
_pending: set[str] = set()
_pending_lock = threading.Condition()
_deleter: threading.Thread | None = None


def _delete_forever() -> None:
    while True:
        path = _trash.get()
        if path is None:
            return
        _remove(path)
        with _pending_lock:
            _pending.discard(path)
            _pending_lock.notify_all()


def _remove(path: str) -> None:
    """Delete ``path`` by an ``rm -rf`` process at the lowest priority (nice 19), waited for without
    holding the interpreter: ``shutil.rmtree`` on this process's thread held the GIL between its
    thousands of syscalls while the executor prepared the next step (an edit-kustomize directory, a
    clone: ~3-30 ms, measured to stretch the next step's preparation from ~1 ms to ~5 ms), and took a
    full-priority share of a CPU the steps need. ``shutil.rmtree`` is what is left to do when ``rm``
    cannot run or left something behind."""
    rm = _rm()
    if rm:
        try:
            pid = os.posix_spawn(rm, [rm, "-rf", "--", path], {"PATH": "/usr/bin:/bin", "LC_ALL": "C"})
        except OSError:
            pass
        else:
            try:
                os.setpriority(os.PRIO_PROCESS, pid, 19)
            except OSError:  # it only runs at the executor's priority
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:  # reaped by someone else: whether it is gone tells
                pass
            if not os.path.lexists(path):
                return
    shutil.rmtree(path, ignore_errors=True)


@functools.cache
def _rm() -> str | None:
    return shutil.which("rm", path="/usr/bin:/bin")


def discard(path: str) -> None:
    """Delete a step's finished temp dir on a background thread (a node's time does not include the
    rmtree of its files). The directory was private to its one attempt and is never reused; every
    discarded directory is gone once :func:`wait_deleted` returns (called at interpreter exit)."""
    global _deleter
    with _pending_lock:
        _pending.add(path)
        if _deleter is None or not _deleter.is_alive():
            _deleter = threading.Thread(target=_delete_forever, name="step-dir-deleter", daemon=True)
            _deleter.start()
    _trash.put(path)


def wait_deleted(paths: Iterable[str] | None = None, timeout: float = 60.0) -> None:
    """Block until ``paths`` (default: every discarded directory) are deleted."""
    end = time.monotonic() + timeout
    with _pending_lock:
        while True:
            waiting = _pending if paths is None else _pending.intersection(paths)
            left = end - time.monotonic()
            if not waiting or left <= 0:
                break
            _pending_lock.wait(left)
    for path in list(paths or ()):
        shutil.rmtree(path, ignore_errors=True)  # belt and braces after a timeout


atexit.register(wait_deleted)


class Sandbox:
    """Runs attempts of script templates as pods would, on this machine."""

    def __init__(
        self,
        *,
        python: str,
        project_root: str,
        env: Mapping[str, str],
        secrets: Mapping[str, Mapping[str, str]],
        configmaps: Mapping[str, Mapping[str, str]],
        spec_volumes: list[dict[str, Any]],
        work_root: str | None,
        redact: Callable[[str], str],
        launcher: Callable[[], Launcher],
    ) -> None:
        self.python = python
        self.project_root = project_root
        self.env = dict(env)
        self.secrets = secrets
        self.configmaps = configmaps
        self.spec_volumes = spec_volumes
        self.work_root = work_root
        self.redact = redact
        self.launcher = launcher  # asked per attempt: the fork server may be replaced or turned off

    def attempt(
        self,
        tpl: dict[str, Any],
        render: Callable[[Any], str],
        deadline: float | None,
        report: Report,
        extra_env: Mapping[str, str] | None = None,
    ) -> AttemptOutcome:
        """Prepare the pod, run its process once (killed at ``deadline``), read its outputs.

        ``extra_env``: the run's own additions (an exit handler's ``IMAGEBUMP_WORKFLOW_FILE``)."""
        script = tpl["script"]
        tmp = tempfile.mkdtemp(prefix="imagebump-step-", dir=self.work_root)
        try:
            return self._attempt(tpl, script, render, deadline, report, tmp, extra_env)
        finally:
            discard(tmp)  # deleted off the node's critical path; never reused

    def _attempt(
        self,
        tpl: dict[str, Any],
        script: dict[str, Any],
        render: Callable[[Any], str],
        deadline: float | None,
        report: Report,
        tmp: str,
        extra_env: Mapping[str, str] | None = None,
    ) -> AttemptOutcome:
        root = Path(tmp)
        try:
            mounts = self.materialise(tpl, root)
            env = {**self.environment(tpl, render, root, mounts), **(extra_env or {})}
            script_path = self.map_path(STAGING_SCRIPT, root, mounts)
            script_path.parent.mkdir(parents=True, exist_ok=True)
            script_path.write_text(render(script.get("source", "")))
            argv = [self.python] + [render(a) for a in script.get("args") or []] + [str(script_path)]
        except NodeError as exc:
            return AttemptOutcome(ERROR, message=self.redact(str(exc)))
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        if timeout is not None and timeout <= 0:
            return AttemptOutcome(FAILED, message="activeDeadlineSeconds exceeded before start")
        ran = self.launcher().launch(argv, cwd=tmp, env=env, timeout=timeout, report=report)
        stdout = ran.stdout.decode(errors="replace")
        stderr = self.redact(ran.stderr.decode(errors="replace"))
        if ran.returncode is None:
            return AttemptOutcome(ERROR, message=stderr)
        last_lines = tail(stderr)
        if ran.timed_out:
            message = f"activeDeadlineSeconds exceeded: process killed after {timeout:.1f}s"
            return AttemptOutcome(
                FAILED, ran.returncode, message=message, stderr_tail=last_lines, step_log=stderr
            )
        if ran.returncode != 0:
            last = last_lines.strip().splitlines()[-1] if last_lines.strip() else ""
            record = json_record(last)  # a step's last word is its error record
            if record is not None and isinstance(record.get("message"), str):
                last = record["message"]
            message = f"exit code {ran.returncode}: {last}".strip()
            # Argo's wait container saves the output parameters of a failed main container too (a
            # failed script's outputs are readable; argo-workflows issue 6345): what it wrote, or defaults.
            written = {
                p["name"]: (path.read_text() if path.is_file() else str(p["valueFrom"]["default"]))
                for p in (tpl.get("outputs") or {}).get("parameters") or []
                if (path := self.map_path(p["valueFrom"]["path"], root, mounts)).is_file()
                or "default" in p["valueFrom"]
            }
            return AttemptOutcome(
                FAILED, ran.returncode, written, message=message, stderr_tail=last_lines, step_log=stderr
            )
        outputs = {}
        for p in (tpl.get("outputs") or {}).get("parameters") or []:
            vf = p["valueFrom"]
            path = self.map_path(vf["path"], root, mounts)
            if path.is_file():
                outputs[p["name"]] = path.read_text()
            elif "default" in vf:
                outputs[p["name"]] = str(vf["default"])
            else:
                message = f"output parameter {p['name']!r}: {vf['path']} was not written and has no default"
                return AttemptOutcome(ERROR, 0, message=message, stderr_tail=last_lines, step_log=stderr)
        return AttemptOutcome(SUCCEEDED, 0, outputs, stdout.rstrip("\n"), "", last_lines, stderr)

    @staticmethod
    def map_path(path: str, root: Path, mounts: list[PurePosixPath]) -> Path:
        found = host_path(path, root, mounts)
        if found is None:
            raise NodeError(f"path {path!r} is outside /tmp and the template's volume mounts")
        return found

    @staticmethod
    def rewrite_value(value: str, root: Path, mounts: list[PurePosixPath]) -> str:
        """Rewrite an env value that names a container path under a mount into the temp dir."""
        if not value.startswith("/"):
            return value
        found = host_path(value, root, mounts)
        if found is None:
            return value
        return str(found) + ("/" if value.endswith("/") and len(value) > 1 else "")

    def materialise(self, tpl: dict[str, Any], root: Path) -> list[PurePosixPath]:
        volumes = {v["name"]: v for v in self.spec_volumes + (tpl.get("volumes") or [])}
        script_mounts = tpl["script"].get("volumeMounts") or []
        mounts = mount_points([m["mountPath"] for m in script_mounts])
        for point in IMPLICIT_MOUNTS:
            (root / "mounts" / point.lstrip("/")).mkdir(parents=True, exist_ok=True)
        for m in script_mounts:
            vol = volumes[m["name"]]
            target = root / "mounts" / str(container_path(m["mountPath"])).lstrip("/")
            files: dict[str, str] = {}
            if "secret" in vol or "configMap" in vol:
                src = vol.get("secret") or vol.get("configMap")
                name = src.get("secretName") or src.get("name")
                store = self.secrets if "secret" in vol else self.configmaps
                data = store.get(name)
                if data is None:
                    if not src.get("optional"):
                        raise NodeError(
                            f"volume {m['name']!r}: {'secret' if 'secret' in vol else 'configmap'} "
                            f"{name!r} was not given to the local executor"
                        )
                    data = {}
                if src.get("items"):
                    for it in src["items"]:
                        if it["key"] in data:
                            files[it.get("path", it["key"])] = data[it["key"]]
                        elif not src.get("optional"):
                            raise NodeError(f"volume {m['name']!r}: {name!r} has no key {it['key']!r}")
                else:
                    files = dict(data)
            if m.get("subPath"):
                content = files.get(m["subPath"])
                if content is None:
                    raise NodeError(f"volume {m['name']!r}: no key {m['subPath']!r} for subPath")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content)
                continue
            target.mkdir(parents=True, exist_ok=True)
            for rel, content in files.items():
                path = target / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)
                if "secret" in vol:
                    path.chmod(0o600)
        return mounts

    def environment(
        self, tpl: dict[str, Any], render: Callable[[Any], str], root: Path, mounts: list[PurePosixPath]
    ) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "PYTHONPATH": self.project_root,
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "HOME": str(root),
            "TMPDIR": str(root),
            "PYTHONDONTWRITEBYTECODE": "1",
            # The step's TMPDIR is deleted (on a background thread) after it exits: a step may leave
            # its scratch clones to that instead of deleting them on its critical path (steps.runtime.scratch_dir).
            "IMAGEBUMP_TMPDIR_DELETED_AFTER_STEP": "1",
        }
        env.update(self.env)
        # Only what the template declares names container paths; the caller's env is host paths.
        declared: dict[str, str] = {
            "hera__outputs_directory": self.rewrite_value(DEFAULT_OUTPUTS_DIRECTORY, root, mounts)
        }
        script = tpl["script"]
        for e in script.get("envFrom") or []:
            ref = e.get("secretRef") or e.get("configMapRef")
            store = self.secrets if "secretRef" in e else self.configmaps
            for k, v in (store.get(ref["name"]) or {}).items():
                declared[e.get("prefix", "") + k] = v
        for e in script.get("env") or []:
            if "value" in e:
                declared[e["name"]] = self.rewrite_value(render(e["value"]), root, mounts)
            elif e.get("valueFrom"):
                vf = e["valueFrom"]
                ref = vf.get("secretKeyRef") or vf.get("configMapKeyRef")
                store = self.secrets if "secretKeyRef" in vf else self.configmaps
                value = (store.get(ref["name"]) or {}).get(ref["key"])
                if value is None:
                    if ref.get("optional"):
                        continue
                    raise NodeError(
                        f"env {e['name']}: {ref['name']!r}/{ref['key']!r} was not given to the local executor"
                    )
                declared[e["name"]] = value
            else:
                declared[e["name"]] = ""
        env.update(declared)
        return env


__all__ = ["AttemptOutcome", "Sandbox", "discard", "wait_deleted"]

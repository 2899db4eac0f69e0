"""Step processes forked from the warm zygote are still fresh, isolated processes (``workflows.local.forkserver_client``).

The local executor starts ``python -m hera.workflows.runner`` steps by forking a Python process
that has already imported Hera's runner and the steps (the fork server, ``workflows/local/forkserver_server.py``). That must not
bring back what our users were hurt by — steps sharing a temp dir, an environment or state — so
these tests run real steps (``tests/workflows/stepfns.py``) both ways, forked and as new
processes, and compare what each step saw of itself. Nothing is faked: real processes, real
signals, ``/proc`` read from outside.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from workflows.local.executor import LocalExecutor
from workflows.local.forkserver_client import ForkServerClient
from workflows.local.sandbox import wait_deleted

ROOT = Path(__file__).resolve().parents[3]
PROBE = ROOT / "tests" / "testdata" / "executor" / "probe.yaml"


def _executor(tmp_path: Path, logs: list[dict], prefork: bool, **kwargs) -> LocalExecutor:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return LocalExecutor(
        PROBE,
        project_root=ROOT,
        env={"PASSED_THROUGH": "1"},
        log=logs.append,
        work_root=work,
        prefork=prefork,
        **kwargs,
    )


def _long_deadline() -> str:
    """``deadline.yaml`` (a step that sleeps 60 s) with a 90 s deadline: these tests kill it first."""
    text = (ROOT / "tests" / "testdata" / "executor" / "deadline.yaml").read_text()
    assert "activeDeadlineSeconds: 2\n" in text
    return text.replace("activeDeadlineSeconds: 2\n", "activeDeadlineSeconds: 90\n")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


@pytest.mark.parametrize("prefork", [True, False], ids=["forked", "new-process"])
def test_each_step_is_its_own_fresh_process(tmp_path: Path, prefork: bool, monkeypatch) -> None:
    # Something in the test process's environment that no step may see, whichever way it starts.
    monkeypatch.setenv("IMAGEBUMP_PARENT_ONLY_SECRET", "s3cr3t-parent-value")
    logs: list[dict] = []
    executor = _executor(tmp_path, logs, prefork)
    runs = [executor.run({"crash": "none"}, f"probe-{i}") for i in range(2)]

    nodes = [n for r in runs for n in r.nodes_for("probe")]
    assert [r.phase for r in runs] == ["Succeeded", "Succeeded"], [r.message for r in runs]
    assert len(nodes) == 4
    seen = [n.outputs for n in nodes]
    pids = {o["pid"] for o in seen}
    assert len(pids) == 4, "every step attempt is a new process"
    for o in seen:
        # its own session (a deadline kills its group, and nothing else)
        assert o["sid"] == o["pid"]
        # cwd, TMPDIR, tempfile's directory and a fresh mkdtemp all inside its own private dir
        assert o["tmpdir"] == o["cwd"] == o["gettempdir"]
        assert Path(o["scratch"]).parent == Path(o["cwd"])
        assert Path(o["cwd"]).parent == tmp_path / "work"
        # exactly the template's env + the executor's base and passthrough; nothing of the parent's
        keys = set(json.loads(o["env-keys"]))
        assert "PROBE_DECLARED" in keys and "PASSED_THROUGH" in keys and "hera__outputs_directory" in keys
        assert "IMAGEBUMP_PARENT_ONLY_SECRET" not in keys
        # module state starts fresh: no step sees what an earlier one did in "its" interpreter
        assert o["calls"] == "1"
        # run as `python -m hera.workflows.runner` is run
        assert o["main"] == "__main__" and o["argv0"].endswith(os.path.join("hera", "workflows", "runner.py"))
    assert len({o["cwd"] for o in seen}) == 4
    # every private directory is gone once the background deletion (a pod's garbage collection) ran
    wait_deleted()
    assert not any(Path(o["cwd"]).exists() for o in seen)
    assert list((tmp_path / "work").iterdir()) == []

    zygote = executor.fork_server()
    parents = {int(o["ppid"]) for o in seen}
    if prefork:
        assert zygote is not None and zygote.alive()
        assert parents == {zygote._proc.pid}, "forked from the zygote, not started from scratch"
        zygote_env = Path(f"/proc/{zygote._proc.pid}/environ").read_bytes()
        assert b"s3cr3t-parent-value" not in zygote_env and b"PASSED_THROUGH" not in zygote_env
    else:
        assert zygote is None
        assert parents == {os.getpid()}


@pytest.mark.parametrize("prefork", [True, False], ids=["forked", "new-process"])
@pytest.mark.parametrize(
    "how, code, text",
    [
        ("raise", 1, "RuntimeError: boom from a step"),
        ("exit-text", 1, "stopping: a message, not a code"),
        ("kill", -9, ""),
    ],
)
def test_a_crashing_step_ends_the_same_way_forked_or_not(
    tmp_path: Path, prefork: bool, how: str, code: int, text: str
) -> None:
    logs: list[dict] = []
    result = _executor(tmp_path, logs, prefork).run({"crash": how}, f"crash-{how}")

    assert result.phase == "Failed"
    node = result.node(".crash")
    assert node.phase == "Failed"
    assert node.exit_code == code
    failed = [r for r in logs if r.get("event") == "node-finished" and r.get("template") == "crash"]
    assert text in (failed[0].get("stderr_tail") or "") + (failed[0].get("message") or "")


def test_a_killed_zygote_loses_only_the_running_step_and_is_restarted(tmp_path: Path) -> None:
    """SIGKILL the zygote while a step sleeps in it (``deadline.yaml``'s 60 s sleep, its deadline raised):
    that attempt is an Error, not a deadline failure; its process is killed (not left running
    beside a retry); the next run starts a new zygote and forks from it."""
    state = tmp_path / "state"
    state.mkdir()
    zygote = ForkServerClient(sys.executable, str(ROOT), ["hera.workflows.runner", "tests.workflows.stepfns"])
    executor = LocalExecutor(
        _long_deadline(),
        project_root=ROOT,
        env={"STEPFNS_STATE_DIR": str(state)},
        log=lambda r: None,
        prefork=True,
    )
    executor.fork_server = lambda: zygote  # this test's own zygote, not the process-wide one
    try:
        import threading

        box: dict = {}
        thread = threading.Thread(target=lambda: box.setdefault("r", executor.run({}, "lost-1")))
        thread.start()
        marker = state / "sleep-started"
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        step_pid = int(marker.read_text())
        os.kill(zygote._proc.pid, signal.SIGKILL)
        thread.join(30)
        result = box["r"]
        assert result.node(".sleep").phase == "Error"
        assert "lost" in result.node(".sleep").message
        deadline = time.monotonic() + 10
        while _alive(step_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(step_pid), "the orphaned step was killed"
        assert not (state / "sleep-finished").exists()

        again = _executor(tmp_path, [], True)
        again.fork_server = lambda: zygote
        ok = again.run({"crash": "none"}, "lost-2")
        assert ok.phase == "Succeeded", ok.message
        assert {int(n.outputs["ppid"]) for n in ok.nodes_for("probe")} == {zygote._proc.pid}
        assert zygote.starts == 2
    finally:
        zygote.close()


def test_no_step_outlives_a_killed_executor(tmp_path: Path) -> None:
    """SIGKILL the process running the executor mid-step: the zygote sees its socket close, kills
    the step's process group and exits — nothing keeps running unowned."""
    state = tmp_path / "state"
    state.mkdir()
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from workflows.local.executor import LocalExecutor
        ex = LocalExecutor({_long_deadline()!r},
                           project_root={str(ROOT)!r}, env={{"STEPFNS_STATE_DIR": {str(state)!r}}},
                           log=lambda r: None, prefork=True)
        z = ex.fork_server()
        ex.run({{}}, "orphan-1")
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    marker = state / "sleep-started"
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), proc.stderr.read().decode() if proc.poll() is not None else "step never started"
    step_pid = int(marker.read_text())
    zygote_pid = int(Path(f"/proc/{step_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert zygote_pid != proc.pid
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 15
    while (_alive(step_pid) or _alive(zygote_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(step_pid), "the step was killed with its executor"
    assert not _alive(zygote_pid), "the zygote exited"
    assert not (state / "sleep-finished").exists()


def _echo(zygote: ForkServerClient, i: int, cwd: Path):
    """``python -m tests.workflows.echo_env i`` forked by ``zygote``, with ``ECHO_ID=id-i``."""
    return zygote.run(
        [sys.executable, "-m", "tests.workflows.echo_env", str(i)],
        cwd=str(cwd),
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "ECHO_ID": f"id-{i}"},
        timeout=120,
    )


def _children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def test_the_spare_child_becomes_the_next_step_and_ends_with_its_zygote(tmp_path: Path) -> None:
    """The zygote keeps one child forked ahead of the next request: that child becomes the next
    command (its pid is the one reported, its output and exit code its own). A spare killed
    before it had a request costs nothing: the next command is forked on request. When the zygote
    is SIGKILLed, its waiting spare ends too (its socket's EOF): no process is left behind."""
    zygote = ForkServerClient(sys.executable, str(ROOT), ["tests.workflows.echo_env"])

    def run(i: int):
        return _echo(zygote, i, tmp_path)

    try:
        zygote.ensure_started()
        zygote_pid = zygote._proc.pid

        ran: set[int] = set()  # a command's process may still be ending when its outcome is in

        def spares() -> list[int]:
            deadline = time.monotonic() + 10
            while True:
                found = [pid for pid in _children_of(zygote_pid) if pid not in ran]
                if found or time.monotonic() > deadline:
                    return found
                time.sleep(0.02)

        [spare] = spares()
        first = run(1)
        ran.add(first.pid)
        assert first.pid == spare
        assert (first.returncode, first.stdout, first.stderr) == (1, b"arg 1 env id-1\n", b"err 1\n")

        [spare] = spares()  # a new one, forked while the first command ran
        assert spare != first.pid
        os.kill(spare, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(spare) and time.monotonic() < deadline:
            time.sleep(0.01)
        second = run(2)
        ran.add(second.pid)
        assert (second.returncode, second.stdout) == (2, b"arg 2 env id-2\n")
        assert second.pid != spare

        [spare] = spares()
        os.kill(zygote_pid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while _alive(spare) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(spare), "the spare ended with its zygote"
    finally:
        zygote.close()


def test_the_caller_reads_a_forked_commands_pipes_itself(tmp_path: Path, thread_starts) -> None:
    """The caller waits for a forked command on its own thread: no thread is started per command
    (each one started is scheduled before the request can even be sent), and both streams are read
    whole at once, however much more than a pipe holds the command writes on each."""
    zygote = ForkServerClient(sys.executable, str(ROOT), ["tests.workflows.big_output"])
    try:
        zygote.ensure_started()  # its reader thread: one per zygote, not per command
        started = thread_starts()
        outcome = zygote.run(
            [sys.executable, "-m", "tests.workflows.big_output", "512"],
            cwd=str(tmp_path),
            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)},
            timeout=120,
        )
        assert started == []
        assert (outcome.returncode, outcome.timed_out) == (3, False)
        expected = b"".join(bytes([ord("a") + i % 26]) * 4096 for i in range(128))
        assert outcome.stdout == expected
        assert outcome.stderr == expected.upper()
    finally:
        zygote.close()


def test_a_spare_copies_the_pages_children_write_before_its_request(tmp_path: Path) -> None:
    """Children tell the zygote which of its pages they copied (written: copy-on-write); the next
    spares copy those while they wait for a request, so a later command's own writes to the same
    objects fault far less than the first one's. The command is the same and gets the same bytes:
    only when the copies are made changes."""
    zygote = ForkServerClient(sys.executable, str(ROOT), ["tests.workflows.write_faults"])
    try:

        def faults() -> int:
            outcome = zygote.run(
                [sys.executable, "-m", "tests.workflows.write_faults"],
                cwd=str(tmp_path),
                env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)},
                timeout=120,
            )
            assert outcome.returncode == 0, outcome.stderr
            return int(outcome.stdout)

        first = faults()  # its spare was forked before any child had reported
        # a child reports after its exit code (off the caller's path), and a spare learns when it
        # is forked: a later spare, not necessarily the next one, has the copies made
        later = [faults() for _ in range(8)]
        assert first > 100
        assert min(later) < first / 2, (first, later)
    finally:
        zygote.close()


def test_tempfile_cached_by_an_import_is_not_shared(tmp_path: Path) -> None:
    """A module that asks ``tempfile`` for its directory at import time (in the zygote, once) must
    not make every forked step use that directory: each step gets its own ``TMPDIR``."""
    zygote = ForkServerClient(
        sys.executable, str(ROOT), ["tests.workflows.warm_tmp", "tests.workflows.show_tmp"]
    )
    try:
        outs = []
        for i in range(2):
            own = tmp_path / f"step-{i}"
            own.mkdir()
            outcome = zygote.run(
                [sys.executable, "-m", "tests.workflows.show_tmp"],
                cwd=str(own),
                env={"TMPDIR": str(own), "PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)},
                timeout=30,
            )
            assert outcome.returncode == 0, outcome.stderr
            assert outcome.stderr == b""
            outs.append(json.loads(outcome.stdout))
        assert zygote.failed_preload == []
        assert outs[0]["at_import"] != str(tmp_path / "step-0"), "the zygote's import did cache its own dir"
        assert [o["now"] for o in outs] == [str(tmp_path / "step-0"), str(tmp_path / "step-1")]
    finally:
        zygote.close()


@pytest.mark.parametrize(
    "argv, env, expected",
    [
        (["PY", "-m", "hera.workflows.runner", "-e", "steps.x:run", "/s"], {"PYTHONPATH": "ROOT"}, True),
        (["PY", "-m", "mod"], {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}, True),
        (["PY", "-m", "mod"], {"PYTHONHASHSEED": "0"}, False),  # changes how the interpreter starts
        (["PY", "-m", "mod"], {"PYTHONPATH": "/elsewhere"}, False),
        (["PY", "-X", "dev", "-m", "mod"], {}, False),
        (["PY", "script.py"], {}, False),
        (["/other/python", "-m", "mod"], {}, False),
        (["PY", "-m"], {}, False),
    ],
)
def test_only_plain_python_dash_m_commands_are_forked(argv, env, expected) -> None:
    zygote = ForkServerClient("PY", "ROOT", [])
    assert zygote.eligible(argv, env) is expected


def test_prefork_is_on_by_default_and_can_be_turned_off(monkeypatch, tmp_path: Path) -> None:
    logs: list[dict] = []
    monkeypatch.delenv("IMAGEBUMP_LOCAL_PREFORK", raising=False)
    assert _executor(tmp_path, logs, None).prefork is True
    monkeypatch.setenv("IMAGEBUMP_LOCAL_PREFORK", "0")
    assert _executor(tmp_path, logs, None).prefork is False
    assert _executor(tmp_path, logs, None).fork_server() is None


def test_the_image_update_steps_and_their_lazy_imports_are_imported_ahead(tmp_path: Path) -> None:
    """The zygote for the rendered ``image-update`` template imports the step entry (steps.runtime.launcher),
    each step's module and what each lists in ``LAZY_IMPORTS`` (boto3 …), so a forked step imports
    nothing heavy itself — and never all of ``hera.workflows`` (the executor is not a step, but the
    interpreter steps are forked from is theirs); a fresh process, for contrast, starts with none of them."""
    template = ROOT / "manifests" / "workflows" / "image-update.yaml"
    executor = LocalExecutor(
        template,
        project_root=ROOT,
        log=lambda r: None,
        prefork=True,
        configmaps={"imagebump-rules": {"rules.yaml": "[]"}},
        secrets={"imagebump-git": {"token": "t0ken-unused"}, "imagebump-git-read": {"token": "t0ken-unused"}},
    )
    assert executor.preload_modules() == [
        "steps.runtime.launcher",
        "steps.resolve_image.step",
        "steps.edit_kustomize.step",
        "steps.commit_pr.step",
        "steps.verify_live.step",
        "steps.notify.verifying",  # imagebump/live pending beside verify-live
        "steps.notify.step",  # the exit handler
    ]
    zygote = ForkServerClient(sys.executable, str(ROOT), executor.preload_modules())
    names = [
        "steps.runtime.launcher",
        "steps.commit_pr.step",
        "steps.aws.ecr",
        "steps.aws.ecr_http",
        "steps.git",
        "botocore.session",
        "githubkit",
    ]
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)}
    try:
        outcome = zygote.run(
            [sys.executable, "-m", "tests.workflows.show_modules", *names],
            cwd=str(tmp_path),
            env=env,
            timeout=60,
        )
        assert outcome.returncode == 0, outcome.stderr
        assert zygote.failed_preload == []
        assert json.loads(outcome.stdout) == dict.fromkeys(names, True)
        hera = zygote.run(
            [sys.executable, "-m", "tests.workflows.show_modules", "hera", "hera.workflows"],
            cwd=str(tmp_path),
            env=env,
            timeout=60,
        )
        assert json.loads(hera.stdout) == {"hera": False, "hera.workflows": False}, hera.stderr
        # WARM_UP ran for every module of ours the zygote holds, including ones no step names
        # (steps.kustomize.yaml_nodes is imported by other modules)
        warm = zygote.run(
            [sys.executable, "-m", "tests.workflows.show_warm"], cwd=str(tmp_path), env=env, timeout=60
        )
        assert json.loads(warm.stdout) == {
            "ecr_loader": True,
            "ecr_session": True,
            "ecr_tls": True,
            "yaml_tables": True,
        }, warm.stderr
    finally:
        zygote.close()
    fresh = subprocess.run(
        [sys.executable, "-m", "tests.workflows.show_modules", *names],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=True,
    )
    assert not any(json.loads(fresh.stdout).values())


def test_many_steps_forked_at_once_each_get_their_own_output(tmp_path: Path) -> None:
    """40 commands sent to one zygote from 40 threads at once: each gets its own stdout, stderr,
    environment and exit code — nothing crossed between requests."""
    from concurrent.futures import ThreadPoolExecutor

    zygote = ForkServerClient(sys.executable, str(ROOT), ["tests.workflows.echo_env"])

    def one(i: int):
        return _echo(zygote, i, tmp_path)

    try:
        with ThreadPoolExecutor(40) as pool:
            outcomes = list(pool.map(one, range(40)))
    finally:
        zygote.close()
    for i, outcome in enumerate(outcomes):
        assert outcome.stdout == f"arg {i} env id-{i}\n".encode(), (i, outcome)
        assert outcome.stderr == f"err {i}\n".encode()
        assert outcome.returncode == i % 7
    assert len({o.pid for o in outcomes}) == 40


def test_warm_starts_the_zygote_before_the_first_step(tmp_path: Path) -> None:
    """``imagebump run --local`` and the demo call ``warm()`` before taking work, so the first
    event does not wait for the imports; the first step is then forked from that same process."""
    logs: list[dict] = []
    executor = _executor(tmp_path, logs, True)
    zygote = ForkServerClient(sys.executable, str(ROOT), executor.preload_modules())
    executor.fork_server = lambda: zygote
    try:
        assert not zygote.alive()
        executor.warm()
        assert zygote.alive() and zygote.starts == 1
        warm_pid = zygote._proc.pid
        result = executor.run({"crash": "none"}, "warm-1")
        assert result.phase == "Succeeded", result.message
        assert {int(n.outputs["ppid"]) for n in result.nodes_for("probe")} == {warm_pid}
        assert zygote.starts == 1
    finally:
        zygote.close()
    assert not zygote.alive()
    _executor(tmp_path, logs, False).warm()  # prefork off: nothing to start, nothing raised


def test_a_zygote_whose_imports_start_a_thread_refuses_and_steps_start_fresh(
    tmp_path: Path, monkeypatch
) -> None:
    """fork() copies only the calling thread, so a zygote in which an import started a thread
    refuses to serve; the executor logs it and starts the step as a new process instead, and
    does not try the zygote again for every step."""
    import types

    from workflows.local import forkserver_client
    from workflows.local.forkserver_client import ForkServerError

    spawned: list[list[str]] = []

    def popen(argv, **kwargs):
        spawned.append(argv)
        return subprocess.Popen(argv, **kwargs)

    monkeypatch.setattr(
        forkserver_client,
        "subprocess",
        types.SimpleNamespace(
            Popen=popen, DEVNULL=subprocess.DEVNULL, TimeoutExpired=subprocess.TimeoutExpired
        ),
    )
    zygote = ForkServerClient(sys.executable, str(ROOT), ["tests.workflows.thread_at_import"])
    with pytest.raises(ForkServerError, match="started-by-import") as caught:
        zygote.ensure_started()
    assert caught.value.started is False

    logs: list[dict] = []
    executor = _executor(tmp_path, logs, True)
    executor.fork_server = lambda: zygote
    result = executor.run({"crash": "none"}, "fallback-1")
    assert result.phase == "Succeeded", result.message
    assert {int(n.outputs["ppid"]) for n in result.nodes_for("probe")} == {os.getpid()}
    assert [r["event"] for r in logs].count("zygote-unavailable") == 2
    assert zygote.starts == 0 and zygote.refused
    assert len(spawned) == 1, "the refusing zygote was started once, not once per step"

"""Tiny step functions the local executor's tests run through Hera's runner (one process each).

No ``from __future__ import annotations`` (Hera's runner reads real annotations) and no Hera
import, like the real steps. Outputs go to ``$hera__outputs_directory/parameters/<name>``.
State that must survive a step (counters, markers) lives in ``$STEPFNS_STATE_DIR``, a directory
the test passes through the executor's ``env``.
"""

import base64
import json
import os
import sys
import time
from pathlib import Path


def _out(name: str, value: str) -> None:
    directory = Path(os.environ["hera__outputs_directory"]) / "parameters"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(value)


def _state() -> Path:
    # IMAGEBUMP_TEST_STATE_DIR: for `imagebump run`, which passes only AWS_*/IMAGEBUMP_* through
    return Path(os.environ.get("STEPFNS_STATE_DIR") or os.environ["IMAGEBUMP_TEST_STATE_DIR"])


def fan_out(names: str = "a,b") -> None:
    """Emit ``items``: one object per name; every second one has ``flag: false``."""
    items = [{"name": n, "flag": i % 2 == 0} for i, n in enumerate(names.split(",")) if n]
    _out("items", json.dumps(items))


def greet(name: str, flag: str = "true") -> None:
    """Write ``greeting`` (and ``flag`` back, so ``when`` can read it)."""
    _out("greeting", f"hello {name}")
    _out("flag", flag)


def shout(greeting: str) -> None:
    """Write ``loud``; runs only when the caller's ``when`` lets it."""
    _out("loud", greeting.upper())


def join(values: str) -> None:
    """Write ``joined``: the JSON list it got, sorted and comma-joined (skipped entries included)."""
    _out("joined", ",".join(sorted(str(v) for v in json.loads(values))))


def flaky(succeed_on: str = "3", code: str = "75") -> None:
    """Fail with ``code`` until this is attempt ``succeed_on`` (counted in the state dir)."""
    counter = _state() / "attempts"
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    if n < int(succeed_on):
        print(f"attempt {n} failing with {code}", file=sys.stderr)
        raise SystemExit(int(code))
    _out("attempt", str(n))


def fail_then_sleep(seconds: str = "60") -> None:
    """Fail with 75 on the first attempt (counted in the state dir); sleep on every later one."""
    counter = _state() / "attempts"
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    if n == 1:
        raise SystemExit(75)
    (_state() / "retry-started").write_text(str(n))
    time.sleep(float(seconds))


def sleep(seconds: str = "60") -> None:
    """Mark the start in the state dir, then sleep."""
    (_state() / "sleep-started").write_text(str(os.getpid()))
    time.sleep(float(seconds))
    (_state() / "sleep-finished").write_text("yes")


def critical(label: str, seconds: str = "0.3") -> None:
    """Append ``start label`` and ``end label`` around a short sleep to ``markers`` in the state dir."""
    markers = _state() / "markers"
    with markers.open("a") as fh:
        fh.write(f"start {label}\n")
    time.sleep(float(seconds))
    with markers.open("a") as fh:
        fh.write(f"end {label}\n")


def leave_file() -> None:
    """Write a private file into cwd and report where this step ran."""
    Path("private.txt").write_text("mine")
    _out("cwd", os.getcwd())
    _out("tmpdir", os.environ.get("TMPDIR", ""))
    _out("home", os.environ.get("HOME", ""))


def look_for(other_cwd: str) -> None:
    """Report whether another step's cwd (and its file) is visible, and what this cwd holds."""
    _out("cwd", os.getcwd())
    _out("sees-other", json.dumps(Path(other_cwd, "private.txt").exists()))
    _out("listing", json.dumps(sorted(p.name for p in Path.cwd().iterdir())))


def show_env() -> None:
    """Report the env and mounted files a step sees."""
    rules_file = os.environ.get("IMAGEBUMP_RULES_FILE", "")
    _out("env-keys", json.dumps(sorted(os.environ)))
    _out("rules", Path(rules_file).read_text() if rules_file else "")
    _out("rules-file", rules_file)
    token_file = os.environ.get("IMAGEBUMP_GIT_TOKEN_FILE", "")
    _out(
        "token-file-ok",
        json.dumps(
            bool(token_file) and Path(token_file).read_text() == os.environ.get("IMAGEBUMP_GIT_TOKEN")
        ),
    )
    _out("outputs-dir", os.environ["hera__outputs_directory"])


def leak_and_fail() -> None:
    """Print the token to stderr, as is and as base64 / an HTTP Basic header, and fail: the executor
    must redact every form from its logs."""
    token = os.environ.get("IMAGEBUMP_GIT_TOKEN") or ""
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    print(f"base64 {base64.b64encode(token.encode()).decode()}", file=sys.stderr)
    print(f"Authorization: Basic {basic}", file=sys.stderr)
    print(f"token is {token}", file=sys.stderr)
    raise SystemExit(1)


def handle_event(event: str = "") -> None:
    """Stand-in for image-update: record the event; ``fail`` tags fail, ``block`` tags wait.

    Appends ``<tag> <id>`` to ``markers``; a tag ``block-N`` writes ``started-<tag>`` and waits
    (at most 120 s) for ``release`` in the state dir; a tag starting ``sleep-S`` sleeps S seconds;
    a tag starting ``fail`` exits 1.
    """
    body = json.loads(event)
    tag = body["detail"].get("image-tag", "")
    with (_state() / "markers").open("a") as fh:
        fh.write(f"{tag} {body.get('id')}\n")
    if tag.startswith("block"):
        (_state() / f"started-{tag}").write_text("yes")
        deadline = time.monotonic() + 120
        while not (_state() / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    if tag.startswith("sleep-"):
        time.sleep(float(tag.split("-", 1)[1]))
    if tag.startswith("fail"):
        print(f"failing on purpose for {tag}", file=sys.stderr)
        raise SystemExit(1)
    _out("tag", tag)


_CALLS = 0  # module state: a fresh process starts at 0, whoever ran before


def probe(label: str = "") -> None:
    """Report what this step's process is: pid, parent, session, cwd, temp dir, env and module state."""
    import tempfile

    global _CALLS
    _CALLS += 1
    scratch = Path(tempfile.mkdtemp())
    _out("label", label)
    _out("pid", str(os.getpid()))
    _out("ppid", str(os.getppid()))
    _out("sid", str(os.getsid(0)))
    _out("cwd", os.getcwd())
    _out("tmpdir", os.environ.get("TMPDIR", ""))
    _out("gettempdir", tempfile.gettempdir())
    _out("scratch", str(scratch))
    _out("env-keys", json.dumps(sorted(os.environ)))
    _out("calls", str(_CALLS))
    _out("argv0", sys.argv[0])
    _out("main", str(getattr(sys.modules.get("__main__"), "__name__", "")))


def crash(how: str = "raise") -> None:
    """End badly: ``raise`` an uncaught exception, ``exit-text`` sys.exit with a message, ``kill`` SIGKILL."""
    if how == "raise":
        raise RuntimeError("boom from a step")
    if how == "exit-text":
        sys.exit("stopping: a message, not a code")
    if how == "kill":
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def chatty(words: str = "hello from the step") -> None:
    """Log ``words`` the way the real steps do (steps.runtime.harness's JSON lines), then a plain line."""
    import logging

    from steps.runtime.harness import step_entry

    @step_entry
    def run(words: str) -> None:
        logging.getLogger("steps.chatty").info("%s", words)
        print("a plain line on stderr", file=sys.stderr)

    run(words=words)


def record_exit(status: str = "", failures: str = "", fail: str = "false") -> None:
    """An exit handler: write what it was given and the node names of the finished Workflow it finds."""
    workflow = json.loads(Path(os.environ["IMAGEBUMP_WORKFLOW_FILE"]).read_text())
    (_state() / "exit.json").write_text(
        json.dumps(
            {
                "status": status,
                "failures": failures,
                "phase": workflow["status"]["phase"],
                "nodes": {n["name"]: n for n in workflow["status"]["nodes"].values()},
            }
        )
    )
    if fail == "true":
        raise SystemExit(1)

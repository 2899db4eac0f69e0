"""Cold start (issue 15, goal 1): what a step pod pays before its own work, with Hera's runner and ours.

On a cluster every step is a fresh Python in a fresh pod; this measures it on this machine with the
rendered templates' own command and environment: exec → the first line of each step's work,
``python -X importtime`` of the same processes, and a whole event with a new interpreter per step
(what each measure does: :func:`run`). Asserts nothing: it prints, and with ``--merge-into``
writes the ``cold_start`` section of ``bench/results.json``. ``python -m bench.coldstart [--runs N]
[--event-runs N] [--no-event] [--merge-into bench/results.json]``; ``python -m bench`` runs it as
the ``coldstart`` scenario.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from bench.coldstart_cases import CASES, MANIFESTS, PROJECT_ROOT, Case, inputs_file, step_env, template
from bench.stats import loadavg, machine, summary
from workflows import names

PYTHON = sys.executable
RUNNERS = {"hera": "hera.workflows.runner", "entry": "steps.runtime.launcher"}

_PROBE = """\
import functools as _functools
import os as _os
import time as _time

from {module} import run as _step_run


@_functools.wraps(_step_run)
def run(*args, **kwargs):
    _now = _time.monotonic()  # the first line of the step's own work
    _os.write(int(_os.environ["COLDSTART_FD"]), repr(_now).encode())
    _os._exit(0)
"""


def write_probes(directory: Path) -> dict[str, str]:
    """One probe module per step module; returns {step module: probe module}."""
    out = {}
    for case in CASES:
        tpl = template(case.manifest, case.template)
        module = _entrypoint(tpl).split(":")[0]
        probe = "coldprobe_" + module.replace(".", "_")
        (directory / f"{probe}.py").write_text(_PROBE.format(module=module))
        out[module] = probe
    return out


def _entrypoint(tpl: dict[str, Any]) -> str:
    args = tpl["script"]["args"]
    return args[args.index("-e") + 1]


def command(tpl: dict[str, Any], runner: str, entrypoint: str, script: Path, *flags: str) -> list[str]:
    """The template's command with ``runner`` as the module and ``entrypoint`` after ``-e``."""
    args = list(tpl["script"]["args"])
    args[args.index("-m") + 1] = RUNNERS[runner]
    args[args.index("-e") + 1] = entrypoint
    return [PYTHON, *flags, *args, str(script)]


def byte_compile() -> None:
    """Compile the project's modules, as the Dockerfile compiles site-packages."""
    subprocess.run(
        [PYTHON, "-m", "compileall", "-q", "steps", "imagebump", "workflows"],
        cwd=PROJECT_ROOT,
        check=True,
        capture_output=True,
    )


def first_line(case: Case, runner: str, probes: dict[str, str], root: Path) -> float:
    """Seconds from spawning the step's process to the first line of its function."""
    tpl = template(case.manifest, case.template)
    work = Path(tempfile.mkdtemp(dir=root))
    script = work / "script"
    script.write_text(json.dumps(inputs_file(tpl, case.values)))
    module, function = _entrypoint(tpl).split(":")
    read, write = os.pipe()
    env = {**step_env(tpl, work), "PYTHONPATH": f"{root}:{PROJECT_ROOT}", "COLDSTART_FD": str(write)}
    argv = command(tpl, runner, f"{probes[module]}:{function}", script)
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=work, env=env, pass_fds=(write,), stderr=subprocess.PIPE)
    os.close(write)
    _, stderr = proc.communicate(timeout=120)
    with os.fdopen(read, "rb") as f:
        data = f.read()
    if not data:
        raise RuntimeError(f"{case.name} via {runner}: exit {proc.returncode}: {stderr.decode()[-2000:]}")
    return float(data) - started


def interpreter_floor(reps: int) -> dict[str, Any]:
    """``python -c pass`` from spawn to exit: what no import can go under."""
    times = []
    for _ in range(reps):
        t = time.monotonic()
        subprocess.run([PYTHON, "-c", "pass"], check=True, env={"PATH": os.environ.get("PATH", "")})
        times.append(time.monotonic() - t)
    return summary(times)


_IMPORTTIME = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)$")


def importtime(case: Case, runner: str, probes: dict[str, str], root: Path, top: int = 6) -> dict[str, Any]:
    """``-X importtime`` up to the step's first line: modules, total self time, top-level by cumulative."""
    tpl = template(case.manifest, case.template)
    work = Path(tempfile.mkdtemp(dir=root))
    script = work / "script"
    script.write_text(json.dumps(inputs_file(tpl, case.values)))
    module, function = _entrypoint(tpl).split(":")
    read, write = os.pipe()
    env = {**step_env(tpl, work), "PYTHONPATH": f"{root}:{PROJECT_ROOT}", "COLDSTART_FD": str(write)}
    argv = command(tpl, runner, f"{probes[module]}:{function}", script, "-X", "importtime")
    proc = subprocess.run(
        argv, cwd=work, env=env, pass_fds=(write,), capture_output=True, text=True, timeout=120, check=False
    )
    os.close(write)
    os.close(read)
    rows = [m.groups() for m in map(_IMPORTTIME.match, proc.stderr.splitlines()) if m]
    total = sum(int(r[0]) for r in rows) / 1e6
    toplevel = sorted(((int(r[1]) / 1e6, r[3]) for r in rows if not r[2]), reverse=True)
    names = {r[3] for r in rows}
    packages: dict[str, float] = {}
    for r in rows:
        packages[r[3].split(".")[0]] = packages.get(r[3].split(".")[0], 0.0) + int(r[0]) / 1e6
    return {
        "modules": len(rows),
        "imports_s": round(total, 3),
        "top": [[name, round(s, 3)] for s, name in toplevel[:top]],
        "by_package": [[n, round(t, 3)] for n, t in sorted(packages.items(), key=lambda kv: -kv[1])[:top]],
        "hera_workflows": "hera.workflows" in names,
        "githubkit": "githubkit" in names,
        "steps_git": any(n == "steps.git" or n.startswith("steps.git_") for n in names),
    }


def run_steps(runs: int, log: Any = print) -> dict[str, Any]:
    """Sections 1 and 2 (see the module docstring)."""
    byte_compile()
    out: dict[str, Any] = {"runs": runs, "loadavg_before": loadavg(), "floor_python_pass_s": {}}
    with tempfile.TemporaryDirectory(prefix="bench-coldstart-") as tmp:
        root = Path(tmp)
        probes = write_probes(root)
        out["floor_python_pass_s"] = interpreter_floor(runs)
        steps: dict[str, Any] = {}
        for case in CASES:
            times: dict[str, list[float]] = {r: [] for r in RUNNERS}
            for _ in range(runs):
                for runner in RUNNERS:  # interleaved: the same load for both
                    times[runner].append(first_line(case, runner, probes, root))
            steps[case.name] = {
                "first_line_s": {r: summary(v) for r, v in times.items()},
                "importtime": {r: importtime(case, r, probes, root) for r in RUNNERS},
            }
            s = steps[case.name]["first_line_s"]
            log(
                f"[coldstart] {case.name:20s} exec → first line p50: hera {s['hera']['p50']:.3f}s, "
                f"entry {s['entry']['p50']:.3f}s (load {loadavg()})"
            )
        out["steps"] = steps
    out["loadavg_after"] = loadavg()
    return out


def _template_with_runner(runner: str) -> str:
    text = (MANIFESTS / names.rendered(names.IMAGE_UPDATE)).read_text()
    doc = yaml.safe_load(text)
    for tpl in doc["spec"]["templates"]:
        args = (tpl.get("script") or {}).get("args")
        if args and "-m" in args:
            args[args.index("-m") + 1] = RUNNERS[runner]
    return yaml.safe_dump(doc, sort_keys=False)


def run_event(
    event_runs: int,
    log: Any = print,
    *,
    world: Any = None,
    repository: str = "mono/app00",
    warm: bool = True,
) -> dict[str, Any]:
    """Section 3: event → commit with every step a new interpreter, both runners interleaved.

    ``world``: the benchmark's world (the single event's, so the cold and warm figures are of the
    same repositories); None opens one of the same shape. ``warm``: each round also runs the event
    with steps forked from a warm interpreter (key ``warm``), so the cold / warm ratio compares
    events run one after the other, under the same load.
    """
    from contextlib import nullcontext

    from bench import e2e
    from bench.testbed import open_world

    byte_compile()
    out: dict[str, Any] = {"runs": event_runs, "repository": repository, "loadavg_before": loadavg()}
    modes = [*RUNNERS, *(["warm"] if warm else [])]
    latencies: dict[str, list[float]] = {r: [] for r in modes}
    to_commit: dict[str, list[float]] = {r: [] for r in modes}  # push → commit landed
    step_times: dict[str, dict[str, list[float]]] = {r: {} for r in modes}
    outcomes: dict[str, dict[str, int]] = {r: {} for r in modes}
    with nullcontext(world) if world is not None else open_world(apps=4, log=log) as w:
        executors = {r: w.executor(template_text=_template_with_runner(r), prefork=False) for r in RUNNERS}
        if warm:
            executors["warm"] = w.executor()  # the rendered template, steps forked from a warm interpreter
        for _ in range(event_runs):
            for runner in modes:
                one = e2e.run_sequential(w, executors[runner], repository, 1)
                if one["failed"]:
                    raise RuntimeError(f"event via {runner} failed: {one['outcomes']}")
                latencies[runner] += one["latencies"]
                to_commit[runner] += one["to_commits"]
                for step, s in one["steps_s"].items():
                    if s.get("n"):
                        step_times[runner].setdefault(step, []).append(s["p50"])
                for outcome, n in one["outcomes"].items():
                    outcomes[runner][outcome] = outcomes[runner].get(outcome, 0) + n
    out["latency_s"] = {r: summary(v) for r, v in latencies.items()}
    out["to_commit_s"] = {r: summary(v) for r, v in to_commit.items() if v}
    out["steps_s"] = {r: {s: summary(v) for s, v in per.items()} for r, per in step_times.items()}
    out["outcomes"] = outcomes
    out["loadavg_after"] = loadavg()
    log(
        f"[coldstart] event → commit, fresh processes, p50: hera {out['latency_s']['hera']['p50']:.2f}s, "
        f"entry {out['latency_s']['entry']['p50']:.2f}s (load {loadavg()})"
    )
    return out


def run(runs: int = 7, event_runs: int = 7, event: bool = True, log: Any = print) -> dict[str, Any]:
    """Everything above; the ``cold_start`` section of results.json (``python -m bench`` runs the
    event part in its own world: :func:`run_event` with ``world``).

    On a cluster every step is a fresh Python in a fresh pod. This measures, on this machine, with the
    rendered templates' own command and environment:

    1. **Per step, exec → the first line of the step's own work** (p50 over ``runs``, the two runners
       interleaved run by run so their ratio is fair on a shared machine): a probe module imports the
       real step module and exposes its ``run`` under the same signature (``functools.wraps``), so the
       runner imports and parses exactly what it does for the real step; the probe's first line
       records the time and ends the process. Inputs are the template's declared inputs, rendered as
       Argo renders ``{{inputs.parameters}}`` (every input, defaults included). Runners: ``hera``
       (``python -m hera.workflows.runner``, the templates before issue 15) and ``entry``
       (``python -m steps.runtime.launcher``, what the templates render now).
    2. **``python -X importtime``** of the same processes: modules loaded, the sum of import self
       times, and the top-level imports by cumulative time (the evidence in bench/README.md).
    3. **A whole event with fresh processes**: event on the queue → commit done through the local
       executor with ``prefork=False`` (``IMAGEBUMP_LOCAL_PREFORK=0``: every step a new interpreter,
       as every pod is), over the rendered ``image-update`` template and a variant of it whose steps
       run Hera's runner; interleaved, p50 over ``event_runs``.

    The project's modules are byte-compiled first, as the Dockerfile does (the templates set
    ``PYTHONDONTWRITEBYTECODE=1``, so nothing is cached at run time otherwise). Nothing here asserts on
    time: it measures and prints. ``python -m bench.coldstart [--runs N] [--event-runs N] [--no-event]
    [--merge-into bench/results.json]`` standalone; ``python -m bench`` runs it as the ``coldstart``
    scenario (``--only coldstart --merge`` alone) and stores it under ``cold_start`` in results.json.
    """
    result: dict[str, Any] = {
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "per_step": run_steps(runs, log),
    }
    if event:
        result["event"] = run_event(event_runs, log)
    return result


def table(result: dict[str, Any]) -> str:
    """A Markdown table of the figures (p50 (min), seconds)."""

    def cell(s: dict[str, Any]) -> str:
        return f"{s['p50']:.3f} ({s['min']:.3f})"

    per = result["per_step"]
    lines = [
        f"exec → first line of the step's own work, p50 (min) of {per['runs']} interleaved runs, "
        f"load {per['loadavg_before']} → {per['loadavg_after']}; floor `python -c pass` "
        f"{cell(per['floor_python_pass_s'])}",
        "",
        "| step | Hera's runner | steps.runtime.launcher | modules (hera → entry) | imports s (hera → entry) |",
        "|---|---|---|---|---|",
    ]
    for name, s in per["steps"].items():
        it = s["importtime"]
        lines.append(
            f"| {name} | {cell(s['first_line_s']['hera'])} | {cell(s['first_line_s']['entry'])} | "
            f"{it['hera']['modules']} → {it['entry']['modules']} | "
            f"{it['hera']['imports_s']:.3f} → {it['entry']['imports_s']:.3f} |"
        )
    if "event" in result:
        ev = result["event"]
        lines += [
            "",
            f"event → commit, every step a fresh process, p50 (min) of {ev['runs']} interleaved runs, "
            f"load {ev['loadavg_before']} → {ev['loadavg_after']}",
            "",
            "| runner | event | " + " | ".join(ev["steps_s"]["entry"]) + " |",
            "|---|---|" + "---|" * len(ev["steps_s"]["entry"]),
        ]
        for r in RUNNERS:
            steps = " | ".join(cell(v) for v in ev["steps_s"][r].values())
            lines.append(f"| {RUNNERS[r]} | {cell(ev['latency_s'][r])} | {steps} |")
    return "\n".join(lines)


def importtime_table(result: dict[str, Any]) -> str:
    """Top-level imports by cumulative time, per step and runner (bench/README.md's evidence)."""
    lines = [
        "| step | runner | modules | imports s | top-level imports, cumulative s | by package, self s |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in result["per_step"]["steps"].items():
        for r in RUNNERS:
            it = s["importtime"][r]
            top = ", ".join(f"`{n}` {t:.3f}" for n, t in it["top"][:4])
            pkg = ", ".join(f"`{n}` {t:.3f}" for n, t in it["by_package"][:5])
            lines.append(f"| {name} | {r} | {it['modules']} | {it['imports_s']:.3f} | {top} | {pkg} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.coldstart", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per step and runner (default 7)")
    parser.add_argument("--event-runs", type=int, default=7, help="events per runner (default 7)")
    parser.add_argument("--no-event", action="store_true", help="skip the whole-event measurement")
    parser.add_argument(
        "--merge-into",
        type=Path,
        metavar="RESULTS_JSON",
        help="store the figures under `cold_start` in this results.json (e.g. bench/results.json)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args(argv)
    result = run(args.runs, args.event_runs, event=not args.no_event)
    print()
    print(table(result))
    print()
    print(importtime_table(result))
    if args.json:
        print(json.dumps(result, indent=2))
    if args.merge_into:
        previous = json.loads(args.merge_into.read_text()) if args.merge_into.is_file() else {}
        previous["cold_start"] = result
        args.merge_into.write_text(json.dumps(previous, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Scenario 5: where the time goes that is not Git work — measured before/after where we can.

1. Imports in every step process, each measured in a fresh interpreter (minimum of ``reps``:
   CPU-bound work on a shared machine — the minimum is the cost, the rest is other load):
   - ``as shipped (image)``: no bytecode cache at all — the Dockerfile installs with
     ``pip install --no-compile`` and sets ``PYTHONDONTWRITEBYTECODE=1``, and the root filesystem is
     read-only, so every pod compiles every module it imports, every time (simulated here with an
     empty ``PYTHONPYCACHEPREFIX``);
   - ``local executor today``: site-packages precompiled by pip, the project's own modules not
     (``PYTHONDONTWRITEBYTECODE=1`` in the template);
   - ``precompiled``: everything byte-compiled ahead of time (a warmed ``PYTHONPYCACHEPREFIX``);
   - ``precompiled, no Hera runner``: the same without ``hera.workflows.runner``, which imports
     all of ``hera.workflows`` (its generated Argo models) to call one function;
   - for commit-pr in commit mode, without the GitHub client (``steps.forge``/``steps.github``
     pull in githubkit + httpx at import time, even when no API is used).
2. End to end before/after: the same sequential events through the shipped template, and through
   a variant whose steps run ``python -m bench.fastrunner`` (no Hera import) with a precompiled
   bytecode cache — the two fixes together, measured on the same world.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench import e2e
from bench.world import PYTHON, TEMPLATE, World, python_env

#: What commit-pr needs in mode commit / provider local (no GitHub API).
COMMIT_MODE_NEEDS = (
    "imagebump, pydantic, steps._runtime, steps.git, steps.kustomize, steps.models, steps.errors")
#: Imported to warm a bytecode cache: the steps, their lazy imports, the runner, boto3's ECR client.
WARM_CODE = ("import hera.workflows.runner, bench.fastrunner, steps.resolve_image, steps.edit_kustomize, "
             "steps.commit_pr, steps.ecr, steps.events, steps.rules, steps.order, steps.kustomize, "
             "steps.git, "
             "boto3; boto3.client('ecr', region_name='us-west-2'); "
             "import botocore.config, botocore.retries.standard")


def warm_cache(prefix: Path) -> None:
    """Byte-compile what the steps import into ``prefix`` (a PYTHONPYCACHEPREFIX)."""
    env = {k: v for k, v in python_env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    subprocess.run([PYTHON, "-c", WARM_CODE], env=env, check=True, capture_output=True)


def run_imports(reps: int, cache_root: Path, steps: tuple[str, ...] = e2e.STEPS) -> dict[str, Any]:
    """Import cost of each step's process under the four bytecode/runner conditions (see module doc)."""
    warm = cache_root / "warm"
    warm_cache(warm)
    cold_env = {**python_env(), "PYTHONPYCACHEPREFIX": str(cache_root / "empty")}
    warm_env = {**python_env(), "PYTHONPYCACHEPREFIX": str(warm)}
    start = {
        "image": min(e2e.process_times("pass", reps, cold_env)),
        "local": min(e2e.process_times("pass", reps)),
        "precompiled": min(e2e.process_times("pass", reps, warm_env)),
    }
    out: dict[str, Any] = {"process_start_s": {k: round(v, 3) for k, v in start.items()}, "steps": {}}
    for step in steps:
        module = e2e.STEP_MODULES[step]
        with_runner = f"import hera.workflows.runner, {module}"
        row = {
            "as_shipped_image_s": min(e2e.process_times(with_runner, reps, cold_env)),
            "local_executor_today_s": min(e2e.process_times(with_runner, reps)),
            "precompiled_s": min(e2e.process_times(with_runner, reps, warm_env)),
            "precompiled_no_hera_runner_s": min(
                e2e.process_times(f"import pydantic, {module}", reps, warm_env)),
        }
        if step == "commit-pr":
            row["precompiled_no_hera_no_github_s"] = min(
                e2e.process_times(f"import {COMMIT_MODE_NEEDS}", reps, warm_env))
        out["steps"][step] = {k: round(v, 3) for k, v in row.items()}
    return out


def fast_template() -> str:
    """The rendered template with every step run by ``bench.fastrunner`` instead of Hera's runner."""
    text = TEMPLATE.read_text()
    replaced = text.replace("- hera.workflows.runner\n", "- bench.fastrunner\n")
    if replaced == text:
        raise RuntimeError("the template no longer runs steps with hera.workflows.runner; update bench.waste")
    return replaced


def run_before_after(world: World, *, runs: int, cache_root: Path) -> dict[str, Any]:
    """Sequential events through the shipped template, then through the fixed variant."""
    warm = cache_root / "warm"
    if not warm.is_dir():
        warm_cache(warm)
    before = e2e.run_sequential(world, world.executor(), "mono/app03", runs)
    after = e2e.run_sequential(world, world.executor(template_text=fast_template(),
                                                     extra_env={"PYTHONPYCACHEPREFIX": str(warm)}),
                               "mono/app03", runs)
    def short(r: dict[str, Any]) -> dict[str, Any]:
        return {k: r[k] for k in ("latency_s", "steps_s", "failed", "outcomes")}
    b, a = before["latency_s"].get("p50"), after["latency_s"].get("p50")
    return {"runs": runs, "before": short(before), "after": short(after),
            "p50_speedup": round(b / a, 2) if a else None}


def new_cache_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="bench-pycache-"))


__all__ = ["fast_template", "new_cache_root", "run_before_after", "run_imports", "warm_cache"]

"""Scenario 5: where the time goes that is not Git work — measured before/after where we can.

1. Imports in every fresh step process — what a pod pays, and what the local executor paid
   before it forked steps from a warm interpreter — each in a fresh interpreter (minimum of
   ``reps``: CPU-bound work on a shared machine — the minimum is the cost, the rest is other load):
   - ``as shipped (image)`` before the Dockerfile precompiled: no bytecode cache at all
     (simulated with an empty ``PYTHONPYCACHEPREFIX``);
   - ``fresh process``: site-packages precompiled by pip, the project's own modules not
     (``PYTHONDONTWRITEBYTECODE=1`` in the template);
   - ``precompiled``: everything byte-compiled ahead of time (what the image does now);
   - ``precompiled, no Hera runner``: the same without ``hera.workflows.runner``, which imports
     all of ``hera.workflows`` (its generated Argo models) to call one function;
   - for commit-pr in commit mode, without the GitHub client (``steps.forge.pull_requests``/``steps.forge.github``
     pull in githubkit + httpx at import time, even when no API is used).
2. End to end before/after: the same sequential events through the shipped template with every
   step a new Python process (``prefork=False``: before) and forked from the executor's warm
   interpreter (:mod:`workflows.local.forkserver_client`, the default: after), measured on the same world.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench import e2e
from bench.testbed import PYTHON, World, python_env

#: What commit-pr needs in mode commit / provider local (no GitHub API).
COMMIT_MODE_NEEDS = "imagebump, pydantic, steps.runtime.harness, steps.git, steps.kustomize, steps.domain.models, steps.domain.errors"
#: Imported to warm a bytecode cache: the steps, their lazy imports, the runner, boto3's ECR client.
WARM_CODE = (
    "import hera.workflows.runner, steps.resolve_image.step, steps.edit_kustomize.step, "
    "steps.commit_pr.step, steps.aws.ecr, steps.domain.events, steps.rules, steps.domain.version_order, steps.kustomize, "
    "steps.git, "
    "boto3; boto3.client('ecr', region_name='us-west-2'); "
    "import botocore.config, botocore.retries.standard"
)


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
        "fresh": min(e2e.process_times("pass", reps)),
        "precompiled": min(e2e.process_times("pass", reps, warm_env)),
    }
    out: dict[str, Any] = {"process_start_s": {k: round(v, 3) for k, v in start.items()}, "steps": {}}
    for step in steps:
        module = e2e.STEP_MODULES[step]
        with_runner = f"import hera.workflows.runner, {module}"
        row = {
            "as_shipped_image_s": min(e2e.process_times(with_runner, reps, cold_env)),
            "fresh_process_s": min(e2e.process_times(with_runner, reps)),
            "precompiled_s": min(e2e.process_times(with_runner, reps, warm_env)),
            "precompiled_no_hera_runner_s": min(
                e2e.process_times(f"import pydantic, {module}", reps, warm_env)
            ),
        }
        if step == "commit-pr":
            row["precompiled_no_hera_no_github_s"] = min(
                e2e.process_times(f"import {COMMIT_MODE_NEEDS}", reps, warm_env)
            )
        out["steps"][step] = {k: round(v, 3) for k, v in row.items()}
    return out


def run_before_after(
    world: World, *, runs: int, repository: str = "mono/app03", before: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Sequential events with every step a new Python process (before), then forked (after).

    ``before``: the cold events already run in this world (:func:`bench.coldstart.run_event`, its
    ``entry`` runner: the shipped template, every step a new process), taken as they are so that one
    figure answers "a whole event with fresh processes"; None measures them here.
    """
    if before is not None:
        cold = {
            "latency_s": before["latency_s"]["entry"],
            "steps_s": before["steps_s"]["entry"],
            "failed": 0,  # run_event raises on a failed event
            "outcomes": before["outcomes"]["entry"],
        }
    else:
        cold = _short(e2e.run_sequential(world, world.executor(prefork=False), repository, runs))
    after = _short(e2e.run_sequential(world, world.executor(prefork=True), repository, runs))
    b, a = cold["latency_s"].get("p50"), after["latency_s"].get("p50")
    return {
        "runs": runs,
        "before": cold,
        "after": after,
        "before_is": "every step a new Python process (prefork=False)"
        + ("; the cold_start.event runs (steps.runtime.launcher)" if before is not None else ""),
        "after_is": "every step forked from the executor's warm interpreter (the default)",
        "p50_speedup": round(b / a, 2) if a else None,
    }


def _short(r: dict[str, Any]) -> dict[str, Any]:
    return {k: r[k] for k in ("latency_s", "steps_s", "failed", "outcomes")}


def new_cache_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="bench-pycache-"))


__all__ = ["new_cache_root", "run_before_after", "run_imports", "warm_cache"]

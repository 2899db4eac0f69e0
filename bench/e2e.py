"""Scenario 1: one event at a time, end to end — event on the queue → commit (or PR branch) done.

Each run pushes a new image to moto's ECR, puts its push event on the SQS queue and waits until
the local sensor's workflow (the rendered ``image-update`` template, each step its own process,
forked from the executor's warm interpreter) has finished. Latency = workflow finished − message
sent. The per-step split comes from the executor's node durations; the phases inside a step are
measured separately in the same world (:func:`probe_phases`): a step process's start (forked, as
the executor starts them; and a fresh interpreter, for comparison), what each step still imports,
the ECR lookup, and the git operations of :mod:`steps.git` (clone, edit, commit, push, PR-branch
push) run directly.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.sensor_loop import SensorLoop
from bench.stats import summary
from bench.testbed import OVERLAY, PYTHON, World, python_env

STEPS = ("resolve-image", "edit-kustomize", "commit-pr")
#: What each step's process imports: its module plus the modules it imports lazily while running
#: (boto3 is not here: it is part of the ECR phase).
STEP_MODULES = {
    "resolve-image": "steps.resolve_image.step, steps.aws.ecr, steps.domain.events",
    "edit-kustomize": (
        "steps.edit_kustomize.step, steps.git, steps.kustomize, steps.domain.version_order, steps.domain.events, steps.aws.ecr"
    ),
    "commit-pr": "steps.commit_pr.step",
}


def run_sequential(
    world: World, executor: Any, repository: str, runs: int, between: Any = None
) -> dict[str, Any]:
    """``runs`` events for ``repository``, one after the other; latency and per-step durations.

    ``between(i)``, when given, runs after event ``i`` has completed and before the next is sent
    (the plain-git floor, interleaved run by run so that the ratio of the two is fair on a machine
    whose load changes minute to minute).
    """
    completions = []
    timings: list[dict[str, Any]] = []  # each step process's own account (steps.runtime.timing)
    log = executor.log

    def keep(record: dict[str, Any]) -> None:
        if record.get("event") == "step-timings":
            timings.append(record)
        log(record)

    executor.log = keep
    try:
        with SensorLoop(world, executor, concurrency=1) as loop:
            for i in range(runs):
                event = world.event_for(repository)
                loop.send([event])
                completions += loop.wait([event["id"]])
                if between is not None:
                    between(i)
    finally:
        executor.log = log
    per_step: dict[str, list[float]] = {s: [] for s in STEPS}
    for c in completions:
        for template, phase, duration, _attempts in c.nodes:
            if phase == "Succeeded":
                per_step[template].append(duration)
    latencies = [c.latency for c in completions]
    to_commit = [c.to_commit for c in completions if c.to_commit is not None]
    return {
        "runs": runs,
        "repository": repository,
        "latency_s": summary(latencies),
        **({"to_commit_s": summary(to_commit)} if to_commit else {}),
        "workflow_s": summary([c.duration for c in completions]),
        "queue_and_sensor_s": summary([c.latency - c.duration for c in completions]),
        "steps_s": {s: summary(v) for s, v in per_step.items()},
        "outcomes": _count(c.outcome for c in completions),
        "failed": sum(1 for c in completions if c.phase != "Succeeded"),
        "latencies": [round(x, 3) for x in latencies],
        "to_commits": [round(x, 3) for x in to_commit],
        "accounting": accounting(completions, timings),
    }


def accounting(completions: list[Any], timings: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every step's node time, accounted for by the step process itself (its ``step-timings``
    record, :mod:`steps.runtime.timing`), run by run, then as p50 per step:

    * ``outside``: node time − the step function's own time (the fork, ``steps.runtime.launcher`` reading
      and validating the inputs, the process's exit, the executor's bookkeeping);
    * each phase the step timed on its main thread (git commands by subcommand, ECR client and
      calls, rules, outputs); background phases are listed (``… (background)``) but overlap;
    * ``other``: the step function's time that no phase explains (pydantic, the decisions, logging).
    """
    by_node = {(t.get("workflow"), t.get("node")): t for t in timings}
    rows: dict[str, dict[str, list[float]]] = {}
    for c in completions:
        for node, template, duration in c.node_names:
            t = by_node.get((c.workflow, node))
            if t is None or template not in STEPS:
                continue
            row = rows.setdefault(template, {})
            phases = t.get("phases") or {}
            foreground = sum(v for k, v in phases.items() if not k.endswith("(background)"))
            row.setdefault("node", []).append(duration)
            row.setdefault("outside", []).append(duration - t["seconds"])
            row.setdefault("other", []).append(t["seconds"] - foreground)
            for name, seconds in phases.items():
                row.setdefault(name, []).append(seconds)
    return {
        step: {name: round(summary(values)["p50"], 4) for name, values in row.items()}
        for step, row in rows.items()
    }


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


def process_times(code: str, reps: int, env: dict[str, str] | None = None) -> list[float]:
    """Wall seconds of ``python -c CODE`` in a fresh process, ``reps`` times."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        subprocess.run([PYTHON, "-c", code], env=env or python_env(), check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return times


def forked_times(
    world: World, zygote: Any, args: list[str], reps: int
) -> tuple[list[float], list[dict[str, float]]]:
    """Fork ``python -m bench.probe_child ARGS`` from the executor's ``zygote`` ``reps`` times:
    (wall seconds of each start-to-exit round trip, what each child measured inside)."""
    import json

    env = {**python_env(), **world.step_env}
    walls, inside = [], []
    for _ in range(reps):
        with tempfile.TemporaryDirectory(prefix="bench-fork-") as tmp:
            t = time.perf_counter()
            outcome = zygote.run([PYTHON, "-m", "bench.probe_child", *args], cwd=tmp, env=env, timeout=60)
            walls.append(time.perf_counter() - t)
        if outcome.returncode != 0:
            raise RuntimeError(f"bench.probe_child {args} failed: {outcome.stderr.decode()[-500:]}")
        inside.append(json.loads(outcome.stdout))
    return walls, inside


def probe_phases(
    world: World, reps: int = 5, app: str = "app01", steps: tuple[str, ...] = STEPS
) -> dict[str, Any]:
    """Time the phases inside the steps, each on its own, in the same world.

    Process start and imports are reported as the minimum of ``reps`` processes (forked from the
    executor's zygote, as steps are started; and fresh interpreters, for comparison); git and ECR
    phases as summaries (p50 is what :func:`breakdown` uses). ``steps`` limits the import probes.
    """
    from steps import git, kustomize

    out: dict[str, Any] = {}
    zygote = world.executor().fork_server()
    if zygote is None:
        raise RuntimeError("prefork is off (IMAGEBUMP_LOCAL_PREFORK=0): no forked-start probes")
    fork_walls, _ = forked_times(world, zygote, [], reps)
    out["forked_start_s"] = summary(fork_walls)
    forked_imports: dict[str, float] = {}
    for step in steps:
        modules = ",".join(["steps.runtime.launcher"] + [m.strip() for m in STEP_MODULES[step].split(",")])
        _, inside = forked_times(world, zygote, ["--import", modules], reps)
        forked_imports[step] = round(min(x["import_s"] for x in inside), 4)
    out["forked_imports_s"] = forked_imports
    _, inside = forked_times(world, zygote, ["--ecr", f"mono/{app}"], reps)
    out["ecr_lookup_forked_s"] = round(min(x["ecr_s"] for x in inside), 3)
    out["ecr_call_forked_s"] = round(min(x["ecr_call_s"] for x in inside), 3)  # the client's first call
    start = process_times("pass", reps)
    out["process_start_s"] = summary(start)
    # Interpreter start and imports are CPU-bound: on a shared machine the minimum is the honest cost.
    base = min(start)
    imports: dict[str, Any] = {}
    for step in steps:
        module = STEP_MODULES[step]
        t = process_times(f"import steps.runtime.launcher, {module}", reps)
        imports[step] = {"with_runner_s": summary(t), "imports_s": round(min(t) - base, 3)}
    out["imports"] = imports

    auth = world.git_auth()
    url = world.monorepo_url
    overlay = OVERLAY.format(app=app)
    file = f"{overlay}/kustomization.yaml"
    phases: dict[str, list[float]] = {
        k: []
        for k in (
            "clone",
            "edit",
            "commit",
            "push",
            "pr_branch_push",
            "ecr_describe",
            "clone_objects",
            "edit_commit_objects",
            "path_objects",
            "seed",
            "edit_commit_seeded",
            "push_lease",
        )
    }
    image = None
    for i in range(reps):
        with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp:
            t0 = time.perf_counter()
            repo = git.clone(url, Path(tmp) / "repo", branch="main", paths=[overlay], auth=auth)
            t1 = time.perf_counter()
            text = repo.read(file)
            entry = kustomize.read_images(text)[0]
            image = entry.name
            edited = kustomize.set_image(text, entry.name, tag=f"9.9.{i}-{int(time.time())}")
            repo.write(file, edited)
            t2 = time.perf_counter()
            repo.commit(f"bench probe {i}")
            t3 = time.perf_counter()
            repo.push("HEAD:refs/heads/main")
            t4 = time.perf_counter()
            branch = f"imagebump/bench-probe-{app}"
            remote = repo.fetch(branch)
            repo.push(f"HEAD:refs/heads/{branch}", force_with_lease=(branch, remote or ""))
            t5 = time.perf_counter()
        phases["clone"].append(t1 - t0)
        phases["edit"].append(t2 - t1)
        phases["commit"].append(t3 - t2)
        phases["push"].append(t4 - t3)
        phases["pr_branch_push"].append(t5 - t4)
    # commit-pr's own path when the plan carries the file: objects-only clone, the text from the plan
    # (no blob downloaded), one fast-import commit; then the same push.
    for i in range(reps):
        with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp:
            t0 = time.perf_counter()
            repo = git.clone(url, Path(tmp) / "repo", branch="main", auth=auth, checkout=False)
            t1 = time.perf_counter()
            text = repo.show("HEAD", file)  # what edit-kustomize carries (not timed: it is in the plan)
            blob = repo.entry("HEAD", file)[1]
            t_carry = time.perf_counter()
            repo.know(text, blob)
            edited = kustomize.set_image(text, image, tag=f"9.8.{i}-{int(time.time())}")
            repo.write(file, edited)
            repo.commit(f"bench probe objects {i}")
            t2 = time.perf_counter()
            repo.push("HEAD:refs/heads/main")
        phases["clone_objects"].append(t1 - t0)
        phases["edit_commit_objects"].append(t2 - t_carry)
    # mode commit, the plan carrying the objects above the file too: edit-kustomize reads them from
    # its clone (one cat-file); commit-pr makes the plan's base from them (git init, no fetch),
    # commits with fast-import and pushes with a lease on that base.
    for i in range(reps):
        with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp:
            repo = git.clone(url, Path(tmp) / "repo", branch="main", paths=[overlay], auth=auth)
            head = repo.cloned_head()
            text = repo.read(file)
            t0 = time.perf_counter()
            objects = repo.path_objects(head, file)
            t1 = time.perf_counter()
            from steps.git.objects import blob_id

            seeded = git.seed(
                url,
                Path(tmp) / "seed",
                branch="main",
                commit=head,
                objects=objects or [],
                path=file,
                text=text,
                blob=blob_id(text),
                auth=auth,
            )
            t2 = time.perf_counter()
            seeded.write(file, kustomize.set_image(text, image, tag=f"9.7.{i}-{int(time.time())}"))
            seeded.commit(f"bench probe seeded {i}")
            t3 = time.perf_counter()
            seeded.push("HEAD:refs/heads/main", force_with_lease=("main", head))
            t4 = time.perf_counter()
        phases["path_objects"].append(t1 - t0)
        phases["seed"].append(t2 - t1)
        phases["edit_commit_seeded"].append(t3 - t2)
        phases["push_lease"].append(t4 - t3)
    # ECR as a step meets it: a fresh process that imports boto3, builds a client and asks once.
    ecr_code = (
        "from steps.aws import ecr; c = ecr.make_client('us-west-2'); "
        f"ecr.describe_image('mono/{app}', region='us-west-2', tag='0.0.0', client=c)"
    )
    ecr_env = {**python_env(), **world.step_env}
    ecr_base = min(process_times("from steps.aws import ecr", reps, ecr_env))
    out["ecr_lookup_fresh_process_s"] = round(min(process_times(ecr_code, reps, ecr_env)) - ecr_base, 3)
    from steps.aws import ecr

    client = ecr.make_client("us-west-2")
    for _ in range(reps):
        t = time.perf_counter()
        ecr.describe_image(f"mono/{app}", region="us-west-2", tag="0.0.0", client=client)
        phases["ecr_describe"].append(time.perf_counter() - t)
    from steps.rules import load_rules

    t = time.perf_counter()
    _ = load_rules(world.rules_text).match
    out["rules_load_s"] = round(time.perf_counter() - t, 4)
    out["phases_s"] = {k: summary(v, 4) for k, v in phases.items()}
    # Put the probed overlay back to the initial image so later scenarios start from a known state.
    if image:
        from bench.testbed import INITIAL_TAG, overlay

        world.git.commit_files(
            "bench/monorepo",
            {file: overlay(image=image, tag=INITIAL_TAG)},
            "bench: reset probe overlay",
        )
    return out


def breakdown(single: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Where each step's node time goes (p50 s), as each step process accounts for it
    (:func:`accounting`, run by run, in the same run as the latency): ``outside`` (the fork,
    ``steps.runtime.launcher``, the exit, the executor's bookkeeping), every phase the step timed on its main
    thread (background phases overlap the others and are left out), ``other`` (the step's own time
    no phase explains) and ``total`` (the node). ``commit-pr (PR)`` is commit-pr in PR mode.

    One account of the time: the phases probed apart (:func:`probe_phases`, at another moment)
    stay in ``single_event.probes`` as a cross-check and are not subtracted from anything.
    """
    rows = dict(single.get("accounting") or {})
    pr = (single.get("pr_mode") or {}).get("accounting", {}).get("commit-pr")
    if pr:
        rows["commit-pr (PR)"] = pr
    out: dict[str, dict[str, float]] = {}
    for step, row in rows.items():
        parts = {k: v for k, v in row.items() if k != "node" and not k.endswith("(background)")}
        out[step] = {**parts, "total": row["node"]}
    return out


def other_times(single: dict[str, Any]) -> dict[str, float]:
    """Each step's "other" time (p50 s): the step function's own time that none of its timed phases
    explains (:func:`breakdown`), in commit mode and for commit-pr in PR mode."""
    return {step: row["other"] for step, row in breakdown(single).items()}

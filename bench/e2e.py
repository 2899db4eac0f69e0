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

from bench.stats import summary
from bench.world import OVERLAY, PYTHON, SensorLoop, World, python_env

STEPS = ("resolve-image", "edit-kustomize", "commit-pr")
#: What each step's process imports: its module plus the modules it imports lazily while running
#: (boto3 is not here: it is part of the ECR phase).
STEP_MODULES = {
    "resolve-image": "steps.resolve_image, steps.ecr, steps.events",
    "edit-kustomize": (
        "steps.edit_kustomize, steps.git, steps.kustomize, steps.order, steps.events, steps.ecr"
    ),
    "commit-pr": "steps.commit_pr",
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
    timings: list[dict[str, Any]] = []  # each step process's own account (steps.timing)
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
    return {
        "runs": runs,
        "repository": repository,
        "latency_s": summary(latencies),
        "workflow_s": summary([c.duration for c in completions]),
        "queue_and_sensor_s": summary([c.latency - c.duration for c in completions]),
        "steps_s": {s: summary(v) for s, v in per_step.items()},
        "outcomes": _count(c.outcome for c in completions),
        "failed": sum(1 for c in completions if c.phase != "Succeeded"),
        "latencies": [round(x, 3) for x in latencies],
        "accounting": accounting(completions, timings),
    }


def accounting(completions: list[Any], timings: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every step's node time, accounted for by the step process itself (its ``step-timings``
    record, :mod:`steps.timing`), run by run, then as p50 per step:

    * ``outside``: node time − the step function's own time (the fork, ``steps._entry`` reading
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
        modules = ",".join(["steps._entry"] + [m.strip() for m in STEP_MODULES[step].split(",")])
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
        t = process_times(f"import steps._entry, {module}", reps)
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
            from steps.git_objects import blob_id

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
        "from steps import ecr; c = ecr.make_client('us-west-2'); "
        f"ecr.describe_image('mono/{app}', region='us-west-2', tag='0.0.0', client=c)"
    )
    ecr_env = {**python_env(), **world.step_env}
    ecr_base = min(process_times("from steps import ecr", reps, ecr_env))
    out["ecr_lookup_fresh_process_s"] = round(min(process_times(ecr_code, reps, ecr_env)) - ecr_base, 3)
    from steps import ecr

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
        from bench.world import INITIAL_TAG, overlay

        world.git.commit_files(
            "bench/monorepo",
            {file: overlay(image=image, tag=INITIAL_TAG)},
            "bench: reset probe overlay",
        )
    return out


def breakdown(
    seq: dict[str, Any], probes: dict[str, Any], forked: bool = True
) -> dict[str, dict[str, float]]:
    """Per step: node p50 split into process start, imports, the measured work, and the rest.

    ``forked``: the steps were forked from the executor's warm interpreter (the default), so start
    and imports are the forked probes; False: each step was a fresh interpreter.
    """
    ph = {k: v["p50"] for k, v in probes["phases_s"].items()}
    if forked and "forked_start_s" in probes:
        start = probes["forked_start_s"]["min"]
        imports = dict(probes["forked_imports_s"])
        ecr_first, ecr_label = probes["ecr_lookup_forked_s"], "ecr (client, 1 call)"
        # edit-kustomize builds its client on a thread while its clone runs: the call is what follows
        edit_ecr = {"ecr (1 call; client built during the clone)": probes.get("ecr_call_forked_s", ecr_first)}
    else:
        start = probes["process_start_s"]["min"]
        imports = {k: v["imports_s"] for k, v in probes["imports"].items()}
        ecr_first, ecr_label = probes["ecr_lookup_fresh_process_s"], "ecr (boto3 import, client, 1 call)"
        edit_ecr = {ecr_label: ecr_first}  # importing boto3 takes longer than the clone: not hidden
    work = {
        "resolve-image": {ecr_label: ecr_first, "rules": probes["rules_load_s"]},
        "edit-kustomize": {
            "clone": ph["clone"],
            "edit": ph["edit"],
            # one call: the pushed image's push time travels in the target
            **edit_ecr,
            **({"objects for the plan (cat-file)": ph["path_objects"]} if "path_objects" in ph else {}),
        },
        "commit-pr": (
            {
                "seed (carried objects, no fetch)": ph["seed"],
                "edit+commit (fast-import)": ph["edit_commit_seeded"],
                "push (lease)": ph["push_lease"],
            }
            if "seed" in ph  # the plan carries the file and the objects above it (issue 15)
            else {"clone": ph["clone"], "edit+commit": ph["edit"] + ph["commit"], "push": ph["push"]}
        ),
    }
    out: dict[str, dict[str, float]] = {}
    for step in STEPS:
        node = seq["steps_s"][step].get("p50")
        if node is None:
            continue
        if step not in imports:
            continue
        parts = {"process start": start, "imports": imports[step], **work[step]}
        rest = node - sum(parts.values())
        out[step] = {**{k: round(v, 3) for k, v in parts.items()}, "other": round(rest, 3), "total": node}
    # PR mode (provider local: the proposal is the pushed branch, no forge API call to time here)
    pr_node = (seq.get("pr_mode") or {}).get("steps_s", {}).get("commit-pr", {}).get("p50")
    if pr_node is not None and "commit-pr" in imports:
        # mode pr: the plan carries the file only; an objects-only clone of the newest base
        cloned = (
            {
                "clone (objects only)": ph["clone_objects"],
                "edit+commit (fast-import)": ph["edit_commit_objects"],
            }
            if "clone_objects" in ph
            else {"clone": ph["clone"], "edit+commit": ph["edit"] + ph["commit"]}
        )
        parts = {
            "process start": start,
            "imports": imports["commit-pr"],
            **cloned,
            "PR (branch push)": ph["pr_branch_push"],
        }
        out["commit-pr (PR)"] = {
            **{k: round(v, 3) for k, v in parts.items()},
            "other": round(pr_node - sum(parts.values()), 3),
            "total": pr_node,
        }
    return out


def refine_breakdown(results: dict[str, Any]) -> None:
    """Refine the fresh-interpreter import probes with the lowest import cost seen for each step.

    The import probes of :func:`probe_phases` and :func:`bench.waste.run_imports` (its
    ``fresh_process`` column: the same interpreter flags, the same modules) are CPU-bound
    and taken at different moments of a shared machine; the minimum of both is the better estimate.
    (The breakdown itself is of forked steps; the fresh numbers are its comparison.)
    """
    single = results.get("single_event")
    imports = results.get("waste", {}).get("imports")
    if not single or not imports or "probes" not in single:
        return
    start = min(
        single["probes"]["process_start_s"]["min"],
        imports["process_start_s"].get("fresh", imports["process_start_s"].get("local")),
    )
    for step, probe in single["probes"]["imports"].items():
        row = imports["steps"].get(step, {})
        waste_total = row.get("fresh_process_s", row.get("local_executor_today_s"))
        if waste_total is not None:
            probe["imports_s"] = round(min(probe["with_runner_s"]["min"], waste_total) - start, 3)
    single["probes"]["process_start_s"]["min"] = start
    single["breakdown"] = breakdown(single, single["probes"])
    single["other_s"] = other_times(single)


def other_times(single: dict[str, Any]) -> dict[str, float]:
    """Each step's "other" time (p50 s): the step function's own time that none of its timed phases
    explains (:func:`accounting`), in commit mode and for commit-pr in PR mode."""
    out = {step: row["other"] for step, row in (single.get("accounting") or {}).items()}
    pr = (single.get("pr_mode") or {}).get("accounting", {}).get("commit-pr")
    if pr:
        out["commit-pr (PR)"] = pr["other"]
    return out

"""Turn the results dict into the printed table and ``docs/benchmarks.md`` (``results.png``:
:mod:`bench.chart`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

_WORK_EXCLUDED = ("outside", "other", "total")


def _f(value: Any, unit: str = "s", digits: int = 2) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}f} {unit}".strip()


def _lat(summary: dict[str, Any]) -> str:
    if not summary or not summary.get("n"):
        return "–"
    return f"{summary['p50']:.2f} / {summary['p95']:.2f} / {summary['max']:.2f} s"


def _joined(values: list[Any], fmt: str) -> str:
    return " / ".join(fmt.format(v) for v in values)


def headline_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """(what, number) rows: the short table for README / docs/benchmarks.md."""
    rows: list[tuple[str, str]] = []
    ratios = r.get("ratios", {})
    s = r.get("single_event")
    if s:
        rows.append(
            (
                f"single event, push → Workflow finished (exit handler; no Argo CD: verify-live off, as in run --local), p50 / p95 / max ({s['runs']} runs)",
                _lat(s["latency_s"]),
            )
        )
        if s.get("to_commit_s"):
            rows.append(
                (
                    "single event, push → commit landed (commit-pr's end), p50 / p95 / max",
                    _lat(s["to_commit_s"]),
                )
            )
        if s.get("pr_mode"):
            p = s["pr_mode"]
            rows.append(
                (
                    f"single event → PR branch, end to end, p50 / p95 / max ({p['runs']} runs)",
                    _lat(p["latency_s"]),
                )
            )
    fl = r.get("floor", {})
    if fl.get("single"):
        rows.append(
            (
                "floor: plain git partial sparse clone + edit + commit + push, p50",
                _f(fl["single"]["total_s"]["p50"]),
            )
        )
        if "single_p50" in ratios:
            rows.append(("ours / floor, single event p50", f"{ratios['single_p50']:.1f}×"))
    other = r.get("single_event", {}).get("other_s")
    if other:
        rows.append(
            (
                "single event: each step's 'other' time (its own time no timed phase explains, p50)",
                ", ".join(f"{step} {v:.3f} s" for step, v in other.items()),
            )
        )
    floors = {b["events"]: b for b in fl.get("bursts", [])}
    for b in r.get("bursts", []):
        n = b["events"]
        rows.append(
            (
                f"burst of {n} events over {b['overlays']} overlays (concurrency {b['concurrency']}): "
                "drain, events/s",
                f"{b['drain_s']:.1f} s, {b['events_per_s']:.2f}/s",
            )
        )
        rows.append((f"burst of {n}: latency per event, p50 / p95 / max", _lat(b["latency_s"])))
        if "lost_races" in b:
            floor_races = floors.get(n, {}).get("lost_races", floors.get(n, {}).get("push_retries"))
            rows.append(
                (
                    f"burst of {n}: lost push races / in-step retries / backoff slept; step retries"
                    + ("; plain git's lost races" if floor_races is not None else ""),
                    f"{b['lost_races']} / {b['push_retries']} / {b['backoff_s']:.1f} s; {b['step_retries']}"
                    + (f"; {floor_races}" if floor_races is not None else ""),
                )
            )
        if n in floors:
            rows.append(
                (
                    f"burst of {n} by plain git (same concurrency): drain; ours / floor",
                    f"{floors[n]['drain_s']:.1f} s; {ratios.get(f'burst_{n}', 0):.2f}×" + _pairs(b),
                )
            )
        cpu, floor_cpu = b.get("cpu"), floors.get(n, {}).get("cpu")
        if cpu and floor_cpu:
            rows.append(
                (
                    f"burst of {n}: the machine's CPU over the drain, busy / idle (the bench process's "
                    "own), ours; plain git",
                    f"{cpu['busy_s']:.1f} / {cpu['idle_s']:.1f} s ({cpu['bench_process_s']:.1f} s); "
                    f"{floor_cpu['busy_s']:.1f} / {floor_cpu['idle_s']:.1f} s ({floor_cpu['bench_process_s']:.1f} s)",
                )
            )
        if "history_fetches" in b:
            rows.append(
                (
                    f"burst of {n}: edit-kustomize runs that fetched history deeper than their clone",
                    f"{b['history_fetches']} of {n}",
                )
            )
    growth = r.get("growth", {})
    rules = growth.get("rules")
    if rules:
        rows.append(
            (
                "rules matching per event at " + _joined([x["rules"] for x in rules], "{:,}") + " rules",
                _joined([x["match_hit_us"] for x in rules], "{:.0f}") + " µs",
            )
        )
    sizes = growth.get("repo_sizes")
    if sizes:
        files = _joined([x["files"] for x in sizes], "{:,}")
        rows.append(
            (
                f"edit-kustomize + commit-pr steps, p50, at {files} files",
                " / ".join(_f(x.get("workflow_edit_plus_commit_p50_s")) for x in sizes),
            )
        )
        rows.append(
            (
                f"our git layer (partial sparse clone, edit, commit, push) at {files} files",
                " / ".join(_f(x["our_git_s"].get("p50")) for x in sizes),
            )
        )
        rows.append(
            (
                f"plain git with a full clone at {files} files",
                " / ".join(_f(x["floor_full_clone_s"].get("p50")) for x in sizes),
            )
        )
    conc = growth.get("concurrency")
    if conc:
        rows.append(
            (
                f"concurrency {_joined([c['concurrency'] for c in conc], '{}')}: events/s "
                f"({conc[0]['events']} events)",
                _joined([c["events_per_s"] for c in conc], "{:.2f}"),
            )
        )
    sw = r.get("sweep")
    if sw:
        repos = _joined([x["repositories"] for x in sw], "{:,}")
        rows.append(
            (
                f"reconcile run (dry run) at {repos} ECR repositories, 2 overlays each: wall time",
                " / ".join(f"{x['wall_s']:.1f} s" for x in sw),
            )
        )
        rows.append(
            (
                f"reconcile run at {repos} repositories: ECR calls; Git clones",
                " / ".join(str(x["ecr_calls"]) for x in sw)
                + "; "
                + " / ".join(str(x["git_clones"]) for x in sw),
            )
        )
    mem = r.get("sweep_memory")
    if mem:
        shapes = " / ".join(f"{x['repositories']:,} × {x['images_per_repository']:,}" for x in mem)
        rows.append(
            (
                f"reconcile step's peak RSS at {shapes} ECR repositories × images (budget "
                f"{mem[0]['budget_mib']} MiB); wall time (CPU time)",
                " / ".join(f"{x['peak_rss_mib']:.0f} MiB" for x in mem)
                + "; "
                + " / ".join(f"{x['wall_s']:.1f} s ({x.get('cpu_s', 0):.1f} s CPU)" for x in mem),
            )
        )
    vk = r.get("growth", {}).get("values_vs_kustomize")
    if vk:
        rows.append(
            (
                "a values-file edit vs a kustomization edit (edit-kustomize's clone + read, find, plan, splice), p50",
                f"{vk['values']['with_clone_s']['p50']:.3f} s vs {vk['kustomize']['with_clone_s']['p50']:.3f} s "
                f"({vk['ratio_p50']}×); the edit alone {vk['values']['edit_s']['p50'] * 1000:.1f} ms vs "
                f"{vk['kustomize']['edit_s']['p50'] * 1000:.1f} ms ({vk['edit_ratio_p50']}×)",
            )
        )
    api = r.get("api_commits")
    if api:
        per = api["requests_per_event"]
        kinds = [("api_commit", "commit"), ("api_pr_created", "PR created"), ("api_pr_updated", "PR updated")]
        kinds += [("api_pr_rebuilt", "PR rebuilt on a moved base")] if "api_pr_rebuilt" in per else []
        rows.append(
            (
                "commitMethod api: GitHub requests per event (content-creating): "
                + "; ".join(label for _, label in kinds),
                "; ".join(f"{per[k]['requests']} ({per[k]['content_creating']})" for k, _ in kinds),
            )
        )
        by = {b["method"]: b for b in api["burst"]}
        if "api" in by and "git" in by:
            rows.append(
                (
                    f"burst of {by['api']['events']} pushes into as many overlays, mode pr, under GitHub's "
                    "secondary limits: drain, commitMethod api vs git",
                    f"{by['api']['drain_s']:.1f} s ({by['api']['rate_limited']} limit answers waited out) vs "
                    f"{by['git']['drain_s']:.1f} s",
                )
            )
    w = r.get("waste", {}).get("before_after")
    if w:
        rows.append(
            (
                "fix: steps forked from a warm interpreter vs a new Python per step: single event p50",
                f"{w['before']['latency_s']['p50']:.2f} s → {w['after']['latency_s']['p50']:.2f} s "
                f"({w['p50_speedup']:.1f}×)",
            )
        )
    rows.extend(_cold_start_rows(r.get("cold_start") or {}))
    return rows


#: The goals the issues set (issue 33's table, issue 34's last line): (key, what, goal, unit).
#: A measure at or under its goal is met; over it is a miss, printed as one.
GOALS = (
    ("single_p50", "one push → commit landed, p50, ours / plain git", 1.5, "×"),
    ("burst_27", "burst of 27 pushes into 27 overlays: drain, ours / plain git", 1.2, "×"),
    ("burst_200", "burst of 200 into 20 overlays: drain, ours / plain git", 1.2, "×"),
    ("cold_vs_warm", "one push → commit landed, p50, a new Python per step / forked warm steps", 2.5, "×"),
    ("api_commit", "commitMethod api, content-creating requests: commit", 2, ""),
    ("api_pr_created", "commitMethod api, content-creating requests: PR created", 3, ""),
    ("api_pr_updated", "commitMethod api, content-creating requests: PR updated", 3, ""),
    ("values_edit_vs_kustomize", "a values-file edit / a kustomization edit, p50", 1.0, "×"),
)


def goal_values(r: dict[str, Any]) -> dict[str, float]:
    """Each goal's measured value in ``r`` (a goal the run did not reach is absent)."""
    ratios = r.get("ratios", {})
    out = {
        k: float(ratios[k])
        for k in ("single_p50", "burst_27", "burst_200", "values_edit_vs_kustomize")
        if k in ratios
    }
    event = (r.get("cold_start") or {}).get("event") or {}
    single = r.get("single_event") or {}
    both = "to_commit_s" in event and (  # push → commit landed on both sides
        "warm" in event["to_commit_s"] or "to_commit_s" in single
    )
    measure = "to_commit_s" if both else "latency_s"
    cold = event.get(measure, {}).get("entry", {}).get("p50")
    # the warm events interleaved with the cold ones (a run before them: the single event's)
    warm = (event.get(measure, {}).get("warm") or single.get(measure, {})).get("p50")
    if cold and warm:
        out["cold_vs_warm"] = round(cold / warm, 2)
    per = (r.get("api_commits") or {}).get("requests_per_event", {})
    for key in ("api_commit", "api_pr_created", "api_pr_updated"):
        if key in per:
            out[key] = float(per[key]["content_creating"])
    return out


def _missed(value: float, goal: float) -> bool:
    """Every goal is an upper bound."""
    return value > goal


def goal_rows(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(what, measured, goal, verdict) per goal: ``met``, ``MISS`` or ``not measured``."""
    values = goal_values(r)
    rows = []
    for key, what, goal, unit in GOALS:
        value = values.get(key)
        if value is None:
            rows.append((what, "–", f"≤ {goal:g}{unit}", "not measured"))
        else:
            rows.append(
                (what, f"{value:g}{unit}", f"≤ {goal:g}{unit}", "MISS" if _missed(value, goal) else "met")
            )
    return rows


def _p50(summary: Any) -> float | None:
    return summary.get("p50") if isinstance(summary, dict) else None


def _explain_single(r: dict[str, Any]) -> str | None:
    single, floor = r.get("single_event") or {}, (r.get("floor") or {}).get("single") or {}
    ours = _p50(single.get("to_commit_s")) or _p50(single.get("latency_s"))
    if ours is None or not floor:
        return None
    parts = [
        f"ours {ours:.3f} s against plain git's {_p50(floor.get('total_s')) or 0:.3f} s (its clone "
        f"{_p50(floor.get('clone_s')) or 0:.3f}, edit and commit {_p50(floor.get('edit_commit_s')) or 0:.3f}, "
        f"push {_p50(floor.get('push_s')) or 0:.3f} s)"
    ]
    queue = _p50(single.get("queue_and_sensor_s"))
    if queue is not None:
        parts.append(f"the queue and the sensor {queue:.3f} s")
    bd = single.get("breakdown") or {}
    steps = [s for s in ("resolve-image", "edit-kustomize", "commit-pr") if s in bd]
    if steps:
        outside = sum(bd[s].get("outside", 0.0) for s in steps)
        other = sum(bd[s].get("other", 0.0) for s in steps)
        parts.append(
            f"each step's start and exit ('outside') {outside:.3f} s and its untimed work ('other') "
            f"{other:.3f} s over {', '.join(steps)}"
        )
        if "resolve-image" in bd:
            parts.append(
                f"resolve-image, which plain git has no counterpart for, {bd['resolve-image']['total']:.3f} s"
            )
    return "; ".join(parts) + " (per step and phase: the table below)"


def _pairs(b: dict[str, Any]) -> str:
    """`` (the median of 3 interleaved pairs: 1.25×, 1.10×, 1.05×)``; empty for one pair."""
    pairs = b.get("pairs") or []
    if len(pairs) < 2:
        return ""
    listed = ", ".join(f"{p['ratio']:.2f}×" for p in pairs)
    return f" (the median of {len(pairs)} interleaved pairs: {listed})"


def _explain_burst(r: dict[str, Any], events: int) -> str | None:
    ours = next((b for b in r.get("bursts", []) if b.get("events") == events), None)
    floor = next((b for b in (r.get("floor") or {}).get("bursts", []) if b.get("events") == events), None)
    if ours is None or floor is None:
        return None
    parts = [
        f"drained in {ours['drain_s']:.1f} s against plain git's {floor['drain_s']:.1f} s at the same "
        f"concurrency{_pairs(ours)}; lost push races {ours.get('lost_races', '?')} against plain git's "
        f"{floor.get('lost_races', floor.get('push_retries', '?'))}, backoff slept "
        f"{ours.get('backoff_s', 0):.1f} s, step retries {ours.get('step_retries', 0)}"
    ]
    cpu, floor_cpu = ours.get("cpu"), floor.get("cpu")
    if cpu and floor_cpu:
        parts.append(
            f"the machine's CPUs over the drain: busy {cpu['busy_s']:.1f} s and idle {cpu['idle_s']:.1f} s "
            f"against plain git's {floor_cpu['busy_s']:.1f} s and {floor_cpu['idle_s']:.1f} s, of which "
            f"the bench process (moto, the git server's thread, the sensor, the executor) "
            f"{cpu['bench_process_s']:.1f} s against {floor_cpu['bench_process_s']:.1f} s"
        )
    steps = ours.get("steps_s") or {}
    if steps:
        summed = []
        for step, phases in steps.items():
            top = [(k, v) for k, v in phases.items() if k != "total"][:3]
            inner = ", ".join(f"{k} {v:.1f}" for k, v in top)
            summed.append(f"{step} {phases.get('total', 0):.1f} s" + (f" ({inner})" if inner else ""))
        parts.append("the steps' time summed over the burst: " + "; ".join(summed))
    if "history_fetches" in ours:
        parts.append(
            f"{ours['history_fetches']} of {events} edit-kustomize runs fetched history deeper than "
            "their clone (a file unchanged in the clone's commits)"
        )
    parts.append("one event's own cost is the single event's (above)")
    return "; ".join(parts)


def _explain_cold(r: dict[str, Any]) -> str | None:
    cold = (r.get("cold_start") or {}).get("event") or {}
    per_step = ((r.get("cold_start") or {}).get("per_step") or {}).get("steps") or {}
    warm = (cold.get("steps_s") or {}).get("warm") or (r.get("single_event") or {}).get("steps_s") or {}
    steps = (cold.get("steps_s") or {}).get("entry") or {}
    if not steps:
        return None
    parts = []
    for step, summary in steps.items():
        text = f"{step} {_p50(summary) or 0:.3f} s cold against {_p50(warm.get(step)) or 0:.3f} s warm"
        probe = per_step.get(step) or per_step.get(f"{step} (commit)") or {}  # the cold event commits
        first = _p50((probe.get("first_line_s") or {}).get("entry"))
        if first is not None:
            text += f", of which exec → its first line {first:.3f} s"
        top = ((probe.get("importtime") or {}).get("entry") or {}).get("by_package") or []
        if top:
            text += " (imports, self s: " + ", ".join(f"{name} {sec:.3f}" for name, sec in top[:4]) + ")"
        parts.append(text)
    return "; ".join(parts) + ". A forked step has all of that imported already"


def _explain_api(r: dict[str, Any], key: str) -> str | None:
    per = ((r.get("api_commits") or {}).get("requests_per_event") or {}).get(key)
    if not per:
        return None
    return (
        f"{per.get('requests', '?')} GitHub requests per event, {per.get('content_creating', '?')} of them "
        f"content-creating (outcome {per.get('action', '?')!r})"
    )


def _explain_values(r: dict[str, Any]) -> str | None:
    vk = (r.get("growth") or {}).get("values_vs_kustomize")
    if not vk:
        return None
    return (
        f"the values-file edit alone {vk['values']['edit_s']['p50'] * 1000:.1f} ms against the "
        f"kustomization's {vk['kustomize']['edit_s']['p50'] * 1000:.1f} ms, each with the same clone and read"
    )


def miss_explanations(r: dict[str, Any]) -> list[tuple[str, str]]:
    """(goal, why) for every goal the run missed, from the run's own profile: what the ratio's two
    sides spent their time on (issue 33: a miss is reported with the profile that explains it)."""
    explain = {
        "single_p50": lambda: _explain_single(r),
        "burst_27": lambda: _explain_burst(r, 27),
        "burst_200": lambda: _explain_burst(r, 200),
        "cold_vs_warm": lambda: _explain_cold(r),
        "api_commit": lambda: _explain_api(r, "api_commit"),
        "api_pr_created": lambda: _explain_api(r, "api_pr_created"),
        "api_pr_updated": lambda: _explain_api(r, "api_pr_updated"),
        "values_edit_vs_kustomize": lambda: _explain_values(r),
    }
    values = goal_values(r)
    out = []
    for key, what, goal, _unit in GOALS:
        if key in values and _missed(values[key], goal):
            out.append((what, explain[key]() or "this run holds no profile for it"))
    return out


def _cold_start_rows(c: dict[str, Any]) -> list[tuple[str, str]]:
    """A step pod's cold start (exec → first line of its own work) and a whole event with fresh
    processes, through Hera's runner (before issue 15) and ``steps.runtime.launcher`` (the templates now)."""
    rows: list[tuple[str, str]] = []
    for step, s in (c.get("per_step") or {}).get("steps", {}).items():
        first = s.get("first_line_s", {})
        if "entry" in first and "hera" in first:
            rows.append(
                (
                    f"cold start, {step}: exec → first line p50, steps.runtime.launcher (Hera's runner)",
                    f"{first['entry']['p50']:.2f} s ({first['hera']['p50']:.2f} s)",
                )
            )
    latency = (c.get("event") or {}).get("latency_s", {})
    if "entry" in latency and "hera" in latency:
        rows.append(
            (
                "cold: event → commit with a new Python per step, p50, steps.runtime.launcher (Hera's runner)",
                f"{latency['entry']['p50']:.2f} s ({latency['hera']['p50']:.2f} s)",
            )
        )
    return rows


def _step_lines(title: str, rows: dict[str, dict[str, float]], digits: int) -> list[str]:
    """A titled block of one line per step: ``name value, …`` (nothing without rows)."""
    if not rows:
        return []
    lines = ["", title]
    for step, parts in rows.items():
        lines.append(f"  {step:<15} " + ", ".join(f"{k} {v:.{digits}f}" for k, v in parts.items()))
    return lines


def _breakdown_lines(r: dict[str, Any]) -> list[str]:
    return _step_lines(
        "single event, per step, as each step process accounts for it (p50 s; 'outside' = fork, "
        "steps.runtime.launcher, exit; 'other' = the step's own time no timed phase explains):",
        r.get("single_event", {}).get("breakdown") or {},
        3,
    )


def _import_lines(r: dict[str, Any]) -> list[str]:
    imports = r.get("waste", {}).get("imports")
    if not imports:
        return []
    lines = ["", "imports per FRESH step process, what a pod pays (s, min of N):"]
    for step, row in imports["steps"].items():
        lines.append(f"  {step:<15} " + ", ".join(f"{k.removesuffix('_s')} {v:.2f}" for k, v in row.items()))
    return lines


def table(r: dict[str, Any]) -> str:
    """The printed table: headline rows, the per-step breakdown, the import probes."""
    rows = headline_rows(r)
    width = max((len(a) for a, _ in rows), default=10)
    lines = [f"{'measure':<{width}}  result", "-" * (width + 30)]
    lines += [f"{a:<{width}}  {b}" for a, b in rows]
    goals = ["", "goals (issues 33 and 34): measured, goal, verdict"]
    goals += [
        f"  {what:<{width}}  {value:>8}  {goal:>8}  {verdict}" for what, value, goal, verdict in goal_rows(r)
    ]
    misses = miss_explanations(r)
    if misses:
        goals += ["", "why each miss (this run's own profile):"] + [
            f"  {what}: {why}" for what, why in misses
        ]
    return "\n".join(lines + goals + _breakdown_lines(r) + _import_lines(r))


#: ``docs/benchmarks.md`` is half written by hand (what the numbers mean, where the time goes) and
#: half generated; a run rewrites only what lies between these two lines.
GENERATED_BEGIN = "<!-- generated by `python -m bench`: a run rewrites everything up to the end marker -->"
GENERATED_END = "<!-- end of the generated part -->"


def splice(document: str, generated: str) -> str:
    """``document`` with its generated part replaced by ``generated`` (appended when it has none)."""
    block = f"{GENERATED_BEGIN}\n{generated.strip()}\n{GENERATED_END}"
    if GENERATED_BEGIN in document and GENERATED_END in document:
        head, rest = document.split(GENERATED_BEGIN, 1)
        return head + block + rest.split(GENERATED_END, 1)[1]
    return (document.rstrip() + "\n\n" if document.strip() else "# Benchmarks\n\n") + block + "\n"


def write_markdown(path: Path, r: dict[str, Any], command: str) -> None:
    """Rewrite the generated part of ``path`` (``docs/benchmarks.md``), keeping the hand-written rest."""
    path.parent.mkdir(parents=True, exist_ok=True)
    existing = path.read_text() if path.is_file() else ""
    path.write_text(splice(existing, markdown(r, command)))


def markdown(r: dict[str, Any], command: str) -> str:
    """The generated part of ``docs/benchmarks.md``: the short table and the command that produced it."""
    m = r["machine"]
    load = " ".join(m.get("loadavg_at_start", []))
    out = [
        "## The last run",
        "",
        f"Produced by `{command}` on {r['timestamp']} ({m.get('cpus')} CPUs, {m.get('cpu', '?')}, "
        f"Python {m['python']}, {m['git']}; load average {load} at start, "
        f"{' '.join(r.get('loadavg_at_end', []))} at end). "
        f"The run took {r.get('duration_s', 0) / 60:.1f} minutes. "
        "All numbers: `bench/results.json`; chart: `bench/results.png`; how: `bench/README.md`.",
        "",
        "Everything runs through the local executor with the rendered `image-update` WorkflowTemplate "
        "(each step its own process, forked from a warm interpreter), a real `git http-backend` remote on "
        "127.0.0.1, and moto's "
        "EventBridge → SQS and ECR. The machine is small and may be shared with other work, so read the "
        "ratios rather than the absolute seconds.",
        "",
    ]
    merged = [m for m in r.get("merged_runs", []) if m.get("command")]
    if merged:
        out += [
            "Some rows were measured later and merged in: "
            + "; ".join(
                f"`{m['command']}` on {m.get('timestamp', '?')} (load average at end "
                f"{' '.join(m.get('loadavg_at_end') or [])})"
                for m in merged
            )
            + ".",
            "",
        ]
    if not r.get("complete", True):
        out += ["**Partial results: the run had not finished when this was written.**", ""]
    if r.get("notes"):
        out += ["Notes on this run:", ""] + [f"- {n}" for n in r["notes"]] + [""]
    out += ["Goals (issue 33's table, issue 34's values line); a miss is printed as one:", ""]
    out += ["| goal | measured | goal | verdict |", "|---|---|---|---|"]
    out += [f"| {what} | {value} | {goal} | {verdict} |" for what, value, goal, verdict in goal_rows(r)]
    misses = miss_explanations(r)
    if misses:
        out += ["", "Why each miss, from this run's own profile:", ""]
        out += [f"- **{what}**: {why}." for what, why in misses]
    out += ["", "| measure | result |", "|---|---|"]
    out += [f"| {a} | {b} |" for a, b in headline_rows(r)]
    bd = r.get("single_event", {}).get("breakdown")
    if bd:
        out += [
            "",
            "Single event, where the time goes (p50 seconds per step, as each step process accounts "
            "for it; outside = the fork, `steps.runtime.launcher`, the exit; other = the step's own time no timed "
            "phase explains):",
            "",
            "| step | outside | timed phases | other | total |",
            "|---|---|---|---|---|",
        ]
        for step, parts in bd.items():
            work = ", ".join(f"{k} {v:.3f}" for k, v in parts.items() if k not in _WORK_EXCLUDED)
            out.append(
                f"| {step} | {parts['outside']:.3f} | {work} | {parts['other']:.3f} | {parts['total']:.3f} |"
            )
    out += [
        "",
        "Reproduce: `pip install -e '.[bench]' && python -m bench` (`--quick` for a smoke-sized "
        "run). The run is CPU-bound (three step processes and their git processes per event), so its "
        "length follows the machine's load.",
        "",
    ]
    return "\n".join(out)

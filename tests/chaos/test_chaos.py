"""Chaos: shuffled, duplicated, out-of-order ECR pushes through a crashing local sensor.

The whole intake runs for real on this machine: images pushed to moto's ECR, ECR push events put
on an EventBridge bus whose rule feeds an SQS queue (with a DLQ), the local sensor
(``tests/chaos/sensor_proc.py``: ``imagebump run --local`` with a scaled retry backoff) running
the rendered ``image-update`` WorkflowTemplate step by step, a real ``git http-backend`` remote
and the GitHub API fake. Meanwhile:

* ``IMAGEBUMP_CHAOS_EVENTS`` push events (default :data:`DEFAULT_EVENTS`, 200, the issue's full run;
  a smaller number for a quicker look) for 20 overlays of one repository (4 in 10 ``mode: commit``, 3 ``mode: pr`` through GitHub, 3
  ``mode: pr`` with ``provider: local`` and ``order: semver``), shuffled — older images arrive
  after newer ones — and 20% of them delivered twice;
* 10% of Git HTTP requests and 10% of GitHub API requests fail transiently (a third of the failed
  GitHub writes fail *after* the change landed: a lost response);
* the sensor process is SIGKILLed with workflows in flight, and a new one started.

Afterwards (each a separate check, all reported together):

* every event has a terminal outcome — updated / unchanged / skipped with a reason / duplicate /
  dead-lettered — and ``sent = succeeded + duplicates + skipped + dead-lettered``, queue empty;
* after the events alone, an overlay is behind only if a push for it was dead-lettered (the report
  gives each dead-lettered push and why its runs failed);
* one ``imagebump reconcile --apply`` sweep (faults off) finds behind exactly those overlays, exits 0,
  and afterwards every overlay holds the newest image pushed for it (``mode: commit``: the base branch;
  ``mode: pr``: the target's branch, whose PR is open), and PR-mode never wrote the base branch;
* zero downgrades: along the base branch's history, and along every update of every PR branch
  (a ``post-receive`` hook logs each ref update; lease-protected updates form one chain), the
  images an overlay went through were pushed in increasing order;
* zero duplicate PRs: at most one open PR per head branch, at most one PR (and one branch) per
  target (no PR is closed during the run, so a second one would be a duplicate).

The counts are printed (``pytest -s`` or on failure).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from imagebump.local import builders
from imagebump.local.git_server import GitHttpServer
from steps.kustomize import get_image
from tests.chaos.harness import (
    ROOT,
    Delivery,
    FlakyGitHub,
    Overlay,
    Pushed,
    SensorProcess,
    classify,
    event_entry,
    group_of,
    late_older,
    make_queues,
    monotonic_violations,
    plan_deliveries,
    push_images,
    read_jsonl,
    ref_chains,
    rules_yaml,
)

OVERLAYS = 20
DEFAULT_EVENTS = 200  # the full run: ~3 minutes on 2 cores (steps forked from a warm interpreter)
EVENTS = int(os.environ.get("IMAGEBUMP_CHAOS_EVENTS", DEFAULT_EVENTS))
DUPLICATE_SHARE = 0.2
FAIL_RATE = 0.1
KILL_AT = 0.35  # share of workflows the first sensor finishes before it is killed
CONCURRENCY = 6  # steps are mostly waiting on injected faults and backoffs, not on the CPU
VISIBILITY = 10  # seconds; the sensor extends it while a workflow runs
MAX_RECEIVE = 6
BACKOFF_SCALE = 0.02  # the template's 10s backoff → 0.2s
QUEUE_LOW = 8  # send the next wave when fewer messages than this are queued
DEADLINE = float(os.environ.get("IMAGEBUMP_CHAOS_DEADLINE", 900))
SEED = int(os.environ.get("IMAGEBUMP_CHAOS_SEED", 20261202))
GITOPS = "chaos/gitops"

POST_RECEIVE = """#!/bin/sh
while read old new ref; do
  echo "$old $new $ref" >> '{log}'
done
exit 0
"""


def _world_files(overlays: list[Overlay]) -> dict[str, str]:
    files = {"README.md": "chaos gitops\n"}
    for o in overlays:
        files[f"services/{o.name}/base/kustomization.yaml"] = "resources: []\n"
        files[o.file] = builders.kustomization([(o.image, o.images[0].tag)])
    return files


def _blobs(bare: Path, specs: list[str]) -> dict[str, str | None]:
    """``{"REV:PATH": text or None}`` read with one ``git cat-file --batch``."""
    if not specs:
        return {}
    proc = subprocess.run(
        ["git", "--git-dir", str(bare), "cat-file", "--batch"],
        input=("\n".join(specs) + "\n").encode(),
        capture_output=True,
        check=True,
    )
    out, pos, found = proc.stdout, 0, {}
    for spec in specs:
        end = out.index(b"\n", pos)
        header = out[pos:end].decode()
        pos = end + 1
        if header.endswith(" missing") or header.endswith(" ambiguous"):
            found[spec] = None
            continue
        size = int(header.split()[2])
        found[spec] = out[pos : pos + size].decode()
        pos += size + 1
    return found


def _tag(text: str | None, overlay: Overlay) -> str | None:
    if text is None:
        return None
    entry = get_image(text, overlay.image, source=overlay.file)
    return entry.newTag if entry else None


def _git(bare: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(bare), *args], capture_output=True, text=True, check=True
    ).stdout


def _dedupe(seq: list[int]) -> list[int]:
    return [s for i, s in enumerate(seq) if i == 0 or s != seq[i - 1]]


def _why_failed(record: dict) -> str:
    """A run's phase and the message of its deepest failed step (the workflow's own says only 'child failed')."""
    failed = [n for n in record.get("nodes", []) if n.get("phase") != "Succeeded"]
    where = (
        f" at {failed[-1]['template']} ({failed[-1]['attempts']} attempts): {failed[-1]['message']}"
        if failed
        else ""
    )
    return f"{record['phase']}{where or ': ' + record.get('message', '')}"[:240]


def _state_problems(
    bare: Path, overlays: list[Overlay], github: FlakyGitHub
) -> tuple[list[str], dict[str, list[str]]]:
    """What the repository holds that it should not: ``(problems, PR branches of each overlay)``.

    Every overlay holds its newest pushed image (``mode: commit``: on the base branch; ``mode: pr``:
    on its one PR branch, whose GitHub PR is open) and PR mode never wrote the base branch.
    """
    problems: list[str] = []
    branches = [b for b in _git(bare, "for-each-ref", "--format=%(refname)", "refs/heads/").split()]
    pr_branches = [b.removeprefix("refs/heads/") for b in branches if b.startswith("refs/heads/imagebump/")]
    slug = {o.name: o.path.replace("/", "-") for o in overlays}
    branches_of: dict[str, list[str]] = {
        o.name: [b for b in pr_branches if f"/{slug[o.name]}/" in b] for o in overlays
    }
    heads = _blobs(
        bare,
        [f"main:{o.file}" for o in overlays]
        + [f"{b}:{o.file}" for o in overlays for b in branches_of[o.name]],
    )
    for o in overlays:
        main_tag = _tag(heads[f"main:{o.file}"], o)
        if o.mode == "commit":
            if main_tag != o.newest.tag:
                problems.append(f"{o.name} (commit): main holds {main_tag}, newest pushed is {o.newest.tag}")
            if branches_of[o.name]:
                problems.append(f"{o.name} (commit): unexpected branches {branches_of[o.name]}")
            continue
        if main_tag != o.images[0].tag:
            problems.append(f"{o.name} ({o.group}): mode pr wrote the base branch (main holds {main_tag})")
        if len(branches_of[o.name]) != 1:
            problems.append(
                f"{o.name} ({o.group}): {len(branches_of[o.name])} branches {branches_of[o.name]}"
            )
            continue
        (branch,) = branches_of[o.name]
        branch_tag = _tag(heads[f"{branch}:{o.file}"], o)
        if branch_tag != o.newest.tag:
            problems.append(
                f"{o.name} ({o.group}): PR branch holds {branch_tag}, newest pushed is {o.newest.tag}"
            )
        if o.group == "ghpr":
            pulls = [p for p in github.pulls if p.head == branch]
            if len(pulls) != 1 or pulls[0].state != "open":
                problems.append(f"{o.name} (ghpr): PRs for {branch}: {[(p.number, p.state) for p in pulls]}")

    return problems, branches_of


# --- the judges, on their own (fast) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("sequence", "violations"),
    [
        pytest.param([0, 1, 2], [], id="increasing"),
        pytest.param([0, 2, 1], [(2, 1)], id="older-after-newer"),
        pytest.param([1, 0, 2, 1], [(1, 0), (2, 1)], id="two"),
        pytest.param([], [], id="empty"),
    ],
)
def test_monotonic_violations(sequence: list[int], violations: list[tuple[int, int]]) -> None:
    assert monotonic_violations(sequence) == violations


Z = "0" * 40


@pytest.mark.parametrize(
    ("updates", "chains", "problems"),
    [
        pytest.param(
            [("b", "c", "r"), (Z, "a", "r"), ("a", "b", "r")],
            {"r": ["a", "b", "c"]},
            0,
            id="created-logged-out-of-order",
        ),
        pytest.param([("b", "c", "m"), ("a", "b", "m")], {"m": ["b", "c"]}, 0, id="pre-existing-ref"),
        pytest.param([("a", "b", "m"), ("a", "c", "m")], {"m": ["b"]}, 1, id="moved-without-lease"),
    ],
)
def test_ref_chains(updates, chains, problems) -> None:
    got, found = ref_chains(updates)
    assert got == chains
    assert len(found) == problems


def _record(*nodes: tuple[str, str, dict]) -> dict:
    return {"nodes": [{"template": t, "phase": p, "outputs": o} for t, p, o in nodes]}


@pytest.mark.parametrize(
    ("record", "kind"),
    [
        pytest.param(
            _record(("resolve-image", "Succeeded", {"targets": "[]", "reason": "no rule"})),
            "skipped",
            id="no-target",
        ),
        pytest.param(
            _record(
                ("resolve-image", "Succeeded", {"targets": "[{}]"}),
                ("edit-kustomize", "Succeeded", {"decision": "stale", "reason": "older"}),
                ("commit-pr", "Skipped", {}),
            ),
            "skipped",
            id="stale",
        ),
        pytest.param(
            _record(
                ("resolve-image", "Succeeded", {"targets": "[{}]"}),
                ("edit-kustomize", "Succeeded", {"decision": "current"}),
                ("commit-pr", "Skipped", {}),
            ),
            "unchanged",
            id="current",
        ),
        pytest.param(
            _record(
                ("resolve-image", "Succeeded", {"targets": "[{}]"}),
                ("edit-kustomize", "Succeeded", {"decision": "update"}),
                ("commit-pr", "Succeeded", {"action": "pr-updated"}),
            ),
            "updated",
            id="pr-updated",
        ),
        pytest.param(
            _record(
                ("resolve-image", "Succeeded", {"targets": "[{}]"}),
                ("edit-kustomize", "Succeeded", {"decision": "update"}),
                ("commit-pr", "Succeeded", {"action": "unchanged", "reason": "landed"}),
            ),
            "unchanged",
            id="landed-meanwhile",
        ),
    ],
)
def test_classify(record: dict, kind: str) -> None:
    assert classify(record)[0] == kind


def test_plan_always_has_an_older_image_arriving_after_a_newer() -> None:
    overlays = []
    for i in range(4):
        o = Overlay(f"svc-{i}", group_of(i), f"r/{i}", f"img/{i}", f"p/{i}")
        o.images = [Pushed(o.repository, f"1.0.{k}", f"sha256:{i}{k}", k) for k in range(3)]
        overlays.append(o)
    deliveries = plan_deliveries(overlays, 0.5, random.Random(1))
    assert len(deliveries) == 8 + 4
    assert sum(d.copy == 2 for d in deliveries) == 4
    for o in overlays:
        first = [d.image.seq for d in deliveries if d.overlay is o and d.copy == 1]
        assert first.index(2) < first.index(1), o.name
    assert late_older(deliveries) >= 4


@pytest.mark.slow
def test_chaos(
    moto, tmp_path: Path, git_token: str, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    started = time.monotonic()
    rng = random.Random(SEED)
    run_id = uuid.uuid4().hex[:8]
    prefix = f"chaos-{run_id}"

    # --- the world -------------------------------------------------------------------------------
    overlays: list[Overlay] = []
    for i in range(OVERLAYS):
        name, group = f"svc-{i:02d}", group_of(i)
        overlays.append(Overlay(name, group, f"{prefix}/{group}/{name}", "", f"services/{name}/overlays/stg"))
    per_overlay = [EVENTS // OVERLAYS + (1 if i < EVENTS % OVERLAYS else 0) for i in range(OVERLAYS)]
    account = push_images(moto.client("ecr"), overlays, per_overlay)
    for o in overlays:
        o.image = f"{account}.dkr.ecr.us-west-2.amazonaws.com/{o.repository}"

    reflog = tmp_path / "ref-updates.log"
    git_server = GitHttpServer(tmp_path / "git", git_token, fail_rate=0.0, seed=SEED).start()
    github = FlakyGitHub({git_token}, fail_rate=FAIL_RATE, seed=SEED).start()
    sensors: list[SensorProcess] = []
    try:
        files = _world_files(overlays)
        repo_url = git_server.create_repo(GITOPS, files)
        bare = git_server.bare_path(GITOPS)
        git_server.install_hook(GITOPS, "post-receive", POST_RECEIVE.format(log=reflog))

        def ahead(owner: str, repo: str, base: str, head: str) -> int | None:
            head = head.split(":", 1)[-1]
            try:
                return int(
                    _git(git_server.bare_path(f"{owner}/{repo}"), "rev-list", "--count", f"{base}..{head}")
                )
            except subprocess.CalledProcessError:
                return None

        github.ahead = ahead
        rules = tmp_path / "rules.yaml"
        rules.write_text(rules_yaml(account, prefix, repo_url))
        queues, bus = make_queues(moto, prefix, VISIBILITY, MAX_RECEIVE)
        deliveries = plan_deliveries(overlays, DUPLICATE_SHARE, rng)
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(tmp_path),
            "PYTHONPATH": str(ROOT),
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-west-2",
            "AWS_DEFAULT_REGION": "us-west-2",
            "IMAGEBUMP_GIT_TOKEN": git_token,
            "IMAGEBUMP_GITHUB_API_URL": github.url,
        }

        def start_sensor(label: str) -> SensorProcess:
            sensor = SensorProcess(
                label,
                tmp_path / "sensors",
                queue_url=queues.url,
                endpoint_url=moto.endpoint_url,
                rules=rules,
                env=env,
                concurrency=CONCURRENCY,
                visibility=VISIBILITY,
                backoff_scale=BACKOFF_SCALE,
            )
            sensors.append(sensor)
            return sensor

        git_server.fail_rate = FAIL_RATE  # from here on, 10% of Git requests answer 503

        # --- the run -----------------------------------------------------------------------------
        first = start_sensor("sensor-1")
        second: SensorProcess | None = None
        events = moto.client("events")
        kill_at = max(3, int(len(deliveries) * KILL_AT))
        in_flight_at_kill = 0
        sent = 0
        quiet = 0
        while True:
            if time.monotonic() - started > DEADLINE:
                pytest.fail(
                    f"chaos run exceeded {DEADLINE:.0f}s: sent {sent}/{len(deliveries)}, queue depth "
                    f"{queues.depth()}, finished {[s.finished() for s in sensors]}"
                )
            if sent < len(deliveries) and queues.depth() < QUEUE_LOW:
                batch = deliveries[sent : sent + 10]
                reply = events.put_events(Entries=[event_entry(d, bus) for d in batch])
                assert reply.get("FailedEntryCount", 0) == 0, reply
                for d, entry in zip(batch, reply["Entries"]):
                    d.event_id = entry["EventId"]
                sent += len(batch)
            if second is None and first.finished() >= kill_at:
                records = first.records()
                submitted = sum(r.get("event") == "workflow-submitted" for r in records)
                in_flight_at_kill = submitted - first.finished()
                if in_flight_at_kill > 0 or sent == len(deliveries):
                    first.kill()
                    second = start_sensor("sensor-2")
            if second is not None and sent == len(deliveries):
                quiet = quiet + 1 if queues.depth() == 0 else 0
                if quiet >= 3:
                    break
            time.sleep(0.5 if second is None or sent < len(deliveries) else 1.0)

        orphans_killed = first.reap_orphans(timeout=60)
        for sensor in sensors:
            sensor.terminate()
        run_seconds = time.monotonic() - started

        # --- every message, every event ------------------------------------------------------------
        by_id: dict[str, Delivery] = {d.event_id: d for d in deliveries}
        assert len(by_id) == len(deliveries), "EventBridge gave two deliveries the same id"
        records = [r for s in sensors for r in s.records()]
        deleted: dict[str, list[dict]] = defaultdict(list)
        for r in records:
            if r.get("event") == "message-deleted" and r.get("event_id") in by_id:
                deleted[r["event_id"]].append(r)
        dlq = {e.get("id") for e in queues.drain_dlq()}
        results: dict[str, list[dict]] = defaultdict(list)
        for s in sensors:
            for rec in read_jsonl(s.results):
                results[rec["event_id"]].append(rec)

        killed_finished: dict[str, list[dict]] = defaultdict(list)  # what sensor-1 finished before its kill
        for rec in read_jsonl(first.results):
            killed_finished[rec["event_id"]].append(rec)
        # sensor-1's workflows with no end on its record when it was killed, and what sensor-2 saw
        first_records = first.records()
        ended = {
            r.get("event_id")
            for r in first_records
            if r.get("event") in ("message-deleted", "workflow-failed")
        }
        killed_in_flight = {
            r.get("event_id") for r in first_records if r.get("event") == "workflow-submitted"
        } - ended
        seen_after_kill = {r.get("event_id") for s in sensors if s is not first for r in s.records()}
        outcome: dict[str, str] = {}
        reasons: Counter[str] = Counter()
        for eid in by_id:
            if eid in deleted:
                how = deleted[eid][-1]["outcome"]
                if how == "succeeded":
                    ok = [r for r in results[eid] if r["phase"] == "Succeeded"]
                    if ok:
                        kind, detail = classify(ok[-1])
                        outcome[eid] = kind
                        reasons[f"{kind}: {detail.split(':')[0]}"] += 1
                    else:
                        outcome[eid] = "succeeded, outcome lost with the killed sensor"
                else:
                    outcome[eid] = how  # duplicate | skipped (filtered by the sensor)
            elif eid in dlq:
                outcome[eid] = "dead-lettered"
            elif eid in killed_finished and queues.depth() == 0:
                # sensor-1 finished it, then was SIGKILLed between deleting the message and logging
                # the delete: the message is gone (not queued, not dead-lettered) after its outcome
                # (a message not yet deleted would have been redelivered to sensor-2 and logged there)
                ok = [r for r in killed_finished[eid] if r["phase"] == "Succeeded"]
                outcome[eid] = (
                    classify(ok[-1])[0] if ok else "finished, its delete record lost with the killed sensor"
                )
            elif eid in killed_in_flight and queues.depth() == 0 and eid not in seen_after_kill:
                # the SIGKILL fell after sensor-1 deleted the message (only a terminal outcome deletes
                # one) and before it wrote the delete's log record and the workflow's result: the
                # message is gone, never redelivered to sensor-2, not dead-lettered
                outcome[eid] = "finished, its delete and result records lost with the killed sensor"
        lost = sorted(set(by_id) - set(outcome))
        twice_deleted = sorted(e for e, rs in deleted.items() if len(rs) > 1)
        counts = Counter(outcome.values())
        succeeded = sum(1 for e in by_id if e in deleted and deleted[e][-1]["outcome"] == "succeeded")
        duplicates = sum(1 for e in by_id if e in deleted and deleted[e][-1]["outcome"] == "duplicate")
        filtered = sum(1 for e in by_id if e in deleted and deleted[e][-1]["outcome"] == "skipped")
        dead = len(dlq & set(by_id))
        queue_left = queues.depth()
        workflow_runs = sum(len(v) for v in results.values())
        failed_runs = sum(1 for v in results.values() for r in v if r["phase"] != "Succeeded")

        # --- what the repository holds after the events alone -------------------------------------
        before_sweep, _ = _state_problems(bare, overlays, github)
        dead_lettered = [by_id[e] for e in by_id if outcome.get(e) == "dead-lettered"]
        dead_notes = [
            f"{d.overlay.name} {d.image.tag} (copy {d.copy}): "
            + (
                "; ".join(_why_failed(r) for r in results[d.event_id])
                or "no run finished (in flight when killed)"
            )
            for d in dead_lettered
        ]
        # A dead-lettered push is a terminal outcome (nothing lost: it waits in the DLQ for a human),
        # but its overlay stays behind until the next sweep; any other gap is a bug of the event path.
        behind_for_a_reason = {d.overlay.name for d in dead_lettered}
        unexplained = [p for p in before_sweep if p.split(" ", 1)[0] not in behind_for_a_reason]

        # --- one sweep, as `imagebump run --local --reconcile-every` runs it on schedule -------------
        git_server.fail_rate = 0.0  # the faults were for the event path; the sweep's verdict must be exact
        github.fail_rate = 0.0
        sweep = subprocess.run(
            [
                sys.executable,
                "-m",
                "imagebump",
                "reconcile",
                "--rules",
                str(rules),
                "--endpoint-url",
                moto.endpoint_url,
                "--apply",
            ],
            check=False,
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        try:
            swept = json.loads(sweep.stdout)
        except ValueError:
            pytest.fail(
                f"imagebump reconcile exited {sweep.returncode}: {sweep.stdout}{sweep.stderr[-3000:]}"
            )
        path_of = {o.path: o.name for o in overlays}
        sweep_states = Counter(t["state"] for t in swept["targets"])
        swept_behind = sorted(
            path_of.get(t["path"], t["path"]) for t in swept["targets"] if t["state"] == "behind"
        )
        expected_behind = sorted({p.split(" ", 1)[0] for p in before_sweep})

        problems, branches_of = _state_problems(bare, overlays, github)

        # --- downgrades: base branch history and every PR branch's updates ----------------------------
        downgrades: list[str] = []
        history = _git(bare, "rev-list", "--first-parent", "--reverse", "main").split()
        main_texts = _blobs(bare, [f"{c}:{o.file}" for c in history for o in overlays])
        for o in overlays:
            seq = _dedupe([o.seq_of(_tag(main_texts[f"{c}:{o.file}"], o)) for c in history])
            for a, b in monotonic_violations(seq):
                downgrades.append(f"{o.name} main: 1.0.{a} → 1.0.{b} (history {seq})")
        updates = [tuple(line.split()) for line in reflog.read_text().splitlines()] if reflog.exists() else []
        chains, chain_problems = ref_chains([u for u in updates if len(u) == 3])  # type: ignore[misc]
        problems += chain_problems
        owner_of = {b: o for o in overlays for b in branches_of[o.name]}
        branch_texts = _blobs(
            bare,
            [
                f"{sha}:{owner_of[ref.removeprefix('refs/heads/')].file}"
                for ref, chain in chains.items()
                if ref.removeprefix("refs/heads/") in owner_of
                for sha in chain
            ],
        )
        branch_updates = 0
        for ref, chain in chains.items():
            o = owner_of.get(ref.removeprefix("refs/heads/"))
            if o is None:
                continue
            branch_updates += len(chain)
            seq = _dedupe([o.seq_of(_tag(branch_texts[f"{sha}:{o.file}"], o)) for sha in chain])
            for a, b in monotonic_violations(seq):
                downgrades.append(
                    f"{o.name} {ref.removeprefix('refs/heads/')}: 1.0.{a} → 1.0.{b} (updates {seq})"
                )

        # --- duplicate PRs ------------------------------------------------------------------------------
        open_heads = Counter(p.head for p in github.open_pulls())
        duplicate_prs = [f"{h}: {n} open PRs" for h, n in open_heads.items() if n > 1]
        per_target = Counter(owner_of[p.head].name for p in github.pulls if p.head in owner_of)
        duplicate_prs += [f"{name}: {n} PRs created" for name, n in per_target.items() if n > 1]
        duplicate_prs += [
            f"{p.head}: PR #{p.number} for no known target" for p in github.pulls if p.head not in owner_of
        ]

        report = [
            f"chaos: {EVENTS} pushes for {OVERLAYS} overlays + {len(deliveries) - EVENTS} duplicate deliveries "
            f"= {len(deliveries)} messages; {late_older(deliveries)} arrived after a newer image; "
            f"seed {SEED}; {run_seconds:.0f}s",
            f"faults: git 503s {FAIL_RATE:.0%} of requests; GitHub 502s injected "
            f"{github.injected['before']} before / {github.injected['after']} after the change; "
            f"sensor-1 SIGKILLed after {kill_at} workflows with {in_flight_at_kill} in flight "
            f"({orphans_killed} orphaned steps still running 60s later were killed)",
            f"workflow runs: {workflow_runs} ({failed_runs} failed and redelivered)",
            f"messages: sent {len(deliveries)} = succeeded {succeeded} + duplicates {duplicates} + "
            f"skipped {filtered} + dead-lettered {dead}; lost {len(lost)}; left in queue {queue_left}; "
            f"deleted twice {len(twice_deleted)}",
            "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
            "  detail: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())),
            f"commits on main {len(history) - 1}; PR-branch updates {branch_updates}; "
            f"PRs {len(github.pulls)} ({len(github.open_pulls())} open)",
            f"after the events: {len(before_sweep)} overlays behind ({len(unexplained)} not explained by a "
            f"dead-lettered push)",
            *(f"  DEAD-LETTERED {n}" for n in dead_notes[:10]),
            *(f"  BEHIND {p}" for p in before_sweep[:20]),
            f"sweep (reconcile --apply): exit {sweep.returncode}; states "
            + ", ".join(f"{k} {v}" for k, v in sorted(sweep_states.items()))
            + f"; submitted {swept.get('submitted')}; behind {swept_behind}",
            f"downgrades {len(downgrades)}; duplicate PRs {len(duplicate_prs)}; state problems {len(problems)}",
            *(f"  DOWNGRADE {d}" for d in downgrades[:20]),
            *(f"  DUPLICATE {d}" for d in duplicate_prs[:20]),
            *(f"  PROBLEM {p}" for p in problems[:30]),
        ]
        with capsys.disabled():
            print("\n" + "\n".join(report))
        # ... and in the run's summary, also under pytest-xdist (tests/conftest.py prints it)
        request.node.user_properties.append(("summary", "\n".join(report)))

        # what every sensor wrote about a lost event: which record the inference above lacked
        # (a sensor's log, its results, the deletes; printed so a failure in CI can be read later)
        traces = {
            e: [
                {k: r.get(k) for k in ("event", "outcome", "phase", "workflow", "ts") if r.get(k) is not None}
                for s in sensors
                for r in (*s.records(), *read_jsonl(s.results))
                if r.get("event_id") == e
            ]
            for e in lost
        }
        assert not lost, (
            f"events with no terminal outcome: {[by_id[e].image.tag for e in lost]}; "
            f"killed in flight {sorted(killed_in_flight & set(lost))}, seen after the kill "
            f"{sorted(seen_after_kill & set(lost))}, queue {queues.depth()}; what the sensors wrote: {traces}"
        )
        assert len(deliveries) == succeeded + duplicates + filtered + dead, report[3]
        assert not (set(deleted) & dlq), "an event was both handled and dead-lettered"
        assert queue_left == 0, report[3]
        assert not downgrades, "\n".join(report)
        assert not duplicate_prs, "\n".join(report)
        assert not unexplained, "\n".join(report)
        assert swept_behind == expected_behind, "\n".join(report)
        assert sweep.returncode == 0, "\n".join(report) + "\n" + sweep.stderr[-3000:]
        assert not sweep_states.keys() - {"current", "proposed", "behind"}, "\n".join(report)
        assert not problems, "\n".join(report)
    finally:
        for sensor in sensors:
            if sensor.alive():
                sensor.terminate(timeout=30)
            sensor.reap_orphans(timeout=0)
        github.stop()
        git_server.stop()

"""Scenario 4 (growth): rules matching vs. number of rules; edit+commit vs. repository size.

Rules: a generated rules file of N rules in the in-house format (literal repositories, ``$n``
captures, allow/deny lists), loaded with :func:`steps.rules.load_rules`; then
:meth:`RuleSet.match` timed per event (µs) for an image one rule matches and one none does.

Repository size: one-overlay repositories of 500 / 5,000 / 50,000 files. For each: our git layer
(:mod:`steps.git`: partial sparse clone, edit, commit, push) run directly; the workflow's
``edit-kustomize`` + ``commit-pr`` steps through the executor; plain git with the same partial
sparse clone (the floor), the same with ``--sparse-index``; and plain git with a full clone, to
show what partial + sparse saves.
"""

from __future__ import annotations

import tempfile
import time
import timeit
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import floor
from bench.stats import percentile, summary
from bench.testbed import OVERLAY, World

HOST = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
GITHUB = "https://github.com/org"


def rules_text(n: int) -> str:
    """N rules of the shapes teams write (every 10th with a capture, every 3rd with an allow list)."""
    lines = []
    for i in range(n):
        team = f"team{i % 50}"
        if i % 10 == 0:
            lines.append(f"- registryURI: {HOST}/{team}/$1/svc{i}")
            lines.append(f"  githubRepository: {GITHUB}/repo{i % 7}/services/$1/svc{i}/overlays/prod")
        else:
            lines.append(f"- registryURI: {HOST}/{team}/svc{i}")
            lines.append(f"  githubRepository: {GITHUB}/repo{i % 7}/services/svc{i}/overlays/prod")
        if i % 3 == 0:
            lines.append(
                "  allowImageTag:\n  - regexp:^[0-9a-f]{7,40}$\n  - regexp:^v?[0-9]+\\.[0-9]+\\.[0-9]+$"
            )
        lines.append("  denyImageTag:\n  - latest")
        lines.append(f"  env: env{i % 3}")
    return "\n".join(lines) + "\n"


def run_rules(counts: tuple[int, ...], number: int = 2000) -> list[dict[str, Any]]:
    from steps.domain.models import Image
    from steps.rules import load_rules

    out = []
    for n in counts:
        text = rules_text(n)
        t = time.perf_counter()
        ruleset = load_rules(text)
        load = time.perf_counter() - t
        mid = n // 2
        repo = f"team{mid % 50}/svc{mid}" if mid % 10 else f"team{mid % 50}/x/svc{mid}"
        hit = Image(
            account="123456789012",
            region="us-west-2",
            repository=repo,
            tag="1.2.3",
            pushed_at=datetime.now(UTC),
        )
        miss = Image(account="123456789012", region="us-west-2", repository="nobody/nothing", tag="1.2.3")
        targets = len(ruleset.match(hit).targets)
        hit_us = (
            min(timeit.repeat(lambda r=ruleset, i=hit: r.match(i), number=number, repeat=3)) / number * 1e6
        )
        miss_us = (
            min(timeit.repeat(lambda r=ruleset, i=miss: r.match(i), number=number, repeat=3)) / number * 1e6
        )
        out.append(
            {
                "rules": n,
                "load_ms": round(load * 1e3, 2),
                "match_hit_us": round(hit_us, 2),
                "match_miss_us": round(miss_us, 2),
                "targets_for_hit": targets,
            }
        )
    return out


def _our_git(world: World, owner_repo: str, tag: str) -> dict[str, float]:
    from steps import git, kustomize

    overlay = OVERLAY.format(app="app00")
    file = f"{overlay}/kustomization.yaml"
    with tempfile.TemporaryDirectory(prefix="bench-size-") as tmp:
        t0 = time.perf_counter()
        repo = git.clone(
            world.git.url(owner_repo),
            Path(tmp) / "repo",
            branch="main",
            paths=[overlay],
            auth=world.git_auth(),
        )
        t1 = time.perf_counter()
        text = repo.read(file)
        name = kustomize.read_images(text)[0].name
        repo.write(file, kustomize.set_image(text, name, tag=tag))
        repo.commit(f"bench: {tag}")
        repo.push("HEAD:refs/heads/main")
        t2 = time.perf_counter()
    return {"total": t2 - t0, "clone": t1 - t0, "edit_commit_push": t2 - t1}


def run_repo_sizes(world: World, *, reps: int, workflow_reps: int) -> list[dict[str, Any]]:
    out = []
    for n, owner_repo in sorted(world.sizes.items()):
        url = world.git.url(owner_repo)
        overlay = OVERLAY.format(app="app00")
        ours = [_our_git(world, owner_repo, f"5.{n}.{i}") for i in range(reps)]
        partial = [floor.plain_commit(url, world.token, overlay, f"6.{n}.{i}") for i in range(reps)]
        indexed = [
            floor.plain_commit(url, world.token, overlay, f"3.{n}.{i}", sparse_index=True)
            for i in range(reps)
        ]
        full = [
            floor.plain_commit(url, world.token, overlay, f"4.{n}.{i}", partial=False) for i in range(reps)
        ]
        steps: dict[str, list[float]] = {"edit-kustomize": [], "commit-pr": []}
        executor = world.executor()
        for i in range(workflow_reps):
            event = world.event_for(f"size/f{n}")
            import json

            result = executor.run({"event": json.dumps(event)}, f"bench-size-{n}-{i}", event_id=event["id"])
            for node in result.nodes:
                if node.template in steps and node.phase == "Succeeded":
                    steps[node.template].append(node.duration)
        row = {
            "files": n,
            "our_git_s": summary([r["total"] for r in ours]),
            "our_clone_s": summary([r["clone"] for r in ours]),
            "floor_partial_s": summary([r["total"] for r in partial]),
            "floor_partial_sparse_index_s": summary([r["total"] for r in indexed]),
            "floor_full_clone_s": summary([r["total"] for r in full]),
            "workflow_edit_s": summary(steps["edit-kustomize"]),
            "workflow_commit_s": summary(steps["commit-pr"]),
        }
        if steps["edit-kustomize"] and steps["commit-pr"]:
            row["workflow_edit_plus_commit_p50_s"] = round(
                percentile(steps["edit-kustomize"], 50) + percentile(steps["commit-pr"], 50), 3
            )
        out.append(row)
    return out

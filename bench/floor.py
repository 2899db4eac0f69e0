"""Scenario 3: the floor — the same commits made by plain ``git`` commands, nothing else.

One commit = ``git clone --filter=blob:none --depth 1 --no-checkout --single-branch``, ``git
sparse-checkout set --cone OVERLAY``, ``git checkout``, a one-line edit of ``newTag``, ``git commit
-a``, ``git push``; on a rejected push: ``git fetch --depth 1``, ``git reset --hard``, edit again, push
again (what commit-pr does, minus everything else). The token travels in the environment
(``GIT_CONFIG_*``), as in :mod:`steps.git`. No Python process per step, no queue, no ECR, no rules:
this is what the Git work alone costs on this machine, so "ours / floor" is the overhead imagebump
adds around it.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.stats import cpu_clock, cpu_spent, summary
from bench.testbed import OVERLAY, World
from steps.domain.intent import TRAILER_KEY

_TAG = re.compile(r"(?m)^(\s*newTag:\s*).*$")


def _env(token: str) -> dict[str, str]:
    header = "Authorization: Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": tempfile.gettempdir(),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_COUNT": "4",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": header,
        "GIT_CONFIG_KEY_1": "user.name",
        "GIT_CONFIG_VALUE_1": "floor",
        "GIT_CONFIG_KEY_2": "user.email",
        "GIT_CONFIG_VALUE_2": "floor@example.com",
        "GIT_CONFIG_KEY_3": "advice.detachedHead",
        "GIT_CONFIG_VALUE_3": "false",
    }


def _git(args: list[str], env: dict[str, str], cwd: Path | None = None, check: bool = True) -> int:
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:2])} failed: {proc.stderr.decode(errors='replace')[-300:]}")
    return proc.returncode


def floor_message(overlay: str, tag: str) -> str:
    """The floor's commit message: a subject and imagebump's trailer, as imagebump's own commits carry.

    The floor stands in for imagebump's commits, and its commits stay in the world the next scenario
    runs in (the floor's 27-event burst runs just before our 200-event one, on the same overlays):
    without the trailer they read as a person's edits, and every later event of ours read the whole
    history of its file (a deeper fetch and the file's earlier versions) because of the floor.
    """
    return f"floor: {overlay} → {tag}\n\n{TRAILER_KEY}: floor/{overlay}:{tag}\n"


def plain_commit(
    url: str, token: str, overlay: str, tag: str, *, partial: bool = True, sparse_index: bool = False
) -> dict[str, float]:
    """Set ``newTag: TAG`` in OVERLAY/kustomization.yaml and push it to main; phase seconds.

    ``partial=False`` makes a full clone; ``sparse_index=True`` adds ``--sparse-index`` to the cone
    (the index then holds the cone only, so add/commit no longer scale with the repository).
    """
    env = _env(token)
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp:
        work = Path(tmp) / "repo"
        t0 = time.perf_counter()
        if partial:
            _git(
                [
                    "clone",
                    "--quiet",
                    "--filter=blob:none",
                    "--depth",
                    "1",
                    "--no-checkout",
                    "--single-branch",
                    "--branch",
                    "main",
                    url,
                    str(work),
                ],
                env,
            )
            _git(
                ["sparse-checkout", "set", "--cone", *(["--sparse-index"] if sparse_index else []), overlay],
                env,
                work,
            )
            _git(["checkout", "--quiet"], env, work)
        else:
            _git(["clone", "--quiet", "--single-branch", "--branch", "main", url, str(work)], env)
        t1 = time.perf_counter()
        attempts = 0
        while True:
            attempts += 1
            path = work / overlay / "kustomization.yaml"
            path.write_text(_TAG.sub(lambda m: m.group(1) + tag, path.read_text(), count=1))
            _git(["commit", "--quiet", "-a", "-m", floor_message(overlay, tag)], env, work)
            t2 = time.perf_counter()
            if _git(["push", "--quiet", "origin", "HEAD:refs/heads/main"], env, work, check=False) == 0:
                break
            _git(["fetch", "--quiet", "--depth", "1", "origin", "main"], env, work)
            _git(["reset", "--quiet", "--hard", "FETCH_HEAD"], env, work)
        t3 = time.perf_counter()
    return {"total": t3 - t0, "clone": t1 - t0, "edit_commit": t2 - t1, "push": t3 - t2, "attempts": attempts}


def run_sequential(world: World, runs: int, app: str | None = None) -> dict[str, Any]:
    """``runs`` plain-git commits to one overlay (default: the world's last app), one after the other."""
    one = interleaved(world, app)
    for i in range(runs):
        one(i)
    return one.summary()


class interleaved:  # noqa: N801 - used as a function: ``one = interleaved(world); one(i)``
    """One plain-git commit per call (``one(i)``), to interleave with another measurement;
    :meth:`summary` is what :func:`run_sequential` returns."""

    def __init__(self, world: World, app: str | None = None) -> None:
        self.world = world
        self.overlay = OVERLAY.format(app=app or world.apps[-1])
        self.results: list[dict[str, float]] = []

    def __call__(self, i: int) -> None:
        self.results.append(plain_commit(self.world.monorepo_url, self.world.token, self.overlay, f"7.0.{i}"))

    def summary(self) -> dict[str, Any]:
        phases = ("total", "clone", "edit_commit", "push")
        out = {"runs": len(self.results), **{f"{k}_s": summary([r[k] for r in self.results]) for k in phases}}
        return out


def run_burst(
    world: World, *, events: int, overlays: int, concurrency: int, round_: int = 0
) -> dict[str, Any]:
    """The burst's commits by plain git, ``concurrency`` at a time; drain time and per-commit latency.

    ``round_`` numbers a repeated burst in one world: its tags differ from every earlier round's, so
    each of its commits changes its file as the first round's did."""
    overlays = min(overlays, len(world.apps))
    suffix = f"-r{round_}" if round_ else ""
    jobs = [
        (OVERLAY.format(app=world.apps[i % overlays]), f"8.{i // overlays}.{i}{suffix}")
        for i in range(events)
    ]
    before = cpu_clock()
    start = time.perf_counter()
    done: list[float] = []

    def one(job: tuple[str, str]) -> dict[str, float]:
        result = plain_commit(world.monorepo_url, world.token, *job)
        done.append(time.perf_counter() - start)
        return result

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(pool.map(one, jobs))
    drain = time.perf_counter() - start
    cpu = cpu_spent(before, cpu_clock())
    return {
        "events": events,
        "overlays": overlays,
        "concurrency": concurrency,
        "drain_s": round(drain, 3),
        "events_per_s": round(events / drain, 3),
        "latency_s": summary(done),
        "commit_s": summary([r["total"] for r in results]),
        "push_retries": int(sum(r["attempts"] - 1 for r in results)),
        "lost_races": int(sum(r["attempts"] - 1 for r in results)),  # plain git retries every loss at once
        "cpu": cpu,  # the machine's CPU seconds over the drain (bench.stats.cpu_clock)
    }

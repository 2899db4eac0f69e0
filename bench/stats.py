"""Small statistics and machine facts for the benchmark (pure, no I/O but reading /proc)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of ``values``; NaN for no values."""
    if not values:
        return float("nan")
    data = sorted(values)
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summary(values: Sequence[float], digits: int = 3) -> dict[str, Any]:
    """n, p50, p95, max, mean of ``values`` (seconds or whatever unit the caller uses)."""
    vals = list(values)
    if not vals:
        return {"n": 0}
    return {
        "n": len(vals),
        "p50": round(percentile(vals, 50), digits),
        "p95": round(percentile(vals, 95), digits),
        "max": round(max(vals), digits),
        "min": round(min(vals), digits),
        "mean": round(sum(vals) / len(vals), digits),
    }


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "git": subprocess.run(
            ["git", "--version"], capture_output=True, text=True, check=False
        ).stdout.strip(),
    }
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["memory_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
        info["loadavg_at_start"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass
    return info


def cpu_clock() -> dict[str, float] | None:
    """The machine's CPU seconds so far, busy and idle over all CPUs (``/proc/stat``'s first line:
    idle = idle + iowait; steal is busy time the machine did not get), and this process's own
    (``getrusage``: the bench process, where moto, the git server's thread, the sensor and the
    executor run); None where ``/proc/stat`` cannot be read. :func:`cpu_spent` subtracts two."""
    import resource

    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    own = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "busy_s": (user + nice + system + irq + softirq) / tick,
        "idle_s": (idle + iowait) / tick,
        "steal_s": steal / tick,
        "bench_process_s": own.ru_utime + own.ru_stime,
    }


def cpu_spent(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float] | None:
    """What the machine's CPUs did between two :func:`cpu_clock` readings (seconds, rounded)."""
    if before is None or after is None:
        return None
    return {k: round(after[k] - before[k], 2) for k in before}


def loadavg() -> list[str]:
    try:
        return open("/proc/loadavg").read().split()[:3]
    except OSError:
        return []

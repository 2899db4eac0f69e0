"""Draw ``results.png`` from the results dict: six panels (single event, where its time goes,
bursts, rules, repository sizes, concurrency). Needs matplotlib (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def draw(r: dict[str, Any], path: Path) -> bool:
    """Six panels into ``path``; False when matplotlib is missing (``pip install -e '.[bench]'``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    fig.suptitle(
        f"imagebump benchmarks — {r['timestamp']} — {r['machine'].get('cpus')} CPUs"
        + (" (quick)" if r.get("quick") else "")
        + ("" if r.get("complete", True) else " (partial)")
    )
    _single_panel(axes[0][0], r)
    _breakdown_panel(axes[0][1], r, matplotlib)
    _bursts_panel(axes[0][2], r)
    _rules_panel(axes[1][0], r)
    _sizes_panel(axes[1][1], r)
    _concurrency_panel(axes[1][2], r)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def _single_panel(ax: Any, r: dict[str, Any]) -> None:
    s = r.get("single_event")
    if s:
        lat = s["latencies"]
        ax.hist(lat, bins=min(15, max(3, len(lat))), color="#4c72b0")
        p50 = s["latency_s"]["p50"]
        ax.axvline(p50, color="k", linestyle="--", label=f"p50 {p50:.2f}s")
        fl = r.get("floor", {}).get("single")
        if fl:
            ax.axvline(fl["total_s"]["p50"], color="#c44e52", label=f"plain git {fl['total_s']['p50']:.2f}s")
        ax.legend()
    ax.set_title("single event → commit: latency (s)")


def _breakdown_panel(ax: Any, r: dict[str, Any], matplotlib: Any) -> None:
    bd = r.get("single_event", {}).get("breakdown")
    if bd:
        steps = list(bd)
        keys: list[str] = []
        for parts in bd.values():
            keys += [k for k in parts if k not in ("total", "other") and k not in keys]
        keys.append("other")
        cmap = matplotlib.colormaps["tab20"]
        bottom = [0.0] * len(steps)
        for i, k in enumerate(keys):
            vals = [max(0.0, bd[st].get(k, 0.0)) for st in steps]
            ax.bar(steps, vals, bottom=bottom, label=k, color="#bbbbbb" if k == "other" else cmap(i % 20))
            bottom = [a + b for a, b in zip(bottom, vals)]
        ax.legend(fontsize=7)
    ax.set_title("per step p50 (s): where the time goes")


def _bursts_panel(ax: Any, r: dict[str, Any]) -> None:
    bursts = r.get("bursts", [])
    floors = {b["events"]: b for b in r.get("floor", {}).get("bursts", [])}
    if bursts:
        x = list(range(len(bursts)))
        ax.bar([i - 0.2 for i in x], [b["drain_s"] for b in bursts], width=0.4, label="imagebump")
        ax.bar(
            [i + 0.2 for i in x],
            [floors.get(b["events"], {}).get("drain_s", 0) for b in bursts],
            width=0.4,
            label="plain git",
            color="#c44e52",
        )
        ax.set_xticks(x, [f"{b['events']} events / {b['overlays']} overlays" for b in bursts])
        ax.legend()
    ax.set_title("bursts: time to drain (s)")


def _rules_panel(ax: Any, r: dict[str, Any]) -> None:
    rules = r.get("growth", {}).get("rules")
    if rules:
        xs = [x["rules"] for x in rules]
        ax.plot(xs, [x["match_hit_us"] for x in rules], marker="o", label="match (hit)")
        ax.plot(xs, [x["match_miss_us"] for x in rules], marker="o", label="match (miss)")
        ax.set_xscale("log")
        ax.set_ylim(bottom=0)
        ax.legend()
    ax.set_title("rules matching: µs per event vs. rules")


def _sizes_panel(ax: Any, r: dict[str, Any]) -> None:
    sizes = r.get("growth", {}).get("repo_sizes")
    if sizes:
        xs = [x["files"] for x in sizes]
        ax.plot(
            xs,
            [x.get("workflow_edit_plus_commit_p50_s") or 0 for x in sizes],
            marker="o",
            label="edit+commit steps (ours)",
        )
        for key, label in (
            ("our_git_s", "our git layer only"),
            ("floor_partial_s", "plain git, partial sparse"),
            ("floor_partial_sparse_index_s", "plain git, partial sparse + sparse index"),
            ("floor_full_clone_s", "plain git, full clone"),
        ):
            if all(key in x for x in sizes):
                ax.plot(xs, [x[key].get("p50", 0) for x in sizes], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    ax.set_title("edit+commit (s) vs. files in repository")


def _concurrency_panel(ax: Any, r: dict[str, Any]) -> None:
    conc = r.get("growth", {}).get("concurrency")
    if conc:
        xs = [c["concurrency"] for c in conc]
        ax.plot(xs, [c["events_per_s"] for c in conc], marker="o", label="events/s")
        ax.set_ylim(bottom=0)
        ax2 = ax.twinx()
        ax2.plot(
            xs, [c["latency_s"]["p50"] for c in conc], marker="s", color="#dd8452", label="latency p50 (s)"
        )
        ax2.set_ylabel("latency p50 (s)")
        ax2.set_ylim(bottom=0)
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.legend(loc="upper left")
        ax2.legend(loc="lower right")
    ax.set_title("concurrency: throughput and latency")

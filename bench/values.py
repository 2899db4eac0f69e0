"""Issue 34's bench line: a values-file edit costs no more than a kustomization edit (same run).

``python -m bench.values [--runs N]`` alone, or inside ``python -m bench`` (the ``growth`` scenario):
one repository on the project's ``git http-backend`` (loopback), holding an overlay's
kustomization and a chart's values file of the shapes real charts use (a Bitnami-like
``image: {registry, repository, tag, digest}`` block among ~150 lines of comments and settings,
next to a sidecar). Each run makes edit-kustomize's own sparse partial clone of the directory and
then the step's pure work on it — read the file, find the entry, plan and splice the edit (the
values writer re-reads its edit to prove it) — once for the kustomization and once for the values
file, interleaved (each kind first every other round), so both see the same load. Reported:
p50/min per kind (clone included, and the edit alone) and ``values / kustomize``. ECR is not asked (``order: none``): the lookup is the same
for both kinds. Nothing asserts on time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
TOKEN = "bench-values-token"
OVERLAY = "apps/api/overlays/prod"
CHART = "apps/api/chart"

KUSTOMIZATION = f"""apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../../base
namespace: api
images:
- name: {IMAGE}
  newTag: 1.0.0
- name: busybox
  newTag: "1.36"
"""


def _values() -> str:
    settings = "".join(
        f"## @param setting{i} What setting {i} does\nsetting{i}: value-{i}\n" for i in range(60)
    )
    return (
        '## Bitnami-like values\nglobal:\n  imageRegistry: ""\n\n'
        "image:\n  registry: 123456789012.dkr.ecr.us-west-2.amazonaws.com\n  repository: team/api\n"
        '  tag: 1.0.0  # the pushed tag lands here\n  digest: ""\n  pullPolicy: IfNotPresent\n\n'
        "sidecars:\n  - name: proxy\n    image: docker.io/envoyproxy/envoy:v1.30.1\n\n" + settings
    )


def _timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def run(runs: int = 9) -> dict[str, Any]:
    """Interleaved runs of both edits; ``{kustomize: {...}, values: {...}, ratio_p50, ...}``."""
    from imagebump.local.git_server import GitHttpServer
    from steps import git
    from steps.domain.models import Target
    from steps.edit_kustomize import decide as ek

    kinds = {
        "kustomize": Target(rule=0, repo_url="", path=OVERLAY, image=IMAGE, tag="1.1.0", order="none"),
        "values": Target(
            rule=0,
            repo_url="",
            path=CHART,
            image=IMAGE,
            tag="1.1.0",
            order="none",
            values_file=f"{CHART}/values.yaml",
        ),
    }
    total: dict[str, list[float]] = {k: [] for k in kinds}
    edit: dict[str, list[float]] = {k: [] for k in kinds}
    with (
        tempfile.TemporaryDirectory(prefix="bench-values-") as tmp,
        GitHttpServer(Path(tmp) / "srv", TOKEN) as srv,
    ):
        url = srv.create_repo(
            "bench/values",
            {
                f"{OVERLAY}/kustomization.yaml": KUSTOMIZATION,
                f"{CHART}/values.yaml": _values(),
                "README.md": "x\n",
            },
        )
        auth = git.GitAuth(TOKEN)
        for run_no in range(runs + 1):  # the first round warms imports and caches: not counted
            order = list(kinds.items())
            for kind, base in order if run_no % 2 else order[::-1]:  # each goes first every other round
                target = base.model_copy(update={"repo_url": url})
                started = time.perf_counter()
                repo = git.clone(
                    url, Path(tmp) / f"{kind}{run_no}", paths=[target.path], sparse=True, auth=auth, depth=50
                )

                def work(repo: Any = repo, target: Any = target, kind: str = kind) -> None:
                    values = None
                    if kind == "values":
                        file, values = target.values_file, ek.values_ref(target)
                    else:
                        file = f"{target.path}/kustomization.yaml"
                    text = repo.read(file)
                    entry = ek.find_entry(text, target, file, values)
                    plan = ek.decide(target, text, file, "0" * 40, repo.branch, {}, old=entry, values=values)
                    assert plan.changed, plan.reason

                spent = _timed(work)
                if run_no:
                    edit[kind].append(spent)
                    total[kind].append(time.perf_counter() - started)

    def summary(xs: list[float]) -> dict[str, float]:
        return {"p50": round(statistics.median(xs), 4), "min": round(min(xs), 4), "n": len(xs)}

    out: dict[str, Any] = {k: {"with_clone_s": summary(total[k]), "edit_s": summary(edit[k])} for k in kinds}
    out["ratio_p50"] = round(
        out["values"]["with_clone_s"]["p50"] / out["kustomize"]["with_clone_s"]["p50"], 2
    )
    out["edit_ratio_p50"] = round(out["values"]["edit_s"]["p50"] / out["kustomize"]["edit_s"]["p50"], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)
    r = run(args.runs)
    for kind in ("kustomize", "values"):
        print(
            f"{kind:<10} clone+edit p50 {r[kind]['with_clone_s']['p50']:.3f} s   edit alone p50 {r[kind]['edit_s']['p50']:.4f} s"
        )
    print(f"values / kustomize: {r['ratio_p50']}× (clone+edit), {r['edit_ratio_p50']}× (edit alone)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

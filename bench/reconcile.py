"""6. The reconcile run: what one reconcile run costs at 10 / 100 / 1,000 ECR repositories.

Two axes, each printed as a table: repositories (:func:`run_sizes`: moto's ECR and one GitOps
repository, reconcile run as ``imagebump reconcile`` runs it) and images per repository
(:func:`run_memory`: the reconcile step's peak memory and time on registries as large as real ones).
``python -m bench.reconcile`` runs the memory axis only (about two minutes); ``--repositories`` adds the
repositories axis. Writes nothing but temporary directories.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import ecr_synth
from bench.testbed import (
    BASE,
    PROJECT_ROOT,
    PYTHON,
    REGION,
    digest_of,
    fast_import,
    image_uri,
    overlay,
    python_env,
)
from imagebump.local import builders
from workflows import names


def _rules(account: str, prefix: str, git_url: str) -> str:
    host = f"{account}.dkr.ecr.{REGION}.amazonaws.com"
    return (
        f"- registryURI: {host}/{prefix}/$1\n  githubRepository: {git_url}/apps/$1/overlays/staging\n"
        "  env: staging\n  mode: commit\n  provider: local\n  order: semver\n"
        f"- registryURI: {host}/{prefix}/$1\n  githubRepository: {git_url}/apps/$1/overlays/production\n"
        "  env: production\n  mode: pr\n  provider: local\n  order: semver\n"
    )


def _build(moto: Any, server: Any, n: int, log: Any) -> tuple[str, str]:
    """``n`` ECR repositories with tags 1.0.0 and 1.1.0, and their GitOps repository; (prefix, rules)."""
    ecr = moto.client("ecr")
    prefix = f"sw{n}-{secrets.token_hex(3)}"
    names = [f"svc{i:04d}" for i in range(n)]
    account = ""
    started = time.monotonic()
    for name in names:
        repository = f"{prefix}/{name}"
        account = ecr.create_repository(repositoryName=repository)["repository"]["registryId"]
        for tag in ("1.0.0", "1.1.0"):
            digest = digest_of(repository, tag)
            manifest = builders.image_manifest(digest)
            ecr.put_image(repositoryName=repository, imageManifest=manifest, imageTag=tag, imageDigest=digest)
    owner_repo = f"bench/gitops-{prefix}"
    server.create_repo(owner_repo, {"README.md": "init\n"})
    files = {"README.md": f"# {n} services, two overlays each\n"}
    for i, name in enumerate(names):
        image = image_uri(account, f"{prefix}/{name}")
        tag = "1.0.0" if i % 10 == 0 else "1.1.0"  # a tenth behind
        files[f"apps/{name}/base/kustomization.yaml"] = BASE
        for env in ("staging", "production"):
            files[f"apps/{name}/overlays/{env}/kustomization.yaml"] = overlay(image=image, tag=tag)
    fast_import(server.bare_path(owner_repo), files, f"{n} services")
    log(
        f"[sweep] {n} ECR repositories (2 tags each) and {2 * n} overlays ready in "
        f"{time.monotonic() - started:.1f}s"
    )
    return prefix, _rules(account, prefix, server.url(owner_repo))


def run_sizes(
    sizes: tuple[int, ...] = (10, 100, 1000), *, reps: int = 1, concurrency: int = 8, log: Any = print
) -> list[dict[str, Any]]:
    """One world (moto + git server); per size: build, then ``reps`` dry-run reconcile runs.

    Each size gets its own ECR repositories in moto (``swN/svcNNNN``, two tags each) and one GitOps
    repository (built with ``git fast-import``) holding two overlays per ECR repository: staging
    (``mode: commit``) and production (``mode: pr``, ``provider: local``), one rule each with ``$1``.
    A tenth of the overlays hold the older tag, so reconcile also looks at proposal branches. Reconcile
    runs as a user runs it — ``imagebump reconcile`` without ``--apply``: the rendered
    ``image-reconcile`` CronWorkflow through the local executor — and reports wall time, the reconcile
    step's own time, ECR calls, Git calls and clones.

    What should hold (and what the table shows): ECR calls = one listing page per 1,000 repositories
    + one DescribeImages per repository (linear); one clone per Git repository whatever the number of
    overlays; time roughly linear in repositories.
    """
    from imagebump.local.git_server import GitHttpServer
    from imagebump.local.moto import moto_server
    from imagebump.local.reconciler import build_executor, run_reconcile
    from imagebump.local.stack import quiet_request_logs

    rows = []
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="imagebump-bench-sweep-")))
        moto = stack.enter_context(moto_server(REGION))
        stack.enter_context(quiet_request_logs())
        token = "bench-" + secrets.token_hex(16)
        server = stack.enter_context(GitHttpServer(root / "remotes", token))
        env = {
            "AWS_ENDPOINT_URL": moto.endpoint_url,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
        for n in sizes:
            _, rules = _build(moto, server, n, log)
            executor = build_executor(
                secrets={names.GIT_SECRET: {"token": token}, names.GIT_READ_SECRET: {"token": token}},
                configmaps={names.RULES_CONFIGMAP: {names.RULES_KEY: rules}},
                env=env,
                log=lambda record: None,
                work_root=root,
            )
            runs = []
            for _ in range(reps):
                reconciled = run_reconcile(executor, apply=False, concurrency=concurrency, full=True)
                if reconciled.message:
                    raise RuntimeError(f"reconcile at {n} repositories failed: {reconciled.message}")
                runs.append(reconciled)
            best = min(runs, key=lambda s: s.seconds)
            states: dict[str, int] = {}
            for t in best.report:
                states[t["state"]] = states.get(t["state"], 0) + 1
            row = {
                "repositories": n,
                "overlays": len(best.report),
                "wall_s": round(best.seconds, 3),
                "ms_per_repository": round(1000 * best.seconds / n, 1),
                **best.calls,
                "states": states,
                "runs": [round(s.seconds, 3) for s in runs],
            }
            rows.append(row)
            log(
                f"[sweep] {n} repositories / {row['overlays']} overlays: {row['wall_s']:.1f}s, "
                f"{row['ecr_calls']} ECR calls, {row['git_clones']} clone(s), {row['git_calls']} Git calls, "
                f"{states}"
            )
    return rows


#: (ECR repositories, images per repository) of the memory axis.
MEMORY_SHAPES: tuple[tuple[int, int], ...] = ((100, 2000), (10, 10000))
#: What the reconcile step's peak RSS must stay under (its pod's limit is 1 GiB).
MEMORY_BUDGET_MIB = 256


#: Runs ``python -m steps.runtime.launcher ARGS…`` and, at exit, writes the process's own peak RSS (VmHWM,
#: KiB) to ``$BENCH_HWM_FILE``. Not ``wait4``'s ``ru_maxrss``: Linux carries the parent's high-water
#: mark into a child across fork/vfork + exec, so a child of a big process (a pytest worker)
#: would report its parent's peak.
_HWM_LAUNCHER = """
import atexit, os, runpy, sys
def _hwm():
    with open('/proc/self/status') as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith('VmHWM:'))
    with open(os.environ['BENCH_HWM_FILE'], 'w') as out:
        out.write(str(kib))
atexit.register(_hwm)
sys.argv = ['steps.runtime.launcher', *sys.argv[1:]]
runpy.run_module('steps.runtime.launcher', run_name='__main__', alter_sys=True)
"""


def _memory_rules(prefix: str, git_url: str) -> str:
    host = f"{ecr_synth.ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com"
    return (
        f"- registryURI: {host}/{prefix}/$1\n  githubRepository: {git_url}/apps/$1/overlays/staging\n"
        "  env: staging\n  mode: commit\n  provider: local\n"
        "  allowImageTag:\n  - regexp:^[0-9a-f]{7,40}$\n  denyImageTag:\n  - latest\n"
        f"- registryURI: {host}/{prefix}/$1\n  githubRepository: {git_url}/apps/$1/overlays/production\n"
        "  env: production\n  mode: commit\n  provider: local\n  denyImageTag:\n  - latest\n"
    )


def run_memory(
    shapes: tuple[tuple[int, int], ...] = MEMORY_SHAPES, *, concurrency: int = 8, log: Any = print
) -> list[dict[str, Any]]:
    """Per ``(repositories, images)``: the reconcile step's peak RSS and time against a synthetic ECR.

    The images-per-repository axis (:func:`run_memory`): registries as large as real ones (100
    repositories × 2,000 images, 10 × 10,000), served by :mod:`bench.ecr_synth` (paged as ECR pages;
    moto cannot be filled that fast), two push-time rules as in the README (staging allows only short
    hashes, production denies ``latest``), two tags per image. The reconcile step runs as its pod runs it
    (``steps.runtime.launcher -e steps.reconcile.step:run``) in a child process; its peak RSS (the process's own
    VmHWM, written at exit), wall time and CPU time (``wait4``: the step and its git processes) are
    printed. What should hold: peak RSS ≤ 256 MiB at both shapes (the pod's limit is 1 GiB), time
    linear in images.
    """
    from imagebump.local.git_server import GitHttpServer

    rows = []
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="imagebump-bench-memory-")))
        token = "bench-" + secrets.token_hex(16)
        server = stack.enter_context(GitHttpServer(root / "remotes", token))
        for repositories, images in shapes:
            prefix = f"mem{repositories}x{images}"
            names = ecr_synth.repository_names(prefix, repositories)
            owner_repo = f"bench/gitops-{prefix}"
            server.create_repo(owner_repo, {"README.md": "init\n"})
            newest = ecr_synth.tags_of(images - 1)
            older = ecr_synth.tags_of(images - 2)
            files = {"README.md": f"# {repositories} services, two overlays each\n"}
            for i, name in enumerate(names):
                image = f"{ecr_synth.ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/{name}"
                short = name.rsplit("/", 1)[1]
                files[f"apps/{short}/base/kustomization.yaml"] = BASE
                tags = older if i % 10 == 0 else newest  # a tenth behind
                files[f"apps/{short}/overlays/staging/kustomization.yaml"] = overlay(image=image, tag=tags[0])
                files[f"apps/{short}/overlays/production/kustomization.yaml"] = overlay(
                    image=image, tag=tags[1]
                )
            fast_import(server.bare_path(owner_repo), files, f"{repositories} services")
            work = root / prefix
            (work / "outputs").mkdir(parents=True)
            (work / "rules.yaml").write_text(_memory_rules(prefix, server.url(owner_repo)))
            inputs = [
                {"name": "concurrency", "value": str(concurrency)},
                {"name": "limit", "value": "1000"},
                {"name": "full", "value": "false"},
                {"name": "gated", "value": "false"},
            ]
            (work / "inputs.json").write_text(json.dumps(inputs))
            with ecr_synth.SyntheticEcr(
                prefix, repositories=repositories, images=images, region=REGION
            ) as ecr:
                env = {
                    **python_env(),
                    "AWS_ENDPOINT_URL": ecr.url,
                    "AWS_REGION": REGION,
                    "AWS_DEFAULT_REGION": REGION,
                    "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing",
                    "IMAGEBUMP_RULES_FILE": str(work / "rules.yaml"),
                    "IMAGEBUMP_GIT_READ_TOKEN": token,
                    "hera__outputs_directory": str(work / "outputs"),
                    "PYDANTIC_DISABLE_PLUGINS": "1",
                    "BENCH_HWM_FILE": str(work / "hwm"),
                }
                started = time.monotonic()
                with open(work / "stdout", "wb") as out, open(work / "stderr", "wb") as err:
                    child = subprocess.Popen(
                        [
                            PYTHON,
                            "-c",
                            _HWM_LAUNCHER,
                            "-e",
                            "steps.reconcile.step:run",
                            str(work / "inputs.json"),
                        ],
                        cwd=work,
                        env=env,
                        stdout=out,
                        stderr=err,
                    )
                    _, status, usage = os.wait4(child.pid, 0)
                    child.returncode = os.waitstatus_to_exitcode(status)
                seconds = time.monotonic() - started
                calls = ecr.calls
            if child.returncode != 0:
                tail = (work / "stderr").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the reconcile step at {repositories} × {images} failed: {tail}")
            outputs = work / "outputs" / "parameters"
            counts = json.loads((outputs / "counts").read_text())
            states: dict[str, int] = {}
            for c in counts:
                states[c["state"]] = states.get(c["state"], 0) + int(c["count"])
            peak = int((work / "hwm").read_text()) / 1024  # VmHWM, KiB
            row = {
                "repositories": repositories,
                "images_per_repository": images,
                "images": repositories * images,
                "overlays": 2 * repositories,
                "peak_rss_mib": round(peak, 1),
                "budget_mib": MEMORY_BUDGET_MIB,
                "wall_s": round(seconds, 2),
                # CPU time of the step (and its git processes): what the load of a shared machine
                # does not stretch, unlike the wall time
                "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                "cpu_us_per_image": round(
                    1e6 * (usage.ru_utime + usage.ru_stime) / (repositories * images), 1
                ),
                "ecr_calls": calls,
                "states": states,
            }
            rows.append(row)
            log(
                f"[sweep-memory] {repositories} repositories × {images:,} images "
                f"({row['images']:,} images, {row['overlays']} overlays): peak RSS {row['peak_rss_mib']:.0f} MiB "
                f"(budget {MEMORY_BUDGET_MIB} MiB), {row['wall_s']:.1f}s ({row['cpu_s']:.1f}s CPU, "
                f"{row['cpu_us_per_image']:.0f} µs per image), {calls} ECR calls, {states}"
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.reconcile``: the memory axis (peak RSS of the reconcile step); prints a line per shape."""
    parser = argparse.ArgumentParser(prog="python -m bench.reconcile", description=main.__doc__)
    parser.add_argument("--repositories", action="store_true", help="also the repositories axis (moto)")
    args = parser.parse_args(argv)
    rows = run_memory()
    if args.repositories:
        run_sizes((10, 100))
    over = [r for r in rows if r["peak_rss_mib"] > MEMORY_BUDGET_MIB]
    for r in rows:
        print(
            f"peak RSS {r['repositories']} × {r['images_per_repository']:,}: {r['peak_rss_mib']:.0f} MiB "
            f"({'within' if r not in over else 'OVER'} {MEMORY_BUDGET_MIB} MiB), {r['wall_s']:.1f}s, "
            f"{r['cpu_s']:.1f}s CPU"
        )
    return 1 if over else 0


__all__ = ["MEMORY_SHAPES", "PROJECT_ROOT", "main", "run_memory", "run_sizes"]

if __name__ == "__main__":
    raise SystemExit(main())

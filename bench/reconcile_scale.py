"""6. The reconcile sweep: what one sweep costs at 10 / 100 / 1,000 ECR repositories.

Each size gets its own ECR repositories in moto (``swN/svcNNNN``, two tags each) and one GitOps
repository (built with ``git fast-import``) holding two overlays per ECR repository: staging
(``mode: commit``) and production (``mode: pr``, ``provider: local``), one rule each with ``$1``.
A tenth of the overlays hold the older tag, so the sweep also looks at proposal branches. The sweep
runs as a user runs it — ``imagebump reconcile`` without ``--apply``: the rendered
``image-reconcile`` CronWorkflow through the local executor — and reports wall time, the reconcile
step's own time, ECR calls, Git calls and clones.

What should hold (and what the table shows): ECR calls = one listing page per 1,000 repositories
+ one DescribeImages per repository (linear); one clone per Git repository whatever the number of
overlays; time roughly linear in repositories.
"""

from __future__ import annotations

import secrets
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.testbed import BASE, PROJECT_ROOT, REGION, digest_of, fast_import, image_uri, overlay
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


def run_sweeps(
    sizes: tuple[int, ...] = (10, 100, 1000), *, reps: int = 1, concurrency: int = 8, log: Any = print
) -> list[dict[str, Any]]:
    """One world (moto + git server); per size: build, then ``reps`` dry-run sweeps."""
    from imagebump.local.git_server import GitHttpServer
    from imagebump.local.moto import moto_server
    from imagebump.local.stack import quiet_request_logs
    from imagebump.local.sweep import build_executor, run_sweep

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
                sweep = run_sweep(executor, apply=False, concurrency=concurrency, full=True)
                if sweep.message:
                    raise RuntimeError(f"the sweep at {n} repositories failed: {sweep.message}")
                runs.append(sweep)
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


__all__ = ["PROJECT_ROOT", "run_sweeps"]

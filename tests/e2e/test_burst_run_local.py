"""Acceptance (issue 12): ``imagebump run --local`` with only ``IMAGEBUMP_GIT_TOKEN`` lands a burst.

27 pushes of 27 images (ECR, through the project's EventBridge rule into its SQS queue) for 27
overlays of one repository, whose ``git http-backend`` remote wants the token for reads and for
writes. ``imagebump run --local`` runs as a user runs it: a new process whose environment holds
PATH, HOME, the endpoint (moto's), credentials and ``IMAGEBUMP_GIT_TOKEN`` — no region (the queue
URL, written as AWS writes it, names one, as in the README), no read token, no other ``IMAGEBUMP_*``.
Afterwards every overlay holds its new image, the queue and the dead-letter queue are empty, and
the token appears nowhere in what the command printed. The world is the demo's
(:func:`imagebump.local.world.build_world`) with the benchmark's overlay shape (:mod:`bench.testbed`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.testbed import BASE, KUSTOMIZATION
from imagebump.local import builders
from imagebump.local.drive import put_image
from imagebump.local.world import build_world
from tests.fixtures import ecr_clock

pytestmark = pytest.mark.slow

APPS = 27
REPO = "demo/burst"
OLD, NEW = "1.0.0", "1.0.1"


def _files(registry: str, prefix: str) -> dict[str, str]:
    files = {"README.md": "# burst\n"}
    for i in range(APPS):
        app = f"app{i:02d}"
        files[f"apps/{app}/base/kustomization.yaml"] = BASE
        files[f"apps/{app}/base/deployment.yaml"] = f"# {app}\n"
        files[f"apps/{app}/overlays/prod/kustomization.yaml"] = KUSTOMIZATION.format(
            image=f"{registry}/{prefix}/{app}", tag=OLD
        )
    return files


def _rules(registry: str, prefix: str, repo_url: str) -> str:
    return (
        f"- registryURI: {registry}/{prefix}/$1\n"
        f"  githubRepository: {repo_url}/apps/$1/overlays/prod\n"
        "  env: prod\n  mode: commit\n  provider: local\n"
    )


def test_run_local_with_only_the_write_token_lands_a_burst_of_27(moto, tmp_path: Path, request) -> None:
    with build_world(tmp_path, moto=moto) as world:
        prefix = world.repository.rsplit("/", 1)[0]  # the stack's EventBridge rule forwards this prefix
        repositories = [f"{prefix}/app{i:02d}" for i in range(APPS)]
        ecr = world.client("ecr")
        for name in repositories:
            ecr.create_repository(repositoryName=name)
        try:
            repo_url = world.git.create_repo(REPO, _files(world.registry, prefix))
            world.set_rules(_rules(world.registry, prefix, repo_url))
            for name in repositories:  # the image every overlay holds (push-time order looks it up)
                world.repository = name
                put_image(world, OLD)
            ecr_clock.advance()  # ECR push times have one-second resolution
            entries = []
            for name in repositories:
                world.repository = name
                digest = put_image(world, NEW)
                event = builders.ecr_push_event(name, digest, NEW, account=world.account, region=world.region)
                entries.append(builders.event_bridge_entry(event))
            events = world.client("events")
            for i in range(0, len(entries), 10):
                assert not events.put_events(Entries=entries[i : i + 10]).get("FailedEntryCount")

            # the queue's URL as AWS writes it (docs/local.md, "Run without a cluster"): it names the
            # region, so no AWS_REGION; moto's server answers for it through AWS_ENDPOINT_URL
            queue_name = world.queue_url.rsplit("/", 1)[1]
            queue_url = f"https://sqs.{world.region}.amazonaws.com/{world.account}/{queue_name}"
            started = time.monotonic()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "imagebump",
                    "run",
                    "--local",
                    "--queue-url",
                    queue_url,
                    "--rules",
                    str(world.rules_path),
                    "--concurrency",
                    "4",
                    "--wait-seconds",
                    "1",
                    "--max-events",
                    str(APPS),
                ],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=900,
                env={
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": str(tmp_path),
                    "LANG": "C.UTF-8",
                    "AWS_ENDPOINT_URL": moto.endpoint_url,
                    "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing",
                    "IMAGEBUMP_GIT_TOKEN": world.token,
                },
                check=False,
            )
            took = time.monotonic() - started

            assert proc.returncode == 0, proc.stderr[-3000:]
            progress = [line for line in proc.stdout.splitlines() if line.startswith("event ")]
            assert len(progress) == APPS, proc.stdout
            assert all("→ 1 target: prod committed " in line for line in progress), proc.stdout
            assert proc.stdout.splitlines()[-1].startswith(
                f"stopped: {APPS} received, {APPS} succeeded, 0 failed"
            )
            for i in range(APPS):
                text = world.git.git(REPO, "show", f"main:apps/app{i:02d}/overlays/prod/kustomization.yaml")
                assert f"newTag: {NEW}" in text, (i, text)
            subjects = world.git.git(REPO, "log", "--format=%s", "main").splitlines()
            assert len([s for s in subjects if s.startswith("imagebump(prod)")]) == APPS
            assert world.queue_depth() == 0 and world.queue_depth(world.dlq_url) == 0
            assert world.token not in proc.stdout + proc.stderr
            assert all(
                json.loads(line)["ts"] for line in proc.stderr.splitlines()
            )  # the log: JSON lines only
            request.node.user_properties.append(
                (
                    "summary",
                    f"run --local, only IMAGEBUMP_GIT_TOKEN: {APPS} pushes → {APPS} commits in {took:.1f}s",
                )
            )
        finally:
            for name in repositories:
                try:
                    ecr.delete_repository(repositoryName=name, force=True)
                except Exception:  # noqa: BLE001 - best-effort cleanup of the shared moto server
                    pass

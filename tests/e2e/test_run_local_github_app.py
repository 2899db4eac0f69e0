"""Acceptance (issue 26): ``imagebump run --local`` with only a GitHub App's settings.

No ``IMAGEBUMP_GIT_TOKEN`` and no read token: the App's id, private key file and installation id,
and the API URL. The command starts; edit-kustomize clones the private ``git http-backend`` remote
with the App's installation token, commit-pr (``commitMethod: api``, ``mode: pr``) creates each
commit through the git database API — Verified, as GitHub does for an installation token and no
author — and opens one pull request per overlay. The GitHub API is the fake
(tests/fixtures/github.py), minting as installation token the one the git remote accepts, so git
proves it read with it; its git database writes into the same bare repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.testbed import BASE, KUSTOMIZATION
from imagebump.local import builders
from imagebump.local.drive import put_image
from imagebump.local.world import build_world
from tests.fixtures import ecr_clock
from tests.fixtures.github import GitHubFake
from tests.steps.commit_pr.support import write_app_key

pytestmark = pytest.mark.slow

APPS = 3
REPO = "demo/verified"
OLD, NEW = "1.0.0", "1.0.1"


def test_run_local_with_only_the_github_app_reads_and_writes_as_the_app(moto, tmp_path: Path) -> None:
    write_app_key(tmp_path / "app.pem")
    with build_world(tmp_path, moto=moto) as world, GitHubFake() as fake:
        prefix = world.repository.rsplit("/", 1)[0]
        repositories = [f"{prefix}/app{i}" for i in range(APPS)]
        ecr = world.client("ecr")
        for name in repositories:
            ecr.create_repository(repositoryName=name)
        try:
            files = {"README.md": "# verified\n"}
            for i in range(APPS):
                files[f"apps/app{i}/base/kustomization.yaml"] = BASE
                files[f"apps/app{i}/overlays/prod/kustomization.yaml"] = KUSTOMIZATION.format(
                    image=f"{world.registry}/{prefix}/app{i}", tag=OLD
                )
            repo_url = world.git.create_repo(REPO, files)
            world.set_rules(
                f"- registryURI: {world.registry}/{prefix}/$1\n"
                f"  githubRepository: {repo_url}/apps/$1/overlays/prod\n"
                "  env: prod\n  mode: pr\n  provider: github\n  commitMethod: api\n  requireVerified: true\n"
            )
            fake.app_ids.add("777")
            fake.next_installation_token = world.token  # the one token the git remote accepts
            fake.serve_git(world.git)
            fake.ahead = lambda o, r, b, h: int(
                world.git.git(REPO, "rev-list", "--count", f"{b}..{h}").strip()
            )
            for name in repositories:
                world.repository = name
                put_image(world, OLD)
            ecr_clock.advance()  # ECR push times have one-second resolution
            entries = []
            for name in repositories:
                world.repository = name
                digest = put_image(world, NEW)
                event = builders.ecr_push_event(name, digest, NEW, account=world.account, region=world.region)
                entries.append(builders.event_bridge_entry(event))
            assert not world.client("events").put_events(Entries=entries).get("FailedEntryCount")

            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "imagebump",
                    "run",
                    "--local",
                    "--queue-url",
                    world.queue_url,
                    "--rules",
                    str(world.rules_path),
                    "--region",
                    world.region,
                    "--concurrency",
                    "3",
                    "--wait-seconds",
                    "1",
                    "--max-events",
                    str(APPS),
                    "--reconcile-every",
                    "0",
                ],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=600,
                env={
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": str(tmp_path),
                    "LANG": "C.UTF-8",
                    "AWS_ENDPOINT_URL": moto.endpoint_url,
                    "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing",
                    "IMAGEBUMP_GITHUB_API_URL": fake.url,
                    "IMAGEBUMP_GITHUB_APP_ID": "777",
                    "IMAGEBUMP_GITHUB_APP_INSTALLATION_ID": "42",
                    "IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE": str(tmp_path / "app.pem"),
                },
                check=False,
            )
            assert proc.returncode == 0, proc.stderr[-3000:]
            progress = [line for line in proc.stdout.splitlines() if line.startswith("event ")]
            assert len(progress) == APPS and all("pr-created" in line for line in progress), proc.stdout
            assert len(fake.open_pulls()) == APPS and fake.minted  # the App's token did it all
            assert all(c["verified"] and c["given"] == [] for c in fake.gitdb.commits_created)
            for pull in fake.pulls:
                app = pull.head.split("/")[2].split("-")[1]  # imagebump/prod/apps-appN-overlays-prod-…
                text = world.git.git(REPO, "show", f"{pull.head}:apps/{app}/overlays/prod/kustomization.yaml")
                assert f"newTag: {NEW}" in text
            assert world.token not in proc.stdout + proc.stderr
        finally:
            for name in repositories:
                try:
                    ecr.delete_repository(repositoryName=name, force=True)
                except Exception:  # noqa: BLE001 - best-effort cleanup of the shared moto server
                    pass

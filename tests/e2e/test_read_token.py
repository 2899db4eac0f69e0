"""The read token is optional, on both runtimes, set up with exactly what docs/install.md tells a user.

* **Cluster** ("Install on a cluster", step 4): the ``imagebump-git`` Secret exists; the
  ``imagebump-git-read`` Secret is optional ("private repositories"). The local executor runs the
  rendered WorkflowTemplate with only ``imagebump-git``: the optional Secret volume then mounts an
  empty directory, as on Kubernetes, while ``IMAGEBUMP_GIT_READ_TOKEN_FILE`` still points into it.
  A public repository is read anonymously; a private one fails edit-kustomize once (exit 2, no
  retry) with a message naming the Secret to create.
* **No cluster** ("Run without a cluster"): ``imagebump run --local`` as a new process whose
  environment holds only ``IMAGEBUMP_GIT_TOKEN`` (plus PATH and the AWS settings a user has);
  the remote requires the token for reads and writes. ``IMAGEBUMP_GIT_READ_TOKEN`` still
  overrides it for reads.

Real parts only: moto's server (ECR, EventBridge, SQS from the project's CloudFormation), a
``git http-backend`` remote with token auth, the rendered template, steps as processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from imagebump.local.demo_repo import PRODUCTION_PATH, STAGING_PATH
from imagebump.local.drive import push_image, run_until_done
from imagebump.local.outcome import target_results
from imagebump.local.world import World, build_world

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STAGING_FILE = f"{STAGING_PATH}/kustomization.yaml"
PRODUCTION_FILE = f"{PRODUCTION_PATH}/kustomization.yaml"
VISIBILITY = 3


def _cluster_secrets(world: World) -> dict[str, dict[str, str]]:
    """docs/install.md step 4: `kubectl -n imagebump create secret generic imagebump-git --from-file=token=…`."""
    return {"imagebump-git": {"token": world.token}}


def test_cluster_without_the_read_secret_reads_a_public_repository_anonymously(moto, tmp_path: Path) -> None:
    with build_world(tmp_path, moto=moto, anonymous_read=True) as world:
        world.set_step_secrets(_cluster_secrets(world))
        event_id = push_image(world, "1.4.2")

        report = run_until_done(world, 1, timeout=60, visibility_timeout=VISIBILITY)

        (outcome,) = report.outcomes
        assert outcome.event_id == event_id
        assert outcome.result.phase == "Succeeded", [(n.name, n.message) for n in outcome.result.nodes]
        actions = {t.env: t.action for t in target_results(outcome.result)}
        assert actions == {"staging": "committed", "production": "pr-created"}
        assert '"1.4.2"' in world.read(STAGING_FILE)
        assert world.queue_depth() == 0


def test_cluster_without_the_read_secret_refuses_a_private_repository_once_naming_the_secret(
    moto, tmp_path: Path
) -> None:
    with build_world(tmp_path, moto=moto) as world:
        world.set_step_secrets(_cluster_secrets(world))
        before = world.rev()
        push_image(world, "1.4.2")

        report = run_until_done(world, 1, timeout=60, visibility_timeout=VISIBILITY)

        (outcome,) = report.outcomes
        assert outcome.result.phase == "Failed"
        edits = outcome.result.nodes_for("edit-kustomize")
        assert len(edits) == 2  # staging and production
        for node in edits:
            # exit 2: the template's retryStrategy (`asInt(lastRetry.exitCode) != 2`) does not retry
            assert (node.phase, node.exit_code, node.attempts) == ("Failed", 2, 1), node
            assert "refused an anonymous read (HTTP 401)" in node.message
            assert "create secret generic imagebump-git-read" in node.message
        assert world.rev() == before  # nothing written
        assert report.stats.failed == 1 and world.queue_depth() == 1  # left for the redrive policy
        assert world.token not in repr(world.logs)


def _run_local(world: World, cwd: Path, **token_env: str) -> subprocess.CompletedProcess[str]:
    """``imagebump run --local`` with the environment a user has: PATH, HOME, AWS settings, tokens."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd),
        "LANG": "C.UTF-8",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        **token_env,
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "imagebump",
            "run",
            "--local",
            "--queue-url",
            world.queue_url,
            "--endpoint-url",
            world.moto.endpoint_url,
            "--region",
            world.region,
            "--rules",
            str(world.rules_path),
            "--wait-seconds",
            "1",
            "--visibility-timeout",
            str(VISIBILITY),
            "--max-events",
            "1",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_run_local_with_only_the_write_token_reads_a_private_repository(moto, tmp_path: Path) -> None:
    with build_world(tmp_path, moto=moto) as world:
        event_id = push_image(world, "1.4.2")

        proc = _run_local(world, tmp_path, IMAGEBUMP_GIT_TOKEN=world.token)

        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "staging committed" in proc.stdout and "production pr-created" in proc.stdout, proc.stdout
        assert '"1.4.2"' in world.read(STAGING_FILE)
        assert world.queue_depth() == 0 and world.queue_depth(world.dlq_url) == 0
        assert world.token not in proc.stdout + proc.stderr
        # stderr is the one JSON-line log: sensor, executor and the steps' own records
        records = [json.loads(line) for line in proc.stderr.splitlines()]
        assert {r["component"] for r in records} == {"sensor", "executor", "step"}
        (committed,) = [
            r for r in records if r["component"] == "step" and r["message"].startswith("committed ")
        ]
        assert committed["step"] == "commit-pr" and committed["event_id"] == event_id
        assert committed["target"].endswith("/" + STAGING_PATH)


def test_run_local_read_token_overrides_the_write_token_for_reads(moto, tmp_path: Path) -> None:
    with build_world(tmp_path, moto=moto) as world:
        push_image(world, "1.4.2")
        wrong = "wrong-read-token-" + "r" * 20

        proc = _run_local(world, tmp_path, IMAGEBUMP_GIT_TOKEN=world.token, IMAGEBUMP_GIT_READ_TOKEN=wrong)

        assert proc.returncode == 0, proc.stderr[-3000:]  # --max-events 1: the failed event was handled
        assert "staging edit-kustomize failed: exit code 2" in proc.stdout, proc.stdout
        assert "the git token was rejected" in proc.stderr  # the wrong read token was used, not the write one
        assert 'newTag: "1.4.1"' in world.read(STAGING_FILE)  # nothing written
        assert world.queue_depth() == 1  # left for the redrive policy
        assert wrong not in proc.stdout + proc.stderr and world.token not in proc.stdout + proc.stderr

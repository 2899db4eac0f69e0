"""Two workflows for two overlays of one repository, at once: neither sees the other's files.

The rendered ``image-update`` WorkflowTemplate runs twice concurrently through one
:class:`workflows.local.executor.LocalExecutor` (as the local sensor runs it), for two overlays of
the same Git repository, both ``mode: commit`` to the same branch. A ``pre-receive`` hook on the
real ``git http-backend`` remote holds both pushes until the test has looked: at that moment both
commit-pr steps are alive, each with a clone on disk, and the test inspects them from outside —
their directories, their processes' working directories and environments. Then it releases them.

Proven:

* while both run: two step directories, private (``0700``), disjoint; each process (the step
  and the git it runs) has its cwd, ``HOME`` and ``TMPDIR`` in its own directory and no
  environment value naming the other's; no overlay file is on disk at all (commit-pr's clone holds
  objects only: the plan carries the file), the commit each clone holds touches its own overlay
  and not the other's, and nothing in it resolves outside its own directory. (A step forked from the
  executor's warm interpreter shows that interpreter's start environment in ``/proc/PID/environ``;
  its own ``os.environ`` is checked in ``test_prefork.py``, and the git it runs, exec'd with it, here.)
* afterwards: both workflows succeeded, every step directory is gone, and the repository has one
  commit per overlay, each touching only its own overlay's file with its own image.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from imagebump.local import builders
from workflows.local.executor import LocalExecutor
from workflows.local.results import WorkflowResult
from workflows.local.sandbox import wait_deleted

ROOT = Path(__file__).resolve().parents[2]
IMAGE_UPDATE = ROOT / "manifests" / "workflows" / "image-update.yaml"
SERVICES = ("alpha", "beta")

HOLD_HOOK = """#!/bin/sh
# Hold the first pushes until the test releases them (at most 60s).
touch '{gate}/arrived-'$$
i=0
while [ ! -e '{gate}/release' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
exit 0
"""


def _push(ecr, repository: str, tag: str) -> str:
    digest = builders.digest_for(f"{repository}:{tag}")
    ecr.put_image(
        repositoryName=repository,
        imageManifest=builders.image_manifest(digest),
        imageTag=tag,
        imageDigest=digest,
    )
    return digest


def _processes_under(root: Path) -> dict[int, Path]:
    """Live processes whose cwd is inside ``root`` → that cwd."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if cwd == root or root in cwd.parents:
            found[int(entry.name)] = cwd
    return found


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = (Path("/proc") / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def _wait_for(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {seconds:.0f}s waiting for {what}")
        time.sleep(0.1)


@pytest.mark.slow
def test_concurrent_workflows_for_two_overlays_of_one_repository_never_share_files(
    moto, make_remote, git_token, tmp_path: Path
) -> None:
    prefix = f"iso-{uuid.uuid4().hex[:8]}"
    ecr = moto.client("ecr")
    images, events = {}, {}
    for service in SERVICES:
        repository = f"{prefix}/{service}"
        account = ecr.create_repository(repositoryName=repository)["repository"]["registryId"]
        images[service] = f"{account}.dkr.ecr.us-west-2.amazonaws.com/{repository}"
        _push(ecr, repository, "1.0.0")
        digest = _push(ecr, repository, "2.0.0")
        events[service] = builders.ecr_push_event(repository, digest, "2.0.0", account=account)
    files = {"README.md": "two overlays\n"}
    for service in SERVICES:
        files[f"services/{service}/base/kustomization.yaml"] = "resources: []\n"
        files[f"services/{service}/overlays/stg/kustomization.yaml"] = builders.kustomization(
            [(images[service], "1.0.0")]
        )
    remote = make_remote(files)
    gate = tmp_path / "gate"
    gate.mkdir()
    remote.install_hook("pre-receive", HOLD_HOOK.format(gate=gate))
    rules = (
        f"- githubRepository: {remote.url}/services/$1/overlays/stg\n"
        f"  registryURI: {account}.dkr.ecr.us-west-2.amazonaws.com/{prefix}/$1\n"
        "  env: stg\n  mode: commit\n  provider: local\n"
    )
    work_root = tmp_path / "steps"
    work_root.mkdir()
    logs: list[dict] = []
    executor = LocalExecutor(
        IMAGE_UPDATE,
        project_root=ROOT,
        log=logs.append,
        backoff_scale=0.01,
        work_root=work_root,
        secrets={"imagebump-git": {"token": git_token}, "imagebump-git-read": {"token": git_token}},
        configmaps={"imagebump-rules": {"rules.yaml": rules}},
        env={
            "AWS_ENDPOINT_URL": moto.endpoint_url,
            "AWS_REGION": "us-west-2",
            "AWS_DEFAULT_REGION": "us-west-2",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        },
    )
    results: dict[str, WorkflowResult] = {}

    def run(service: str) -> None:
        event = events[service]
        results[service] = executor.run(
            {"event": json.dumps(event)}, f"isolation-{service}", event_id=event["id"]
        )

    threads = [threading.Thread(target=run, args=(s,), name=f"wf-{s}") for s in SERVICES]
    for thread in threads:
        thread.start()
    try:
        _wait_for(
            lambda: len(list(gate.glob("arrived-*"))) >= 2 or len(results) == 2,
            180,
            "both commit-pr steps to reach their push",
        )
        assert len(results) < 2, {s: (r.phase, r.message) for s, r in results.items()}

        # --- both commit-pr steps are alive now, each holding a clone: look from outside ---------
        # the finished steps' directories go in the background (a low-priority rm, slow on a loaded
        # machine): once they are gone, what is left is the two live steps' own
        wait_deleted()
        step_dirs = sorted(p for p in work_root.iterdir())
        assert len(step_dirs) == 2, step_dirs
        assert all(p.stat().st_mode & 0o777 == 0o700 for p in step_dirs)
        processes = _processes_under(work_root)
        owner = {
            pid: next(d for d in step_dirs if cwd == d or d in cwd.parents) for pid, cwd in processes.items()
        }
        assert set(owner.values()) == set(step_dirs), "each step directory has its own live process"
        for pid, mine in owner.items():
            env = _environ(pid)
            if not env:
                continue  # it ended meanwhile
            other = next(d for d in step_dirs if d != mine)
            for key in ("HOME", "TMPDIR"):
                if key in env:
                    assert Path(env[key]) == mine or mine in Path(env[key]).parents, (pid, key, env[key])
            assert not [k for k, v in env.items() if str(other) in v], (
                pid,
                "names the other step's directory",
            )

        seen: dict[Path, set[str]] = {}
        for directory in step_dirs:
            on_disk, committed = set(), set()
            for path in directory.rglob("*"):
                if ".git" in path.relative_to(directory).parts:
                    continue
                real = path.resolve()
                assert real == directory.resolve() or directory.resolve() in real.parents, (path, real)
                if path.name == "kustomization.yaml" and "overlays" in path.parts:
                    on_disk.add(path.parts[path.parts.index("overlays") - 1])
            # commit-pr's clone is objects-only (the plan carries the file): no overlay on disk; the
            # commit it holds in the push names what it touched
            assert not on_disk, (directory, on_disk)
            for git_dir in directory.rglob(".git"):
                changed = subprocess.run(
                    ["git", "diff-tree", "-r", "--name-only", "--no-commit-id", "HEAD"],
                    cwd=git_dir.parent,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.split()
                committed |= {Path(f).parts[Path(f).parts.index("overlays") - 1] for f in changed}
            seen[directory] = committed
        assert sorted(tuple(sorted(s)) for s in seen.values()) == [("alpha",), ("beta",)], seen
    finally:
        (gate / "release").touch()
        for thread in threads:
            thread.join(timeout=180)

    # --- afterwards: both landed, each only its own change; nothing left on disk ------------------
    for service in SERVICES:
        result = results[service]
        failed = [
            (n.name, n.phase, n.message) for n in result.nodes if n.phase not in ("Succeeded", "Skipped")
        ]
        assert result.phase == "Succeeded", failed
        assert result.node(".commit-pr").outputs["action"] == "committed"
    wait_deleted()  # step dirs go in the background, as pods are garbage-collected
    assert list(work_root.iterdir()) == []
    shas = remote.git("rev-list", "--first-parent", "main").split()[:2]
    touched = {}
    for sha in shas:
        (path,) = remote.git("show", "--format=", "--name-only", sha).split()
        service = path.split("/")[1]
        touched[service] = path
        text = remote.read(path, sha)
        assert f"name: {images[service]}\n  newTag: 2.0.0" in text
    assert touched == {s: f"services/{s}/overlays/stg/kustomization.yaml" for s in SERVICES}
    assert git_token not in json.dumps(logs)

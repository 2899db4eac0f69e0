"""Isolation (issue 8, item 3, step level): concurrent runs for two overlays never share files.

Two edit-kustomize → commit-pr runs for different overlays of ONE repository run at the same time,
each step as its own process through Hera's runner (as in its pod), with the same ``TMPDIR`` and
the same working directory. A ``pre-receive`` hook on the real git remote holds both pushes until
the test has looked: at that moment both commit-pr processes are mid-run, and the test proves

- each run has its own scratch directory (distinct, mode 0700; commit-pr's clone has no work tree,
  and the commit it holds changes only its own overlay);
- every scratch directory ever seen under ``TMPDIR`` (a watcher records them) was private;
- afterwards ``TMPDIR`` and the shared working directory are empty (scratch removed, nothing
  written beside it), and each branch on the remote changes only its own overlay.

A static check adds that no step module names a fixed ``/tmp`` path (the one allowed is the
outputs directory default, which is the pod's own ``/tmp`` emptyDir).
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path

from imagebump.local import builders
from steps.domain.models import Target

ROOT = Path(__file__).resolve().parents[3]
REGISTRY = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
OVERLAYS = ("apps/api/overlays/prod", "apps/web/overlays/prod")
SCRATCH_PREFIXES = ("edit-kustomize-", "imagebump-commit-pr-")
#: The file ``tempfile.gettempdir()`` writes and deletes once per process to test a directory
#: (``tempfile._get_default_tempdir``: 8 characters of ``_RandomNameSequence``, no prefix).
TEMPFILE_PROBE = re.compile(r"[a-z0-9_]{8}")
DEADLINE = 120  # seconds: generous upper bound for a step process; never a timing assertion

HOOK = """#!/bin/sh
# Hold each push until the test writes {release} (bounded: 60 s), announcing arrival first.
cat >/dev/null
touch "{barrier}/arrived.$$"
i=0
while [ ! -e "{release}" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
exit 0
"""


def run_step(
    module: str, params: dict[str, str], *, env: dict[str, str], cwd: Path, outputs: Path, args_file: Path
) -> dict[str, str]:
    """One step as a pod runs it; returns its output parameters."""
    args_file.write_text(json.dumps([{"name": k, "value": v} for k, v in params.items()]))
    proc = subprocess.run(
        [sys.executable, "-m", "hera.workflows.runner", "-e", f"steps.{module}:run", str(args_file)],
        cwd=cwd,
        env={**env, "hera__outputs_directory": str(outputs)},
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert proc.returncode == 0, f"{module}: {proc.stderr}"
    return {p.name: p.read_text() for p in (outputs / "parameters").iterdir()}


class Watcher(threading.Thread):
    """Records every entry that appears directly under ``directory``, with its mode."""

    def __init__(self, directory: Path) -> None:
        super().__init__(daemon=True)
        self.directory = directory
        self.seen: dict[str, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for entry in os.scandir(self.directory):
                try:
                    self.seen.setdefault(entry.name, entry.stat(follow_symlinks=False).st_mode)
                except FileNotFoundError:  # removed between listing and stat
                    pass
            self.stop.wait(0.005)


def test_concurrent_runs_for_two_overlays_are_isolated(make_remote, git_token, tmp_path) -> None:
    files = {"README.md": "# gitops\n"}
    for overlay, name in zip(OVERLAYS, ("api", "web")):
        files[f"{overlay}/kustomization.yaml"] = builders.kustomization([(f"{REGISTRY}/team/{name}", "1.0")])
        files[f"{overlay.rsplit('/', 2)[0]}/base/kustomization.yaml"] = "resources: []\n"
    remote = make_remote(files)
    main_before = remote.rev()
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    release = barrier / "release"
    remote.install_hook("pre-receive", HOOK.format(barrier=barrier, release=release))

    shared_tmp = tmp_path / "TMPDIR"
    shared_cwd = tmp_path / "cwd"
    home = tmp_path / "home"
    for d in (shared_tmp, shared_cwd, home):
        d.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IMAGEBUMP_", "hera__"))}
    env.update(
        PYTHONPATH=str(ROOT),
        TMPDIR=str(shared_tmp),
        HOME=str(home),
        IMAGEBUMP_GIT_TOKEN=git_token,
        IMAGEBUMP_GIT_READ_TOKEN=git_token,
    )

    results: dict[str, dict[str, str]] = {}
    errors: list[BaseException] = []

    def one_run(index: int) -> None:
        overlay, name = OVERLAYS[index], ("api", "web")[index]
        private = tmp_path / f"run{index}"  # per-run outputs: the pod's own /tmp/hera-outputs
        private.mkdir()
        target = Target(
            rule=index,
            repo_url=remote.url,
            path=overlay,
            env="prod",
            image=f"{REGISTRY}/team/{name}",
            tag=f"2.{index}",
            order="none",
            mode="pr",
            provider="local",
        )
        try:
            planned = run_step(
                "edit_kustomize.step",
                {"target": target.model_dump_json()},
                env=env,
                cwd=shared_cwd,
                outputs=private / "edit",
                args_file=private / "edit.json",
            )
            assert planned["changed"] == "true"
            results[overlay] = run_step(
                "commit_pr.step",
                {"target": target.model_dump_json(), "plan": planned["plan"]},
                env=env,
                cwd=shared_cwd,
                outputs=private / "commit",
                args_file=private / "commit.json",
            )
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    watcher = Watcher(shared_tmp)
    watcher.start()
    threads = [threading.Thread(target=one_run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        # Both commit-pr processes are now held in their push: look at their scratch directories.
        while len(list(barrier.glob("arrived.*"))) < 2:
            assert all(t.is_alive() for t in threads), errors
            threads[0].join(0.05)
        scratch = sorted(p for p in shared_tmp.iterdir() if p.name.startswith("imagebump-commit-pr-"))
        assert len(scratch) == 2 and scratch[0] != scratch[1]
        owners = {}
        for directory in scratch:
            assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
            # commit-pr's clone is objects-only (the plan carries the file): no overlay on disk at all,
            # and the commit held in the push changes this run's overlay only
            present = [o for o in OVERLAYS if (directory / "repo" / o / "kustomization.yaml").exists()]
            assert present == [], f"{directory.name} has {present} on disk: commit-pr needs no work tree"
            committed = subprocess.run(
                ["git", "diff-tree", "-r", "--name-only", "--no-commit-id", "HEAD"],
                cwd=directory / "repo",
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            mine = [o for o in OVERLAYS if committed == [f"{o}/kustomization.yaml"]]
            assert len(mine) == 1, (
                f"{directory.name} commits {committed}: a run must touch only its own overlay"
            )
            owners[mine[0]] = directory
        assert set(owners) == set(OVERLAYS)
    finally:
        release.write_text("go")
        for t in threads:
            t.join(DEADLINE)
        watcher.stop.set()
        watcher.join(5)
    assert not errors, errors

    # every scratch directory ever seen was one of ours, private, and is gone now
    assert watcher.seen, "the watcher saw no scratch directory"
    for name, mode in watcher.seen.items():
        if stat.S_ISREG(mode) and TEMPFILE_PROBE.fullmatch(name):
            continue  # Python's tempfile checks TMPDIR is writable with such a file, then removes it
        assert name.startswith(SCRATCH_PREFIXES), f"unexpected entry in TMPDIR: {name}"
        assert stat.S_ISDIR(mode) and stat.S_IMODE(mode) == 0o700, f"{name}: mode {oct(mode)}"
    assert sum(n.startswith("edit-kustomize-") for n in watcher.seen) <= 2
    assert list(shared_tmp.iterdir()) == [], "scratch left behind in TMPDIR"
    assert list(shared_cwd.iterdir()) == [], "a step wrote into its working directory"

    # each run proposed exactly its own overlay; the base branch is untouched
    assert remote.rev() == main_before
    for index, overlay in enumerate(OVERLAYS):
        out = results[overlay]
        assert out["action"] == "pr-created", out
        branch = out["branch"]
        assert f'newTag: "2.{index}"' in remote.read(f"{overlay}/kustomization.yaml", ref=branch)
        other = OVERLAYS[1 - index]
        assert remote.read(f"{other}/kustomization.yaml", ref=branch) == remote.read(
            f"{other}/kustomization.yaml"
        )
        changed = remote.git("diff", "--name-only", main_before, branch).split()
        assert changed == [f"{overlay}/kustomization.yaml"]


def test_step_modules_name_no_fixed_tmp_path() -> None:
    """Scratch comes from ``tempfile`` (which honours TMPDIR); no step hard-codes a /tmp path."""
    allowed = {"steps/runtime/harness.py"}  # DEFAULT_OUTPUTS_DIRECTORY: the pod's own /tmp emptyDir
    offenders = []
    for path in sorted((ROOT / "steps").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(r"""["']/tmp(/|["'])""", code) and rel not in allowed:
                offenders.append(f"{rel}:{lineno}: {line.strip()}")
            # steps/runtime/scratch_dir.py: the one maker of scratch directories; it deletes them (or leaves them
            # inside the TMPDIR the runtime deletes after the step: tests/steps/runtime/test_warm_path.py)
            if rel != "steps/runtime/scratch_dir.py" and re.search(
                r"\bmkdtemp\(|\bmktemp\(|NamedTemporaryFile\(.*delete=False", code
            ):
                offenders.append(f"{rel}:{lineno}: {line.strip()}")
    assert offenders == []

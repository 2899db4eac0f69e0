"""The benchmark world: moto (ECR + SQS), a real ``git http-backend`` remote, rules, executor, sensor.

Everything runs on 127.0.0.1 inside one temporary directory: :func:`open_world` starts moto's
server and a :class:`imagebump.local.git_server.GitHttpServer`, creates the Git repositories the
scenarios need (built with ``git fast-import`` straight into the bare repositories, so a
50,000-file repository takes seconds), the ECR repositories, one SQS queue, one rules file, and a
:class:`workflows.local.executor.LocalExecutor` over the rendered ``image-update`` template — the
very YAML a cluster gets. Events go onto the queue as raw EventBridge events (what the SQS
EventSource sees); :class:`bench.sensor_loop.SensorLoop` drains it.

Reads: ``manifests/workflows/image-update.yaml``. Writes: only under the world's temporary
directory. Nothing here asserts on time.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagebump.local import builders
from workflows import names

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = names.rendered_file(names.IMAGE_UPDATE, PROJECT_ROOT)
REGION = "us-west-2"
OWNER = "bench"
MONOREPO = f"{OWNER}/monorepo"
#: The overlay every monorepo app has: ``apps/appNN/overlays/prod``.
OVERLAY = "apps/{app}/overlays/prod"
INITIAL_TAG = "0.0.0"

#: An app's base; its overlay is :func:`overlay` (both from the shared builder).
BASE = builders.kustomization(resources=["deployment.yaml"])


def overlay(*, image: str, tag: str) -> str:
    """An app overlay: ``../../base`` with one ``images`` entry."""
    return builders.kustomization([(image, tag)])


#: The overlay as a ``str.format`` template (``{image}``, ``{tag}``): kept for
#: tests/e2e/test_burst_run_local.py until it calls :func:`overlay`; the same text.
KUSTOMIZATION = overlay(image="IMAGE", tag="TAG").replace("IMAGE", "{image}").replace("TAG", "{tag}")


def app_name(i: int) -> str:
    return f"app{i:02d}"


def filler(i: int) -> str:
    """A small, distinct file (a ConfigMap-like YAML) so the repository has real objects."""
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: filler-{i}\n"
        f'data:\n  index: "{i}"\n  note: benchmark padding file {i}\n'
    )


def fast_import(git_dir: Path, files: dict[str, str], message: str, branch: str = "main") -> None:
    """One commit holding ``files`` (replacing the tree) on ``branch`` of a bare repository."""
    chunks: list[bytes] = []
    msg = message.encode()
    chunks.append(f"commit refs/heads/{branch}\n".encode())
    chunks.append(b"committer Bench <bench@example.com> 1764000000 +0000\n")
    chunks.append(f"data {len(msg)}\n".encode() + msg + b"\n")
    chunks.append(b"deleteall\n")
    for path, text in files.items():
        data = text.encode()
        chunks.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
    chunks.append(b"\n")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(git_dir),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "LC_ALL": "C",
    }
    subprocess.run(
        ["git", "--git-dir", str(git_dir), "fast-import", "--quiet", "--force"],
        input=b"".join(chunks),
        env=env,
        check=True,
        capture_output=True,
    )


def repo_files(
    n_files: int, apps: list[str], account: str, extra_overlays: dict[str, str] | None = None
) -> dict[str, str]:
    """A monorepo tree of exactly ``n_files`` files: one base + one prod overlay per app, then padding."""
    files: dict[str, str] = {"README.md": "# benchmark monorepo\n"}
    for app in apps:
        files[f"apps/{app}/base/kustomization.yaml"] = BASE
        files[f"apps/{app}/base/deployment.yaml"] = f"# {app}\n"
        files[f"{OVERLAY.format(app=app)}/kustomization.yaml"] = overlay(
            image=image_uri(account, f"mono/{app}"), tag=INITIAL_TAG
        )
    for path, image in (extra_overlays or {}).items():
        files[f"{path}/kustomization.yaml"] = overlay(image=image, tag=INITIAL_TAG)
    i = 0
    while len(files) < n_files:
        files[f"padding/dir{i // 100:04d}/file{i:06d}.yaml"] = filler(i)
        i += 1
    return files


def image_uri(account: str, repository: str) -> str:
    return f"{account}.dkr.ecr.{REGION}.amazonaws.com/{repository}"


def digest_of(repository: str, tag: str) -> str:
    return builders.digest_for(f"{repository}:{tag}")


def ecr_event(account: str, repository: str, tag: str, digest: str) -> dict[str, Any]:
    """The raw EventBridge event of an ECR push (the SQS message body)."""
    return builders.ecr_push_event(repository, digest, tag, account=account, region=REGION)


@dataclass
class World:
    """Handles to everything a scenario needs (see :func:`open_world`)."""

    root: Path
    git: Any  # GitHttpServer
    moto: Any  # MotoServer
    token: str
    account: str
    apps: list[str]
    queue_url: str
    rules_text: str
    step_env: dict[str, str]
    ecr: Any
    sqs: Any
    events: Any
    sizes: dict[int, str] = field(default_factory=dict)  # n_files -> owner/repo
    _tags: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def monorepo_url(self) -> str:
        return self.git.url(MONOREPO)

    def next_tag(self, repository: str) -> str:
        """A fresh, increasing tag for ``repository`` (1.0.1, 1.0.2, …)."""
        with self._lock:
            n = self._tags.get(repository, 0) + 1
            self._tags[repository] = n
        return f"1.0.{n}"

    def push_image(self, repository: str, tag: str | None = None) -> tuple[str, str]:
        """``put_image`` into moto's ECR; returns (tag, digest)."""
        tag = tag or self.next_tag(repository)
        digest = digest_of(repository, tag)
        self.ecr.put_image(
            repositoryName=repository,
            imageManifest=builders.image_manifest(digest),
            imageTag=tag,
            imageDigest=digest,
        )
        return tag, digest

    def event_for(self, repository: str) -> dict[str, Any]:
        """Push a new image to ECR and return its push event (not yet sent)."""
        tag, digest = self.push_image(repository)
        return ecr_event(self.account, repository, tag, digest)

    def send(self, events: list[dict[str, Any]]) -> None:
        """Send push events through EventBridge (``put_events``, 10 a call); its rule routes them to SQS.

        Each event's ``id`` is replaced by the id EventBridge assigns (the one the SQS body carries).
        """
        events_client = self.events
        for i in range(0, len(events), 10):
            batch = events[i : i + 10]
            response = events_client.put_events(Entries=[builders.event_bridge_entry(e) for e in batch])
            if response.get("FailedEntryCount"):
                raise RuntimeError(f"EventBridge refused events: {response['Entries']}")
            for e, entry in zip(batch, response["Entries"]):
                e["id"] = entry["EventId"]

    def executor(
        self,
        *,
        template_text: str | None = None,
        extra_env: dict[str, str] | None = None,
        log: Any = None,
        prefork: bool | None = None,
    ) -> Any:
        """A LocalExecutor over the rendered template (or a variant of its text).

        ``prefork``: as :class:`LocalExecutor` (default on: steps forked from a warm interpreter);
        False starts every step as a new Python process (the "before" of ``bench.waste``).

        Its workflow parameters are those ``imagebump run --local`` gives without ``--argocd-context``
        (:func:`imagebump.local.live.live_parameters`): this world has no Argo CD, so ``verify-live``
        is ``false`` and the verify-live and notify-verifying steps are skipped, as in every local run
        without one (they ran before and answered "not configured": two processes per event that no
        real configuration starts).
        """
        from imagebump.local.live import apply_live, live_parameters
        from workflows.local.executor import LocalExecutor

        work = self.root / "steps"
        work.mkdir(exist_ok=True)
        executor = LocalExecutor(
            template_text if template_text is not None else TEMPLATE,
            project_root=PROJECT_ROOT,
            secrets={names.GIT_SECRET: {"token": self.token}, names.GIT_READ_SECRET: {"token": self.token}},
            configmaps={names.RULES_CONFIGMAP: {names.RULES_KEY: self.rules_text}},
            env={**self.step_env, **(extra_env or {})},
            log=log or (lambda record: None),
            work_root=work,
            prefork=prefork,
        )
        return apply_live(executor, live_parameters(None))

    def git_auth(self) -> Any:
        from steps.git import GitAuth

        return GitAuth(self.token)


def _rules(world_url: str, size_repos: dict[int, str], account: str, base_url: str) -> str:
    host = f"{account}.dkr.ecr.{REGION}.amazonaws.com"
    lines = [
        "# monorepo: every mono/<app> image updates apps/<app>/overlays/prod (commit mode)",
        f"- registryURI: {host}/mono/$1",
        f"  githubRepository: {world_url}/apps/$1/overlays/prod",
        "  env: prod",
        "  mode: commit",
        "  provider: local",
        "# pull-request mode (provider local: the pushed branch is the proposal)",
        f"- registryURI: {host}/prmode/$1",
        f"  githubRepository: {world_url}/apps/$1/overlays/prod",
        "  env: prod",
        "  mode: pr",
        "  provider: local",
    ]
    for n, owner_repo in sorted(size_repos.items()):
        lines += [
            f"- registryURI: {host}/size/f{n}",
            f"  githubRepository: {base_url}/{owner_repo}/apps/app00/overlays/prod",
            "  env: prod",
            "  mode: commit",
            "  provider: local",
        ]
    return "\n".join(lines) + "\n"


@contextmanager
def open_world(
    *,
    apps: int = 20,
    monorepo_files: int = 5000,
    sizes: tuple[int, ...] = (),
    pr_apps: int = 1,
    log: Any = print,
) -> Iterator[World]:
    """Start the services and build the repositories, ECR repositories, queue and rules.

    Args:
        apps: overlays in the monorepo (``apps/app00`` …), each with its own ECR repository ``mono/appNN``.
        monorepo_files: total files in the monorepo (padding fills up to it).
        sizes: extra one-overlay repositories of these file counts (growth scenario), ECR ``size/f<N>``.
        pr_apps: overlays ``apps/prNN`` updated in PR mode (ECR ``prmode/prNN``).
        log: progress printer.
    """
    from imagebump.local.git_server import GitHttpServer
    from imagebump.local.moto import moto_server
    from imagebump.local.stack import deploy_stack, quiet_request_logs

    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="imagebump-bench-")))
        token = "bench-" + secrets.token_hex(16)
        t0 = time.monotonic()
        moto = stack.enter_context(moto_server(REGION))
        stack.enter_context(quiet_request_logs())
        server = stack.enter_context(GitHttpServer(root / "remotes", token))
        ecr = moto.client("ecr")
        sqs = moto.client("sqs")
        app_names = [app_name(i) for i in range(apps)]
        pr_names = [f"pr{i:02d}" for i in range(pr_apps)]
        for name in (
            [f"mono/{a}" for a in app_names]
            + [f"prmode/{p}" for p in pr_names]
            + [f"size/f{n}" for n in sizes]
        ):
            ecr.create_repository(repositoryName=name)
        described = ecr.describe_repositories(repositoryNames=[f"mono/{app_names[0]}"])
        account = described["repositories"][0]["registryId"]

        server.create_repo(MONOREPO, {"README.md": "init\n"})
        extra = {OVERLAY.format(app=p): image_uri(account, f"prmode/{p}") for p in pr_names}
        files = repo_files(monorepo_files, app_names, account, extra)
        for p in pr_names:
            files[f"apps/{p}/base/kustomization.yaml"] = BASE
        fast_import(server.bare_path(MONOREPO), files, "benchmark monorepo")
        size_repos: dict[int, str] = {}
        for n in sizes:
            owner_repo = f"{OWNER}/size-{n}"
            server.create_repo(owner_repo, {"README.md": "init\n"})
            f = repo_files(n, [], account, {OVERLAY.format(app="app00"): image_uri(account, f"size/f{n}")})
            f["apps/app00/base/kustomization.yaml"] = BASE
            fast_import(server.bare_path(owner_repo), f, f"benchmark repository of {n} files")
            size_repos[n] = owner_repo
        # Every overlay starts at INITIAL_TAG, which ECR has (push-time order looks it up).
        world_url = server.url(MONOREPO)
        # The AWS side as deployed: the project's CloudFormation (queue, DLQ, EventBridge rule).
        _, outputs = deploy_stack(moto, f"bench-{uuid.uuid4().hex[:6]}")
        queue_url = outputs["QueueUrl"]
        world = World(
            root=root,
            git=server,
            moto=moto,
            token=token,
            account=account,
            apps=app_names,
            queue_url=queue_url,
            rules_text=_rules(world_url, size_repos, account, server.base_url),
            step_env={
                "AWS_ENDPOINT_URL": moto.endpoint_url,
                "AWS_REGION": REGION,
                "AWS_DEFAULT_REGION": REGION,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
            },
            ecr=ecr,
            sqs=sqs,
            events=moto.client("events"),
            sizes=size_repos,
        )
        world.pr_apps = pr_names  # type: ignore[attr-defined]
        os.environ.update(world.step_env)  # in-process probes (steps.aws.ecr) reach moto like the steps do
        for name in (
            [f"mono/{a}" for a in app_names]
            + [f"prmode/{p}" for p in pr_names]
            + [f"size/f{n}" for n in sizes]
        ):
            world.push_image(name, INITIAL_TAG)
        log(
            f"world ready in {time.monotonic() - t0:.1f}s: monorepo {monorepo_files} files / {apps} overlays"
            + (f", size repos {list(sizes)}" if sizes else "")
        )
        yield world


def python_env() -> dict[str, str]:
    """The environment a step process gets from the local executor (minus secrets), for probes."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(PROJECT_ROOT),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": tempfile.gettempdir(),
    }


PYTHON = sys.executable

"""The chaos test's world, its fault injection, its sensor processes and its bookkeeping.

World (all real, on 127.0.0.1): moto's server (ECR repositories and images, an EventBridge bus
whose rule routes ECR push events to an SQS queue with a DLQ), one Git repository served by
``git http-backend`` (:class:`imagebump.local.git_server.GitHttpServer` with ``fail_rate``) holding
N overlays, and the GitHub API fake (:class:`tests.fixtures.github.GitHubFake`, here
:class:`FlakyGitHub`: a fraction of requests fail with a 5xx, some after the change landed).

Pure helpers (:func:`monotonic_violations`, :func:`ref_chains`, :func:`classify`) do the judging;
the test module wires them and asserts.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from imagebump.local import builders
from tests.fixtures import ecr_clock
from tests.fixtures.github import GitHubFake

ROOT = Path(__file__).resolve().parents[2]
ZERO = "0" * 40
REGION = "us-west-2"


# ---------------------------------------------------------------------------------------------
# Fault injection for the GitHub fake
# ---------------------------------------------------------------------------------------------


class FlakyGitHub(GitHubFake):
    """The GitHub fake with ``fail_rate`` of requests failing transiently (seeded, repeatable).

    Two thirds of the faults answer 502 before doing anything; for writes (POST/PATCH) the other
    third does the work and then answers 502 — the response lost on the way back, which a retry
    must tolerate (e.g. a PR created twice must be adopted, not duplicated).
    """

    def __init__(self, tokens: set[str], fail_rate: float, seed: int = 0) -> None:
        super().__init__(tokens)
        self.fail_rate = fail_rate
        self._rng = random.Random(seed)
        self.injected: Counter[str] = Counter()

    def handle(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, auth: str | None
    ) -> tuple[int, dict[str, str], Any]:
        with self._lock:
            roll = self._rng.random()
            late = self._rng.random() < 1 / 3
        error = {"message": "Server Error (injected)", "documentation_url": "https://docs.github.com/rest"}
        if roll < self.fail_rate and not (late and method in ("POST", "PATCH")):
            self.injected["before"] += 1
            return 502, {}, error
        status, headers, payload = super().handle(method, path, query, body, auth)
        if roll < self.fail_rate:
            self.injected["after"] += 1
            return 502, {}, error
        return status, headers, payload


# ---------------------------------------------------------------------------------------------
# The world
# ---------------------------------------------------------------------------------------------


@dataclass
class Pushed:
    """One image pushed to ECR: ``seq`` is its place in the repository's push order (0 = first)."""

    repository: str
    tag: str
    digest: str
    seq: int
    pushed_at: datetime | None = None


@dataclass
class Overlay:
    name: str  # svc-NN
    group: str  # commit | ghpr | localpr
    repository: str  # ECR repository name
    image: str  # ECR repository URI (the images[].name in the kustomization)
    path: str  # overlay directory in the Git repository
    images: list[Pushed] = field(default_factory=list)  # images[0] is what the overlay starts with

    @property
    def file(self) -> str:
        return f"{self.path}/kustomization.yaml"

    @property
    def mode(self) -> str:
        return "commit" if self.group == "commit" else "pr"

    def seq_of(self, tag: str | None) -> int:
        for image in self.images:
            if image.tag == tag:
                return image.seq
        raise KeyError(f"{self.name}: tag {tag!r} was never pushed")

    @property
    def newest(self) -> Pushed:
        return self.images[-1]


@dataclass
class Delivery:
    """One put_events entry: the image, whether it is the second copy, and EventBridge's id."""

    overlay: Overlay
    image: Pushed
    copy: int  # 1, or 2 for a duplicate delivery
    event_id: str = ""


def group_of(index: int) -> str:
    """Of every ten overlays 4 commit, 3 PR through GitHub, 3 PR with the local provider.

    Interleaved, so that the first overlays (the ones that get an extra push when the event
    count does not divide evenly) cover every group.
    """
    return ("commit", "ghpr", "localpr", "commit", "ghpr", "localpr", "commit", "ghpr", "localpr", "commit")[
        index % 10
    ]


def rules_yaml(account: str, prefix: str, repo_url: str) -> str:
    """One rule per group; ``$1`` carries the service name from ECR repository to overlay path."""
    registry = f"{account}.dkr.ecr.{REGION}.amazonaws.com/{prefix}"
    return (
        f"- githubRepository: {repo_url}/services/$1/overlays/stg\n"
        f"  registryURI: {registry}/commit/$1\n"
        "  env: stg\n  mode: commit\n  provider: local\n"
        f"- githubRepository: {repo_url}/services/$1/overlays/stg\n"
        f"  registryURI: {registry}/ghpr/$1\n"
        "  env: stg\n  mode: pr\n  provider: github\n  labels:\n  - imagebump\n"
        f"- githubRepository: {repo_url}/services/$1/overlays/stg\n"
        f"  registryURI: {registry}/localpr/$1\n"
        "  env: stg\n  mode: pr\n  provider: local\n  order: semver\n"
    )


def _next_second() -> None:
    """moto stamps imagePushedAt in whole seconds: later pushes get a later one (injected, no wait)."""
    ecr_clock.advance()


def push_images(ecr: Any, overlays: list[Overlay], per_overlay: list[int]) -> str:
    """Create the repositories and push ``1.0.0`` then ``1.0.1 …`` (one round per second).

    Returns the registry account. Push times are read back and must be strictly increasing per
    repository (the test's notion of "newer" is ECR's).
    """
    account = ""
    for overlay in overlays:
        reply = ecr.create_repository(repositoryName=overlay.repository)
        account = reply["repository"]["registryId"]
    for round_ in range(max(per_overlay) + 1):
        for overlay, count in zip(overlays, per_overlay):
            if round_ > count:
                continue
            tag = f"1.0.{round_}"
            digest = builders.digest_for(f"{overlay.repository}:{tag}")
            ecr.put_image(
                repositoryName=overlay.repository,
                imageManifest=builders.image_manifest(digest),
                imageTag=tag,
                imageDigest=digest,
            )
            overlay.images.append(Pushed(overlay.repository, tag, digest, round_))
        _next_second()
    for overlay in overlays:
        details = ecr.describe_images(repositoryName=overlay.repository)["imageDetails"]
        at = {d["imageDigest"]: d["imagePushedAt"] for d in details}
        for image in overlay.images:
            image.pushed_at = at[image.digest]
        times = [image.pushed_at for image in overlay.images]
        assert all(a < b for a, b in zip(times, times[1:])), f"{overlay.repository}: push times {times}"
    return account


def plan_deliveries(overlays: list[Overlay], duplicate_share: float, rng: random.Random) -> list[Delivery]:
    """Every pushed image (not the initial one) once, ``duplicate_share`` of them twice, shuffled.

    Then, for every overlay with two or more pushes, the first delivery of its newest image is
    moved before the first delivery of its oldest, so an older image always arrives after a newer.
    """
    deliveries = [Delivery(o, image, 1) for o in overlays for image in o.images[1:]]
    twice = rng.sample(deliveries, round(len(deliveries) * duplicate_share))
    deliveries += [Delivery(d.overlay, d.image, 2) for d in twice]
    rng.shuffle(deliveries)
    for o in overlays:
        if len(o.images) < 3:
            continue
        mine = [i for i, d in enumerate(deliveries) if d.overlay is o and d.copy == 1]
        oldest = min(mine, key=lambda i: deliveries[i].image.seq)
        newest = max(mine, key=lambda i: deliveries[i].image.seq)
        if newest > oldest:
            deliveries[oldest], deliveries[newest] = deliveries[newest], deliveries[oldest]
    return deliveries


def late_older(deliveries: list[Delivery]) -> int:
    """How many deliveries arrive after a delivery of a newer image for the same overlay."""
    newest_seen: dict[str, int] = {}
    late = 0
    for d in deliveries:
        if d.image.seq < newest_seen.get(d.overlay.name, -1):
            late += 1
        newest_seen[d.overlay.name] = max(newest_seen.get(d.overlay.name, -1), d.image.seq)
    return late


def event_entry(d: Delivery, bus: str) -> dict[str, Any]:
    """The put_events entry AWS ECR would emit for this push, on ``bus``, at its push time."""
    event = builders.ecr_push_event(d.image.repository, d.image.digest, d.image.tag)
    return {**builders.event_bridge_entry(event), "EventBusName": bus, "Time": d.image.pushed_at}


@dataclass
class Queues:
    sqs: Any
    url: str
    dlq_url: str

    def depth(self, url: str | None = None) -> int:
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=url or self.url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    def drain_dlq(self) -> list[dict[str, Any]]:
        """Every dead-lettered event (bodies parsed), removing them."""
        out: list[dict[str, Any]] = []
        while True:
            msgs = (
                self.sqs.receive_message(
                    QueueUrl=self.dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=60
                ).get("Messages")
                or []
            )
            if not msgs:
                return out
            for m in msgs:
                out.append(json.loads(m["Body"]))
                self.sqs.delete_message(QueueUrl=self.dlq_url, ReceiptHandle=m["ReceiptHandle"])


def make_queues(moto: Any, name: str, visibility: int, max_receive: int) -> tuple[Queues, str]:
    """Queue + DLQ, and an EventBridge bus whose rule routes ECR push events to the queue."""
    sqs, events = moto.client("sqs"), moto.client("events")
    dlq_url = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    url = sqs.create_queue(
        QueueName=name,
        Attributes={
            "VisibilityTimeout": str(visibility),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receive)}
            ),
        },
    )["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.create_event_bus(Name=name)
    pattern = {
        "source": ["aws.ecr"],
        "detail-type": ["ECR Image Action"],
        "detail": {"action-type": ["PUSH"], "result": ["SUCCESS"]},
    }
    events.put_rule(Name=f"{name}-ecr-push", EventBusName=name, EventPattern=json.dumps(pattern))
    events.put_targets(Rule=f"{name}-ecr-push", EventBusName=name, Targets=[{"Id": "sqs", "Arn": arn}])
    return Queues(sqs, url, dlq_url), name


# ---------------------------------------------------------------------------------------------
# Sensor processes
# ---------------------------------------------------------------------------------------------


class SensorProcess:
    """``python -m tests.chaos.sensor_proc`` in its own session, logs and results in files."""

    def __init__(
        self,
        label: str,
        workdir: Path,
        *,
        queue_url: str,
        endpoint_url: str,
        rules: Path,
        env: dict[str, str],
        concurrency: int,
        visibility: int,
        backoff_scale: float,
    ) -> None:
        self.label = label
        self.dir = workdir / label
        self.dir.mkdir(parents=True)
        self.results = self.dir / "results.jsonl"
        self.log_path = self.dir / "sensor.log"
        self.work_root = self.dir / "steps"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.chaos.sensor_proc",
                "--queue-url",
                queue_url,
                "--endpoint-url",
                endpoint_url,
                "--rules",
                str(rules),
                "--results",
                str(self.results),
                "--work-root",
                str(self.work_root),
                "--concurrency",
                str(concurrency),
                "--visibility-timeout",
                str(visibility),
                "--backoff-scale",
                str(backoff_scale),
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def finished(self) -> int:
        """Workflows this process finished (result lines written so far)."""
        return len(read_jsonl(self.results))

    def kill(self) -> None:
        """SIGKILL the sensor process alone: a crash. The steps it was running die with it (the warm
        interpreter they were forked from kills them when the sensor's end of its socket closes);
        with ``IMAGEBUMP_LOCAL_PREFORK=0`` they are orphaned instead, and :meth:`reap_orphans` waits."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def terminate(self, timeout: float = 120) -> int:
        """SIGTERM: stop taking messages, finish what runs, exit."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def orphans(self) -> list[int]:
        """Pids of step processes still running in this sensor's step directories."""
        found = []
        root = str(self.work_root)
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if cwd.startswith(root + os.sep):
                found.append(int(entry.name))
        return found

    def reap_orphans(self, timeout: float = 60) -> int:
        """Wait for orphaned step processes to end; SIGKILL those still running after ``timeout``."""
        deadline = time.monotonic() + timeout
        pids = self.orphans()
        while pids and time.monotonic() < deadline:
            time.sleep(0.5)
            pids = self.orphans()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def records(self) -> list[dict[str, Any]]:
        """The sensor's and executor's JSON log records (a line cut by SIGKILL is skipped)."""
        return read_jsonl(self.log_path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


# ---------------------------------------------------------------------------------------------
# Judging (pure)
# ---------------------------------------------------------------------------------------------


def monotonic_violations(sequence: list[int]) -> list[tuple[int, int]]:
    """``(from, to)`` pairs where a later state holds an older image than the one before it."""
    return [(a, b) for a, b in zip(sequence, sequence[1:]) if b < a]


def ref_chains(updates: list[tuple[str, str, str]]) -> tuple[dict[str, list[str]], list[str]]:
    """Order each ref's updates ``(old, new, ref)`` by linking old → new from its first state.

    Hook log lines of concurrent pushes may be appended out of order; a lease-protected ref's
    updates still form one chain. Returns ``{ref: [sha, …]}`` and the problems (unlinkable
    updates, i.e. a ref moved without its lease seeing the previous state).
    """
    by_ref: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for old, new, ref in updates:
        by_ref[ref].append((old, new))
    chains: dict[str, list[str]] = {}
    problems: list[str] = []
    for ref, pairs in by_ref.items():
        successors: dict[str, list[str]] = defaultdict(list)
        for old, new in pairs:
            successors[old].append(new)
        # The chain starts where the ref was created (old = 0…) or, for a ref that existed before
        # the hook was installed, at the one old value no logged update produced.
        produced = {new for _, new in pairs}
        roots = [ZERO] if ZERO in successors else sorted({old for old, _ in pairs} - produced)
        if len(roots) != 1:
            problems.append(f"{ref}: {len(roots)} starting points {roots[:3]}")
            chains[ref] = []
            continue
        chain, current, used = [], roots[0], 0
        while successors.get(current):
            nxt = successors[current].pop(0)
            used += 1
            if nxt == ZERO:
                break
            chain.append(nxt)
            current = nxt
        if used != len(pairs):
            problems.append(f"{ref}: {len(pairs) - used} of {len(pairs)} updates do not continue the chain")
        chains[ref] = chain
    return chains, problems


UPDATED = ("committed", "pr-created", "pr-updated")


def classify(record: dict[str, Any]) -> tuple[str, str]:
    """A Succeeded workflow's outcome for its (one) target: (updated|unchanged|skipped, detail)."""
    by_template: dict[str, dict[str, Any]] = {}
    for node in record["nodes"]:
        by_template[node["template"]] = node  # one target per event in this test
    resolve = by_template.get("resolve-image")
    if resolve is not None:
        targets = json.loads(resolve["outputs"].get("targets") or "[]")
        if not targets:
            return "skipped", "resolve-image: " + (resolve["outputs"].get("reason") or "no targets")
    commit, edit = by_template.get("commit-pr"), by_template.get("edit-kustomize")
    if commit is not None and commit["phase"] == "Succeeded":
        action = commit["outputs"].get("action", "")
        if action in UPDATED:
            return "updated", action
        return "unchanged", "commit-pr: " + (commit["outputs"].get("reason") or action)
    if edit is not None:
        decision = edit["outputs"].get("decision", "")
        if decision == "stale":
            return "skipped", "stale: " + edit["outputs"].get("reason", "")
        return "unchanged", f"edit-kustomize {decision}"
    return "unchanged", "no step outcome recorded"

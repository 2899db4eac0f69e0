"""Driving a local world: push images, then run the local sensor and executor until done.

:func:`push_image` puts an image into the world's ECR (``put_image`` with a digest and a manifest;
moto's ECR emits no events) and sends its push event through EventBridge (``put_events``), which
the stack's rule routes to the queue. :func:`run_until_done` runs the local sensor
(:mod:`sensors.local`) and the local executor (each step its own process) until the given number
of messages reached an outcome. Events and manifests come from :mod:`imagebump.local.builders`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from imagebump.local import builders
from imagebump.local.world import World
from workflows.local.results import WorkflowResult


def digest_of(world: World, tag: str) -> str:
    """A digest unique to this world's repository and ``tag`` (an image manifest's sha256)."""
    return builders.digest_for(f"{world.stack_name}/{world.repository}:{tag}")


def put_image(world: World, tag: str, digest: str | None = None) -> str:
    """Push ``tag`` to the world's ECR repository (moto needs the digest given); return the digest."""
    digest = digest or digest_of(world, tag)
    world.client("ecr").put_image(
        repositoryName=world.repository,
        imageManifest=builders.image_manifest(digest),
        imageTag=tag,
        imageDigest=digest,
    )
    return digest


def send_push_event(world: World, tag: str | None, digest: str) -> str:
    """Send the ECR push event through EventBridge (``put_events``); return the event id."""
    event = builders.ecr_push_event(world.repository, digest, tag, account=world.account, region=world.region)
    response = world.client("events").put_events(Entries=[builders.event_bridge_entry(event)])
    if response.get("FailedEntryCount"):
        from steps.domain.errors import TransientError

        raise TransientError(f"EventBridge refused the push event: {response['Entries']}")
    return response["Entries"][0]["EventId"]


def push_image(world: World, tag: str, digest: str | None = None) -> str:
    """Push an image to ECR and send its push event through EventBridge; return the event id."""
    started = time.monotonic()
    digest = put_image(world, tag, digest)
    event_id = send_push_event(world, tag, digest)
    world.pushes[event_id] = started
    return event_id


@dataclass
class Outcome:
    """One workflow the sensor ran: its event, result and when it finished (monotonic)."""

    event: dict[str, Any]
    result: WorkflowResult
    finished: float

    @property
    def event_id(self) -> str:
        return str(self.event.get("id") or "")


@dataclass
class RunReport:
    """What :func:`run_until_done` saw."""

    outcomes: list[Outcome]
    stats: Any  # sensors.local.SensorStats
    timed_out: bool
    seconds: float


def make_sensor(
    world: World,
    *,
    concurrency: int = 2,
    visibility_timeout: int = 30,
    on_result: Callable[[dict[str, Any], Any], None] | None = None,
) -> Any:
    """A :class:`sensors.local.LocalSensor` on the world's queue with its executor (1 s long polls)."""
    from sensors.local import LocalSensor

    return LocalSensor(
        world.queue_url,
        world.executor(),
        sqs_client=world.client("sqs"),
        concurrency=concurrency,
        wait_seconds=1,
        visibility_timeout=visibility_timeout,
        heartbeat_seconds=max(0.5, visibility_timeout / 3),
        log=world.record_log,
        on_result=on_result,
    )


def run_until(
    world: World,
    *,
    timeout: float = 60,
    max_events: int | None = None,
    stop_when: Callable[[Any], bool] | None = None,
    concurrency: int = 2,
    visibility_timeout: int = 30,
    sensor: Any = None,
) -> RunReport:
    """Run the local sensor until ``max_events`` messages were handled, ``stop_when(stats)``, or
    ``timeout`` seconds (then it is stopped; running workflows still finish)."""
    outcomes: list[Outcome] = []
    lock = threading.Lock()

    def record(event: dict[str, Any], result: Any) -> None:
        with lock:
            outcomes.append(Outcome(event, result, time.monotonic()))

    if sensor is None:
        sensor = make_sensor(
            world, concurrency=concurrency, visibility_timeout=visibility_timeout, on_result=record
        )
    else:
        sensor.on_result = record
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        sensor.stop()

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    started = time.monotonic()
    timer.start()
    try:
        stats = sensor.run(stop_when=stop_when, max_events=max_events)
    finally:
        timer.cancel()
    return RunReport(outcomes, stats, timed_out.is_set(), time.monotonic() - started)


def run_until_done(world: World, n_events: int = 1, timeout: float = 60, **kwargs: Any) -> RunReport:
    """Run the local sensor and executor until ``n_events`` messages reached an outcome."""
    return run_until(world, timeout=timeout, max_events=n_events, **kwargs)

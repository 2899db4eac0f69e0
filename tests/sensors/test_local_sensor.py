"""The local sensor against moto's SQS: delete only after a terminal outcome, DLQ for failures.

Every test gets its own queue + DLQ (redrive ``maxReceiveCount`` 2) and a small visibility
timeout; the workflow is ``tests/testdata/executor/sensor.yaml`` run by the real local executor,
whose one step (``stepfns.handle_event``) records each event it sees.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from imagebump.local import builders
from sensors import definition
from sensors.local import LocalSensor, SensorStats
from workflows.local.executor import LocalExecutor

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "tests" / "testdata" / "executor" / "sensor.yaml"
VISIBILITY = 2


def ecr_event(tag: str, *, action: str = "PUSH", result: str = "SUCCESS", digest: str | None = None) -> dict:
    """An EventBridge "ECR Image Action" event of ``team/api:tag`` as SQS delivers it (the shared builder)."""
    digest = digest or builders.digest_for(f"team/api:{tag}")
    return builders.ecr_push_event("team/api", digest, tag, action=action, result=result)


class Queues:
    def __init__(self, sqs) -> None:
        self.sqs = sqs
        name = f"imagebump-{uuid.uuid4().hex[:10]}"
        self.dlq_url = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=self.dlq_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self.url = sqs.create_queue(
            QueueName=name,
            Attributes={
                "VisibilityTimeout": str(VISIBILITY),
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "2"}),
            },
        )["QueueUrl"]

    def send(self, body: dict | str) -> None:
        self.sqs.send_message(
            QueueUrl=self.url, MessageBody=body if isinstance(body, str) else json.dumps(body)
        )

    def count(self, url: str | None = None) -> int:
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=url or self.url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    def cleanup(self) -> None:
        for url in (self.url, self.dlq_url):
            self.sqs.delete_queue(QueueUrl=url)


@pytest.fixture()
def queues(moto):
    q = Queues(moto.client("sqs"))
    yield q
    q.cleanup()


@pytest.fixture()
def state(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir()
    return path


@pytest.fixture()
def make_sensor(queues: Queues, state: Path) -> Callable[..., LocalSensor]:
    logs: list[dict] = []
    sensors: list[LocalSensor] = []

    def make(**kwargs) -> LocalSensor:
        executor = LocalExecutor(
            TEMPLATE, project_root=ROOT, env={"STEPFNS_STATE_DIR": str(state)}, log=logs.append
        )
        kwargs.setdefault("concurrency", 2)
        kwargs.setdefault("heartbeat_seconds", 0.5)
        sensor = LocalSensor(
            queues.url,
            executor,
            sqs_client=queues.sqs,
            wait_seconds=1,
            visibility_timeout=VISIBILITY,
            log=logs.append,
            **kwargs,
        )
        sensor.logs = logs  # type: ignore[attr-defined]
        sensors.append(sensor)
        return sensor

    yield make
    for sensor in sensors:  # never leave a polling thread behind
        sensor.stop()


def run_with_watchdog(sensor: LocalSensor, seconds: float = 90, **kwargs) -> SensorStats:
    """``sensor.run`` with a safety stop, so a bug fails the test instead of hanging it."""
    timer = threading.Timer(seconds, sensor.stop)
    timer.start()
    try:
        return sensor.run(**kwargs)
    finally:
        timer.cancel()


def _run_until(sensor: LocalSensor, state: Path, seen: Callable[[], bool], max_events: int) -> SensorStats:
    """Run the sensor in a thread; once ``seen()`` holds, release its blocked workflow (a ``block-``
    tag waits for ``release`` in the state dir) and return its stats. An event, not a sleep."""
    box: dict[str, SensorStats] = {}
    thread = threading.Thread(
        target=lambda: box.update(stats=run_with_watchdog(sensor, max_events=max_events))
    )
    thread.start()
    try:
        while not seen():
            assert thread.is_alive(), "the sensor stopped before the awaited record"
            thread.join(0.05)
    finally:
        (state / "release").write_text("go")
        thread.join(60)
    return box["stats"]


def markers(state: Path) -> list[str]:
    path = state / "markers"
    return path.read_text().splitlines() if path.exists() else []


def test_accepted_event_runs_and_is_deleted_after_success(queues, make_sensor, state) -> None:
    event = ecr_event("1.4.2")
    queues.send(event)
    results = []
    sensor = make_sensor(on_result=lambda ev, res: results.append(res))

    stats = run_with_watchdog(sensor, max_events=1)

    assert (stats.received, stats.succeeded) == (1, 1)
    assert markers(state) == [f"1.4.2 {event['id']}"]
    assert queues.count() == 0
    assert results[0].phase == "Succeeded" and results[0].node(".handle").outputs["tag"] == "1.4.2"
    # the executor's records carry the event id
    assert any(
        r.get("event_id") == event["id"] and r.get("event") == "workflow-finished" for r in sensor.logs
    )


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(ecr_event("1.0", action="DELETE"), id="delete"),
        pytest.param(ecr_event("1.0", result="FAILURE"), id="failed-push"),
        pytest.param({"source": "aws.s3", "detail": {}}, id="other-source"),
    ],
)
def test_rejected_event_is_deleted_with_a_reason(queues, make_sensor, state, event) -> None:
    queues.send(event)
    sensor = make_sensor()

    stats = run_with_watchdog(sensor, max_events=1)

    assert (stats.skipped, stats.succeeded) == (1, 0)
    assert markers(state) == []
    assert queues.count() == 0
    deleted = [r for r in sensor.logs if r.get("event") == "message-deleted"]
    assert deleted[0]["outcome"] == "skipped" and deleted[0]["reason"].startswith("filtered out: ")


def test_unparseable_body_is_left_for_the_redrive_policy(queues, make_sensor, state) -> None:
    queues.send("this is not json")
    sensor = make_sensor()

    stats = run_with_watchdog(sensor, max_events=1)

    assert stats.invalid == 1
    assert queues.count() == 1  # still there (invisible until its timeout), never deleted
    assert any(r.get("event") == "message-invalid" and "not JSON" in r["reason"] for r in sensor.logs)


def test_failing_workflow_ends_in_the_dlq(queues, make_sensor, state) -> None:
    queues.send(ecr_event("fail-1"))
    sensor = make_sensor()

    stats = run_with_watchdog(sensor, stop_when=lambda s: queues.count(queues.dlq_url) > 0)

    assert stats.failed == 2  # maxReceiveCount 2: two attempts, then the queue dead-letters it
    assert stats.succeeded == 0
    assert queues.count(queues.dlq_url) == 1
    assert queues.count() == 0
    assert len(markers(state)) == 2
    failed = [r for r in sensor.logs if r.get("event") == "node-finished" and r.get("phase") == "Failed"]
    assert any("failing on purpose" in r.get("stderr_tail", "") for r in failed)


def test_duplicate_delivery_runs_one_workflow(queues, make_sensor, state) -> None:
    event = ecr_event("2.0.0")
    queues.send(event)
    queues.send(dict(event, id=str(uuid.uuid4())))  # EventBridge/SQS redelivery: new id, same image
    sensor = make_sensor(concurrency=1)

    stats = run_with_watchdog(sensor, max_events=2)

    assert (stats.succeeded, stats.duplicates) == (1, 1)
    assert len(markers(state)) == 1
    assert queues.count() == 0


def test_duplicate_of_a_running_workflow_is_deleted_not_left_to_the_dlq(queues, make_sensor, state) -> None:
    """Two copies received together (concurrency 2): the second is a duplicate of a RUNNING workflow.

    It is deleted at once (as the Argo API server refuses a second Workflow of the same name): left
    on the queue it would come back on every poll, spending maxReceiveCount until the DLQ took it.
    """
    event = ecr_event("block-2")
    queues.send(event)
    queues.send(dict(event, id=str(uuid.uuid4())))
    sensor = make_sensor(concurrency=2)

    # No sleep: the workflow blocks until the sensor has judged the second copy a duplicate.
    stats = _run_until(sensor, state, lambda: any(r.get("outcome") == "duplicate" for r in sensor.logs), 2)

    assert (stats.succeeded, stats.duplicates, stats.failed) == (1, 1, 0)
    assert len(markers(state)) == 1
    assert queues.count() == 0 and queues.count(queues.dlq_url) == 0
    duplicate = [r for r in sensor.logs if r.get("outcome") == "duplicate"]
    assert len(duplicate) == 1 and "is running" in duplicate[0]["reason"]


def test_long_workflow_is_not_redelivered_meanwhile(queues, make_sensor, state) -> None:
    """A workflow that runs for twice the visibility timeout: the heartbeat keeps its message hidden.

    No sleep: the workflow blocks until the test releases it, and the test releases it once the
    heartbeat has extended the message's visibility enough times to cover two visibility timeouts
    (an event, however slow the machine is)."""
    queues.send(ecr_event("block-long"))
    sensor = make_sensor(concurrency=2, heartbeat_seconds=0.5)
    extended = _VisibilityCounted(queues.sqs, enough=int(2 * VISIBILITY / 0.5))
    sensor.sqs = extended
    box: dict[str, SensorStats] = {}
    thread = threading.Thread(target=lambda: box.update(stats=run_with_watchdog(sensor, max_events=1)))
    thread.start()
    try:
        assert extended.enough_seen.wait(60), "the heartbeat never extended the message's visibility"
    finally:
        (state / "release").write_text("go")
    thread.join(60)

    # without the visibility heartbeat the message would come back while running (a "deferred")
    stats = box["stats"]
    assert (stats.received, stats.succeeded, stats.duplicates) == (1, 1, 0)
    assert not [r for r in sensor.logs if r.get("event") == "message-redelivered"]
    assert queues.count() == 0


def test_own_message_redelivered_while_running_is_kept_not_deleted_as_a_duplicate(
    queues, make_sensor, state
) -> None:
    """A heartbeat too late (a loaded machine): the running workflow's OWN message comes back.

    It is not a duplicate: deleting it would delete the only message of a workflow that may still
    fail. The sensor keeps it, tracks its newest receipt, and settles it when the workflow ends.
    """
    queues.send(ecr_event("block-1"))
    sensor = make_sensor(concurrency=2, heartbeat_seconds=600)  # visibility 2 s lapses mid-run
    box: dict[str, SensorStats] = {}
    thread = threading.Thread(target=lambda: box.update(stats=run_with_watchdog(sensor)))
    thread.start()
    try:
        while not any(r.get("event") == "message-redelivered" for r in sensor.logs):
            assert thread.is_alive()
            thread.join(0.05)
    finally:
        (state / "release").write_text("go")
    while sensor.stats.succeeded + sensor.stats.failed == 0:
        assert thread.is_alive()
        thread.join(0.05)
    sensor.stop()
    thread.join(60)

    stats = box["stats"]
    assert (stats.succeeded, stats.duplicates, stats.failed) == (1, 0, 0)
    assert [m.split()[0] for m in markers(state)] == ["block-1"]  # ran once
    assert queues.count() == 0 and queues.count(queues.dlq_url) == 0  # settled, not lost, not DLQ'd
    redelivered = [r for r in sensor.logs if r.get("event") == "message-redelivered"]
    assert redelivered[0]["level"] == "warning" and "visibility lapsed" in redelivered[0]["reason"]
    assert not [r for r in sensor.logs if r.get("outcome") == "duplicate"]


class _VisibilityCounted:
    """moto's SQS client, counting the heartbeat's visibility extensions (each one goes through)."""

    def __init__(self, sqs, enough: int) -> None:
        self._sqs = sqs
        self.enough = enough
        self.calls = 0
        self.enough_seen = threading.Event()

    def __getattr__(self, name: str):
        return getattr(self._sqs, name)

    def change_message_visibility(self, **kwargs):
        result = self._sqs.change_message_visibility(**kwargs)
        self.calls += 1
        if self.calls >= self.enough:
            self.enough_seen.set()
        return result


class _VisibilityRefused:
    """moto's SQS client, except that extending a message's visibility fails (a throttled API)."""

    def __init__(self, sqs) -> None:
        self._sqs = sqs

    def __getattr__(self, name: str):
        return getattr(self._sqs, name)

    def change_message_visibility(self, **kwargs):
        raise RuntimeError("ThrottlingException: rate exceeded")


def test_failed_heartbeat_is_logged_with_its_event_and_the_workflow_still_settles(
    queues, make_sensor, state
) -> None:
    event = ecr_event("block-1")
    queues.send(event)
    sensor = make_sensor(concurrency=1, heartbeat_seconds=0.2)
    sensor.sqs = _VisibilityRefused(queues.sqs)

    # No sleep: the workflow blocks until a heartbeat has failed.
    stats = _run_until(
        sensor, state, lambda: any(r.get("event") == "heartbeat-failed" for r in sensor.logs), 1
    )

    assert (stats.succeeded, stats.failed) == (1, 0)
    assert queues.count() == 0
    failed = [r for r in sensor.logs if r.get("event") == "heartbeat-failed"]
    assert failed, "the heartbeat ran while the workflow was blocked"
    assert {(r["event_id"], r["workflow"]) for r in failed} == {
        (event["id"], sensor.definition.workflow_name(event))
    }
    assert all(r["message_id"] and "ThrottlingException" in r["error"] for r in failed)


def test_stop_finishes_running_work_and_loses_nothing(queues, make_sensor, state) -> None:
    queues.send(ecr_event("block-1"))
    sensor = make_sensor(concurrency=1)
    box: dict[str, SensorStats] = {}
    thread = threading.Thread(target=lambda: box.update(stats=run_with_watchdog(sensor)))
    thread.start()
    try:
        while not (state / "started-block-1").exists():  # the workflow is running
            assert thread.is_alive()
            thread.join(0.05)
        queues.send(ecr_event("2.0"))
        queues.send(ecr_event("3.0"))
        sensor.stop()  # what SIGTERM does
        assert thread.is_alive()  # it waits for the running workflow
    finally:
        (state / "release").write_text("go")
        thread.join(60)

    stats = box["stats"]
    assert (stats.received, stats.succeeded) == (1, 1)
    assert [m.split()[0] for m in markers(state)] == ["block-1"]
    assert queues.count() == 2  # the unstarted messages are still on the queue


# -- one bad message never stops the sensor ---------------------------------------------------


def test_a_lone_surrogate_in_the_repository_name_does_not_stop_the_sensor(queues, make_sensor, state) -> None:
    """``"\\ud800"`` is valid JSON; Python keeps the lone surrogate, which UTF-8 cannot encode. The
    Sensor on a cluster reads it with gjson, which makes it U+FFFD: the name is computed the same way."""
    poison = ecr_event("9.9.9")
    poison["detail"]["repository-name"] = "\ud800"
    body = json.dumps(poison)  # ensure_ascii: the body holds the escape "\\ud800", as SQS would carry it
    assert "\\ud800" in body
    queues.send(body)
    good = ecr_event("1.0.0")
    queues.send(good)
    sensor = make_sensor(concurrency=1)

    stats = run_with_watchdog(sensor, max_events=2)

    assert (stats.received, stats.succeeded, stats.failed) == (2, 2, 0)
    assert sorted(m.split()[0] for m in markers(state)) == ["1.0.0", "9.9.9"]
    key = "|".join(("\ufffd", "9.9.9", poison["detail"]["image-digest"], poison["account"], poison["region"]))
    expected = "image-update-" + hashlib.sha256(key.encode()).hexdigest()[:16]
    submitted = {r["event_id"]: r["workflow"] for r in sensor.logs if r.get("event") == "workflow-submitted"}
    assert submitted[poison["id"]] == expected
    assert queues.count() == 0


class _PoisonedDefinition:
    """Fault injection through the sensor's ``definition`` seam: the real :mod:`sensors.definition`,
    except that naming a body that holds ``poison`` raises (as any unforeseen bug would)."""

    def __getattr__(self, name: str):
        return getattr(definition, name)

    @staticmethod
    def workflow_name(body: str) -> str:
        if "poison" in body:
            raise RuntimeError("boom while naming the workflow")
        return definition.workflow_name(body)


def test_any_exception_while_handling_a_message_is_contained(queues, make_sensor, state) -> None:
    poison = ecr_event("poison-1")
    queues.send(poison)
    good = ecr_event("2.0.0")
    queues.send(good)
    sensor = make_sensor(concurrency=1, definition=_PoisonedDefinition())

    first = run_with_watchdog(sensor, max_events=2)

    assert (first.succeeded, first.failed) == (1, 1)
    assert [m.split()[0] for m in markers(state)] == ["2.0.0"]
    (error,) = [r for r in sensor.logs if r.get("event") == "message-error"]
    assert error["message_id"] and error["error"] == "RuntimeError: boom while naming the workflow"
    assert error["level"] == "error" and "redelivered" in error["reason"]
    assert queues.count() == 1  # not deleted, not lost: it comes back after its visibility timeout

    # ... and after maxReceiveCount (2) receives the queue's redrive policy dead-letters it
    again = make_sensor(concurrency=1, definition=_PoisonedDefinition())
    run_with_watchdog(again, stop_when=lambda s: queues.count(queues.dlq_url) > 0)
    assert queues.count(queues.dlq_url) == 1 and queues.count() == 0


def test_a_trailing_newline_does_not_pass_an_anchored_filter(queues, make_sensor, state) -> None:
    """Go's ``$`` is the end of the text: the cluster Sensor does not trigger for ``"PUSH\\n"``."""
    queues.send(ecr_event("3.0.0", action="PUSH\n"))
    sensor = make_sensor()

    stats = run_with_watchdog(sensor, max_events=1)

    assert (stats.skipped, stats.succeeded) == (1, 0)
    assert markers(state) == []
    (deleted,) = [r for r in sensor.logs if r.get("event") == "message-deleted"]
    assert deleted["reason"].startswith("filtered out: body.detail.action-type is 'PUSH\\n'")


# -- `imagebump run --local` ------------------------------------------------------------------

RULES = """\
- githubRepository: http://127.0.0.1:1/org/gitops/services/$1/overlays/staging
  registryURI: 123456789012.dkr.ecr.us-west-2.amazonaws.com/team/$1
  env: staging
  mode: commit
"""


def test_run_without_local_points_to_the_cluster_sensor(capsys) -> None:
    from imagebump.cli import main

    assert main(["run", "--queue-url", "http://q"]) == 2
    err = capsys.readouterr().err
    assert "cluster mode is the Argo Events Sensor" in err and "--local" in err


def test_run_local_needs_the_token_from_the_environment(tmp_path, monkeypatch, capsys) -> None:
    from imagebump.cli import main

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    monkeypatch.delenv("IMAGEBUMP_GIT_TOKEN", raising=False)
    monkeypatch.delenv("IMAGEBUMP_GIT_TOKEN_FILE", raising=False)

    assert main(["run", "--local", "--queue-url", "http://q", "--rules", str(rules)]) == 2
    assert "IMAGEBUMP_GIT_TOKEN is not set" in capsys.readouterr().err


def test_run_local_handles_events_and_prints_progress(
    queues, moto, state, tmp_path, monkeypatch, capsys
) -> None:
    from imagebump.cli import main

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    monkeypatch.setenv("IMAGEBUMP_GIT_TOKEN", "tok-abcdef-123")
    monkeypatch.setenv("IMAGEBUMP_TEST_STATE_DIR", str(state))
    event = ecr_event("1.4.2")
    queues.send(event)
    queues.send(ecr_event("1.0", action="DELETE"))

    code = main(
        [
            "run",
            "--local",
            "--queue-url",
            queues.url,
            "--endpoint-url",
            moto.endpoint_url,
            "--rules",
            str(rules),
            "--template",
            str(TEMPLATE),
            "--wait-seconds",
            "1",
            "--visibility-timeout",
            str(VISIBILITY),
            "--max-events",
            "2",
        ]
    )

    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith(f"event {event['id'][:8]}… team/api:1.4.2 → succeeded")
    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert {r["event_id"] for r in records if r.get("workflow", "").startswith("image-update-")} == {
        event["id"]
    }
    assert "tok-abcdef-123" not in err
    assert queues.count() == 0


def test_progress_line_for_image_update() -> None:
    from imagebump.local.outcome import progress_line
    from workflows.local.results import NodeResult, WorkflowResult

    wf = "image-update-0123"
    targets = [
        {"env": "staging", "path": "s"},
        {"env": "production", "path": "p"},
        {"env": "qa", "path": "q"},
    ]
    nodes = [
        NodeResult(
            f"{wf}.resolve-image", "resolve-image", "Succeeded", outputs={"targets": json.dumps(targets)}
        ),
        NodeResult(
            f"{wf}.update-target(0).edit-kustomize",
            "edit-kustomize",
            "Succeeded",
            outputs={"decision": "update"},
        ),
        NodeResult(
            f"{wf}.update-target(0).commit-pr",
            "commit-pr",
            "Succeeded",
            outputs={"action": "committed", "commit-sha": "abc1234def"},
        ),
        NodeResult(
            f"{wf}.update-target(1).edit-kustomize",
            "edit-kustomize",
            "Succeeded",
            outputs={"decision": "update"},
        ),
        NodeResult(
            f"{wf}.update-target(1).commit-pr",
            "commit-pr",
            "Succeeded",
            outputs={"action": "pr-updated", "branch": "imagebump/production/p"},
        ),
        NodeResult(
            f"{wf}.update-target(2).edit-kustomize",
            "edit-kustomize",
            "Succeeded",
            outputs={"decision": "stale", "reason": "1.3 is older than 1.4"},
        ),
        NodeResult(f"{wf}.update-target(2).commit-pr", "commit-pr", "Skipped"),
    ]
    event = {"id": "13cde686-aaaa", "detail": {"repository-name": "team/api", "image-tag": "1.4.2"}}

    line = progress_line(event, WorkflowResult(wf, "Succeeded", nodes, duration=3.21))

    assert line == (
        "event 13cde686… team/api:1.4.2 → 3 targets: staging committed abc1234, "
        "production pr-updated imagebump/production/p, qa skipped (stale: 1.3 is older than 1.4)  (3.2s)"
    )


@pytest.mark.parametrize("sig", [pytest.param("SIGTERM", id="sigterm"), pytest.param("SIGINT", id="sigint")])
def test_signals_stop_the_sensor(sig: str) -> None:
    import os
    import signal

    from imagebump.commands.run import _stop_on_signals

    class FakeSensor:
        stopped = False

        def stop(self) -> None:
            self.stopped = True

    sensor = FakeSensor()
    before = signal.getsignal(getattr(signal, sig))
    with _stop_on_signals(sensor):
        os.kill(os.getpid(), getattr(signal, sig))
    assert sensor.stopped
    assert signal.getsignal(getattr(signal, sig)) is before  # handlers restored


def test_progress_line_of_a_lone_surrogate_can_be_printed() -> None:
    from imagebump.local.outcome import printable, progress_line
    from workflows.local.results import WorkflowResult

    event = {"id": "e\ud800", "detail": {"repository-name": "team/\ud800", "image-tag": "1"}}
    line = printable(progress_line(event, WorkflowResult("wf", "Failed", [], "boom")))
    assert line.encode("utf-8").decode() == "event e\ufffd team/\ufffd:1 → failed: boom  (0.0s)"


@pytest.mark.parametrize(
    ("env", "write", "read"),
    [
        pytest.param({"IMAGEBUMP_GIT_TOKEN": "w-token"}, "w-token", "w-token", id="write-token-also-reads"),
        pytest.param(
            {"IMAGEBUMP_GIT_TOKEN": "w-token", "IMAGEBUMP_GIT_READ_TOKEN": "r-token"},
            "w-token",
            "r-token",
            id="read-token-overrides",
        ),
        pytest.param(
            {"IMAGEBUMP_GIT_TOKEN_FILE": "FILE", "IMAGEBUMP_GIT_READ_TOKEN_FILE": "FILE"},
            "from-file",
            "from-file",
            id="files",
        ),
    ],
)
def test_local_secrets(tmp_path, env, write, read) -> None:
    from imagebump.commands.run import local_secrets

    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    environ = {k: str(token_file) if v == "FILE" else v for k, v in env.items()}
    assert local_secrets(environ) == {
        "imagebump-git": {"token": write},
        "imagebump-git-read": {"token": read},
    }


def test_local_secrets_need_the_write_token() -> None:
    from imagebump.commands.run import local_secrets
    from steps.domain.errors import ConfigError

    with pytest.raises(ConfigError, match="IMAGEBUMP_GIT_TOKEN is not set"):
        local_secrets({"IMAGEBUMP_GIT_READ_TOKEN": "r-token"})


def test_run_help_says_the_write_token_also_reads(capsys) -> None:
    from imagebump.cli import main

    with pytest.raises(SystemExit) as info:
        main(["run", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "it also reads the repositories" in text and "IMAGEBUMP_GIT_READ_TOKEN" in text
    assert "AWS_ENDPOINT_URL" in text


class _OneMessageAtATime:
    """An SQS client that hands out ``bodies`` one per ReceiveMessage and accepts every delete."""

    def __init__(self, bodies: list[str]) -> None:
        self.bodies = list(bodies)
        self.received = 0
        self.deleted: list[str] = []

    def receive_message(self, **kwargs) -> dict:
        if not self.bodies:
            return {}
        self.received += 1
        n = self.received
        body = self.bodies.pop(0)
        return {"Messages": [{"MessageId": f"m{n}", "ReceiptHandle": f"r{n}", "Body": body}]}

    def delete_message(self, QueueUrl: str, ReceiptHandle: str) -> None:  # noqa: N803 - boto3's names
        self.deleted.append(ReceiptHandle)

    def change_message_visibility(self, **kwargs) -> None:
        pass


def test_a_full_sensor_waits_for_a_workflow_to_end_instead_of_polling(monkeypatch) -> None:
    """With every slot taken, the poll loop waits for a workflow's end and receives again at once:
    it does not poll (a 50 ms sleep made a freed slot wait for the next receive up to that long)."""
    import time

    from workflows.local.results import SUCCEEDED, WorkflowResult

    release = threading.Event()
    slept: list[float] = []

    def no_sleep(seconds: float) -> None:  # the old loop's poll: recorded, and it lets the step go
        slept.append(seconds)
        release.set()

    monkeypatch.setattr(time, "sleep", no_sleep)
    ran: list[str] = []

    class Blocking:
        def run(self, arguments, name, *, event_id=None):
            release.wait()  # the first event's workflow runs until the loop waits for its slot
            ran.append(name)
            return WorkflowResult(name, SUCCEEDED, [], "", 0.0)

    class WaitWatched(threading.Event):
        def wait(self, timeout=None):
            release.set()  # the loop is waiting for a slot: let the running workflow end
            return super().wait(timeout)

    bodies = [json.dumps(ecr_event(tag)) for tag in ("1.0.0", "1.0.1")]
    sqs = _OneMessageAtATime(bodies)
    sensor = LocalSensor("q", Blocking(), sqs_client=sqs, concurrency=1, wait_seconds=1, log=lambda r: None)
    sensor._slot_freed = WaitWatched()
    stats = run_with_watchdog(sensor, seconds=60, max_events=2)
    assert (stats.succeeded, len(ran), sorted(sqs.deleted)) == (2, 2, ["r1", "r2"])
    assert slept == []

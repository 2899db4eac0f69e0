"""End to end, no mocks: ECR push (moto) → EventBridge → SQS → local sensor → local executor
running the rendered WorkflowTemplate (each step a subprocess) → a real git http-backend remote
(and, for one case, the GitHub API fake).

Every test builds its own world (:func:`imagebump.local.world.build_world`) on the session's moto
server: its own CloudFormation stack (queue, DLQ, rule), ECR repository, git server and token.
Queues stay shallow; the sensor long-polls 1 s and uses a short visibility timeout.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from imagebump.local.demo import DemoReport, fill_report, render_report
from imagebump.local.demo_repo import PRODUCTION_PATH, STAGING_PATH, default_rules
from imagebump.local.drive import (
    digest_of,
    make_sensor,
    push_image,
    put_image,
    run_until,
    run_until_done,
    send_push_event,
)
from imagebump.local.outcome import target_results
from imagebump.local.world import World, build_world
from tests.fixtures import ecr_clock
from tests.fixtures.github import GitHubFake

pytestmark = pytest.mark.slow

STAGING_FILE = f"{STAGING_PATH}/kustomization.yaml"
PRODUCTION_FILE = f"{PRODUCTION_PATH}/kustomization.yaml"
VISIBILITY = 3


@pytest.fixture()
def world(moto, tmp_path: Path):
    with build_world(tmp_path, moto=moto) as w:
        yield w


def imagebump_commits(world: World, ref: str = "main") -> list[str]:
    return [s for s in world.log(ref) if s.startswith("imagebump(")]


def outcome_of(report, event_id: str):
    return next(o for o in report.outcomes if o.event_id == event_id)


def assert_nothing_left(world: World) -> None:
    assert world.queue_depth() == 0, "messages left on the queue"
    assert world.queue_depth(world.dlq_url) == 0, f"messages in the DLQ: {world.dlq_messages()}"


def test_push_becomes_a_commit_and_a_pr_branch(world: World) -> None:
    event_id = push_image(world, "1.4.2")

    report = run_until_done(world, 1, timeout=60, visibility_timeout=VISIBILITY)

    assert not report.timed_out
    result = outcome_of(report, event_id).result
    assert result.phase == "Succeeded", [(n.name, n.message) for n in result.nodes if n.phase != "Succeeded"]
    by_env = {t.env: t for t in target_results(result)}
    assert (by_env["staging"].action, by_env["production"].action) == ("committed", "pr-created")
    # commit mode: on main, only the newTag line changed
    assert world.rev() == by_env["staging"].commit_sha
    assert '  newTag: "1.4.2"  # set by imagebump\n' in world.read(STAGING_FILE)
    (subject,) = imagebump_commits(world)
    assert subject.startswith("imagebump(staging)")
    # pr mode (provider local): main untouched, the proposal is the branch
    branch = by_env["production"].branch
    assert branch in world.branches()
    assert "newTag: 1.4.0" in world.read(PRODUCTION_FILE)
    proposed = world.read(PRODUCTION_FILE, branch)
    assert "newTag: 1.4.2" in proposed and f"digest: {digest_of(world, '1.4.2')}" in proposed
    assert_nothing_left(world)


def deliver_again(world: World) -> str:
    """Send the message now on the queue once more, byte for byte (an SQS/EventBridge redelivery)."""
    sqs = world.client("sqs")
    (message,) = sqs.receive_message(
        QueueUrl=world.queue_url, MaxNumberOfMessages=1, WaitTimeSeconds=1, VisibilityTimeout=0
    )["Messages"]
    sqs.send_message(QueueUrl=world.queue_url, MessageBody=message["Body"])
    return message["Body"]


def test_same_event_three_times_gives_one_commit_and_one_pr_github(world: World) -> None:
    """Provider github through the API fake; the third delivery reaches a restarted sensor."""
    world.set_rules(
        default_rules(world.git.base_url, world.registry, repository=world.repository, provider="github")
    )
    with GitHubFake({world.token}) as github:
        world.set_env_config({"IMAGEBUMP_GITHUB_API_URL": github.url})
        push_image(world, "2.0.0")
        body = deliver_again(world)  # two copies on the queue

        # concurrency 2: the copy may arrive while the first run is still going (deleted as a
        # duplicate of a running workflow) or after it succeeded (a duplicate of a finished one)
        first = run_until_done(world, 2, timeout=60, visibility_timeout=VISIBILITY, concurrency=2)
        after_first = {ref: world.rev(ref) for ref in world.branches()}
        world.client("sqs").send_message(QueueUrl=world.queue_url, MessageBody=body)  # the third copy
        second = run_until_done(world, 1, timeout=60, visibility_timeout=VISIBILITY)

        assert not (first.timed_out or second.timed_out)
        assert (first.stats.succeeded, first.stats.duplicates) == (1, 1)
        # a new process does not know the workflow name: it runs again, and the steps change nothing
        assert second.stats.succeeded == 1
        rerun = {t.env: t.action for t in target_results(second.outcomes[0].result)}
        assert rerun["staging"] == "unchanged"
        # the proposal is rebuilt on the newest main: if main moved (the staging commit may land
        # after the first proposal was built) the branch is refreshed, else nothing is pushed
        assert rerun["production"] in ("unchanged", "pr-updated")
        assert world.rev("main") == after_first["main"]
        assert len(imagebump_commits(world)) == 1
        assert '"2.0.0"' in world.read(STAGING_FILE)
        (pull,) = github.pulls
        assert pull.state == "open"
        assert len(github.calls_to("POST", r"/repos/demo/manifests/pulls")) == 1
        assert pull.head in world.branches()
        assert len(world.git_cmd("rev-list", f"main..{pull.head}").split()) == 1  # one proposed commit
        assert "newTag: 2.0.0" in world.read(PRODUCTION_FILE, pull.head)
        assert "newTag: 1.4.0" in world.read(PRODUCTION_FILE)  # main untouched until the PR is merged
    assert_nothing_left(world)


def test_older_image_after_newer_is_skipped_as_stale(world: World) -> None:
    old = put_image(world, "1.5.0")
    ecr_clock.advance()  # ECR push times have one-second resolution
    new = put_image(world, "1.6.0")
    newer_event = send_push_event(world, "1.6.0", new)
    first = run_until_done(world, 1, timeout=60, visibility_timeout=VISIBILITY)
    landed = world.rev("main")
    older_event = send_push_event(world, "1.5.0", old)  # late: EventBridge does not promise order

    second = run_until_done(world, 1, timeout=60, visibility_timeout=VISIBILITY)

    assert outcome_of(first, newer_event).result.phase == "Succeeded"
    result = outcome_of(second, older_event).result
    assert result.phase == "Succeeded"  # a terminal outcome: skipped with a reason, message deleted
    staging = {t.env: t for t in target_results(result)}["staging"]
    assert (staging.decision, staging.action) == ("stale", "unchanged"), staging
    assert "1.5.0" in staging.reason and "1.6.0" in staging.reason
    assert world.rev("main") == landed  # nothing written
    assert '"1.6.0"' in world.read(STAGING_FILE)
    assert len(imagebump_commits(world)) == 1
    assert_nothing_left(world)
    # pr mode: the living proposal must not go back from 1.6.0 to 1.5.0 either
    branch = {t.env: t for t in target_results(outcome_of(first, newer_event).result)}["production"].branch
    assert "newTag: 1.6.0" in world.read(PRODUCTION_FILE, branch)


def test_step_that_keeps_failing_ends_in_the_dlq(moto, tmp_path: Path) -> None:
    with build_world(tmp_path, moto=moto, max_receive_count=2) as world:
        world.set_step_token("wrong-token-" + "x" * 20)  # every Git request answers 401
        event_id = push_image(world, "3.0.0")

        report = run_until(
            world,
            timeout=90,
            visibility_timeout=2,
            stop_when=lambda stats: world.queue_depth(world.dlq_url) > 0,
        )

        assert not report.timed_out
        assert report.stats.failed == 2 and report.stats.succeeded == 0  # maxReceiveCount 2, then the DLQ
        dead = world.dlq_messages()
        assert [m["id"] for m in dead] == [event_id]
        assert world.queue_depth() == 0
        failed = {t.env: t for t in target_results(report.outcomes[0].result)}
        assert all(t.phase in ("Failed", "Error") and "edit-kustomize" in t.message for t in failed.values())
        assert imagebump_commits(world) == []
        assert "wrong-token-" not in repr(world.logs)
        assert world.token not in repr(world.logs)
        # what `imagebump demo` would print for it
        shown = DemoReport(ok=False)
        fill_report(shown, world, report, event_id, world.pushes[event_id], timeout=90)
        text = render_report(shown)
        assert not shown.ok
        assert "FAILED: the workflow for event" in text
        assert "  - edit-kustomize [staging] (failed, 1 attempt): exit code 2" in text
        assert "dead-letter queue" in text
        assert "wrong-token-" not in text


def test_stop_mid_run_loses_nothing(world: World) -> None:
    """SIGTERM calls ``sensor.stop()``: the running workflow finishes, nothing is lost."""
    first_id = push_image(world, "4.0.0")
    ecr_clock.advance()
    second_id = push_image(world, "4.0.1")
    sensor = make_sensor(world, concurrency=1, visibility_timeout=VISIBILITY)
    done: dict = {}
    thread = threading.Thread(target=lambda: done.update(report=run_until(world, timeout=60, sensor=sensor)))
    thread.start()
    deadline = time.monotonic() + 30
    while not any(
        r.get("event") == "node-finished" and r.get("template") == "resolve-image" for r in world.logs
    ):
        assert time.monotonic() < deadline, "no workflow started"
        time.sleep(0.05)
    sensor.stop()  # what the SIGTERM handler of `imagebump run --local` does
    thread.join(timeout=60)

    assert not thread.is_alive()
    stopped = done["report"]
    assert not stopped.timed_out
    assert (stopped.stats.succeeded, stopped.stats.failed) == (1, 0)  # it finished what was running
    assert world.queue_depth() == 1  # the other one is still there, not lost

    restarted = run_until_done(world, 1, timeout=60, visibility_timeout=VISIBILITY)

    finished = {o.event_id: o.result.phase for o in stopped.outcomes + restarted.outcomes}
    assert finished == {first_id: "Succeeded", second_id: "Succeeded"}
    assert '"4.0.1"' in world.read(STAGING_FILE)
    assert_nothing_left(world)

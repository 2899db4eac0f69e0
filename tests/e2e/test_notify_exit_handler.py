"""The exit handler (``onExit``) of the rendered ``image-update`` template sends the messages, end to
end: ECR push (moto) → SQS → local sensor → the local executor (each step, and then the exit
handler's ``notify``, a subprocess) → real receivers on 127.0.0.1. Destinations come from the
``imagebump-notify`` Secret, as on a cluster; a resubmit of the same event sends nothing new; a
Workflow that failed still notifies; a receiver that is down never fails the Workflow.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from imagebump.commands.run import local_secrets
from imagebump.local.drive import push_image, run_until_done
from imagebump.local.outcome import target_results
from imagebump.local.world import World, build_world
from steps.domain.repo_url import parse_repo_url
from steps.notify.github import CONTEXT
from steps.notify.signature import HEADER, verify
from tests.e2e.test_push_to_live import live_world  # noqa: F401 - the simulated Argo CD's world
from tests.fixtures.github import GitHubFake
from tests.steps.notify.receivers import Receiver

pytestmark = pytest.mark.slow

SECRET = "whsec-" + "k" * 24


@pytest.fixture()
def world(moto, tmp_path: Path):
    with build_world(tmp_path, moto=moto) as w:
        yield w


def connect(world: World, tmp_path: Path, token: str | None = None, **urls: str) -> None:
    destinations = {
        name: {"type": name, "url": url, **({"secret": SECRET} if name == "webhook" else {})}
        for name, url in urls.items()
    }
    secrets = local_secrets({"IMAGEBUMP_GIT_TOKEN": token or world.token})
    secrets["imagebump-notify"] = {"notify.yaml": json.dumps({"destinations": destinations})}
    world.set_step_secrets(secrets)
    world.extra_env["IMAGEBUMP_NOTIFY_LEDGER_DIR"] = str(tmp_path / "ledger")


def notify_counts(result) -> dict[str, str]:
    (node,) = result.nodes_for("notify")
    assert node.name == f"{result.name}.onExit.notify"
    return node.outputs


def test_each_outcome_once_through_the_exit_handler_and_a_resubmit_sends_nothing_new(
    world: World, tmp_path: Path
) -> None:
    with Receiver("slack") as slack, Receiver("webhook") as hook:
        connect(world, tmp_path, slack=slack.url, webhook=hook.url)
        push_image(world, "1.4.2")
        report = run_until_done(world, 1, timeout=90, visibility_timeout=5)
        (outcome,) = report.outcomes
        assert outcome.result.phase == "Succeeded"
        assert notify_counts(outcome.result) == {"sent": "4", "duplicate": "0", "failed": "0"}
        bodies = sorted((r.json for r in hook.received), key=lambda b: b["outcome"])
        assert [b["outcome"] for b in bodies] == ["committed", "pr-opened"]
        assert all(b["event"] == outcome.event_id for b in bodies)
        assert all(
            ":1.4.2" in b["fields"]["image"] and b["fields"]["overlay"] and b["fields"]["link"]
            for b in bodies
        )
        for r in hook.received:  # as a receiver checks it
            assert verify(SECRET, r.headers[HEADER], r.body, time.time())
        assert len(slack.received) == 2

        # the same event again (a redelivery, a resubmitted Workflow): nothing new
        again = world.executor().run({"event": json.dumps(outcome.event)}, "image-update-resubmit")
        assert notify_counts(again)["sent"] == "0"
        assert len(slack.received) == 2 and len(hook.received) == 2
    logs = repr(world.logs)
    assert SECRET not in logs and slack.url not in logs and hook.url not in logs


def test_a_failed_workflow_still_notifies_and_a_receiver_down_fails_nothing(
    world: World, tmp_path: Path
) -> None:
    with Receiver("webhook") as hook, Receiver("slack", status=500) as down:
        connect(world, tmp_path, token="wrong-token-" + "x" * 20, webhook=hook.url, slack=down.url)
        push_image(world, "3.0.0")
        report = run_until_done(world, 1, timeout=90, visibility_timeout=30)
    result = report.outcomes[0].result
    assert result.phase == "Failed"
    assert result.node(".onExit").phase == "Succeeded"  # the handler never fails the Workflow
    kinds = sorted(r.json["outcome"] for r in hook.received)
    assert kinds == ["failed", "failed"]  # one per target, each with the Workflow's link
    assert all(r.json["alarm"] and r.json["fields"]["workflow_link"] for r in hook.received)
    counts = notify_counts(result)
    assert (counts["sent"], counts["failed"]) == ("2", "2")  # the 500s: counted, not raised
    assert "wrong-token-" not in repr([r.body for r in hook.received])


@pytest.mark.parametrize(("wrong_manifest", "verdict"), [(False, "success"), (True, "failure")])
def test_imagebump_live_is_pending_while_verifying_then_the_verdict_on_the_same_commit(
    live_world: World,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    wrong_manifest: bool,
    verdict: str,
) -> None:
    """Push → commit → ``pending`` (notify-verifying, beside verify-live) → ``success`` when live or
    ``failure`` on a mismatch (the exit handler), on the commit imagebump made; GitHub is the fake."""
    with GitHubFake({live_world.token}) as fake:
        live_world.set_env_config({"IMAGEBUMP_GITHUB_API_URL": fake.url})
        notify_file = json.dumps({"destinations": {"gh": {"type": "github"}}})
        live_world.set_extra_secrets({"imagebump-notify": {"notify.yaml": notify_file}})
        live_world.extra_env["IMAGEBUMP_NOTIFY_LEDGER_DIR"] = str(tmp_path / "ledger")
        live_world.sim.wrong_manifest = wrong_manifest
        with live_world.sim:
            push_image(live_world, "1.4.2")
            report = run_until_done(live_world, 1, timeout=120, visibility_timeout=5)
    result = report.outcomes[0].result
    (target,) = [t for t in target_results(result) if t.env == "staging"]
    assert target.action == "committed" and target.live == ("mismatch" if wrong_manifest else "live")
    _host, owner, repo = parse_repo_url(live_world.manifests_url)
    states = [s["state"] for s in fake.statuses[(owner, repo, target.commit_sha)] if s["context"] == CONTEXT]
    assert states == ["pending", verdict]
    # one notify-verifying per target; only the committed (staging) one ran and sent
    assert sorted(n.outputs.get("sent", "0") for n in result.nodes_for("notify-verifying"))[-1] == "1"
    assert notify_counts(result)["duplicate"] == "1"  # the exit handler's own pending: the same key
    assert live_world.token not in repr(live_world.logs)

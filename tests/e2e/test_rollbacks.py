"""Issue 23 end to end on the local runtime: the rendered templates through the local sensor and
executor, moto (ECR, EventBridge, SQS) and a real ``git http-backend`` remote — no mocks.

A person's rollback of the staging overlay (a revert of imagebump's commit, a hand edit back,
``imagebump set-image`` back) stands against a redelivered event, a resubmitted Workflow and a sweep
with ``--apply``; a push after the rollback moves it. A hold marker holds in commit and PR mode; an
entry pinned to another repository is never changed. Push times are injected into moto, never
waited for.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from imagebump.local import builders
from imagebump.local.demo_repo import MANIFESTS_REPO, PRODUCTION_PATH, STAGING_PATH
from imagebump.local.drive import push_image, put_image, run_until_done, send_push_event
from imagebump.local.outcome import target_results
from imagebump.local.world import World, build_world
from steps.domain.intent import by_imagebump
from tests.fixtures.ecr_times import set_pushed_at

pytestmark = pytest.mark.slow

STAGING = f"{STAGING_PATH}/kustomization.yaml"
PRODUCTION = f"{PRODUCTION_PATH}/kustomization.yaml"
NOW = datetime.now(UTC).replace(microsecond=0)
PERSON = "Ann Operator <ann@example.com>"


@pytest.fixture()
def world(moto, tmp_path: Path, monkeypatch):
    with build_world(tmp_path, moto=moto) as w:
        monkeypatch.setenv("IMAGEBUMP_GIT_TOKEN", w.token)
        monkeypatch.delenv("IMAGEBUMP_GIT_READ_TOKEN", raising=False)
        monkeypatch.setenv("AWS_REGION", w.region)
        for tag, hours in (("1.4.0", 4), ("1.4.1", 3)):  # what the overlays hold, pushed earlier
            put_image(w, tag)
            set_pushed_at(w.repository, tag, NOW - timedelta(hours=hours))
        yield w


def push(world: World, tag: str, at: datetime) -> str:
    """Push ``tag`` at ``at`` (injected) and send its event; return the digest."""
    digest = put_image(world, tag)
    set_pushed_at(world.repository, tag, at)
    send_push_event(world, tag, digest)
    return digest


def handle(world: World, n: int = 1):
    report = run_until_done(world, n, timeout=120, visibility_timeout=5)
    assert not report.timed_out and len(report.outcomes) == n
    assert world.queue_depth() == 0 and world.queue_depth(world.dlq_url) == 0  # every message deleted
    return report.outcomes[-1].result


def decisions(result) -> dict[str, tuple[str, str, str]]:
    assert result.phase == "Succeeded", result.message
    return {t.env: (t.decision, t.action, t.reason) for t in target_results(result)}


def sweep_apply(world: World, capsys) -> dict[str, dict]:
    from imagebump.cli import main

    code = main(
        ["reconcile", "--rules", str(world.rules_path), "--endpoint-url", world.moto.endpoint_url, "--apply"]
    )
    out, _err = capsys.readouterr()
    assert code == 0, out  # held and pinned are outcomes, not errors; nothing is left behind
    return {t["env"]: t for t in json.loads(out)["targets"]}


def roll_back(world: World, how: str, tmp_path: Path) -> str:
    """A person moves staging from 1.5.0 back to 1.4.1; returns the rollback commit."""
    text = world.read(STAGING)
    if how == "revert":
        (ours,) = [
            s
            for s in world.git_cmd("log", "--format=%H %s", "main").splitlines()
            if " imagebump(staging)" in s
        ]
        sha = ours.split()[0]
        before = world.read(STAGING, f"{sha}^")
        return world.git.commit_files(
            MANIFESTS_REPO,
            {STAGING: before},
            f'Revert "imagebump"\n\nThis reverts commit {sha}.\n',
            author=PERSON,
        )
    if how == "hand-edit":
        new = text.replace('newTag: "1.5.0"', 'newTag: "1.4.1"').replace("newTag: 1.5.0", "newTag: 1.4.1")
        assert new != text
    else:  # `imagebump set-image` on the person's checkout, then committed
        from imagebump.cli import main

        checkout = tmp_path / "checkout" / "kustomization.yaml"
        checkout.parent.mkdir()
        checkout.write_text(text)
        assert main(["set-image", str(checkout.parent), f"{world.image_uri}:1.4.1"]) == 0
        new = checkout.read_text()
    return world.git.commit_files(MANIFESTS_REPO, {STAGING: new}, "api back to 1.4.1\n", author=PERSON)


@pytest.mark.parametrize("how", ["revert", "hand-edit", "set-image"])
def test_a_rollback_stands_against_redelivery_resubmit_and_sweep_until_a_later_push(
    world: World, how: str, tmp_path: Path, capsys
) -> None:
    broken_at = NOW - timedelta(hours=2)
    digest = push(world, "1.5.0", broken_at)
    assert decisions(handle(world))["staging"][1] == "committed"
    assert by_imagebump(world.git_cmd("log", "-1", "--format=%B", "main"))  # imagebump's trailer
    rollback = roll_back(world, how, tmp_path)
    capsys.readouterr()
    after_rollback = world.rev("main")

    send_push_event(world, "1.5.0", digest)  # a redelivery of the broken image's push
    decision, action, reason = decisions(handle(world))["staging"]
    assert (decision, action) == ("held", "unchanged"), reason
    assert rollback[:7] in reason and "Ann Operator" in reason and "1.5.0 → 1.4.1" in reason

    event = builders.ecr_push_event(
        world.repository, digest, "1.5.0", account=world.account, region=world.region
    )
    resubmitted = world.executor().run({"event": json.dumps(event)})  # `argo resubmit` of the push's Workflow
    assert decisions(resubmitted)["staging"][0] == "held"

    swept = sweep_apply(world, capsys)
    assert swept["staging"]["state"] == "held" and rollback[:7] in swept["staging"]["reason"]
    assert world.rev("main") == after_rollback
    assert '1.4.1"' in world.read(STAGING) or "newTag: 1.4.1" in world.read(STAGING)

    push(world, "1.5.1", NOW + timedelta(hours=1))  # the fix, pushed after the rollback
    assert decisions(handle(world))["staging"][1] == "committed"
    assert "1.5.1" in world.read(STAGING)


def test_hold_markers_hold_in_commit_and_pr_mode(world: World, capsys) -> None:
    marked = {
        STAGING: world.read(STAGING).replace("# set by imagebump", "# imagebump:hold INC-1234 freeze"),
        PRODUCTION: world.read(PRODUCTION).replace("newTag: 1.4.0", "newTag: 1.4.0  # imagebump:hold audit"),
    }
    world.git.commit_files(MANIFESTS_REPO, marked, "freeze\n", author=PERSON)
    before, branches = world.rev("main"), world.branches()

    push(world, "1.5.0", NOW - timedelta(hours=1))
    outcome = decisions(handle(world))
    assert outcome["staging"][0] == "held" and "INC-1234 freeze" in outcome["staging"][2]
    assert outcome["production"][0] == "held" and "audit" in outcome["production"][2]
    swept = sweep_apply(world, capsys)
    assert {env: t["state"] for env, t in swept.items()} == {"staging": "held", "production": "held"}
    assert (world.rev("main"), world.branches()) == (before, branches)  # no commit, no proposal


def test_an_entry_pinned_to_another_repository_is_never_changed(world: World, capsys) -> None:
    east = world.image_uri.replace(world.region, "us-east-1")
    pinned = {
        STAGING: world.read(STAGING).replace("  newTag:", f"  newName: {east}\n  newTag:"),
        PRODUCTION: world.read(PRODUCTION).replace(
            "    newTag:", f"    newName: {world.image_uri}-hotfix\n    newTag:"
        ),
    }
    world.git.commit_files(MANIFESTS_REPO, pinned, "pin for DR and a hotfix\n", author=PERSON)
    before, branches = world.rev("main"), world.branches()

    push_image(world, "1.5.0")
    outcome = decisions(handle(world))
    assert outcome["staging"][0] == "pinned" and f"{east}:1.4.1" in outcome["staging"][2]
    assert (
        outcome["production"][0] == "pinned" and f"{world.image_uri}-hotfix:1.4.0" in outcome["production"][2]
    )
    swept = sweep_apply(world, capsys)
    assert {env: t["state"] for env, t in swept.items()} == {"staging": "pinned", "production": "pinned"}
    assert (world.rev("main"), world.branches()) == (before, branches)

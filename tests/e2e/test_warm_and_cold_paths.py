"""The warm path and the plain path give the same results, end to end.

Locally, steps are forked from the executor's warm interpreter (its modules imported, each module's
``WARM_UP`` run: botocore's parsed models and a session built before the fork, ruamel's compiled
tables); on a cluster every step is a new interpreter in a new pod. The same pushes run through the
rendered template both ways, on twin worlds (moto, a ``git http-backend`` remote with token auth,
the same digests), and must leave the same files, the same commit messages and branches, and the
same step outputs — everything but commit shas, times and the world's own names.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from imagebump.local.demo_repo import PRODUCTION_PATH, STAGING_PATH
from imagebump.local.drive import put_image, run_until_done, send_push_event
from imagebump.local.outcome import target_results
from imagebump.local.world import World, build_world
from steps.domain.intent import HISTORY_KEY
from tests.fixtures import ecr_clock

pytestmark = pytest.mark.slow

PUSHES = (("1.4.2", "sha256:" + "a" * 64), ("1.4.3", "sha256:" + "b" * 64), ("1.4.1", "sha256:" + "c" * 64))
FILES = (f"{STAGING_PATH}/kustomization.yaml", f"{PRODUCTION_PATH}/kustomization.yaml")
SHA = re.compile(r"\b[0-9a-f]{40}\b")  # a commit id (the digests are the same in both worlds)
TIME = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")  # a push time


def _outcome(world: World) -> dict[str, Any]:
    """What a user sees after the pushes, with this world's own names and every commit sha masked."""
    seen: dict[str, Any] = {"targets": []}
    for tag, digest in sorted(PUSHES):  # pushed in version order; 1.4.1's event arrives last
        put_image(world, tag, digest)
        ecr_clock.advance()  # ECR's push times have a resolution of one second (moto's too)
    events = []
    for tag, digest in PUSHES:  # one event at a time: the order is the test's, not the queue's
        events.append(send_push_event(world, tag, digest))
        report = run_until_done(world, 1, timeout=90, visibility_timeout=5)
        assert not report.timed_out
        (outcome,) = report.outcomes
        assert outcome.result.phase == "Succeeded", outcome.result.message
        for t in sorted(target_results(outcome.result), key=lambda t: t.env):
            seen["targets"].append((tag, t.env, t.decision, t.reason, t.action, t.branch, t.phase))
    seen["branches"] = world.branches()
    for ref in seen["branches"]:
        # A PR branch is rebuilt on the newest base: whether that base already holds the same event's
        # staging commit is a race between the two targets of one Workflow (in either runtime), so a
        # PR branch is compared by the file it proposes to change, and its message without the
        # Imagebump-History line: that line is written when the commit's parent is the base its
        # history was checked at, which is the same race (a loaded CI run saw it go both ways).
        files = FILES if ref == "main" else FILES[1:]
        message = world.git_cmd("log", "--format=%an <%ae>%n%B", *([] if ref == "main" else ["-1"]), ref)
        if ref != "main":
            message = "".join(
                line for line in message.splitlines(keepends=True) if not line.startswith(f"{HISTORY_KEY}:")
            )
        seen[ref] = {"files": [world.read(f, ref) for f in files], "messages": message}

    own_names = [(world.image_uri, "IMAGE"), (world.manifests_url, "REMOTE")]
    own_names += [(b, f"BRANCH{i}") for i, b in enumerate(seen["branches"]) if b != "main"]
    own_names.append((world.repository, "REPOSITORY"))  # the ECR repository: unique per world
    own_names += [(event, f"EVENT{i}") for i, event in enumerate(events)]

    def mask(value: Any) -> Any:
        if isinstance(value, str):
            for own, placeholder in own_names:
                value = value.replace(own, placeholder)
            return TIME.sub("TIME", SHA.sub("SHA", value))
        if isinstance(value, list | tuple):
            return [mask(v) for v in value]
        if isinstance(value, dict):
            return {mask(k): mask(v) for k, v in value.items()}
        return value

    return mask(seen)


def test_forked_steps_and_new_interpreters_make_the_same_changes(
    moto, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes = {}
    for way, prefork in (("forked", "1"), ("fresh", "0")):
        monkeypatch.setenv("IMAGEBUMP_LOCAL_PREFORK", prefork)
        with build_world(tmp_path / way, moto=moto) as world:
            assert world.executor().prefork is (prefork == "1")
            outcomes[way] = _outcome(world)
    forked, fresh = outcomes["forked"], outcomes["fresh"]
    # the pushes did something worth comparing: a commit, a PR branch updated, a downgrade refused
    actions = [t[4] for t in forked["targets"]]
    assert "committed" in actions and any(a.startswith("pr-") for a in actions), forked["targets"]
    assert any(t[0] == "1.4.1" and t[2] == "stale" for t in forked["targets"]), forked["targets"]
    assert forked == fresh

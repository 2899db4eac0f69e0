"""Nothing lost: pushes whose events never made it are reflected by one sweep — end to end, no mocks.

Each test builds its own world (:func:`imagebump.local.world.build_world`): moto (ECR, EventBridge,
SQS from the project's CloudFormation stack), a ``git http-backend`` remote with token auth holding
two apps (``api``, ``web``) with a staging (``mode: commit``) and a production (``mode: pr``,
``provider: local``) overlay each. The sweep is ``imagebump reconcile`` — the rendered
``image-reconcile`` CronWorkflow through the local executor — or the same executor driven directly
where a test races it against an event.

moto stores push times in whole seconds: between pushes whose order matters the tests move the
injected push clock on (``tests/fixtures/ecr_clock.py``) instead of waiting.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from imagebump.local import builders
from imagebump.local.demo_repo import MANIFESTS_REPO, PRODUCTION_PATH, STAGING_PATH, manifests_files
from imagebump.local.drive import push_image, run_until_done, send_push_event
from imagebump.local.reconciler import run_reconcile
from imagebump.local.world import World, build_world
from tests.fixtures import ecr_clock

pytestmark = pytest.mark.slow

APPS = ("api", "web")


def overlay(app: str, env: str) -> str:
    path = STAGING_PATH if env == "staging" else PRODUCTION_PATH
    return f"{path.replace('/api/', f'/{app}/')}/kustomization.yaml"


def repository(world: World, app: str) -> str:
    return world.repository.rsplit("/", 1)[0] + f"/{app}"


def put(world: World, app: str, tag: str) -> str:
    """Push ``tag`` of ``app`` to ECR only: no event (moto's ECR emits none; nothing reaches SQS)."""
    name = repository(world, app)
    digest = builders.digest_for(f"{world.stack_name}/{name}:{tag}")
    world.client("ecr").put_image(
        repositoryName=name, imageManifest=builders.image_manifest(digest), imageTag=tag, imageDigest=digest
    )
    return digest


@pytest.fixture()
def world(moto, tmp_path: Path, monkeypatch):
    with build_world(tmp_path, moto=moto) as w:
        ecr = w.client("ecr")
        web = repository(w, "web")
        ecr.create_repository(repositoryName=web)
        files = manifests_files(f"{w.registry}/{web}", staging_tag="2.0.0", production_tag="2.0.0")
        w.git.commit_files(
            MANIFESTS_REPO,
            {k.replace("/api/", "/web/"): v for k, v in files.items() if "/overlays/" in k or "/base/" in k},
            "add web",
            branch="main",
        )
        # every overlay starts current: staging holds the newest tag, production pins its digest too
        api, web_digest = put(w, "api", "1.4.1"), put(w, "web", "2.0.0")
        pins = {}
        for app, tag, digest in (("api", "1.4.1", api), ("web", "2.0.0", web_digest)):
            text = w.read(overlay(app, "production"))
            pins[overlay(app, "production")] = (
                text.replace("newTag: 1.4.0", f"newTag: {tag}").rstrip("\n") + f"\n    digest: {digest}\n"
            )
        w.git.commit_files(MANIFESTS_REPO, pins, "pin production digests", branch="main")
        monkeypatch.setenv("IMAGEBUMP_GIT_TOKEN", w.token)
        monkeypatch.delenv("IMAGEBUMP_GIT_READ_TOKEN", raising=False)
        monkeypatch.setenv("AWS_REGION", w.region)
        ecr_clock.advance()  # everything pushed from here on is newer than the overlays' images
        try:
            yield w
        finally:
            ecr.delete_repository(repositoryName=web, force=True)


def cli(world: World, *extra: str, capsys) -> tuple[int, dict, str]:
    from imagebump.cli import main

    code = main(
        ["reconcile", "--rules", str(world.rules_path), "--endpoint-url", world.moto.endpoint_url, *extra]
    )
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err


def states(summary: dict) -> dict[tuple[str, str], str]:
    return {(t["path"].split("/")[1], t["env"]): t["state"] for t in summary["targets"]}


def refs(world: World) -> dict[str, str]:
    return {ref: world.rev(ref) for ref in world.branches()}


def proposal(world: World, app: str) -> str:
    branch = next(b for b in world.branches() if b.startswith("imagebump/production/") and f"-{app}-" in b)
    return world.read(overlay(app, "production"), branch)


def test_lost_pushes_are_reflected_by_one_sweep_and_a_second_changes_nothing(world: World, capsys) -> None:
    # 1. pushes made while no sensor runs, then the queue is purged: their events are gone
    push_image(world, "1.4.2")
    web_newest = put(world, "web", "2.1.0")
    # (web's push sent no event at all: as if EventBridge had an outage)
    world.client("sqs").purge_queue(QueueUrl=world.queue_url)
    # 2. a workflow that failed all its retries (the Git host answered 503 throughout); on a
    #    cluster its message left SQS when it reached the EventBus, so nothing redelivers it
    ecr_clock.advance()
    api_newest = put(world, "api", "1.4.3")
    event = builders.ecr_push_event(
        world.repository,
        api_newest,
        "1.4.3",
        account=world.account,
        region=world.region,
        event_id="lost-in-a-failed-workflow",
    )
    world.git.fail_rate = 1.0
    failed = world.executor().run({"event": json.dumps(event)}, "image-update-failed-for-good")
    world.git.fail_rate = 0.0
    assert failed.phase == "Failed"
    assert world.queue_depth() == 0 and "1.4.1" in world.read(overlay("api", "staging"))

    code, first, err = cli(world, "--apply", capsys=capsys)

    assert code == 0, err
    assert states(first) == {
        ("api", "staging"): "behind",
        ("api", "production"): "behind",
        ("web", "staging"): "behind",
        ("web", "production"): "behind",
    }
    assert first["submitted"] == 4 and {"ecr_calls", "git_calls", "git_clones"} <= set(first)
    assert [u["updated"] for u in first["updates"]] == [True] * 4  # what the sweep's counter counts
    assert first["git_clones"] == 1  # one Git repository, four overlays
    assert 'newTag: "1.4.3"' in world.read(overlay("api", "staging"))
    assert 'newTag: "2.1.0"' in world.read(overlay("web", "staging"))
    assert f"digest: {api_newest}" in proposal(world, "api") and "newTag: 1.4.3" in proposal(world, "api")
    assert f"digest: {web_newest}" in proposal(world, "web")
    assert "STATE" in err and "behind" in err  # the table

    before = refs(world)
    code, second, err = cli(world, "--apply", capsys=capsys)

    assert code == 0, err
    assert second["submitted"] == 0
    assert states(second) == {
        ("api", "staging"): "current",
        ("api", "production"): "proposed",
        ("web", "staging"): "current",
        ("web", "production"): "proposed",
    }
    assert refs(world) == before  # nothing pushed


def test_a_dry_run_reports_without_touching_and_exits_1(world: World, capsys) -> None:
    put(world, "api", "1.4.2")
    before = refs(world)

    code, summary, err = cli(world, capsys=capsys)

    assert code == 1, err
    assert summary["submitted"] == 0
    assert states(summary)[("api", "staging")] == "behind"
    assert states(summary)[("web", "staging")] == "current"
    target = next(t for t in summary["targets"] if t["env"] == "staging" and "/api/" in t["path"])
    assert set(target) == {"repo_url", "path", "env", "current", "newest", "state", "reason"}
    assert (target["current"], target["newest"]) == ("1.4.1", "1.4.2")
    assert refs(world) == before


def test_log_format_json_makes_every_stderr_line_a_json_record(world: World, capsys) -> None:
    put(world, "api", "1.4.2")

    code, summary, err = cli(world, "--log-format", "json", capsys=capsys)

    assert code == 1, err
    assert summary["targets"], "stdout keeps the JSON summary"
    records = [json.loads(line) for line in err.splitlines()]  # every line one JSON object
    messages = [r["message"] for r in records if r.get("command") == "reconcile"]
    assert any("behind" in m and "api" in m for m in messages), "the table's rows, one record each"
    assert any(m.startswith("dry run (") for m in messages)


def test_a_dry_run_exits_75_when_the_git_remote_fails(world: World, capsys) -> None:
    """Git answering 503 throughout: every target is unknown for a transient reason, and the command
    says so with 75 (run it again), not 0 ("nothing behind") nor 1 — even though api is behind."""
    put(world, "api", "1.4.2")
    world.git.fail_rate = 1.0
    try:
        code, summary, err = cli(world, capsys=capsys)
    finally:
        world.git.fail_rate = 0.0

    assert code == 75, err
    assert set(states(summary).values()) == {"unknown"}
    assert all("cannot read" in t["reason"] for t in summary["targets"])
    assert summary["errors"] == {"refused": 0, "transient": 4, "failed": 0}
    assert "4 target(s) unknown because Git or ECR could not be read (4 transient)" in err


@pytest.mark.parametrize("apply", [False, True], ids=["dry-run", "apply"])
def test_a_wrong_read_token_exits_2(world: World, apply: bool, capsys, monkeypatch) -> None:
    """A read token the Git host refuses: every target is unknown for a refusal, which needs a fix
    (exit 2), and nothing is pushed."""
    put(world, "api", "1.4.2")
    monkeypatch.setenv("IMAGEBUMP_GIT_READ_TOKEN", "not-the-token")
    before = refs(world)

    code, summary, err = cli(world, *(["--apply"] if apply else []), capsys=capsys)

    assert code == 2, err
    assert set(states(summary).values()) == {"unknown"} and summary["submitted"] == 0
    assert summary["errors"]["refused"] == 4 and "token" in summary["targets"][0]["reason"]
    assert "not-the-token" not in err + json.dumps(summary)
    assert refs(world) == before


def test_an_overlay_pinned_ahead_is_never_touched(world: World, capsys) -> None:
    put(world, "web", "latest")  # the rules deny `latest`; staging was pinned to it by hand
    text = world.read(overlay("web", "staging")).replace('newTag: "2.0.0"', 'newTag: "latest"')
    world.git.commit_files(
        MANIFESTS_REPO, {overlay("web", "staging"): text}, "pin web to latest", branch="main"
    )
    before = world.read(overlay("web", "staging"))

    code, summary, err = cli(world, "--apply", capsys=capsys)

    assert code == 0, err
    target = next(t for t in summary["targets"] if t["env"] == "staging" and "/web/" in t["path"])
    assert target["state"] == "ahead" and "never touched" in target["reason"]
    assert world.read(overlay("web", "staging")) == before
    assert not [b for b in world.branches() if "/staging/" in b]


def test_a_living_pr_that_already_proposes_the_newest_is_left_alone(world: World, capsys) -> None:
    push_image(world, "1.4.2")
    report = run_until_done(world, 1, timeout=60, visibility_timeout=3)  # the event: commit + PR branch
    assert report.outcomes and report.outcomes[0].result.phase == "Succeeded"
    before = refs(world)

    code, summary, err = cli(world, "--apply", capsys=capsys)

    assert code == 0, err
    assert states(summary)[("api", "production")] == "proposed"
    assert states(summary)[("api", "staging")] == "current"
    assert summary["submitted"] == 0 and refs(world) == before


def test_a_sweep_racing_an_event_for_the_same_overlay_yields_one_change(world: World) -> None:
    push_image(world, "1.4.2")
    sweeper = world.reconcile_executor()
    results: dict[str, object] = {}
    threads = [
        threading.Thread(
            target=lambda: results.update(event=run_until_done(world, 1, timeout=90, visibility_timeout=5))
        ),
        threading.Thread(target=lambda: results.update(sweep=run_reconcile(sweeper, apply=True))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    event = results["event"].outcomes[0].result
    assert event.phase == "Succeeded"
    assert results["sweep"].exit_code == 0, results["sweep"].message
    commits = [s for s in world.log() if s.startswith("imagebump(")]
    assert len(commits) == 1 and 'newTag: "1.4.2"' in world.read(overlay("api", "staging"))
    (branch,) = [b for b in world.branches() if b.startswith("imagebump/production/")]
    assert len(world.log(f"main..{branch}")) == 1  # one proposal commit, whoever made it
    # the sweep's counter counts only the changes the sweep made, never one the event made: the
    # two changes (staging commit, production PR) are counted once between the event and the sweep
    by_event = [event.item_node("update-target", i).outputs.get("action") for i in range(2)]
    by_sweep = sum(u["updated"] for u in results["sweep"].updates)
    assert sum(a in ("committed", "pr-created") for a in by_event) + by_sweep == 2, (
        by_event,
        results["sweep"].updates,
    )


def test_a_sweep_update_that_changes_nothing_is_not_counted(world: World) -> None:
    """The counter `imagebump_reconcile_updates_total` counts what a sweep really changed. Through
    the local executor: an event updates api's staging overlay after the sweep found it behind but
    before its update-target ran (injected when update-target takes the overlay's mutex, which the
    event would hold) — that update changes nothing and is not counted; production's PR is."""
    import re

    put(world, "api", "1.4.2")
    staging = overlay("api", "staging")

    def event_first(record: dict) -> None:
        if record.get("event") == "mutex-acquired" and "overlays/staging" in str(record.get("mutex")):
            text = re.sub(r'newTag: "?1\.4\.1"?', 'newTag: "1.4.2"', world.read(staging))
            world.git.commit_files(
                MANIFESTS_REPO, {staging: text}, "the event got there first", branch="main"
            )

    world.log_sink = event_first
    try:
        sweep = run_reconcile(world.reconcile_executor(), apply=True)
    finally:
        world.log_sink = None

    assert sweep.exit_code == 0, sweep.message
    updates = {u["path"].split("/")[-1]: u for u in sweep.updates if "/api/" in u["path"]}
    assert updates["staging"]["ok"] and not updates["staging"]["updated"], updates["staging"]
    assert updates["production"]["outcome"] == "pr-created" and updates["production"]["updated"]
    assert [s for s in world.log() if s.startswith("imagebump(")] == []  # the sweep committed nothing


def test_run_local_sweeps_every_interval(world: World, capsys) -> None:
    """`imagebump run --local --reconcile-every 1s`: a push whose event was purged is reflected by the
    embedded sweep while the sensor runs (it stops after the one event the test sends at the end)."""
    from imagebump.cli import main

    digest = put(world, "api", "1.4.2")  # no event yet
    box: dict[str, int] = {}
    argv = [
        "run",
        "--local",
        "--queue-url",
        world.queue_url,
        "--endpoint-url",
        world.moto.endpoint_url,
        "--rules",
        str(world.rules_path),
        "--wait-seconds",
        "1",
        "--visibility-timeout",
        "5",
        "--reconcile-every",
        "1s",
        "--max-events",
        "1",
    ]
    thread = threading.Thread(target=lambda: box.update(code=main(argv)))
    thread.start()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and '"1.4.2"' not in (world.read(overlay("api", "staging")) or ""):
        time.sleep(0.5)
    send_push_event(world, "1.4.2", digest)  # its event, late: one event, so the sensor (max-events 1) ends
    thread.join(timeout=120)

    out = capsys.readouterr().out
    assert box.get("code") == 0
    assert 'newTag: "1.4.2"' in world.read(overlay("api", "staging"))
    assert "reconcile 1:" in out


GOOD_RULES = (
    "- registryURI: 123456789012.dkr.ecr.us-west-2.amazonaws.com/team/$1\n"
    "  githubRepository: https://github.com/o/r/apps/$1\n"
)


@pytest.mark.parametrize(
    ("rules", "argv", "env", "message"),
    [
        pytest.param(GOOD_RULES, ["--concurrency", "0"], {}, "--concurrency 0", id="concurrency"),
        pytest.param(
            GOOD_RULES,
            ["--apply"],
            {"IMAGEBUMP_GIT_TOKEN": "", "IMAGEBUMP_GIT_TOKEN_FILE": ""},
            "IMAGEBUMP_GIT_TOKEN is not set",
            id="apply-without-a-token",
        ),
        pytest.param(
            "- registryURI: nope\n  githubRepository: https://github.com/o/r/x\n",
            [],
            {},
            "rule 0: registryURI",
            id="bad-rules",
        ),
        pytest.param(None, [], {}, "cannot read it", id="missing-rules-file"),
        pytest.param(GOOD_RULES, ["--endpoint-url", "notaurl"], {}, "--endpoint-url 'notaurl'", id="bad-url"),
        pytest.param(GOOD_RULES, ["--endpoint-url", "ftp://h"], {}, "expected http://", id="bad-scheme"),
    ],
)
def test_bad_input_exits_2_with_a_message(rules, argv, env, message, tmp_path, monkeypatch, capsys) -> None:
    from imagebump.cli import main

    path = tmp_path / "rules.yaml"
    if rules is not None:
        path.write_text(rules)
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    assert main(["reconcile", "--rules", str(path), *argv]) == 2
    out, err = capsys.readouterr()
    assert message in err and "Traceback" not in err and out == ""


def test_the_demo_shows_a_lost_push_followed_by_one_sweep(capsys) -> None:
    from imagebump.cli import main

    assert main(["demo", "--lost-push", "--json"]) == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    sweep = summary["sweep"]
    assert sweep["lost_tag"] == "1.5.0" and sweep["submitted"] == 3  # two overlays and the Helm values file
    assert sorted(u["outcome"] for u in sweep["updates"]) == ["committed", "committed", "pr-updated"]

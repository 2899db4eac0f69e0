"""Issue 23, sections 1 and 2, on the step functions: a person's rollback and a hold marker hold an
entry, a pin is never rewritten — edit-kustomize, commit-pr's re-check and the reconcile sweep,
against a real ``git http-backend`` remote and moto's ECR (push times injected, never slept for).
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

import pytest

from imagebump.local import builders
from steps import kustomize
from steps.commit_pr.decide import decide as commit_pr_decide
from steps.commit_pr.message import DEFAULT_TEMPLATE, commit_message, message_fields, pr_text
from steps.domain.intent import by_imagebump, older, trailer
from steps.domain.models import ImagesEntry, Plan, Target
from steps.edit_kustomize.step import run
from steps.git import GitAuth
from steps.reconcile.step import scan_targets as sweep
from steps.rules import load_rules
from tests.fixtures.ecr_times import ACCOUNT, set_pushed_at

REGION = "us-west-2"
OVERLAY = "apps/api/overlays/prod"
FILE = f"{OVERLAY}/kustomization.yaml"
NOW = datetime.now(UTC).replace(microsecond=0)
BEFORE = NOW - timedelta(hours=3)  # 1.4.1 was pushed
BROKEN = NOW - timedelta(hours=2)  # 1.5.0 (the image people roll back) was pushed
FIX = NOW + timedelta(hours=1)  # a push after the rollback commit (committed at the wall clock)
PERSON = "Ann Operator <ann@example.com>"

plan_step = run.__wrapped__


@pytest.fixture(autouse=True)
def _env(git_env, outputs_dir, monkeypatch, moto):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    monkeypatch.setenv("AWS_REGION", REGION)


@pytest.fixture()
def ecr(moto):
    """A fresh ECR repository holding 1.4.1 and 1.5.0, with their push times injected."""
    name = f"team/api-{secrets.token_hex(4)}"
    client = moto.client("ecr")
    client.create_repository(repositoryName=name)

    def push(tag: str, when: datetime) -> str:
        digest = builders.digest_for(f"{name}:{tag}:{secrets.token_hex(4)}")
        client.put_image(
            repositoryName=name,
            imageManifest=builders.image_manifest(digest),
            imageTag=tag,
            imageDigest=digest,
        )
        set_pushed_at(name, tag, when)
        return digest

    push("1.4.1", BEFORE)
    push("1.5.0", BROKEN)
    yield name, push
    # the session's ECR outlives the test: what it created goes, so no later world (a demo's sweep
    # reads every repository its rules match) finds it
    client.delete_repository(repositoryName=name, force=True)


def _uri(name: str) -> str:
    return f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/{name}"


def _text(image: str, tag: str, *, new_name: str | None = None, comment: str = "") -> str:
    text = builders.kustomization([{"name": image, "newName": new_name, "newTag": tag}])
    return text.replace(f"newTag: {tag}\n", f"newTag: {tag}{comment}\n") if comment else text


def _target(remote, image: str, tag: str, pushed_at: datetime | None, **extra) -> Target:
    fields = {"order": "push-time", "mode": "commit", "provider": "local", **extra}
    return Target(
        rule=0,
        repo_url=remote.url,
        path=OVERLAY,
        env="prod",
        image=image,
        tag=tag,
        pushed_at=pushed_at,
        **fields,
    )


def _imagebump_commit(remote, image: str, old: str, new: str, branch: str = "main") -> str:
    """What commit-pr commits for an event (its message, built by the real message functions)."""
    target = Target(rule=0, repo_url=remote.url, path=OVERLAY, env="prod", image=image, tag=new)
    plan = Plan(
        changed=True,
        decision="update",
        file=FILE,
        image_name=image,
        old=ImagesEntry(name=image, newTag=old),
        new=ImagesEntry(name=image, newTag=new),
    )
    message = commit_message(DEFAULT_TEMPLATE, message_fields(target, plan, plan.old, "main"))
    return remote.server.commit_files(
        remote.name, {FILE: _text(image, new)}, message, author="imagebump <ib@x>", branch=branch
    )


def _merge(remote, side: str, message: str, file: str = FILE) -> str:
    """A person's merge commit of the commit ``side`` into the main line, taking the side's ``file``
    whole (the rest of the tree: the main line's). The merge."""
    text = remote.server.git(remote.name, "show", f"{side}:{file}")
    return remote.server.commit_files(
        remote.name, {file: text}, message, remote.default_branch, author=PERSON, merged=[side]
    )


def _merge_taking_side(remote, base: str, files: dict[str, str], message: str, file: str = FILE) -> str:
    """A person's branch that left the main line at ``base`` (its work: ``files``), merged by taking
    the branch's version of ``file`` whole (a stale branch merged with "theirs"). The merge."""
    remote.server.git(remote.name, "update-ref", "refs/heads/side", base)
    side = remote.server.commit_files(remote.name, files, "side work\n", branch="side", author=PERSON)
    return _merge(remote, side, message, file)


def _merge_pull_request(remote, image: str, old: str, new: str, number: int) -> str:
    """imagebump's branch for ``old → new``, made on the main line's tip, merged with GitHub's merge
    commit (by a person). The merge."""
    tip = remote.server.git(remote.name, "rev-parse", f"refs/heads/{remote.default_branch}").strip()
    remote.server.git(remote.name, "update-ref", f"refs/heads/imagebump/{number}", tip)
    side = _imagebump_commit(remote, image, old, new, branch=f"imagebump/{number}")
    return _merge(remote, side, f"Merge pull request #{number} from o/imagebump/{number}\n")


def _roll_back(remote, image: str, how: str, imagebump_sha: str) -> str:
    """A person moves the entry from 1.5.0 back to 1.4.1, four ways."""
    now = remote.read(FILE)
    if how == "stale-merge":  # a branch that left before imagebump's commit, merged taking its file
        return _merge_taking_side(
            remote, f"{imagebump_sha}^", {"docs/side.md": "x\n"}, "Merge branch 'side'\n"
        )
    if how == "revert":
        text, message = _text(image, "1.4.1"), f'Revert "imagebump"\n\nThis reverts commit {imagebump_sha}.\n'
    elif how == "hand-edit":
        text, message = now.replace("newTag: 1.5.0", "newTag: 1.4.1"), "api: back to 1.4.1, 1.5.0 is broken\n"
    else:  # what `imagebump set-image OVERLAY IMAGE:1.4.1` writes, committed by the person
        text, message = kustomize.set_image(now, image, tag="1.4.1"), "set-image api 1.4.1\n"
    return remote.server.commit_files(remote.name, {FILE: text}, message, author=PERSON)


# --- the trailer --------------------------------------------------------------------------------


def test_every_commit_and_pr_body_carries_the_trailer_whatever_the_template() -> None:
    image = _uri("team/api")
    target = Target(rule=0, repo_url="https://github.com/o/r", path=OVERLAY, image=image, tag="1.5.0")
    plan = Plan(
        changed=True,
        decision="update",
        file=FILE,
        image_name="api",
        new=ImagesEntry(name="api", newTag="1.5.0"),
    )
    fields = message_fields(target, plan, None, "main")
    for template in (DEFAULT_TEMPLATE, "deploy {new}", "x\n\nSigned-off-by: Bot <b@x>"):
        message = commit_message(template, fields)
        assert message.rstrip().endswith(trailer(image, "1.5.0", None)) and by_imagebump(message)
    _title, body = pr_text(fields, commit_message("deploy {new}", fields))
    assert by_imagebump(body)  # a squash merge that takes the PR's description keeps it
    assert not by_imagebump('Revert "imagebump(prod): api 1.4.1 → 1.5.0"\n\nThis reverts commit abc.\n')


@pytest.mark.parametrize(
    ("order", "before", "after", "times", "expected"),
    [
        pytest.param("semver", "1.5.0", "1.4.1", {}, True, id="semver-back"),
        pytest.param("semver", "1.4.1", "1.5.0", {}, False, id="semver-forward"),
        pytest.param("semver", "1.5.0", "main", {}, False, id="semver-not-a-version"),
        pytest.param("none", "1.4.1", "1.5.0", {}, True, id="none-any-change"),
        pytest.param("push-time", "b", "a", {"a": BEFORE, "b": BROKEN}, True, id="push-time-back"),
        pytest.param("push-time", "a", "b", {"a": BEFORE, "b": BROKEN}, False, id="push-time-forward"),
        pytest.param("push-time", "b", "a", {"b": BROKEN}, False, id="push-time-unknown"),
    ],
)
def test_older_by_the_rules_order(order, before, after, times, expected) -> None:
    at = {tag: times.get(tag) for tag in (before, after)}
    assert (
        older(
            ImagesEntry(name="api", newTag=before),
            ImagesEntry(name="api", newTag=after),
            order,
            lambda e: at[e.newTag],
        )
        is expected
    )


# --- edit-kustomize: a rollback is held -----------------------------------------------------------


@pytest.mark.parametrize("how", ["revert", "hand-edit", "set-image", "stale-merge"])
@pytest.mark.parametrize("order", ["push-time", "semver"])
def test_a_rollback_holds_until_an_image_pushed_after_it(make_remote, ecr, how, order) -> None:
    name, push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    rollback = _roll_back(remote, image, how, ours)

    again = plan_step(_target(remote, image, "1.5.0", BROKEN, order=order))  # a redelivery or a resubmit
    assert (again.decision, again.changed) == ("held", False), again.reason
    assert rollback[:7] in again.reason and "Ann Operator" in again.reason and "1.5.0 → 1.4.1" in again.reason

    push("1.5.1", FIX)  # the team shipped a fix, after the rollback
    fixed = plan_step(_target(remote, image, "1.5.1", FIX, order=order))
    assert (fixed.decision, fixed.changed, fixed.plan.new.newTag) == ("update", True, "1.5.1"), fixed.reason


def test_under_order_none_any_change_by_someone_else_holds(make_remote, ecr) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    remote.server.commit_files(remote.name, {FILE: _text(image, "1.6.0-rc1")}, "try the rc\n", author=PERSON)
    out = plan_step(_target(remote, image, "1.5.0", BROKEN, order="none"))
    assert out.decision == "held" and "1.5.0 → 1.6.0-rc1" in out.reason


def test_a_person_moving_the_entry_forward_lifts_the_hold(make_remote, ecr) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    _roll_back(remote, image, "revert", ours)
    remote.server.commit_files(remote.name, {FILE: _text(image, "1.4.2")}, "1.4.2 is fine\n", author=PERSON)
    out = plan_step(_target(remote, image, "1.5.0", BROKEN, order="semver"))
    assert out.decision == "update", out.reason


def test_imagebumps_own_changes_and_changes_to_other_entries_hold_nothing(make_remote, ecr) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    text = remote.read(FILE).replace("resources:", "namespace: prod\nresources:")
    remote.server.commit_files(remote.name, {FILE: text}, "namespace\n", author=PERSON)
    out = plan_step(_target(remote, image, "1.5.1", None, order="semver"))
    assert out.decision == "update", out.reason


def test_a_rollback_older_than_the_bound_is_not_read(make_remote, ecr) -> None:
    """The history is bounded: 20 commits that touched the file; a rollback further back holds nothing."""
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    _roll_back(remote, image, "revert", ours)
    for i in range(20):
        text = remote.read(FILE).replace("resources:", f"# note {i}\nresources:", 1)
        remote.server.commit_files(remote.name, {FILE: text}, f"note {i}\n", author=PERSON)
    out = plan_step(_target(remote, image, "1.5.0", BROKEN, order="semver"))
    assert out.decision == "update", out.reason


# --- the hold marker and pins -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["commit", "pr"])
def test_a_hold_marker_holds_in_both_modes_and_commit_pr_rechecks_it(make_remote, ecr, mode) -> None:
    name, _push = ecr
    image = _uri(name)
    text = _text(image, "1.4.1", comment="  # imagebump:hold INC-1234 freeze")
    remote = make_remote({FILE: text})
    out = plan_step(_target(remote, image, "1.5.0", BROKEN, mode=mode))
    assert (out.decision, out.changed) == ("held", False)
    assert "INC-1234 freeze" in out.reason
    # a plan made before the marker was added is not applied over it either
    target = _target(remote, image, "1.5.0", BROKEN, mode=mode)
    stale = Plan(
        changed=True,
        decision="update",
        file=FILE,
        image_name=image,
        old=ImagesEntry(name=image, newTag="1.4.1"),
        new=ImagesEntry(name=image, newTag="1.5.0"),
    )
    applied = commit_pr_decide(text, target, stale)
    assert applied.text is None and "INC-1234" in applied.reason


@pytest.mark.parametrize(
    "new_name",
    [
        pytest.param(f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/team/api", id="another-region"),
        pytest.param(f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/team/api-hotfix", id="another-repository"),
    ],
)
@pytest.mark.parametrize("by", ["image-name", "name-is-the-pushed-uri"])
def test_a_pinned_entry_is_never_rewritten(make_remote, ecr, new_name, by) -> None:
    name, _push = ecr
    image = _uri(name)
    entry = "api" if by == "image-name" else image
    remote = make_remote({FILE: _text(entry, "1.4.1", new_name=new_name)})
    extra = {"image_name": "api"} if by == "image-name" else {}
    out = plan_step(_target(remote, image, "1.5.0", BROKEN, **extra))
    assert (out.decision, out.changed) == ("pinned", False)
    assert f"{new_name}:1.4.1" in out.reason


# --- the sweep -------------------------------------------------------------------------------------


def _rules(remote, name: str, order: str = "push-time"):
    return load_rules(
        f"- registryURI: {_uri(name)}\n  githubRepository: {remote.url}/{OVERLAY}\n"
        f"  env: prod\n  mode: commit\n  provider: local\n  order: {order}\n"
    )


def test_the_sweep_holds_a_rolled_back_entry_until_a_later_push(make_remote, ecr, git_token) -> None:
    name, push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    rollback = _roll_back(remote, image, "revert", ours)
    rules, auth = _rules(remote, name), GitAuth(git_token)

    held = sweep(rules, auth=auth)
    (row,) = held.report
    assert (row.state, held.targets, held.behind) == ("held", [], 0)
    assert rollback[:7] in row.reason and "1.5.0 → 1.4.1" in row.reason
    assert {(c.state, c.count) for c in held.counts if c.count} == {("held", 1)}

    push("1.5.1", FIX)
    moved = sweep(rules, auth=auth)
    assert [(t.tag, t.path) for t in moved.targets] == [("1.5.1", OVERLAY)]
    assert moved.report[0].state == "behind"


def test_a_sweep_with_nothing_behind_reads_no_history(make_remote, ecr, git_token) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    _roll_back(remote, image, "revert", ours)
    remote.server.commit_files(remote.name, {FILE: _text(image, "1.5.0")}, "forward\n", author=PERSON)
    out = sweep(_rules(remote, name), auth=GitAuth(git_token))
    assert out.report[0].state == "current"
    assert (out.git_clones, out.git_calls) == (1, 1)  # the clone, and nothing else


def test_the_sweep_reports_markers_and_pins_and_never_hands_them_over(make_remote, ecr, git_token) -> None:
    name, _push = ecr
    image = _uri(name)
    other = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/{name}"
    remote = make_remote(
        {
            FILE: _text(image, "1.4.1", comment="  # imagebump:hold INC-9"),
            "apps/api/overlays/dr/kustomization.yaml": _text(image, "1.4.1", new_name=other),
        }
    )
    rules = load_rules(
        "".join(
            f"- registryURI: {_uri(name)}\n  githubRepository: {remote.url}/apps/api/overlays/{env}\n"
            f"  env: {env}\n  mode: commit\n  provider: local\n"
            for env in ("prod", "dr")
        )
    )
    out = sweep(rules, auth=GitAuth(git_token))
    states = {t.env: (t.state, t.reason) for t in out.report}
    assert states["prod"][0] == "held" and "INC-9" in states["prod"][1]
    assert states["dr"][0] == "pinned" and f"{other}:1.4.1" in states["dr"][1]
    assert out.targets == []


def test_the_marker_survives_an_edit_that_removes_its_line() -> None:
    """A tag alone drops the digest: the digest's line goes, its hold marker stays (on its own line)."""
    digest = "sha256:" + "a" * 64
    text = f"images:\n- name: api\n  newTag: 1.4.1\n  digest: {digest}  # imagebump:hold INC-5\n"
    edited = kustomize.set_image(text, "api", tag="1.5.0")
    assert digest not in edited and "newTag: 1.5.0" in edited
    assert kustomize.hold_marker(edited, "api") == "INC-5"
    dash = f"images:\n- digest: {digest}  # imagebump:hold INC-6\n  name: api\n  newTag: 1.4.1\n"
    assert kustomize.hold_marker(kustomize.set_image(dash, "api", tag="1.5.0"), "api") == "INC-6"


def test_commit_pr_does_not_rewrite_an_entry_pinned_since_the_plan() -> None:
    image = _uri("team/api")
    east = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/team/api"
    target = Target(
        rule=0, repo_url="https://github.com/o/r", path=OVERLAY, image=image, tag="1.5.0", order="none"
    )
    plan = Plan(
        changed=True,
        decision="update",
        file=FILE,
        image_name=image,
        old=ImagesEntry(name=image, newTag="1.4.1"),
        new=ImagesEntry(name=image, newTag="1.5.0"),
    )
    applied = commit_pr_decide(_text(image, "1.4.1", new_name=east), target, plan)
    assert applied.text is None and f"{east}:1.4.1" in applied.reason


def test_an_event_that_changes_nothing_reads_no_history(make_remote, ecr) -> None:
    """The history is read only for a target that would change: a redelivery for the image the
    overlay holds costs what it cost before; an update pays at most one request (the file's earlier
    versions, unless the clone holds them all already: issue 33, the commits come with the clone)."""
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    for i in range(3):  # a history deeper than the clone's one commit
        remote.server.commit_files(remote.name, {"README.md": f"{i}\n"}, f"readme {i}\n", author=PERSON)

    def requests(tag: str, at: datetime) -> tuple[str, int]:
        before = remote.server.read_sessions(remote.name)
        out = plan_step(_target(remote, image, tag, at, order="semver"))
        return out.decision, remote.server.read_sessions(remote.name) - before

    (current, quiet), (update, busy) = requests("1.4.1", BEFORE), requests("1.5.0", BROKEN)
    assert (current, update) == ("current", "update")
    assert busy - quiet <= 1


def test_an_image_pushed_in_the_rollbacks_second_lifts_it_but_the_rolled_back_one_does_not() -> None:
    """Git's commit time has whole seconds (so does moto's push time): a fix pushed within the
    rollback's second lifts the hold; the image the rollback moved away from, redelivered, does not."""
    from steps.domain.intent import ImageChange, rollback_hold

    at = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)
    change = ImageChange(
        "c0ffee1",
        "Dana <dana@example.com>",
        at,
        "revert: 1.5.0 is broken\n",
        ImagesEntry(name="api", newTag="1.5.0"),
        ImagesEntry(name="api", newTag="1.4.1"),
    )
    assert rollback_hold(change, at, "1.5.1") is None  # the fix, the same second
    assert rollback_hold(change, at + timedelta(milliseconds=400), "1.5.1") is None
    assert rollback_hold(change, at, "1.5.0") is not None  # the broken image again
    assert rollback_hold(change, at - timedelta(seconds=1), "1.5.1") is not None  # pushed before it
    assert rollback_hold(change, None, "1.5.1") is not None  # push time unknown


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param("- name: api  # imagebump:hold why\n  newTag: 1.4.1\n", id="on-the-dash-line-key"),
        pytest.param("- # imagebump:hold why\n  name: api\n  newTag: 1.4.1\n", id="dash-then-comment"),
        pytest.param("- name: api\n  newTag: 1.4.1  # imagebump:hold why\n", id="after-a-value"),
        pytest.param("- name: api\n  # imagebump:hold why\n  newTag: 1.4.1\n", id="own-line-inside"),
        pytest.param("# imagebump:hold why\n- name: api\n  newTag: 1.4.1\n", id="directly-above"),
        pytest.param("- {name: api, newTag: 1.4.1}  # imagebump:hold why\n", id="flow-entry"),
    ],
)
def test_a_hold_marker_on_any_line_of_the_entry_holds_it_and_no_other(entry: str) -> None:
    text = "images:\n" + entry + "- name: web\n  newTag: 2.0.0\n"
    assert kustomize.hold_marker(text, "api") == "why"
    assert kustomize.hold_marker(text, "web") is None

"""Issue 30 items 1, 3, 4, 6 and issue 31 items 1-3 on the step functions: every standing rollback
of an entry's history holds (a hotfix older than the rolled-back image lifts nothing), renames keep
the history, commit-pr re-checks rollbacks on the newest base, imagebump's squash-merged pull
request stays imagebump's, and no commit's text, size or date can forge, exhaust or stop the read.

Against a real ``git http-backend`` remote and moto's ECR (push times injected, never slept for).
"""

from __future__ import annotations

import subprocess
import tracemalloc
from datetime import timedelta

import pytest

from steps.edit_kustomize.step import run
from steps.git import GitAuth
from steps.reconcile.step import scan_targets as sweep
from tests.steps.domain import test_intent as _intent
from tests.steps.domain.test_intent import (
    BROKEN,
    FILE,
    FIX,
    OVERLAY,
    PERSON,
    _imagebump_commit,
    _roll_back,
    _rules,
    _target,
    _text,
    _uri,
)

plan_step = run.__wrapped__
_env = _intent._env  # the autouse fixture: git and AWS settings
ecr = _intent.ecr  # the ECR repository holding 1.4.1 and 1.5.0
LATER = FIX + timedelta(hours=1)


def _git(remote, *args: str, input: bytes | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=remote.bare, input=input, capture_output=True, check=True
    ).stdout.decode()


def _rewrite_tip(remote, *, message: bytes | None = None, committer_time: str | None = None) -> str:
    """Rewrite the branch's tip commit object as a hostile pusher could (``hash-object --literally``:
    any message bytes, any committer time), keeping its tree and parents."""
    raw = subprocess.run(
        ["git", "cat-file", "commit", remote.default_branch], cwd=remote.bare, capture_output=True, check=True
    ).stdout
    head, _, body = raw.partition(b"\n\n")
    lines = head.split(b"\n")
    if committer_time is not None:
        for i, line in enumerate(lines):
            if line.startswith(b"committer "):
                ident = line.rpartition(b">")[0] + b">"
                lines[i] = ident + b" " + committer_time.encode() + b" +0000"
    new = b"\n".join(lines) + b"\n\n" + (body if message is None else message)
    sha = _git(remote, "hash-object", "-t", "commit", "--literally", "-w", "--stdin", input=new).strip()
    _git(remote, "update-ref", f"refs/heads/{remote.default_branch}", sha)
    return sha


# --- issue 30 item 1: semver, a hotfix older than the rolled-back image ------------------------------


def test_semver_a_hotfix_older_than_the_rolled_back_image_lifts_nothing(make_remote, ecr, git_token) -> None:
    name, push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    _roll_back(remote, image, "hand-edit", ours)
    push("1.4.2", FIX)  # the hotfix on the older line, pushed after the rollback
    hotfix = plan_step(_target(remote, image, "1.4.2", FIX, order="semver"))
    assert hotfix.decision == "update", hotfix.reason  # welcome
    _imagebump_commit(remote, image, "1.4.1", "1.4.2")  # and it lands

    again = plan_step(_target(remote, image, "1.5.0", BROKEN, order="semver"))  # redelivery / resubmit
    assert (again.decision, again.changed) == ("held", False), again.reason
    swept = sweep(_rules(remote, name, order="semver"), auth=GitAuth(git_token))
    assert ([r.state for r in swept.report], swept.targets) == (["held"], [])

    push("1.5.1", LATER)  # newer than the rolled-back image, pushed after the rollback
    fixed = plan_step(_target(remote, image, "1.5.1", LATER, order="semver"))
    assert fixed.decision == "update", fixed.reason


def test_semver_the_rolled_back_version_rebuilt_after_the_rollback_stays_out(make_remote, ecr) -> None:
    name, push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    _roll_back(remote, image, "revert", ours)
    rebuilt = push("1.5.0", FIX)  # the same version pushed again after the rollback
    out = plan_step(
        _target(remote, image, "1.5.0", FIX, order="semver").model_copy(update={"digest": rebuilt})
    )
    assert out.decision == "held", out.reason


# --- issue 30 item 3: renames ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "new_file",
    [f"{OVERLAY}/kustomization.yml", "apps/api/overlays/production/kustomization.yaml"],
    ids=["yaml-to-yml", "overlay-moved"],
)
def test_a_rename_after_the_rollback_keeps_it(make_remote, ecr, new_file) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    _roll_back(remote, image, "revert", ours)
    text = remote.read(FILE)
    remote.server.commit_files(remote.name, {FILE: None, new_file: text}, "rename\n", author=PERSON)
    overlay = new_file.rpartition("/")[0]
    out = plan_step(_target(remote, image, "1.5.0", BROKEN).model_copy(update={"path": overlay}))
    assert out.decision == "held", out.reason


def test_a_rename_with_an_edit_keeps_the_rollback(make_remote, ecr) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    _roll_back(remote, image, "revert", ours)
    new_file = f"{OVERLAY}/kustomization.yml"
    text = remote.read(FILE).replace("resources:", "namespace: prod\nresources:")
    remote.server.commit_files(remote.name, {FILE: None, new_file: text}, "rename, edit\n", author=PERSON)
    out = plan_step(_target(remote, image, "1.5.0", BROKEN))
    assert out.decision == "held", out.reason


# --- issue 30 item 6: order none, imagebump's own PR squash-merged with its title only ---------------


def test_order_none_imagebumps_squash_merged_pr_with_a_title_only_stays_imagebumps(make_remote, ecr) -> None:
    name, push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    main = remote.rev()
    head = _imagebump_commit(remote, image, "1.4.1", "1.5.0")  # imagebump's PR branch head
    _git(remote, "update-ref", "refs/pull/7/head", head)  # what GitHub keeps for PR #7
    _git(remote, "update-ref", "refs/heads/main", main)  # the PR is not merged yet
    title = "imagebump(prod): api 1.4.1 → 1.5.0 in apps/api/overlays/prod (#7)\n"
    remote.server.commit_files(remote.name, {FILE: _text(image, "1.5.0")}, title, author=PERSON)  # squash
    push("1.5.1", BROKEN + timedelta(minutes=5))
    out = plan_step(_target(remote, image, "1.5.1", BROKEN + timedelta(minutes=5), order="none"))
    assert out.decision == "update", out.reason


def test_order_none_a_persons_pr_squash_merged_is_still_a_persons_change(make_remote, ecr) -> None:
    name, push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    mine = remote.server.commit_files(remote.name, {FILE: _text(image, "1.4.1")}, "back\n", author=PERSON)
    _git(remote, "update-ref", "refs/pull/8/head", mine)  # a person's PR, no trailer
    remote.server.commit_files(remote.name, {FILE: _text(image, "1.4.0")}, "pin 1.4.0 (#8)\n", author=PERSON)
    out = plan_step(_target(remote, image, "1.5.0", BROKEN, order="none"))
    assert out.decision == "held", out.reason


# --- issue 31 item 3: no commit text can forge a field ------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        b"back to 1.4.1\x1f because\x1e of \x1f:100644 100644 --all --upload-pack=x 0000 M\n",
        b"back\n\x1e" + b"f" * 40 + b"\x1fx <y>\x1f1\x1fmsg\x1f\n:100644 100644 --all --mirror M\tx\n",
        b"back\0with a NUL\n",
    ],
    ids=["separators", "forged-record", "nul"],
)
def test_a_rollback_whose_message_forges_fields_is_still_a_rollback(make_remote, ecr, message) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    _roll_back(remote, image, "hand-edit", ours)
    _rewrite_tip(remote, message=message)
    out = plan_step(_target(remote, image, "1.5.0", BROKEN))
    assert out.decision == "held", out.reason


def test_a_forged_raw_line_in_an_unrelated_commit_blocks_nothing(make_remote, ecr) -> None:
    name, push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    text = remote.read(FILE).replace("resources:", "namespace: prod\nresources:")
    remote.server.commit_files(remote.name, {FILE: text}, "x\n", author=PERSON)
    forged = b"ns\n\x1f\n:100644 100644 " + b"a" * 40 + b" --all M\tx\n\x1e"
    _rewrite_tip(remote, message=forged)
    push("1.5.1", FIX)
    out = plan_step(_target(remote, image, "1.5.1", FIX))
    assert out.decision == "update", out.reason


# --- issue 31 item 2: dates that Python cannot hold ---------------------------------------------------


@pytest.mark.parametrize(
    ("stamp", "decision"),
    [("99999999999999", "held"), ("-5000000000", "held"), ("253402300800", "held")],
    ids=["after-9999", "before-1970", "just-after-9999"],
)
def test_a_rollback_dated_beyond_what_python_holds_does_not_raise(make_remote, ecr, stamp, decision) -> None:
    """A far-future rollback holds (nothing was pushed after it); one before 1970 holds the image
    that was rolled back (pushed before it? no: after) — either way a decision, never a traceback."""
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    _roll_back(remote, image, "hand-edit", ours)
    _rewrite_tip(remote, committer_time=stamp)
    out = plan_step(_target(remote, image, "1.5.0", BROKEN))
    expected = "update" if stamp.startswith("-") else decision
    assert out.decision == expected, out.reason


# --- issue 31 item 1: bounded by bytes ----------------------------------------------------------------


def _history(repo, image):
    from steps.entry_history import entry_history

    return entry_history(repo, repo.head(), FILE, image)


def _clone(remote, token: str):
    from steps import git

    return git.clone(remote.url, remote.bare.parent / f"clone-{remote.rev()[:8]}", auth=GitAuth(token))


def test_huge_messages_are_read_within_a_bounded_memory(make_remote, ecr, git_token) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    _roll_back(remote, image, "hand-edit", ours)
    big = b"x" * (8 * 1024 * 1024)
    _rewrite_tip(remote, message=b"back to 1.4.1\n\n" + big + b"\n")
    for i in range(3):
        text = remote.read(FILE).replace("resources:", f"# note {i}\nresources:", 1)
        remote.server.commit_files(remote.name, {FILE: text}, f"note {i}\n", author=PERSON)
        _rewrite_tip(remote, message=f"note {i}\n\n".encode() + big)
    repo = _clone(remote, git_token)
    tracemalloc.start()
    try:
        found = _history(repo, image)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [c.after.newTag for c in found.changes] == ["1.4.1", "1.5.0"]
    assert peak < 4 * 1024 * 1024, peak  # 4 x 8 MB of messages, never held whole
    out = plan_step(_target(remote, image, "1.5.0", BROKEN))
    assert out.decision == "held", out.reason


def test_a_huge_old_version_of_the_file_ends_the_read_with_a_reason(make_remote, ecr, git_token) -> None:
    name, push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    _roll_back(remote, image, "hand-edit", ours)
    huge = remote.read(FILE) + "# " + "y" * (6 * 1024 * 1024) + "\n"
    remote.server.commit_files(remote.name, {FILE: huge}, "huge\n", author=PERSON)
    remote.server.commit_files(remote.name, {FILE: _text(image, "1.4.1")}, "small again\n", author=PERSON)
    repo = _clone(remote, git_token)
    tracemalloc.start()
    try:
        found = _history(repo, image)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found.bound and "bytes" in found.bound  # the read stopped there, and says why
    assert peak < 3 * 1024 * 1024, peak  # a 6 MB version, never held whole
    push("1.5.1", FIX)
    out = plan_step(_target(remote, image, "1.5.1", FIX))
    assert out.decision == "update" and "bytes" in out.reason  # goes ahead, and says how far it read


# --- issue 30 item 4: commit-pr re-checks rollbacks on the newest base ---------------------------------


@pytest.mark.parametrize("mode", ["commit", "pr"])
@pytest.mark.parametrize("order", ["semver", "none"])
def test_a_rollback_landing_between_edit_and_commit_pr_is_not_overwritten(
    make_remote, ecr, mode, order
) -> None:
    from steps.commit_pr.step import land

    name, push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    push("1.5.1", BROKEN + timedelta(minutes=1))
    target = _target(remote, image, "1.5.1", BROKEN + timedelta(minutes=1), order=order, mode=mode)
    plan = plan_step(target).plan
    assert plan.changed
    _roll_back(remote, image, "hand-edit", ours)  # lands before commit-pr runs
    out = land(target, plan)
    assert out.action == "unchanged", out
    assert "1.4.1" in (remote.read(FILE) or "")
    branch = remote.server.git(remote.name, "for-each-ref", "--format=%(refname)", "refs/heads/imagebump/")
    assert branch.strip() == ""


# --- issue 30 item 5: newTag + digest, a moved tag ------------------------------------------------------


def test_with_tag_and_digest_a_moved_tag_leaves_the_event_and_the_sweep_agreeing(
    make_remote, ecr, git_token
) -> None:
    """Both look an entry's push time up by its digest (the image it runs), never by its tag: the tag
    1.4.1 moved to an image pushed after 1.5.0 makes the rollback look forward by tag."""
    from imagebump.local import builders
    from steps.domain.intent import trailer

    name, push = ecr
    image = _uri(name)
    client_digest = {tag: _digest_of(name, tag) for tag in ("1.4.1", "1.5.0")}

    def text(tag: str) -> str:
        return builders.kustomization([{"name": image, "newTag": tag, "digest": client_digest[tag]}])

    remote = make_remote({FILE: text("1.4.1")})
    message = f"imagebump(prod): 1.4.1 → 1.5.0\n\n{trailer(image, '1.5.0', client_digest['1.5.0'])}\n"
    remote.server.commit_files(remote.name, {FILE: text("1.5.0")}, message, author="imagebump <ib@x>")
    remote.server.commit_files(remote.name, {FILE: text("1.4.1")}, "back to 1.4.1\n", author=PERSON)
    # ECR keeps an image whose tag moved away (untagged); moto deletes it with its last tag
    # (moto/ecr/models.py, put_image → batch_delete_image): a second tag keeps it, as ECR would
    _tag_again(name, client_digest["1.4.1"], "keep-1.4.1")
    moved = push("1.4.1", BROKEN + timedelta(minutes=1))  # the tag moves to an image pushed after 1.5.0

    event = plan_step(
        _target(remote, image, "1.5.0", BROKEN).model_copy(update={"digest": client_digest["1.5.0"]})
    )
    again = plan_step(
        _target(remote, image, "1.4.1", BROKEN + timedelta(minutes=1)).model_copy(update={"digest": moved})
    )
    swept = sweep(_rules(remote, name), auth=GitAuth(git_token))
    assert (event.decision, again.decision, swept.report[0].state) == ("held", "held", "held")


def _tag_again(name: str, digest: str, tag: str) -> None:
    from moto.ecr.models import ecr_backends

    from tests.fixtures.ecr_times import ACCOUNT

    images = ecr_backends[ACCOUNT]["us-west-2"].repositories[name].images
    next(i for i in images if i.image_digest == digest).image_tags.append(tag)


def _digest_of(name: str, tag: str) -> str:
    from moto.ecr.models import ecr_backends

    from tests.fixtures.ecr_times import ACCOUNT

    images = ecr_backends[ACCOUNT]["us-west-2"].repositories[name].images
    return next(i.image_digest for i in images if tag in i.image_tags)

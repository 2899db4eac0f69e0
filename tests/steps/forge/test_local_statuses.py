"""Commit statuses on a host without an API (``provider: local``): git notes in the repository,
against a real ``git http-backend`` remote."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from steps.forge.local_status import NOTES_REF, GitNoteStatuses
from steps.forge.pull_requests import CommitStatus
from steps.git import GitAuth

CONTEXT = "imagebump/soak: staging"


@pytest.fixture()
def remote(make_remote, git_env):
    return make_remote({"README.md": "hello\n"})


def test_pending_then_success_is_what_the_commit_shows(remote) -> None:
    statuses = GitNoteStatuses(remote.url)
    head = remote.rev()
    assert statuses.statuses(head) == {}
    assert statuses.set_status(head, state="pending", context=CONTEXT, description="12s left")
    assert statuses.statuses(head) == {CONTEXT: CommitStatus(CONTEXT, "pending", "12s left")}
    assert statuses.set_status(head, state="success", context=CONTEXT)
    assert statuses.set_status(head, state="pending", context="imagebump/live")
    got = statuses.statuses(head)
    assert (got[CONTEXT].state, got["imagebump/live"].state) == ("success", "pending")
    # a plain git note any clone reads (git log --notes=imagebump-status)
    note = json.loads(remote.git("notes", f"--ref={NOTES_REF}", "show", head))
    assert note[CONTEXT]["state"] == "success"
    assert remote.rev() == head  # the branches did not move


def test_two_writers_at_once_keep_both_statuses(remote) -> None:
    head = remote.rev()
    contexts = [f"imagebump/soak: env{i}" for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        done = list(
            pool.map(
                lambda c: GitNoteStatuses(remote.url).set_status(head, state="success", context=c), contexts
            )
        )
    got = GitNoteStatuses(remote.url).statuses(head)
    assert {c for c, ok in zip(contexts, done, strict=True) if ok} <= set(got)


def test_a_refused_push_is_a_warning_not_a_failure(remote) -> None:
    no_write = GitNoteStatuses(remote.url, GitAuth("not-the-token"))
    assert no_write.set_status(remote.rev(), state="success", context=CONTEXT) is False
    with pytest.raises(ValueError):
        no_write.set_status(remote.rev(), state="done", context=CONTEXT)

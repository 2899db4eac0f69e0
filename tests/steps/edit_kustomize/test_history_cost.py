"""Issue 33: what edit-kustomize's history read costs on top of its clone, with every guarantee kept.

The clone brings the commits the history read needs (``steps.entry_history.DEPTHS[0]`` deep), so
an update pays at most one more request (the file's earlier versions, all in one; none when the
only version is the one checked out: git fetches no object it has), not two. A person's rollback is still
held, also when it lies beyond the clone's depth (the read deepens as before).

Against a real ``git http-backend`` remote and moto's ECR (push times injected, never slept for).
"""

from __future__ import annotations

from steps.edit_kustomize.step import run
from steps.entry_history import DEPTHS
from tests.steps.domain import test_intent as _intent
from tests.steps.domain.test_intent import (
    BROKEN,
    FILE,
    PERSON,
    _imagebump_commit,
    _merge_pull_request,
    _roll_back,
    _target,
    _text,
    _uri,
)

plan_step = run.__wrapped__
_env = _intent._env  # the autouse fixture: git and AWS settings
ecr = _intent.ecr  # the ECR repository holding 1.4.1 and 1.5.0


def _sessions(remote, target) -> tuple[object, int]:
    before = remote.server.read_sessions(remote.name)
    out = plan_step(target)
    return out, remote.server.read_sessions(remote.name) - before


def test_an_update_pays_one_request_beyond_the_clone_and_a_rollback_still_holds(make_remote, ecr) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    for i in range(3):
        remote.server.commit_files(remote.name, {"README.md": f"{i}\n"}, f"readme {i}\n", author=PERSON)
    current, quiet = _sessions(remote, _target(remote, image, "1.5.0", BROKEN, order="semver"))
    assert current.decision == "current"
    _roll_back(remote, image, "revert", ours)
    held, busy = _sessions(remote, _target(remote, image, "1.5.0", BROKEN, order="semver"))
    assert (held.decision, held.changed) == ("held", False), held.reason
    assert busy - quiet == 1  # the file's earlier versions, one request; no fetch of commits


def test_a_file_with_one_version_reads_its_history_without_a_request(make_remote, ecr) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    current, quiet = _sessions(remote, _target(remote, image, "1.4.1", BROKEN, order="semver"))
    update, busy = _sessions(remote, _target(remote, image, "1.5.0", BROKEN, order="semver"))
    assert (current.decision, update.decision) == ("current", "update")
    assert busy == quiet  # the commits came with the clone; the only version is the one checked out


def test_a_rollback_beyond_the_clones_depth_is_still_held(make_remote, ecr) -> None:
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.4.1")})
    ours = _imagebump_commit(remote, image, "1.4.1", "1.5.0")
    _roll_back(remote, image, "hand-edit", ours)
    for i in range(DEPTHS[0] + 5):  # the rollback is older than the commits the clone brought
        remote.server.commit_files(remote.name, {"README.md": f"{i}\n"}, f"readme {i}\n", author=PERSON)
    out = plan_step(_target(remote, image, "1.5.0", BROKEN, order="semver"))
    assert (out.decision, out.changed) == ("held", False), out.reason


def test_imagebumps_pull_requests_merged_with_merge_commits_read_no_earlier_version(make_remote, ecr) -> None:
    """GitHub's default merge: each of imagebump's commits lands through a person's merge commit of its
    up-to-date branch. Read along the main line, the merge made exactly its branch tip's change, so
    it is imagebump's by the tip's message, as a plain commit is: no version of the file fetched."""
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.0.0")})
    for number, (old, new) in enumerate((("1.0.0", "1.1.0"), ("1.1.0", "1.4.1")), 1):
        _merge_pull_request(remote, image, old, new, number)
    current, quiet = _sessions(remote, _target(remote, image, "1.4.1", BROKEN, order="semver"))
    update, busy = _sessions(remote, _target(remote, image, "1.5.0", BROKEN, order="none"))
    assert (current.decision, update.decision, update.changed) == ("current", "update", True), update.reason
    assert busy == quiet  # the clone's one request: no fetch of the file's earlier versions


def test_an_update_over_imagebumps_own_commits_reads_no_earlier_version(make_remote, ecr) -> None:
    """Every commit that touched the file carries imagebump's trailer: none can be a rollback, so
    no version of the file is fetched (the commit messages came with the clone)."""
    name, _push = ecr
    image = _uri(name)
    remote = make_remote({FILE: _text(image, "1.0.0")})
    for old, new in (("1.0.0", "1.1.0"), ("1.1.0", "1.4.1")):
        _imagebump_commit(remote, image, old, new)
    current, quiet = _sessions(remote, _target(remote, image, "1.4.1", BROKEN, order="semver"))
    update, busy = _sessions(remote, _target(remote, image, "1.5.0", BROKEN, order="semver"))
    assert (current.decision, update.decision, update.changed) == ("current", "update", True)
    assert busy == quiet  # the clone's one request: no fetch of the file's earlier versions

""":class:`steps.git.PartialClone` (verify-live's revisions, reconcile's and the gate's reads) against a
real ``git http-backend`` remote, counting the remote's reads: revisions are answered from one
fetch, a commit pushed since is fetched once, an unknown one is remembered (never fetched for
again), only commit ids reach git, a file read is bounded, and prefetched blobs come in one request.
"""

from __future__ import annotations

import pytest

from steps.git import PartialClone
from steps.git.partial import MAX_FILE_BYTES
from tests.steps.domain.test_intent import _merge_taking_side

FILE = "apps/api/overlays/prod/kustomization.yaml"


@pytest.fixture()
def remote(make_remote, git_env):
    return make_remote({FILE: "images: []\n", "README.md": "hello\n"})


def _clone(remote, tmp_path, filter: str = "blob:none") -> PartialClone:
    return PartialClone(remote.url, [remote.default_branch], tmp_path / "clone", filter=filter)


def _reads(remote) -> int:
    return remote.server.read_sessions(remote.name)


@pytest.mark.parametrize("filter", ["blob:none", "tree:0"])
def test_the_branch_and_its_commits_are_known_from_one_fetch(remote, tmp_path, filter) -> None:
    head = remote.rev()
    before = _reads(remote)
    clone = _clone(remote, tmp_path, filter)
    assert clone.head(remote.default_branch) == head
    assert clone.known(head) and clone.known_locally(head)
    assert clone.fetches == 1 and _reads(remote) - before == 1


def test_a_commit_pushed_since_is_fetched_once_and_an_unknown_one_is_remembered(remote, tmp_path) -> None:
    clone = _clone(remote, tmp_path)
    pushed = remote.commit_files({FILE: "images: [{name: api, newTag: '2'}]\n"})
    assert not clone.known_locally(pushed)  # asks without fetching
    assert clone.known(pushed) and clone.fetches == 2
    assert clone.known(pushed) and clone.fetches == 2
    assert clone.head(remote.default_branch) == pushed
    stranger = "f" * 40  # on no branch: one fetch to learn it, then remembered
    assert not clone.known(stranger) and clone.fetches == 3
    before = _reads(remote)
    assert not clone.known(stranger) and clone.fetches == 3
    assert _reads(remote) == before


@pytest.mark.parametrize(
    "revision",
    ["HEAD", "main", "refs/heads/main", "--output=/tmp/x", "f" * 39, "F" * 40, "a" * 40 + "\n", "a" * 41],
)
def test_only_commit_ids_reach_git(remote, tmp_path, revision) -> None:
    clone = _clone(remote, tmp_path)
    before = _reads(remote)
    assert not clone.known(revision) and not clone.known_locally(revision)
    assert clone.fetches == 1 and _reads(remote) == before


def test_a_file_is_read_whole_and_absent_or_oversized_ones_are_none(remote, tmp_path) -> None:
    commit = remote.commit_files({"big.txt": "x" * (MAX_FILE_BYTES + 1)})
    clone = _clone(remote, tmp_path)
    assert clone.show(commit, FILE) == "images: []\n"
    assert clone.exists(commit, FILE) and not clone.exists(commit, "absent.yaml")
    assert clone.show(commit, "absent.yaml") is None
    assert clone.show(commit, "big.txt") is None


def test_prefetch_brings_every_blob_in_one_request_and_never_again(remote, tmp_path) -> None:
    files = {f"apps/app{i}/overlays/prod/kustomization.yaml": f"images: [{i}]\n" for i in range(5)}
    commit = remote.commit_files(files)
    clone = _clone(remote, tmp_path)  # blob:none: no file came with the fetch
    pairs = [(commit, path) for path in files] + [(commit, "absent.yaml"), ("HEAD", FILE)]
    before = _reads(remote)
    clone.prefetch(pairs)
    assert clone.fetches == 2 and _reads(remote) - before == 1
    clone.prefetch(pairs)
    assert [clone.show(commit, path) for path in files] == list(files.values())
    assert clone.fetches == 2 and _reads(remote) - before == 1  # read from what was prefetched


def test_last_change_and_ancestry_follow_the_branch(remote, tmp_path) -> None:
    changed = remote.commit_files({FILE: "images: [1]\n"})
    later = remote.commit_files({"README.md": "bye\n"})
    clone = _clone(remote, tmp_path)
    assert clone.last_change(remote.default_branch, FILE) == changed
    assert clone.last_change(remote.default_branch, "never/there.yaml") is None
    assert clone.is_ancestor(changed, later) and not clone.is_ancestor(later, changed)


def test_the_last_change_is_a_merge_that_took_a_stale_branchs_file(remote, tmp_path) -> None:
    """A merge that took a branch's older version of the file changed it on the branch. git's default
    history simplification follows the parent whose file is the same: it answered the commit that
    first wrote that old version, which every live revision holds (verify-live then took the old
    image's revision for the one to find live)."""
    first = remote.rev()
    remote.commit_files({FILE: "images: [1]\n"})
    merge = _merge_taking_side(remote, first, {"docs/x.md": "x\n"}, "Merge branch 'side'\n", file=FILE)
    clone = _clone(remote, tmp_path)
    assert clone.last_change(remote.default_branch, FILE) == merge

"""Git's object format in Python (steps.git.objects) against git itself, SHA-1 and SHA-256.

Every id computed here is compared with what ``git`` computes for the same object in a real
repository; a chain of objects is believed only when git's own objects prove it, and every kind of
tampering is refused with its reason. No network: local repositories made with ``git``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from steps import git
from steps.domain.errors import CarriedObjectsError
from steps.git.objects import blob_id, commit_tree, object_id, tree_entries, verify_path_chain

FILE = "apps/team a/api ✓/overlays/prod/kustomization.yaml"
FILES = {
    FILE: "images:\n- name: api\n  newTag: 1.0.0\n",
    "apps/team a/api ✓/overlays/prod/patch.yaml": "kind: Deployment\n",
    "apps/team a/web/overlays/prod/kustomization.yaml": "images: []\n",
    "README.md": "hello\n",
}


def _git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", "-C", str(repo), *args], input=input, capture_output=True, check=True
    ).stdout


@pytest.fixture(params=["sha1", "sha256"])
def repo(request, tmp_path: Path) -> Path:
    path = tmp_path / request.param
    subprocess.run(
        ["git", "init", "-q", f"--object-format={request.param}", "-b", "main", str(path)], check=True
    )
    for name, text in FILES.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    (path / "apps" / "link.yaml").symlink_to("../README.md")
    _git(path, "add", "-A")
    _git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "initial")
    return path


def _chain(repo: Path, path: str) -> tuple[str, list[bytes]]:
    head = _git(repo, "rev-parse", "HEAD").decode().strip()
    cloned = git.ClonedRepo(repo, "main")
    objects = cloned.path_objects(head, path)
    assert objects is not None
    return head, objects


def test_ids_are_the_ones_git_gives(repo: Path) -> None:
    fmt = "sha256" if repo.name == "sha256" else "sha1"
    head = _git(repo, "rev-parse", "HEAD").decode().strip()
    for spec, kind in ((head, "commit"), (f"{head}^{{tree}}", "tree"), (f"{head}:apps", "tree")):
        oid = _git(repo, "rev-parse", spec).decode().strip()
        content = _git(repo, "cat-file", kind, oid)
        assert object_id(kind, content, fmt) == oid
    assert blob_id(FILES[FILE], fmt) == _git(repo, "rev-parse", f"HEAD:{FILE}").decode().strip()


def test_tree_entries_read_as_git_lists_them(repo: Path) -> None:
    fmt = "sha256" if repo.name == "sha256" else "sha1"
    raw = _git(repo, "cat-file", "tree", "HEAD:apps")
    listed = [line for line in _git(repo, "ls-tree", "-z", "HEAD:apps").split(b"\0") if line]
    expected = []
    for line in listed:
        meta, name = line.split(b"\t", 1)
        mode, _kind, oid = meta.decode().split()
        expected.append((mode.lstrip("0"), name, oid))
    assert tree_entries(raw, fmt) == expected
    assert (
        commit_tree(_git(repo, "cat-file", "commit", "HEAD"))
        == _git(repo, "rev-parse", "HEAD^{tree}").decode().strip()
    )


def test_a_chain_read_from_git_proves_the_file(repo: Path) -> None:
    head, objects = _chain(repo, FILE)
    blob = _git(repo, "rev-parse", f"HEAD:{FILE}").decode().strip()
    assert len(objects) == 2 + FILE.count("/")
    assert verify_path_chain(objects, head, FILE, blob) == "100644"


@pytest.mark.parametrize(
    ("tamper", "why"),
    [
        pytest.param(lambda o: o[:-1], "objects for a path", id="one-missing"),
        pytest.param(lambda o: [o[0] + b"x", *o[1:]], "commit does not hash", id="commit-edited"),
        pytest.param(
            lambda o: [o[0], o[2], o[1], *o[3:]], "not the one its parent names", id="trees-swapped"
        ),
        pytest.param(lambda o: [*o[:-1], o[-1][:-3]], "not the one its parent names", id="tree-cut"),
    ],
)
def test_a_tampered_chain_is_refused_with_its_reason(repo: Path, tamper, why: str) -> None:
    head, objects = _chain(repo, FILE)
    blob = _git(repo, "rev-parse", f"HEAD:{FILE}").decode().strip()
    with pytest.raises(CarriedObjectsError, match=why):
        verify_path_chain(tamper(objects), head, FILE, blob)


def test_a_chain_proves_nothing_but_its_own_regular_file(repo: Path) -> None:
    head, objects = _chain(repo, FILE)
    blob = _git(repo, "rev-parse", f"HEAD:{FILE}").decode().strip()
    other = blob_id("images: []\n", "sha256" if repo.name == "sha256" else "sha1")
    with pytest.raises(CarriedObjectsError, match="is not the regular file"):
        verify_path_chain(objects, head, FILE, other)  # another blob
    with pytest.raises(CarriedObjectsError, match="is not in tree"):
        verify_path_chain(objects, head, FILE.replace("kustomization", "kustomisation"), blob)
    link_head, link_objects = _chain(repo, "apps/link.yaml")
    link = _git(repo, "rev-parse", "HEAD:apps/link.yaml").decode().strip()
    with pytest.raises(CarriedObjectsError, match="is not the regular file"):
        verify_path_chain(link_objects, link_head, "apps/link.yaml", link)  # a symbolic link
    dir_head, dir_objects = _chain(repo, "apps/team a/web")
    tree = _git(repo, "rev-parse", "HEAD:apps/team a/web").decode().strip()
    with pytest.raises(CarriedObjectsError, match="is not the regular file"):
        verify_path_chain(dir_objects, dir_head, "apps/team a/web", tree)  # a directory


@pytest.mark.parametrize(
    ("raw", "reader", "why"),
    [
        pytest.param(b"100644 name-without-its-id", tree_entries, "cut short", id="tree-no-nul"),
        pytest.param(b"100644", tree_entries, "cut short", id="tree-no-space"),
        pytest.param(b"\xff\xfe name\0" + bytes(20), tree_entries, "mode is not digits", id="tree-bad-mode"),
        pytest.param(b"parent abc\n", commit_tree, "starts with its tree", id="commit-no-tree"),
        pytest.param("tree é\n".encode(), commit_tree, "starts with its tree", id="commit-not-ascii"),
    ],
)
def test_malformed_objects_are_one_error_the_caller_can_catch(raw: bytes, reader, why: str) -> None:
    """Whatever bytes a plan carries, reading them fails only as CarriedObjectsError (commit-pr
    catches exactly that and clones), never as an incidental ValueError or UnicodeDecodeError."""
    with pytest.raises(CarriedObjectsError, match=why):
        reader(raw)


def test_seed_makes_a_repository_that_commits_on_the_chain_alone(repo: Path, tmp_path: Path) -> None:
    """No remote is reached: the seeded repository reads the file from the plan, commits on the
    carried commit with fast-import and holds exactly the new tree git would write."""
    head, objects = _chain(repo, FILE)
    text = FILES[FILE]
    blob = _git(repo, "rev-parse", f"HEAD:{FILE}").decode().strip()
    seeded = git.seed(
        "https://git.example.com/team/apps",
        tmp_path / "seeded",
        branch="main",
        commit=head,
        objects=objects,
        path=FILE,
        text=text,
        blob=blob,
    )
    assert seeded.seeded_from == head and seeded.cloned_head() == head
    assert seeded.read(FILE) == text
    seeded.write(FILE, text.replace("1.0.0", "1.1.0"))
    new = seeded.commit("bump\n", "t", "t@t")
    assert new is not None and new != head

    (repo / FILE).write_text(text.replace("1.0.0", "1.1.0"))
    _git(repo, "add", "-A")
    expected_tree = _git(repo, "write-tree").decode().strip()
    got_tree = subprocess.run(
        ["git", "-C", str(tmp_path / "seeded"), "rev-parse", f"{new}^{{tree}}"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout.strip()
    assert got_tree == expected_tree


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        pytest.param({"branch": "../../escape"}, "not a plain branch name", id="branch-escapes"),
        pytest.param({"branch": "main.lock"}, "not a plain branch name", id="branch-lock"),
        pytest.param({"branch": "release.lock/1"}, "not a plain branch name", id="component-lock"),
        pytest.param({"branch": "@"}, "not a plain branch name", id="branch-at"),
        pytest.param({"branch": "a b"}, "not a plain branch name", id="branch-space"),
        pytest.param({"text": "forged\n"}, "is not blob", id="text-not-the-blob"),
    ],
)
def test_seed_refuses_and_writes_nothing(repo: Path, tmp_path: Path, kwargs: dict, why: str) -> None:
    head, objects = _chain(repo, FILE)
    blob = _git(repo, "rev-parse", f"HEAD:{FILE}").decode().strip()
    args = {
        "branch": "main",
        "commit": head,
        "objects": objects,
        "path": FILE,
        "text": FILES[FILE],
        "blob": blob,
    }
    with pytest.raises(CarriedObjectsError, match=why):
        git.seed("https://git.example.com/team/apps", tmp_path / "seeded", **{**args, **kwargs})
    assert not (tmp_path / "seeded").exists()


def _seed(repo: Path, dest: Path) -> git.ClonedRepo:
    head, objects = _chain(repo, FILE)
    blob = _git(repo, "rev-parse", f"HEAD:{FILE}").decode().strip()
    return git.seed(
        "https://git.example.com/team/apps",
        dest,
        branch="main",
        commit=head,
        objects=objects,
        path=FILE,
        text=FILES[FILE],
        blob=blob,
    )


def test_the_seeded_commit_written_in_python_is_the_one_fast_import_writes(
    repo: Path, tmp_path: Path
) -> None:
    """Issue 33: the seed's first commit is written as loose objects from the proven chain (no
    ``git fast-import`` process); the same blob, trees and commit as fast-import's, read by git."""
    python, fast = _seed(repo, tmp_path / "python"), _seed(repo, tmp_path / "fast")
    fast.seeded_chain = []  # no chain: the fast-import path
    shas = []
    for seeded in (python, fast):
        seeded.write(FILE, FILES[FILE].replace("1.0.0", "1.1.0"))
        shas.append(seeded.commit("bump\n\n\nImagebump-Image: api:1.1.0  \n", "Deploy Bot", "bot@x"))

    def shown(seeded: git.ClonedRepo, sha: str) -> list[bytes]:
        raw = _git(seeded.path, "cat-file", "commit", sha)
        return [
            line.rsplit(b">", 1)[0] if line.startswith((b"author", b"committer")) else line
            for line in raw.split(b"\n")
        ]

    assert shown(python, shas[0]) == shown(fast, shas[1])  # all but the seconds
    for seeded, sha in zip((python, fast), shas, strict=True):
        assert seeded.cloned_head() == sha
        assert _git(seeded.path, "cat-file", "-p", f"{sha}:{FILE}").decode() == FILES[FILE].replace(
            "1.0.0", "1.1.0"
        )
        assert _git(seeded.path, "rev-parse", f"{sha}^{{tree}}") == _git(
            fast.path, "rev-parse", f"{shas[1]}^{{tree}}"
        )
        assert (
            _git(seeded.path, "cat-file", "-e", _git(repo, "rev-parse", f"HEAD:{FILE}").decode().strip())
            == b""
        )


def test_the_seed_and_its_commit_are_one_pack_each_that_git_verifies(repo: Path, tmp_path: Path) -> None:
    """The seed's objects, and its commit's, are written as one pack each (two files where loose
    objects take a directory and a file each): git verifies both packs and reads every object."""
    seeded = _seed(repo, tmp_path / "seeded")
    seeded.write(FILE, FILES[FILE].replace("1.0.0", "1.2.0"))
    sha = seeded.commit("bump\n", "Deploy Bot", "bot@x")
    objects = seeded.path / ".git" / "objects"
    assert [p for p in objects.iterdir() if p.name not in ("info", "pack")] == []  # no loose object
    indexes = sorted((objects / "pack").glob("pack-*.idx"))
    assert len(indexes) == 2 and len(list((objects / "pack").glob("pack-*.pack"))) == 2
    for index in indexes:
        assert _git(seeded.path, "verify-pack", "-v", str(index)).strip().endswith(b": ok")
    assert _git(seeded.path, "cat-file", "-p", f"{sha}:{FILE}").decode() == FILES[FILE].replace(
        "1.0.0", "1.2.0"
    )
    assert _git(seeded.path, "rev-parse", f"{sha}^") == _git(repo, "rev-parse", "HEAD")


def test_the_seeded_repository_is_the_one_git_init_makes(repo: Path, tmp_path: Path) -> None:
    """The seed writes the repository ``git init --template= --object-format= --initial-branch=``
    makes (no process): same files and settings, plus its objects (a pack), the shallow boundary and
    the promisor remote."""
    fmt = "sha256" if repo.name == "sha256" else "sha1"
    seeded = _seed(repo, tmp_path / "seeded")
    init = tmp_path / "init"
    subprocess.run(
        ["git", "init", "-q", "--template=", f"--object-format={fmt}", "--initial-branch=main", str(init)],
        check=True,
    )

    def layout(gitdir: Path) -> set[str]:
        """Every file and directory, but the seed's own additions (objects, the branch, shallow)."""
        theirs = re.compile(
            r"objects/[0-9a-f]{2}(/.*)?|objects/pack/pack-[0-9a-f]+\.(pack|idx)|refs/heads/main|shallow"
        )
        names = {p.relative_to(gitdir).as_posix() for p in gitdir.rglob("*")}
        return {n for n in names if not theirs.fullmatch(n)}

    def settings(path: Path) -> dict[str, str]:
        listed = _git(path, "config", "--local", "--list").decode().splitlines()
        return dict(line.split("=", 1) for line in listed if not line.startswith("remote."))

    assert layout(seeded.path / ".git") == layout(init / ".git")
    assert (seeded.path / ".git" / "HEAD").read_text() == (init / ".git" / "HEAD").read_text()
    assert settings(seeded.path) == settings(init) | {"core.repositoryformatversion": "1"}
    assert _git(seeded.path, "rev-parse", "--show-object-format").decode().strip() == fmt
    remote = _git(seeded.path, "config", "--get-regexp", "^remote[.]origin[.]").decode()
    assert "remote.origin.promisor true" in remote and "partialclonefilter blob:none" in remote

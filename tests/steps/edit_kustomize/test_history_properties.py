"""The history reader as a property (issues 30 and 31), on real git: whatever sequence of people's
edits (a plain commit, or an image set while resolving a merge: an "evil merge"), imagebump's
commits landed every way (a plain commit, a merge commit of its branch, a rebase, a squash with the
message), unrelated edits and renames of the kustomization (``.yaml`` ↔
``.yml``, an overlay moved), and branches that left the main line some commits back merged by taking
their version of the file (a person's stale branch that undoes the main line's changes, a person's
or imagebump's branch that set an image there), :func:`steps.entry_history.entry_history` returns
exactly the image changes that happened on the main line, newest first, each with who made it. Few
examples (each builds a repository), no network (a local repository read as it is).
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from imagebump.local import builders
from steps.domain.intent import trailer
from steps.entry_history import entry_history, only_imagebump
from steps.git import ClonedRepo

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
TAGS = ["1.0.0", "1.1.0", "1.2.0", "2.0.0"]
PATHS = ["o/prod/kustomization.yaml", "o/prod/kustomization.yml", "o/production/kustomization.yaml"]
OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "person",
                "imagebump",
                "imagebump-merge",
                "imagebump-squash",
                "person-evil-merge",
                "unrelated",
                "rename",
                "person-takes-stale-side",
                "person-stale-side-merge",
                "imagebump-stale-merge",
            ]
        ),
        st.sampled_from(TAGS),
        st.sampled_from(PATHS),
        st.integers(min_value=1, max_value=4),  # stale sides: how many main-line commits back they left
    ),
    min_size=1,
    max_size=9,
)


class Repo:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.when = datetime(2026, 1, 1, tzinfo=UTC)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str, who: str = "Ann <ann@x>") -> str:
        self.when += timedelta(minutes=1)
        name, _, email = who.partition(" <")
        env = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email.rstrip(">"),
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email.rstrip(">"),
            "GIT_AUTHOR_DATE": self.when.isoformat(),
            "GIT_COMMITTER_DATE": self.when.isoformat(),
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
        }
        return subprocess.run(
            ["git", *args], cwd=self.path, env=env, capture_output=True, check=True, text=True
        ).stdout

    def write(self, path: str, text: str) -> None:
        (self.path / path).parent.mkdir(parents=True, exist_ok=True)
        (self.path / path).write_text(text)
        self.git("add", "-A")

    def commit(self, message: str, who: str = "Ann <ann@x>") -> None:
        self.git("commit", "-q", "--allow-empty", "-m", message, who=who)


def _text(tag: str, note: int = 0) -> str:
    return builders.kustomization([{"name": IMAGE, "newTag": tag}]) + f"# note {note}\n"


@given(ops=OPS)
# the audit's case: imagebump sets 1.1.0, a person sets 1.0.0 back while resolving a merge
@example(ops=[("imagebump", "1.1.0", PATHS[0], 1), ("person-evil-merge", "1.0.0", PATHS[0], 1)])
# a merge that takes a stale branch's file undoes imagebump's commit: the main line's rollback
@example(ops=[("imagebump", "1.1.0", PATHS[0], 1), ("person-takes-stale-side", "1.0.0", PATHS[0], 1)])
# imagebump's pull request, opened before a person's change, merged by taking its file
@example(ops=[("person", "1.1.0", PATHS[0], 1), ("imagebump-stale-merge", "2.0.0", PATHS[0], 1)])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_history_reader_returns_every_image_change_through_renames_and_merges(
    tmp_path_factory, ops
) -> None:
    repo = Repo(tmp_path_factory.mktemp("history"))
    path, tag, note = PATHS[0], "1.0.0", 0
    repo.write(path, _text(tag))
    repo.commit("start")
    expected: list[tuple[str, str, bool]] = []
    main_line = [(repo.git("rev-parse", "HEAD").strip(), tag, path)]  # after each step: commit, tag, file
    for op, new, where, back in ops:
        note += 1
        if "stale" in op:
            base, base_tag, base_path = main_line[max(0, len(main_line) - 1 - back)]
            if base_path == path and (op == "person-takes-stale-side" or new != base_tag):
                ours = op.startswith("imagebump")
                repo.git("checkout", "-q", "-b", f"side/{note}", base)
                if op == "person-takes-stale-side":  # other work on a branch that never saw the file change
                    repo.write(f"docs/{note}.md", "x\n")
                    repo.commit("side work")
                    new = base_tag
                elif ours:
                    repo.write(path, _text(new, note))
                    repo.commit(
                        f"imagebump(prod): api {base_tag} → {new}\n\n{trailer(IMAGE, new, None)}\n",
                        "imagebump <ib@x>",
                    )
                else:
                    repo.write(path, _text(new, note))
                    repo.commit(f"api {new}\n")
                repo.git("checkout", "-q", "main")
                repo.git("merge", "-q", "--no-ff", "--no-commit", "-s", "ours", f"side/{note}")
                repo.git("checkout", f"side/{note}", "--", path)  # the side's version of the file, whole
                repo.git("add", "-A")
                repo.commit(f"Merge pull request #{note} from side/{note}")  # by a person
                if new != tag:
                    expected.insert(0, (tag, new, ours))
                    tag = new
        elif op == "unrelated":
            repo.write(path, _text(tag, note))
            repo.commit("a comment")
        elif op == "rename":
            if where == path:
                continue
            (repo.path / where).parent.mkdir(parents=True, exist_ok=True)
            repo.git("mv", path, where)
            repo.commit(f"move {path} to {where}")
            path = where
        elif new != tag:
            ours = op.startswith("imagebump")
            message = (
                f"imagebump(prod): api {tag} → {new}\n\n{trailer(IMAGE, new, None)}\n"
                if ours
                else f"api {new}\n"
            )
            who = "imagebump <ib@x>" if ours else "Ann <ann@x>"
            if op == "person-evil-merge":  # a person sets the image while merging other work
                repo.git("checkout", "-q", "-b", f"side/{note}")
                repo.write(f"docs/{note}.md", "x\n")
                repo.commit("side work")
                repo.git("checkout", "-q", "main")
                repo.git("merge", "-q", "--no-ff", "--no-commit", f"side/{note}")
                repo.write(path, _text(new, note))
                repo.commit(f"Merge side/{note}; api {new}")
            elif op == "imagebump-merge":  # its branch, merged with a merge commit
                repo.git("checkout", "-q", "-b", f"imagebump/{note}")
                repo.write(path, _text(new, note))
                repo.commit(message, who)
                repo.git("checkout", "-q", "main")
                repo.git("merge", "-q", "--no-ff", "-m", f"Merge pull request #{note}", f"imagebump/{note}")
            else:  # a plain commit, a rebase, a squash with the message: the message keeps the trailer
                if op == "imagebump-squash":
                    message = f"{message.splitlines()[0]} (#{note})\n\n{trailer(IMAGE, new, None)}\n\nCo-authored-by: A <a@x>\n"
                repo.write(path, _text(new, note))
                repo.commit(message, who)
            expected.insert(0, (tag, new, ours))
            tag = new
        main_line.append((repo.git("rev-parse", "HEAD").strip(), tag, path))
    found = entry_history(ClonedRepo(repo.path, "main"), "HEAD", path, IMAGE, fetch=False)
    got = [(c.before.newTag, c.after.newTag, c.by_imagebump) for c in found.changes]
    assert got == expected[:20]
    assert found.bound == ""
    # issue 33: the cheap check (commit messages only, no version of the file read) says "no
    # rollback possible" only when every change the full read finds is imagebump's, and says it
    # whenever nobody but imagebump touched the file (the root commit that added it aside)
    quick = only_imagebump(ClonedRepo(repo.path, "main"), "HEAD", path, fetch=False)
    assert not quick or all(c.by_imagebump for c in found.changes)
    # (a merge of imagebump's branch that left before newer commits of the main line is read in full:
    # its change there is not the branch's own)
    if all(op.startswith("imagebump") and "stale" not in op for op, *_ in ops):
        assert quick


def test_a_merge_naming_more_parents_than_the_bound_neither_exhausts_nor_stops_the_read(
    tmp_path, monkeypatch
) -> None:
    """A pushed octopus merge that names more parents than ``git log`` may write per commit
    (:data:`steps.git.history.LOG_BYTES_PER_COMMIT`; lowered here so that 150 parents reach what
    thousands would): the history is read again without parents, the merge's change counts as its
    own — a person's rollback, held — and the commits before it are read as ever."""
    from steps.git import history as githistory

    monkeypatch.setattr(githistory, "LOG_BYTES_PER_COMMIT", 256)
    repo = Repo(tmp_path)
    path = PATHS[0]
    repo.write(path, _text("1.0.0"))
    repo.commit("start")
    repo.write(path, _text("1.1.0"))
    repo.commit(
        f"imagebump(prod): api 1.0.0 → 1.1.0\n\n{trailer(IMAGE, '1.1.0', None)}\n", "imagebump <ib@x>"
    )
    empty = repo.git("hash-object", "-t", "tree", "-w", "/dev/null").strip()
    sides = [repo.git("commit-tree", empty, "-m", f"side {i}").strip() for i in range(150)]
    repo.write(path, _text("1.0.0", 1))
    tree = repo.git("write-tree").strip()
    parents = [arg for side in ["HEAD", *sides] for arg in ("-p", side)]
    octopus = repo.git("commit-tree", tree, *parents, "-m", "merge everything; api back to 1.0.0").strip()
    repo.git("update-ref", "refs/heads/main", octopus)

    found = entry_history(ClonedRepo(repo.path, "main"), "HEAD", path, IMAGE, fetch=False)
    got = [(c.before.newTag, c.after.newTag, c.by_imagebump) for c in found.changes]
    assert got == [("1.1.0", "1.0.0", False), ("1.0.0", "1.1.0", True)]
    assert not only_imagebump(ClonedRepo(repo.path, "main"), "HEAD", path, fetch=False)
    # and with the real bound, a merge is asked about MAX_SIDES of its branches at most
    monkeypatch.undo()
    (touch,) = githistory.touching(ClonedRepo(repo.path, "main"), "HEAD", path, 1)
    assert touch.merge and len(touch.parents) == 1 + githistory.MAX_SIDES

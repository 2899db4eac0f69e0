"""``Imagebump-History`` (issue 33): imagebump's commit may record that, made on its parent, the
file's last N touches were all imagebump's; the rollback check's fast path
(:func:`steps.entry_history.only_imagebump`) then stops there instead of walking (and fetching)
those N again.

The promise is a property: on every history — people's edits, imagebump's commits with and without
the line, the line carried onto another parent by a squash or a cherry-pick, merges, edits of other
files — the verdict with the lines read is the verdict without them, and on a shallow clone a
verdict of "only imagebump" is never wrong. Real git, a local repository read as it is.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from imagebump.local import builders
from steps import entry_history
from steps.domain.intent import HISTORY_KEY, history_mark, history_trailer, trailer
from steps.entry_history import only_imagebump
from steps.git import ClonedRepo

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
FILE = "o/prod/kustomization.yaml"
OTHER = "o/staging/kustomization.yaml"
OPS = st.lists(
    st.sampled_from(
        ["person", "imagebump", "imagebump-unmarked", "copied-line", "person-copied-line", "other", "merge"]
    ),
    min_size=1,
    max_size=12,
)


class Repo:
    def __init__(self, path: Path) -> None:
        self.path, self.n = path, 0
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        self.n += 1
        env = {
            "GIT_AUTHOR_NAME": "A",
            "GIT_AUTHOR_EMAIL": "a@x",
            "GIT_COMMITTER_NAME": "A",
            "GIT_COMMITTER_EMAIL": "a@x",
            "GIT_AUTHOR_DATE": f"{1_760_000_000 + self.n} +0000",
            "GIT_COMMITTER_DATE": f"{1_760_000_000 + self.n} +0000",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
        }
        return subprocess.run(
            ["git", *args], cwd=self.path, env=env, capture_output=True, check=True, text=True
        ).stdout.strip()

    def commit(self, path: str, message: str) -> str:
        (self.path / path).parent.mkdir(parents=True, exist_ok=True)
        text = builders.kustomization([{"name": IMAGE, "newTag": f"1.0.{self.n}"}])
        (self.path / path).write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")


def ours(line: str = "") -> str:
    return f"imagebump(prod): api\n\n{trailer(IMAGE, '1.0.0', None)}\n" + (f"{line}\n" if line else "")


def verdict(path: Path, limit: int, marks: bool, monkeypatch: pytest.MonkeyPatch) -> bool:
    with monkeypatch.context() as m:
        if not marks:
            m.setattr(entry_history, "history_mark", lambda *_a: 0)
        return only_imagebump(ClonedRepo(path, "main"), "HEAD", FILE, limit, fetch=False)


def build(repo: Repo, ops: list[str], write_limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Play ``ops``; imagebump's commits say what commit-pr would say: the line only when the fast
    path held at their parent (read WITH the lines, as production reads them: they chain)."""
    repo.commit(FILE, "start")
    last_line = ""
    for i, op in enumerate(ops):
        if op == "person":
            repo.commit(FILE, f"api by hand {i}")
        elif op == "other":
            repo.commit(OTHER, f"staging by hand {i}")
        elif op in ("imagebump", "merge"):
            if op == "merge":  # imagebump's PR branch, merged with a merge commit
                repo.git("checkout", "-q", "-b", f"pr{i}")
            parent = repo.head()
            clean = verdict(repo.path, write_limit, True, monkeypatch)
            line = history_trailer(write_limit, parent, FILE) if clean else ""
            last_line = line or last_line
            repo.commit(FILE, ours(line))
            if op == "merge":
                repo.git("checkout", "-q", "main")
                repo.commit(OTHER, f"meanwhile {i}")  # main moved on: a real merge
                repo.git("merge", "-q", "--no-ff", "-m", f"Merge pull request #{i}", f"pr{i}")
        elif op == "imagebump-unmarked":
            repo.commit(FILE, ours())
        elif op == "copied-line":  # a squash / cherry-pick: the line travels to another parent
            repo.commit(FILE, ours(last_line or history_trailer(write_limit, "0" * 40, FILE)))
        elif op == "person-copied-line":  # a person's message quoting the line, without the trailer
            repo.commit(FILE, f"by hand\n\n{last_line or history_trailer(write_limit, repo.head(), FILE)}\n")


@given(ops=OPS, write_limit=st.integers(1, 4), read_limit=st.integers(1, 5))
# the shapes a wrong reading would fail on, always tried: a line carried past a person's edit, a
# line a person quoted, a merge whose main line moved meanwhile
@example(ops=["imagebump", "person", "copied-line"], write_limit=3, read_limit=3)
@example(ops=["imagebump", "person-copied-line"], write_limit=3, read_limit=2)
@example(ops=["imagebump", "person", "imagebump", "merge"], write_limit=2, read_limit=4)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_history_lines_never_change_the_fast_paths_verdict(
    tmp_path_factory, monkeypatch, ops, write_limit, read_limit
) -> None:
    repo = Repo(tmp_path_factory.mktemp("marks"))
    build(repo, ops, write_limit, monkeypatch)
    assert verdict(repo.path, read_limit, True, monkeypatch) == verdict(
        repo.path, read_limit, False, monkeypatch
    )


@given(ops=OPS, write_limit=st.integers(1, 4), read_limit=st.integers(1, 5), depth=st.integers(1, 6))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_on_a_shallow_clone_only_imagebump_is_never_said_wrongly(
    tmp_path_factory, monkeypatch, ops, write_limit, read_limit, depth
) -> None:
    repo = Repo(tmp_path_factory.mktemp("marks"))
    build(repo, ops, write_limit, monkeypatch)
    shallow = tmp_path_factory.mktemp("shallow") / "c"
    repo.git("clone", "-q", "--no-local", f"--depth={depth}", "--branch=main", str(repo.path), str(shallow))
    if verdict(shallow, read_limit, True, monkeypatch):
        assert verdict(repo.path, read_limit, False, monkeypatch)


def test_a_marked_commit_spares_walking_past_it(tmp_path, monkeypatch) -> None:
    """Twenty of imagebump's commits, the newest marked: a depth-3 clone decides without deepening
    (the line vouches for the rest); without the line the same clone must go deeper."""
    repo = Repo(tmp_path / "r")
    repo.commit(FILE, "start")
    for _ in range(20):
        repo.commit(FILE, ours())
    repo.commit(FILE, ours(history_trailer(20, repo.head(), FILE)))
    for i in range(2):
        repo.commit(OTHER, f"staging {i}")
    shallow = tmp_path / "c"
    repo.git("clone", "-q", "--no-local", "--depth=3", "--branch=main", str(repo.path), str(shallow))
    assert verdict(shallow, 20, True, monkeypatch) is True
    assert verdict(shallow, 20, False, monkeypatch) is False  # at the boundary, not allowed to fetch


def test_the_line_is_read_only_for_its_own_parent_and_path() -> None:
    parent = "a" * 40
    line = history_trailer(20, parent, FILE)
    assert line.startswith(f"{HISTORY_KEY}: 20 {parent} ")
    message = ours(line)
    assert history_mark(message, parent, FILE) == 20
    assert history_mark(message, "b" * 40, FILE) == 0  # carried onto another parent
    assert history_mark(message, parent, OTHER) == 0  # said of another file
    assert history_mark(message, "", FILE) == 0
    # nothing that cannot be one line is said at all
    assert history_trailer(20, parent, "o/a\nImagebump-History: 99 x y") == ""
    assert history_trailer(0, parent, FILE) == ""
    assert re.fullmatch(r"[^\n]+", line)


# --- through the steps: edit-kustomize says it, commit-pr writes it for the parent it was said of --


class TestThroughTheSteps:
    OVERLAY = "apps/api/overlays/prod"
    PATH = f"{OVERLAY}/kustomization.yaml"

    @pytest.fixture(autouse=True)
    def _env(self, git_env, outputs_dir, monkeypatch, moto) -> None:
        monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
        monkeypatch.setenv("AWS_REGION", "us-west-2")
        monkeypatch.delenv("IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE", raising=False)

    def target(self, remote, tag: str):
        from steps.domain.models import Target

        return Target(
            rule=0,
            repo_url=remote.url,
            path=self.OVERLAY,
            env="prod",
            image=IMAGE,
            tag=tag,
            order="semver",
            mode="commit",
            provider="local",
        )

    def land(self, remote, n: int, op: str) -> bool:
        """Land ``op`` number ``n`` on the remote between the plan and the push: another file's
        commit (``other``), or the file changed and changed back (``file-undone``); False for any
        other ``op`` (the caller lands it)."""
        if op == "other":
            remote.commit_files({f"apps/w{n}/kustomization.yaml": "resources: []\n"}, f"w{n}")
        elif op == "file-undone":
            remote.commit_files({self.PATH: self.text("0.9.0")}, f"back {n}")
            remote.commit_files({self.PATH: self.text("1.0.0")}, f"forward {n}")
        else:
            return False
        return True

    def text(self, tag: str, note: str = "") -> str:
        return builders.kustomization([{"name": IMAGE, "newTag": tag}]) + note

    def message(self, remote) -> str:
        return remote.git("log", "-1", "--format=%B", "main")

    def test_a_commit_on_the_checked_base_says_it_and_the_next_event_reads_it(self, make_remote) -> None:
        from steps.commit_pr import step as commit_pr
        from steps.edit_kustomize.step import run as edit

        remote = make_remote({self.PATH: self.text("1.0.0")})
        base = remote.rev()
        plan = edit(self.target(remote, "1.1.0")).plan
        assert plan.history_clean  # the file begins at the first commit: nobody else touched it
        assert commit_pr.run(self.target(remote, "1.1.0"), plan).action == "committed"
        assert history_mark(self.message(remote), base, self.PATH) == 20

        # the next event: its base is imagebump's commit, and it says so again
        plan = edit(self.target(remote, "1.2.0")).plan
        assert plan.history_clean and plan.base_commit == remote.rev()
        commit_pr.run(self.target(remote, "1.2.0"), plan)
        assert history_mark(self.message(remote), plan.base_commit, self.PATH) == 20

    def test_after_a_persons_edit_nothing_is_said(self, make_remote) -> None:
        from steps.commit_pr import step as commit_pr
        from steps.edit_kustomize.step import run as edit

        remote = make_remote({self.PATH: self.text("1.0.0")})
        remote.commit_files({self.PATH: self.text("1.0.0", "# a comment\n")}, "a note by hand")
        plan = edit(self.target(remote, "1.1.0")).plan
        assert plan.changed and not plan.history_clean
        commit_pr.run(self.target(remote, "1.1.0"), plan)
        assert HISTORY_KEY not in self.message(remote)

    def test_a_base_that_moved_past_other_files_is_vouched_for_not_the_old_one(self, make_remote) -> None:
        """The plan's base was checked; commit-pr lost the race to another file's commit. The lost
        race fetched the commits since the plan's base: none touched the file, so the line names the
        newest base, the commit's parent (never the old one): a burst's next event on this overlay
        stops there instead of reading deeper."""
        from steps.commit_pr import step as commit_pr
        from steps.edit_kustomize.step import run as edit

        remote = make_remote({self.PATH: self.text("1.0.0")})
        base = remote.rev()
        plan = edit(self.target(remote, "1.1.0")).plan
        assert plan.history_clean
        moved = remote.commit_files({"apps/web/kustomization.yaml": "resources: []\n"}, "web by hand")
        assert commit_pr.run(self.target(remote, "1.1.0"), plan).action == "committed"
        message = self.message(remote)
        assert remote.git("rev-parse", "main^").strip() == moved
        assert history_mark(message, moved, self.PATH) == 20
        assert history_mark(message, base, self.PATH) == 0

    def test_an_edit_undone_since_the_plan_is_a_touch_and_nothing_is_said(self, make_remote) -> None:
        """A person changed the file and changed it back after the plan: its text is the plan's, but
        commits touched it, so the newest base is not vouched for."""
        from steps.commit_pr import step as commit_pr
        from steps.edit_kustomize.step import run as edit

        remote = make_remote({self.PATH: self.text("1.0.0")})
        plan = edit(self.target(remote, "1.1.0")).plan
        remote.commit_files({self.PATH: self.text("0.9.0")}, "roll back by hand")
        remote.commit_files({self.PATH: self.text("1.0.0")}, "and forward again")
        assert commit_pr.run(self.target(remote, "1.1.0"), plan).action == "committed"
        assert HISTORY_KEY not in self.message(remote)

    def test_a_rollback_that_restored_the_plans_bytes_since_the_plan_still_holds(self, make_remote) -> None:
        """Between the plan and the push a person set 1.2.0 and rolled it back to the very bytes the
        plan read: the text is the plan's, but the rollback stands (1.1.0's push time is unknown, so
        it was not pushed after the rollback): commit-pr judges the history again and writes nothing.
        (The seeded repository holds the plan's base, so showing the touch fetches nothing.)"""
        from steps.commit_pr import step as commit_pr
        from steps.edit_kustomize.step import run as edit

        remote = make_remote({self.PATH: self.text("1.0.0")})
        plan = edit(self.target(remote, "1.1.0")).plan
        assert plan.base_objects and plan.base_text  # commit-pr seeds the plan's base
        remote.commit_files({self.PATH: self.text("1.2.0")}, "api 1.2.0 by hand")
        rollback = remote.commit_files({self.PATH: self.text("1.0.0")}, "api: back to 1.0.0, 1.2.0 is broken")
        out = commit_pr.run(self.target(remote, "1.1.0"), plan)
        assert out.action == "unchanged" and out.commit_sha == rollback
        assert remote.rev() == rollback and remote.read(self.PATH) == self.text("1.0.0")

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        landed=st.lists(st.sampled_from(["other", "other", "file-undone", "file-rolled-back"]), max_size=11)
    )
    def test_a_rollback_landed_between_plan_and_push_is_never_written_over(self, make_remote, landed) -> None:
        """Property over what lands between the plan and commit-pr's push — other files' commits
        (a lost race each time), a person's change and forward again, a person's change rolled back
        to the very bytes the plan read — however many (beyond the lost race's fetch depth too):
        when a person's rollback is the file's last change, commit-pr writes nothing over it (the
        event's push time is unknown, so it was not pushed after the rollback); when nothing
        touched the file, the update lands."""
        from steps.commit_pr import step as commit_pr
        from steps.edit_kustomize.step import run as edit

        remote = make_remote({self.PATH: self.text("1.0.0")})
        plan = edit(self.target(remote, "1.1.0")).plan
        assert plan.base_objects  # commit-pr seeds the plan's base and pushes with a lease on it
        for n, op in enumerate(landed):
            if not self.land(remote, n, op):  # file-rolled-back
                remote.commit_files({self.PATH: self.text("1.2.0")}, f"api 1.2.0 by hand {n}")
                remote.commit_files({self.PATH: self.text("1.0.0")}, f"api back to 1.0.0 {n}")
        before = remote.rev()
        out = commit_pr.run(self.target(remote, "1.1.0"), plan)
        file_ops = [op for op in landed if op.startswith("file")]
        if file_ops and file_ops[-1] == "file-rolled-back":
            assert out.action == "unchanged"
            assert remote.rev() == before and remote.read(self.PATH) == self.text("1.0.0")
        if not file_ops:
            assert out.action == "committed" and remote.read(self.PATH) == self.text("1.1.0")

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
    @given(landed=st.lists(st.sampled_from(["other", "other", "file-undone", "merge-other"]), max_size=11))
    def test_after_a_lost_race_the_line_is_written_only_when_true(self, make_remote, landed) -> None:
        """Property over what lands between the plan and commit-pr's push (other files' commits,
        the file changed and changed back, merges): the commit carries a line for its parent only
        when no commit since the plan's base touched the file, and always when none did and the
        lost race's fetch reached the plan's base (at most ``RACE_DEPTH - 1`` commits since)."""
        from steps.commit_pr import step as commit_pr
        from steps.commit_pr.retry import RACE_DEPTH
        from steps.edit_kustomize.step import run as edit

        remote = make_remote({self.PATH: self.text("1.0.0")})
        plan = edit(self.target(remote, "1.1.0")).plan
        for n, op in enumerate(landed):
            if not self.land(remote, n, op):  # a merge of a side branch that changed another file
                side = remote.commit_files({f"apps/s{n}/kustomization.yaml": "resources: []\n"}, f"s{n}")
                remote.git("update-ref", "refs/heads/main", f"{side}^")
                tree = remote.git("rev-parse", f"{side}^{{tree}}").strip()
                merge = remote.git(
                    "-c",
                    "user.name=Ann",
                    "-c",
                    "user.email=ann@x",
                    "commit-tree",
                    tree,
                    "-p",
                    remote.rev(),
                    "-p",
                    side,
                    "-m",
                    f"merge {n}",
                ).strip()
                remote.git("update-ref", "refs/heads/main", merge)
        since = int(remote.git("rev-list", "--count", f"{plan.base_commit}..main"))
        assert commit_pr.run(self.target(remote, "1.1.0"), plan).action == "committed"
        parent = remote.git("rev-parse", "main^").strip()
        mark = history_mark(self.message(remote), parent, self.PATH)
        touched = bool(
            remote.git("rev-list", "--full-history", f"{plan.base_commit}..{parent}", "--", self.PATH).strip()
        )
        if touched:
            assert mark == 0
        elif since < RACE_DEPTH:
            assert mark == 20
        if mark:  # never a line the history does not bear out
            assert not touched

    def test_a_person_edit_since_the_plan_is_judged_again_and_nothing_is_said(self, make_remote) -> None:
        from steps.commit_pr import step as commit_pr
        from steps.edit_kustomize.step import run as edit

        remote = make_remote({self.PATH: self.text("1.0.0")})
        plan = edit(self.target(remote, "1.1.0")).plan
        remote.commit_files({self.PATH: self.text("1.0.0", "# by hand\n")}, "a note by hand")
        assert commit_pr.run(self.target(remote, "1.1.0"), plan).action == "committed"
        assert HISTORY_KEY not in self.message(remote)

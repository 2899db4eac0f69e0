"""The write token never shows: not in logs, stdout/stderr, outputs, exception text or .git/.

Every commit-pr run here — successful or failing — is recorded at DEBUG (githubkit, httpx,
httpcore, steps.*), its stdout/stderr captured, its output files and exception text collected;
while each clone exists, every file under its ``.git`` is read. Then all of it is searched for
the token, its base64 forms (as in an HTTP Basic header) and the Basic header of a wrong token.
"""

from __future__ import annotations

import base64
import logging
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

from steps import git
from steps.commit_pr import step as commit_pr
from steps.domain.errors import ImagebumpError, PermissionDeniedError
from tests.fixtures.github import GitHubFake
from tests.steps.commit_pr.support import overlay_files, plan, target

WRONG = "ibt_wrong_" + "9" * 30


def _forms(token: str) -> list[str]:
    forms = [token]
    for raw in (token, f"x-access-token:{token}"):
        encoded = base64.b64encode(raw.encode()).decode()
        forms += [encoded, encoded.rstrip("=")]
    return forms


class Recorder:
    """Collects every text a run leaves behind."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.git_dirs_seen = 0

    def add(self, text: str) -> None:
        self.texts.append(text)

    def scan_git_dir(self, work_tree: Path) -> None:
        self.git_dirs_seen += 1
        for path in (work_tree / ".git").rglob("*"):
            if path.is_file():
                self.texts.append(path.read_bytes().decode("latin-1"))


@pytest.fixture()
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    rec = Recorder()
    original_push = git.ClonedRepo.push

    def push_and_scan(self: git.ClonedRepo, *args, **kwargs):  # a spy: the real push runs
        rec.scan_git_dir(self.path)
        try:
            return original_push(self, *args, **kwargs)
        finally:
            rec.scan_git_dir(self.path)

    monkeypatch.setattr(git.ClonedRepo, "push", push_and_scan)
    return rec


@pytest.fixture()
def run_recorded(
    recorder: Recorder, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture, outputs_dir: Path
) -> Callable[..., object]:
    caplog.set_level(logging.DEBUG)

    def call(t, p):
        try:
            result = commit_pr.run(t, p)
            recorder.add(repr(result) + result.model_dump_json())
            return result
        except SystemExit as exc:  # step_entry maps our errors to a message + exit code
            recorder.add(repr(exc))
            return exc
        except ImagebumpError as exc:
            recorder.add(str(exc) + repr(exc) + "".join(traceback.format_exception(exc)))
            return exc
        finally:
            out, err = capsys.readouterr()
            recorder.add(out + err)
            recorder.add(caplog.text)
            for record in caplog.records:
                recorder.add(record.getMessage())
                if record.exc_info:
                    recorder.add("".join(traceback.format_exception(*record.exc_info)))
            if (outputs_dir / "parameters").is_dir():
                for f in (outputs_dir / "parameters").iterdir():
                    recorder.add(f.read_text())

    return call


def _assert_clean(recorder: Recorder, *tokens: str) -> None:
    haystack = "\n".join(recorder.texts)
    assert haystack, "nothing was recorded"
    for token in tokens:
        for form in _forms(token):
            assert form not in haystack, "a token form leaked"


def test_successful_runs_leak_nothing(
    make_remote, git_env: str, github_env: GitHubFake, git_token: str, recorder: Recorder, run_recorded
) -> None:
    remote = make_remote(overlay_files("overlays/prod", "overlays/dev"))
    assert run_recorded(target(remote.url), plan()).action == "committed"
    assert (
        run_recorded(
            target(
                remote.url, "overlays/dev", mode="pr", provider="github", labels=["x"], reviewers=["alice"]
            ),
            plan("overlays/dev"),
        ).action
        == "pr-created"
    )
    assert (
        run_recorded(
            target(remote.url, "overlays/dev", mode="pr", provider="local", env="dev"), plan("overlays/dev")
        ).action
        == "pr-created"
    )
    assert recorder.git_dirs_seen >= 6
    assert any("HTTP Request" in t for t in recorder.texts)  # httpx did log at this level
    _assert_clean(recorder, git_token)


def test_failing_runs_leak_nothing(
    make_remote,
    git_env: str,
    github_env: GitHubFake,
    git_token: str,
    recorder: Recorder,
    run_recorded,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    remote = make_remote(overlay_files("overlays/prod"))
    # A pre-receive hook refuses the push.
    remote.protect()
    assert isinstance(run_recorded(target(remote.url), plan()), SystemExit)
    with pytest.raises(PermissionDeniedError) as info:
        commit_pr.land(target(remote.url), plan())
    recorder.add(str(info.value) + "".join(traceback.format_exception(info.value)))
    # GitHub refuses the token (and rate limits, and 5xx until it gives up).
    github_env.tokens.clear()
    assert isinstance(run_recorded(target(remote.url, mode="pr", provider="github"), plan()), SystemExit)
    github_env.tokens.add(git_token)
    github_env.server_error("GET", r"/repos/.*/pulls", status=502, times=99)
    with pytest.raises(ImagebumpError) as info:
        commit_pr.land(target(remote.url, mode="pr", provider="github"), plan())
    recorder.add(str(info.value) + "".join(traceback.format_exception(info.value)))
    # A wrong git token: the git server says 401.
    monkeypatch.setenv("IMAGEBUMP_GIT_TOKEN", WRONG)
    assert isinstance(run_recorded(target(remote.url), plan()), SystemExit)
    with pytest.raises(PermissionDeniedError) as info:
        commit_pr.land(target(remote.url), plan())
    recorder.add(str(info.value) + "".join(traceback.format_exception(info.value)))
    _assert_clean(recorder, git_token, WRONG)

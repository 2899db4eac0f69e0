"""``imagebump set-image`` on a held entry (issue 23): a person acting changes it, and is told which
hold that lifts — a rollback in the local git history that it moves forward from — and that a
``# imagebump:hold`` marker stays. A real ``git`` repository in ``tmp_path``; no network."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from imagebump.cli import main
from steps.domain.intent import trailer
from steps.kustomize import hold_marker

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"


def _text(tag: str, comment: str = "") -> str:
    return f"resources:\n- ../../base\nimages:\n- name: api\n  newName: {IMAGE}\n  newTag: {tag}{comment}\n"


def _commit(repo: Path, text: str, message: str, author: str) -> str:
    (repo / "overlay" / "kustomization.yaml").write_text(text)
    name, email = author.rstrip(">").split(" <")
    env = {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }
    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", message], check=True, env={**_base_env(), **env})
    return subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def _base_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


@pytest.fixture()
def rolled_back(tmp_path: Path) -> tuple[Path, str]:
    """A repository where imagebump moved api 1.4.1 → 1.5.0 and a person reverted it."""
    repo = tmp_path / "gitops"
    (repo / "overlay").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    _commit(repo, _text("1.4.1"), "initial", "Ann Operator <ann@example.com>")
    _commit(
        repo, _text("1.5.0"), f"imagebump: api 1.5.0\n\n{trailer(IMAGE, '1.5.0', None)}", "imagebump <ib@x>"
    )
    sha = _commit(repo, _text("1.4.1"), 'Revert "imagebump: api 1.5.0"', "Ann Operator <ann@example.com>")
    return repo, sha


def test_moving_a_rolled_back_entry_forward_says_which_hold_it_lifts(rolled_back, capsys) -> None:
    repo, sha = rolled_back
    assert main(["set-image", str(repo / "overlay"), "api:1.5.1"]) == 0
    out = capsys.readouterr().out
    assert "1.4.1 → " in out and "1.5.1" in out
    assert f"lifts the hold of rollback {sha[:7]} by Ann Operator" in out and "1.5.0 → 1.4.1" in out


def test_setting_it_back_further_lifts_nothing(rolled_back, capsys) -> None:
    repo, _sha = rolled_back
    assert main(["set-image", str(repo / "overlay"), "api:1.4.0"]) == 0
    assert "lifts" not in capsys.readouterr().out


def test_a_marker_is_named_and_kept(tmp_path: Path, capsys) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(_text("1.4.1", "  # imagebump:hold INC-7"))
    assert main(["set-image", str(overlay), "api:1.5.0"]) == 0
    assert "imagebump:hold INC-7" in capsys.readouterr().out
    text = (overlay / "kustomization.yaml").read_text()
    assert "newTag: 1.5.0" in text and hold_marker(text, "api") == "INC-7"

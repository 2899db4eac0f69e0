"""Issue 31 items 1-3, acceptance: a sweep over two repositories, one of them hostile in each way a
pusher can make its history hostile (huge messages, a huge old version of the file, dates after
year 9999 and before 1970, forged field separators and raw lines, option-like names), brings the
healthy one up to date and reports the hostile one with a reason — and one repository whose sweep
fails for any reason costs only its own rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from steps.git import GitAuth
from steps.reconcile import step as reconcile_step
from steps.reconcile.step import scan_targets as sweep
from steps.rules import load_rules
from tests.steps.domain import test_intent as _intent
from tests.steps.domain.test_intent import FILE, OVERLAY, PERSON, _text, _uri
from tests.steps.edit_kustomize.test_rollback_history import _rewrite_tip

_env = _intent._env  # the autouse fixture: git and AWS settings
ecr = _intent.ecr  # the ECR repository holding 1.4.1 and 1.5.0


def _rules(name: str, *remotes) -> object:
    return load_rules(
        "".join(
            f"- registryURI: {_uri(name)}\n  githubRepository: {r.url}/{OVERLAY}\n"
            f"  env: prod\n  mode: commit\n  provider: local\n"
            for r in remotes
        )
    )


def _hostile(make_remote, image: str, how: str):
    """A repository at 1.4.1 whose history is hostile in one way (none of it a rollback)."""
    remote = make_remote({FILE: _text(image, "1.4.1")})

    def touch(note: str, *, text: str | None = None) -> None:
        body = text or (remote.read(FILE) or "").replace("resources:", f"# {note}\nresources:", 1)
        remote.server.commit_files(remote.name, {FILE: body}, f"{note}\n", author=PERSON)

    if how == "huge-messages":
        for i in range(3):
            touch(f"n{i}")
            _rewrite_tip(remote, message=b"n\n\n" + b"m" * (4 * 1024 * 1024))
    elif how == "huge-old-blob":
        touch("huge", text=(remote.read(FILE) or "") + "# " + "z" * (2 * 1024 * 1024) + "\n")
        touch("small", text=_text(image, "1.4.1"))
    elif how in ("after-9999", "before-1970"):
        touch("dated")
        _rewrite_tip(remote, committer_time="99999999999999" if how == "after-9999" else "-99999999999")
    elif how == "forged-separators":
        touch("forged")
        forged = (
            b"x\x1f\n:100644 100644 --all --upload-pack=touch${IFS}PWNED M\tx\n\x1e" + b"0" * 40 + b"\x1f"
        )
        _rewrite_tip(remote, message=forged)
    elif how == "option-like-names":
        # the overlay was moved here from a directory whose name is an option
        text = remote.read(FILE) or ""
        remote.server.commit_files(
            remote.name,
            {FILE: None, "--upload-pack=touch PWNED/kustomization.yaml": text},
            "a\n",
            author=PERSON,
        )
        remote.server.commit_files(
            remote.name,
            {
                "--upload-pack=touch PWNED/kustomization.yaml": None,
                FILE: text.replace("resources:", "# m\nresources:"),
            },
            "--all\n",
            author=PERSON,
        )
    return remote


HOW = [
    "huge-messages",
    "huge-old-blob",
    "after-9999",
    "before-1970",
    "forged-separators",
    "option-like-names",
]


@pytest.mark.parametrize("how", HOW)
def test_a_sweep_brings_the_healthy_repository_up_to_date_and_reports_the_hostile_one(
    make_remote, ecr, git_token, how, tmp_path, monkeypatch
) -> None:
    name, _push = ecr
    image = _uri(name)
    healthy = make_remote({FILE: _text(image, "1.4.1")})
    hostile = _hostile(make_remote, image, how)
    monkeypatch.chdir(tmp_path)  # an option that ran would leave PWNED here or in a clone

    out = sweep(_rules(name, healthy, hostile), auth=GitAuth(git_token))

    rows = {r.repo_url: r for r in out.report}
    assert rows[healthy.url].state == "behind"
    assert [(t.repo_url, t.tag) for t in out.targets if t.repo_url == healthy.url] == [(healthy.url, "1.5.0")]
    bad = rows[hostile.url]
    assert bad.state in ("behind", "held", "unknown") and bad.reason
    if how == "huge-old-blob":
        assert "bytes" in bad.reason  # the bound that was hit, named
    assert not list(Path(tmp_path).rglob("PWNED"))


def test_one_repository_failing_in_an_unexpected_way_costs_only_its_own_rows(
    make_remote, ecr, git_token, monkeypatch
) -> None:
    name, _push = ecr
    image = _uri(name)
    healthy = make_remote({FILE: _text(image, "1.4.1")})
    broken = make_remote({FILE: _text(image, "1.4.1")})
    real = reconcile_step.reconcile_repository

    def reconcile_repository(repo_url, items, **kw):
        if repo_url == broken.url:
            raise ValueError("year 10000 is out of range")  # what a far-future commit used to raise
        return real(repo_url, items, **kw)

    monkeypatch.setattr(reconcile_step, "reconcile_repository", reconcile_repository)
    out = sweep(_rules(name, healthy, broken), auth=GitAuth(git_token), concurrency=2)
    rows = {r.repo_url: r for r in out.report}
    assert rows[healthy.url].state == "behind" and [t.repo_url for t in out.targets] == [healthy.url]
    assert (rows[broken.url].state, rows[broken.url].error) == ("unknown", "failed")
    assert "ValueError" in rows[broken.url].reason


def test_one_overlays_history_failing_costs_only_its_row(make_remote, ecr, git_token, monkeypatch) -> None:
    import steps.entry_history as history

    name, _push = ecr
    image = _uri(name)
    remote = make_remote(
        {FILE: _text(image, "1.4.1"), "apps/api/overlays/dev/kustomization.yaml": _text(image, "1.4.1")}
    )
    real = history.held_by_rollback

    def held_by_rollback(repo, rev, file, name, **kw):
        if file == FILE:
            raise OverflowError("date value out of range")
        return real(repo, rev, file, name, **kw)

    monkeypatch.setattr(history, "held_by_rollback", held_by_rollback)
    rules = load_rules(
        "".join(
            f"- registryURI: {_uri(name)}\n  githubRepository: {remote.url}/apps/api/overlays/{env}\n"
            f"  env: {env}\n  mode: commit\n  provider: local\n"
            for env in ("prod", "dev")
        )
    )
    out = sweep(rules, auth=GitAuth(git_token))
    states = {r.env: r.state for r in out.report}
    assert states == {"prod": "unknown", "dev": "behind"}
    assert [t.env for t in out.targets] == ["dev"]

"""The plan carries the file (issue 15): commit-pr's fast path and its plain path land the same.

edit-kustomize puts the kustomization's text and blob id in the plan it outputs
(:func:`steps.edit_kustomize.carry_text`); commit-pr then clones objects only (no blob, no
checkout) and takes the text from the plan for as long as the newest base holds that very blob
(:func:`steps.commit_pr.clone_base`, :meth:`steps.git.ClonedRepo.know`). These tests run every
case twice, on two identical real remotes (git http-backend, token auth) — once with the plain plan,
once with the carried one — and compare what lands: the file's bytes, the tree, the message, the
author, the outcome. And they prove the fast path downloads nothing for the file: one read session
per run instead of two, and a carried text that does not hash to its blob id is not believed.
"""

from __future__ import annotations

import pytest

from steps import commit_pr
from steps.branches import branch_name
from steps.git_repo import blob_id
from steps.models import CARRIED_TEXT_LIMIT, Plan
from tests.steps.commit_pr_support import kustomization, overlay_files, plan, target

FILE = "overlays/prod/kustomization.yaml"


@pytest.fixture(autouse=True)
def _env(git_env: str, outputs_dir, monkeypatch: pytest.MonkeyPatch) -> None:
    """The write token only, as a user sets it; identity and message from the defaults."""
    for name in (
        "IMAGEBUMP_GIT_AUTHOR_NAME",
        "IMAGEBUMP_GIT_AUTHOR_EMAIL",
        "IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE",
    ):
        monkeypatch.delenv(name, raising=False)


def carried(p: Plan, text: str) -> Plan:
    """``p`` as edit-kustomize outputs it when it read ``text``."""
    return p.model_copy(update={"base_blob": blob_id(text), "base_text": text})


def landed(remote, out, ref: str | None = None) -> dict:
    """What a user sees of a run: the outcome and what the ref holds (tree, file, message, author)."""
    ref = ref or "main"
    return {
        "action": out.action,
        "reason": out.reason.replace(remote.url, "URL"),
        "tree": remote.git("rev-parse", f"{ref}^{{tree}}").strip(),
        "file": remote.read(FILE, ref=ref),
        "message": remote.git("log", "-1", "--format=%B", ref),
        "author": remote.git("log", "-1", "--format=%an <%ae> / %cn <%ce>", ref).strip(),
        "commits": len(remote.log(ref)),
    }


@pytest.fixture()
def twins(make_remote):
    """Two identical remotes: one for the plain path, one for the fast path."""

    def make(files: dict[str, str]):
        return make_remote(files), make_remote(files)

    return make


def sessions(remote) -> int:
    return remote.server.read_sessions(remote.name)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(kustomization("1.0.0"), id="lf"),
        pytest.param(kustomization("1.0.0").replace("\n", "\r\n"), id="crlf-bytes-kept"),
        pytest.param("# déploiement ✓\n" + kustomization("1.0.0"), id="utf-8"),
    ],
)
def test_commit_mode_same_commit_either_way_and_the_fast_path_fetches_no_blob(twins, text: str) -> None:
    plain, fast = twins({FILE: text, "overlays/dev/kustomization.yaml": kustomization("1.0.0")})
    before = sessions(plain), sessions(fast)

    out_plain = commit_pr.run(target(plain.url), plan())
    out_fast = commit_pr.run(target(fast.url), carried(plan(), text))

    assert landed(plain, out_plain) == landed(fast, out_fast)
    assert out_fast.action == "committed"
    assert fast.read(FILE) == text.replace('"1.0.0"', '"1.1.0"')  # only the tag changed, bytes kept
    assert sessions(plain) - before[0] == 2  # the clone + the checkout's blob download
    assert sessions(fast) - before[1] == 1  # the clone: the file came with the plan


def test_custom_message_and_identity_land_the_same_either_way(twins, monkeypatch) -> None:
    """git commit cleans a message (trailing blanks, runs of empty lines); the fast path does too."""
    text = kustomization("1.0.0")
    plain, fast = twins({FILE: text})
    monkeypatch.setenv("IMAGEBUMP_GIT_AUTHOR_NAME", "Deploy Bot")
    monkeypatch.setenv("IMAGEBUMP_GIT_AUTHOR_EMAIL", "deploy@example.com")
    monkeypatch.setenv(
        "IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE",
        "\n\n  deploy {image_name} {new}   \n\n\n\n# {env}\t\n{details}\n\n",
    )

    out_plain = commit_pr.run(target(plain.url), plan())
    out_fast = commit_pr.run(target(fast.url), carried(plan(), text))

    assert landed(plain, out_plain) == landed(fast, out_fast)
    assert fast.git("log", "-1", "--format=%B").startswith("deploy api 1.1.0\n\n# prod\n")


def test_commit_mode_after_others_moved_the_base_still_needs_no_blob(twins) -> None:
    text = kustomization("1.0.0")
    plain, fast = twins({FILE: text, "overlays/dev/kustomization.yaml": kustomization("1.0.0")})
    for remote in (plain, fast):  # someone else's commit lands between edit-kustomize and commit-pr
        remote.commit_files({"overlays/dev/kustomization.yaml": kustomization("2.0.0")}, "someone else")
    before = sessions(fast)

    out_plain = commit_pr.run(target(plain.url), plan())
    out_fast = commit_pr.run(target(fast.url), carried(plan(), text))

    assert landed(plain, out_plain) == landed(fast, out_fast)
    assert fast.log()[:2] == ["imagebump(prod): api 1.0.0 → 1.1.0 in overlays/prod", "someone else"]
    assert sessions(fast) - before == 1


@pytest.mark.parametrize(
    ("now", "action"),
    [
        pytest.param("1.5.0", "unchanged", id="moved-on-to-newer-never-downgraded"),
        pytest.param("1.1.0", "unchanged", id="someone-landed-it"),
    ],
)
def test_file_changed_since_the_plan_is_read_again_and_decided_the_same(twins, now: str, action: str) -> None:
    text = kustomization("1.0.0")
    plain, fast = twins({FILE: text})
    for remote in (plain, fast):
        remote.commit_files({FILE: kustomization(now)}, "moved on")

    out_plain = commit_pr.run(target(plain.url), plan())
    out_fast = commit_pr.run(target(fast.url), carried(plan(), text))  # the carried blob is stale now

    assert landed(plain, out_plain) == landed(fast, out_fast)
    assert out_fast.action == action and now in out_fast.reason
    assert fast.read(FILE) == kustomization(now)


def test_a_carried_text_that_is_not_its_blob_is_not_believed(twins) -> None:
    text = kustomization("1.0.0")
    plain, fast = twins({FILE: text})
    forged = plan().model_copy(update={"base_blob": blob_id(text), "base_text": kustomization("0.0.1")})

    out_plain = commit_pr.run(target(plain.url), plan())
    out_fast = commit_pr.run(target(fast.url), forged)

    assert landed(plain, out_plain) == landed(fast, out_fast)
    assert fast.read(FILE) == kustomization("1.1.0")  # the real file, edited; the forged text never lands


def test_pr_mode_same_proposal_either_way_then_unchanged(twins) -> None:
    text = kustomization("1.0.0")
    plain, fast = twins({FILE: text})
    t_plain, t_fast = target(plain.url, mode="pr"), target(fast.url, mode="pr")
    branch = branch_name(t_fast)

    first = commit_pr.run(t_plain, plan()), commit_pr.run(t_fast, carried(plan(), text))
    assert first[0].action == first[1].action == "pr-created"
    assert landed(plain, first[0], branch) == landed(fast, first[1], branch)
    assert fast.read(FILE) == text  # the base branch is untouched

    again = commit_pr.run(t_plain, plan()), commit_pr.run(t_fast, carried(plan(), text))
    assert again[0].action == again[1].action == "unchanged"
    assert landed(plain, again[0], branch) == landed(fast, again[1], branch)


def test_concurrent_writers_with_carried_plans_all_land(make_remote) -> None:
    """Eight runs for eight overlays of one repository race on one branch; every lost race moves
    the objects-only clone to the new base (no blob downloaded) and lands in the end."""
    import threading

    paths = [f"apps/s{i}/overlays/prod" for i in range(8)]
    remote = make_remote(overlay_files(*paths))
    results, errors = {}, []

    def one(path: str) -> None:
        try:
            text = kustomization("1.0.0")
            results[path] = commit_pr.run(target(remote.url, path), carried(plan(path), text))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(p,)) for p in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert {r.action for r in results.values()} == {"committed"}
    assert all(remote.read(f"{p}/kustomization.yaml") == kustomization("1.1.0") for p in paths)
    assert len(remote.log()) == 1 + len(paths)


def test_edit_kustomize_carries_the_file_it_read_and_only_when_it_may(tmp_path) -> None:
    """carry_text: the text and its blob id for a changing plan of a regular file, nothing otherwise."""
    from steps.edit_kustomize import carry_text
    from steps.git_repo import ClonedRepo

    repo = ClonedRepo(tmp_path, "main")
    (tmp_path / "overlays" / "prod").mkdir(parents=True)
    text = kustomization("1.0.0")
    (tmp_path / FILE).write_text(text)
    changing = plan().model_copy(update={"base_commit": "a" * 40})

    out = carry_text(changing, repo, text)
    assert (out.base_text, out.base_blob) == (text, blob_id(text))
    assert carry_text(plan(changed=False), repo, text).base_text == ""  # nothing to land: nothing carried
    with_secret = text + "secretGenerator:\n  - name: db\n    literals: [password=hunter2]\n"
    assert carry_text(changing, repo, with_secret).base_text == ""  # never a secret in a parameter
    big = text + "#" * CARRIED_TEXT_LIMIT
    assert carry_text(changing, repo, big).base_blob == ""  # too large for a parameter: read again
    (tmp_path / "real.yaml").write_text(text)
    (tmp_path / FILE).unlink()
    (tmp_path / FILE).symlink_to(tmp_path / "real.yaml")
    assert carry_text(changing, repo, text).base_blob == ""  # behind a link: its blob is another


@pytest.mark.parametrize(
    "message",
    [
        "subject\n\nbody\n",
        "subject",
        "\n\n  subject  \t\n\n\n\nbody line   \n\n\n",
        "a\r\nb\r\n",
        "# kept: not a comment for git commit -F\n\n\n",
        "   \n\t\n",
        "",
    ],
)
def test_stripspace_is_what_git_commit_does_to_a_message(message: str) -> None:
    import subprocess

    from steps.git_repo import stripspace

    git = subprocess.run(["git", "stripspace"], input=message.encode(), capture_output=True, check=True)
    assert stripspace(message) == git.stdout.decode()

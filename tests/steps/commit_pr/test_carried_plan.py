"""The plan carries the file (issue 15): commit-pr's fast paths and its plain path land the same.

edit-kustomize puts the kustomization's text and blob id in the plan it outputs
(:func:`steps.edit_kustomize.carry_text`); commit-pr then clones objects only (no blob, no
checkout) and takes the text from the plan for as long as the newest base holds that very blob
(:func:`steps.commit_pr.base_branch.clone_base`, :meth:`steps.git.ClonedRepo.know`). In ``mode: commit`` the
plan also carries the commit and the trees above the file, and commit-pr's first attempt makes the
plan's base from them without any fetch and pushes with a lease on it
(:func:`steps.commit_pr.base_branch.seed_base`, :func:`steps.git.seed`). These tests run every case on
identical real remotes (git http-backend, token auth) — the plain plan and the carried one(s) —
and compare what lands: the file's bytes, the tree, the message, the author, the outcome. And
they prove what the fast paths do not download (the remote's read sessions), that carried data
which does not hash to its ids is not believed, and that a base that moved or a branch that was
deleted is never built on.
"""

from __future__ import annotations

import re

import pytest

from steps.commit_pr import base_branch
from steps.commit_pr import step as commit_pr
from steps.domain.branches import branch_name
from steps.domain.models import CARRIED_TEXT_LIMIT, Plan
from steps.git.repo import blob_id
from tests.steps.commit_pr.support import kustomization, overlay_files, plan, target

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


def seeded(remote, p: Plan, text: str) -> Plan:
    """``p`` as edit-kustomize outputs it in ``mode: commit``: the text, its blob id and the objects
    from the base commit down to the file's directory, read from a clone of ``remote`` as it is now."""
    import base64
    import tempfile
    from pathlib import Path

    from steps import git

    with tempfile.TemporaryDirectory() as tmp:
        repo = git.clone(remote.url, Path(tmp) / "r", checkout=False, auth=git.GitAuth.from_env(write=True))
        head = repo.cloned_head()
        objects = repo.path_objects(head, p.file)
    assert objects is not None
    return carried(p, text).model_copy(
        update={"base_commit": head, "base_objects": [base64.b64encode(o).decode() for o in objects]}
    )


def landed(remote, out, ref: str | None = None) -> dict:
    """What a user sees of a run: the outcome and what the ref holds (tree, file, message, author)."""
    ref = ref or "main"
    return {
        "action": out.action,
        "reason": out.reason.replace(remote.url, "URL"),
        "tree": remote.git("rev-parse", f"{ref}^{{tree}}").strip(),
        "file": remote.read(FILE, ref=ref),
        # the Imagebump-History line says what that run checked, not what it wrote: a forged or
        # stale carried text makes commit-pr judge the history itself (and so say more)
        "message": re.sub(r"(?m)^Imagebump-History: .*\n", "", remote.git("log", "-1", "--format=%B", ref)),
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


#: The file's bytes as a user may have written them: carried and landed as they are.
TEXTS = pytest.mark.parametrize(
    "text",
    [
        pytest.param(kustomization("1.0.0"), id="lf"),
        pytest.param(kustomization("1.0.0").replace("\n", "\r\n"), id="crlf-bytes-kept"),
        pytest.param("# déploiement ✓\n" + kustomization("1.0.0"), id="utf-8"),
    ],
)


@TEXTS
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


CARRY = pytest.mark.parametrize("carry", ["text", "objects"])


def carry_plan(carry: str, remote, p: Plan, text: str) -> Plan:
    """``p`` carrying the text only (``mode: pr``, or an objects chain too large to carry), or the
    objects above the file too (``mode: commit``), read from ``remote`` as it is now."""
    return carried(p, text) if carry == "text" else seeded(remote, p, text)


@CARRY
def test_commit_mode_after_others_moved_the_base_still_needs_no_blob(twins, carry: str) -> None:
    """Someone else's commit lands between edit-kustomize and commit-pr. Carried text: the clone of
    the newest base needs no blob. Carried objects: the push from the plan's base is refused (its
    lease), commit-pr clones the newest base and lands there. Both as the plain path: never the
    stale base, never someone else's commit lost, one read session."""
    text = kustomization("1.0.0")
    plain, fast = twins({FILE: text, "overlays/dev/kustomization.yaml": kustomization("1.0.0")})
    fast_plan = carry_plan(carry, fast, plan(), text)
    for remote in (plain, fast):  # someone else's commit lands between edit-kustomize and commit-pr
        remote.commit_files({"overlays/dev/kustomization.yaml": kustomization("2.0.0")}, "someone else")
    before = sessions(fast)

    out_plain = commit_pr.run(target(plain.url), plan())
    out_fast = commit_pr.run(target(fast.url), fast_plan)

    assert landed(plain, out_plain) == landed(fast, out_fast)
    assert fast.log()[:2] == ["imagebump(prod): api 1.0.0 → 1.1.0 in overlays/prod", "someone else"]
    assert fast.read("overlays/dev/kustomization.yaml") == kustomization("2.0.0")
    assert sessions(fast) - before == 1


@CARRY
@pytest.mark.parametrize(
    ("now", "action"),
    [
        pytest.param("1.5.0", "unchanged", id="moved-on-to-newer-never-downgraded"),
        pytest.param("1.1.0", "unchanged", id="someone-landed-it"),
    ],
)
def test_file_changed_since_the_plan_is_read_again_and_decided_the_same(
    twins, carry: str, now: str, action: str
) -> None:
    text = kustomization("1.0.0")
    plain, fast = twins({FILE: text})
    fast_plan = carry_plan(carry, fast, plan(), text)
    for remote in (plain, fast):
        remote.commit_files({FILE: kustomization(now)}, "moved on")

    out_plain = commit_pr.run(target(plain.url), plan())
    out_fast = commit_pr.run(target(fast.url), fast_plan)  # the carried blob (and base) is stale now

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


@CARRY
def test_concurrent_writers_with_carried_plans_all_land(make_remote, carry: str) -> None:
    """Eight plans made from one base race on one branch. Carried text: every lost race moves the
    objects-only clone to the new base (no blob downloaded). Carried objects: one push wins with its
    lease, every other is refused and clones the newest base. All land, each overlay exactly its
    change, and the remote stays whole."""
    import threading

    paths = [f"apps/s{i}/overlays/prod" for i in range(8)]
    remote = make_remote(overlay_files(*paths))
    plans = {p: carry_plan(carry, remote, plan(p), kustomization("1.0.0")) for p in paths}
    results, errors = {}, []

    def one(path: str) -> None:
        try:
            results[path] = commit_pr.land(target(remote.url, path), plans[path])
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
    assert remote.git("fsck", "--no-dangling").strip() == ""


def test_edit_kustomize_carries_the_file_it_read_and_only_when_it_may(tmp_path) -> None:
    """carry_text: the text and its blob id for a changing plan of a regular file, nothing otherwise
    (``mode: pr``: no objects are read, this directory is not a git repository)."""
    from functools import partial

    from steps.edit_kustomize.step import carry_text
    from steps.git.repo import ClonedRepo

    carry_text = partial(carry_text, mode="pr")
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

    from steps.git.commit import stripspace

    git = subprocess.run(["git", "stripspace"], input=message.encode(), capture_output=True, check=True)
    assert stripspace(message) == git.stdout.decode()


# --- the plan's own base, made from the objects it carries (mode commit) -------------------------

DEEP = "apps/team-a/api/overlays/prod/kustomization.yaml"


@pytest.fixture()
def triplets(make_remote):
    """Three identical remotes: the plain path, the carried text, the carried objects."""

    def make(files: dict[str, str]):
        return make_remote(files), make_remote(files), make_remote(files)

    return make


def _monorepo(text: str) -> dict[str, str]:
    files = {DEEP: text, "README.md": "apps\n"}
    for i in range(12):
        files[f"apps/team-{i:02d}/web/overlays/prod/kustomization.yaml"] = kustomization("1.0.0")
        files[f"apps/team-a/svc-{i:02d}/base/deploy.yaml"] = f"kind: Deployment # {i}\n"
    return files


@TEXTS
def test_carried_objects_land_the_same_commit_without_any_fetch(triplets, text: str) -> None:
    """commit-pr with the objects above the file: no clone, no fetch (zero read sessions on the
    remote), and what lands is what the plain path and the carried text land, byte for byte; the
    remote's repository stays whole (``git fsck``: every object the new commit names is there)."""
    plain, text_only, objects = triplets(_monorepo(text))
    path = "apps/team-a/api/overlays/prod"
    p = plan(path)
    seeded_plan = seeded(objects, p, text)
    before = sessions(objects)

    outs = (
        commit_pr.run(target(plain.url, path), p),
        commit_pr.run(target(text_only.url, path), carried(p, text)),
        commit_pr.run(target(objects.url, path), seeded_plan),
    )

    views = [
        {k: v for k, v in landed(r, o).items() if k != "file"} | {"file": r.read(DEEP)}
        for r, o in zip((plain, text_only, objects), outs, strict=True)
    ]
    assert views[0] == views[1] == views[2]
    assert outs[2].action == "committed"
    assert objects.read(DEEP) == text.replace('"1.0.0"', '"1.1.0"')
    assert sessions(objects) == before  # nothing read from the remote: the plan had it all
    assert objects.git("fsck", "--no-dangling").strip() == ""


def test_carried_objects_never_recreate_a_deleted_branch(make_remote) -> None:
    """The base branch is deleted after the plan: a push from the plan's base would create it again;
    the lease refuses, and commit-pr fails as the plain path does (the branch is gone)."""
    from steps.domain.errors import ConfigError

    text = kustomization("1.0.0")
    remote = make_remote({FILE: text}, branch="release")
    seeded_plan = seeded(remote, plan(), text).model_copy(update={"base_branch": "release"})
    remote.git("update-ref", "-d", "refs/heads/release")

    with pytest.raises(SystemExit) as stopped:
        commit_pr.run(target(remote.url, base_branch="release"), seeded_plan)
    assert stopped.value.code == ConfigError.exit_code
    assert "release" not in remote.git("for-each-ref", "--format=%(refname)")


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda objs: objs[:-1], id="a-tree-missing"),
        pytest.param(
            lambda objs: [objs[0], objs[1].replace(b"overlays", b"overlayz"), *objs[2:]], id="a-tree-edited"
        ),
        pytest.param(lambda objs: [objs[0] + b"\n", *objs[1:]], id="the-commit-edited"),
        pytest.param(lambda objs: ["not base64!", *objs[1:]], id="not-base64"),
    ],
)
def test_carried_objects_that_do_not_prove_the_file_are_not_used(twins, forge) -> None:
    """Objects that do not hash into a chain from the base commit to the carried blob are ignored
    (a warning; the clone path), so a plan cannot make commit-pr build on anything but the base."""
    import base64

    text = kustomization("1.0.0")
    plain, fast = twins({FILE: text})
    good = seeded(fast, plan(), text)
    raw = [base64.b64decode(o) for o in good.base_objects]
    forged = [o if isinstance(o, str) else base64.b64encode(o).decode() for o in forge(raw)]

    out_plain = commit_pr.run(target(plain.url), plan())
    out_fast = commit_pr.run(target(fast.url), good.model_copy(update={"base_objects": forged}))

    assert landed(plain, out_plain) == landed(fast, out_fast)
    assert fast.read(FILE) == kustomization("1.1.0")
    assert fast.git("fsck", "--no-dangling").strip() == ""


def test_only_unproven_carried_objects_fall_back_to_the_clone(twins, monkeypatch, tmp_path) -> None:
    """commit-pr falls back to a clone for carried objects that prove nothing (CarriedObjectsError,
    not base64 included) and for nothing else: another ValueError is a bug that must surface, not a
    silent slow path. The seam: steps.git.seed, replaced to raise."""
    from steps import git
    from steps.domain.errors import CarriedObjectsError

    text = kustomization("1.0.0")
    _plain, fast = twins({FILE: text})
    good = seeded(fast, plan(), text)
    auth = git.GitAuth.from_env(write=True)
    work = tmp_path / "work"

    not_base64 = good.model_copy(update={"base_objects": ["not base64!", *good.base_objects[1:]]})
    assert base_branch.seed_base(target(fast.url), not_base64, auth, "main", work) is None

    def refuse(*args, **kwargs):
        raise CarriedObjectsError("tree 0 is not the one its parent names")

    monkeypatch.setattr(git, "seed", refuse)
    assert base_branch.seed_base(target(fast.url), good, auth, "main", work) is None

    def bug(*args, **kwargs):
        raise ValueError("a bug in the seeding code")

    monkeypatch.setattr(git, "seed", bug)
    with pytest.raises(ValueError, match="a bug in the seeding code"):
        base_branch.seed_base(target(fast.url), good, auth, "main", work)


def test_a_push_git_cannot_send_from_the_plans_base_falls_back_to_the_clone(
    twins, monkeypatch, caplog
) -> None:
    """Should some git fail to send the commit from the carried base (an unclassified error, not a
    refusal), the step does not fail: it clones the newest base and lands as the plain path does.
    (The failure is injected: a real git sends it, as every other test here shows.)"""
    from steps import git
    from steps.domain.errors import GitCommandError

    text = kustomization("1.0.0")
    plain, fast = twins({FILE: text})
    seeded_plan = seeded(fast, plan(), text)
    push = git.ClonedRepo.push

    def failing_from_the_seed(self, *args, **kwargs):
        if self.seeded_from:
            raise GitCommandError("push of HEAD failed (exit 128): fatal: simulated pack failure")
        return push(self, *args, **kwargs)

    monkeypatch.setattr(git.ClonedRepo, "push", failing_from_the_seed)

    out_plain = commit_pr.run(target(plain.url), plan())
    out_fast = commit_pr.run(target(fast.url), seeded_plan)

    assert landed(plain, out_plain) == landed(fast, out_fast)
    assert "the push from the plan's base failed" in caplog.text


def test_edit_kustomize_carries_the_objects_above_the_file_in_commit_mode_only(make_remote) -> None:
    """A real edit-kustomize run: in ``mode: commit`` the plan carries the chain from its base
    commit to the file (it verifies), in ``mode: pr`` the text only."""
    import base64

    from steps.edit_kustomize import step as edit_kustomize
    from steps.git.objects import verify_path_chain

    path = "apps/team-a/api/overlays/prod"
    remote = make_remote(_monorepo(kustomization("1.0.0")))
    commit = edit_kustomize.run(target(remote.url, path, order="semver")).plan
    objects = [base64.b64decode(o) for o in commit.base_objects]
    assert verify_path_chain(objects, commit.base_commit, DEEP, commit.base_blob) == "100644"
    assert len(objects) == 2 + DEEP.count("/")

    pr = edit_kustomize.run(target(remote.url, path, order="semver", mode="pr")).plan
    assert pr.base_text == commit.base_text and pr.base_objects == []

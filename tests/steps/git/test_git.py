"""steps.git against a real ``git http-backend`` remote (tests/fixtures/git.py) — no fakes."""

from __future__ import annotations

import base64
import os
import random
import threading
import time
from pathlib import Path

import pytest

from imagebump.local.git_server import GitHttpServer
from steps import git
from steps.domain.errors import ConfigError, KustomizationError, PermissionDeniedError, TransientError
from steps.git import ClonedRepo, GitAuth, GitCommandError, PushRejected
from steps.git import auth as git_auth

FILES = {
    "README.md": "# gitops\n",
    "apps/api/overlays/prod/kustomization.yaml": "images:\n- name: api\n  newTag: v1\n",
    "apps/api/overlays/stg/kustomization.yaml": "images:\n- name: api\n  newTag: v1\n",
    "apps/web/base/deployment.yaml": "kind: Deployment\n",
    "docs/big.md": "lots of text\n",
}
PROD = "apps/api/overlays/prod"


@pytest.fixture()
def auth(git_token: str) -> GitAuth:
    return GitAuth(git_token)


def _secret_forms(token: str) -> list[str]:
    return [
        token,
        base64.b64encode(f"x-access-token:{token}".encode()).decode(),
        base64.b64encode(token.encode()).decode(),
    ]


def _assert_no_secret(text: str, token: str) -> None:
    for form in _secret_forms(token):
        assert form not in text


def _work_tree_files(path: Path) -> list[str]:
    return sorted(
        p.relative_to(path).as_posix()
        for p in path.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(path).parts
    )


# --- auth from the environment ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "write", "expected"),
    [
        pytest.param({"IMAGEBUMP_GIT_TOKEN": "w"}, True, "w", id="write-env"),
        pytest.param({"IMAGEBUMP_GIT_TOKEN_FILE": "FILE"}, True, "from-file", id="write-file"),
        pytest.param(
            {"IMAGEBUMP_GIT_TOKEN": "w", "IMAGEBUMP_GIT_TOKEN_FILE": "FILE"}, True, "w", id="env-wins"
        ),
        pytest.param({"IMAGEBUMP_GIT_READ_TOKEN": "r"}, False, "r", id="read-env"),
        pytest.param({"IMAGEBUMP_GIT_READ_TOKEN_FILE": "FILE"}, False, "from-file", id="read-file"),
        pytest.param({}, False, None, id="read-falls-back-to-anonymous"),
        pytest.param(
            {"IMAGEBUMP_GIT_READ_TOKEN_FILE": "/nonexistent/git-read/token"},
            False,
            None,
            id="read-file-of-an-absent-optional-secret-means-anonymous",
        ),
        pytest.param({"IMAGEBUMP_GIT_TOKEN": "w"}, False, None, id="read-ignores-write-token"),
    ],
)
def test_auth_from_env(monkeypatch, tmp_path, env, write, expected) -> None:
    for name in ("IMAGEBUMP_GIT_TOKEN", "IMAGEBUMP_GIT_READ_TOKEN"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(f"{name}_FILE", raising=False)
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    for key, value in env.items():
        monkeypatch.setenv(key, str(token_file) if value == "FILE" else value)
    auth = GitAuth.from_env(write=write)
    assert (auth.token if auth else None) == expected


@pytest.mark.parametrize(
    ("env", "match"),
    [
        pytest.param({}, "set IMAGEBUMP_GIT_TOKEN or IMAGEBUMP_GIT_TOKEN_FILE", id="write-missing"),
        pytest.param(
            {"IMAGEBUMP_GIT_TOKEN_FILE": "/nonexistent/token"},
            "cannot read the git token file",
            id="file-missing",
        ),
        pytest.param({"IMAGEBUMP_GIT_TOKEN_FILE": "EMPTY"}, "is empty", id="file-empty"),
    ],
)
def test_auth_from_env_errors(monkeypatch, tmp_path, env, match) -> None:
    for name in ("IMAGEBUMP_GIT_TOKEN", "IMAGEBUMP_GIT_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for key, value in env.items():
        monkeypatch.setenv(key, str(empty) if value == "EMPTY" else value)
    with pytest.raises(ConfigError, match=match):
        GitAuth.from_env(write=True)


def test_auth_repr_and_redaction_hide_every_form() -> None:
    auth = GitAuth("s3cr3t-token-value")
    assert "s3cr3t" not in repr(auth) and "s3cr3t" not in str(auth)
    text = f"x {auth.token} y {auth.header} z https://u:{auth.token}@host/o/r"
    redacted = git.redact(text, auth)
    _assert_no_secret(redacted, auth.token)
    assert "https://***@host/o/r" in redacted
    assert git.redact("Authorization: Bearer abc.def", None) == "Authorization: Bearer ***"


def test_url_with_credentials_is_refused_without_echoing_them(tmp_path, git_server) -> None:
    url = git_server.base_url.replace("http://", "http://user:hunter2@") + "/o/r"
    with pytest.raises(ConfigError, match="holds credentials") as info:
        git.clone(url, tmp_path / "w")
    assert "hunter2" not in str(info.value)


# --- clone --------------------------------------------------------------------------------------


def test_clone_is_partial_sparse_and_only_materialises_the_overlay(make_remote, auth, tmp_path) -> None:
    remote = make_remote(FILES)
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    assert repo.branch == "main"
    assert repo.head() == remote.rev("main")
    # cone mode: the overlay, plus top-level files; nothing else
    assert _work_tree_files(repo.path) == ["README.md", f"{PROD}/kustomization.yaml"]
    assert repo.read(f"{PROD}/kustomization.yaml") == FILES[f"{PROD}/kustomization.yaml"]
    assert repo.read("apps/web/base/deployment.yaml") is None
    assert repo.git("rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    assert repo.git("config", "remote.origin.partialclonefilter").stdout.strip() == "blob:none"
    # blobs outside the cone were never fetched
    missing = repo.git("rev-list", "--objects", "--missing=print", "HEAD").stdout
    assert "?" in missing


def test_clone_default_branch_and_explicit_branch(make_remote, auth, tmp_path) -> None:
    remote = make_remote(FILES, branch="trunk")
    assert git.default_branch(remote.url, auth) == "trunk"
    assert git.clone(remote.url, tmp_path / "a", paths=[PROD], auth=auth).branch == "trunk"
    remote.commit_files({"x.txt": "x\n"}, branch="release")
    repo = git.clone(remote.url, tmp_path / "b", branch="release", paths=[PROD], auth=auth)
    assert repo.branch == "release" and repo.read("x.txt") == "x\n"
    assert git.ls_remote(remote.url, "release", auth) == remote.rev("release")
    assert git.ls_remote(remote.url, "nope", auth) is None


def test_clone_url_with_dot_git_suffix(make_remote, auth, tmp_path) -> None:
    remote = make_remote(FILES)
    repo = git.clone(remote.url + ".git", tmp_path / "w", paths=[PROD], auth=auth)
    assert repo.head() == remote.rev()


@pytest.mark.parametrize(
    ("which", "error", "match"),
    [
        pytest.param(
            "no-token",
            PermissionDeniedError,
            r"refused an anonymous read \(HTTP 401\).*imagebump-git-read",
            id="no-token",
        ),
        pytest.param(
            "wrong-token", PermissionDeniedError, "token was rejected or is missing", id="wrong-token"
        ),
        pytest.param("no-repo", ConfigError, "repository not found", id="no-repo"),
        pytest.param("no-branch", ConfigError, "branch 'nope' does not exist", id="no-branch"),
    ],
)
def test_clone_errors(make_remote, auth, tmp_path, git_token, which, error, match) -> None:
    remote = make_remote(FILES)
    kwargs: dict = {"paths": [PROD], "auth": auth}
    url = remote.url
    if which == "no-token":
        kwargs["auth"] = None
    elif which == "wrong-token":
        kwargs["auth"] = GitAuth("wrong-" + git_token[::-1])
    elif which == "no-repo":
        url += "-missing"
    elif which == "no-branch":
        kwargs["branch"] = "nope"
    with pytest.raises(error, match=match) as info:
        git.clone(url, tmp_path / "w", **kwargs)
    assert type(info.value) is error
    _assert_no_secret(str(info.value), git_token)
    if which == "wrong-token":
        _assert_no_secret(str(info.value), kwargs["auth"].token)


def test_default_branch_without_token_is_permission_denied(make_remote, git_token) -> None:
    remote = make_remote(FILES)
    with pytest.raises(PermissionDeniedError) as info:
        git.default_branch(remote.url)
    _assert_no_secret(str(info.value), git_token)


def test_unreachable_remote_is_transient(tmp_path, auth) -> None:
    with GitHttpServer(tmp_path / "gone", "tok") as server:
        url = server.create_repo("o/r", FILES)
    with pytest.raises(TransientError, match="may pass"):
        git.clone(url, tmp_path / "w", paths=[PROD], auth=auth)


def test_fail_rate_503_is_transient(tmp_path) -> None:
    with GitHttpServer(tmp_path / "root", "tok", fail_rate=1.0) as server:
        url = server.create_repo("o/r", FILES)
        with pytest.raises(TransientError, match="503") as info:
            git.clone(url, tmp_path / "w", paths=[PROD], auth=GitAuth("tok"))
        assert not isinstance(info.value, PushRejected)


# --- token hygiene ------------------------------------------------------------------------------


def test_token_never_lands_in_the_clone_or_in_outputs(make_remote, auth, git_token, tmp_path) -> None:
    remote = make_remote(FILES)
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    repo.write(f"{PROD}/kustomization.yaml", "images:\n- name: api\n  newTag: v2\n")
    repo.commit("bump api")
    repo.push("HEAD:main")
    remote.commit_files({"docs/big.md": "moved\n"})
    repo.write(f"{PROD}/kustomization.yaml", "images:\n- name: api\n  newTag: v3\n")
    repo.commit("bump api again")
    with pytest.raises(PushRejected) as info:
        repo.push("HEAD:main")
    _assert_no_secret(str(info.value), git_token)
    for path in (tmp_path / "w").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for form in _secret_forms(git_token):
                assert form.encode() not in data, path
    proc = repo.git("config", "--list", "--show-origin")
    _assert_no_secret(proc.stdout, git_token)
    # the header is in the child's environment, never in argv
    proc = repo.git("ls-remote", "origin")
    _assert_no_secret(" ".join(proc.args) + proc.stdout + proc.stderr, git_token)


def test_auth_header_is_scoped_to_the_remote_origin(auth) -> None:
    env = git_auth.git_env(auth, "https://git.example.com/o/r", None)
    keys = {
        env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"] for i in range(int(env["GIT_CONFIG_COUNT"]))
    }
    assert keys["http.https://git.example.com/.extraHeader"] == auth.header
    assert "http.extraHeader" not in keys
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_ASKPASS"] == ""
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull and env["GIT_CONFIG_NOSYSTEM"] == "1"


def test_caller_git_environment_does_not_leak(monkeypatch, make_remote, auth, tmp_path) -> None:
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_CURL_VERBOSE", "1")
    monkeypatch.setenv("GIT_TRACE_CURL", "1")
    remote = make_remote(FILES)
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    proc = repo.git("fetch", "origin")
    _assert_no_secret(proc.stderr, auth.token)


# --- files --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "relpath",
    [
        pytest.param("../outside.txt", id="dot-dot"),
        pytest.param("apps/../../outside.txt", id="nested-dot-dot"),
        pytest.param("/etc/passwd", id="absolute"),
        pytest.param("", id="empty"),
        pytest.param("link/file.txt", id="symlinked-dir-outside"),
        pytest.param("linkfile", id="symlinked-file-outside"),
        pytest.param(".git/config", id="into-dot-git"),
    ],
)
def test_write_and_read_refuse_escapes(make_remote, auth, tmp_path, relpath) -> None:
    remote = make_remote(FILES)
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (repo.path / "link").symlink_to(outside)
    (repo.path / "linkfile").symlink_to(outside / "secret.txt")
    with pytest.raises(ConfigError):
        repo.write(relpath, "pwned\n")
    with pytest.raises(ConfigError):
        repo.read(relpath)
    assert (outside / "secret.txt").read_text() == "secret\n"
    assert not (tmp_path / "outside.txt").exists()


def test_symlink_inside_the_work_tree_is_allowed(make_remote, auth, tmp_path) -> None:
    remote = make_remote(FILES)
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    (repo.path / "prod").symlink_to(repo.path / PROD)
    assert repo.read("prod/kustomization.yaml") == FILES[f"{PROD}/kustomization.yaml"]


def test_crlf_survives_read_write_commit_push(make_remote, auth, tmp_path) -> None:
    text = "images:\r\n- name: api\r\n  newTag: v1\r\n"
    remote = make_remote({f"{PROD}/kustomization.yaml": text})
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    assert repo.read(f"{PROD}/kustomization.yaml") == text
    repo.write(f"{PROD}/kustomization.yaml", text.replace("v1", "v2"))
    repo.commit("bump")
    repo.push("HEAD:main")
    assert remote.read(f"{PROD}/kustomization.yaml") == text.replace("v1", "v2")


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"images:\n- name: api\n  newTag: v1\n# owner: Jos\xe9\n", id="latin-1-comment"),
        pytest.param("images:\n- name: api\n  newTag: v1\n".encode("utf-16"), id="utf-16"),
    ],
)
@pytest.mark.parametrize("checkout", [True, False], ids=["checked-out", "objects-only"])
def test_a_file_that_is_not_utf8_is_refused_never_rewritten(
    make_remote, auth, tmp_path, data, checkout
) -> None:
    # decoded with errors="replace", a Latin-1 byte came back as U+FFFD and was committed as such
    remote = make_remote({"README.md": "# gitops\n"})
    remote.commit_files({f"{PROD}/kustomization.yaml": data}, "a person's file")
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth, checkout=checkout)
    for read in (
        lambda: repo.read(f"{PROD}/kustomization.yaml"),
        lambda: repo.show("HEAD", f"{PROD}/kustomization.yaml"),
    ):
        with pytest.raises(KustomizationError) as caught:
            read()
        assert caught.value.reason == "not-utf8" and caught.value.field == f"{PROD}/kustomization.yaml"


@pytest.mark.parametrize(
    ("attributes", "text"),
    [
        pytest.param(
            "*.yaml text eol=lf\n", "a: 1\r\nimage:\r\n  tag: v1\r\nb: 2\r\n", id="crlf-blob-eol-lf"
        ),
        pytest.param("*.yaml text\n", "a: 1\r\nimage:\r\n  tag: v1\r\nb: 2\r\n", id="crlf-blob-text"),
        pytest.param("*.yaml text eol=crlf\n", "a: 1\nimage:\n  tag: v1\nb: 2\n", id="lf-blob-eol-crlf"),
        pytest.param("*.yaml ident\n", "# $Id$\nimage:\n  tag: v1\n", id="ident"),
    ],
)
@pytest.mark.parametrize("one_process", [True, False], ids=["one-process", "checkout-set"])
def test_gitattributes_never_rewrite_the_bytes_read_or_committed(
    make_remote, auth, tmp_path, attributes, text, one_process
) -> None:
    # the clean filter of `git commit` normalised every line ending of a CRLF file: 4 lines changed, not 1
    file = f"{PROD}/values.yaml"
    remote = make_remote({".gitattributes": attributes, file: text})
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth, one_process=one_process)
    assert repo.read(file) == text  # the blob's bytes, as the objects-only read gives them
    repo.write(file, text.replace("v1", "v2"))
    repo.commit("bump")
    repo.push("HEAD:main")
    after = remote.read(file)
    assert after == text.replace("v1", "v2")
    assert sum(a != b for a, b in zip(text.split("\n"), after.split("\n"), strict=True)) == 1


# --- commit and push ----------------------------------------------------------------------------


def test_commit_push_round_trip_and_nothing_to_commit(make_remote, auth, tmp_path) -> None:
    remote = make_remote(FILES)
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    base = repo.head()
    assert repo.commit("nothing") is None
    repo.write(f"{PROD}/kustomization.yaml", FILES[f"{PROD}/kustomization.yaml"])  # same bytes
    assert repo.commit("still nothing") is None
    repo.write(f"{PROD}/kustomization.yaml", "images:\n- name: api\n  newTag: v2\n")
    sha = repo.commit("bump api to v2\n\nbody line", "Bump Bot", "bot@example.com")
    assert sha and sha != base
    repo.push("HEAD:main")
    assert remote.rev() == sha
    assert remote.log() == ["bump api to v2", "initial commit"]
    assert remote.git("log", "-1", "--format=%an <%ae>|%cn <%ce>", "main").strip() == (
        "Bump Bot <bot@example.com>|Bump Bot <bot@example.com>"
    )
    # untouched paths outside the cone are intact
    assert remote.read("apps/web/base/deployment.yaml") == FILES["apps/web/base/deployment.yaml"]
    assert remote.read(f"{PROD}/kustomization.yaml") == "images:\n- name: api\n  newTag: v2\n"


def test_commit_identity_from_env_and_name_email_form(monkeypatch, make_remote, auth, tmp_path) -> None:
    monkeypatch.setenv("IMAGEBUMP_GIT_AUTHOR_NAME", "Env Bot")
    monkeypatch.setenv("IMAGEBUMP_GIT_AUTHOR_EMAIL", "env@example.com")
    remote = make_remote(FILES)
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    repo.write(f"{PROD}/a.txt", "a\n")
    repo.commit("one")
    assert repo.git("log", "-1", "--format=%an <%ae>").stdout.strip() == "Env Bot <env@example.com>"
    repo.write(f"{PROD}/b.txt", "b\n")
    repo.commit("two", "Named <named@example.com>")
    assert repo.git("log", "-1", "--format=%an <%ae>").stdout.strip() == "Named <named@example.com>"


def test_non_fast_forward_is_push_rejected_then_fetch_and_reset_retries(make_remote, auth, tmp_path) -> None:
    remote = make_remote(FILES)
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    repo.write(f"{PROD}/kustomization.yaml", "images:\n- name: api\n  newTag: v2\n")
    repo.commit("ours")
    theirs = remote.commit_files(
        {"apps/api/overlays/stg/kustomization.yaml": "images:\n- name: api\n  newTag: v9\n"}, "theirs"
    )
    with pytest.raises(PushRejected, match="branch 'main'.*remote moved on") as info:
        repo.push("HEAD:main")
    assert isinstance(info.value, TransientError)
    assert repo.fetch_and_reset() == theirs
    assert repo.head() == theirs
    assert repo.read(f"{PROD}/kustomization.yaml") == FILES[f"{PROD}/kustomization.yaml"]
    assert _work_tree_files(repo.path) == ["README.md", f"{PROD}/kustomization.yaml"]  # cone kept
    repo.write(f"{PROD}/kustomization.yaml", "images:\n- name: api\n  newTag: v2\n")
    repo.commit("ours")
    repo.push("HEAD:main")
    assert remote.log() == ["ours", "theirs", "initial commit"]


def test_force_with_lease(make_remote, auth, tmp_path) -> None:
    remote = make_remote(FILES)
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    branch = "imagebump/prod/api"
    repo.write(f"{PROD}/kustomization.yaml", "images:\n- name: api\n  newTag: v2\n")
    first = repo.commit("v2")
    repo.push(f"HEAD:refs/heads/{branch}", force_with_lease=(f"refs/heads/{branch}", ""))  # must not exist
    assert remote.rev(branch) == first
    # someone moved the branch: our lease on `first` is stale
    moved = remote.commit_files({"x.txt": "x\n"}, branch=branch)
    repo.fetch_and_reset("main")
    repo.write(f"{PROD}/kustomization.yaml", "images:\n- name: api\n  newTag: v3\n")
    second = repo.commit("v3")
    with pytest.raises(PushRejected, match="stale"):
        repo.push(f"HEAD:refs/heads/{branch}", force_with_lease=(f"refs/heads/{branch}", first))
    with pytest.raises(PushRejected, match="stale"):
        repo.push(f"HEAD:refs/heads/{branch}", force_with_lease=(branch, first))
    assert remote.rev(branch) == moved
    repo.push(f"HEAD:refs/heads/{branch}", force_with_lease=(branch, moved))  # short name works too
    assert remote.rev(branch) == second
    assert repo.remote_head(branch) == second
    assert sorted(remote.branches()) == sorted(["main", branch])


def test_pre_receive_hook_decline_is_permission_denied(make_remote, auth, git_token, tmp_path) -> None:
    remote = make_remote(FILES)
    remote.protect("main")
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    repo.write(f"{PROD}/kustomization.yaml", "images:\n- name: api\n  newTag: v2\n")
    repo.commit("bump")
    with pytest.raises(PermissionDeniedError) as info:
        repo.push("HEAD:main")
    message = str(info.value)
    assert "branch 'main'" in message and "mode: pr" in message and "protected branch" in message
    _assert_no_secret(message, git_token)
    # other branches are still writable
    repo.push("HEAD:refs/heads/imagebump/x")
    assert "imagebump/x" in remote.branches()


def test_push_with_wrong_token_is_permission_denied(make_remote, auth, tmp_path) -> None:
    remote = make_remote(FILES)
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    repo.write(f"{PROD}/a.txt", "a\n")
    repo.commit("a")
    bad = ClonedRepo(repo.path, repo.branch, GitAuth("not-the-token"), url=remote.url)
    with pytest.raises(PermissionDeniedError, match="token was rejected") as info:
        bad.push("HEAD:main")
    assert "not-the-token" not in str(info.value)


def test_eight_concurrent_writers_all_land(make_remote, auth, tmp_path) -> None:
    """8 writers, different overlays, one branch: rebase-and-retry loses nothing."""
    files = {
        f"apps/svc{i}/overlays/prod/kustomization.yaml": f"images:\n- name: svc{i}\n  newTag: v1\n"
        for i in range(8)
    }
    remote = make_remote(files)
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def writer(i: int) -> None:
        try:
            path = f"apps/svc{i}/overlays/prod"
            repo = git.clone(remote.url, tmp_path / f"w{i}", paths=[path], auth=auth)
            start.wait()
            rng = random.Random(i)
            for attempt in range(30):
                repo.write(f"{path}/kustomization.yaml", f"images:\n- name: svc{i}\n  newTag: v2\n")
                repo.commit(f"svc{i} v2")
                try:
                    repo.push(f"HEAD:{repo.branch}")
                    return
                except PushRejected:
                    time.sleep(rng.uniform(0, 0.05 * (attempt + 1)))
                    repo.fetch_and_reset()
            raise AssertionError(f"writer {i} never landed")
        except BaseException as exc:  # noqa: BLE001 - collected and re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert sorted(remote.log()[:-1]) == sorted(f"svc{i} v2" for i in range(8))
    for i in range(8):
        assert remote.read(f"apps/svc{i}/overlays/prod/kustomization.yaml").endswith("newTag: v2\n")


# --- classification of git's messages (texts as git and GitHub print them) ----------------------


@pytest.mark.parametrize(
    ("stderr", "args", "error"),
    [
        pytest.param(
            " ! [rejected]        main -> main (fetch first)\nerror: failed to push some refs",
            ["push", "origin", "HEAD:main"],
            PushRejected,
            id="fetch-first",
        ),
        pytest.param(
            " ! [rejected]        main -> main (non-fast-forward)",
            ["push", "origin", "HEAD:main"],
            PushRejected,
            id="non-fast-forward",
        ),
        pytest.param(
            " ! [rejected]        x -> x (stale info)",
            ["push", "origin", "HEAD:x"],
            PushRejected,
            id="stale-lease",
        ),
        pytest.param(
            " ! [remote rejected] main -> main (cannot lock ref 'refs/heads/main': is at 1 but expected 2)",
            ["push", "origin", "HEAD:main"],
            PushRejected,
            id="lost-ref-lock-race",
        ),
        pytest.param(
            " ! [remote rejected] main -> main (failed to update ref)",
            ["push", "origin", "HEAD:main"],
            PushRejected,
            id="failed-to-update-ref",
        ),
        pytest.param(
            "remote: error: GH006: Protected branch update failed for refs/heads/main.\n"
            " ! [remote rejected] main -> main (protected branch hook declined)",
            ["push", "origin", "HEAD:main"],
            PermissionDeniedError,
            id="github-protected",
        ),
        pytest.param(
            " ! [remote rejected] main -> main (pre-receive hook declined)",
            ["push", "origin", "HEAD:main"],
            PermissionDeniedError,
            id="hook-declined",
        ),
        pytest.param(
            "remote: Permission to o/r.git denied to bot.\nfatal: unable to access "
            "'https://github.com/o/r/': The requested URL returned error: 403",
            ["push", "origin", "HEAD:main"],
            PermissionDeniedError,
            id="push-403",
        ),
        pytest.param(
            "fatal: unable to access 'https://h/o/r/': The requested URL returned error: 403",
            ["clone"],
            PermissionDeniedError,
            id="clone-403",
        ),
        pytest.param(
            "remote: Invalid username or password.\nfatal: Authentication failed for 'https://h/o/r/'",
            ["clone"],
            PermissionDeniedError,
            id="auth-failed",
        ),
        pytest.param(
            "remote: Repository not found.\nfatal: repository 'https://h/o/r/' not found",
            ["clone"],
            ConfigError,
            id="not-found",
        ),
        pytest.param(
            "warning: Could not find remote branch dev to clone.\nfatal: Remote branch dev not found "
            "in upstream origin",
            ["clone"],
            ConfigError,
            id="no-branch",
        ),
        pytest.param(
            "fatal: unable to access 'https://h/o/r/': The requested URL returned error: 502",
            ["fetch"],
            TransientError,
            id="502",
        ),
        pytest.param(
            "fatal: unable to access 'https://h/': Could not resolve host: h",
            ["clone"],
            TransientError,
            id="dns",
        ),
        pytest.param(
            "error: RPC failed; curl 18 transfer closed\nfatal: early EOF",
            ["clone"],
            TransientError,
            id="early-eof",
        ),
        pytest.param("fatal: something nobody has seen", ["status"], GitCommandError, id="unknown"),
    ],
)
def test_classify(stderr, args, error) -> None:
    err = git.classify(stderr, args=args, url="https://h/o/r")
    assert type(err) is error
    if error is PermissionDeniedError and args[0] == "push":
        assert "branch 'main'" in str(err) and "mode: pr" in str(err)


# --- the fast paths give what the plain commands give (issue 15) ---------------------------------


def _clone_state(repo: ClonedRepo) -> dict[str, object]:
    """What a clone is to the steps: files, index (sparse), cone, configuration, HEAD."""
    return {
        "files": _work_tree_files(repo.path),
        "index": repo.git("ls-files", "--sparse", "--stage").stdout,
        "cone": repo.git("sparse-checkout", "list").stdout,
        "patterns": sorted(
            (repo.path / ".git" / "info" / "sparse-checkout").read_text().split()
            if (repo.path / ".git" / "info" / "sparse-checkout").exists()
            else []
        ),
        "config": [  # the effective values (sparse-checkout set writes them to config.worktree)
            repo.git("config", "--get", key, check=False).stdout.strip()
            for key in ("core.sparseCheckout", "core.sparseCheckoutCone", "index.sparse")
        ],
        "status": repo.git("status", "--porcelain").stdout,
        "head": repo.head(),
        "branch": repo.branch,
        "shallow": repo.git("rev-parse", "--is-shallow-repository").stdout,
        "filter": repo.git("config", "remote.origin.partialclonefilter").stdout,
    }


@pytest.mark.parametrize(
    ("paths", "sparse"),
    [
        pytest.param([PROD], None, id="one-overlay"),
        pytest.param([PROD, "apps/web/base"], None, id="two-cones"),
        pytest.param(["apps/api", PROD], None, id="nested"),
        pytest.param(["docs"], None, id="top-level-dir"),
        pytest.param([], True, id="top-level-files-only"),
    ],
)
def test_one_process_sparse_clone_equals_sparse_checkout_set(
    make_remote, auth, tmp_path, paths, sparse
) -> None:
    """The one-``git clone`` form (cone file from a private template) and clone + ``sparse-checkout
    set`` + ``checkout`` leave the same work tree, sparse index, cone and settings."""
    remote = make_remote(FILES)
    fast = git.clone(remote.url, tmp_path / "fast", paths=paths, sparse=sparse, auth=auth)
    plain = git.clone(
        remote.url, tmp_path / "plain", paths=paths, sparse=sparse, auth=auth, one_process=False
    )
    assert _clone_state(fast) == _clone_state(plain)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fast", "plain"]  # the template is gone
    assert not (fast.path / ".git" / "hooks").exists()  # no sample hooks copied


@pytest.mark.parametrize(
    "paths", [[PROD], [PROD, "apps/web/base"], ["apps/api", PROD], ["a", "b/c/d", "b/e"], []]
)
def test_cone_patterns_are_what_git_writes(tmp_path, paths) -> None:
    repo = tmp_path / "r"
    git.run_git(["init", "--quiet", str(repo)])
    git.run_git(["sparse-checkout", "set", "--cone", "--", *paths], repo)
    written = (repo / ".git" / "info" / "sparse-checkout").read_text()
    assert sorted(git.cone_patterns(paths).splitlines()) == sorted(written.splitlines())


def test_cone_patterns_leave_unusual_paths_to_git() -> None:
    assert git.cone_patterns(["apps/my app"]) is None
    assert git.cone_patterns(["apps/[x]"]) is None


def test_fast_commit_gives_the_sha_rev_parse_gives(make_remote, auth, tmp_path) -> None:
    remote = make_remote(FILES)
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    assert repo.cloned_head() == repo.head() == remote.rev("main")
    repo.write(f"{PROD}/kustomization.yaml", "images:\n- name: api\n  newTag: v2\n")
    sha = repo.commit("bump")
    assert sha == repo.head()
    assert repo.git("status", "--porcelain").stdout == ""
    # a new (untracked) file goes through `git add` first, and lands in the same commit form
    repo.write(f"{PROD}/extra.yaml", "kind: ConfigMap\n")
    repo.write(f"{PROD}/kustomization.yaml", "images:\n- name: api\n  newTag: v3\n")
    sha2 = repo.commit("bump and add")
    assert sha2 == repo.head() and sha2 != sha
    assert repo.git("show", "--name-only", "--format=", "HEAD").stdout.split() == [
        f"{PROD}/extra.yaml",
        f"{PROD}/kustomization.yaml",
    ]
    assert repo.commit("nothing more") is None
    # after a commit HEAD moved: the file read agrees with git
    assert repo.cloned_head() == sha2


def test_the_default_branch_read_from_head_is_the_one_git_names(make_remote, auth, tmp_path) -> None:
    remote = make_remote(FILES, branch="release/2026.12")
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)  # no branch: the remote's default
    assert repo.branch == "release/2026.12"
    assert repo.branch == repo.git("symbolic-ref", "--short", "HEAD").stdout.strip()
    repo.git("checkout", "--quiet", "--detach")  # HEAD names no branch: git is asked, and says so
    with pytest.raises(GitCommandError, match="not a symbolic ref"):
        repo.head_branch()


def test_cloned_head_falls_back_to_git_when_the_files_say_nothing(make_remote, auth, tmp_path) -> None:
    remote = make_remote(FILES)
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    repo.git("checkout", "--quiet", "--detach")
    assert repo.cloned_head() == remote.rev("main")


def test_git_that_outlives_its_timeout_is_transient(tmp_path) -> None:
    with pytest.raises(TransientError, match="timed out"):
        git.run_git(["-c", "alias.slow=!sleep 2", "slow"], tmp_path, timeout=0.3)


def test_git_that_outlives_its_timeout_is_killed_and_its_output_kept(tmp_path) -> None:
    """Past its timeout git is killed and what it wrote is kept, as ``subprocess.run`` keeps it."""
    import subprocess

    from steps.git import process

    with pytest.raises(subprocess.TimeoutExpired) as raised:
        process._run(
            ["sh", "-c", "echo early; echo warn >&2; exec sleep 5"], tmp_path, dict(os.environ), None, 0.3
        )
    assert (raised.value.stdout, raised.value.stderr, raised.value.timeout) == ("early\n", "warn\n", 0.3)


def test_git_runs_on_the_callers_thread_alone_and_takes_input_larger_than_a_pipe(
    tmp_path, thread_starts
) -> None:
    """A git command starts no thread of ours (a thread per command waits to be scheduled before git
    starts); its stdin is written while its output is read, however large both are."""
    import hashlib

    started = thread_starts()
    blob = "".join(random.choice("abc\n") for _ in range(600_000))  # more than a pipe holds
    git.run_git(["init", "--quiet", str(tmp_path / "r")])
    sha = git.run_git(["hash-object", "-w", "--stdin"], tmp_path / "r", input=blob).stdout.strip()
    assert sha == hashlib.sha1(f"blob {len(blob)}\0{blob}".encode()).hexdigest()
    shown = git.run_git(["cat-file", "--batch"], tmp_path / "r", input=sha + "\n", raw_stdout=True)
    assert shown.stdout == f"{sha} blob {len(blob)}\n{blob}\n".encode()
    assert started == []


def test_tree_head_trees_and_mode_at_answer_as_git_does(make_remote, auth, tmp_path) -> None:
    remote = make_remote(FILES)
    repo = git.clone(remote.url, tmp_path / "w", paths=[PROD], auth=auth)
    base, base_tree = repo.head(), repo.tree("HEAD")
    repo.write(f"{PROD}/kustomization.yaml", "images:\n- name: api\n  newTag: v2\n")
    sha = repo.commit("bump")
    assert sha
    repo.push("HEAD:main")
    assert repo.head_trees() == (base, base_tree, repo.tree(sha))
    assert repo.tree(sha) == remote.git("rev-parse", f"{sha}^{{tree}}").strip() != base_tree
    assert repo.mode_at("HEAD", f"{PROD}/kustomization.yaml") == "100644"
    assert repo.mode_at("HEAD", f"{PROD}/missing.yaml") is None


def test_a_command_writing_more_than_max_stdout_is_ended_there(tmp_path) -> None:
    """``max_stdout``: git is stopped once it wrote more than the limit, and the result says so
    (nothing of the output is kept); within the limit it is the whole output, as without one."""
    from steps.git.process import OVER_LIMIT, run_git

    run_git(["init", "-q", str(tmp_path)])
    big = tmp_path / "big"
    big.write_bytes(b"x" * (8 << 20))
    oid = run_git(["hash-object", "-w", str(big)], tmp_path).stdout.strip()

    over = run_git(["cat-file", "blob", oid], tmp_path, raw_stdout=True, max_stdout=1 << 20)
    assert over.returncode == OVER_LIMIT
    assert over.stdout == b""

    whole = run_git(["cat-file", "blob", oid], tmp_path, raw_stdout=True, max_stdout=8 << 20)
    assert whole.returncode == 0 and len(whole.stdout) == 8 << 20

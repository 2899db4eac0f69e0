"""GitHttpServer: real ``git http-backend`` over HTTP with token auth (no fakes)."""

from __future__ import annotations

import base64
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from imagebump.local.git_server import GitHttpServer


def _get(url: str, user: str | None = None, password: str | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url)
    if password is not None:
        basic = base64.b64encode(f"{user or 'anyone'}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {basic}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _refs_url(url: str) -> str:
    return f"{url}/info/refs?service=git-upload-pack"


@pytest.mark.parametrize(
    ("user", "password", "status"),
    [
        pytest.param(None, None, 401, id="no-credentials"),
        pytest.param("x-access-token", "wrong", 401, id="wrong-token"),
        pytest.param("x-access-token", "", 401, id="empty-password"),
        pytest.param("x-access-token", "TOKEN", 200, id="right-token"),
        pytest.param("anybody", "TOKEN", 200, id="any-user-name"),
    ],
)
def test_auth(git_server, git_token, user, password, status) -> None:
    url = git_server.create_repo(f"auth/{user}-{password}-{status}", {"a.txt": "a\n"})
    got, headers, body = _get(_refs_url(url), user, git_token if password == "TOKEN" else password)
    assert got == status
    if status == 401:
        assert headers["WWW-Authenticate"] == 'Basic realm="imagebump"'
    else:
        assert headers["Content-Type"] == "application/x-git-upload-pack-advertisement"
        assert b"refs/heads/main" in body


def test_dot_git_suffix_and_plain_name_reach_the_same_repo(git_server, git_token) -> None:
    url = git_server.create_repo("suffix/repo", {"a.txt": "a\n"})
    assert _get(_refs_url(url), password=git_token)[0] == 200
    assert _get(_refs_url(url + ".git"), password=git_token)[0] == 200


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/", id="root"),
        pytest.param("/only-one/info/refs?service=git-upload-pack", id="no-owner"),
        pytest.param("/a/../b/info/refs?service=git-upload-pack", id="dot-dot"),
        pytest.param("/owner/repo/not-a-service", id="unknown-service"),
    ],
)
def test_malformed_paths_are_404(git_server, git_token, path) -> None:
    assert _get(git_server.base_url + path, password=git_token)[0] == 404


def test_missing_repository_is_404(git_server, git_token) -> None:
    status, _, _ = _get(_refs_url(git_server.base_url + "/nobody/nothing"), password=git_token)
    assert status == 404


def test_fail_rate_answers_503(tmp_path: Path) -> None:
    with GitHttpServer(tmp_path / "root", "tok", fail_rate=1.0) as server:
        url = server.create_repo("o/r", {"a": "a\n"})
        assert _get(_refs_url(url), password="tok")[0] == 503
        server.fail_rate = 0.0
        assert _get(_refs_url(url), password="tok")[0] == 200


def test_fail_rate_is_seeded_and_partial(tmp_path: Path) -> None:
    def statuses(seed: int, run: int) -> list[int]:
        with GitHttpServer(tmp_path / f"root-{run}", "tok", fail_rate=0.5, seed=seed) as server:
            url = server.create_repo("o/r", {"a": "a\n"})
            return [_get(_refs_url(url), password="tok")[0] for _ in range(20)]

    first = statuses(7, 1)
    assert set(first) == {200, 503}
    assert statuses(7, 2) == first


def test_create_repo_layout_and_config(git_server) -> None:
    url = git_server.create_repo("layout/repo", {"dir/a.txt": "A\n", "b.txt": "B\n"}, branch="trunk")
    assert url == f"{git_server.base_url}/layout/repo"
    bare = git_server.bare_path("layout/repo")
    assert bare == git_server.root / "layout" / "repo.git"
    assert git_server.git("layout/repo", "symbolic-ref", "HEAD").strip() == "refs/heads/trunk"
    assert git_server.git("layout/repo", "config", "uploadpack.allowFilter").strip() == "true"
    assert git_server.git("layout/repo", "show", "trunk:dir/a.txt") == "A\n"
    with pytest.raises(FileExistsError):
        git_server.create_repo("layout/repo", {})


@pytest.mark.parametrize("name", ["noslash", "a/b/c", "../x", "a/..", ""])
def test_bad_repository_names(git_server, name) -> None:
    with pytest.raises(ValueError, match="OWNER/NAME"):
        git_server.create_repo(name, {})


def test_commit_files_adds_changes_and_deletes(git_server) -> None:
    git_server.create_repo("commits/repo", {"a.txt": "1\n", "b.txt": "b\n"})
    first = git_server.git("commits/repo", "rev-parse", "main").strip()
    sha = git_server.commit_files("commits/repo", {"a.txt": "2\n", "b.txt": None, "c/d.txt": "d\n"}, "second")
    assert git_server.git("commits/repo", "rev-parse", "main^").strip() == first
    assert git_server.git("commits/repo", "rev-parse", "main").strip() == sha
    assert git_server.git("commits/repo", "ls-tree", "-r", "--name-only", "main").split() == [
        "a.txt",
        "c/d.txt",
    ]
    assert git_server.git("commits/repo", "log", "--format=%s", "main").splitlines() == [
        "second",
        "initial commit",
    ]


def test_repr_hides_token(tmp_path: Path) -> None:
    with GitHttpServer(tmp_path, "super-secret-token") as server:
        assert "super-secret-token" not in repr(server)
        assert server.base_url in repr(server)


def test_plain_git_client_round_trip(git_server, git_token, tmp_path: Path) -> None:
    """A stock git client (extraHeader auth) clones partially and pushes a >1 MiB (chunked) body."""
    url = git_server.create_repo("plain/repo", {"a.txt": "a\n"})
    header = "Authorization: Basic " + base64.b64encode(f"x:{git_token}".encode()).decode()
    env = {
        "PATH": "/usr/bin:/bin",
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "HOME": str(tmp_path),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": header,
    }

    def git(*args: str, cwd: Path = tmp_path) -> None:
        subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)

    git("clone", "--filter=blob:none", url, "work")
    work = tmp_path / "work"
    # incompressible content so the pack exceeds http.postBuffer and git sends it chunked
    (work / "big.bin").write_bytes(__import__("os").urandom(2 * 1024 * 1024))
    git("add", "big.bin", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "big", cwd=work)
    git("push", "origin", "HEAD:main", cwd=work)
    assert git_server.git("plain/repo", "log", "--format=%s", "main").splitlines() == [
        "big",
        "initial commit",
    ]


@pytest.mark.parametrize(
    ("anonymous_read", "anonymous_status", "service", "status"),
    [
        pytest.param(True, 401, "git-upload-pack", 200, id="public-read"),
        pytest.param(True, 401, "git-receive-pack", 401, id="public-push-needs-token"),
        pytest.param(False, 403, "git-upload-pack", 403, id="private-403"),
        pytest.param(False, 404, "git-upload-pack", 404, id="private-404"),
    ],
)
def test_anonymous_reads_and_refusals(
    tmp_path: Path, git_token, anonymous_read, anonymous_status, service, status
) -> None:
    """A public repository serves reads without credentials; pushes and wrong tokens still get 401."""
    with GitHttpServer(
        tmp_path / "remotes", git_token, anonymous_read=anonymous_read, anonymous_status=anonymous_status
    ) as server:
        url = server.create_repo("pub/repo", {"a.txt": "a\n"})
        got, _, body = _get(f"{url}/info/refs?service={service}")
        assert got == status
        if status == 200:
            assert b"refs/heads/main" in body
        assert _get(f"{url}/info/refs?service={service}", "x", "wrong")[0] == 401

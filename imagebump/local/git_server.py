"""A real Git remote on 127.0.0.1: ``git http-backend`` behind a tiny threaded HTTP server.

Used by the test suite (``tests/fixtures/git.py``), the local demo and benchmarks. It serves the
bare repositories under ``root`` (``root/OWNER/NAME.git``) over smart HTTP, exactly as a Git
host does, with one rule on top: every request must carry HTTP Basic credentials whose password
is the server's token (any user name). Without credentials the answer is ``401`` with
``WWW-Authenticate: Basic realm="imagebump"``; with a wrong token it is ``401`` as well (what
GitHub answers), so clients see "authentication failed".

``fail_rate`` makes that fraction of requests answer ``503`` (seeded, so runs are repeatable) —
for chaos tests of the retry paths.

``anonymous_read=True`` serves reads (clone, fetch) without credentials, as a public repository
on a Git host does; pushes still need the token. ``anonymous_status`` is what a request without
credentials gets otherwise: ``401`` (default, with ``WWW-Authenticate``), or ``403`` / ``404`` as
some hosts answer for private repositories.

This module owns the lifecycle (start, stop, the base URL) and the repositories (create, commit,
hooks); the HTTP side — auth, injected failures, the CGI call — is
:mod:`imagebump.local.git_http_backend`. It reads and writes only under ``root``; it logs nothing
(requests carry tokens). No pytest here: the demo imports it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from imagebump.local.git_http_backend import OWNER_REPO, REALM, BackendServer, git_env

__all__ = ["REALM", "GitHttpServer"]

_REPO_CONFIG = {
    # Partial clone (--filter=blob:none) and lazy fetches of single blobs.
    "uploadpack.allowFilter": "true",
    "uploadpack.allowAnySHA1InWant": "true",
    "uploadpack.allowReachableSHA1InWant": "true",
    # Pushes are authenticated by the server itself (REMOTE_USER is set).
    "http.receivepack": "true",
    # No background gc while concurrent pushes land.
    "receive.autogc": "false",
    "gc.auto": "0",
}


class GitHttpServer:
    """Bare repositories under ``root`` served by ``git http-backend`` on 127.0.0.1:0.

    Args:
        root: directory holding the bare repositories (``OWNER/NAME.git``); created if missing.
        token: the password every request must send with HTTP Basic auth (any user name).
        fail_rate: fraction of requests answered with ``503`` (0 disables).
        seed: seed of the random source behind ``fail_rate``.
        anonymous_read: serve clones and fetches without credentials (a public repository).
        anonymous_status: the answer to a request without credentials that is not served
            anonymously: 401 (default), 403 or 404.

    Use as a context manager, or call :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        root: Path | str,
        token: str,
        fail_rate: float = 0.0,
        seed: int = 0,
        *,
        anonymous_read: bool = False,
        anonymous_status: int = 401,
    ) -> None:
        if not token:
            raise ValueError("GitHttpServer needs a non-empty token")
        if anonymous_status not in (401, 403, 404):
            raise ValueError("anonymous_status must be 401, 403 or 404")
        self.anonymous_read = anonymous_read
        self.anonymous_status = anonymous_status
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.token = token
        self._fail_rate = fail_rate
        self._seed = seed
        self._server: BackendServer | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:  # never show the token
        return f"GitHttpServer(root={str(self.root)!r}, base_url={self._base_url_or_none()!r})"

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> GitHttpServer:
        if self._server is None:
            self._server = BackendServer(
                self.root, self.token, self._fail_rate, self._seed, self.anonymous_read, self.anonymous_status
            )
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="git-http-server", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._server = None
            self._thread = None

    def __enter__(self) -> GitHttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def fail_rate(self) -> float:
        return self._server.fail_rate if self._server else self._fail_rate

    @fail_rate.setter
    def fail_rate(self, value: float) -> None:
        """Change the injected failure rate while running (chaos tests)."""
        self._fail_rate = value
        if self._server is not None:
            self._server.fail_rate = value

    def _base_url_or_none(self) -> str | None:
        if self._server is None:
            return None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the server must be started)."""
        url = self._base_url_or_none()
        if url is None:
            raise RuntimeError("GitHttpServer is not started")
        return url

    # --- repositories ------------------------------------------------------------------------

    def read_sessions(self, owner_repo: str) -> int:
        """How many read sessions (clone, fetch, ls-remote; each one ``info/refs`` request for
        ``git-upload-pack``) clients have opened on ``owner_repo`` so far — what a test counts to
        prove work is done once per repository, not once per file."""
        if self._server is None:
            return 0
        with self._server._lock:
            return self._server.sessions.get(owner_repo, 0)

    def url(self, owner_repo: str) -> str:
        """Clone URL of ``OWNER/NAME`` (no credentials in it)."""
        return f"{self.base_url}/{_check_name(owner_repo)}"

    def bare_path(self, owner_repo: str) -> Path:
        """Path of the bare repository of ``OWNER/NAME``."""
        return self.root / f"{_check_name(owner_repo)}.git"

    def git(
        self, owner_repo: str, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None
    ) -> str:
        """Run a local git command in the bare repository; return stdout (raises on failure)."""
        full_env = git_env(self.root)
        full_env.update(env or {})
        proc = subprocess.run(
            ["git", "--git-dir", str(self.bare_path(owner_repo)), *args],
            input=input,
            env=full_env,
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"git {' '.join(args)} failed in {owner_repo}: {proc.stderr.decode(errors='replace')}"
            )
        return proc.stdout.decode()

    def create_repo(
        self,
        owner_repo: str,
        files: Mapping[str, str] | None = None,
        branch: str = "main",
        message: str = "initial commit",
    ) -> str:
        """Create a bare repository with one commit of ``files`` on ``branch`` (HEAD → it).

        Returns:
            The clone URL (``http://127.0.0.1:PORT/OWNER/NAME``); the bare repository's path while
            the server is not started yet (the port is not known before).
        """
        bare = self.bare_path(owner_repo)
        if bare.exists():
            raise FileExistsError(f"repository {owner_repo} already exists at {bare}")
        bare.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["git", "init", "--quiet", "--bare", f"--initial-branch={branch}", str(bare)],
            env=git_env(self.root),
            check=True,
            capture_output=True,
        )
        for key, value in _REPO_CONFIG.items():
            self.git(owner_repo, "config", key, value)
        self.commit_files(owner_repo, dict(files or {}), message, branch=branch)
        return self.url(owner_repo) if self._server else str(bare)

    def commit_files(
        self,
        owner_repo: str,
        files: Mapping[str, str | bytes | None],
        message: str,
        branch: str = "main",
        author: str = "Someone Else <someone@example.com>",
        symlinks: Mapping[str, str] | None = None,
        merged: Sequence[str] = (),
    ) -> str:
        """Commit ``files`` (path → text or bytes; None deletes) on top of ``branch`` inside the bare repo.

        This is "someone else pushed meanwhile": no clone, plumbing on a temporary index, and an
        atomic compare-and-swap of the branch. ``symlinks`` maps paths to symbolic-link targets.
        ``merged``: commits the new commit merges (its further parents; the tree is still the
        branch's with ``files`` applied). Returns the new commit's sha.
        """
        name, _, email = author.partition(" <")
        email = email.rstrip(">")
        ref = f"refs/heads/{branch}"
        try:
            parent = self.git(owner_repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
        except RuntimeError:
            parent = ""
        with tempfile.TemporaryDirectory(prefix="git-index-") as tmp:
            index_env = {
                "GIT_INDEX_FILE": str(Path(tmp) / "index"),
                "GIT_AUTHOR_NAME": name,
                "GIT_AUTHOR_EMAIL": email,
                "GIT_COMMITTER_NAME": name,
                "GIT_COMMITTER_EMAIL": email,
            }
            if parent:
                self.git(owner_repo, "read-tree", parent, env=index_env)
            # --index-info needs no work tree; mode 0 removes the entry.
            lines = []
            for path, text in files.items():
                path = path.strip("/")
                if text is None:
                    lines.append(f"0 {'0' * 40}\t{path}\n")
                    continue
                data = text if isinstance(text, bytes) else text.encode()
                blob = self.git(owner_repo, "hash-object", "-w", "--stdin", input=data).strip()
                lines.append(f"100644 {blob}\t{path}\n")
            for path, link in (symlinks or {}).items():
                blob = self.git(owner_repo, "hash-object", "-w", "--stdin", input=link.encode()).strip()
                lines.append(f"120000 {blob}\t{path.strip('/')}\n")
            if lines:
                self.git(
                    owner_repo, "update-index", "--index-info", input="".join(lines).encode(), env=index_env
                )
            tree = self.git(owner_repo, "write-tree", env=index_env).strip()
            parents = [arg for p in ([parent] if parent else []) + list(merged) for arg in ("-p", p)]
            sha = self.git(
                owner_repo, "commit-tree", tree, *parents, "-F", "-", input=message.encode(), env=index_env
            ).strip()
        self.git(owner_repo, "update-ref", ref, sha, parent or "0" * 40)
        return sha

    def install_hook(self, owner_repo: str, name: str, script: str) -> Path:
        """Install an executable hook (e.g. ``pre-receive``) into the bare repository."""
        hooks = self.bare_path(owner_repo) / "hooks"
        hooks.mkdir(exist_ok=True)
        path = hooks / name
        path.write_text(script)
        path.chmod(0o755)
        return path

    def remove_hook(self, owner_repo: str, name: str) -> None:
        (self.bare_path(owner_repo) / "hooks" / name).unlink(missing_ok=True)

    def delete_repo(self, owner_repo: str) -> None:
        shutil.rmtree(self.bare_path(owner_repo), ignore_errors=True)


def _check_name(owner_repo: str) -> str:
    owner_repo = owner_repo.strip("/")
    owner_repo = owner_repo.removesuffix(".git")
    if not OWNER_REPO.match(owner_repo) or ".." in owner_repo.split("/"):
        raise ValueError(f"repository name must be OWNER/NAME, got {owner_repo!r}")
    return owner_repo

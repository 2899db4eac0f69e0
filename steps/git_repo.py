"""A clone on disk: :class:`ClonedRepo` reads, writes, commits, pushes and fetches in it.

Every git command runs through :func:`steps.git_process.run_git` with the clone's
:class:`~steps.git_auth.GitAuth` (the token only in an ``http.extraHeader``); failures are
classified by :mod:`steps.git_failures`. :func:`steps.git.clone` makes one; callers import both
from :mod:`steps.git`.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from steps.errors import ConfigError, PermissionDeniedError
from steps.git_auth import GitAuth, origin
from steps.git_failures import NO_BRANCH, classify
from steps.git_process import ls_remote, run_git
from steps.settings import DEFAULT_AUTHOR_EMAIL, DEFAULT_AUTHOR_NAME

_COMMIT_SUMMARY = re.compile(r"^\[[^\n]*? ([0-9a-f]{40}|[0-9a-f]{64})\]", re.MULTILINE)
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class ClonedRepo:
    """A work tree made by :func:`clone`. All network operations reuse the clone's auth.

    Attributes:
        path: the work tree.
        branch: the branch that was cloned (the base).
        auth: the token used for fetches and pushes (None: anonymous).
        url: the remote's URL.
    """

    def __init__(
        self, path: Path | str, branch: str, auth: GitAuth | None = None, url: str | None = None
    ) -> None:
        self.path = Path(path)
        self.branch = branch
        self.auth = auth
        self.url = url
        self._written: set[str] = set()
        self._new: set[str] = set()

    def __repr__(self) -> str:
        return f"ClonedRepo(path={str(self.path)!r}, branch={self.branch!r}, url={self.url!r})"

    def git(
        self,
        *args: str,
        check: bool = True,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        what: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a git command in this work tree, with this clone's auth."""
        return run_git(list(args), self.path, self.auth, check, url=self.url, input=input, env=env, what=what)

    def _checkout(self) -> None:
        self.git("checkout", "--quiet", what=f"checkout of {self.url} branch '{self.branch}'")

    # --- files ----------------------------------------------------------------------------------

    def resolve(self, relpath: str) -> Path:
        """``relpath`` inside the work tree; ConfigError for absolute paths, ``..`` or symlink escapes."""
        p = PurePosixPath(relpath)
        if not relpath or p.is_absolute() or ".." in p.parts:
            raise ConfigError(
                f"path {relpath!r} must be relative to the repository root and must not contain '..'"
            )
        root = self.path.resolve()
        full = (root / p).resolve()
        if full != root and not full.is_relative_to(root):
            raise ConfigError(
                f"path {relpath!r} leaves the repository through a symbolic link; refusing to follow it"
            )
        if full.is_relative_to(root / ".git"):
            raise ConfigError(f"path {relpath!r} points into .git; refusing")
        return full

    def read(self, relpath: str) -> str | None:
        """The text of a file (bytes kept: CRLF survives), or None if it does not exist."""
        full = self.resolve(relpath)
        if not full.is_file():
            return None
        return full.read_bytes().decode("utf-8")

    def show(self, rev: str, relpath: str) -> str | None:
        """The text of ``relpath`` at ``rev`` from the object store (nothing is checked out).

        A partial clone downloads just this one blob. None when the path is absent at ``rev`` or
        is not a regular file (a directory, a symbolic link, a submodule).
        """
        listing = self.git("ls-tree", rev, "--", relpath).stdout.strip()
        if not listing:
            return None
        mode, kind, _rest = listing.split(None, 2)
        if kind != "blob" or mode not in ("100644", "100755"):
            return None
        return self.git(
            "cat-file", "blob", f"{rev}:{relpath}", what=f"reading {relpath} at {rev[:12]} of {self.url}"
        ).stdout

    def write(self, relpath: str, text: str) -> None:
        """Write a file inside the work tree (bytes as given) and remember it for :meth:`commit`."""
        full = self.resolve(relpath)
        rel = full.relative_to(self.path.resolve()).as_posix()
        if not full.exists() and rel not in self._written:
            self._new.add(rel)  # not tracked yet: commit must ``git add`` it first
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(text.encode("utf-8"))
        self._written.add(rel)

    # --- history --------------------------------------------------------------------------------

    def head(self) -> str:
        """The sha of ``HEAD``."""
        return self.git("rev-parse", "HEAD").stdout.strip()

    def cloned_head(self) -> str:
        """The sha of ``HEAD`` right after :func:`clone`, read from the files git wrote.

        ``.git/HEAD`` names the branch, whose sha is a loose ref or a ``packed-refs`` line
        (gitrepository-layout(5)); anything else (a detached or reftable repository, a ref that is
        not there) asks ``git rev-parse HEAD``: the same answer, one process more (tests compare).
        """
        gitdir = self.path / ".git"
        try:
            head = (gitdir / "HEAD").read_text().strip()
            if head.startswith("ref: refs/heads/"):
                ref = head[len("ref: ") :]
                loose = gitdir / ref
                if loose.is_file():
                    sha = loose.read_text().strip()
                    if _SHA.fullmatch(sha):
                        return sha
                elif (gitdir / "packed-refs").is_file():
                    for line in (gitdir / "packed-refs").read_text().splitlines():
                        sha, _, name = line.partition(" ")
                        if name == ref and _SHA.fullmatch(sha):
                            return sha
        except (OSError, UnicodeDecodeError):
            pass
        return self.head()

    def commit(
        self, message: str, author_name: str | None = None, author_email: str | None = None
    ) -> str | None:
        """Commit the files written through :meth:`write`; None when nothing changed.

        Identity: ``author_name`` / ``author_email``, else ``IMAGEBUMP_GIT_AUTHOR_NAME`` /
        ``IMAGEBUMP_GIT_AUTHOR_EMAIL``, else ``imagebump``. ``author_name`` may also be
        ``"Name <email>"``.
        """
        if author_name and author_email is None:
            if m := re.fullmatch(r"\s*(.*?)\s*<([^>]*)>\s*", author_name):
                author_name, author_email = m.group(1), m.group(2)
        name = author_name or os.environ.get("IMAGEBUMP_GIT_AUTHOR_NAME") or DEFAULT_AUTHOR_NAME
        email = author_email or os.environ.get("IMAGEBUMP_GIT_AUTHOR_EMAIL") or DEFAULT_AUTHOR_EMAIL
        written = sorted(self._written)
        if self._new:  # untracked files: stage them, then commit the index
            self.git("add", "--sparse", "--", *written)
            only: list[str] = []
        else:  # tracked files only: ``commit -- PATHS`` stages and commits them in one process
            only = ["--", *written] if written else []
        proc = self.git(
            "-c",
            f"user.name={name}",
            "-c",
            f"user.email={email}",
            "-c",
            "core.abbrev=no",  # the summary line names the full sha: no rev-parse afterwards
            "commit",
            "--no-verify",
            "-F",
            "-",
            *only,
            input=message,
            check=False,
            what=f"commit in {self.url or self.path}",
        )
        if proc.returncode != 0:
            if proc.returncode == 1 and not proc.stderr.strip():
                return None  # "nothing to commit": git's status on stdout, exit 1, nothing on stderr
            raise classify(
                proc.stderr, args=["commit"], what="commit", url=self.url, returncode=proc.returncode
            )
        self._written.clear()
        self._new.clear()
        found = _COMMIT_SUMMARY.search(proc.stdout)
        return found.group(1) if found else self.head()

    def push(self, refspec: str, force_with_lease: tuple[str, str] | None = None) -> None:
        """``git push origin REFSPEC``, optionally ``--force-with-lease=REF:EXPECTED``.

        ``EXPECTED`` is the sha the remote ref must still have ("" = must not exist yet); ``REF``
        may be a full ref or a branch name (``imagebump/prod/api`` → ``refs/heads/imagebump/prod/api``).

        Raises:
            PushRejected: the remote moved on (non-fast-forward, fetch first, stale lease).
            PermissionDeniedError: protected branch, declining hook, 403 or bad token.
        """
        args = ["push", "--quiet", "--no-verify", "--porcelain"]
        if force_with_lease is not None:
            ref, expected = force_with_lease
            if not ref.startswith("refs/"):
                ref = f"refs/heads/{ref}"
            args.append(f"--force-with-lease={ref}:{expected}")
        args += ["origin", refspec]
        proc = self.git(*args, check=False, what=f"push of {refspec} to {self.url}")
        if proc.returncode != 0:
            # --porcelain puts the per-ref status on stdout; classify on both streams.
            raise classify(
                proc.stderr + "\n" + proc.stdout,
                args=args,
                what=f"push of {refspec}",
                url=self.url,
                returncode=proc.returncode,
            )

    def fetch(self, branch: str | None = None) -> str | None:
        """Fetch the newest ``branch`` (default: the base) shallowly; its sha, or None if absent."""
        branch = branch or self.branch
        proc = self.git(
            "fetch",
            "--quiet",
            "--filter=blob:none",
            "--depth",
            "1",
            "--no-tags",
            "origin",
            f"+refs/heads/{branch}:refs/remotes/origin/{branch}",
            check=False,
            what=f"fetch of branch '{branch}' from {self.url}",
        )
        if proc.returncode != 0:
            err = classify(
                proc.stderr,
                args=["fetch"],
                what=f"fetch of branch '{branch}'",
                url=self.url,
                anonymous=self.auth is None and origin(self.url or "") is not None,
            )
            if (
                isinstance(err, ConfigError)
                and not isinstance(err, PermissionDeniedError)
                and NO_BRANCH.search(proc.stderr)
            ):
                return None
            raise err
        return self.git("rev-parse", f"refs/remotes/origin/{branch}").stdout.strip()

    def fetch_and_reset(self, branch: str | None = None) -> str:
        """Move the work tree to the newest remote ``branch`` (sparse cone kept); return its sha.

        For rebase-and-retry: discards local commits and edits, then the caller re-applies its
        pure edit on the new base.
        """
        branch = branch or self.branch
        sha = self.fetch(branch)
        if sha is None:
            raise ConfigError(f"branch '{branch}' no longer exists in {self.url}")
        self.git("reset", "--quiet", "--hard", sha, what=f"reset to the newest '{branch}'")
        self._written.clear()  # (a new file stays untracked after the reset: _new keeps it)
        return sha

    def remote_head(self, branch: str) -> str | None:
        """The sha of ``branch`` on the remote right now (ls-remote), or None if absent."""
        return ls_remote(self.url or "origin", branch, self.auth) if self.url else None

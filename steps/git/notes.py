"""A git notes ref on a remote, read and written from a scratch bare repository (no clone).

:class:`NotesRef` fetches only the notes ref's objects, reads the note on a commit (one
``cat-file``) and writes one on top of the ref's commit, pushed with a lease (``False`` when another
writer moved the ref meanwhile: read again and retry). What a note says is the caller's business
(:mod:`steps.forge.local_status` keeps commit statuses as JSON there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from steps.domain.errors import ImagebumpError
from steps.git.auth import GitAuth
from steps.git.process import run_git

#: The notes commits' author and committer (a note is imagebump's record, not a person's).
IDENTITY = {
    "GIT_AUTHOR_NAME": "imagebump",
    "GIT_AUTHOR_EMAIL": "imagebump@localhost",
    "GIT_COMMITTER_NAME": "imagebump",
    "GIT_COMMITTER_EMAIL": "imagebump@localhost",
}


class NotesRef:
    """The notes ref ``ref`` of the remote ``url``, through the scratch bare repository ``path``.

    ``what`` names the notes in errors (``"commit statuses of URL"``).
    """

    def __init__(self, path: Path, url: str, auth: GitAuth | None, ref: str, what: str = "") -> None:
        self.path, self.url, self.auth, self.ref = path, url, auth, ref
        self.what = what or f"{ref} of {url}"
        run_git(["init", "--bare", "--quiet", str(path)])

    def _git(self, args: list[str], **kwargs: Any) -> str:
        return run_git(args, self.path, self.auth, url=self.url, what=self.what, **kwargs).stdout

    def fetch(self) -> str:
        """The notes commit on the remote, fetched ("" when the remote has no such ref yet)."""
        listed = self._git(["ls-remote", self.url, self.ref]).split()
        if not listed:
            return ""
        self._git(["fetch", "--quiet", "--no-tags", self.url, f"+{self.ref}:{self.ref}"])
        return listed[0]

    def _entries(self, notes: str) -> dict[str, str]:
        """commit id → note blob id (git notes may fan paths out as ``ab/cdef…``)."""
        listing = self._git(["ls-tree", "-r", "--full-tree", notes])
        found = {}
        for line in listing.splitlines():
            meta, _, path = line.partition("\t")
            found[path.replace("/", "")] = meta.split()[2]
        return found

    def read(self, notes: str, sha: str) -> str | None:
        """The note on commit ``sha`` in the notes commit ``notes`` (None: there is none)."""
        blob = self._entries(notes).get(sha)
        return None if blob is None else self._git(["cat-file", "blob", blob])

    def write(self, old: str, sha: str, text: str, message: str) -> bool:
        """Write ``text`` as the note on ``sha`` on top of the notes commit ``old`` ("" for none) and
        push it with a lease; False when the ref moved meanwhile.

        Raises:
            ImagebumpError: the remote refused the push for another reason.
        """
        entries = self._entries(old) if old else {}
        entries[sha] = self._git(["hash-object", "-w", "--stdin"], input=text).strip()
        tree = self._git(
            ["mktree"],
            input="".join(f"100644 blob {blob}\t{path}\n" for path, blob in sorted(entries.items())),
        ).strip()
        parents = ["-p", old] if old else []
        commit = self._git(["commit-tree", tree, *parents, "-m", message], env=IDENTITY).strip()
        lease = f"--force-with-lease={self.ref}:{old}"
        proc = run_git(
            ["push", "--quiet", lease, self.url, f"{commit}:{self.ref}"],
            self.path,
            self.auth,
            check=False,
            url=self.url,
            what=f"push of the {self.what}",
        )
        if proc.returncode == 0:
            return True
        if "stale info" in proc.stderr or "rejected" in proc.stderr or "fetch first" in proc.stderr:
            return False
        raise ImagebumpError(f"the remote refused the {self.what} ({proc.stderr.strip()[:200]})")

"""Commit statuses for a git host without an API (``provider: local``): git notes in the repository.

GitHub keeps a commit's statuses beside the commit; a host without an API has nowhere to put them
but the repository itself. :class:`GitNoteStatuses` keeps them as a git note on the commit, under
``refs/notes/imagebump-status``: one JSON object per commit, the latest status per context (the
shape of :meth:`steps.forge.pull_requests.Forge.statuses`). Anyone with a clone reads them:
``git fetch origin refs/notes/imagebump-status:refs/notes/imagebump-status`` then
``git log --notes=imagebump-status``.

Reads need the read token (or none); setting one pushes the notes ref, so it needs the write token
(``IMAGEBUMP_GIT_TOKEN``): on one machine (``imagebump run --local``, the demo) every step has it. A
status the remote refuses is a warning and ``False``, never a failed step (as on GitHub). The notes
ref moves with a lease and one retry: two writers never lose each other's status.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from steps.domain.errors import ImagebumpError
from steps.forge.pull_requests import MAX_STATUS_DESCRIPTION, STATUS_STATES, CommitStatus
from steps.git import GitAuth, run_git

log = logging.getLogger(__name__)

#: The notes ref the statuses live under (``git log --notes=imagebump-status``).
NOTES_REF = "refs/notes/imagebump-status"
_IDENTITY = {
    "GIT_AUTHOR_NAME": "imagebump",
    "GIT_AUTHOR_EMAIL": "imagebump@localhost",
    "GIT_COMMITTER_NAME": "imagebump",
    "GIT_COMMITTER_EMAIL": "imagebump@localhost",
}


class GitNoteStatuses:
    """``set_status`` / ``statuses`` of :class:`steps.forge.pull_requests.Forge`, kept as git notes.

    Args:
        repo_url: the repository's clone URL.
        auth: the token to read and push with (None: :meth:`GitAuth.from_env`, the write token when
            one is set, else the read token).
    """

    def __init__(self, repo_url: str, auth: GitAuth | None = None) -> None:
        self.repo_url = repo_url
        self.auth = auth if auth is not None else _token()

    def statuses(self, sha: str) -> dict[str, CommitStatus]:
        """The latest status of each context on commit ``sha`` (empty when it has none)."""
        with tempfile.TemporaryDirectory(prefix="statuses-") as scratch:
            git = _Repo(Path(scratch), self.repo_url, self.auth)
            notes = git.fetch_notes()
            found = git.note(notes, sha) if notes else {}
        return {c: CommitStatus(c, v["state"], v.get("description", "")) for c, v in found.items()}

    def set_status(
        self, sha: str, *, state: str, context: str, description: str = "", target_url: str | None = None
    ) -> bool:
        """Set ``context`` to ``state`` on commit ``sha``; True when the remote took it."""
        if state not in STATUS_STATES:
            raise ValueError(f"commit status state {state!r} is not one of {', '.join(STATUS_STATES)}")
        entry = {"state": state, "description": description[:MAX_STATUS_DESCRIPTION]}
        try:
            with tempfile.TemporaryDirectory(prefix="statuses-") as scratch:
                git = _Repo(Path(scratch), self.repo_url, self.auth)
                for attempt in range(2):  # a writer in between: read again, once
                    old = git.fetch_notes()
                    note = git.note(old, sha) if old else {}
                    if note.get(context) == entry:
                        return True
                    if git.push_note(old, sha, {**note, context: entry}):
                        return True
                    log.info("local statuses: %s moved meanwhile (attempt %d)", NOTES_REF, attempt + 1)
        except ImagebumpError as exc:
            log.warning("local statuses: %s=%s on %s not set: %s", context, state, sha[:12], exc)
            return False
        log.warning(
            "local statuses: %s=%s on %s not set: %s kept moving", context, state, sha[:12], NOTES_REF
        )
        return False


def _token() -> GitAuth | None:
    return GitAuth.from_env(write=True, required=False) or GitAuth.from_env(write=False)


class _Repo:
    """A scratch bare repository holding only the notes ref's objects."""

    def __init__(self, path: Path, url: str, auth: GitAuth | None) -> None:
        self.path, self.url, self.auth = path, url, auth
        run_git(["init", "--bare", "--quiet", str(path)])

    def git(self, args: list[str], **kwargs: Any) -> str:
        what = f"commit statuses of {self.url}"
        return run_git(args, self.path, self.auth, url=self.url, what=what, **kwargs).stdout

    def fetch_notes(self) -> str:
        """The notes commit on the remote, fetched ("" when the remote has no statuses yet)."""
        listed = self.git(["ls-remote", self.url, NOTES_REF]).split()
        if not listed:
            return ""
        self.git(["fetch", "--quiet", "--no-tags", self.url, f"+{NOTES_REF}:{NOTES_REF}"])
        return listed[0]

    def _entries(self, notes: str) -> dict[str, str]:
        """commit id → note blob id (git notes may fan paths out as ``ab/cdef…``)."""
        listing = self.git(["ls-tree", "-r", "--full-tree", notes])
        found = {}
        for line in listing.splitlines():
            meta, _, path = line.partition("\t")
            found[path.replace("/", "")] = meta.split()[2]
        return found

    def note(self, notes: str, sha: str) -> dict[str, dict[str, str]]:
        blob = self._entries(notes).get(sha)
        if blob is None:
            return {}
        try:
            value = json.loads(self.git(["cat-file", "blob", blob]))
        except ValueError:
            return {}  # someone else's note on this commit: not ours to read
        return {k: v for k, v in value.items() if isinstance(v, dict) and v.get("state") in STATUS_STATES}

    def push_note(self, old: str, sha: str, note: dict[str, dict[str, str]]) -> bool:
        """Write ``note`` on ``sha`` on top of ``old`` and push with a lease; False when it moved."""
        entries = self._entries(old) if old else {}
        text = json.dumps(note, sort_keys=True, indent=1) + "\n"
        entries[sha] = self.git(["hash-object", "-w", "--stdin"], input=text).strip()
        tree = self.git(
            ["mktree"],
            input="".join(f"100644 blob {blob}\t{path}\n" for path, blob in sorted(entries.items())),
        ).strip()
        parents = ["-p", old] if old else []
        commit = self.git(
            ["commit-tree", tree, *parents, "-m", "imagebump: commit status"], env=_IDENTITY
        ).strip()
        lease = f"--force-with-lease={NOTES_REF}:{old}"
        proc = run_git(
            ["push", "--quiet", lease, self.url, f"{commit}:{NOTES_REF}"],
            self.path,
            self.auth,
            check=False,
            url=self.url,
            what=f"push of the commit statuses of {self.url}",
        )
        if proc.returncode == 0:
            return True
        if "stale info" in proc.stderr or "rejected" in proc.stderr or "fetch first" in proc.stderr:
            return False
        raise _refused(proc.stderr)


def _refused(stderr: str) -> ImagebumpError:
    return ImagebumpError(f"the remote refused the commit statuses ({stderr.strip()[:200]})")

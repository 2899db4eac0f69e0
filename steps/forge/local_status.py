"""Commit statuses for a git host without an API (``provider: local``): git notes in the repository.

GitHub keeps a commit's statuses beside the commit; a host without an API has nowhere to put them
but the repository itself. :class:`GitNoteStatuses` keeps them as a git note on the commit, under
``refs/notes/imagebump-status``: one JSON object per commit, the latest status per context (the
shape of :meth:`steps.forge.forges.Forge.statuses`). Anyone with a clone reads them:
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

from steps.domain.errors import ImagebumpError
from steps.forge.forges import MAX_STATUS_DESCRIPTION, STATUS_STATES, CommitStatus
from steps.git import GitAuth, NotesRef

log = logging.getLogger(__name__)

#: The notes ref the statuses live under (``git log --notes=imagebump-status``).
NOTES_REF = "refs/notes/imagebump-status"


class GitNoteStatuses:
    """``set_status`` / ``statuses`` of :class:`steps.forge.forges.Forge`, kept as git notes.

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
            git = self._notes(Path(scratch))
            notes = git.fetch()
            found = _note(git, notes, sha) if notes else {}
        return {c: CommitStatus(c, v["state"], v.get("description", "")) for c, v in found.items()}

    def _notes(self, scratch: Path) -> NotesRef:
        return NotesRef(scratch, self.repo_url, self.auth, NOTES_REF, f"commit statuses of {self.repo_url}")

    def set_status(
        self, sha: str, *, state: str, context: str, description: str = "", target_url: str | None = None
    ) -> bool:
        """Set ``context`` to ``state`` on commit ``sha``; True when the remote took it."""
        if state not in STATUS_STATES:
            raise ValueError(f"commit status state {state!r} is not one of {', '.join(STATUS_STATES)}")
        entry = {"state": state, "description": description[:MAX_STATUS_DESCRIPTION]}
        try:
            with tempfile.TemporaryDirectory(prefix="statuses-") as scratch:
                git = self._notes(Path(scratch))
                for attempt in range(2):  # a writer in between: read again, once
                    old = git.fetch()
                    note = _note(git, old, sha) if old else {}
                    if note.get(context) == entry:
                        return True
                    text = json.dumps({**note, context: entry}, sort_keys=True, indent=1) + "\n"
                    if git.write(old, sha, text, "imagebump: commit status"):
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


def _note(git: NotesRef, notes: str, sha: str) -> dict[str, dict[str, str]]:
    """The statuses noted on ``sha`` (empty when none, or the note is someone else's)."""
    text = git.read(notes, sha)
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}  # someone else's note on this commit: not ours to read
    return {k: v for k, v in value.items() if isinstance(v, dict) and v.get("state") in STATUS_STATES}

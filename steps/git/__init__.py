"""Git for the steps: the public face of the git layer; it only re-exports.

Modules, bottom up: ``auth`` (tokens, header-only auth), ``failures`` (stderr → errors),
``process`` (:func:`run_git`, the one place git runs), ``objects`` (object ids, trees),
``commit`` (identity, ``git fast-import`` streams), ``repo`` (:class:`ClonedRepo`), ``history``
(a file's bounded history; blob ids, tree listings and the one blob fetch + ``cat-file`` read),
``workdir`` (:func:`clone`, :func:`seed`), ``notes`` (:class:`NotesRef`: a notes ref on a remote,
read and written without a clone), ``partial`` (:class:`PartialClone`: a bare partial clone for
reading revisions). Callers import ``steps.git``.
"""

from __future__ import annotations

from steps.domain.errors import GitCommandError, PushRejected
from steps.git.auth import READ_SECRET, GitAuth, anonymous_read_fix
from steps.git.failures import classify
from steps.git.notes import NotesRef
from steps.git.partial import PartialClone
from steps.git.process import default_branch, ls_remote, redact, run_git
from steps.git.repo import ClonedRepo
from steps.git.workdir import clone, cone_patterns, seed

__all__ = [
    "READ_SECRET",
    "ClonedRepo",
    "GitAuth",
    "GitCommandError",
    "NotesRef",
    "PartialClone",
    "PushRejected",
    "anonymous_read_fix",
    "classify",
    "clone",
    "cone_patterns",
    "default_branch",
    "ls_remote",
    "redact",
    "run_git",
    "seed",
]

"""What a commit is made of, without running git: the author identity, the message as git stores
it, and the git-fast-import(1) stream that commits texts on a parent (an objects-only clone's
commit). :class:`steps.git.repo.ClonedRepo` runs these; nothing here does I/O (the
``IMAGEBUMP_GIT_AUTHOR_*`` defaults are read by :func:`steps.runtime.settings.author_identity`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping

from steps.domain.errors import ConfigError
from steps.runtime.settings import author_identity

#: The summary line ``git commit`` prints with ``core.abbrev=no``: ``[branch SHA] subject``.
COMMIT_SUMMARY = re.compile(r"^\[[^\n]*? ([0-9a-f]{40}|[0-9a-f]{64})\]", re.MULTILINE)


def identity(author_name: str | None, author_email: str | None) -> tuple[str, str]:
    """The commit's ``(name, email)``: the arguments, else ``IMAGEBUMP_GIT_AUTHOR_NAME`` /
    ``IMAGEBUMP_GIT_AUTHOR_EMAIL``, else ``imagebump``. ``author_name`` may be ``"Name <email>"``."""
    if author_name and author_email is None:
        if m := re.fullmatch(r"\s*(.*?)\s*<([^>]*)>\s*", author_name):
            author_name, author_email = m.group(1), m.group(2)
    if author_name and author_email:
        return author_name, author_email
    default_name, default_email = author_identity()
    return author_name or default_name, author_email or default_email


def stripspace(message: str) -> str:
    """The message as ``git commit -F`` stores it (``--cleanup=whitespace``, git-stripspace(1)):
    trailing whitespace dropped from every line, runs of empty lines collapsed to one, leading and
    trailing empty lines removed, one final newline ("" when nothing is left)."""
    out: list[str] = []
    gap = False
    for line in message.split("\n"):
        line = line.rstrip()
        if not line:
            gap = bool(out)
            continue
        if gap:
            out.append("")
            gap = False
        out.append(line)
    return "\n".join(out) + "\n" if out else ""


def _quote_path(path: str) -> str:
    """A path as git-fast-import(1) reads it: C-style quoted (backslash, quote, newline escaped)."""
    escaped = path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def fast_import_stream(
    branch: str,
    parent: str,
    message: str,
    name: str,
    email: str,
    changed: Mapping[str, tuple[str, str]],
    replaced: Iterable[str] = (),
) -> str:
    """The git-fast-import(1) stream of one commit on ``refs/heads/BRANCH`` ``from PARENT``.

    Author and committer are ``name <email>`` now; the message is cleaned as ``git commit -F``
    cleans it (:func:`stripspace`); one inline ``filemodify`` per ``changed`` path (``path ->
    (mode, text)``). ``replaced`` texts are stored as blobs first: ``git push`` deltas a new blob
    against the old one, and would download the old one (a lazy fetch) if it were not there.

    Raises:
        ConfigError: an identity with ``<``, ``>`` or a newline, or a message that is empty.
    """
    body = _checked(message, name, email)
    when = f"{int(time.time())} +0000"
    lines = [f"blob\ndata {len(old.encode('utf-8'))}\n{old}" for old in replaced]
    lines += [
        f"commit refs/heads/{branch}",
        f"author {name} <{email}> {when}",
        f"committer {name} <{email}> {when}",
        f"data {len(body.encode('utf-8'))}",
        body + f"from {parent}",
    ]
    for rel, (mode, text) in changed.items():
        lines += [f"M {mode} inline {_quote_path(rel)}", f"data {len(text.encode('utf-8'))}", text]
    lines += ["done", ""]
    return "\n".join(lines)


def _checked(message: str, name: str, email: str) -> str:
    """The message as git stores it; ConfigError for an identity git would refuse or an empty message."""
    for part in (name, email):
        if re.search(r"[<>\n]", part):
            raise ConfigError(f"commit identity {part!r} must not contain '<', '>' or a newline")
    body = stripspace(message)
    if not body:
        raise ConfigError("the commit message is empty; fix IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE")
    return body


def commit_object(
    tree: str, parent: str, message: str, name: str, email: str, when: int | None = None
) -> bytes:
    """The content of the commit object :func:`fast_import_stream` makes for the same commit (git's
    commit format: ``tree``, ``parent``, ``author`` and ``committer`` lines — ``name <email> SECONDS
    +0000`` —, a blank line, the message as ``git commit -F`` stores it: :func:`stripspace`).

    Raises:
        ConfigError: an identity with ``<``, ``>`` or a newline, or a message that is empty.
    """
    body = _checked(message, name, email)
    stamp = f"{int(time.time()) if when is None else when} +0000"
    person = f"{name} <{email}> {stamp}"
    return f"tree {tree}\nparent {parent}\nauthor {person}\ncommitter {person}\n\n{body}".encode()

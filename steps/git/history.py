"""Reading a file's history and versions from a clone, bounded and unforgeable.

The one home of reading objects without a checkout: a file's blob id at a revision
(:func:`blob_at`), the entries under some paths (:func:`list_tree`), and "bring these files'
versions and read them" (:func:`read_blobs`: one fetch request, one ``cat-file --batch``), used by
the history read (:mod:`steps.entry_history`), reconcile's overlay read and verify-live's clones.

Nothing a commit says can forge a field here: the commits that touched a file come from
``git log -z --format='%H %P' --raw`` (only object ids, modes, a status letter and the path we asked
for, every field NUL-terminated), and what a commit says (author, dates, message) is read from its
object through ``git cat-file --batch``, which gives each object's size before its bytes: a
message may hold any byte (``\\x1e``, ``\\x1f``, NUL, a line that looks like raw output) and it
stays the message. Each object is read streaming, keeping at most ``keep`` bytes of its head and
of its tail, so a 20 MB message or a 100 MB old version of a file costs ``2 * keep`` bytes of
memory, not its size.

Repository-derived text never reaches git where an option is accepted: object ids are checked to
be hex before they are passed, revisions follow ``--end-of-options``, paths follow ``--`` under
``--literal-pathspecs``.
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from steps.domain.errors import GitCommandError
from steps.git.auth import git_env
from steps.git.process import OVER_LIMIT

_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: The most side branches of one merge that are asked who made its change (an octopus merge's
#: further parents are not: its change is then the merge's own, a person's unless it says otherwise).
MAX_SIDES = 15
#: What ``git log`` of the file may write per commit listed (its id, its parents, one raw line): a
#: commit that names more parents than fit (a merge of thousands, pushed to exhaust the step) makes
#: :func:`touching` read the history again without parents, as if it had none.
LOG_BYTES_PER_COMMIT = 64 * 1024
ZERO = frozenset({"0" * 40, "0" * 64})
#: The names kustomize reads a kustomization from (a renamed overlay file keeps its history).
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
_EARLIEST = datetime(1, 1, 1, tzinfo=UTC)


def is_oid(text: str) -> bool:
    """Is ``text`` a full object id (40 or 64 lowercase hex digits)?"""
    return bool(_OID.fullmatch(text))


@dataclass(frozen=True)
class Touch:
    """One commit that touched the file: its id and the file's blob ids before and after it (before:
    at its first parent). ``parents`` are the commit's parents when git listed them (``%P``): more
    than one for a merge."""

    commit: str
    old: str
    new: str
    status: str  # A (added), M (modified), D (deleted), T (type changed)
    parents: tuple[str, ...] = ()

    @property
    def merge(self) -> bool:
        return len(self.parents) > 1


def parse_log_raw(out: bytes) -> list[Touch]:
    """``git log -z --format='%H %P' --raw --no-abbrev --no-renames`` output → :class:`Touch` es
    (``--format=%H`` too: then without parents).

    Only the fields git writes itself (ids, modes, status) are read; anything else is skipped.
    """
    found: list[Touch] = []
    commit, parents = "", ()
    tokens = out.split(b"\0")
    i = 0
    while i < len(tokens):
        token = tokens[i].decode("ascii", "replace").strip("\n")
        i += 1
        ids = token.split()
        if ids and all(is_oid(o) for o in ids):
            commit, parents = ids[0], tuple(ids[1 : 2 + MAX_SIDES])
        elif token.startswith(":") and commit:
            fields = token[1:].split()
            i += 1  # the path (one: --no-renames), which is the one we asked for
            if len(fields) == 5 and is_oid(fields[2]) and is_oid(fields[3]):
                found.append(Touch(commit, fields[2], fields[3], fields[4][:1], parents))
                commit, parents = "", ()  # one change per commit (one path asked for)
    return found


def is_ancestor(repo: Any, ancestor: str, revision: str) -> bool:
    """Whether commit ``ancestor`` is ``revision`` or reachable from it in what ``repo`` holds (a
    shallow boundary ends the walk). Ask only about a commit ``repo`` holds: a partial clone fetches
    a missing one on its own."""
    return ancestor == revision or (
        repo.git(
            "merge-base",
            "--is-ancestor",
            ancestor,
            revision,
            check=False,
            what=f"is {ancestor[:12]} under {revision[:12]}",
        ).returncode
        == 0
    )


def touching(repo: Any, rev: str, file: str, limit: int, *, exclude: str | None = None) -> list[Touch]:
    """The last ``limit`` commits of ``rev``'s first-parent line that changed ``file``, newest first,
    each read against its first parent; ``exclude`` (an object id): none of its history.

    The branch's own line, as the branch saw its file change: a merge is read against its first
    parent (``--first-parent --diff-merges=first-parent``), what it changed on the branch it was
    made on, whichever parent's version it took. git's default history simplification follows a
    merge's parent whose file is the same and skips the rest: a merge that took a side branch's
    older version of the file over the branch's newer one (a stale branch merged with "theirs", a
    conflict resolved to the side's image) changed the image on the branch, and neither that merge
    nor the commits it undid were listed, so such a rollback was not seen. Who made a merge's
    change is the caller's question (:attr:`Touch.parents`: :mod:`steps.entry_history` asks the
    side branch's commits when the merge took their version).
    """
    if exclude is not None and not is_oid(exclude):
        raise ValueError(f"not an object id: {exclude!r}")
    for form in ("%H %P", "%H"):  # without parents only when they would not fit (LOG_BYTES_PER_COMMIT)
        out = repo.git(
            "--literal-pathspecs",
            "log",
            "-z",
            f"-n{limit}",
            "--first-parent",
            "--diff-merges=first-parent",
            f"--format={form}",
            "--raw",
            "--no-abbrev",
            "--no-renames",
            "--end-of-options",
            rev,
            *([f"^{exclude}"] if exclude else []),
            "--",
            file,
            what=f"reading the history of {file}",
            raw_stdout=True,
            max_stdout=LOG_BYTES_PER_COMMIT * max(1, limit),
        )
        if out.returncode != OVER_LIMIT:
            break
    return parse_log_raw(out.stdout)


def side_changes(repo: Any, merges: Sequence[Touch], file: str) -> dict[str, Touch]:
    """What the other parents of ``merges`` (their side branches' tips) changed in ``file`` themselves,
    each read against its own first parent: commit → :class:`Touch` (a tip that did not change the
    file is absent). One ``git log --no-walk`` for all of them, on the commits and trees at hand."""
    tips = list(dict.fromkeys(p for m in merges for p in m.parents[1:] if is_oid(p)))
    if not tips:
        return {}
    out = repo.git(
        "--literal-pathspecs",
        "log",
        "-z",
        "--no-walk=unsorted",
        "--format=%H %P",
        "--raw",
        "--no-abbrev",
        "--no-renames",
        "--diff-merges=first-parent",
        "--end-of-options",
        *tips,
        "--",
        file,
        check=False,
        what=f"reading what merged branches changed in {file}",
        raw_stdout=True,
        max_stdout=LOG_BYTES_PER_COMMIT * len(tips),  # over it: returncode OVER_LIMIT, none known
    )
    return {t.commit: t for t in parse_log_raw(out.stdout)} if out.returncode == 0 else {}


def made_by_side_tip(merge: Touch, sides: dict[str, Touch]) -> str | None:
    """The side branch's tip whose own change of the file is exactly the change ``merge`` made on its
    first-parent line (the same version before, the same after: an up-to-date branch merged with a
    merge commit), or None. :func:`side_changes` gives ``sides``."""
    for parent in merge.parents[1:]:
        tip = sides.get(parent)
        if tip is not None and not tip.merge and (tip.old, tip.new) == (merge.old, merge.new):
            return parent
    return None


def renamed_from(repo: Any, commit: str, file: str, blob: str) -> str | None:
    """The kustomization file ``commit`` deleted when it added ``file`` (a rename, or an overlay
    moved): the one with the same content, else the one in the same directory, else the only one;
    None when there is none (the file begins here)."""
    if not is_oid(commit):
        return None
    specs = [f":(glob)**/{name}" for name in KUSTOMIZATION_NAMES]
    out = repo.git(
        "diff-tree",
        "-z",
        "-r",
        # no --root: a root commit (or a shallow clone's boundary commit) deletes nothing, so it
        # renamed nothing; with --root git would list every file of it as added (a 5,000-file
        # monorepo's first commit: a walk of all its trees for nothing)
        "--no-renames",
        "--no-commit-id",
        "--raw",
        "--end-of-options",
        f"{commit}^1",  # against its first parent: a merge's too (alone, diff-tree shows none for one)
        commit,
        "--",
        *specs,
        check=False,
        what=f"reading what {commit[:12]} renamed",
        raw_stdout=True,
    )
    if out.returncode != 0:
        return None
    tokens = out.stdout.split(b"\0")
    deleted: list[tuple[str, str]] = []
    for i in range(0, len(tokens) - 1, 2):
        fields = tokens[i].decode("ascii", "replace").strip("\n").lstrip(":").split()
        if len(fields) == 5 and fields[4] == "D" and is_oid(fields[2]):
            deleted.append((tokens[i + 1].decode("utf-8", "surrogateescape"), fields[2]))
    directory = file.rpartition("/")[0]
    for choose in (
        lambda p, o: o == blob,
        lambda p, o: p.rpartition("/")[0] == directory,
    ):
        picked = [p for p, o in deleted if choose(p, o)]
        if len(picked) == 1:
            return picked[0]
    return deleted[0][0] if len(deleted) == 1 else None


@dataclass(frozen=True)
class Object:
    """An object read by :func:`read_objects`: its kind, its full size, and at most ``keep`` bytes
    of its head and of its tail (all of it when ``size <= 2 * keep``: then ``tail`` is empty)."""

    kind: str
    size: int
    head: bytes
    tail: bytes = b""

    @property
    def whole(self) -> bool:
        return not self.tail and len(self.head) == self.size


def read_objects(repo: Any, oids: list[str], keep: int, timeout: float = 300.0) -> dict[str, Object]:
    """Each object of ``oids`` (full ids; others are ignored) read with one streaming
    ``git cat-file --batch``: at most ``keep`` bytes of its head and ``keep`` of its tail are kept.

    Missing objects are left out. Memory: ``2 * keep`` per object, whatever its size.
    """
    wanted = [o for o in dict.fromkeys(oids) if is_oid(o)]
    if not wanted:
        return {}
    env = git_env(repo.auth, repo.url, None)
    found: dict[str, Object] = {}
    with subprocess.Popen(
        ["git", "cat-file", "--batch"],
        cwd=repo.path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        timer = threading.Timer(timeout, process.kill)
        timer.daemon = True
        timer.start()

        def feed() -> None:
            try:
                process.stdin.write("".join(o + "\n" for o in wanted).encode("ascii"))  # type: ignore[union-attr]
                process.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        try:
            out = process.stdout
            for _ in wanted:
                header = out.readline(512).decode("ascii", "replace").split()
                if len(header) == 2 and header[1] == "missing":
                    continue
                if len(header) != 3 or not header[2].isdigit():
                    break
                size = int(header[2])
                head = out.read(min(size, 2 * keep))
                tail = b""
                left = size - len(head)
                if left > 0:  # more than 2 * keep bytes: keep ``keep`` of the head, the last ``keep``
                    window = bytearray(head[keep:])
                    head = head[:keep]
                    while left > 0:
                        chunk = out.read(min(left, 1 << 16))
                        if not chunk:
                            break
                        left -= len(chunk)
                        window += chunk
                        del window[: max(0, len(window) - keep)]
                    tail = bytes(window[-keep:]) if keep else b""
                out.read(1)  # the newline after the object
                found[header[0]] = Object(header[1], size, head, tail)
        finally:
            timer.cancel()
            process.kill()
            writer.join(timeout=5)
    return found


def fetch_objects(repo: Any, oids: list[str], what: str) -> None:
    """Fetch the objects ``oids`` (full ids only) in one request (protocol v2 lets a client want
    any object)."""
    wanted = sorted(o for o in set(oids) if is_oid(o) and o not in ZERO)
    if not wanted:
        return
    repo.git(
        "-c",
        "fetch.negotiationAlgorithm=noop",
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--recurse-submodules=no",
        "--end-of-options",
        "origin",
        *wanted,
        what=what,
    )


def read_blobs(
    repo: Any, oids: Any, limit: int, *, fetch: bool = True, what: str = ""
) -> dict[str, tuple[int, bytes | None]]:
    """``oid → (size, bytes)`` of the blobs ``oids`` (full ids only; others, missing objects and
    objects that are not blobs are left out); ``bytes`` is None for a blob larger than ``limit``.

    The one home of "bring these files' versions and read them": ``fetch`` True brings the blobs
    in ONE request first (:func:`fetch_objects`: protocol v2 lets a client want any object, so
    every version costs one round trip, not one each), then ONE streaming ``git cat-file --batch``
    reads them, holding at most ``limit`` bytes per blob (:func:`read_objects`). Used by the
    history read (:mod:`steps.entry_history`), reconcile's overlay read and verify-live's clones
    (:class:`steps.git.partial.PartialClone`).
    """
    wanted = sorted(o for o in set(oids) if is_oid(o) and o not in ZERO)
    if not wanted:
        return {}
    if fetch:
        fetch_objects(repo, wanted, what or f"fetch of {len(wanted)} file version(s) from {repo.url}")
    found: dict[str, tuple[int, bytes | None]] = {}
    for oid, obj in read_objects(repo, wanted, (limit + 1) // 2).items():
        if obj.kind == "blob":
            found[oid] = (obj.size, obj.head if obj.whole and obj.size <= limit else None)
    return found


def blob_at(repo: Any, rev: str, path: str) -> str | None:
    """The blob id of the file ``path`` at ``rev`` (from the trees: nothing fetched), or None when
    absent, not a blob, or ``rev`` is unknown (a shallow clone's boundary commit's parent)."""
    proc = repo.git(
        "--literal-pathspecs",
        "ls-tree",
        "-z",
        "--full-tree",
        "--end-of-options",
        rev,
        "--",
        path,
        check=False,
        raw_stdout=True,
    )
    if proc.returncode != 0:
        return None
    for record in proc.stdout.split(b"\0"):
        meta, _, _ = record.partition(b"\t")
        fields = meta.decode("ascii", "replace").split()
        if len(fields) == 3 and fields[1] == "blob" and is_oid(fields[2]):
            return fields[2]
    return None


def list_tree(repo: Any, rev: str, paths: Sequence[str]) -> dict[str, tuple[str, str, str]]:
    """``path → (mode, type, oid)`` at ``rev`` (a directory given with a trailing ``/``: its entries),
    from the trees alone (nothing fetched); ONE ``ls-tree`` for all ``paths``."""
    if not paths:
        return {}
    out = repo.git(
        "--literal-pathspecs",
        "ls-tree",
        "-z",
        rev,
        "--",
        *paths,
        what=f"listing {len(paths)} path(s) at {rev[:12]} of {repo.url}",
    ).stdout
    entries = {}
    for record in out.split("\0"):
        if not record:
            continue
        meta, _, name = record.partition("\t")
        mode, kind, oid = meta.split(" ", 2)
        entries[name] = (mode, kind, oid)
    return entries


def fetch_ref(repo: Any, ref: str, what: str) -> str | None:
    """Fetch ``ref`` (commits and trees only, depth 1) and return the commit it names, or None
    when the remote has no such ref or refuses."""
    if not re.fullmatch(r"refs/[A-Za-z0-9/_.-]+", ref) or ".." in ref:
        return None
    try:
        proc = repo.git(
            "fetch",
            "--quiet",
            "--depth=1",
            "--filter=blob:none",
            "--no-tags",
            "--no-write-fetch-head",
            "--recurse-submodules=no",
            "--end-of-options",
            "origin",
            f"+{ref}:refs/imagebump/peek",
            check=False,
            what=what,
        )
    except GitCommandError:
        return None
    if proc.returncode != 0:
        return None
    sha = repo.git(
        "rev-parse", "--verify", "--quiet", "refs/imagebump/peek^{commit}", check=False
    ).stdout.strip()
    return sha if is_oid(sha) else None


def deepen(repo: Any, branch: str, depth: int) -> None:
    """Fetch ``branch`` ``depth`` commits deep (commits and trees, no file contents)."""
    repo.git(
        "fetch",
        "--quiet",
        f"--depth={depth}",
        "--filter=blob:none",
        "--no-tags",
        "--no-write-fetch-head",
        "--end-of-options",
        "origin",
        f"refs/heads/{branch}",
        what=f"fetch of the history of '{branch}' from {repo.url}",
    )


def shallow(repo: Any) -> set[str]:
    """The clone's shallow boundary (commits whose parents were not fetched)."""
    path = repo.path / ".git" / "shallow"
    return set(path.read_text().split()) if path.is_file() else set()


@dataclass(frozen=True)
class CommitInfo:
    """What a commit object says: its author (``Name <email>``), committer time and message (its
    head and tail when it was longer than the bound: the part in between is not read)."""

    author: str
    committed_at: datetime
    message: str
    message_size: int
    #: how many ``parent`` lines the commit has (0: a root commit, where every file begins)
    parents: int = 0
    #: the first parent's object id ("" for a root commit)
    first_parent: str = ""


def when(seconds: str) -> datetime:
    """A git timestamp (seconds since 1970, possibly negative or far beyond year 9999) as a UTC
    datetime, clamped to the years 1..9999 Python can hold; something that is not a number reads
    as 1970 (no evidence of when). Never raises."""
    text = seconds.strip()
    if not re.fullmatch(r"[+-]?\d{1,30}", text):
        return _EPOCH
    value = int(text)
    try:
        return _EPOCH + timedelta(seconds=value)
    except OverflowError:
        return _LATEST if value > 0 else _EARLIEST


def parse_commit(obj: Object) -> CommitInfo:
    """A commit object's author, committer time and message, from :func:`read_objects`' bytes."""
    head, _, body = obj.head.partition(b"\n\n")
    author, committed, parents, first = "", _EPOCH, 0, ""
    for line in head.split(b"\n"):
        key, _, value = line.partition(b" ")
        if key == b"parent":
            parents += 1
            first = first or value.decode("ascii", "replace").strip()
        elif key == b"author" and not author:
            author = _ident(value)
        elif key == b"committer":
            stamp = value.rpartition(b">")[2].decode("ascii", "replace").split()
            committed = when(stamp[0] if stamp else "")
    message = body.decode("utf-8", "replace")
    if obj.tail:
        message += "\n…\n" + obj.tail.decode("utf-8", "replace")
    return CommitInfo(author, committed, message, max(0, obj.size - len(head) - 2), parents, first)


def _ident(value: bytes) -> str:
    """``Name <email>`` of an ident line's value (its date left off)."""
    name, found, _ = value.rpartition(b">")
    return (
        (name + found).decode("utf-8", "replace").strip() if found else value.decode("utf-8", "replace")[:200]
    )

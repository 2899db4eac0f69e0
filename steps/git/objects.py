"""Git's object format, without a process: object ids, raw trees, the chain of objects from a
commit down to one file (what commit-pr needs to commit on that commit without fetching it), a
``cat-file --batch`` answer, a commit's identities and message (:func:`commit_facts`), and the ref
files a clone leaves behind.

The formats are git's stable on-disk ones (Pro Git, "Git Internals - Git Objects",
https://git-scm.com/book/en/v2/Git-Internals-Git-Objects): an object's id is
``hash("<kind> <size>\\0" + content)`` in the repository's object format (SHA-1, or SHA-256 with
64-hex-digit ids); a tree's content is a sequence of ``<octal mode> <name>\\0<binary id>`` entries
in git's order; a commit's content starts with ``tree <id>\\n``.

Pure but for :func:`head_file_branch` and :func:`branch_file_sha`, which read a ``.git``
directory's files, and :func:`write_loose` and :func:`write_pack`, which store objects in one; used by :mod:`steps.git.repo` (blob ids), :mod:`steps.edit_kustomize` (which
carries the chain in the plan) and :mod:`steps.git` (which believes a carried chain only when
every link hashes to the id its parent names, :func:`verify_path_chain`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from steps.domain.branch_owner import CommitFacts
from steps.domain.errors import CarriedObjectsError, KustomizationError

#: Modes of a regular file and of a directory in a raw tree (git writes them without leading zeros).
REGULAR_MODES = ("100644", "100755")
TREE_MODE = "40000"


def object_format(oid: str) -> str:
    """The hash of a repository whose object ids look like ``oid``: ``sha256`` (64 hex digits) or ``sha1``."""
    return "sha256" if len(oid) == 64 else "sha1"


def object_id(kind: str, content: bytes, fmt: str = "sha1") -> str:
    """The id git gives an object of ``kind`` (``blob``, ``tree``, ``commit``) holding ``content``."""
    return hashlib.new(fmt, b"%s %d\0" % (kind.encode(), len(content)) + content).hexdigest()


def blob_id(text: str, fmt: str = "sha1") -> str:
    """The id git gives a blob holding ``text`` (UTF-8)."""
    return object_id("blob", text.encode("utf-8"), fmt)


def file_text(data: bytes, path: str, where: str = "") -> str:
    """A file's bytes as text, decoded strictly as UTF-8 (a byte-order mark kept as U+FEFF).

    imagebump edits text and writes it back as UTF-8, so a file that is not UTF-8 would be
    rewritten with other bytes than a person wrote (a Latin-1 ``é`` as U+FFFD): it is refused
    instead, never rewritten (``reason`` ``not-utf8``, ``field`` the path).
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        utf16 = data[:2] in (b"\xff\xfe", b"\xfe\xff")
        line = data.count(b"\n", 0, exc.start) + 1
        what = "UTF-16 (a byte-order mark)" if utf16 else f"byte 0x{data[exc.start]:02X} on line {line}"
        raise KustomizationError(
            f"{path}{' in ' + where if where else ''} is not UTF-8 ({what}); imagebump edits UTF-8 files "
            "only and never rewrites another encoding: convert the file to UTF-8 (e.g. "
            f"`iconv -f LATIN1 -t UTF-8`) and commit it",
            reason="not-utf8",
            field=path,
        ) from None


def tree_entries(raw: bytes, fmt: str = "sha1") -> list[tuple[str, bytes, str]]:
    """``(mode, name, id)`` of each entry of a raw tree, in order. CarriedObjectsError when it is not one."""
    size = hashlib.new(fmt).digest_size
    entries = []
    pos = 0
    while pos < len(raw):
        space = raw.find(b" ", pos)
        nul = raw.find(b"\0", space) if space >= 0 else -1
        end = nul + 1 + size
        if nul < 0 or end > len(raw):
            raise CarriedObjectsError("a tree entry is cut short")
        if not raw[pos:space].isdigit():
            raise CarriedObjectsError("a tree entry's mode is not digits")
        entries.append((raw[pos:space].decode("ascii"), raw[space + 1 : nul], raw[nul + 1 : end].hex()))
        pos = end
    return entries


def commit_tree(raw: bytes) -> str:
    """The root tree id a raw commit names (its first line). CarriedObjectsError when it has none."""
    first, _, _ = raw.partition(b"\n")
    kind, _, oid = first.partition(b" ")
    if kind != b"tree" or not oid or not oid.isascii():
        raise CarriedObjectsError("a commit starts with its tree")
    return oid.decode("ascii")


def verify_path_chain(objects: Sequence[bytes], commit: str, path: str, blob: str) -> str:
    """The mode of the regular file ``path`` holding ``blob`` at ``commit``, proven by ``objects``:
    the commit, then one tree per directory from the root down to ``path``'s own, each hashing to
    the id its parent names — so a chain that passes is exactly what the repository holds at
    ``commit``, whoever carried it.

    Raises:
        CarriedObjectsError: why ``objects`` are not that chain.
    """
    fmt = object_format(commit)
    directories = PurePosixPath(path).parts[:-1]
    if len(objects) != len(directories) + 2:
        raise CarriedObjectsError(f"{len(objects)} objects for a path {len(directories)} directories deep")
    if object_id("commit", objects[0], fmt) != commit:
        raise CarriedObjectsError("the commit does not hash to its id")
    expected = commit_tree(objects[0])
    names = [*directories, PurePosixPath(path).name]
    mode = TREE_MODE
    for depth, (raw, name) in enumerate(zip(objects[1:], names, strict=True)):
        if mode != TREE_MODE or object_id("tree", raw, fmt) != expected:
            raise CarriedObjectsError(f"tree {depth} is not the one its parent names")
        found = [(m, oid) for m, n, oid in tree_entries(raw, fmt) if n == name.encode("utf-8")]
        if len(found) != 1:
            raise CarriedObjectsError(f"{name!r} is not in tree {depth}")
        mode, expected = found[0]
    if mode not in REGULAR_MODES or expected != blob:
        raise CarriedObjectsError(f"{path} is not the regular file {blob} at {commit}")
    return mode


def replace_in_chain(objects: Sequence[bytes], path: str, blob: str, fmt: str = "sha1") -> list[bytes]:
    """The trees of a verified chain (:func:`verify_path_chain`'s ``objects``: the commit, then the
    trees from the root down to ``path``'s directory) with ``path``'s entry naming ``blob`` instead,
    root first: each tree's entry for the next directory names that directory's new tree. Entries
    keep their order, names and modes (only ids change), so each tree stays in git's order.

    Raises:
        CarriedObjectsError: a tree of the chain lacks the entry it leads through.
    """
    size = hashlib.new(fmt).digest_size
    names = [n.encode("utf-8") for n in PurePosixPath(path).parts]
    trees = list(objects[1:])
    if len(trees) != len(names):
        raise CarriedObjectsError(f"{len(trees)} trees for a path {len(names) - 1} directories deep")
    new_id = bytes.fromhex(blob)
    out: list[bytes] = []
    for raw, name in zip(reversed(trees), reversed(names), strict=True):
        pos, found = 0, -1
        while pos < len(raw):  # the entry named ``name`` (tree_entries' walk, with positions)
            space = raw.find(b" ", pos)
            nul = raw.find(b"\0", space)
            if space < 0 or nul < 0 or nul + 1 + size > len(raw):
                raise CarriedObjectsError("a tree entry is cut short")
            if raw[space + 1 : nul] == name:
                found = nul + 1
                break
            pos = nul + 1 + size
        if found < 0:
            raise CarriedObjectsError(f"{name.decode('utf-8', 'replace')!r} is not in its tree")
        tree = raw[:found] + new_id + raw[found + size :]
        out.append(tree)
        new_id = bytes.fromhex(object_id("tree", tree, fmt))
    return out[::-1]


__all__ = [
    "REGULAR_MODES",
    "TREE_MODE",
    "blob_id",
    "commit_tree",
    "file_text",
    "object_format",
    "object_id",
    "replace_in_chain",
    "tree_entries",
    "verify_path_chain",
]


def write_loose(gitdir: Path, kind: str, content: bytes, fmt: str = "sha1") -> str:
    """Store an object in ``gitdir`` as a loose object (``objects/XX/REST``, zlib of ``"<kind>
    <size>\\0" + content``: gitrepository-layout(5), Pro Git "Git Objects"); its id."""
    import zlib

    oid = object_id(kind, content, fmt)
    loose = gitdir / "objects" / oid[:2] / oid[2:]
    if not loose.exists():
        loose.parent.mkdir(exist_ok=True)
        loose.write_bytes(zlib.compress(b"%s %d\0" % (kind.encode(), len(content)) + content, 1))
    return oid


_PACK_TYPES = {"commit": 1, "tree": 2, "blob": 3, "tag": 4}


def write_pack(gitdir: Path, objects: Sequence[tuple[str, bytes]], fmt: str = "sha1") -> list[str]:
    """Store ``objects`` (``(kind, content)``) in ``gitdir`` as one pack and its index (two files
    where loose objects take a directory and a file each: the seed's and its commit's ~7 objects
    cost ~30 file-system calls, the slowest part of a seed on a busy machine); their ids, in order.

    The formats are git's (gitformat-pack(5)): a version-2 pack of undeltified objects (each a
    type-and-size header, then its zlib-compressed content), trailed by the hash of what precedes;
    a version-2 index (fan-out table, sorted ids, CRC-32 of each object's packed bytes, 32-bit
    offsets, the pack's hash, then its own), named ``pack-<pack hash>`` as git names them.
    """
    import struct
    import zlib

    ids: list[str] = []
    entries: dict[bytes, tuple[int, int]] = {}  # binary id -> (offset, crc32)
    body = bytearray(b"PACK" + struct.pack(">II", 2, 0))
    for kind, content in objects:
        oid = object_id(kind, content, fmt)
        ids.append(oid)
        key = bytes.fromhex(oid)
        if key in entries:
            continue
        size = len(content)
        header = bytearray([(_PACK_TYPES[kind] << 4) | (size & 0x0F)])
        size >>= 4
        while size:
            header[-1] |= 0x80
            header.append(size & 0x7F)
            size >>= 7
        packed = bytes(header) + zlib.compress(content, 1)
        entries[key] = (len(body), zlib.crc32(packed))
        body += packed
    body[8:12] = struct.pack(">I", len(entries))
    trailer = hashlib.new(fmt, body).digest()
    body += trailer
    keys = sorted(entries)
    fanout = [0] * 256
    for key in keys:
        fanout[key[0]] += 1
    total = 0
    for i in range(256):
        total += fanout[i]
        fanout[i] = total
    index = bytearray(b"\xfftOc" + struct.pack(">I", 2) + struct.pack(">256I", *fanout))
    index += b"".join(keys)
    index += b"".join(struct.pack(">I", entries[k][1]) for k in keys)
    index += b"".join(struct.pack(">I", entries[k][0]) for k in keys)
    index += trailer
    index += hashlib.new(fmt, index).digest()
    name = gitdir / "objects" / "pack" / f"pack-{trailer.hex()}"
    name.with_suffix(".pack").write_bytes(bytes(body))
    name.with_suffix(".idx").write_bytes(bytes(index))  # last: git reads a pack through its index
    return ids


def split_batch(out: bytes, count: int) -> list[bytes] | None:
    """The ``count`` objects of a ``git cat-file --batch`` answer (``<oid> <type> <size>``, the
    content, a newline: git-cat-file(1)); None when one of them is ``<spec> missing``."""
    objects, pos = [], 0
    for _ in range(count):
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        if len(header) != 3:
            return None
        size = int(header[2])
        objects.append(out[end + 1 : end + 1 + size])
        pos = end + 1 + size + 1
    return objects


_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def head_file_branch(gitdir: Path) -> str:
    """The branch ``GITDIR/HEAD`` names (``ref: refs/heads/NAME``, gitrepository-layout(5)); ""
    when it names none (detached, unreadable, a reftable repository's ``.invalid`` placeholder)."""
    try:
        head = (gitdir / "HEAD").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return ""
    name = head[len("ref: refs/heads/") :] if head.startswith("ref: refs/heads/") else ""
    return "" if name == ".invalid" else name


def branch_file_sha(gitdir: Path, branch: str) -> str:
    """The sha of ``refs/heads/BRANCH`` read from its loose ref file or, when there is none, its
    ``packed-refs`` line (gitrepository-layout(5)); "" when neither holds one."""
    return ref_file_sha(gitdir, f"refs/heads/{branch}")


def is_oid(text: str) -> bool:
    """Is ``text`` a full object id (40 or 64 lowercase hex digits)?"""
    return bool(_SHA.fullmatch(text))


def ref_file_sha(gitdir: Path, ref: str) -> str:
    """The sha of the full ref ``ref`` (``refs/remotes/origin/main``) from its loose ref file or, when
    there is none, its ``packed-refs`` line; "" when neither holds one (or a reftable repository)."""
    try:
        loose = gitdir / ref
        if loose.is_file():
            sha = loose.read_text().strip()
            return sha if _SHA.fullmatch(sha) else ""
        if (gitdir / "packed-refs").is_file():
            for line in (gitdir / "packed-refs").read_text().splitlines():
                sha, _, name = line.partition(" ")
                if name == ref and _SHA.fullmatch(sha):
                    return sha
    except (OSError, UnicodeDecodeError):
        pass
    return ""


_PERSON = re.compile(rb"^(.*?) ?<([^<>\n]*)> ")


def commit_facts(sha: str, raw: bytes) -> CommitFacts:
    """Author, committer, message and parent count of a raw commit object (git's format: header
    lines ``key value`` — a continuation line starts with a space —, a blank line, the message).
    Read field by field from the object itself, so no text in a message can pose as a header."""
    head, _, message = raw.partition(b"\n\n")
    people: dict[bytes, tuple[str, str]] = {}
    parents = 0
    for line in head.split(b"\n"):
        if line.startswith(b" "):
            continue  # a continuation (a signature's lines)
        key, _, value = line.partition(b" ")
        if key == b"parent":
            parents += 1
        elif key in (b"author", b"committer") and key not in people:
            m = _PERSON.match(value)
            if m:
                people[key] = (
                    m.group(1).decode("utf-8", "replace").strip(),
                    m.group(2).decode("utf-8", "replace").strip(),
                )
    author = people.get(b"author", ("", ""))
    committer = people.get(b"committer", ("", ""))
    return CommitFacts(
        sha=sha,
        author_name=author[0],
        author_email=author[1],
        committer_name=committer[0],
        committer_email=committer[1],
        message=message.decode("utf-8", "replace"),
        parents=parents,
    )

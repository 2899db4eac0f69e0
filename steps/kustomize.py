"""Read and edit the ``images:`` of a kustomization without disturbing anything else.

Pure functions over text (no I/O except :func:`find_kustomization`, which only looks at names in
a directory). :func:`set_image` changes only the lines that must change: it parses the document
with ruamel.yaml (round-trip composer) for *positions* — the start/end marks of the ``images``
entry, its keys and values — and splices the original text at those places: a value's span is
replaced, a new key line is inserted after the entry's last key line with the entry's own key
indentation, a removed key's line(s) are deleted. Comments, blank lines, indentation style, key
order, quoting, ``---`` markers, a BOM and CRLF endings are never rewritten, and long digests are
never wrapped, because nothing is re-dumped. The result is then parsed again and compared with
what was meant; if it differs, :class:`KustomizationError` is raised rather than returning a
wrong file. When nothing must change, the input string itself is returned.

Hostile input: every entry point (:func:`read_images`, :func:`get_image`, :func:`set_image`)
parses through one function, which refuses a text over :data:`MAX_KUSTOMIZATION_BYTES` (1 MiB)
before parsing it, and — counting on the composed node graph, without expanding anything —
aliases that refer to themselves or add more than :data:`MAX_ALIAS_EXPANSION` nodes once
expanded (a "billion laughs" document), so the verification below never expands a bomb.

Semantics (kustomize's ``images`` transformer): an entry is found by ``name``, else by
``newName``. Setting a tag alone removes ``digest`` (a digest overrides the tag); setting a digest
alone removes ``newTag``; both may be set together. A scalar YAML 1.1 or 1.2 would read as
something other than a string (``1.10``, ``1e3``, ``true``, ``yes``, ``null``, ``0x1F``, ``010``,
``~``) is quoted.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.scanner import RoundTripScanner, ScannerError

from steps.errors import ConfigError, ImageNotFoundError, KustomizationError
from steps.models import ImagesEntry

__all__ = [
    "KUSTOMIZATION_FILES",
    "MAX_ALIAS_EXPANSION",
    "MAX_KUSTOMIZATION_BYTES",
    "ImageSpec",
    "find_kustomization",
    "get_image",
    "parse_image_spec",
    "read_images",
    "set_image",
]

#: The file names kustomize looks for, in its own order of preference.
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
#: The largest kustomization read, in bytes (UTF-8). Real ones are a few KiB; a larger file is
#: refused before any YAML parsing (each edit parses the text several times).
MAX_KUSTOMIZATION_BYTES = 1 << 20
#: How many nodes YAML aliases may add once expanded (beyond the nodes written out). A "billion
#: laughs" document adds 10⁹ from a few hundred bytes; go-yaml (kustomize) refuses those too.
MAX_ALIAS_EXPANSION = 10_000

#: ECR's tag grammar (also Docker's).
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
#: An image name as kustomize and container runtimes take it: ``[host[:port]/]path``.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?::[0-9]+)?(?:/[A-Za-z0-9._-]+)*")

_FIELDS = ("name", "newName", "newTag", "digest")
#: YAML's line breaks, exactly as ruamel's scanner counts them.
_LINE_BREAK = re.compile(r"\r\n|\r|\n|\x85|\u2028|\u2029")
_RESOLVERS = (VersionedResolver(version=(1, 1)), VersionedResolver(version=(1, 2)))
_STR_TAG = "tag:yaml.org,2002:str"
_NULL_TAG = "tag:yaml.org,2002:null"


# --------------------------------------------------------------------------------------------
# Image specs (kustomize's `edit set image` syntax)


@dataclass(frozen=True)
class ImageSpec:
    """One ``NAME[=NEWNAME][:TAG][@DIGEST]`` as ``kustomize edit set image`` takes it."""

    name: str
    new_name: str | None = None
    tag: str | None = None
    digest: str | None = None

    def __str__(self) -> str:
        spec = self.name
        if self.new_name:
            spec += f"={self.new_name}"
        if self.tag:
            spec += f":{self.tag}"
        if self.digest:
            spec += f"@{self.digest}"
        return spec


def _split_reference(ref: str) -> tuple[str, str | None, str | None]:
    """``name[:tag][@digest]`` → parts; a ``:`` before the last ``/`` is a registry port."""
    digest = None
    if "@" in ref:
        ref, digest = ref.split("@", 1)
    tag = None
    colon = ref.rfind(":")
    if colon > ref.rfind("/"):
        ref, tag = ref[:colon], ref[colon + 1 :]
    return ref, tag, digest


def validate_tag(tag: str) -> str:
    """Return ``tag`` if it is a valid image tag, else raise :class:`ConfigError`."""
    if not isinstance(tag, str) or not TAG_RE.fullmatch(tag):
        raise ConfigError(
            f"invalid tag {tag!r}: a tag is 1-128 of letters, digits, '_', '.', '-' "
            "and cannot start with '.' or '-'"
        )
    return tag


def validate_digest(digest: str) -> str:
    """Return ``digest`` if it is ``sha256:`` + 64 lowercase hex digits, else raise."""
    if not isinstance(digest, str) or not DIGEST_RE.fullmatch(digest):
        raise ConfigError(f"invalid digest {digest!r}: expected 'sha256:' followed by 64 hex digits")
    return digest


def validate_image_name(name: str, what: str = "image name") -> str:
    """Return ``name`` if it is a plausible ``[host[:port]/]path`` image name, else raise."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ConfigError(
            f"invalid {what} {name!r}: expected [HOST[:PORT]/]PATH of letters, digits, '.', '_', '-'"
        )
    return name


def parse_image_spec(spec: str) -> ImageSpec:
    """Parse kustomize's ``NAME[=NEWNAME][:TAG][@DIGEST]``.

    ``host:5000/app:1.0`` is name ``host:5000/app`` with tag ``1.0``. With ``=``, the tag and
    digest belong to the new name's side (``api=reg/api:1.2``), as in kustomize.

    Raises:
        ConfigError: an empty part, or an invalid name, tag or digest.
    """
    spec = (spec or "").strip()
    if not spec:
        raise ConfigError("empty image spec: expected NAME[=NEWNAME][:TAG][@DIGEST]")
    new_name = None
    if "=" in spec:
        name, rest = spec.split("=", 1)
        new_name, tag, digest = _split_reference(rest)
        if not new_name:
            raise ConfigError(f"image spec {spec!r}: nothing after '='; expected NAME=NEWNAME[:TAG][@DIGEST]")
        validate_image_name(new_name, "new name")
    else:
        name, tag, digest = _split_reference(spec)
    if not name:
        raise ConfigError(f"image spec {spec!r} has no NAME; expected NAME[=NEWNAME][:TAG][@DIGEST]")
    validate_image_name(name)
    if tag is not None:
        validate_tag(tag)
    if digest is not None:
        validate_digest(digest)
    return ImageSpec(name=name, new_name=new_name, tag=tag, digest=digest)


# --------------------------------------------------------------------------------------------
# Finding the file


def find_kustomization(directory: Path) -> Path:
    """Return the one kustomization file in ``directory``.

    Raises:
        KustomizationError: the directory does not exist, holds none, or holds several.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise KustomizationError(f"{directory}: not a directory; pass an overlay directory or its kustomization file")
    found = [directory / name for name in KUSTOMIZATION_FILES if (directory / name).is_file()]
    # On a case-insensitive filesystem "Kustomization" and "kustomization.yaml" differ anyway.
    if not found:
        raise KustomizationError(
            f"no kustomization in {directory}: expected one of {', '.join(KUSTOMIZATION_FILES)}"
        )
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise KustomizationError(f"ambiguous: found multiple kustomization files in {directory}: {names}; keep one")
    return found[0]


# --------------------------------------------------------------------------------------------
# Parsing for positions


@dataclass
class _Entry:
    index: int
    node: MappingNode
    keys: dict[str, tuple[ScalarNode, ScalarNode]]  # field -> (key node, value node)

    @property
    def flow(self) -> bool:
        return bool(self.node.flow_style)

    def value(self, field: str) -> str | None:
        pair = self.keys.get(field)
        if pair is None or pair[1].tag == _NULL_TAG:
            return None
        return pair[1].value

    def to_model(self) -> ImagesEntry:
        data = {key: self.value(key) for key in self.keys}
        return ImagesEntry(**data)


@dataclass
class _Doc:
    text: str
    source: str
    root: MappingNode | None
    images_key: ScalarNode | None
    images: SequenceNode | None  # None when absent or null
    images_null: ScalarNode | None  # the value node of `images:` when it is null
    entries: list[_Entry]


def _where(mark) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _yaml_error(exc: YAMLError, source: str) -> KustomizationError:
    if isinstance(exc, MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or str(exc)
        at = f" at {_where(mark)}" if mark is not None else ""
    else:  # pragma: no cover - ruamel raises marked errors for syntax problems
        problem, at = str(exc).splitlines()[0], ""
    problem = " ".join(str(problem).split())
    hint = "fix the YAML (kubectl kustomize rejects it too)"
    if "\\t" in problem or "\t" in problem or "tab" in problem:
        hint = "indent with spaces; YAML does not allow tabs for indentation"
    elif "nested more than" in problem:
        hint = "a kustomization is a few levels deep; write the value out in block style or flatten it"
    return KustomizationError(f"{source}: invalid YAML{at}: {problem}; {hint}")


def _walk(node: Node, seen: set[int]):
    if id(node) in seen:
        return
    seen.add(id(node))
    yield node
    if isinstance(node, MappingNode):
        for key, value in node.value:
            yield from _walk(key, seen)
            yield from _walk(value, seen)
    elif isinstance(node, SequenceNode):
        for item in node.value:
            yield from _walk(item, seen)


def _check_duplicate_keys(root: Node, source: str) -> None:
    for node in _walk(root, set()):
        if not isinstance(node, MappingNode):
            continue
        seen: dict[str, Node] = {}
        for key, _ in node.value:
            if not isinstance(key, ScalarNode) or key.value == "<<":
                continue
            if key.value in seen:
                first = seen[key.value]
                raise KustomizationError(
                    f"{source}: duplicate key {key.value!r} at {_where(key.start_mark)} "
                    f"(first at {_where(first.start_mark)}); remove one of them"
                )
            seen[key.value] = key


def _refuse_anchor(node: Node, what: str, source: str) -> None:
    if getattr(node, "anchor", None):
        raise KustomizationError(
            f"{source}: {what} at {_where(node.start_mark)} carries the anchor &{node.anchor} "
            "(it may be used elsewhere through an alias); write it out without anchors/aliases to edit it"
        )


def _check_size(text: str, source: str) -> None:
    """Refuse a text over :data:`MAX_KUSTOMIZATION_BYTES` before anything parses it."""
    if len(text) <= MAX_KUSTOMIZATION_BYTES // 4:  # 4 bytes per character at most: no need to count
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_KUSTOMIZATION_BYTES:
        raise KustomizationError(
            f"{source}: {size} bytes ({size / (1 << 20):.1f} MiB), larger than the "
            f"{MAX_KUSTOMIZATION_BYTES} bytes (1 MiB) a kustomization may be; it was not parsed. "
            "Keep the kustomization small: move large content to resources or generator files"
        )


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, SequenceNode):
        return node.value
    return []


def _check_aliases(root: Node, source: str) -> None:
    """Refuse aliases that refer to their own ancestor or expand to too many nodes.

    Counts, without expanding anything, how many nodes the document would have with every
    alias written out: one pass over the composed nodes (each node's expanded size is memoised
    by identity), so a 'billion laughs' document costs a few hundred steps, not 10⁹.
    """
    cap = 1 << 62  # sizes of a deliberately exponential document stay small integers
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            sizes[key] = min(cap, 1 + sum(sizes[id(child)] for child in _children(node)))
            continue
        if key in sizes:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                anchor = f" &{child.anchor}" if getattr(child, "anchor", None) else ""
                raise KustomizationError(
                    f"{source}: the node{anchor} at {_where(child.start_mark)} contains an alias to itself "
                    "(a recursive document); kustomize refuses it too — write the values out"
                )
            if id(child) not in sizes:
                stack.append((child, False))
    added = sizes[id(root)] - len(sizes)
    if added > MAX_ALIAS_EXPANSION:
        raise KustomizationError(
            f"{source}: uses YAML aliases that expand to more than {MAX_ALIAS_EXPANSION} nodes "
            f"({sizes[id(root)] if sizes[id(root)] < cap else 'astronomically many'} once expanded, from "
            f"{len(sizes)} written: a 'billion laughs' document); kustomize refuses it too — "
            "write the values out without anchors and aliases"
        )


#: Deeper flow collections (``[[[[...``) are refused while scanning: ruamel's scanner spends time
#: proportional to the depth on every token, so 10,000 levels would take minutes.
_MAX_FLOW_DEPTH = 64


class _Scanner(RoundTripScanner):
    """ruamel's round-trip scanner, refusing flow collections nested deeper than a kustomization's."""

    def fetch_flow_collection_start(self, TokenClass, to_push) -> None:  # noqa: N803 - ruamel's name
        if len(self.flow_context) >= _MAX_FLOW_DEPTH:
            raise ScannerError(
                None, None, f"flow collections ([...] or {{...}}) nested more than {_MAX_FLOW_DEPTH} deep",
                self.reader.get_mark(),
            )
        super().fetch_flow_collection_start(TokenClass, to_push)


def _compose_all(text: str) -> list[Node]:
    yaml = YAML(typ="rt")
    yaml.Scanner = _Scanner
    return list(yaml.compose_all(text))


def _parse(text: str, source: str, *, check_size: bool = True) -> _Doc:
    if not isinstance(text, str):
        raise TypeError("text must be str")
    if check_size:
        _check_size(text, source)
    try:
        docs = _compose_all(text)
    except YAMLError as exc:
        raise _yaml_error(exc, source) from None
    except RecursionError:
        raise KustomizationError(
            f"{source}: the YAML is nested too deeply to read; a kustomization is a few levels deep, "
            "flatten it"
        ) from None
    if len(docs) > 1:
        raise KustomizationError(
            f"{source}: {len(docs)} YAML documents (separated by '---'); a kustomization is one document, "
            "move the others to their own files"
        )
    root = docs[0] if docs else None
    if isinstance(root, ScalarNode) and root.tag == _NULL_TAG:
        root = None
    if root is not None and not isinstance(root, MappingNode):
        raise KustomizationError(
            f"{source}: the top level is a {type(root).__name__.replace('Node', '').lower()}, not a mapping; "
            "a kustomization is a mapping (apiVersion, kind, resources, images, ...)"
        )
    doc = _Doc(text, source, root, None, None, None, [])
    if root is None:
        return doc
    _check_aliases(root, source)
    _check_duplicate_keys(root, source)
    for key, value in root.value:
        if isinstance(key, ScalarNode) and key.value == "images":
            doc.images_key = key
            if isinstance(value, ScalarNode) and value.tag == _NULL_TAG:
                doc.images_null = value
            elif isinstance(value, SequenceNode):
                doc.images = value
            else:
                raise KustomizationError(
                    f"{source}: images: at {_where(value.start_mark)} is not a list; "
                    "write it as a list of entries (- name: ...)"
                )
    if doc.images is None:
        return doc
    for index, item in enumerate(doc.images.value):
        where = f"images[{index}] at {_where(item.start_mark)}"
        if not isinstance(item, MappingNode):
            raise KustomizationError(f"{source}: {where} is not a mapping; an entry is name/newName/newTag/digest")
        keys: dict[str, tuple[ScalarNode, ScalarNode]] = {}
        for key, value in item.value:
            if not isinstance(key, ScalarNode) or key.value == "<<":
                raise KustomizationError(
                    f"{source}: {where} uses a merge key or complex key; write the entry out in full"
                )
            if not isinstance(value, ScalarNode):
                raise KustomizationError(
                    f"{source}: {where}: {key.value} must be a single value, not a list or mapping"
                )
            keys[key.value] = (key, value)
        if "name" not in keys or keys["name"][1].tag == _NULL_TAG:
            raise KustomizationError(f"{source}: {where} has no name; every images entry needs one")
        doc.entries.append(_Entry(index, item, keys))
    return doc


def _find(doc: _Doc, name: str) -> _Entry | None:
    for field in ("name", "newName"):
        hits: list[_Entry] = []
        for e in doc.entries:  # an aliased entry (`- *x`) is the same node twice: count it once
            if e.value(field) == name and all(h.node is not e.node for h in hits):
                hits.append(e)
        if len(hits) > 1:
            lines = ", ".join(str(e.node.start_mark.line + 1) for e in hits)
            raise KustomizationError(
                f"{doc.source}: image {name!r} is the {field} of {len(hits)} images entries "
                f"(lines {lines}); keep one"
            )
        if hits:
            return hits[0]
    return None


# --------------------------------------------------------------------------------------------
# Reading


def read_images(text: str, *, source: str = "kustomization.yaml") -> list[ImagesEntry]:
    """Return the ``images`` entries of a kustomization, in file order (values as written).

    Raises:
        KustomizationError: invalid YAML, several documents, duplicate keys, malformed entries.
    """
    return [entry.to_model() for entry in _parse(text, source).entries]


def get_image(text: str, name: str, *, source: str = "kustomization.yaml") -> ImagesEntry | None:
    """Return the entry whose ``name`` (else whose ``newName``) is ``name``, or None."""
    entry = _find(_parse(text, source), name)
    return entry.to_model() if entry else None


# --------------------------------------------------------------------------------------------
# Formatting scalars


def _is_plain_safe(value: str, flow: bool) -> bool:
    """Whether ``value`` written plain reads back as this very string in YAML 1.1 and 1.2."""
    if not value or value != value.strip() or value[0] in "-?:,[]{}#&*!|>'\"%@`":
        return False
    if ": " in value or " #" in value or value.endswith(":") or _LINE_BREAK.search(value):
        return False
    if flow and any(c in value for c in ",[]{}"):
        return False
    return all(str(r.resolve(ScalarNode, value, (True, False))) == _STR_TAG for r in _RESOLVERS)


def _format(value: str, style: str | None, flow: bool) -> str:
    """Write ``value`` in ``style`` (None = plain, ``'`` or ``"``) if valid, else double-quoted."""
    if style == "'":
        return "'" + value.replace("'", "''") + "'"
    if style is None and _is_plain_safe(value, flow):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --------------------------------------------------------------------------------------------
# Splicing


class _Splicer:
    """Collects (start, end, replacement) edits on the original text and applies them at once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.edits: list[tuple[int, int, int, str]] = []  # start, end, sequence, text

    def replace(self, start: int, end: int, new: str) -> None:
        self.edits.append((start, end, len(self.edits), new))

    def insert(self, at: int, new: str) -> None:
        self.replace(at, at, new)

    def apply(self) -> str:
        edits = sorted(self.edits)
        for (_, e1, _, _), (s2, _, _, _) in zip(edits, edits[1:]):
            if s2 < e1:
                raise KustomizationError("internal error: overlapping edits; this is a bug, please report it")
        out, pos = [], 0
        for start, end, _, new in edits:
            out.append(self.text[pos:start])
            out.append(new)
            pos = end
        out.append(self.text[pos:])
        return "".join(out)


def _line_start(text: str, pos: int) -> int:
    start = pos
    while start > 0 and text[start - 1] not in "\n\r\x85\u2028\u2029":
        start -= 1
    return start


def _line_content_end(text: str, pos: int) -> int:
    """Index of the line break ending the line that holds ``pos`` (or len(text))."""
    m = _LINE_BREAK.search(text, pos)
    return m.start() if m else len(text)


def _line_full_end(text: str, pos: int) -> int:
    """Index just after the line break ending the line that holds ``pos``."""
    m = _LINE_BREAK.search(text, pos)
    return m.end() if m else len(text)


def _eol(text: str, near: int = 0) -> str:
    m = _LINE_BREAK.search(text, near) or _LINE_BREAK.search(text)
    return m.group(0) if m else "\n"


def _colon_after(text: str, key: ScalarNode) -> int:
    """Index just after the ``:`` that follows a key."""
    i = key.end_mark.index
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text) or text[i] != ":":
        raise KustomizationError(
            f"unsupported key syntax at {_where(key.start_mark)}; write 'key: value' on one line"
        )
    return i + 1


def _value_end(text: str, key: ScalarNode, value: ScalarNode) -> int:
    """End index of a value; for an empty (null) value, just after the key's colon."""
    if value.start_mark.index == value.end_mark.index:
        return _colon_after(text, key)
    return value.end_mark.index


def _entry_last_end(text: str, entry: _Entry, fields) -> int:
    return max(_value_end(text, *entry.keys[f]) for f in fields)


def _refuse_edit(doc: _Doc, entry: _Entry, what: str) -> None:
    """Anchored nodes may be aliased elsewhere: editing them would change more than meant."""
    _refuse_anchor(doc.images, "images:", doc.source)
    _refuse_anchor(entry.node, what, doc.source)


def _set_value(sp: _Splicer, doc: _Doc, entry: _Entry, field: str, value: str) -> bool:
    key, node = entry.keys[field]
    if node.tag == _STR_TAG and node.value == value:
        return False
    _refuse_anchor(node, f"{field} of image {entry.value('name')!r}", doc.source)
    if node.style in ("|", ">"):
        raise KustomizationError(
            f"{doc.source}: {field} of image {entry.value('name')!r} at {_where(node.start_mark)} is a block "
            "scalar (| or >); write it on one line as 'field: value'"
        )
    if node.start_mark.index == node.end_mark.index:  # `newTag:` with nothing after it
        sp.insert(_colon_after(doc.text, key), " " + _format(value, None, entry.flow))
    else:
        sp.replace(node.start_mark.index, node.end_mark.index, _format(value, node.style, entry.flow))
    return True


def _remove_key(sp: _Splicer, doc: _Doc, entry: _Entry, field: str) -> None:
    text = doc.text
    key, node = entry.keys[field]
    _refuse_anchor(node, f"{field} of image {entry.value('name')!r}", doc.source)
    order = [k.value for k, _ in entry.node.value]
    i = order.index(field)
    end = _value_end(text, key, node)
    if entry.flow:
        if i > 0:  # drop ", field: value" after the previous value
            prev_key, prev_node = entry.keys[order[i - 1]]
            sp.replace(_value_end(text, prev_key, prev_node), end, "")
        else:  # first key: drop "field: value, " up to the next key
            sp.replace(key.start_mark.index, entry.keys[order[1]][0].start_mark.index, "")
        return
    line_start = _line_start(text, key.start_mark.index)
    before = text[line_start : key.start_mark.index]
    if before.strip() == "":  # the key starts its line: delete whole lines
        sp.replace(line_start, _line_full_end(text, end), "")
    elif i == 0 and before.strip() == "-":  # `- field: value` on the dash line: pull the next key up
        next_start = entry.keys[order[1]][0].start_mark.index
        between_start = _line_full_end(text, end)
        between_end = _line_start(text, next_start)
        if between_start < between_end:  # comment/blank lines before the next key: keep them, above
            sp.insert(line_start, text[between_start:between_end])
        sp.replace(key.start_mark.index, next_start, "")
    else:
        raise KustomizationError(
            f"{doc.source}: cannot remove {field} at {_where(key.start_mark)}: unexpected layout; "
            "put each key of the images entry on its own line"
        )


def _insert_keys(sp: _Splicer, doc: _Doc, entry: _Entry, pairs: list[tuple[str, str]], keep: list[str]) -> None:
    if not pairs:
        return
    text = doc.text
    last = _entry_last_end(text, entry, keep)
    if entry.flow:
        sp.insert(last, "".join(f", {k}: {_format(v, None, True)}" for k, v in pairs))
        return
    at = _line_content_end(text, last)
    eol = _eol(text, last)
    indent = " " * entry.node.start_mark.column
    sp.insert(at, "".join(f"{eol}{indent}{k}: {_format(v, None, False)}" for k, v in pairs))


# --------------------------------------------------------------------------------------------
# Adding an entry


def _sequence_style(doc: _Doc) -> tuple[int, int]:
    """(indent of '-' relative to the parent key, key offset after '-') used by the file."""
    if doc.root is not None:
        for key, value in doc.root.value:
            if isinstance(value, SequenceNode) and not value.flow_style and value.value:
                dash = value.start_mark.column - key.start_mark.column
                first = value.value[0]
                offset = 2
                if isinstance(first, MappingNode) and not first.flow_style:
                    offset = first.start_mark.column - value.start_mark.column
                return max(dash, 0), max(offset, 2)
    return 0, 2  # what `kustomize edit set image` writes


def _block_entry(pairs: list[tuple[str, str]], dash_col: int, offset: int, eol: str) -> str:
    lines = []
    for i, (k, v) in enumerate(pairs):
        lead = " " * dash_col + "-" + " " * (offset - 1) if i == 0 else " " * (dash_col + offset)
        lines.append(f"{lead}{k}: {_format(v, None, False)}")
    return eol.join(lines)


def _add_entry(sp: _Splicer, doc: _Doc, pairs: list[tuple[str, str]]) -> None:
    text = doc.text
    src = doc.source
    flow_entry = "{" + ", ".join(f"{k}: {_format(v, None, True)}" for k, v in pairs) + "}"
    if doc.root is not None and doc.root.flow_style:
        raise KustomizationError(f"{src}: the kustomization is one flow mapping ({{...}}); write it in block style to add images")
    if doc.images is not None:
        seq = doc.images
        _refuse_anchor(seq, "images:", src)
        if seq.flow_style:
            if seq.value:
                last = seq.value[-1]
                sp.insert(last.end_mark.index, ", " + flow_entry)
            else:
                close = seq.end_mark.index - 1
                if text[close] != "]":  # pragma: no cover - ruamel marks end after ']'
                    raise KustomizationError(f"{src}: cannot find the end of images: [...]")
                sp.insert(close, flow_entry)
            return
        last_entry = doc.entries[-1]
        last_end = _entry_last_end(text, last_entry, list(last_entry.keys))
        eol = _eol(text, last_end)
        dash_col = seq.start_mark.column
        if last_entry.flow:
            new = " " * dash_col + "- " + flow_entry
        else:
            offset = max(last_entry.node.start_mark.column - _dash_column(text, last_entry.node), 2)
            new = _block_entry(pairs, dash_col, offset, eol)
        sp.insert(_line_content_end(text, last_end), eol + new)
        return
    dash, offset = _sequence_style(doc)
    if doc.images_key is not None:  # `images:` with no value (or ~ / null)
        key = doc.images_key
        col = key.start_mark.column
        colon = _colon_after(text, key)
        null = doc.images_null
        if null is not None and null.end_mark.index > null.start_mark.index:
            _refuse_anchor(null, "images:", src)
            sp.replace(colon, null.end_mark.index, "")
        eol = _eol(text, colon)
        sp.insert(_line_content_end(text, colon), eol + _block_entry(pairs, col + dash, offset, eol))
        return
    eol = _eol(text)
    col = doc.root.start_mark.column if doc.root is not None else 0
    end_marker = re.search(r"(?m)^\.\.\.[ \t]*(#.*)?$", text)
    if end_marker:  # appending after `...` would start a second document
        line = len(_LINE_BREAK.findall(text, 0, end_marker.start())) + 1
        raise KustomizationError(
            f"{src}: the document ends with '...' at line {line}; remove that line or add images: by hand"
        )
    prefix = "" if not text or _LINE_BREAK.search(text[-1]) or text == "\ufeff" else eol
    block = " " * col + "images:" + eol + _block_entry(pairs, col + dash, offset, eol) + eol
    sp.insert(len(text), prefix + block)


def _dash_column(text: str, entry_node: MappingNode) -> int:
    """Column of the '-' that introduces a block entry (searching back on its line)."""
    i = entry_node.start_mark.index - 1
    col = entry_node.start_mark.column - 1
    while i >= 0 and text[i] == " ":
        i -= 1
        col -= 1
    return col if i >= 0 and text[i] == "-" else entry_node.start_mark.column - 2


# --------------------------------------------------------------------------------------------
# Editing


def set_image(
    text: str,
    name: str,
    *,
    new_name: str | None = None,
    tag: str | None = None,
    digest: str | None = None,
    add: bool = False,
    source: str = "kustomization.yaml",
) -> str:
    """Set ``newName``/``newTag``/``digest`` of the images entry ``name``; return the new text.

    Only the lines that must change are touched. A tag alone removes ``digest``; a digest alone
    removes ``newTag``. Nothing to change returns ``text`` itself.

    Args:
        text: the kustomization, as read (BOM and CRLF kept).
        name: the entry's ``name``, or else its ``newName``.
        new_name: the ``newName`` to set.
        tag: the ``newTag`` to set.
        digest: the ``digest`` to set (``sha256:`` + 64 hex).
        add: append a new entry (creating ``images:`` if absent) when ``name`` is not found.
        source: how to name the file in messages.

    Raises:
        ConfigError: an invalid tag, digest or name, or nothing to set.
        ImageNotFoundError: ``name`` is not in ``images`` and ``add`` is false (``.found``
            lists the names that are).
        KustomizationError: the file cannot be parsed or edited safely.
    """
    if not name or not isinstance(name, str):
        raise ConfigError("image name must be a non-empty string")
    if tag is None and digest is None and new_name is None:
        raise ConfigError(f"nothing to set for image {name!r}: give a tag, a digest or a new name")
    if tag is not None:
        validate_tag(tag)
    if digest is not None:
        validate_digest(digest)
    if new_name is not None:
        validate_image_name(new_name, "new name")

    doc = _parse(text, source)
    entry = _find(doc, name)
    sp = _Splicer(text)
    desired: dict[str, str | None] = {}
    if new_name is not None:
        desired["newName"] = new_name
    if tag is not None:
        desired["newTag"] = tag
        if digest is None:
            desired["digest"] = None
    if digest is not None:
        desired["digest"] = digest
        if tag is None:
            desired["newTag"] = None

    if entry is None:
        if not add:
            found = [e.value("name") for e in doc.entries]
            listed = f"found: {', '.join(found)}" if found else "it has no images entries"
            raise ImageNotFoundError(f"image {name!r} not in {source} ({listed}); add it under images:", found=found)
        validate_image_name(name)
        pairs = [("name", name)] + [(f, desired[f]) for f in _FIELDS[1:] if desired.get(f) is not None]
        _add_entry(sp, doc, pairs)
        result = sp.apply()
        _verify(doc, result, None, dict(pairs))
        return result

    what = f"images entry {entry.value('name')!r}"
    to_insert: list[tuple[str, str]] = []
    removed: list[str] = []
    for field in _FIELDS[1:]:
        if field not in desired:
            continue
        want = desired[field]
        if want is None:
            if field in entry.keys:
                _refuse_edit(doc, entry, what)
                _remove_key(sp, doc, entry, field)
                removed.append(field)
        elif field in entry.keys:
            if entry.keys[field][1].tag != _STR_TAG or entry.keys[field][1].value != want:
                _refuse_edit(doc, entry, what)
            _set_value(sp, doc, entry, field, want)
        else:
            _refuse_edit(doc, entry, what)
            to_insert.append((field, want))
    keep = [k for k in entry.keys if k not in removed]
    _insert_keys(sp, doc, entry, to_insert, keep)
    if not sp.edits:
        return text
    result = sp.apply()
    _verify(doc, result, entry.index, desired)
    return result


# --------------------------------------------------------------------------------------------
# Verifying


def _plain(text: str):
    return YAML(typ="safe", pure=True).load(text)


def _verify(before: _Doc, result: str, index: int | None, desired: dict[str, str | None]) -> None:
    """Prove that ``result`` says exactly what was meant, else raise (never return a wrong file)."""
    try:
        # No size check: the edit may push a file just under the limit a few bytes over it.
        _parse(result, before.source, check_size=False)
        old = _plain(before.text)
        new = _plain(result)
    except (YAMLError, KustomizationError, RecursionError) as exc:
        raise KustomizationError(
            f"{before.source}: the edit produced invalid YAML ({exc}); the file was not changed. "
            "This is a bug, please report it with the file"
        ) from None
    want = copy.deepcopy(old) if old is not None else {}
    if index is None:
        if want.get("images") is None:
            want["images"] = []
        want["images"].append(dict(desired))
    else:
        item = want["images"][index]
        for field, value in desired.items():
            if value is None:
                item.pop(field, None)
            else:
                item[field] = value
    if new != want:
        raise KustomizationError(
            f"{before.source}: the edit did not read back as intended; the file was not changed. "
            "This is a bug, please report it with the file"
        )

"""Read and edit the ``images:`` of a kustomization without disturbing anything else.

Pure functions over text (no I/O except :func:`find_kustomization`, which only looks at names in
a directory). :func:`set_image` changes only the lines that must change: it parses the document
with libyaml (PyYAML's C binding, one pass over its events) for *positions* — where the ``images``
entry, its keys and values start and end — and splices the original text at those places: a
value's span is replaced, a new key line is inserted after the entry's last key line with the
entry's own key indentation, a removed key's line(s) are deleted. Comments, blank lines,
indentation style, key order, quoting, ``---`` markers, a BOM and CRLF endings are never
rewritten, and long digests are never wrapped, because nothing is re-dumped. The result is then
parsed again and compared with what was meant (:func:`_verify`); if it differs,
:class:`KustomizationError` is raised rather than returning a wrong file. When nothing must
change, the input string itself is returned. Everything is linear in the size of the file:
``python -m bench.hostile`` times a 1 MiB kustomization.

Hostile input: every entry point (:func:`read_images`, :func:`get_image`, :func:`set_image`)
parses through one function, which refuses a text over :data:`MAX_KUSTOMIZATION_BYTES` (1 MiB)
before parsing it, and — counting while it reads, without expanding anything — aliases that refer
to themselves or add more than :data:`MAX_ALIAS_EXPANSION` nodes once expanded (a "billion laughs"
document), collections nested deeper than 64, and duplicate keys. :func:`set_image` also refuses
a tag YAML does not define (``!Ref``, ``!!python/…``): kustomize ignores such tags, so what the
file means to it is not what it says.

Semantics. kustomize's image transformer (``api/filters/imagetag``) matches each ``images``
entry's ``name`` against the image references in the resources — the name, then an optional
``:tag`` and ``@digest`` (``api/internal/image/image.go``, ``IsImageMatched``) — and never looks
at ``newName`` to find an entry; ``kustomize edit set image`` (``kustomize/commands/edit/set/
setimage.go``) likewise finds the entry to change by ``name``. :func:`set_image` and
:func:`get_image` match ``name``, and — ``by_new_name``, the default, for the pipeline, whose rule
default ``imageName`` is "the entry whose name or newName is the pushed repository" — else
``newName``; ``imagebump set-image`` matches ``name`` only, as kustomize does. Setting a tag
alone removes ``digest`` (a digest overrides the tag); setting a digest alone removes ``newTag``;
both may be set together; ``*`` (:data:`KEEP`) keeps a part as the file has it, as in kustomize's
``NAME=*:TAG``. A scalar YAML 1.1 or 1.2 would read as something other than a string (``1.10``,
``1e3``, ``true``, ``yes``, ``null``, ``0x1F``, ``010``, ``~``) is quoted.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from ruamel.yaml.resolver import VersionedResolver
from yaml import events as _ev

from steps.errors import ConfigError, ImageNotFoundError, KustomizationError
from steps.events import validate_digest, validate_tag
from steps.models import ImagesEntry

__all__ = [
    "KEEP",
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

#: An image name as kustomize and container runtimes take it: ``[host[:port]/]path``.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?::[0-9]+)?(?:/[A-Za-z0-9._-]+)*")

_FIELDS = ("name", "newName", "newTag", "digest")
#: kustomize's "keep this part" in ``NAME=*:TAG``, ``NAME=NEWNAME:*``, ``NAME:TAG@*`` (setimage.go).
KEEP = "*"
#: YAML's line breaks, exactly as libyaml's scanner counts them (YAML 1.1: NEL, LS and PS too).
_LINE_BREAK = re.compile(r"\r\n|\r|\n|\x85|\u2028|\u2029")
_RESOLVERS = (VersionedResolver(version=(1, 1)), VersionedResolver(version=(1, 2)))
#: ruamel's implicit-resolver tables for YAML 1.1 and 1.2 ({first character: [(tag, regexp)]}), read
#: once: its ``resolve`` looks the YAML version up through exceptions on every call (~10 µs).
_IMPLICIT = tuple(r.versioned_resolver for r in _RESOLVERS)
_STR_TAG = "tag:yaml.org,2002:str"
_NULL_TAG = "tag:yaml.org,2002:null"


def _resolve(value: str, version: int = 1) -> str:
    """The tag YAML 1.1 (``version=0``) or 1.2 (``1``) gives the plain scalar ``value`` (ruamel's rules)."""
    for tag, regexp in _IMPLICIT[version].get(value[:1], ()):
        if regexp.match(value):
            return tag
    return _STR_TAG


# --------------------------------------------------------------------------------------------
# Image specs (kustomize's `edit set image` syntax)


@dataclass(frozen=True)
class ImageSpec:
    """One ``NAME[=NEWNAME][:TAG][@DIGEST]`` as ``kustomize edit set image`` takes it (``*``: keep)."""

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
    digest belong to the new name's side (``api=reg/api:1.2``), as in kustomize. ``*`` as the new
    name, the tag or the digest (``api=*:1.2``, ``api=reg/api:*``, ``api:1.2@*``) keeps what the
    file has there: "Passing * (asterisk) either as the new name, the new tag, or the digest will
    preserve the appropriate values from the kustomization file" (``kustomize edit set image
    --help``; kubernetes-sigs/kustomize ``kustomize/commands/edit/set/setimage.go``).

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
        if new_name != KEEP:
            validate_image_name(new_name, "new name")
    else:
        name, tag, digest = _split_reference(spec)
    if not name:
        raise ConfigError(f"image spec {spec!r} has no NAME; expected NAME[=NEWNAME][:TAG][@DIGEST]")
    if name == KEEP:
        raise ConfigError(
            f"image spec {spec!r}: NAME cannot be '*' ('*' keeps the new name, tag or digest the file has)"
        )
    validate_image_name(name)
    if tag is not None and tag != KEEP:
        validate_tag(tag, error=ConfigError)
    if digest is not None and digest != KEEP:
        validate_digest(digest, error=ConfigError)
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
        raise KustomizationError(
            f"{directory}: not a directory; pass an overlay directory or its kustomization file"
        )
    found = [directory / name for name in KUSTOMIZATION_FILES if (directory / name).is_file()]
    # On a case-insensitive filesystem "Kustomization" and "kustomization.yaml" differ anyway.
    if not found:
        raise KustomizationError(
            f"no kustomization in {directory}: expected one of {', '.join(KUSTOMIZATION_FILES)}"
        )
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise KustomizationError(
            f"ambiguous: found multiple kustomization files in {directory}: {names}; keep one"
        )
    return found[0]


# --------------------------------------------------------------------------------------------
# Parsing for positions
#
# libyaml (PyYAML's C binding) turns the text into events — scalars with their quoting style,
# collection starts and ends, aliases — each with its position; one pass over them builds light
# nodes (no Python object per character, no recursion), checks duplicate keys and alias expansion,
# and optionally records each event's meaning so that the result of an edit can be compared with
# the original event by event (:func:`_verify`). ruamel's pure-Python round-trip composer did the
# same work about forty times slower: a 1 MiB kustomization took ~15 s per parse, four parses an edit.


class _Mark:
    """A position in the text: ``index`` (characters), ``line`` and ``column`` (0-based)."""

    __slots__ = ("column", "index", "line")

    def __init__(self, index: int, line: int = 0, column: int = 0) -> None:
        self.index, self.line, self.column = index, line, column


class _Node:
    """A node: a thin wrapper around libyaml's event for it (positions read on demand)."""

    __slots__ = ("event", "offset")

    def __init__(self, event, offset: int) -> None:
        self.event = event
        self.offset = offset

    @property
    def anchor(self) -> str | None:
        return self.event.anchor

    @property
    def explicit_tag(self) -> str | None:
        return self.event.tag

    @property
    def start(self) -> int:
        return self.event.start_mark.index + self.offset

    @property
    def line(self) -> int:
        return self.event.start_mark.line

    @property
    def column(self) -> int:
        return self.event.start_mark.column

    @property
    def start_mark(self) -> _Mark:
        mark = self.event.start_mark
        return _Mark(mark.index + self.offset, mark.line, mark.column)

    @property
    def end_mark(self) -> _Mark:
        return _Mark(self.end)

    @property
    def end(self) -> int:
        return self.event.end_mark.index + self.offset


class _Scalar(_Node):
    """A scalar. Collections hold scalars as bare events; :func:`_node` wraps one where it is used."""

    __slots__ = ()

    @property
    def value(self) -> str:
        return self.event.value

    @property
    def style(self) -> str | None:
        """None (plain; libyaml says ""), "'", '"', "|" or ">"."""
        return self.event.style or None

    @property
    def tag(self) -> str:
        """The resolved tag: an explicit one, str for quoted scalars, YAML 1.2's reading of plain ones."""
        return _scalar_tag(self.event)


def _scalar_tag(event) -> str:
    explicit = event.tag
    if explicit is not None and explicit != "!":
        return explicit
    if explicit == "!" or not event.implicit[0]:
        return _STR_TAG
    return _resolve(event.value)


def _is_null(event) -> bool:
    """Whether a scalar event reads as null (fast path of ``_scalar_tag(event) == _NULL_TAG``)."""
    if event.tag is None and event.implicit[0]:
        return event.value in ("", "~", "null", "Null", "NULL")
    return event.tag == _NULL_TAG


class _Collection(_Node):
    """A mapping (``value``: [(key, value)]) or sequence (``value``: [item]) of nodes and scalar events.

    ``first`` and ``last`` are the indices of its start and end events in the document's events.
    """

    __slots__ = ("end", "first", "flow_style", "last", "size", "value")

    def __init__(self, event, offset: int, first: int) -> None:
        self.event = event
        self.offset = offset
        self.value: list = []
        self.size = 1  # nodes once every alias inside is written out
        self.first = first
        self.last = first
        self.flow_style = bool(event.flow_style)


class _Mapping(_Collection):
    __slots__ = ()


class _Sequence(_Collection):
    __slots__ = ()


def _node(item, offset: int) -> _Node:
    """``item`` (a collection node, or a scalar's bare event) as a node."""
    return item if isinstance(item, _Collection) else _Scalar(item, offset)


def _where(mark) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _yaml_error(exc: Exception, source: str) -> KustomizationError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc).splitlines()[0]
    at = f" at {_where(mark)}" if mark is not None else ""
    problem = " ".join(str(problem).split())
    if "nesting depth" in problem:  # libyaml's own limit (1000 levels), met while scanning ahead
        return _too_deep(source, at)
    hint = "fix the YAML (kubectl kustomize rejects it too)"
    if "\\t" in problem or "\t" in problem or "tab" in problem:
        hint = "indent with spaces; YAML does not allow tabs for indentation"
    return KustomizationError(f"{source}: invalid YAML{at}: {problem}; {hint}")


def _too_deep(source: str, at: str) -> KustomizationError:
    return KustomizationError(
        f"{source}: the YAML is nested too deeply to read (collections nested more than {_MAX_DEPTH} deep{at}); "
        "a kustomization is a few levels deep: flatten it"
    )


def _refuse_anchor(node: _Node, what: str, source: str) -> None:
    if node.anchor:
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


#: Collections nested deeper than this are refused: a kustomization is a few levels deep, and a
#: document of 100,000 '[' must not cost anything.
_MAX_DEPTH = 64
#: The tags a kustomization may carry: YAML's own (``!!str``, ``!!int``, ...) and ``!`` (a string).
_KNOWN_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "binary", "merge")
) | {"!"}

#: PyYAML's C binding to libyaml, when PyYAML was built with it (its wheels are). Without it the
#: pure-Python parser gives the same events, slower.
try:
    from yaml._yaml import CParser as _CParser
except ImportError:  # pragma: no cover - PyYAML without libyaml
    _CParser = None


def _events(text: str):
    """(events of ``text``, the offset to add to their indices).

    libyaml does not count a leading BOM in its indices; the pure parser does.
    """
    if _CParser is not None:
        return _CParser(text).get_event, 1 if text.startswith("\ufeff") else 0
    from yaml import SafeLoader  # pragma: no cover - PyYAML without libyaml

    return SafeLoader(text).get_event, 0  # pragma: no cover


def _same(a, b) -> bool:
    """Whether two events mean the same (type, anchor, tag, quoting, value), positions and styles aside."""
    kind = a.__class__
    if kind is not b.__class__:
        return False
    if kind is _ev.ScalarEvent:
        return a.value == b.value and a.implicit == b.implicit and a.tag == b.tag and a.anchor == b.anchor
    if kind is _ev.MappingStartEvent or kind is _ev.SequenceStartEvent:
        return a.anchor == b.anchor and a.tag == b.tag
    if kind is _ev.AliasEvent:
        return a.anchor == b.anchor
    return True


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector while a document is held.

    A 1 MiB document is ~500,000 small objects (libyaml's events and their marks, none in a
    cycle): each automatic collection would walk them all again, and a full one triggered as the
    collector resumes would too — so callers drop the document before leaving this block, and
    reference counting frees it.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _Entry:
    """One ``images`` entry: its index, mapping node, and (built when used) its keys as nodes."""

    __slots__ = ("_keys", "aliased", "index", "name", "new_name", "node", "offset")

    def __init__(
        self,
        index: int,
        node: _Mapping,
        offset: int,
        name: str | None,
        new_name: str | None,
        aliased: tuple[str, str] | None = None,
    ) -> None:
        self.index, self.node, self.offset = index, node, offset
        self.name, self.new_name = name, new_name
        self.aliased = aliased  # (field, anchor) of a value written as an alias, if any
        self._keys: dict[str, tuple[_Scalar, _Scalar]] | None = None

    @property
    def keys(self) -> dict[str, tuple[_Scalar, _Scalar]]:
        """field -> (key node, value node), in file order."""
        if self._keys is None:
            self._keys = {
                k.value: (_Scalar(k, self.offset), _Scalar(v, self.offset)) for k, v in self.node.value
            }
        return self._keys

    @property
    def flow(self) -> bool:
        return self.node.flow_style

    def value(self, field: str) -> str | None:
        if field == "name":
            return self.name
        if field == "newName":
            return self.new_name
        pair = self.keys.get(field)
        if pair is None or _is_null(pair[1].event):
            return None
        return pair[1].value

    def to_model(self) -> ImagesEntry:
        data = {key: self.value(key) for key in self.keys}
        return ImagesEntry(**data)


@dataclass
class _Doc:
    text: str
    source: str
    root: _Mapping | None
    images_key: _Scalar | None
    images: _Sequence | None  # None when absent or null
    images_null: _Scalar | None  # the value node of `images:` when it is null
    entries: list[_Entry]
    #: Filled when parsed for an edit: every event of the document.
    events: list | None = None
    unknown_tag: tuple[str, _Node] | None = None
    null_root: _Scalar | None = None  # the document's null, when it is one (`---` alone)
    #: Indices of scalar events that hold the root (a null document) or the value of `images:`.
    scalar_index: dict[int, int] | None = None  # id(event) -> index, for those few


def _compose(text: str, source: str, *, record: bool):
    """One pass over the events: (root node or scalar event or None, events or None, indices, unknown tag).

    Refuses (KustomizationError) several documents, collections nested over :data:`_MAX_DEPTH`,
    a key written twice in one mapping, undefined and self-referencing aliases, and aliases that
    expand to more than :data:`MAX_ALIAS_EXPANSION` extra nodes — counting, never expanding.
    With ``record``, also returns every event, to compare an edit's result with (:func:`_verify`).
    Scalars stay bare events (most nodes are scalars; a wrapper each would double the cost).
    """
    get, offset = _events(text)
    events: list | None = [] if record else None
    anchors: dict[str, object] = {}
    # An open collection: [node, pending key (mappings), keys seen (mappings)]
    stack: list[list] = []
    roots: list = []
    scalar_index: dict[int, int] = {}  # the root's and its direct values' scalars -> event index
    documents = written = 0
    unknown: tuple[str, _Node] | None = None
    cap = 1 << 62
    count = -1
    known = _KNOWN_TAGS
    scalar_event, map_start, seq_start = _ev.ScalarEvent, _ev.MappingStartEvent, _ev.SequenceStartEvent
    map_end, seq_end, alias_event = _ev.MappingEndEvent, _ev.SequenceEndEvent, _ev.AliasEvent
    mapping_class, sequence_class = _Mapping, _Sequence

    while True:
        event = get()
        count += 1
        if record:
            events.append(event)
        kind = event.__class__
        if kind is scalar_event:
            node = event
            size = 1
            written += 1
            if event.anchor is not None:
                anchors[event.anchor] = node
            if event.tag is not None and event.tag not in known and unknown is None:
                unknown = (event.tag, _Scalar(event, offset))
            if len(stack) <= 1:
                scalar_index[id(event)] = count
        elif kind is map_start or kind is seq_start:
            if len(stack) >= _MAX_DEPTH:
                raise _too_deep(source, f" at {_where(event.start_mark)}")
            node = (mapping_class if kind is map_start else sequence_class)(event, offset, count)
            written += 1
            if event.anchor is not None:
                anchors[event.anchor] = node
            if event.tag is not None and event.tag not in known and unknown is None:
                unknown = (event.tag, node)
            stack.append([node, None, {}])
            continue
        elif kind is map_end or kind is seq_end:
            node = stack.pop()[0]
            node.end = event.end_mark.index + offset
            node.last = count
            size = node.size
        elif kind is alias_event:
            node = anchors.get(event.anchor)
            if node is None:
                raise KustomizationError(
                    f"{source}: invalid YAML at {_where(event.start_mark)}: found undefined alias "
                    f"*{event.anchor}; define the anchor before using it"
                )
            if node.__class__ is scalar_event:
                size = 1
            else:
                if any(frame[0] is node for frame in stack):
                    raise KustomizationError(
                        f"{source}: the node &{event.anchor} at {_where(node.start_mark)} contains an alias "
                        "to itself (a recursive document); kustomize refuses it too — write the values out"
                    )
                size = node.size
        elif kind is _ev.DocumentStartEvent:
            documents += 1
            continue
        elif kind is _ev.StreamEndEvent:
            break
        else:
            continue
        # attach the node to its parent
        if not stack:
            roots.append(node)
            continue
        frame = stack[-1]
        parent = frame[0]
        size += parent.size
        parent.size = size if size < cap else cap  # noqa: FURB136 - min() costs a call per node
        if parent.__class__ is sequence_class:
            parent.value.append(node)
        elif frame[1] is None:
            frame[1] = node
            if node.__class__ is scalar_event:
                key = node.value
                if key != "<<":
                    first = frame[2].get(key)
                    if first is not None:
                        raise KustomizationError(
                            f"{source}: duplicate key {key!r} at {_where(node.start_mark)} "
                            f"(first at {_where(first.start_mark)}); remove one of them"
                        )
                    frame[2][key] = node
        else:
            parent.value.append((frame[1], node))
            frame[1] = None

    if documents > 1:
        raise KustomizationError(
            f"{source}: {documents} YAML documents (separated by '---'); a kustomization is one document, "
            "move the others to their own files"
        )
    root = roots[0] if roots else None
    root_size = 1 if root is None or root.__class__ is scalar_event else root.size
    if root_size - written > MAX_ALIAS_EXPANSION:
        raise KustomizationError(
            f"{source}: uses YAML aliases that expand to more than {MAX_ALIAS_EXPANSION} nodes "
            f"({root_size if root_size < cap else 'astronomically many'} once expanded, from "
            f"{written} written: a 'billion laughs' document); kustomize refuses it too — "
            "write the values out without anchors and aliases"
        )
    return root, events, scalar_index, unknown, offset


def _parse(text: str, source: str, *, check_size: bool = True, record: bool = False) -> _Doc:
    if not isinstance(text, str):
        raise TypeError("text must be str")
    if check_size:
        _check_size(text, source)
    try:
        root, events, scalar_index, unknown, offset = _compose(text, source, record=record)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source) from None
    scalar = _ev.ScalarEvent
    null_root = None
    if root is not None and root.__class__ is scalar:
        if not _is_null(root):
            raise KustomizationError(
                f"{source}: the top level is a scalar, not a mapping; "
                "a kustomization is a mapping (apiVersion, kind, resources, images, ...)"
            )
        root, null_root = None, _Scalar(root, offset)
    if root is not None and root.__class__ is not _Mapping:
        raise KustomizationError(
            f"{source}: the top level is a sequence, not a mapping; "
            "a kustomization is a mapping (apiVersion, kind, resources, images, ...)"
        )
    doc = _Doc(text, source, root, None, None, None, [], events, unknown, null_root, scalar_index)
    if root is None:
        return doc
    for key, value in root.value:
        if key.__class__ is scalar and key.value == "images":
            doc.images_key = _Scalar(key, offset)
            if value.__class__ is scalar and _is_null(value):
                doc.images_null = _Scalar(value, offset)
            elif value.__class__ is _Sequence:
                doc.images = value
            else:
                raise KustomizationError(
                    f"{source}: images: at {_where(_node(value, offset).start_mark)} is not a list; "
                    "write it as a list of entries (- name: ...)"
                )
    if doc.images is None:
        return doc
    entries = doc.entries
    for index, item in enumerate(doc.images.value):
        if item.__class__ is not _Mapping:
            where = f"images[{index}] at {_where(_node(item, offset).start_mark)}"
            raise KustomizationError(
                f"{source}: {where} is not a mapping; an entry is name/newName/newTag/digest"
            )
        name = new_name = aliased = None
        named = False
        for key, value in item.value:
            if key.__class__ is not scalar or key.value == "<<":
                raise KustomizationError(
                    f"{source}: images[{index}] at {_where(item.start_mark)} uses a merge key or complex key; "
                    "write the entry out in full"
                )
            if value.__class__ is not scalar:
                raise KustomizationError(
                    f"{source}: images[{index}] at {_where(item.start_mark)}: {key.value} must be a single "
                    "value, not a list or mapping"
                )
            field = key.value
            # an alias: the anchored value it stands for was written before this key (YAML defines
            # an anchor before any alias to it)
            if value.anchor is not None and aliased is None and value.start_mark.index < key.end_mark.index:
                aliased = (field, value.anchor)
            if field == "name":
                named = not _is_null(value)
                name = value.value if named else None
            elif field == "newName" and not _is_null(value):
                new_name = value.value
        if not named:
            raise KustomizationError(
                f"{source}: images[{index}] at {_where(item.start_mark)} has no name; every images entry needs one"
            )
        entries.append(_Entry(index, item, offset, name, new_name, aliased))
    return doc


def _find(doc: _Doc, name: str, *, by_new_name: bool = True) -> _Entry | None:
    """The entry whose ``name`` is ``name`` (kustomize's own match), else — ``by_new_name`` — whose ``newName`` is."""
    for field in ("name", "new_name") if by_new_name else ("name",):
        hits: list[_Entry] = []
        for e in doc.entries:  # an aliased entry (`- *x`) is the same node twice: count it once
            if getattr(e, field) == name and all(h.node is not e.node for h in hits):
                hits.append(e)
        if len(hits) > 1:
            lines = ", ".join(str(e.node.line + 1) for e in hits)
            shown = "newName" if field == "new_name" else field
            raise KustomizationError(
                f"{doc.source}: image {name!r} is the {shown} of {len(hits)} images entries "
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
    with _gc_paused():
        return [entry.to_model() for entry in _parse(text, source).entries]


def get_image(
    text: str, name: str, *, by_new_name: bool = True, source: str = "kustomization.yaml"
) -> ImagesEntry | None:
    """Return the entry whose ``name`` (else, ``by_new_name``, whose ``newName``) is ``name``, or None."""
    with _gc_paused():
        entry = _find(_parse(text, source), name, by_new_name=by_new_name)
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
    return _resolve(value, 0) == _STR_TAG and _resolve(value, 1) == _STR_TAG


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
        for (_, e1, _, _), (s2, _, _, _) in itertools.pairwise(edits):
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


def _colon_after(text: str, key: _Scalar) -> int:
    """Index just after the ``:`` that follows a key."""
    i = key.end_mark.index
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text) or text[i] != ":":
        raise KustomizationError(
            f"unsupported key syntax at {_where(key.start_mark)}; write 'key: value' on one line"
        )
    return i + 1


def _value_end(text: str, key: _Scalar, value: _Scalar) -> int:
    """End index of a value; for an empty (null) value, just after the key's colon."""
    if value.start_mark.index == value.end_mark.index:
        return _colon_after(text, key)
    end = value.end_mark.index
    if value.style in ("|", ">"):  # a block scalar ends where the next line starts: end at its last line
        while end > value.start_mark.index and text[end - 1] in "\r\n\x85\u2028\u2029":
            end -= 1
    return end


def _entry_last_end(text: str, entry: _Entry, fields) -> int:
    return max(_value_end(text, *entry.keys[f]) for f in fields)


def _refuse_edit(doc: _Doc, entry: _Entry, what: str) -> None:
    """Anchored nodes may be aliased elsewhere: editing them would change more than meant; and an
    entry whose value is an alias (``newTag: *t``) has no position of its own for it."""
    _refuse_anchor(doc.images, "images:", doc.source)
    _refuse_anchor(entry.node, what, doc.source)
    if entry.aliased is not None:
        field, anchor = entry.aliased
        raise KustomizationError(
            f"{doc.source}: {what} at {_where(entry.node.start_mark)} takes its {field} from the alias *{anchor}; "
            "write the value out to edit the entry"
        )


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


def _insert_keys(
    sp: _Splicer, doc: _Doc, entry: _Entry, pairs: list[tuple[str, str]], keep: list[str]
) -> None:
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
            if type(value) is _Sequence and not value.flow_style and value.value:
                dash = value.start_mark.column - key.start_mark.column
                first = value.value[0]
                offset = 2
                if type(first) is _Mapping and not first.flow_style:
                    offset = first.start_mark.column - value.start_mark.column
                return max(dash, 0), max(offset, 2)
    return 0, 2  # what `kustomize edit set image` writes


def _block_entry(pairs: list[tuple[str, str]], dash_col: int, offset: int, eol: str) -> str:
    lines = []
    for i, (k, v) in enumerate(pairs):
        lead = " " * dash_col + "-" + " " * (offset - 1) if i == 0 else " " * (dash_col + offset)
        lines.append(f"{lead}{k}: {_format(v, None, False)}")
    return eol.join(lines)


def _add_entry(sp: _Splicer, doc: _Doc, pairs: list[tuple[str, str]]) -> _Change:
    """Splice a new entry in (appending to ``images:``, or creating it); the change it makes to the events."""
    text = doc.text
    entry = ("mapping", None, [(k, ("str", v)) for k, v in pairs])
    src = doc.source
    flow_entry = "{" + ", ".join(f"{k}: {_format(v, None, True)}" for k, v in pairs) + "}"
    if doc.root is not None and doc.root.flow_style:
        raise KustomizationError(
            f"{src}: the kustomization is one flow mapping ({{...}}); write it in block style to add images"
        )
    if doc.images is not None:
        seq = doc.images
        _refuse_anchor(seq, "images:", src)
        if seq.flow_style:
            if seq.value:
                last = seq.value[-1]
                sp.insert(last.end_mark.index, ", " + flow_entry)
            else:
                close = seq.end_mark.index - 1
                if text[close] != "]":  # pragma: no cover - libyaml marks the end after ']'
                    raise KustomizationError(f"{src}: cannot find the end of images: [...]")
                sp.insert(close, flow_entry)
            return _Change(seq.last, 0, [entry])
        last_entry = doc.entries[-1]
        last_end = _entry_last_end(text, last_entry, list(last_entry.keys))
        eol = _eol(text, last_end)
        dash_col = seq.start_mark.column
        if last_entry.flow:
            new = " " * dash_col + "- " + flow_entry
        else:
            offset = max(last_entry.node.start_mark.column - _dash_column(text, last_entry.node), 2)
            new = _block_entry(pairs, dash_col, offset, eol)
        at = _line_content_end(text, last_end)
        sp.insert(at, eol + new)
        change = _Change(seq.last, 0, [entry])
        if _window_ready(doc):
            # the new lines (after a line break), and the one that ended the last entry's line
            end = _line_full_end(text, at)
            change.window = (at, end + len(eol) + len(new), at, end)
        return change
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
        return _Change(_event_index(doc, null), 1, [_SEQ_START, entry, _SEQ_END])
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
    images = [("event", _ev.ScalarEvent(None, None, (True, False), "images")), _SEQ_START, entry, _SEQ_END]
    if doc.root is not None:  # before the end of the top-level mapping
        return _Change(doc.root.last, 0, images)
    mapping = [_MAP_START, *images, _MAP_END]
    if doc.null_root is not None:  # an empty document (`---` alone, or `~`): its null becomes the mapping
        return _Change(_event_index(doc, doc.null_root), 1, mapping)
    return _Change(1, 0, [("event", _ev.DocumentStartEvent()), *mapping, ("event", _ev.DocumentEndEvent())])


def _event_index(doc: _Doc, node: _Scalar) -> int:
    assert doc.scalar_index is not None
    return doc.scalar_index[id(node.event)]


def _dash_column(text: str, entry_node: _Mapping) -> int:
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
    by_new_name: bool = True,
    source: str = "kustomization.yaml",
) -> str:
    """Set ``newName``/``newTag``/``digest`` of the images entry ``name``; return the new text.

    Only the lines that must change are touched. A tag alone removes ``digest``; a digest alone
    removes ``newTag``. :data:`KEEP` (``*``) for a part keeps what the file says, as in
    ``kustomize edit set image NAME=*:TAG`` (and counts as given: ``NAME:*`` keeps the tag and
    drops the digest, as kustomize does). Nothing to change returns ``text`` itself.

    Args:
        text: the kustomization, as read (BOM and CRLF kept).
        name: the entry's ``name`` (or, with ``by_new_name``, else its ``newName``).
        new_name: the ``newName`` to set, or ``*``.
        tag: the ``newTag`` to set, or ``*``.
        digest: the ``digest`` to set (``sha256:`` + 64 hex), or ``*``.
        add: append a new entry (creating ``images:`` if absent) when ``name`` is not found.
        by_new_name: also find the entry by ``newName`` when no ``name`` matches — the pipeline's
            default for a rule without ``imageName`` (the pushed repository URI is often the
            ``newName``). ``kustomize edit set image`` matches ``name`` only; ``imagebump
            set-image`` passes False.
        source: how to name the file in messages.

    Raises:
        ConfigError: an invalid tag, digest or name, or nothing to set.
        ImageNotFoundError: ``name`` is not in ``images`` and ``add`` is false (``.found``
            lists the names that are).
        KustomizationError: the file cannot be parsed or edited safely (an unknown YAML tag
            such as ``!Ref`` included).
    """
    with _gc_paused():  # the document's events are freed (by reference count) before it resumes
        return _set_image(text, name, new_name, tag, digest, add, by_new_name, source)


def _set_image(
    text: str,
    name: str,
    new_name: str | None,
    tag: str | None,
    digest: str | None,
    add: bool,
    by_new_name: bool,
    source: str,
) -> str:
    if not name or not isinstance(name, str):
        raise ConfigError("image name must be a non-empty string")
    if tag is None and digest is None and new_name is None:
        raise ConfigError(f"nothing to set for image {name!r}: give a tag, a digest or a new name")
    if tag is not None and tag != KEEP:
        validate_tag(tag, error=ConfigError)
    if digest is not None and digest != KEEP:
        validate_digest(digest, error=ConfigError)
    if new_name is not None and new_name != KEEP:
        validate_image_name(new_name, "new name")

    doc = _parse(text, source, record=True)
    if doc.unknown_tag is not None:
        tag_name, node = doc.unknown_tag
        shown = repr(tag_name) if len(tag_name) <= 80 else repr(tag_name[:77] + "...")
        raise KustomizationError(
            f"{source}: unknown YAML tag {shown} at {_where(node.start_mark)}; set-image edits only plain YAML "
            "(kustomize ignores such tags): remove the tag"
        )
    entry = _find(doc, name, by_new_name=by_new_name)
    sp = _Splicer(text)
    desired: dict[str, str | None] = {}
    if new_name is not None and new_name != KEEP:
        desired["newName"] = new_name
    if tag is not None:
        if tag != KEEP:
            desired["newTag"] = tag
        if digest is None:
            desired["digest"] = None
    if digest is not None:
        if digest != KEEP:
            desired["digest"] = digest
        if tag is None:
            desired["newTag"] = None

    if entry is None:
        if not add:
            found = [e.value("name") for e in doc.entries]
            listed = f"found: {', '.join(found)}" if found else "it has no images entries"
            raise ImageNotFoundError(
                f"image {name!r} not in {source} ({listed}); add it under images:", found=found
            )
        validate_image_name(name)
        pairs = [("name", name)] + [(f, desired[f]) for f in _FIELDS[1:] if desired.get(f) is not None]
        change = _add_entry(sp, doc, pairs)
        result = sp.apply()
        _verify(doc, result, change)
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
    _verify(doc, result, _entry_change(doc, entry, desired, removed, to_insert, sp, result))
    return result


def _entry_change(
    doc: _Doc,
    entry: _Entry,
    desired: dict[str, str | None],
    removed: list[str],
    inserted: list[tuple[str, str]],
    sp: _Splicer,
    result: str,
) -> _Change:
    """The events of an edited entry: its keys in order, set ones as strings, the others as they were."""
    assert doc.events is not None
    first, last = entry.node.first, entry.node.last
    original = doc.events
    fields: list[tuple[str, tuple]] = []
    for i in range(first + 1, last, 2):  # key, value, key, value, ... (entries hold scalars and aliases)
        field = original[i].value
        if field in removed:
            continue
        want = desired.get(field)
        fields.append((field, ("str", want) if want is not None else ("event", original[i + 1])))
    fields += [(field, ("str", value)) for field, value in inserted]
    change = _Change(first, last - first + 1, [("mapping", original[first], fields)])
    text = doc.text
    if _window_ready(doc):
        start = _line_start(text, entry.node.start)
        if text[start : entry.node.start].strip(" ") == "-":
            last_end = entry.node.end if entry.flow else _entry_last_end(text, entry, list(entry.keys))
            rest = text[last_end : _line_content_end(text, last_end)].strip(" ")
            end = _line_full_end(text, last_end)
            if (not rest or rest.startswith("#")) and all(start <= e[0] and e[1] <= end for e in sp.edits):
                change.window = (start, end + len(result) - len(text), start, end)
    return change


# --------------------------------------------------------------------------------------------
# Verifying


class _Mismatch(Exception):
    """The edited text does not read as the original plus the intended change."""


def _is_string(event, value: str) -> bool:
    """Whether ``event`` is a scalar that reads as the string ``value`` (YAML 1.2, as kustomize reads it)."""
    if type(event) is not _ev.ScalarEvent or event.value != value or event.anchor is not None:
        return False
    if event.tag is not None:
        return event.tag in ("!", _STR_TAG)
    if not event.implicit[0]:  # quoted
        return True
    return _resolve(value) == _STR_TAG


_SEQ_START = ("event", _ev.SequenceStartEvent(None, None, True))
_SEQ_END = ("event", _ev.SequenceEndEvent())
_MAP_START = ("event", _ev.MappingStartEvent(None, None, True))
_MAP_END = ("event", _ev.MappingEndEvent())


@dataclass
class _Change:
    """Where the result's events differ from the original's, and what they must say there.

    The result's events are the original's with ``removed`` events from index ``start`` replaced by
    ``region``: events that must mean the same (``("event", event)``) and mappings to check field
    by field (``("mapping", head, [(key, check), ...])``, ``head`` the original mapping's start
    event or None for a new one; a check is ``("str", value)`` or ``("event", original value)``).
    """

    start: int
    removed: int
    region: list[tuple]
    #: The whole lines that hold the one changed images entry, as (start, end) in the result and
    #: (start, end) in the original — outside them both texts are the same — when the change can be
    #: checked in those lines alone (see :func:`_verify_window`).
    window: tuple[int, int, int, int] | None = None


def _read_mapping(get, head, fields: list[tuple[str, tuple]]) -> None:
    event = get()
    if type(event) is not _ev.MappingStartEvent:
        raise _Mismatch("expected the images entry")
    if head is not None and not _same(event, head):
        raise _Mismatch("the entry's anchor or tag changed")
    if head is None and (event.anchor is not None or event.tag is not None):
        raise _Mismatch("the new entry has an anchor or tag")
    pairs: list[tuple[object, object]] = []
    while True:
        key = get()
        if type(key) is _ev.MappingEndEvent:
            break
        value = get()
        if type(value) not in (_ev.ScalarEvent, _ev.AliasEvent) or type(key) is not _ev.ScalarEvent:
            raise _Mismatch("the entry holds a nested value")
        pairs.append((key, value))
    if len(pairs) != len(fields):
        raise _Mismatch(f"the entry has {len(pairs)} keys, {len(fields)} were meant")
    for (key, value), (field, (how, want)) in zip(pairs, fields):
        if not _is_string(key, field) and not (how == "event" and key.value == field):
            raise _Mismatch(f"expected the key {field!r}, read {key.value!r}")
        if how == "str" and not _is_string(value, want):
            raise _Mismatch(f"{field} does not read as the string {want!r}")
        if how == "event" and not _same(value, want):
            raise _Mismatch(f"{field} changed")


def _verify(before: _Doc, result: str, change: _Change) -> None:
    """Prove that ``result`` says exactly what was meant, else raise (never return a wrong file).

    Parses ``result`` once more and compares it with the original event by event: the same
    outside the change (scalars, quoting, tags, anchors, aliases, structure — positions and styles
    aside), and inside it exactly the intended entry. No size check: an edit may push a file just
    under the limit a few bytes over it.
    """
    if change.window is not None and _verify_window(before, result, change):
        return
    original = before.events
    assert original is not None  # parsed with record=True
    same = _same
    try:
        get, _ = _events(result)
        for i in range(change.start):
            if not same(get(), original[i]):
                raise _Mismatch(f"event {i} before the change differs")
        for item in change.region:
            if item[0] == "event":
                if not same(get(), item[1]):
                    raise _Mismatch("the structure around the entry is not the one meant")
            else:
                _read_mapping(get, item[1], item[2])
        for i in range(change.start + change.removed, len(original)):
            if not same(get(), original[i]):
                raise _Mismatch(f"event {i} after the change differs")
    except yaml.YAMLError as exc:
        raise KustomizationError(
            f"{before.source}: the edit produced invalid YAML ({_yaml_error(exc, 'result')}); the file was not "
            "changed. This is a bug, please report it with the file"
        ) from None
    except _Mismatch as exc:
        raise KustomizationError(
            f"{before.source}: the edit did not read back as intended ({exc}); the file was not changed. "
            "This is a bug, please report it with the file"
        ) from None


def _window_ready(doc: _Doc) -> bool:
    """Whether an entry of ``doc`` can be checked in its own lines (:func:`_verify_window`)."""
    return (
        _CParser is not None
        and doc.images is not None
        and not doc.images.flow_style
        and doc.images_key is not None
        and doc.images_key.style is None
        and doc.images_key.explicit_tag is None
        and doc.events is not None
        and getattr(doc.events[1], "tags", None) is None  # no %TAG directive
    )


def _verify_window(before: _Doc, result: str, change: _Change) -> bool:
    """Check a change to one block ``images`` entry in its own lines: True if proven, False to fall back.

    ``change.window`` is the whole lines of the result that hold the entry (from the line of its
    dash to the end of its last line); everything outside them must be the original text, and is
    compared as text.
    In block context nothing carries from one line to the next but the indentation: those lines
    are parsed after ``images:`` written at the same column as in the file, so the entry's dash
    and keys sit at their own columns, and must read as exactly the intended entry. The original
    line after them was not part of the entry there, and the entry's last line in the result ends
    a complete ``key: value`` (or the unchanged last line), so it cannot become part of it. Last,
    libyaml parses the whole result in C (no Python per event) and must count exactly the
    original's events plus the entry's difference. Anything unexpected returns False, and
    :func:`_verify` compares the whole result event by event instead.
    """
    original = before.events
    assert original is not None and before.images_key is not None
    start, end, old_start, old_end = change.window
    text = before.text
    if result[:start] != text[:old_start] or result[end:] != text[old_end:]:
        return False  # an edit outside the entry's lines: the whole-file comparison will say where
    key = before.images_key
    prefix = " " * key.column + "images:" + _eol(before.text, key.end)
    (item,) = [i for i in change.region if i[0] == "mapping"]
    region_events = 2 + 2 * len(item[2])
    try:
        get, _ = _events(prefix + result[start:end])
        expect = [_ev.StreamStartEvent, _ev.DocumentStartEvent, _ev.MappingStartEvent, _ev.ScalarEvent]
        expect.append(_ev.SequenceStartEvent)
        head = [get() for _ in expect]
        if [type(e) for e in head] != expect or head[3].value != "images":
            return False
        _read_mapping(get, item[1], item[2])
        tail = [type(get()) for _ in range(4)]
        if tail != [_ev.SequenceEndEvent, _ev.MappingEndEvent, _ev.DocumentEndEvent, _ev.StreamEndEvent]:
            return False
        total = _CParser(result).raw_parse()
    except (yaml.YAMLError, _Mismatch):
        return False
    return total == len(original) - change.removed + region_events

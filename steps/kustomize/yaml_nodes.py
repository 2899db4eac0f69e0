"""The YAML layer under the kustomization reader: libyaml events with positions, and the guards.

Nodes (:class:`Node`, :class:`Scalar`, :class:`MappingNode`, :class:`SequenceNode`) carry where each
value starts and ends in the text; :func:`parse_events` runs PyYAML's C parser; the guards refuse a text
over :data:`MAX_KUSTOMIZATION_BYTES`, nesting deeper than 64 and anchors where an edit would change
what they share. Scalars are resolved as YAML 1.1 and 1.2 read them (ruamel's tables).
Pure; imports nothing of the project but :mod:`steps.domain.errors`.
"""

from __future__ import annotations

import contextlib
import gc
import re

from ruamel.yaml.resolver import VersionedResolver
from yaml import events as _ev

from steps.domain.errors import KustomizationError

#: The largest kustomization read, in bytes (UTF-8). Real ones are a few KiB; a larger file is
#: refused before any YAML parsing (each edit parses the text several times).
MAX_KUSTOMIZATION_BYTES = 1 << 20


IMAGE_FIELDS = ("name", "newName", "newTag", "digest")
#: YAML's line breaks, exactly as libyaml's scanner counts them (YAML 1.1: NEL, LS and PS too): the
#: one definition of a line that the line editor (:mod:`steps.kustomize.splice`) and the hold finder
#: (:mod:`steps.kustomize.holds`) share. ``\r\n`` is one break.
LINE_BREAK_CHARS = "\r\n\x85\u2028\u2029"
LINE_BREAK = re.compile(r"\r\n|\r|\n|\x85|\u2028|\u2029")


def line_start(text: str, pos: int) -> int:
    """Index of the first character of the line that holds ``pos`` (after a :data:`LINE_BREAK`).

    Searched back in a window that grows until it holds a break: a break character the text lacks
    (most lack all but ``\n``) then costs the line's length, not the whole text before ``pos``
    (which made reading every line of a file quadratic).
    """
    width = 256
    while True:
        low = max(0, pos - width)
        found = max(text.rfind(c, low, pos) for c in LINE_BREAK_CHARS)
        if found >= 0 or low == 0:
            return found + 1
        width *= 4


def line_end(text: str, pos: int) -> int:
    """Index of the line break ending the line that holds ``pos`` (or ``len(text)``)."""
    m = LINE_BREAK.search(text, pos)
    return m.start() if m else len(text)


def next_line(text: str, pos: int) -> int:
    """Index just after the line break ending the line that holds ``pos`` (or ``len(text)``)."""
    m = LINE_BREAK.search(text, pos)
    return m.end() if m else len(text)


_RESOLVERS = (VersionedResolver(version=(1, 1)), VersionedResolver(version=(1, 2)))
#: ruamel's implicit-resolver tables for YAML 1.1 and 1.2 ({first character: [(tag, regexp)]}), read
#: once: its ``resolve`` looks the YAML version up through exceptions on every call (~10 µs).
_IMPLICIT = tuple(r.versioned_resolver for r in _RESOLVERS)
STR_TAG = "tag:yaml.org,2002:str"
_NULL_TAG = "tag:yaml.org,2002:null"

#: Called by a warm interpreter that forks steps (workflows.local.forkserver_server) before it forks.
WARM_UP = ("compile_tables",)


def compile_tables() -> None:
    """Compile every pattern of the resolver tables now. ruamel compiles each on its first match
    (a ``LazyEval`` that also costs an attribute lookup per match): a forked step would compile
    the same dozen patterns again in every child."""
    global _IMPLICIT

    def compiled(regexp):
        lazy = getattr(regexp, "lazy_self", None)  # ruamel.yaml.util.LazyEval: evaluate it
        return lazy() if callable(lazy) else regexp

    _IMPLICIT = tuple(
        {first: [(tag, compiled(regexp)) for tag, regexp in pairs] for first, pairs in table.items()}
        for table in _IMPLICIT
    )


def resolve_tag(value: str, version: int = 1) -> str:
    """The tag YAML 1.1 (``version=0``) or 1.2 (``1``) gives the plain scalar ``value`` (ruamel's rules)."""
    for tag, regexp in _IMPLICIT[version].get(value[:1], ()):
        if regexp.match(value):
            return tag
    return STR_TAG


# --------------------------------------------------------------------------------------------
# Parsing for positions
#
# libyaml (PyYAML's C binding) turns the text into events — scalars with their quoting style,
# collection starts and ends, aliases — each with its position; one pass over them builds light
# nodes (no Python object per character, no recursion), checks duplicate keys and alias expansion,
# and optionally records each event's meaning so that the result of an edit can be compared with
# the original event by event (:func:`verify_edit`). ruamel's pure-Python round-trip composer did the
# same work about forty times slower: a 1 MiB kustomization took ~15 s per parse, four parses an edit.


class _Mark:
    """A position in the text: ``index`` (characters), ``line`` and ``column`` (0-based)."""

    __slots__ = ("column", "index", "line")

    def __init__(self, index: int, line: int = 0, column: int = 0) -> None:
        self.index, self.line, self.column = index, line, column


class Node:
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


class Scalar(Node):
    """A scalar. Collections hold scalars as bare events; :func:`make_node` wraps one where it is used."""

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
        return STR_TAG
    return resolve_tag(event.value)


def is_null(event) -> bool:
    """Whether a scalar event reads as null (fast path of ``_scalar_tag(event) == _NULL_TAG``)."""
    if event.tag is None and event.implicit[0]:
        return event.value in ("", "~", "null", "Null", "NULL")
    return event.tag == _NULL_TAG


class _Collection(Node):
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


class MappingNode(_Collection):
    __slots__ = ()


class SequenceNode(_Collection):
    __slots__ = ()


def make_node(item, offset: int) -> Node:
    """``item`` (a collection node, or a scalar's bare event) as a node."""
    return item if isinstance(item, _Collection) else Scalar(item, offset)


def position_of(mark) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def yaml_error(exc: Exception, source: str) -> KustomizationError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc).splitlines()[0]
    at = f" at {position_of(mark)}" if mark is not None else ""
    problem = " ".join(str(problem).split())
    if "nesting depth" in problem:  # libyaml's own limit (1000 levels), met while scanning ahead
        return too_deep(source, at)
    hint = "fix the YAML (kubectl kustomize rejects it too)"
    if "control characters are not allowed" in problem:
        hint = "remove the control character (YAML allows no terminal escapes or other controls)"
    elif "\\t" in problem or "\t" in problem or re.search(r"\btabs?\b", problem):  # not "unacceptable"
        hint = "indent with spaces; YAML does not allow tabs for indentation"
    return KustomizationError(f"{source}: invalid YAML{at}: {problem}; {hint}", reason="invalid-yaml")


def too_deep(source: str, at: str) -> KustomizationError:
    return KustomizationError(
        f"{source}: the YAML is nested too deeply to read (collections nested more than {MAX_DEPTH} deep{at}); "
        "a kustomization is a few levels deep: flatten it",
        reason="too-deep",
    )


def refuse_anchor(node: Node, what: str, source: str) -> None:
    if node.anchor:
        raise KustomizationError(
            f"{source}: {what} at {position_of(node.start_mark)} carries the anchor &{node.anchor} "
            "(it may be used elsewhere through an alias); write it out without anchors/aliases to edit it",
            reason="anchor",
        )


def refuse_oversize(text: str, source: str) -> None:
    """Refuse a text over :data:`MAX_KUSTOMIZATION_BYTES` before anything parses it."""
    if len(text) <= MAX_KUSTOMIZATION_BYTES // 4:  # 4 bytes per character at most: no need to count
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_KUSTOMIZATION_BYTES:
        raise oversize(size, source)


def oversize(size: int, source: str) -> KustomizationError:
    """The refusal of a kustomization of ``size`` bytes, over :data:`MAX_KUSTOMIZATION_BYTES`."""
    return KustomizationError(
        f"{source}: {size} bytes ({size / (1 << 20):.1f} MiB), larger than the "
        f"{MAX_KUSTOMIZATION_BYTES} bytes (1 MiB) a kustomization may be; it was not parsed. "
        "Keep the kustomization small: move large content to resources or generator files",
        reason="too-large",
    )


#: Collections nested deeper than this are refused: a kustomization is a few levels deep, and a
#: document of 100,000 '[' must not cost anything.
MAX_DEPTH = 64
#: The tags a kustomization may carry: YAML's own (``!!str``, ``!!int``, ...) and ``!`` (a string).
KNOWN_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "binary", "merge")
) | {"!"}

#: PyYAML's C binding to libyaml, when PyYAML was built with it (its wheels are). Without it the
#: pure-Python parser gives the same events, slower.
try:
    from yaml._yaml import CParser as CParser
except ImportError:  # pragma: no cover - PyYAML without libyaml
    CParser = None


def parse_events(text: str):
    """(events of ``text``, the offset to add to their indices).

    libyaml does not count a leading BOM in its indices; the pure parser does.
    """
    if CParser is not None:
        return CParser(text).get_event, 1 if text.startswith("\ufeff") else 0
    from yaml import SafeLoader  # pragma: no cover - PyYAML without libyaml

    return SafeLoader(text).get_event, 0  # pragma: no cover


def same_value(a, b) -> bool:
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
def gc_paused():
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

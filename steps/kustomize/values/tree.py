"""A values file's documents as nodes with positions: one pass over libyaml's events (every document).

The kustomization reader (:mod:`steps.kustomize.reader`) reads one mapping document; a values
file or a helmfile may be several documents, a top-level list, anchors and aliases anywhere. So
this module builds its own light tree from the same events (:func:`~steps.kustomize.yaml_nodes.parse_events`):
:class:`VScalar` (a scalar event with its positions), :class:`VMap` and :class:`VSeq`. An alias is
the anchored node itself (the same object), so an edit at the anchor is seen at every alias, and
nothing is ever expanded. The events read are kept (:class:`Documents`), so :func:`reread` proves
an edit by reading the new text once and comparing event by event: the same documents but for the
scalars replaced and the keys inserted. Pure.
"""

from __future__ import annotations

import re

import yaml
from yaml import events as _ev

from steps.domain.errors import ValuesError
from steps.kustomize.yaml_nodes import (
    STR_TAG,
    Node,
    Scalar,
    gc_paused,
    is_null,
    parse_events,
    position_of,
    same_value,
)

#: The largest values file read, in bytes: real charts' values files are up to a few hundred KiB.
MAX_VALUES_BYTES = 4 << 20
#: Collections nested deeper than this are refused.
MAX_VALUES_DEPTH = 128
#: How many nodes aliases may add once expanded (a "billion laughs" document is refused).
MAX_VALUES_EXPANSION = 100_000
#: The most YAML documents (``---``) a values file or a helmfile may hold: a helmfile has a few
#: (its layers), a values file one. Each costs its events whether it is empty or not: 4 MiB of
#: ``---`` lines are a million documents (1.3 GiB once read), where the kustomization reader
#: refuses a second document outright.
MAX_VALUES_DOCUMENTS = 1_000
#: The most parser events (a scalar, an alias, a collection's start or end, a document's start
#: or end — each about half a KiB once read and kept) a values file or a helmfile may hold: as
#: many as the largest kustomization (1 MiB) can hold, and some 20 times a large chart's values
#: file. 4 MiB of one-character flow items are two million; the byte limit alone lets them in.
MAX_VALUES_EVENTS = 500_000


class VScalar(Scalar):
    """A scalar with its positions (a :class:`~steps.kustomize.yaml_nodes.Scalar`)."""

    __slots__ = ()

    @property
    def null(self) -> bool:
        return is_null(self.event)


class _Coll(Node):
    """A collection: its start event's accessors are :class:`~steps.kustomize.yaml_nodes.Node`'s;
    ``end`` is where its end event ends."""

    __slots__ = ("end", "flow", "size")

    def __init__(self, event, offset: int) -> None:
        self.event, self.offset = event, offset
        self.end = 0
        self.flow = bool(event.flow_style)
        self.size = 1


class VMap(_Coll):
    """A mapping: ``pairs`` [(key node, value node)] in file order; ``index``, scalar key → (key
    node, value node) (keys are unique but ``<<``: the first of each), filled as it is composed."""

    __slots__ = ("index", "pairs")

    def __init__(self, event, offset: int) -> None:
        super().__init__(event, offset)
        self.pairs: list[tuple[object, object]] = []
        self.index: dict[str, tuple[object, object]] = {}

    def get(self, key: str):
        """The value node of the scalar key ``key`` (merge keys ``<<`` followed), or None."""
        index = self.index
        found = index.get(key)
        if found is not None and key != "<<":
            return found[1]
        merge = index.get("<<")
        if merge is not None:
            v = merge[1]
            for merged in v.items if isinstance(v, VSeq) else [v]:
                if isinstance(merged, VMap):
                    got = merged.get(key)
                    if got is not None:
                        return got
        return None

    def key_node(self, key: str) -> VScalar | None:
        found = self.index.get(key)
        return found[0] if found is not None else None  # type: ignore[return-value]


class VSeq(_Coll):
    """A sequence: ``items`` in file order."""

    __slots__ = ("items",)

    def __init__(self, event, offset: int) -> None:
        super().__init__(event, offset)
        self.items: list[object] = []


class Documents(list):
    """Every document's root node (None for an empty document), in order — a list — and what they
    were read from: ``events``, libyaml's events of the whole text in order (what a re-read is
    compared with, :func:`reread`), and ``blocks``, the block scalars (``|``, ``>``)."""

    __slots__ = ("blocks", "events")

    def __init__(self, roots, events: list, blocks: list) -> None:
        super().__init__(roots)
        self.events = events
        self.blocks = blocks


def compose(text: str, source: str) -> Documents:
    """Every document's root node (None for an empty document), in order (:class:`Documents`).

    Raises:
        ValuesError: invalid YAML (naming Go template actions when the file has them), too large,
            more than :data:`MAX_VALUES_DOCUMENTS` documents or :data:`MAX_VALUES_EVENTS` parser
            events (refused as they are read, before the rest is), too deep, an undefined alias,
            aliases that expand too far, a duplicate key.
    """
    if not isinstance(text, str):
        raise TypeError("text must be str")
    if len(text) > MAX_VALUES_BYTES // 4:
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_VALUES_BYTES:
            raise oversize_values(size, source)
    try:
        with gc_paused():
            return _compose(text, source)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        at = f" at {position_of(mark)}" if mark is not None else ""
        hint = "fix the YAML"
        if "{{" in text:
            hint = (
                "it holds Go template actions ({{ … }}) that are not YAML: imagebump edits only files that "
                "read as YAML (keep the image in a plain values file)"
            )
        raise ValuesError(
            f"{source}: invalid YAML{at}: {' '.join(str(problem).split())}; {hint}", reason="invalid-yaml"
        ) from None


def oversize_values(size: int, source: str) -> ValuesError:
    """The refusal of a values file or helmfile of ``size`` bytes, over :data:`MAX_VALUES_BYTES`."""
    return ValuesError(
        f"{source}: {size} bytes ({size / (1 << 20):.1f} MiB), larger than the {MAX_VALUES_BYTES} bytes (4 MiB) "
        "a values file or helmfile may be; it was not read",
        reason="too-large",
    )


_TEMPLATE_LINE = re.compile(r"(?m)^([ \t]*)\{\{(?:[^\r\n]*)\}\}[ \t]*$")


def neutralise(text: str) -> str:
    """``text`` with each line that is only a Go template action (``{{- if … }}``, ``{{ end }}``)
    turned into a comment of the same length (``#{- if … }}``), so the YAML around it can be read
    with every position unchanged. Template actions inside values stay as they are."""
    if "{{" not in text:
        return text
    return _TEMPLATE_LINE.sub(lambda m: m[1] + "#" + m[0][len(m[1]) + 1 :], text)


_ACTION = re.compile(r"\{\{-?(.*?)-?\}\}", re.S)
_LINE_BREAK = re.compile(r"\r\n|\r|\n|\x85|\u2028|\u2029")


def template_lines(text: str) -> list[tuple[int, list[str]]]:
    """The lines :func:`neutralise` reads as comments: (line number from 0, as libyaml counts
    lines, the text of each Go template action on it, delimiters and trim markers removed)."""
    if "{{" not in text:
        return []
    out = []
    for number, line in enumerate(_LINE_BREAK.split(text)):
        if "{{" in line and _TEMPLATE_LINE.fullmatch(line):
            out.append((number, [a.strip() for a in _ACTION.findall(line)]))
    return out


#: A collection's size (nodes once its aliases are written out) is counted up to this.
_SIZE_CAP = 1 << 62


def _compose(text: str, source: str) -> Documents:
    get, offset = parse_events(neutralise(text))
    events: list = []
    record = events.append
    blocks: list = []
    anchors: dict[str, object] = {}
    parent = pending = None  # the open collection, and a mapping's key waiting for its value
    stack: list[tuple] = []  # (parent, pending) of the collections around ``parent``
    roots: list = []
    written = 0
    scalar_event, alias_event = _ev.ScalarEvent, _ev.AliasEvent
    map_start, seq_start = _ev.MappingStartEvent, _ev.SequenceStartEvent
    map_end, seq_end = _ev.MappingEndEvent, _ev.SequenceEndEvent
    while True:
        event = get()
        record(event)
        if len(events) > MAX_VALUES_EVENTS:
            raise _too_many(
                source, f"{MAX_VALUES_EVENTS} YAML nodes (parser events)", event, "too-many-nodes"
            )
        kind = event.__class__
        if kind is scalar_event:
            node = VScalar(event, offset)
            written += 1
            size = 1
            if event.anchor is not None:
                anchors[event.anchor] = node
            if event.style == "|" or event.style == ">":
                blocks.append(node)
        elif kind is map_start or kind is seq_start:
            if len(stack) >= MAX_VALUES_DEPTH:
                raise ValuesError(
                    f"{source}: nested more than {MAX_VALUES_DEPTH} deep at {position_of(event.start_mark)}"
                )
            node = (VMap if kind is map_start else VSeq)(event, offset)
            written += 1
            if event.anchor is not None:
                anchors[event.anchor] = node
            stack.append((parent, pending))
            parent, pending = node, None
            continue
        elif kind is map_end or kind is seq_end:
            node = parent
            parent, pending = stack.pop()
            node.end = event.end_mark.index + offset
            if node.size > _SIZE_CAP:
                node.size = _SIZE_CAP
            size = node.size
        elif kind is alias_event:
            node = anchors.get(event.anchor)
            if node is None:
                raise ValuesError(
                    f"{source}: undefined alias *{event.anchor} at {position_of(event.start_mark)}"
                )
            if node is parent or any(frame[0] is node for frame in stack):
                raise ValuesError(
                    f"{source}: the alias *{event.anchor} refers to itself (a recursive document)"
                )
            size = 1 if node.__class__ is VScalar else node.size
        elif kind is _ev.StreamEndEvent:
            break
        else:
            if kind is _ev.DocumentStartEvent:
                roots.append(_PENDING)
                if len(roots) > MAX_VALUES_DOCUMENTS:
                    raise _too_many(
                        source,
                        f"{MAX_VALUES_DOCUMENTS} YAML documents (separated by '---')",
                        event,
                        "too-many-documents",
                    )
            continue
        if parent is None:
            roots[-1] = node
            continue
        parent.size += size
        if parent.__class__ is VSeq:
            parent.items.append(node)
        elif pending is None:
            pending = node
            if node.__class__ is VScalar:
                value = node.event.value
                if value != "<<" and value in parent.index:
                    first = parent.index[value][0]
                    raise ValuesError(
                        f"{source}: duplicate key {value!r} at {position_of(node.start_mark)} "
                        f"(first at {position_of(first.start_mark)}); remove one of them"
                    )
        else:
            parent.pairs.append((pending, node))
            if pending.__class__ is VScalar:
                parent.index.setdefault(pending.event.value, (pending, node))
            pending = None
    docs = [None if r is _PENDING else r for r in roots]
    total = sum(1 if isinstance(r, VScalar) else r.size for r in docs if r is not None)
    if total - written > MAX_VALUES_EXPANSION:
        raise ValuesError(
            f"{source}: uses YAML aliases that expand to more than {MAX_VALUES_EXPANSION} nodes; "
            "write the values out without anchors and aliases"
        )
    return Documents(docs, events, blocks)


def _too_many(source: str, what: str, event, reason: str) -> ValuesError:
    return ValuesError(
        f"{source}: holds more than {what} at {position_of(event.start_mark)}; it was not read further. "
        "A values file or helmfile this large is not one a chart reads: split it, or keep the image in "
        "a smaller file",
        reason=reason,
    )


#: A document whose root has not been read yet (an empty document stays None).
_PENDING = object()


def _reads_as(event, value: str, anchor: str | None) -> bool:
    """Whether ``event`` is a scalar that reads as the string ``value`` (YAML 1.2) with ``anchor``."""
    if event.__class__ is not _ev.ScalarEvent or event.value != value or event.anchor != anchor:
        return False
    return VScalar(event, 0).tag == STR_TAG


def _value_last(events: list, at: int) -> int:
    """The index of the last event of the node whose first event is ``events[at]``."""
    depth = 0
    while True:
        kind = events[at].__class__
        if kind is _ev.MappingStartEvent or kind is _ev.SequenceStartEvent:
            depth += 1
        elif kind is _ev.MappingEndEvent or kind is _ev.SequenceEndEvent:
            depth -= 1
        if depth == 0:
            return at
        at += 1


def reread(
    docs: Documents,
    text: str,
    source: str,
    replaced: dict[int, str],
    inserted: list[tuple[VScalar, str, str]],
) -> dict[int, object]:
    """Read ``text`` — an edit of the text ``docs`` were read from — and prove it reads as ``docs``
    but for the edit: libyaml's events compared one by one (values, types, tags, anchors, aliases,
    structure, every document; positions and quoting styles aside), except that the scalar of each
    event ``id`` in ``replaced`` reads as the string given there, and right after the value of each
    key node of ``inserted`` a new pair of strings ``(key, value)`` follows.

    Returns:
        ``id(original event)`` → the event read now in its place, for the events of ``replaced``
        (every other event reads as it did); an inserted pair's value under ``id`` of the key node
        it follows.

    Raises:
        ValuesError: ``text`` is not YAML, or reads as anything else.
    """
    original = docs.events
    after: dict[int, tuple[str, str, int]] = {}
    index = {id(e): i for i, e in enumerate(original)} if inserted else {}  # once, not a scan per key
    for key, name, value in inserted:
        at = index[id(key.event)]
        after[_value_last(original, at + 1)] = (name, value, id(key))
    read: dict[int, object] = {}
    scalar_event = _ev.ScalarEvent
    try:
        get, _ = parse_events(neutralise(text))
        with gc_paused():
            for i, was in enumerate(original):
                now = get()
                kind = was.__class__
                if kind is scalar_event and now.__class__ is kind:  # the most events: compared here
                    want = replaced.get(id(was))
                    if want is not None:
                        ok = _reads_as(now, want, was.anchor)
                        read[id(was)] = now
                    else:
                        ok = (
                            now.value == was.value
                            and now.implicit == was.implicit
                            and now.tag == was.tag
                            and now.anchor == was.anchor
                        )
                else:
                    ok = same_value(now, was)
                if not ok:
                    raise ValuesError(
                        f"{source}: the edit did not read back as intended (at line {now.start_mark.line + 1}: "
                        "something besides the image changed); nothing was written. This is a bug, please "
                        "report it with the file",
                        reason="edit-mismatch",
                    )
                if i in after:
                    name, value, key = after[i]
                    new_key, new_value = get(), get()
                    if not (_reads_as(new_key, name, None) and _reads_as(new_value, value, None)):
                        raise ValuesError(
                            f"{source}: the edit did not read back as intended (the {name} key it adds); "
                            "nothing was written. This is a bug, please report it with the file",
                            reason="edit-mismatch",
                            field=name,
                        )
                    read[key] = new_value
    except yaml.YAMLError as exc:
        raise ValuesError(
            f"{source}: the edit produced unreadable YAML ({' '.join(str(exc).split())}); nothing was written. "
            "This is a bug",
            reason="edit-mismatch",
        ) from None
    return read

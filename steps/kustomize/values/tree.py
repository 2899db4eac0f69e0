"""A values file's documents as nodes with positions: one pass over libyaml's events (every document).

The kustomization reader (:mod:`steps.kustomize.reader`) reads one mapping document; a values
file or a helmfile may be several documents, a top-level list, anchors and aliases anywhere. So
this module builds its own light tree from the same events (:func:`~steps.kustomize.yaml_nodes.parse_events`):
:class:`VScalar` (a scalar event with its positions), :class:`VMap` and :class:`VSeq`. An alias is
the anchored node itself (the same object), so an edit at the anchor is seen at every alias, and
nothing is ever expanded. :func:`plain` turns a node into comparable data (types resolved as
YAML 1.2 reads them), with some scalars' values replaced and keys inserted: what the edited file
must read as. Pure.
"""

from __future__ import annotations

import re

import yaml
from yaml import events as _ev

from steps.domain.errors import ValuesError
from steps.kustomize.yaml_nodes import STR_TAG, Scalar, gc_paused, is_null, parse_events, position_of

#: The largest values file read, in bytes: real charts' values files are up to a few hundred KiB.
MAX_VALUES_BYTES = 4 << 20
#: Collections nested deeper than this are refused.
MAX_VALUES_DEPTH = 128
#: How many nodes aliases may add once expanded (a "billion laughs" document is refused).
MAX_VALUES_EXPANSION = 100_000


class VScalar(Scalar):
    """A scalar with its positions (a :class:`~steps.kustomize.yaml_nodes.Scalar`)."""

    __slots__ = ()

    @property
    def null(self) -> bool:
        return is_null(self.event)


class _Coll:
    __slots__ = ("end", "event", "flow", "offset", "size")

    def __init__(self, event, offset: int) -> None:
        self.event, self.offset = event, offset
        self.end = 0
        self.flow = bool(event.flow_style)
        self.size = 1

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
    def anchor(self) -> str | None:
        return self.event.anchor


class VMap(_Coll):
    """A mapping: ``pairs`` [(key node, value node)] in file order."""

    __slots__ = ("_index", "pairs")

    def __init__(self, event, offset: int) -> None:
        super().__init__(event, offset)
        self.pairs: list[tuple[object, object]] = []
        self._index: dict[str, tuple[object, object]] | None = None

    @property
    def index(self) -> dict[str, tuple[object, object]]:
        """scalar key → (key node, value node), the first of each (built once, after composing)."""
        if self._index is None:
            index: dict[str, tuple[object, object]] = {}
            for k, v in self.pairs:
                if isinstance(k, VScalar):
                    index.setdefault(k.event.value, (k, v))
            self._index = index
        return self._index

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


def compose(text: str, source: str) -> list:
    """Every document's root node (None for an empty document), in order.

    Raises:
        ValuesError: invalid YAML (naming Go template actions when the file has them), too large,
            too deep, an undefined alias, aliases that expand too far, a duplicate key.
    """
    if not isinstance(text, str):
        raise TypeError("text must be str")
    if len(text) > MAX_VALUES_BYTES // 4 and len(text.encode("utf-8", "surrogatepass")) > MAX_VALUES_BYTES:
        raise ValuesError(f"{source}: larger than {MAX_VALUES_BYTES} bytes; it was not read")
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
        raise ValuesError(f"{source}: invalid YAML{at}: {' '.join(str(problem).split())}; {hint}") from None


_TEMPLATE_LINE = re.compile(r"(?m)^([ \t]*)\{\{(?:[^\r\n]*)\}\}[ \t]*$")


def neutralise(text: str) -> str:
    """``text`` with each line that is only a Go template action (``{{- if … }}``, ``{{ end }}``)
    turned into a comment of the same length (``#{- if … }}``), so the YAML around it can be read
    with every position unchanged. Template actions inside values stay as they are."""
    if "{{" not in text:
        return text
    return _TEMPLATE_LINE.sub(lambda m: m[1] + "#" + m[0][len(m[1]) + 1 :], text)


def _compose(text: str, source: str) -> list:
    get, offset = parse_events(neutralise(text))
    anchors: dict[str, object] = {}
    stack: list[list] = []  # [node, pending key, keys seen]
    roots: list = []
    written = 0
    while True:
        event = get()
        kind = event.__class__
        if kind is _ev.ScalarEvent:
            node = VScalar(event, offset)
            written += 1
            size = 1
            if event.anchor is not None:
                anchors[event.anchor] = node
        elif kind is _ev.MappingStartEvent or kind is _ev.SequenceStartEvent:
            if len(stack) >= MAX_VALUES_DEPTH:
                raise ValuesError(
                    f"{source}: nested more than {MAX_VALUES_DEPTH} deep at {position_of(event.start_mark)}"
                )
            node = (VMap if kind is _ev.MappingStartEvent else VSeq)(event, offset)
            written += 1
            if event.anchor is not None:
                anchors[event.anchor] = node
            stack.append([node, None, {}])
            continue
        elif kind is _ev.MappingEndEvent or kind is _ev.SequenceEndEvent:
            node = stack.pop()[0]
            node.end = event.end_mark.index + offset
            size = node.size
        elif kind is _ev.AliasEvent:
            node = anchors.get(event.anchor)
            if node is None:
                raise ValuesError(
                    f"{source}: undefined alias *{event.anchor} at {position_of(event.start_mark)}"
                )
            if any(frame[0] is node for frame in stack):
                raise ValuesError(
                    f"{source}: the alias *{event.anchor} refers to itself (a recursive document)"
                )
            size = 1 if isinstance(node, VScalar) else node.size
        elif kind is _ev.StreamEndEvent:
            break
        else:
            if kind is _ev.DocumentStartEvent:
                roots.append(_PENDING)
            continue
        if not stack:
            roots[-1] = node
            continue
        frame = stack[-1]
        parent = frame[0]
        parent.size = min(parent.size + size, 1 << 62)
        if isinstance(parent, VSeq):
            parent.items.append(node)
        elif frame[1] is None:
            frame[1] = node
            if isinstance(node, VScalar) and node.value != "<<":
                first = frame[2].get(node.value)
                if first is not None:
                    raise ValuesError(
                        f"{source}: duplicate key {node.value!r} at {position_of(node.start_mark)} "
                        f"(first at {position_of(first.start_mark)}); remove one of them"
                    )
                frame[2][node.value] = node
        else:
            parent.pairs.append((frame[1], node))
            frame[1] = None
    docs = [None if r is _PENDING else r for r in roots]
    total = sum(1 if isinstance(r, VScalar) else r.size for r in docs if r is not None)
    if total - written > MAX_VALUES_EXPANSION:
        raise ValuesError(
            f"{source}: uses YAML aliases that expand to more than {MAX_VALUES_EXPANSION} nodes; "
            "write the values out without anchors and aliases"
        )
    return docs


#: A document whose root has not been read yet (an empty document stays None).
_PENDING = object()


_TAGS: dict[str, str] = {}


def scalar_key(node: VScalar) -> tuple:
    """A scalar as compared: its resolved YAML type and its value (positions and quoting aside)."""
    event = node.event
    if event.tag is None and event.implicit[0]:  # plain: YAML 1.2's reading (remembered per value)
        value = event.value
        tag = _TAGS.get(value)
        if tag is None:
            tag = node.tag
            if len(_TAGS) < 4096:
                _TAGS[value] = tag
    else:
        tag = node.tag
    return ("s", tag, event.value if tag != "tag:yaml.org,2002:null" else "")


def plain(node, replace: dict[int, str] | None = None, insert: dict[int, tuple] | None = None, memo=None):
    """``node`` as comparable data: scalars as :func:`scalar_key`, except those in ``replace``
    (``id(scalar)`` → the string it must read as), and mappings with ``insert``'s pairs
    (``id(mapping)`` → (after this key node, key, value)). Shared nodes (aliases) are built once."""
    replace = replace or {}
    insert = insert or {}
    memo = {} if memo is None else memo

    def build(n):
        got = memo.get(id(n))
        if got is not None:
            return got
        if n is None:
            out = None
        elif isinstance(n, VScalar):
            out = ("s", STR_TAG, replace[id(n)]) if id(n) in replace else scalar_key(n)
        elif isinstance(n, VMap):
            pairs = []
            extra = insert.get(id(n))
            for k, v in n.pairs:
                pairs.append((build(k), build(v)))
                if extra is not None and extra[0] is k:
                    pairs.append((("s", STR_TAG, extra[1]), ("s", STR_TAG, extra[2])))
            out = ("m", n.anchor is not None, tuple(pairs))
        else:
            out = ("q", tuple(build(i) for i in n.items))
        memo[id(n)] = out
        return out

    return build(node)

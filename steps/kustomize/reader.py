"""Reading a kustomization for positions: one pass over libyaml's events builds the ``images`` entries.

:func:`parse_document` is the one entry every reader and the editor go through: it refuses, while it reads
and without expanding anything, aliases that refer to themselves or add more than
:data:`MAX_ALIAS_EXPANSION` nodes, and duplicate keys. :func:`read_images`
and :func:`get_image` are the public readers. Pure.

Hostile input: a text over :data:`~steps.kustomize.yaml_nodes.MAX_KUSTOMIZATION_BYTES` (1 MiB) is refused
before it is parsed; while reading, without expanding anything, aliases that refer to themselves or
add more than :data:`MAX_ALIAS_EXPANSION` nodes once expanded (a "billion laughs" document),
collections nested deeper than 64, and duplicate keys are refused.

Which entry: kustomize's image transformer (``api/filters/imagetag``) matches each ``images``
entry's ``name`` against the image references in the resources — the name, then an optional
``:tag`` and ``@digest`` (``api/internal/image/image.go``, ``IsImageMatched``) — and never looks at
``newName`` to find an entry; ``kustomize edit set image`` (``kustomize/commands/edit/set/
setimage.go``) likewise finds the entry to change by ``name``. :func:`get_image` (and so
:func:`~steps.kustomize.edit.set_image`) matches ``name``, and — ``by_new_name``, the default, for
the pipeline, whose rule default ``imageName`` is "the entry whose name or newName is the pushed
repository" — else ``newName``; ``imagebump set-image`` matches ``name`` only, as kustomize does.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml
from yaml import events as _ev

from steps.domain.errors import KustomizationError
from steps.domain.models import ImagesEntry
from steps.kustomize.yaml_nodes import (
    KNOWN_TAGS,
    MAX_DEPTH,
    MappingNode,
    Node,
    Scalar,
    SequenceNode,
    gc_paused,
    is_null,
    make_node,
    parse_events,
    position_of,
    refuse_oversize,
    too_deep,
    yaml_error,
)

#: How many nodes YAML aliases may add once expanded (beyond the nodes written out). A "billion
#: laughs" document adds 10⁹ from a few hundred bytes; go-yaml (kustomize) refuses those too.
MAX_ALIAS_EXPANSION = 10_000


class ParsedEntry:
    """One ``images`` entry: its index, mapping node, and (built when used) its keys as nodes."""

    __slots__ = ("_keys", "aliased", "index", "name", "new_name", "node", "offset")

    def __init__(
        self,
        index: int,
        node: MappingNode,
        offset: int,
        name: str | None,
        new_name: str | None,
        aliased: tuple[str, str] | None = None,
    ) -> None:
        self.index, self.node, self.offset = index, node, offset
        self.name, self.new_name = name, new_name
        self.aliased = aliased  # (field, anchor) of a value written as an alias, if any
        self._keys: dict[str, tuple[Scalar, Scalar]] | None = None

    @property
    def keys(self) -> dict[str, tuple[Scalar, Scalar]]:
        """field -> (key node, value node), in file order."""
        if self._keys is None:
            self._keys = {
                k.value: (Scalar(k, self.offset), Scalar(v, self.offset)) for k, v in self.node.value
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
        if pair is None or is_null(pair[1].event):
            return None
        return pair[1].value

    def to_model(self) -> ImagesEntry:
        data = {key: self.value(key) for key in self.keys}
        return ImagesEntry.of(data)


@dataclass
class ParsedDoc:
    text: str
    source: str
    root: MappingNode | None
    images_key: Scalar | None
    images: SequenceNode | None  # None when absent or null
    images_null: Scalar | None  # the value node of `images:` when it is null
    entries: list[ParsedEntry]
    #: Filled when parsed for an edit: every event of the document.
    events: list | None = None
    unknown_tag: tuple[str, Node] | None = None
    null_root: Scalar | None = None  # the document's null, when it is one (`---` alone)
    #: Indices of scalar events that hold the root (a null document) or the value of `images:`.
    scalar_index: dict[int, int] | None = None  # id(event) -> index, for those few


def _compose(text: str, source: str, *, record: bool):
    """One pass over the events: (root node or scalar event or None, events or None, indices, unknown tag).

    Refuses (KustomizationError) several documents, collections nested over :data:`MAX_DEPTH`,
    a key written twice in one mapping, undefined and self-referencing aliases, and aliases that
    expand to more than :data:`MAX_ALIAS_EXPANSION` extra nodes — counting, never expanding.
    With ``record``, also returns every event, to compare an edit's result with (:func:`verify_edit`).
    Scalars stay bare events (most nodes are scalars; a wrapper each would double the cost).
    """
    get, offset = parse_events(text)
    events: list | None = [] if record else None
    anchors: dict[str, object] = {}
    # An open collection: [node, pending key (mappings), keys seen (mappings)]
    stack: list[list] = []
    roots: list = []
    scalar_index: dict[int, int] = {}  # the root's and its direct values' scalars -> event index
    documents = written = 0
    unknown: tuple[str, Node] | None = None
    cap = 1 << 62
    count = -1
    known = KNOWN_TAGS
    scalar_event, map_start, seq_start = _ev.ScalarEvent, _ev.MappingStartEvent, _ev.SequenceStartEvent
    map_end, seq_end, alias_event = _ev.MappingEndEvent, _ev.SequenceEndEvent, _ev.AliasEvent
    mapping_class, sequence_class = MappingNode, SequenceNode

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
                unknown = (event.tag, Scalar(event, offset))
            if len(stack) <= 1:
                scalar_index[id(event)] = count
        elif kind is map_start or kind is seq_start:
            if len(stack) >= MAX_DEPTH:
                raise too_deep(source, f" at {position_of(event.start_mark)}")
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
                    f"{source}: invalid YAML at {position_of(event.start_mark)}: found undefined alias "
                    f"*{event.anchor}; define the anchor before using it",
                    reason="invalid-yaml",
                )
            if node.__class__ is scalar_event:
                size = 1
            else:
                if any(frame[0] is node for frame in stack):
                    raise KustomizationError(
                        f"{source}: the node &{event.anchor} at {position_of(node.start_mark)} contains an alias "
                        "to itself (a recursive document); kustomize refuses it too — write the values out",
                        reason="recursive-alias",
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
                            f"{source}: duplicate key {key!r} at {position_of(node.start_mark)} "
                            f"(first at {position_of(first.start_mark)}); remove one of them",
                            reason="duplicate-key",
                        )
                    frame[2][key] = node
        else:
            parent.value.append((frame[1], node))
            frame[1] = None

    if documents > 1:
        raise KustomizationError(
            f"{source}: {documents} YAML documents (separated by '---'); a kustomization is one document, "
            "move the others to their own files",
            reason="multiple-documents",
        )
    root = roots[0] if roots else None
    root_size = 1 if root is None or root.__class__ is scalar_event else root.size
    if root_size - written > MAX_ALIAS_EXPANSION:
        raise KustomizationError(
            f"{source}: uses YAML aliases that expand to more than {MAX_ALIAS_EXPANSION} nodes "
            f"({root_size if root_size < cap else 'astronomically many'} once expanded, from "
            f"{written} written: a 'billion laughs' document); kustomize refuses it too — "
            "write the values out without anchors and aliases",
            reason="alias-bomb",
        )
    return root, events, scalar_index, unknown, offset


@dataclass
class YamlTree:
    """Any one-document YAML text read for positions: its root (a collection node, a scalar event or
    None), every event in order, and the offset to add to their indices (a leading BOM)."""

    text: str
    root: object
    events: list
    offset: int


def parse_tree(text: str, source: str) -> YamlTree:
    """``text`` read with the guards of :func:`parse_document` (size, nesting, aliases, duplicate keys)
    but no kustomization shape: for readers of other YAML files (a Helm values file)."""
    if not isinstance(text, str):
        raise TypeError("text must be str")
    refuse_oversize(text, source)
    try:
        root, events, _scalars, _unknown, offset = _compose(text, source, record=True)
    except yaml.YAMLError as exc:
        raise yaml_error(exc, source) from None
    return YamlTree(text, root, events, offset)


def parse_document(text: str, source: str, *, check_size: bool = True, record: bool = False) -> ParsedDoc:
    if not isinstance(text, str):
        raise TypeError("text must be str")
    if check_size:
        refuse_oversize(text, source)
    try:
        root, events, scalar_index, unknown, offset = _compose(text, source, record=record)
    except yaml.YAMLError as exc:
        raise yaml_error(exc, source) from None
    scalar = _ev.ScalarEvent
    null_root = None
    if root is not None and root.__class__ is scalar:
        if not is_null(root):
            raise KustomizationError(
                f"{source}: the top level is a scalar, not a mapping; "
                "a kustomization is a mapping (apiVersion, kind, resources, images, ...)",
                reason="not-a-mapping",
            )
        root, null_root = None, Scalar(root, offset)
    if root is not None and root.__class__ is not MappingNode:
        raise KustomizationError(
            f"{source}: the top level is a sequence, not a mapping; "
            "a kustomization is a mapping (apiVersion, kind, resources, images, ...)",
            reason="not-a-mapping",
        )
    doc = ParsedDoc(text, source, root, None, None, None, [], events, unknown, null_root, scalar_index)
    if root is None:
        return doc
    for key, value in root.value:
        if key.__class__ is scalar and key.value == "images":
            doc.images_key = Scalar(key, offset)
            if value.__class__ is scalar and is_null(value):
                doc.images_null = Scalar(value, offset)
            elif value.__class__ is SequenceNode:
                doc.images = value
            else:
                raise KustomizationError(
                    f"{source}: images: at {position_of(make_node(value, offset).start_mark)} is not a list; "
                    "write it as a list of entries (- name: ...)",
                    reason="images-not-a-list",
                )
    if doc.images is None:
        return doc
    entries = doc.entries
    for index, item in enumerate(doc.images.value):
        if item.__class__ is not MappingNode:
            where = f"images[{index}] at {position_of(make_node(item, offset).start_mark)}"
            raise KustomizationError(
                f"{source}: {where} is not a mapping; an entry is name/newName/newTag/digest",
                reason="entry-not-a-mapping",
            )
        name = new_name = aliased = None
        named = False
        for key, value in item.value:
            if key.__class__ is not scalar or key.value == "<<":
                raise KustomizationError(
                    f"{source}: images[{index}] at {position_of(item.start_mark)} uses a merge key or complex key; "
                    "write the entry out in full",
                    reason="complex-key",
                )
            if value.__class__ is not scalar:
                raise KustomizationError(
                    f"{source}: images[{index}] at {position_of(item.start_mark)}: {key.value} must be a single "
                    "value, not a list or mapping",
                    reason="entry-value-not-scalar",
                )
            field = key.value
            # an alias: the anchored value it stands for was written before this key (YAML defines
            # an anchor before any alias to it)
            if value.anchor is not None and aliased is None and value.start_mark.index < key.end_mark.index:
                aliased = (field, value.anchor)
            if field == "name":
                named = not is_null(value)
                name = value.value if named else None
            elif field == "newName" and not is_null(value):
                new_name = value.value
        if not named:
            raise KustomizationError(
                f"{source}: images[{index}] at {position_of(item.start_mark)} has no name; every images entry needs one",
                reason="entry-without-name",
            )
        entries.append(ParsedEntry(index, item, offset, name, new_name, aliased))
    return doc


def find_entry(doc: ParsedDoc, name: str, *, by_new_name: bool = True) -> ParsedEntry | None:
    """The entry whose ``name`` is ``name`` (kustomize's own match), else — ``by_new_name`` — whose ``newName`` is."""
    for field in ("name", "new_name") if by_new_name else ("name",):
        hits: list[ParsedEntry] = []
        for e in doc.entries:  # an aliased entry (`- *x`) is the same node twice: count it once
            if getattr(e, field) == name and all(h.node is not e.node for h in hits):
                hits.append(e)
        if len(hits) > 1:
            lines = ", ".join(str(e.node.line + 1) for e in hits)
            shown = "newName" if field == "new_name" else field
            raise KustomizationError(
                f"{doc.source}: image {name!r} is the {shown} of {len(hits)} images entries "
                f"(lines {lines}); keep one",
                reason="ambiguous-entry",
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
    with gc_paused():
        return [entry.to_model() for entry in parse_document(text, source).entries]


def get_image(
    text: str, name: str, *, by_new_name: bool = True, source: str = "kustomization.yaml"
) -> ImagesEntry | None:
    """Return the entry whose ``name`` (else, ``by_new_name``, whose ``newName``) is ``name``, or None."""
    with gc_paused():
        entry = find_entry(parse_document(text, source), name, by_new_name=by_new_name)
        return entry.to_model() if entry else None

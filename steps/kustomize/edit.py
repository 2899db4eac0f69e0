"""Editing: :func:`set_image` sets an ``images`` entry's name, tag and digest, changing only those lines.

Finds the entry (:mod:`steps.kustomize.reader`), plans the change (set a value, remove a key, insert
keys, or add an entry in the document's own sequence style), splices the text
(:mod:`steps.kustomize.splice`) and proves the result (:mod:`steps.kustomize.verify`). When nothing
must change, the input string itself is returned. :func:`edit_image` is the same edit, returning
also the entry before and after it, from the same parse (a caller that reports what changed need
not parse the file again). Pure.

How: the document is parsed with libyaml (PyYAML's C binding, one pass over its events) for
*positions* — where the ``images`` entry, its keys and values start and end — and the original text
is spliced at those places: a value's span is replaced, a new key line is inserted after the entry's
last key line with the entry's own key indentation, a removed key's line(s) are deleted. Comments,
blank lines, indentation style, key order, quoting, ``---`` markers, a BOM and CRLF endings are
never rewritten, and long digests are never wrapped, because nothing is re-dumped. The result is
parsed again and compared with what was meant; if it differs, :class:`KustomizationError` is raised
rather than returning a wrong file. A tag YAML does not define (``!Ref``, ``!!python/…``) is refused:
kustomize ignores such tags, so what the file means to it is not what it says. Setting a tag alone
removes ``digest`` (a digest overrides the tag); setting a digest alone removes ``newTag``; both may
be set together; ``*`` (:data:`~steps.kustomize.spec.KEEP`) keeps a part as the file has it, as in
kustomize's ``NAME=*:TAG``. A scalar YAML 1.1 or 1.2 would read as something other than a string
(``1.10``, ``1e3``, ``true``, ``yes``, ``null``, ``0x1F``, ``010``, ``~``) is quoted. Linear in the
size of the file: ``python -m bench.hostile`` times a 1 MiB kustomization.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from yaml import events as _ev

from steps.domain.errors import ConfigError, ImageNotFoundError, KustomizationError
from steps.domain.events import validate_digest, validate_tag
from steps.domain.models import ImagesEntry
from steps.kustomize.flow import add_to_flow_mapping
from steps.kustomize.reader import ParsedDoc, ParsedEntry, find_entry, parse_document
from steps.kustomize.spec import KEEP, validate_image_name
from steps.kustomize.splice import (
    Splicer,
    colon_after,
    end_of_line,
    end_of_line_content,
    entry_last_end,
    format_scalar,
    insert_keys,
    line_ending,
    refuse_edit,
    remove_key,
    set_value,
    start_of_line,
)
from steps.kustomize.verify import (
    MAP_END,
    MAP_START,
    SEQ_END,
    SEQ_START,
    Change,
    can_verify_window,
    verify_edit,
)
from steps.kustomize.yaml_nodes import (
    IMAGE_FIELDS,
    LINE_BREAK,
    STR_TAG,
    MappingNode,
    Scalar,
    SequenceNode,
    gc_paused,
    position_of,
    refuse_anchor,
)

# --------------------------------------------------------------------------------------------
# Adding an entry


def _sequence_style(doc: ParsedDoc) -> tuple[int, int]:
    """(indent of '-' relative to the parent key, key offset after '-') used by the file."""
    if doc.root is not None:
        for key, value in doc.root.value:
            if type(value) is SequenceNode and not value.flow_style and value.value:
                dash = value.start_mark.column - key.start_mark.column
                first = value.value[0]
                offset = 2
                if type(first) is MappingNode and not first.flow_style:
                    offset = first.start_mark.column - value.start_mark.column
                return max(dash, 0), max(offset, 2)
    return 0, 2  # what `kustomize edit set image` writes


def _block_entry(pairs: list[tuple[str, str]], dash_col: int, offset: int, eol: str) -> str:
    lines = []
    for i, (k, v) in enumerate(pairs):
        lead = " " * dash_col + "-" + " " * (offset - 1) if i == 0 else " " * (dash_col + offset)
        lines.append(f"{lead}{k}: {format_scalar(v, None, False)}")
    return eol.join(lines)


def _add_entry(sp: Splicer, doc: ParsedDoc, pairs: list[tuple[str, str]]) -> Change:
    """Splice a new entry in (appending to ``images:``, or creating it); the change it makes to the events."""
    text = doc.text
    entry = ("mapping", None, [(k, ("str", v)) for k, v in pairs])
    src = doc.source
    flow_entry = "{" + ", ".join(f"{k}: {format_scalar(v, None, True)}" for k, v in pairs) + "}"
    if doc.images is None and doc.root is not None and doc.root.flow_style:
        return add_to_flow_mapping(sp, doc, entry, "[" + flow_entry + "]")
    if doc.images is not None:
        seq = doc.images
        refuse_anchor(seq, "images:", src)
        if seq.flow_style:
            if seq.value:
                last = seq.value[-1]
                sp.insert(last.end_mark.index, ", " + flow_entry)
            else:
                close = seq.end_mark.index - 1
                if text[close] != "]":  # pragma: no cover - libyaml marks the end after ']'
                    raise KustomizationError(f"{src}: cannot find the end of images: [...]")
                sp.insert(close, flow_entry)
            return Change(seq.last, 0, [entry])
        last_entry = doc.entries[-1]
        last_end = entry_last_end(text, last_entry, list(last_entry.keys))
        eol = line_ending(text, last_end)
        dash_col = seq.start_mark.column
        if last_entry.flow:
            new = " " * dash_col + "- " + flow_entry
        else:
            offset = max(last_entry.node.start_mark.column - _dash_column(text, last_entry.node), 2)
            new = _block_entry(pairs, dash_col, offset, eol)
        at = end_of_line_content(text, last_end)
        sp.insert(at, eol + new)
        change = Change(seq.last, 0, [entry])
        if can_verify_window(doc):
            # the new lines (after a line break), and the one that ended the last entry's line
            end = end_of_line(text, at)
            change.window = (at, end + len(eol) + len(new), at, end)
        return change
    dash, offset = _sequence_style(doc)
    if doc.images_key is not None:  # `images:` with no value (or ~ / null)
        key = doc.images_key
        col = key.start_mark.column
        colon = colon_after(text, key)
        null = doc.images_null
        if null is not None and null.end_mark.index > null.start_mark.index:
            refuse_anchor(null, "images:", src)
            sp.replace(colon, null.end_mark.index, "")
        eol = line_ending(text, colon)
        sp.insert(end_of_line_content(text, colon), eol + _block_entry(pairs, col + dash, offset, eol))
        return Change(_event_index(doc, null), 1, [SEQ_START, entry, SEQ_END])
    eol = line_ending(text)
    col = doc.root.start_mark.column if doc.root is not None else 0
    end_marker = re.search(r"(?m)^\.\.\.[ \t]*(#.*)?$", text)
    if end_marker:  # appending after `...` would start a second document
        line = len(LINE_BREAK.findall(text, 0, end_marker.start())) + 1
        raise KustomizationError(
            f"{src}: the document ends with '...' at line {line}; remove that line or add images: by hand",
            reason="document-end-marker",
        )
    prefix = "" if not text or LINE_BREAK.search(text[-1]) or text == "\ufeff" else eol
    block = " " * col + "images:" + eol + _block_entry(pairs, col + dash, offset, eol) + eol
    sp.insert(len(text), prefix + block)
    images = [("event", _ev.ScalarEvent(None, None, (True, False), "images")), SEQ_START, entry, SEQ_END]
    if doc.root is not None:  # before the end of the top-level mapping
        return Change(doc.root.last, 0, images)
    mapping = [MAP_START, *images, MAP_END]
    if doc.null_root is not None:  # an empty document (`---` alone, or `~`): its null becomes the mapping
        return Change(_event_index(doc, doc.null_root), 1, mapping)
    return Change(1, 0, [("event", _ev.DocumentStartEvent()), *mapping, ("event", _ev.DocumentEndEvent())])


def _event_index(doc: ParsedDoc, node: Scalar) -> int:
    assert doc.scalar_index is not None
    return doc.scalar_index[id(node.event)]


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


@dataclass(frozen=True)
class ImageEdit:
    """What :func:`edit_image` did: the new text, and the entry before and after the edit."""

    #: The kustomization after the edit; the input string itself when nothing had to change.
    text: str
    #: The entry as the file had it; None when it was added.
    old: ImagesEntry | None
    #: The entry as the new text has it (proven by parsing the result, :func:`verify_edit`).
    new: ImagesEntry
    #: Whether the text changed.
    changed: bool


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
        add: append a new entry (creating ``images:`` if absent) when ``name`` is not found. In
            a new entry ``*`` has nothing to keep and is left out, as kustomize leaves it out; an
            entry that would then set nothing (``NAME:*``) is refused.
        by_new_name: also find the entry by ``newName`` when no ``name`` matches — the pipeline's
            default for a rule without ``imageName`` (the pushed repository URI is often the
            ``newName``). ``kustomize edit set image`` matches ``name`` only; ``imagebump
            set-image`` passes False.
        source: how to name the file in messages.

    Raises:
        ConfigError: an invalid tag, digest or name, or nothing to set (also: only ``*`` for an
            entry to add).
        ImageNotFoundError: ``name`` is not in ``images`` and ``add`` is false (``.found``
            lists the names that are).
        KustomizationError: the file cannot be parsed or edited safely (an unknown YAML tag
            such as ``!Ref`` included).
    """
    return edit_image(
        text,
        name,
        new_name=new_name,
        tag=tag,
        digest=digest,
        add=add,
        by_new_name=by_new_name,
        source=source,
    ).text


def edit_image(
    text: str,
    name: str,
    *,
    new_name: str | None = None,
    tag: str | None = None,
    digest: str | None = None,
    add: bool = False,
    by_new_name: bool = True,
    source: str = "kustomization.yaml",
) -> ImageEdit:
    """:func:`set_image`, returning also the entry before and after the edit (one parse of ``text``,
    one of the result to prove it). Arguments and errors are :func:`set_image`'s."""
    with gc_paused():  # the document's events are freed (by reference count) before it resumes
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
) -> ImageEdit:
    if not name or not isinstance(name, str):
        raise ConfigError("image name must be a non-empty string")
    if tag is None and digest is None and new_name is None:
        raise ConfigError(
            f"nothing to set for image {name!r}: give a tag, a digest or a new name", reason="nothing-to-set"
        )
    if tag is not None and tag != KEEP:
        validate_tag(tag, error=ConfigError)
    if digest is not None and digest != KEEP:
        validate_digest(digest, error=ConfigError)
    if new_name is not None and new_name != KEEP:
        validate_image_name(new_name, "new name")

    doc = parse_document(text, source, record=True)
    if doc.unknown_tag is not None:
        tag_name, node = doc.unknown_tag
        shown = repr(tag_name) if len(tag_name) <= 80 else repr(tag_name[:77] + "...")
        raise KustomizationError(
            f"{source}: unknown YAML tag {shown} at {position_of(node.start_mark)}; set-image edits only plain YAML "
            "(kustomize ignores such tags): remove the tag",
            reason="unknown-tag",
        )
    entry = find_entry(doc, name, by_new_name=by_new_name)
    sp = Splicer(text)
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
        pairs = [("name", name)] + [(f, desired[f]) for f in IMAGE_FIELDS[1:] if desired.get(f) is not None]
        if len(pairs) == 1:  # only '*' given: kustomize would add a bare `- name:` that changes nothing
            raise ConfigError(
                f"image {name!r} is not in {source}, and '*' keeps a part of an existing entry: a new one "
                f"has nothing to keep. Give what to set, e.g. {name}:TAG, {name}@sha256:… or {name}=NEWNAME",
                reason="nothing-to-set",
            )
        change = _add_entry(sp, doc, pairs)
        result = sp.apply()
        verify_edit(doc, result, change)
        return ImageEdit(result, None, ImagesEntry.of(dict(pairs)), True)

    what = f"images entry {entry.value('name')!r}"
    to_insert: list[tuple[str, str]] = []
    removed: list[str] = []
    for field in IMAGE_FIELDS[1:]:
        if field not in desired:
            continue
        want = desired[field]
        if want is None:
            if field in entry.keys:
                refuse_edit(doc, entry, what)
                remove_key(sp, doc, entry, field)
                removed.append(field)
        elif field in entry.keys:
            if entry.keys[field][1].tag != STR_TAG or entry.keys[field][1].value != want:
                refuse_edit(doc, entry, what)
            set_value(sp, doc, entry, field, want)
        else:
            refuse_edit(doc, entry, what)
            to_insert.append((field, want))
    keep = [k for k in entry.keys if k not in removed]
    insert_keys(sp, doc, entry, to_insert, keep)
    old = entry.to_model()
    if not sp.edits:
        return ImageEdit(text, old, old, False)
    result = sp.apply()
    verify_edit(doc, result, _entry_change(doc, entry, desired, removed, to_insert, sp, result))
    # the entry the result holds (just proven): its keys in order, set ones as set
    after = {k: entry.value(k) for k in keep}
    after.update((field, want) for field, want in desired.items() if want is not None)
    return ImageEdit(result, old, ImagesEntry.of(after), True)


def _entry_change(
    doc: ParsedDoc,
    entry: ParsedEntry,
    desired: dict[str, str | None],
    removed: list[str],
    inserted: list[tuple[str, str]],
    sp: Splicer,
    result: str,
) -> Change:
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
    change = Change(first, last - first + 1, [("mapping", original[first], fields)])
    text = doc.text
    if can_verify_window(doc):
        start = start_of_line(text, entry.node.start)
        if text[start : entry.node.start].strip(" ") == "-":
            last_end = entry.node.end if entry.flow else entry_last_end(text, entry, list(entry.keys))
            rest = text[last_end : end_of_line_content(text, last_end)].strip(" ")
            end = end_of_line(text, last_end)
            if (not rest or rest.startswith("#")) and all(start <= e[0] and e[1] <= end for e in sp.edits):
                change.window = (start, end + len(result) - len(text), start, end)
    return change

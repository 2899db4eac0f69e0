"""Proving an edit: the result parsed again says exactly what was meant, or the edit is refused.

:func:`verify_edit` compares the result's events with the original's: the same outside the change,
exactly the intended entry inside it (:class:`Change`); a large file is checked in the changed
lines alone when that is equivalent (:func:`_verify_window`). ``_Mismatch``
(:class:`steps.domain.errors.EditMismatch`) is raised and caught here and leaves as
:class:`~steps.domain.errors.KustomizationError`.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml
from yaml import events as _ev

from steps.domain.errors import EditMismatch as _Mismatch
from steps.domain.errors import KustomizationError
from steps.kustomize.reader import ParsedDoc
from steps.kustomize.splice import line_ending
from steps.kustomize.yaml_nodes import STR_TAG, CParser, parse_events, resolve_tag, same_value, yaml_error

# --------------------------------------------------------------------------------------------
# Verifying


def _is_string(event, value: str) -> bool:
    """Whether ``event`` is a scalar that reads as the string ``value`` (YAML 1.2, as kustomize reads it)."""
    if type(event) is not _ev.ScalarEvent or event.value != value or event.anchor is not None:
        return False
    if event.tag is not None:
        return event.tag in ("!", STR_TAG)
    if not event.implicit[0]:  # quoted
        return True
    return resolve_tag(value) == STR_TAG


SEQ_START = ("event", _ev.SequenceStartEvent(None, None, True))
SEQ_END = ("event", _ev.SequenceEndEvent())
MAP_START = ("event", _ev.MappingStartEvent(None, None, True))
MAP_END = ("event", _ev.MappingEndEvent())


@dataclass
class Change:
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
    if head is not None and not same_value(event, head):
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
        if how == "event" and not same_value(value, want):
            raise _Mismatch(f"{field} changed")


def verify_edit(before: ParsedDoc, result: str, change: Change) -> None:
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
    same = same_value
    try:
        get, _ = parse_events(result)
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
            f"{before.source}: the edit produced invalid YAML ({yaml_error(exc, 'result')}); the file was not "
            "changed. This is a bug, please report it with the file",
            reason="edit-mismatch",
        ) from None
    except _Mismatch as exc:
        raise KustomizationError(
            f"{before.source}: the edit did not read back as intended ({exc}); the file was not changed. "
            "This is a bug, please report it with the file",
            reason="edit-mismatch",
        ) from None


def can_verify_window(doc: ParsedDoc) -> bool:
    """Whether an entry of ``doc`` can be checked in its own lines (:func:`_verify_window`)."""
    return (
        CParser is not None
        and doc.images is not None
        and not doc.images.flow_style
        and doc.images_key is not None
        and doc.images_key.style is None
        and doc.images_key.explicit_tag is None
        and doc.events is not None
        and getattr(doc.events[1], "tags", None) is None  # no %TAG directive
    )


def _verify_window(before: ParsedDoc, result: str, change: Change) -> bool:
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
    :func:`verify_edit` compares the whole result event by event instead.
    """
    original = before.events
    assert original is not None and before.images_key is not None
    start, end, old_start, old_end = change.window
    text = before.text
    if result[:start] != text[:old_start] or result[end:] != text[old_end:]:
        return False  # an edit outside the entry's lines: the whole-file comparison will say where
    key = before.images_key
    prefix = " " * key.column + "images:" + line_ending(before.text, key.end)
    (item,) = [i for i in change.region if i[0] == "mapping"]
    region_events = 2 + 2 * len(item[2])
    try:
        get, _ = parse_events(prefix + result[start:end])
        expect = [_ev.StreamStartEvent, _ev.DocumentStartEvent, _ev.MappingStartEvent, _ev.ScalarEvent]
        expect.append(_ev.SequenceStartEvent)
        head = [get() for _ in expect]
        if [type(e) for e in head] != expect or head[3].value != "images":
            return False
        _read_mapping(get, item[1], item[2])
        tail = [type(get()) for _ in range(4)]
        if tail != [_ev.SequenceEndEvent, _ev.MappingEndEvent, _ev.DocumentEndEvent, _ev.StreamEndEvent]:
            return False
        total = CParser(result).raw_parse()
    except (yaml.YAMLError, _Mismatch):
        return False
    return total == len(original) - change.removed + region_events

"""Hold markers: ``# imagebump:hold [reason]`` on any line of an images entry (:mod:`steps.domain.intent`).

Pure. :func:`hold_marker` finds the marker on the entry :func:`~steps.kustomize.reader.get_image`
finds; :data:`HOLD_MARKER_RE` is what the line editor keeps when it removes a key's line
(:mod:`steps.kustomize.splice`), so the marker survives every edit.
"""

from __future__ import annotations

import re

from steps.kustomize.reader import ParsedEntry, find_entry, parse_document
from steps.kustomize.yaml_nodes import gc_paused

#: ``# imagebump:hold [reason]``: a comment on any line of an images entry holds it
#: (:mod:`steps.domain.intent`); the word must end there (``imagebump:holder`` is no marker).
HOLD_MARKER_RE = re.compile(
    r"(?:^|(?<=[ \t]))#[ \t]*imagebump:hold(?![\w:-])[ \t]*(?P<reason>[^\r\n]*)", re.M
)


_DASH_THEN_COMMENT = re.compile(r"([ \t]*)-[ \t]+#")


def _comment_only(line: str) -> bool:
    return line.lstrip(" \t").startswith("#")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _entry_lines(text: str, entry: ParsedEntry) -> tuple[int, int]:
    """The character span of an entry's lines: from its dash's line to its last value's line, with
    the comment lines directly above it at the dash's column and those right after it indented
    deeper than the dash (comments a person wrote inside or about the entry)."""
    start = entry.node.start
    i = start - 1
    while i >= 0 and text[i] in " \t\r\n":
        i -= 1
    dash = i if i >= 0 and text[i] == "-" and not entry.flow else start
    if dash == start and i >= 0 and not entry.flow:  # `- # a comment` on the dash's line, keys below
        line_start = text.rfind("\n", 0, i) + 1
        m = _DASH_THEN_COMMENT.match(text, line_start, i + 1)
        if m is not None:
            dash = line_start + len(m.group(1))
    first = text.rfind("\n", 0, dash) + 1
    column = dash - first
    ends = [value.end for _key, value in entry.keys.values()] if not entry.flow else []
    last = max(ends, default=entry.node.end)
    stop = text.find("\n", last)
    stop = len(text) if stop < 0 else stop
    while first > 0:  # comment lines above, at the dash's column
        above = text.rfind("\n", 0, first - 1) + 1
        line = text[above : first - 1]
        if not (_comment_only(line) and _indent(line) == column):
            break
        first = above
    while stop < len(text):  # comment lines below, deeper than the dash
        nxt = text.find("\n", stop + 1)
        nxt = len(text) if nxt < 0 else nxt
        line = text[stop + 1 : nxt]
        if not (_comment_only(line) and _indent(line) > column):
            break
        stop = nxt
    return first, stop


def hold_marker(
    text: str, name: str, *, by_new_name: bool = True, source: str = "kustomization.yaml"
) -> str | None:
    """The reason of the ``# imagebump:hold [reason]`` comment on the entry :func:`get_image` finds
    ("" when it gives none), or None when the entry has no such comment (or there is no entry).

    A ``#`` inside one of the entry's values (a quoted scalar) is no comment.
    """
    if "imagebump:hold" not in text:
        return None  # the common case costs no parse
    with gc_paused():
        doc = parse_document(text, source)
        entry = find_entry(doc, name, by_new_name=by_new_name)
        if entry is None:
            return None
        first, stop = _entry_lines(doc.text, entry)
        spans = [(n.start, n.end) for pair in entry.keys.values() for n in pair]
        for m in HOLD_MARKER_RE.finditer(doc.text, first, stop):
            if not any(a <= m.start() < b for a, b in spans):
                return m["reason"].strip()
    return None

"""Hold markers: ``# imagebump:hold [reason]`` on a YAML node (:mod:`steps.domain.intent`). Pure.

One finder for every caller (edit-kustomize, reconcile, commit-pr's re-check, ``set-image``):
:func:`hold_marker` finds the marker of the ``images`` entry :func:`~steps.kustomize.reader.get_image`
finds; :func:`hold_at` that of any node of any YAML file, by its path from the root (a Helm values
file's ``image:`` mapping); :func:`node_hold` is the core both use. :data:`HOLD_MARKER_RE` is what
the line editor keeps when it removes a key's line (:mod:`steps.kustomize.splice`).

Which comments are a node's is decided on the parsed document, not on lines alone: libyaml's events
give every scalar's span (a ``#`` inside one, a block scalar's body included, is no comment) and
every sibling's extent. A *lead* starts a node: its ``-`` in a block sequence, its key in a mapping,
its first character in a flow sequence. A node's comments are:

- those from its lead to the end of its content (after the dash, on the key's line, inside a flow
  mapping's braces, on any key's line);
- those after its content on its last line, up to where the next sibling starts;
- the comment lines after it indented deeper than its lead (blank lines between them allowed);
- the comment lines above its lead, back to its previous sibling (less what that sibling's own
  deeper comment lines take) or, for a first child, back to the nearest line with content;
- in a flow collection, what lies between its opening bracket and its first child is that child's,
  and between its last child and its closing bracket, that child's.

A comment therefore belongs to at most one of a collection's children. Lines end at every YAML line
break (:data:`~steps.kustomize.yaml_nodes.LINE_BREAK`: CR LF, CR, LF, NEL, U+2028, U+2029), the
same definition the line editor splices with.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence

from yaml import events as _ev

from steps.kustomize.reader import find_entry, parse_document, parse_tree
from steps.kustomize.yaml_nodes import (
    LINE_BREAK,
    LINE_BREAK_CHARS,
    gc_paused,
    line_end,
    line_start,
    next_line,
)

#: ``# imagebump:hold [reason]`` in a comment's text (from its ``#`` to the end of its line): the
#: word must end there (``imagebump:holder`` is no marker); a later ``#`` after a blank starts a
#: marker too (``# freeze # imagebump:hold``).
HOLD_MARKER_RE = re.compile(
    r"(?:^|(?<=[ \t]))#[ \t]*imagebump:hold(?![\w:-])[ \t]*(?P<reason>[^\r\n\x85\u2028\u2029]*)"
)
_MARKER_WORD = "imagebump:hold"
#: The longest reason kept, in characters: it is shown in every report and output; the rest of a
#: longer one is cut with a note saying how much.
MAX_REASON = 200
_BLANK = " \t\ufeff"
#: What may stand before a first child's lead on its line for the comment lines above it to be its
#: own: indentation and the indicators that open it (``- - x``, ``[``, ``{``, ``,``).
_LEAD_PREFIX = " \t\ufeff-[{,?:"
_COLLECTION_START = (_ev.MappingStartEvent, _ev.SequenceStartEvent)
_COLLECTION_END = (_ev.MappingEndEvent, _ev.SequenceEndEvent)


class _Comments:
    """Where the comments of a text are: a ``#`` at a line's start or after a blank, in no scalar."""

    def __init__(self, text: str, events: list, offset: int) -> None:
        self.text = text
        starts: list[int] = []
        ends: list[int] = []
        for event in events:
            if event.__class__ is not _ev.ScalarEvent:
                continue
            start, end = event.start_mark.index + offset, event.end_mark.index + offset
            if event.style in ("|", ">"):  # the header line's comment is a comment, the body is not
                m = LINE_BREAK.search(text, start, end)
                start = m.end() if m else end
            if end > start:
                starts.append(start)
                ends.append(end)
        self.starts, self.ends = starts, ends

    def _in_scalar(self, pos: int) -> bool:
        i = bisect_right(self.starts, pos) - 1
        return i >= 0 and pos < self.ends[i]

    def first(self, start: int, stop: int) -> int:
        """The first comment's ``#`` in ``text[start:stop]`` (one line or part of one), else ``stop``."""
        text = self.text
        p = text.find("#", start, stop)
        while p >= 0:
            if (p == 0 or text[p - 1] in _BLANK or text[p - 1] in LINE_BREAK_CHARS) and not self._in_scalar(
                p
            ):
                return p
            p = text.find("#", p + 1, stop)
        return stop

    def line(self, pos: int) -> tuple[int, int, int]:
        """(start, the first comment's ``#`` or the end, end) of the line holding ``pos``."""
        start, end = line_start(self.text, pos), line_end(self.text, pos)
        return start, self.first(start, end), end

    def markers(self, start: int, stop: int):
        """The reasons of the hold markers in the comments that start in ``text[start:stop]``
        (``start`` is never inside a comment). Each line is looked at once: linear in the span."""
        text = self.text
        found = text.find(_MARKER_WORD, start, stop)
        while found >= 0:
            end = line_end(text, found)
            comment = self.first(max(start, line_start(text, found)), min(end, stop))
            if comment < min(end, stop):  # a comment runs to the end of its line
                m = HOLD_MARKER_RE.search(text[comment:end])
                if m is not None:
                    yield _cut(m["reason"].strip())
            found = text.find(_MARKER_WORD, end, stop)


def _cut(reason: str) -> str:
    if len(reason) <= MAX_REASON:
        return reason
    return f"{reason[:MAX_REASON]}… [{len(reason) - MAX_REASON} more characters]"


def _break_before(text: str, pos: int) -> int:
    """Where the line break that ends just before ``pos`` starts (``\r\n`` is one break)."""
    return pos - 2 if pos >= 2 and text[pos - 2 : pos] == "\r\n" else pos - 1


def _node_end(events: list, i: int) -> int:
    """The index of the last event of the node whose first event is ``events[i]``."""
    if events[i].__class__ not in _COLLECTION_START:
        return i
    depth = 0
    for j in range(i, len(events)):
        kind = events[j].__class__
        if kind in _COLLECTION_START:
            depth += 1
        elif kind in _COLLECTION_END:
            depth -= 1
            if depth == 0:
                return j
    return len(events) - 1  # pragma: no cover - libyaml always closes what it opens


def _children(events: list, first: int, last: int) -> list[tuple[int, int]]:
    """The (first, last) event indices of each child of the collection ``events[first..last]``."""
    out = []
    i = first + 1
    while i < last:
        j = _node_end(events, i)
        out.append((i, j))
        i = j + 1
    return out


class _Siblings:
    """The children of one collection with what the hold rules need: each one's lead, the end of its
    content, and the column of its lead."""

    def __init__(self, text: str, comments: _Comments, events: list, first: int, last: int, offset: int):
        self.text, self.comments, self.events, self.offset = text, comments, events, offset
        spans = _children(events, first, last)
        start = events[first]
        self.flow = bool(start.flow_style)
        # a flow collection's brackets: what lies between one and the nearest child is that child's
        self.open = start.end_mark.index + offset
        self.close = events[last].start_mark.index + offset
        if start.__class__ is _ev.MappingStartEvent:  # a child is a key with its value
            self.spans = [(spans[k][0], spans[k + 1][1]) for k in range(0, len(spans) - 1, 2)]
            self.keyed = True
        else:
            self.spans = spans
            self.keyed = False

    def __len__(self) -> int:
        return len(self.spans)

    def _start(self, i: int) -> int:
        return self.events[i].start_mark.index + self.offset

    def lead(self, k: int) -> int:
        start = self._start(self.spans[k][0])
        if self.keyed or self.flow:
            return start
        return self._dash(start)

    def _dash(self, start: int) -> int:
        """The ``-`` before a block sequence's item: only blanks, line breaks and comments between."""
        text, p = self.text, start
        while p > 0:
            c = text[p - 1]
            if c in _BLANK:
                p -= 1
            elif c == "-":
                return p - 1
            elif c in LINE_BREAK_CHARS:
                _, p, _ = self.comments.line(_break_before(text, p))  # the previous line, less its comment
            else:
                break
        return start  # pragma: no cover - libyaml found a block item, so there is a dash

    def end(self, k: int) -> int:
        """Where the content of child ``k`` ends: its last token with a width (a key whose value is
        empty, a scalar less its trailing blank lines, a flow collection's closing bracket)."""
        first, last = self.spans[k]
        events, text = self.events, self.text
        for j in range(last, first - 1, -1):
            event = events[j]
            start, end = event.start_mark.index + self.offset, event.end_mark.index + self.offset
            if end > start and event.__class__ not in _COLLECTION_START:
                if event.__class__ is _ev.ScalarEvent:
                    while end > start and (text[end - 1] in _BLANK or text[end - 1] in LINE_BREAK_CHARS):
                        end -= 1
                return end
        return self._start(first)

    def column(self, k: int) -> int:
        lead = self.lead(k)
        return lead - line_start(self.text, lead)

    def below(self, k: int, limit: int | None) -> int:
        """Where the comment lines after child ``k`` that are still its own end: those indented
        deeper than its lead, with blank lines among them, before ``limit`` (the next lead)."""
        text, comments = self.text, self.comments
        column = self.column(k)
        pos = next_line(text, self.end(k))
        owned = line_end(text, self.end(k)) if limit is None else min(line_end(text, self.end(k)), limit)
        while pos < len(text) and (limit is None or next_line(text, pos) <= limit):
            start, comment, end = comments.line(pos)
            content = text[start:comment].strip(_BLANK)
            if content or (comment < end and comment - start <= column):
                break
            if comment < end:
                owned = end
            pos = next_line(text, pos)
        return owned

    def ranges(self, k: int) -> list[tuple[int, int]]:
        """The spans of text whose comments are child ``k``'s."""
        text, comments = self.text, self.comments
        lead, end = self.lead(k), self.end(k)
        after = self.lead(k + 1) if k + 1 < len(self) else None
        trailing = line_end(text, end) if after is None else min(line_end(text, end), after)
        out = [(lead, end), (end, trailing)]
        out.append((trailing, self.below(k, after)))
        if self.flow and after is None:  # the last child: up to the closing bracket
            out.append((trailing, self.close))
        if self.flow and k == 0:  # the first child: from the opening bracket
            out.append((self.open, lead))
        if k > 0:
            out.append((self.below(k - 1, lead), lead))
        elif text[line_start(text, lead) : lead].strip(_LEAD_PREFIX) == "":
            top = line_start(text, lead)
            while top > 0:  # the comment lines directly above, up to a line with content
                start, comment, _ = comments.line(_break_before(text, top))
                if text[start:comment].strip(_BLANK):
                    break
                top = start
            out.append((top, lead))
        return out


def node_hold(text: str, events: list, offset: int, parent_first: int, index: int) -> str | None:
    """The reason of the ``# imagebump:hold`` marker of child ``index`` of the collection whose start
    event is ``events[parent_first]`` ("" when it gives none), or None when it has none. For a
    mapping, child ``index`` is its ``index``-th key with its value.

    ``events`` are every event of ``text`` (:func:`~steps.kustomize.reader.parse_tree`), ``offset``
    what to add to their indices.
    """
    if _MARKER_WORD not in text:
        return None
    comments = _Comments(text, events, offset)
    siblings = _Siblings(text, comments, events, parent_first, _node_end(events, parent_first), offset)
    for start, stop in siblings.ranges(index):
        for reason in comments.markers(start, stop):
            return reason
    return None


def hold_at(text: str, path: Sequence[str | int], *, source: str = "values.yaml") -> str | None:
    """The reason of the ``# imagebump:hold`` marker of the node at ``path`` (mapping keys and
    sequence indices from the root: ``("image",)``, ``("images", 2)``) in any YAML text, "" when it
    gives none; None when it has no marker or there is no such node.

    Raises:
        KustomizationError: invalid or hostile YAML (the guards of :func:`parse_tree`).
    """
    if _MARKER_WORD not in text or not path:
        return None
    with gc_paused():
        tree = parse_tree(text, source)
        events = tree.events
        first = next((i for i, e in enumerate(events) if e.__class__ in _COLLECTION_START), None)
        for depth, step in enumerate(path):
            if first is None:
                return None
            spans = _children(events, first, _node_end(events, first))
            if events[first].__class__ is _ev.MappingStartEvent:
                keys = [spans[k][0] for k in range(0, len(spans) - 1, 2)]
                found = [
                    k
                    for k, i in enumerate(keys)
                    if events[i].__class__ is _ev.ScalarEvent and events[i].value == step
                ]
                index = found[0] if found else None
                child = spans[2 * index + 1][0] if index is not None else None
            else:
                ok = isinstance(step, int) and 0 <= step < len(spans)
                index = step if ok else None
                child = spans[index][0] if index is not None else None
            if index is None:
                return None
            if depth == len(path) - 1:
                return node_hold(text, events, tree.offset, first, index)
            first = child if events[child].__class__ in _COLLECTION_START else None
    return None  # pragma: no cover - the loop returns


def hold_marker(
    text: str, name: str, *, by_new_name: bool = True, source: str = "kustomization.yaml"
) -> str | None:
    """The reason of the ``# imagebump:hold [reason]`` comment of the entry :func:`get_image` finds
    ("" when it gives none), or None when the entry has no such comment (or there is no entry).

    An entry written twice (``- &e {…}`` and ``- *e``) is held by a marker on either.
    """
    if _MARKER_WORD not in text:
        return None  # the common case costs no parse
    with gc_paused():
        doc = parse_document(text, source, record=True)
        entry = find_entry(doc, name, by_new_name=by_new_name)
        if entry is None or doc.images is None or doc.events is None:
            return None
        for other in doc.entries:
            if other.node is entry.node:
                reason = node_hold(doc.text, doc.events, doc.images.offset, doc.images.first, other.index)
                if reason is not None:
                    return reason
    return None

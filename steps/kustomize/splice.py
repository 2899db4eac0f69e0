"""The line editor's tools: formatting a scalar as YAML must read it, and splicing the original text.

:class:`Splicer` replaces spans, inserts key lines after an entry's last line with the entry's own
indentation, and deletes a removed key's lines; nothing is re-dumped, so comments, quoting, key
order, CRLF and a BOM stay as written. Pure.
"""

from __future__ import annotations

import itertools

from steps.domain.errors import KustomizationError
from steps.kustomize.holds import HOLD_MARKER_RE
from steps.kustomize.reader import ParsedDoc, ParsedEntry
from steps.kustomize.yaml_nodes import (
    LINE_BREAK,
    LINE_BREAK_CHARS,
    STR_TAG,
    Scalar,
    line_end,
    line_start,
    next_line,
    position_of,
    refuse_anchor,
    resolve_tag,
)

# --------------------------------------------------------------------------------------------
# Formatting scalars


def _is_plain_safe(value: str, flow: bool) -> bool:
    """Whether ``value`` written plain reads back as this very string in YAML 1.1 and 1.2."""
    if not value or value != value.strip() or value[0] in "-?:,[]{}#&*!|>'\"%@`":
        return False
    if ": " in value or " #" in value or value.endswith(":") or LINE_BREAK.search(value):
        return False
    if flow and any(c in value for c in ",[]{}"):
        return False
    return resolve_tag(value, 0) == STR_TAG and resolve_tag(value, 1) == STR_TAG


def format_scalar(value: str, style: str | None, flow: bool) -> str:
    """Write ``value`` in ``style`` (None = plain, ``'`` or ``"``) if valid, else double-quoted."""
    if style == "'":
        return "'" + value.replace("'", "''") + "'"
    if style is None and _is_plain_safe(value, flow):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --------------------------------------------------------------------------------------------
# Splicing


class Splicer:
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


start_of_line = line_start
end_of_line_content = line_end
end_of_line = next_line


def line_ending(text: str, near: int = 0) -> str:
    m = LINE_BREAK.search(text, near) or LINE_BREAK.search(text)
    return m.group(0) if m else "\n"


def colon_after(text: str, key: Scalar) -> int:
    """Index just after the ``:`` that follows a key."""
    i = key.end_mark.index
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text) or text[i] != ":":
        raise KustomizationError(
            f"unsupported key syntax at {position_of(key.start_mark)}; write 'key: value' on one line"
        )
    return i + 1


def _value_end(text: str, key: Scalar, value: Scalar) -> int:
    """End index of a value; for an empty (null) value, just after the key's colon."""
    if value.start_mark.index == value.end_mark.index:
        return colon_after(text, key)
    end = value.end_mark.index
    if value.style in ("|", ">"):  # a block scalar ends where the next line starts: end at its last line
        while end > value.start_mark.index and text[end - 1] in LINE_BREAK_CHARS:
            end -= 1
    return end


def entry_last_end(text: str, entry: ParsedEntry, fields) -> int:
    return max(_value_end(text, *entry.keys[f]) for f in fields)


def refuse_edit(doc: ParsedDoc, entry: ParsedEntry, what: str) -> None:
    """Anchored nodes may be aliased elsewhere: editing them would change more than meant; and an
    entry whose value is an alias (``newTag: *t``) has no position of its own for it."""
    refuse_anchor(doc.images, "images:", doc.source)
    refuse_anchor(entry.node, what, doc.source)
    if entry.aliased is not None:
        field, anchor = entry.aliased
        raise KustomizationError(
            f"{doc.source}: {what} at {position_of(entry.node.start_mark)} takes its {field} from the alias *{anchor}; "
            "write the value out to edit the entry",
            reason="aliased-value",
            field=field,
        )


def set_value(sp: Splicer, doc: ParsedDoc, entry: ParsedEntry, field: str, value: str) -> bool:
    key, node = entry.keys[field]
    if node.tag == STR_TAG and node.value == value:
        return False
    refuse_anchor(node, f"{field} of image {entry.value('name')!r}", doc.source)
    if node.style in ("|", ">"):
        raise KustomizationError(
            f"{doc.source}: {field} of image {entry.value('name')!r} at {position_of(node.start_mark)} is a block "
            "scalar (| or >); write it on one line as 'field: value'",
            reason="block-scalar",
        )
    if node.start_mark.index == node.end_mark.index:  # `newTag:` with nothing after it
        sp.insert(colon_after(doc.text, key), " " + format_scalar(value, None, entry.flow))
    else:
        sp.replace(node.start_mark.index, node.end_mark.index, format_scalar(value, node.style, entry.flow))
    return True


def remove_key(sp: Splicer, doc: ParsedDoc, entry: ParsedEntry, field: str) -> None:
    text = doc.text
    key, node = entry.keys[field]
    refuse_anchor(node, f"{field} of image {entry.value('name')!r}", doc.source)
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
    line_start = start_of_line(text, key.start_mark.index)
    before = text[line_start : key.start_mark.index]
    # a hold marker on the removed line stays, on a line of its own (it survives every edit)
    hold = HOLD_MARKER_RE.search(text, end, end_of_line_content(text, end))
    column = key.start_mark.column if before.strip() == "" else len(before) - len(before.lstrip())
    kept = f"{' ' * column}{hold[0]}{line_ending(text, end)}" if hold else ""
    if before.strip() == "":  # the key starts its line: delete whole lines
        sp.replace(line_start, end_of_line(text, end), kept)
    elif i == 0 and before.strip() == "-":  # `- field: value` on the dash line: pull the next key up
        next_start = entry.keys[order[1]][0].start_mark.index
        between_start = end_of_line(text, end)
        between_end = start_of_line(text, next_start)
        if between_start < between_end or kept:  # comment/blank lines before the next key: keep them, above
            sp.insert(line_start, kept + text[between_start:between_end])
        sp.replace(key.start_mark.index, next_start, "")
    else:
        raise KustomizationError(
            f"{doc.source}: cannot remove {field} at {position_of(key.start_mark)}: unexpected layout; "
            "put each key of the images entry on its own line"
        )


def insert_keys(
    sp: Splicer, doc: ParsedDoc, entry: ParsedEntry, pairs: list[tuple[str, str]], keep: list[str]
) -> None:
    if not pairs:
        return
    text = doc.text
    last = entry_last_end(text, entry, keep)
    if entry.flow:
        sp.insert(last, "".join(f", {k}: {format_scalar(v, None, True)}" for k, v in pairs))
        return
    at = end_of_line_content(text, last)
    eol = line_ending(text, last)
    indent = " " * entry.node.start_mark.column
    sp.insert(at, "".join(f"{eol}{indent}{k}: {format_scalar(v, None, False)}" for k, v in pairs))

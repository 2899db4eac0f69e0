"""The pieces of a regular expression that rewriters must keep whole: escapes and bracket classes.

Two rewriters walk RE2/Go syntax character by character and must not touch what a backslash
escapes or what stands inside ``[...]``: the rules' ``$n`` compiler (:func:`steps.rules.patterns.dollar_regex`)
and the local sensor's Go-to-Python filter translation (:func:`sensors.definition._go_regex`).
Pure; no imports of the project.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

Kind = Literal["escape", "class", "char"]


def regex_tokens(pattern: str) -> Iterator[tuple[Kind, int, int]]:
    """``(kind, start, end)`` for each piece of ``pattern``, in order, covering all of it.

    ``escape``: a backslash and the character after it (the backslash alone at the very end);
    ``class``: a bracket expression from ``[`` to its closing ``]`` (escapes inside included; a
    ``]`` right after ``[`` or ``[^`` is literal, in Go as in Python; an unclosed class runs to the
    end); ``char``: any other single character.
    """
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            yield "escape", i, min(i + 2, n)
            i += 2
            continue
        if c != "[":
            yield "char", i, i + 1
            i += 1
            continue
        j = i + 1 + (pattern[i + 1 : i + 2] == "^")
        j += pattern[j : j + 1] == "]"
        while j < n and pattern[j] != "]":
            j += 2 if pattern[j] == "\\" else 1
        end = min(j + 1, n)
        yield "class", i, end
        i = end


__all__ = ["Kind", "regex_tokens"]

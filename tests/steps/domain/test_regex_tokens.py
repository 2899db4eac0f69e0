"""regex_tokens: the escapes and bracket classes both regex rewriters keep whole (pure)."""

from __future__ import annotations

import pytest

from steps.domain.regex_tokens import regex_tokens


@pytest.mark.parametrize(
    ("pattern", "pieces"),
    [
        ("a$1", [("char", "a"), ("char", "$"), ("char", "1")]),
        (r"\$x", [("escape", r"\$"), ("char", "x")]),
        ("[$1]b", [("class", "[$1]"), ("char", "b")]),
        ("[]a]$", [("class", "[]a]"), ("char", "$")]),
        ("[^]a]", [("class", "[^]a]")]),
        (r"[a\]b]c", [("class", r"[a\]b]"), ("char", "c")]),
        ("[abc", [("class", "[abc")]),
        ("a\\", [("char", "a"), ("escape", "\\")]),
        ("", []),
    ],
)
def test_pieces_cover_the_pattern_in_order(pattern: str, pieces: list[tuple[str, str]]) -> None:
    found = list(regex_tokens(pattern))
    assert [(kind, pattern[s:e]) for kind, s, e in found] == pieces
    assert "".join(pattern[s:e] for _, s, e in found) == pattern

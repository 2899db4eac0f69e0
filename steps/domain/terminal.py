"""What others wrote, as a terminal may show it: control characters escaped, overlong text cut.

Whoever lands a commit chooses its author name and message, whoever pushes an image its tag, and
Argo CD, GitHub and Git report what they hold: printed raw, an escape sequence in any of them
rewrites an operator's terminal (moves the cursor, hides a line, changes the title), a bidi
override reorders what is read, and a 1 MB marker reason floods the screen. Every printer of the
CLI (the reconcile tables, ``set-image``, the progress line, error messages) shows such text only
through :func:`for_terminal`. JSON output and JSON logs need none of it (JSON escapes control
characters itself). Pure.
"""

from __future__ import annotations

import regex

#: Characters no terminal should receive from others: C0 and C1 controls and DEL (``Cc``), format
#: characters (``Cf``: bidi overrides and isolates, zero-width characters, the BOM), line and
#: paragraph separators (``Zl``, ``Zp``). Lone surrogates (``Cs``, from JSON escapes), which no
#: UTF-8 stream can take, become U+FFFD.
_UNSAFE = regex.compile(r"[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]")
_SURROGATE = regex.compile(r"\p{Cs}")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\x1b": "\\e"}
#: The most characters of one piece of text shown by default; the rest is cut with a visible note.
MAX_SHOWN = 1000


def _escape(m: regex.Match) -> str:
    c = m.group(0)
    named = _NAMED.get(c)
    if named is not None:
        return named
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text: object, limit: int | None = MAX_SHOWN, *, newlines: bool = False) -> str:
    """``text`` safe to print: every control, format or separator character written as an escape
    (``\\e``, ``\\x9b``, ``\\u202e``), a lone surrogate as U+FFFD, cut after ``limit`` characters
    with ``… [N more characters]``.

    ``newlines`` keeps ``\\n`` as a line break (a multi-line message imagebump wrote around what
    others wrote); everything else is escaped all the same.
    """
    text = _SURROGATE.sub("\ufffd", text if isinstance(text, str) else str(text))
    cut = ""
    if limit is not None and len(text) > limit:
        cut = f"… [{len(text) - limit} more characters]"
        text = text[:limit]
    if newlines:
        shown = "\n".join(_UNSAFE.sub(_escape, line) for line in text.split("\n"))
    else:
        shown = _UNSAFE.sub(_escape, text)
    return shown + cut

r"""Patterns: every user regular expression compiled by RE2, within caps; ONE ``$n`` compiler.

Whoever edits the rules chooses the patterns, so every pattern (``regexp:`` entries, the tag
pattern of ``registryURI``, its repository part) is compiled by RE2 (google-re2), whose matching
time is linear in the tag's length by construction. What RE2 cannot take as Python's ``re`` means
it is refused with a reason (:func:`refusal`); counts over :data:`MAX_REPEAT`, patterns over 1000
characters and a rule whose patterns exceed :data:`MAX_RULE_PROGRAM` RE2 instructions are refused
too. ``$n`` becomes one named group per occurrence (:func:`dollar_regex`); RE2 has no
back-references, so :func:`collect_captures` compares the texts a ``$n`` captured after the match.
Problems raise :class:`~steps.domain.errors.RuleFieldError` naming the field.

Hostile input (issue 12): whoever pushes an image chooses the tag, whoever edits the rules chooses
the patterns, so

- RE2 refuses what needs backtracking: backreferences (``\1``, ``(?P=name)``), lookahead and
  lookbehind (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), atomic groups and possessive quantifiers,
  conditionals, ``(?#…)`` comments and the ``x``/``a``/``u``/``L`` flags; they are refused at load
  with the rule and field named. So are counts over 1000 (``a{4294967296}``, which RE2 would
  otherwise read as literal text), Python's ``{,n}``, ``\Z`` (write ``$`` or ``\z``) and non-ASCII
  characters (tags are ASCII);
- a rule's patterns together may compile to at most :data:`MAX_RULE_PROGRAM` RE2 instructions:
  RE2's cost per tag character grows with the program, so this bounds any rule's matching time
  for any tag (``python -m bench.hostile`` prints the worst case: a few milliseconds);
- an error message never prints more than a short excerpt of a value
  (:func:`steps.rules.show.excerpt`), with secrets in ``githubRepository`` redacted; YAML aliases
  are bounded by :mod:`steps.rules.loader`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import re2

from steps.domain.errors import RuleFieldError as _Problem
from steps.domain.events import TAG_RE
from steps.domain.regex_tokens import regex_tokens
from steps.rules.show import excerpt as _excerpt

#: The largest count a repetition may give (``{n}``, ``{n,}``, ``{n,m}``): RE2's own limit.
MAX_REPEAT = 1000
#: How many RE2 instructions all the tag patterns of one rule (tag pattern, allow and deny
#: ``regexp:`` entries) may compile to. Matching costs at most about this many steps per tag
#: character, so it bounds a rule's matching time whatever the tag (bench/hostile.py measures it).
MAX_RULE_PROGRAM = 1000

#: ``$n`` in registryURI and githubRepository.
VAR_RE = re.compile(r"\$([0-9]+)")
_MAX_PATTERN_LEN = 1000
_TAG_CAPTURE = "[A-Za-z0-9]+"
_SEGMENT_CAPTURE = "[^/]+"

_RE2_OPTIONS: dict[bool, Any] = {}


def _options(captures: bool) -> Any:
    """RE2 options: Latin-1 (tags and repository names are ASCII), no logging to stderr."""
    if captures not in _RE2_OPTIONS:
        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1
        options.log_errors = False
        options.never_capture = not captures
        _RE2_OPTIONS[captures] = options
    return _RE2_OPTIONS[captures]


_LOOKAROUND = (
    "uses lookaround ((?=, (?!, (?<=, (?<!), which RE2 does not support: user patterns are matched in "
    "linear time, without backtracking; express it without lookaround (e.g. put the tags to refuse in "
    "denyImageTag, which wins over allowImageTag)"
)
_BACKREF = (
    "uses a backreference (\\1, (?P=name)), which RE2 does not support: user patterns are matched in "
    "linear time, without backtracking; to require two parts of a tag to be equal, use the same $n "
    "twice in the registryURI tag pattern"
)
_ATOMIC = (
    "uses an atomic group or a possessive quantifier ((?>, *+, ++, ?+), which RE2 does not need or "
    "support: it never backtracks; drop the '>' or the trailing '+'"
)
_CONDITIONAL = (
    "uses a conditional group ((?(1)...)), which RE2 does not support; write the alternatives with |"
)
_COMMENT = "uses a (?#...) comment, which RE2 does not support; remove it"
_PYTHON_FLAGS = (
    "uses an inline flag RE2 does not support ((?x), (?a), (?u), (?L)); RE2 supports (?i), (?m), (?s), (?U)"
)
_SPECIAL_GROUPS = (
    ("(?<=", _LOOKAROUND),
    ("(?<!", _LOOKAROUND),
    ("(?=", _LOOKAROUND),
    ("(?!", _LOOKAROUND),
    ("(?P=", _BACKREF),
    ("(?P>", _BACKREF),
    ("(?>", _ATOMIC),
    ("(?(", _CONDITIONAL),
    ("(?#", _COMMENT),
)
_COUNT_RE = re.compile(r"\{([0-9]*)(,([0-9]*))?\}")
_FLAGS_RE = re.compile(r"\(\?([a-zA-Z]*)[-a-zA-Z]*[:)]")


def refusal(pattern: str) -> str | None:
    r"""Why RE2 cannot take ``pattern`` as Python's ``re`` means it, or None (RE2 reports the rest).

    Finds, outside character classes where it matters: backreferences, lookaround, atomic and
    possessive forms, conditionals, comments, Python-only flags, ``\Z``, counts over
    :data:`MAX_REPEAT` (RE2 reads ``a{4294967296}`` as literal text instead of refusing it), and
    Python's ``{,n}`` (RE2 reads it as literal text).
    """
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if not c.isascii():
            return (
                f"holds the non-ASCII character {c!r}: image tags are ASCII (letters, digits, '_', '.', '-'), "
                "so write the pattern in ASCII"
            )
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt and nxt in "123456789":
                return _BACKREF
            if nxt == "Z":
                return "uses \\Z, which RE2 does not know: write $ (or \\z) for the end of the tag"
            i += 2
            continue
        if in_class:
            if pattern.startswith("[:", i):  # a POSIX class inside a class: [[:alpha:]]
                close = pattern.find(":]", i + 2)
                i = close + 2 if close >= 0 else i + 1
                continue
            if c == "]":
                in_class = False
            i += 1
            continue
        if c == "[":
            in_class = True
            i += 1
            if pattern.startswith("^", i):
                i += 1
            if pattern.startswith("]", i):  # a ']' first in a class is literal
                i += 1
            continue
        if c == "(" and pattern.startswith("(?", i):
            for opening, why in _SPECIAL_GROUPS:
                if pattern.startswith(opening, i):
                    return why
            flags = _FLAGS_RE.match(pattern, i)
            if flags and set(flags.group(0)) & set("xauL"):
                return _PYTHON_FLAGS
        if c in "*+?" and pattern.startswith("+", i + 1):
            return _ATOMIC
        if c == "{":
            count = _COUNT_RE.match(pattern, i)
            if count:
                low, comma, high = count.group(1), count.group(2), count.group(3)
                if not low and comma is not None:
                    return (
                        f"uses {count.group(0)}, which Python reads as {{0,{high}}} but RE2 as literal text; "
                        f"write {{0,{high}}}"
                        if high
                        else f"uses {count.group(0)}: write * instead"
                    )
                for number in (low, high):
                    if number and int(number) > MAX_REPEAT:
                        return (
                            f"repeats {int(number)} times ({count.group(0)}), more than the {MAX_REPEAT} "
                            "RE2 allows (a tag has at most 128 characters)"
                        )
                if low and high and int(high) < int(low):
                    return f"has the empty range {count.group(0)}: the larger count goes second"
                if low and pattern.startswith("+", count.end()):
                    return _ATOMIC
        i += 1
    return None


def _re2_error(exc: Exception) -> str:
    message = exc.args[0] if exc.args else str(exc)
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    return str(message)


@dataclass(slots=True)
class Budget:
    """The RE2 instructions one rule's tag patterns have used so far (see MAX_RULE_PROGRAM)."""

    used: int = 0

    def spend(self, compiled: Any, field_name: str, pattern: str) -> None:
        self.used += compiled.programsize
        if self.used > MAX_RULE_PROGRAM:
            raise _Problem(
                field_name,
                f"regular expression {_excerpt(pattern)} brings this rule's patterns to {self.used} RE2 "
                f"instructions, over the {MAX_RULE_PROGRAM} a rule may use (matching time grows with them); "
                "simplify large counted repetitions such as {0,100} or nested ones such as (a{0,9}){0,9}",
            )


def compile_pattern(
    pattern: str,
    field_name: str,
    cache: dict[tuple[str, bool], Any],
    *,
    captures: bool = False,
    user_text: str | None = None,
) -> Any:
    """Compile ``pattern`` with RE2 (linear-time matching), or raise a _Problem naming ``field_name``.

    ``user_text`` is what the user wrote (the tag pattern before ``$n`` became groups): checks and
    messages are about it.
    """
    written = pattern if user_text is None else user_text
    key = (pattern, captures)
    cached = cache.get(key)
    if cached is not None:
        return cached
    if len(written) > _MAX_PATTERN_LEN:
        raise _Problem(
            field_name, f"regular expression is {len(written)} characters, over {_MAX_PATTERN_LEN}"
        )
    why = refusal(written)
    if why:
        raise _Problem(field_name, f"regular expression {_excerpt(written)} {why}")
    try:
        compiled = re2.compile(pattern.encode("latin-1"), _options(captures))
    except re2.error as exc:
        raise _Problem(
            field_name,
            f"invalid regular expression {_excerpt(written)}: {_re2_error(exc)} "
            "(RE2 syntax: https://github.com/google/re2/wiki/Syntax)",
        ) from None
    cache[key] = compiled
    return compiled


def _group(num: int, occurrence: int) -> str:
    return f"_c{num}_{occurrence}"


def dollar_regex(text: str, *, literal: bool) -> tuple[str, dict[int, list[str]]]:
    """The ONE ``$n`` compiler: ``text`` as a regex where each ``$n`` occurrence is its own group.

    ``literal=True`` (the repository part of registryURI): the rest is literal text and ``$n``
    captures one path segment (``[^/]+``). ``literal=False`` (the tag pattern): the rest is regex
    syntax and ``$n`` captures ``[A-Za-z0-9]+``; ``$`` not followed by a digit, and anything inside
    ``[...]`` or after ``\\``, stays regex syntax. Every occurrence gets its own group (RE2 has no
    back-references): :func:`collect_captures` compares the texts of a ``$n`` used twice.
    Returns the regex and, per variable, its group names in order.
    """
    capture = _SEGMENT_CAPTURE if literal else _TAG_CAPTURE
    out: list[str] = []
    groups: dict[int, list[str]] = {}
    pieces = (("char", i, i + 1) for i in range(len(text))) if literal else regex_tokens(text)
    done = 0  # text before this is written (a $n spans several characters)
    for kind, start, end in pieces:
        if start < done:
            continue
        if kind != "char":  # an escape or a bracket class: regex syntax, kept whole
            out.append(text[start:end])
            continue
        m = VAR_RE.match(text, start)
        if m:
            num = int(m[1])
            if num == 0:
                raise _Problem("registryURI", "$0 is not a capture; captures are numbered from $1")
            names = groups.setdefault(num, [])
            names.append(_group(num, len(names)))
            out.append(f"(?P<{names[-1]}>{capture})")
            done = m.end()
            continue
        out.append(re2.escape(text[start]) if literal else text[start])
    return "".join(out), groups


def group_indices(compiled: Any, groups: dict[int, list[str]]) -> dict[int, tuple[int, ...]]:
    """``$n`` → the indices of its groups in ``compiled`` (RE2 names groups in bytes here)."""
    index = {name.decode() if isinstance(name, bytes) else name: i for name, i in compiled.groupindex.items()}
    return {num: tuple(index[name] for name in names) for num, names in groups.items()}


def collect_captures(match: Any, groups: dict[int, tuple[int, ...]], into: dict[int, str]) -> str | None:
    """Add the captures of ``match`` to ``into``; a ``$n`` that captured two texts → the reason."""
    for num, indices in groups.items():
        for i in indices:
            value = match.group(i)
            if num in into and into[num] != value:
                return f"${num} captured both {into[num]!r} and {value!r}"
            into[num] = value
    return None


@dataclass(frozen=True, slots=True)
class TagFilter:
    """One ``allowImageTag`` / ``denyImageTag`` entry: a literal tag, or ``regexp:RE`` (RE2, full match)."""

    text: str
    regex: Any | None  # a compiled RE2 pattern

    def matches(self, tag: str) -> bool:
        return self.regex.fullmatch(tag) is not None if self.regex is not None else tag == self.text


@dataclass(frozen=True, slots=True)
class TagList:
    """A compiled allow or deny list: literals in a dict (one lookup), patterns in file order."""

    entries: tuple[TagFilter, ...] = ()
    literals: dict[str, int] = field(default_factory=dict)  # literal tag -> its index in entries
    patterns: tuple[tuple[int, Any], ...] = ()  # (index in entries, RE2 pattern)

    @classmethod
    def of(cls, entries: tuple[TagFilter, ...]) -> TagList:
        literals: dict[str, int] = {}
        patterns = []
        for i, entry in enumerate(entries):
            if entry.regex is None:
                literals.setdefault(entry.text, i)
            else:
                patterns.append((i, entry.regex))
        return cls(entries, literals, tuple(patterns))

    def first_match(self, tag: str) -> TagFilter | None:
        """The first entry (in file order) that matches ``tag``, or None."""
        best = self.literals.get(tag)
        for i, regex in self.patterns:
            if best is not None and i > best:
                break
            if regex.fullmatch(tag) is not None:
                best = i
                break
        return None if best is None else self.entries[best]

    def describe(self, limit: int = 5) -> str:
        shown = ", ".join(e.text for e in self.entries[:limit])
        more = len(self.entries) - limit
        return shown + (f" and {more} more" if more > 0 else "")


def tag_filters(
    entries: list[str], name: str, cache: dict[tuple[str, bool], Any], budget: Budget
) -> tuple[TagFilter, ...]:
    """Compile an ``allowImageTag`` / ``denyImageTag`` list: ``regexp:RE`` entries by RE2, the rest
    literal tags (a literal that is no valid tag could never match, so it is refused)."""
    filters = []
    for i, item in enumerate(entries):
        if item.startswith("regexp:"):
            source = item[len("regexp:") :]
            compiled = compile_pattern(source, f"{name}[{i}]", cache)
            budget.spend(compiled, f"{name}[{i}]", source)
            filters.append(TagFilter(item, compiled))
        elif TAG_RE.fullmatch(item) and item.isascii():
            filters.append(TagFilter(item, None))
        else:
            raise _Problem(
                f"{name}[{i}]",
                f"{_excerpt(item)} is not a valid image tag, so it can never match; for a pattern write 'regexp:RE'",
            )
    return tuple(filters)

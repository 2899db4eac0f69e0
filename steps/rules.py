r"""Rules: which overlays of which Git repositories an image push updates.

Reads: the in-house rules format (YAML: a top-level list of rules, or ``rules:`` holding one).
Writes: nothing (pure). :func:`load_rules` compiles a whole file at once — every regular
expression, every ``$n`` — and rejects a bad file whole with ``SOURCE: rule N: FIELD: problem``.
:meth:`RuleSet.match` turns one :class:`steps.models.Image` into targets (:class:`steps.models.Target`)
plus the rules that were considered and refused, each with a reason.

Semantics (DESIGN.md, issue 2):

- ``registryURI`` = ``ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:TAGPATTERN]``. The registry host
  is literal. In ``REPO`` everything is literal except ``$n``, which captures one path segment
  (``[^/]+``). ``TAGPATTERN`` is a regular expression that must match the whole tag; ``$n`` in it
  captures ``[A-Za-z0-9]+``. A ``$n`` used twice must capture the same text both times: each
  occurrence is captured on its own and the captures are compared after the match.
- ``githubRepository`` = ``https://HOST/OWNER/REPO/PATH…`` (``http://host:port`` for a local
  remote). ``$n`` are substituted; the result must stay inside the repository (no ``..``, no
  ``.``, no empty segment) or that target is refused with a reason.
- ``allowImageTag`` / ``denyImageTag``: ``regexp:RE`` (full match) or a literal tag; an empty
  allow list allows every tag; deny wins. A digest-only push has no tag: a rule with an allow list
  or a tag pattern refuses it.

Hostile input (issue 12): whoever pushes an image chooses the tag, whoever edits the rules chooses
the patterns, so

- every user pattern (``regexp:`` entries, the tag pattern, the repository part) is compiled by
  RE2 (google-re2), whose matching time is linear in the tag's length by construction — there is
  no backtracking to blow up. RE2 refuses what needs backtracking: backreferences (``\1``,
  ``(?P=name)``), lookahead and lookbehind (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), atomic groups and
  possessive quantifiers, conditionals, ``(?#…)`` comments and the ``x``/``a``/``u``/``L`` flags;
  they are refused at load with the rule and field named. So are counts over 1000
  (``a{4294967296}``, which RE2 would otherwise read as literal text), Python's ``{,n}``, ``\Z``
  (write ``$`` or ``\z``) and non-ASCII characters (tags are ASCII);
- a rule's patterns together may compile to at most :data:`MAX_RULE_PROGRAM` RE2 instructions:
  RE2's cost per tag character grows with the program, so this bounds any rule's matching time
  for any tag (``python -m bench.hostile`` prints the worst case: a few milliseconds);
- YAML aliases may not expand a file beyond :data:`MAX_ALIAS_EXPANSION` extra nodes (a "billion
  laughs" file is refused before anything reads it), and an error message never prints more than
  a short excerpt of a value (:func:`_excerpt`), with secrets in ``githubRepository`` redacted.

Matching does not try every rule: each rule is indexed under its registry host, its number of path
segments and its rarest literal path segment (``team/$1`` under ``team``; ``$1/api`` under ``api``),
so an event costs a few dict lookups plus the candidate rules, whatever the number of rules.
"""

from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import re2
from pydantic import BaseModel

from steps.errors import RulesError
from steps.models import Image, Target

KNOWN_FIELDS = (
    "registryURI",
    "githubRepository",
    "allowImageTag",
    "denyImageTag",
    "env",
    "mode",
    "baseBranch",
    "imageName",
    "writeDigest",
    "order",
    "labels",
    "reviewers",
    "provider",
)
REQUIRED_FIELDS = ("registryURI", "githubRepository")
MODES = ("pr", "commit")
ORDERS = ("push-time", "semver", "none")
PROVIDERS = ("github", "local")

#: The largest count a repetition may give (``{n}``, ``{n,}``, ``{n,m}``): RE2's own limit.
MAX_REPEAT = 1000
#: How many RE2 instructions all the tag patterns of one rule (tag pattern, allow and deny
#: ``regexp:`` entries) may compile to. Matching costs at most about this many steps per tag
#: character, so it bounds a rule's matching time whatever the tag (bench/hostile.py measures it).
MAX_RULE_PROGRAM = 1000
#: How many nodes YAML aliases may add to a rules file once expanded, beyond the nodes written
#: (or as many as are written, for a very large file). A 'billion laughs' file adds 10⁹.
MAX_ALIAS_EXPANSION = 100_000

_REGISTRY_RE = re.compile(
    r"(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2})\.amazonaws\.com"
)
_VAR_RE = re.compile(r"\$([0-9]+)")
_REPO_LITERAL_RE = re.compile(r"[a-z0-9._/-]*")
_TAG_LITERAL_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_GIT_URL_RE = re.compile(r"(?P<scheme>https?)://(?P<netloc>[^/]*)(?P<path>/.*)?")
_NETLOC_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?")
_OWNER_REPO_RE = re.compile(r"[A-Za-z0-9_.-]+")
_BRANCH_BAD_RE = re.compile(r"(^[-/.])|(\.\.)|([\s~^:?*\[\\])|(@\{)|(/$)|(\.lock$)|(//)")
_MAX_PATTERN_LEN = 1000
#: ECR's limit on a repository name: a longer repository part can never match.
_MAX_REPOSITORY_LEN = 256
_TAG_CAPTURE = "[A-Za-z0-9]+"
_SEGMENT_CAPTURE = "[^/]+"


class SkippedRule(BaseModel):
    """A rule that yielded no target for an image, and why."""

    rule: int
    reason: str


@dataclass
class Match:
    """What one image yields: the targets (rule order) and the refused rules with reasons."""

    targets: list[Target] = field(default_factory=list)
    skipped: list[SkippedRule] = field(default_factory=list)


class _Problem(Exception):
    """A problem in one field; load_rules prefixes source, rule index and field name."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name
        self.message = message


# --- showing values in messages ------------------------------------------------------------------

#: Bounded repr: at most a few items per level, two levels, short strings. Aliases in YAML share
#: objects, so a 591-byte file can hold a list whose plain repr is gigabytes; this never walks it.
_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 80
_EXCERPT_LEN = 120


def _redact_url(text: str) -> str:
    """``text`` with URL credentials (``user:pass@``, ``token@``), query values and fragments as ``***``.

    ``git@`` (SSH's conventional user, not a secret) is kept.
    """
    text = re.sub(r"(?i)\b([a-z][a-z0-9+.-]*://)(?!git@)[^/@?#\s'\"]*@", r"\1***@", text)
    text = re.sub(r"([?&;][^=&;#\s'\"]*=)[^&;#\s'\"]*", r"\1***", text)  # ?access_token=… → …=***
    text = re.sub(r"\?(?![^&;#\s'\"]*=)[^&;#\s'\"]+", "?***", text)  # ?ghp_… (a bare value)
    return re.sub(r"#[^\s'\"]*", "#***", text)


def _excerpt(value: Any, *, secret_urls: bool = False) -> str:
    """A short, bounded repr of ``value`` for a message (never the whole of a large value)."""
    shown = _REPR.repr(value)
    if secret_urls:
        shown = _redact_url(shown)
    if len(shown) > _EXCERPT_LEN:
        shown = shown[: _EXCERPT_LEN - 3] + "..."
    return shown


# --- regular expressions --------------------------------------------------------------------

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


def _refusal(pattern: str) -> str | None:
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
class _Budget:
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


def _compile(
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
    why = _refusal(written)
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


def _tag_pattern_regex(pattern: str) -> tuple[str, dict[int, list[str]]]:
    """Turn the tag pattern of registryURI into a regex: each ``$n`` → ``(?P<_cN_K>[A-Za-z0-9]+)``.

    Every occurrence gets its own group (RE2 has no back-references); :meth:`Rule.evaluate`
    compares the captures of a ``$n`` used twice, and with the repository part's. ``$`` not
    followed by a digit, and anything inside ``[...]`` or after ``\\``, stays regex syntax.
    Returns the regex and, per variable, its group names in order.
    """
    out: list[str] = []
    groups: dict[int, list[str]] = {}
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            # a ']' right after '[' or '[^' is literal
            j = i + 1
            if j < n and pattern[j] == "^":
                out.append("^")
                j += 1
            if j < n and pattern[j] == "]":
                out.append("]")
                j += 1
            i = j
            continue
        m = _VAR_RE.match(pattern, i)
        if m:
            num = int(m[1])
            if num == 0:
                raise _Problem("registryURI", "$0 is not a capture; captures are numbered from $1")
            names = groups.setdefault(num, [])
            names.append(_group(num, len(names)))
            out.append(f"(?P<{names[-1]}>{_TAG_CAPTURE})")
            i = m.end()
            continue
        out.append(c)
        i += 1
    return "".join(out), groups


def _group_indices(compiled: Any, groups: dict[int, list[str]]) -> dict[int, tuple[int, ...]]:
    """``$n`` → the indices of its groups in ``compiled`` (RE2 names groups in bytes here)."""
    index = {name.decode() if isinstance(name, bytes) else name: i for name, i in compiled.groupindex.items()}
    return {num: tuple(index[name] for name in names) for num, names in groups.items()}


def _captures(match: Any, groups: dict[int, tuple[int, ...]], into: dict[int, str]) -> str | None:
    """Add the captures of ``match`` to ``into``; a ``$n`` that captured two texts → the reason."""
    for num, indices in groups.items():
        for i in indices:
            value = match.group(i)
            if num in into and into[num] != value:
                return f"${num} captured both {into[num]!r} and {value!r}"
            into[num] = value
    return None


# --- one rule ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _TagFilter:
    """One ``allowImageTag`` / ``denyImageTag`` entry: a literal tag, or ``regexp:RE`` (RE2, full match)."""

    text: str
    regex: Any | None  # a compiled RE2 pattern

    def matches(self, tag: str) -> bool:
        return self.regex.fullmatch(tag) is not None if self.regex is not None else tag == self.text


@dataclass(frozen=True, slots=True)
class _TagList:
    """A compiled allow or deny list: literals in a dict (one lookup), patterns in file order."""

    entries: tuple[_TagFilter, ...] = ()
    literals: dict[str, int] = field(default_factory=dict)  # literal tag -> its index in entries
    patterns: tuple[tuple[int, Any], ...] = ()  # (index in entries, RE2 pattern)

    @classmethod
    def of(cls, entries: tuple[_TagFilter, ...]) -> _TagList:
        literals: dict[str, int] = {}
        patterns = []
        for i, entry in enumerate(entries):
            if entry.regex is None:
                literals.setdefault(entry.text, i)
            else:
                patterns.append((i, entry.regex))
        return cls(entries, literals, tuple(patterns))

    def first_match(self, tag: str) -> _TagFilter | None:
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


@dataclass(slots=True)
class Rule:
    """One compiled rule. ``index`` is its 0-based position in the file.

    Every pattern in it (``repo_regex``, ``tag_regex``, the ``regexp:`` entries of ``allow`` and
    ``deny``) is an RE2 pattern (:meth:`patterns` lists them): linear-time matching.
    """

    index: int
    registry_uri: str
    github_repository: str
    account: str
    region: str
    repo_template: str
    repo_regex: Any  # RE2; each $n occurrence is its own group, see repo_groups
    segments: int
    literal_segments: tuple[tuple[int, str], ...]
    tag_pattern: str | None
    tag_regex: Any | None  # RE2; each $n occurrence is its own group, see tag_groups
    repo_vars: tuple[int, ...]
    tag_vars: tuple[int, ...]
    git_scheme: str
    git_netloc: str
    git_path_template: str
    allow: tuple[_TagFilter, ...] = ()
    deny: tuple[_TagFilter, ...] = ()
    env: str = ""
    mode: str = "pr"
    base_branch: str | None = None
    image_name: str | None = None
    write_digest: bool = False
    order: str = "push-time"
    labels: tuple[str, ...] = ()
    reviewers: tuple[str, ...] = ()
    provider: str = "github"
    repo_groups: dict[int, tuple[int, ...]] = field(default_factory=dict)  # $n -> group indices
    tag_groups: dict[int, tuple[int, ...]] = field(default_factory=dict)
    _allow: _TagList = field(default_factory=_TagList)
    _deny: _TagList = field(default_factory=_TagList)

    def __post_init__(self) -> None:
        self._allow = _TagList.of(self.allow)
        self._deny = _TagList.of(self.deny)

    @property
    def host(self) -> str:
        return f"{self.account}.dkr.ecr.{self.region}.amazonaws.com"

    @property
    def repository_prefix(self) -> str:
        """The fixed start of every repository this rule matches: ``hoge/fuga/`` for ``hoge/fuga/$1/$2``.

        The whole repository for a rule without ``$n``. A repository that does not start with it
        cannot match (a cheap filter before :meth:`match_repository`, e.g. over ECR's listing).
        """
        m = _VAR_RE.search(self.repo_template)
        return self.repo_template[: m.start()] if m else self.repo_template

    def patterns(self) -> tuple[Any, ...]:
        """Every compiled pattern of this rule (all RE2): repository, tag pattern, allow and deny."""
        found = [self.repo_regex]
        if self.tag_regex is not None:
            found.append(self.tag_regex)
        found += [f.regex for f in (*self.allow, *self.deny) if f.regex is not None]
        return tuple(found)

    def match_repository(self, repository: str) -> dict[int, str] | None:
        """The ``$n`` captures of the repository part for ``repository``, or None if it does not match."""
        m = self.repo_regex.fullmatch(repository)
        if m is None:
            return None
        captures: dict[int, str] = {}
        return None if _captures(m, self.repo_groups, captures) else captures

    def evaluate(self, image: Image) -> Target | str:
        """The target this rule yields for ``image``, or the reason it yields none."""
        if image.region != self.region or (image.account and image.account != self.account):
            registry = (
                image.registry if image.account else f"(unknown account).dkr.ecr.{image.region}.amazonaws.com"
            )
            return f"registry {registry} is not {self.host} (registryURI {self.registry_uri})"
        m = self.repo_regex.fullmatch(image.repository)
        captures: dict[int, str] = {}
        if m is None or _captures(m, self.repo_groups, captures):
            return f"repository {image.repository} does not match {self.host}/{self.repo_template}"
        if image.tag is None:
            if self.tag_regex is not None:
                return f"digest-only push (no tag): registryURI has the tag pattern {self.tag_pattern!r}"
            if self.allow:
                return "digest-only push (no tag): the rule has an allowImageTag list"
        else:
            if self.tag_regex is not None:
                tm = self.tag_regex.fullmatch(image.tag)
                if tm is None:
                    pattern = self.tag_pattern
                    return f"tag {image.tag!r} does not match the tag pattern '{pattern}' of registryURI"
                in_tag: dict[int, str] = {}
                why = _captures(tm, self.tag_groups, in_tag)
                if why:
                    return (
                        f"tag {image.tag!r}: {why} in the tag pattern '{self.tag_pattern}' (a $n must agree)"
                    )
                for num, value in in_tag.items():
                    if num in captures and captures[num] != value:
                        return f"${num} is {captures[num]!r} in the repository but {value!r} in the tag"
                    captures[num] = value
            denied = self._deny.first_match(image.tag)
            if denied is not None:
                return f"tag {image.tag!r} is denied by denyImageTag entry '{denied.text}'"
            if self.allow and self._allow.first_match(image.tag) is None:
                return f"tag {image.tag!r} is not allowed by allowImageTag ({self._allow.describe()})"
        location = _VAR_RE.sub(lambda v: captures[int(v[1])], self.git_path_template)
        where = _repo_and_path(location)
        if isinstance(where, str):
            return f"githubRepository {self.git_scheme}://{self.git_netloc}{location}: {where}"
        owner_repo, path = where
        uri = image.uri if image.account else f"{self.host}/{image.repository}"
        return Target(
            rule=self.index,
            repo_url=f"{self.git_scheme}://{self.git_netloc}/{owner_repo}",
            path=path,
            env=self.env,
            image=uri,
            tag=image.tag,
            digest=image.digest,
            pushed_at=image.pushed_at,
            event_id=image.event_id,
            mode=self.mode,  # type: ignore[arg-type]
            base_branch=self.base_branch,
            image_name=self.image_name,
            write_digest=self.write_digest,
            order=self.order,  # type: ignore[arg-type]
            labels=list(self.labels),
            reviewers=list(self.reviewers),
            provider=self.provider,  # type: ignore[arg-type]
        )


def _repo_and_path(location: str) -> tuple[str, str] | str:
    """``/OWNER/REPO/a/b`` → ``("OWNER/REPO", "a/b")`` (``"."`` for the root), or a reason."""
    parts = location.split("/")[1:]
    if len(parts) < 2:
        return "expected /OWNER/REPO after the host"
    for i, part in enumerate(parts):
        decoded = unquote(part)
        if part == "":
            return (
                "has an empty path segment (//): the overlay path must be relative and inside the repository"
            )
        if decoded in (".", ".."):
            return f"path segment {part!r} would leave or re-enter the repository: use a plain relative path"
        if "\\" in decoded or "/" in decoded or "\x00" in decoded:
            return f"path segment {part!r} holds a separator or control character"
        if i < 2 and not _OWNER_REPO_RE.fullmatch(part):
            return f"{'owner' if i == 0 else 'repository'} {part!r} is not a valid GitHub name"
    owner, repo = parts[0], parts[1].removesuffix(".git")
    if not repo:
        return "the repository name is empty"
    return f"{owner}/{repo}", "/".join(parts[2:]) or "."


def _shown(value: Any, name: str) -> str:
    """``value`` as a message may show it: a bounded excerpt, URL secrets redacted."""
    return _excerpt(value, secret_urls=name.startswith("githubRepository"))


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise _Problem(name, f"must be a string, got {_kind(value)} {_shown(value, name)} (quote it)")
    return value


def _str_list(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Problem(name, f"must be a list, got {_kind(value)} {_shown(value, name)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise _Problem(
                f"{name}[{i}]", f"must be a string, got {_kind(item)} {_shown(item, name)} (quote it)"
            )
    return list(value)


def _choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise _Problem(name, f"must be one of {', '.join(choices)}, got {_shown(value, name)}")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "boolean",
        int: "number",
        float: "number",
        dict: "mapping",
        list: "list",
        str: "string",
    }.get(type(value), type(value).__name__)


def _tag_filters(
    value: Any, name: str, cache: dict[tuple[str, bool], Any], budget: _Budget
) -> tuple[_TagFilter, ...]:
    filters = []
    for i, item in enumerate(_str_list(value, name)):
        if item.startswith("regexp:"):
            source = item[len("regexp:") :]
            compiled = _compile(source, f"{name}[{i}]", cache)
            budget.spend(compiled, f"{name}[{i}]", source)
            filters.append(_TagFilter(item, compiled))
        elif _TAG_LITERAL_RE.fullmatch(item) and item.isascii():
            filters.append(_TagFilter(item, None))
        else:
            raise _Problem(
                f"{name}[{i}]",
                f"{_excerpt(item)} is not a valid image tag, so it can never match; for a pattern write 'regexp:RE'",
            )
    return tuple(filters)


def _repository_regex(repo_template: str) -> tuple[str, dict[int, list[str]]]:
    """The repository part as a regex: literal text, each ``$n`` occurrence its own segment group."""
    groups: dict[int, list[str]] = {}
    parts: list[str] = []
    pos = 0
    for vm in _VAR_RE.finditer(repo_template):
        num = int(vm[1])
        if num == 0:
            raise _Problem("registryURI", "$0 is not a capture; captures are numbered from $1")
        parts.append(re2.escape(repo_template[pos : vm.start()]))
        names = groups.setdefault(num, [])
        names.append(_group(num, len(names)))
        parts.append(f"(?P<{names[-1]}>{_SEGMENT_CAPTURE})")
        pos = vm.end()
    parts.append(re2.escape(repo_template[pos:]))
    return "".join(parts), groups


def _compile_rule(index: int, raw: Any, cache: dict[tuple[str, bool], Any]) -> Rule:
    if not isinstance(raw, dict):
        raise _Problem("(rule)", f"must be a mapping with registryURI and githubRepository, got {_kind(raw)}")
    for key in raw:
        if key not in KNOWN_FIELDS:
            shown = key if isinstance(key, str) and len(key) <= 60 else _excerpt(key)
            raise _Problem(shown, f"unknown field; known fields: {', '.join(KNOWN_FIELDS)}")
    for key in REQUIRED_FIELDS:
        if raw.get(key) is None or raw.get(key) == "":
            raise _Problem(key, "is required")
    budget = _Budget()

    # registryURI
    uri = _str(raw["registryURI"], "registryURI").strip()
    host, sep, rest = uri.partition("/")
    hm = _REGISTRY_RE.fullmatch(host)
    if not hm:
        raise _Problem(
            "registryURI",
            f"{_excerpt(uri)}: the registry must be the literal host ACCOUNT.dkr.ecr.REGION.amazonaws.com "
            "(12-digit account, region like ap-northeast-1)",
        )
    repo_template, has_tag, tag_pattern = rest.partition(":")
    if not sep or not repo_template:
        raise _Problem("registryURI", f"{_excerpt(uri)} has no repository after the registry host")
    literal = _VAR_RE.sub("x", repo_template)
    if (
        not _REPO_LITERAL_RE.fullmatch(literal)
        or "//" in literal
        or literal.startswith("/")
        or literal.endswith("/")
        or len(literal) > _MAX_REPOSITORY_LEN
    ):
        raise _Problem(
            "registryURI",
            f"repository part {_excerpt(repo_template)} can never match an ECR repository name "
            f"(at most {_MAX_REPOSITORY_LEN} lowercase letters, digits, '.', '_', '-', segments separated "
            "by '/'; $n for one segment)",
        )
    repo_source, repo_groups = _repository_regex(repo_template)
    repo_regex = _compile(repo_source, "registryURI", cache, captures=True, user_text=repo_template)
    repo_vars = list(repo_groups)
    repo_group_indices = _group_indices(repo_regex, repo_groups)
    segments = repo_template.split("/")
    literal_segments = tuple((i, s) for i, s in enumerate(segments) if "$" not in s)

    tag_regex = None
    tag_groups: dict[int, list[str]] = {}
    tag_group_indices: dict[int, tuple[int, ...]] = {}
    if has_tag:
        if not tag_pattern:
            raise _Problem("registryURI", f"{_excerpt(uri)} ends with ':' but has no tag pattern after it")
        source, tag_groups = _tag_pattern_regex(tag_pattern)
        tag_regex = _compile(source, "registryURI", cache, captures=True, user_text=tag_pattern)
        budget.spend(tag_regex, "registryURI", tag_pattern)
        tag_group_indices = _group_indices(tag_regex, tag_groups)
    tag_vars = list(tag_groups)
    captured = set(repo_vars) | set(tag_vars)

    # githubRepository (shown redacted: a token in it must not reach a log)
    git = _str(raw["githubRepository"], "githubRepository").strip()
    shown_git = _shown(git, "githubRepository")
    gm = _GIT_URL_RE.fullmatch(git)
    if not gm:
        raise _Problem(
            "githubRepository", f"{shown_git} must be https://HOST/OWNER/REPO/PATH (or http://HOST:PORT/…)"
        )
    netloc = gm["netloc"]
    if "@" in netloc:
        raise _Problem(
            "githubRepository",
            "must not contain credentials (user@ or token@): tokens come from the environment",
        )
    if "?" in git or "#" in git:
        raise _Problem(
            "githubRepository",
            f"{shown_git} must not contain a query or fragment (tokens come from the environment, "
            "never from the URL)",
        )
    if not _NETLOC_RE.fullmatch(netloc):
        raise _Problem(
            "githubRepository", f"host {_shown(netloc, 'githubRepository')} is not a valid HOST[:PORT]"
        )
    git_path = gm["path"] or ""
    if git_path.endswith("/") and len(git_path) > 1:
        git_path = git_path[:-1]
    if len(git_path.split("/")) < 3:
        raise _Problem(
            "githubRepository", f"{shown_git} must name the repository as https://HOST/OWNER/REPO[/PATH]"
        )
    for vm in _VAR_RE.finditer(git_path):
        num = int(vm[1])
        if num not in captured:
            raise _Problem(
                "githubRepository",
                f"${num} is not captured by registryURI {_excerpt(uri)} (it captures: "
                f"{', '.join(f'${n}' for n in sorted(captured)) or 'nothing'})",
            )

    base_branch = raw.get("baseBranch")
    if base_branch is not None:
        base_branch = _str(base_branch, "baseBranch")
        if not base_branch or _BRANCH_BAD_RE.search(base_branch):
            raise _Problem("baseBranch", f"{_excerpt(base_branch)} is not a valid branch name")
    image_name = raw.get("imageName")
    if image_name is not None:
        image_name = _str(image_name, "imageName")
        if not image_name.strip() or any(c.isspace() for c in image_name):
            raise _Problem("imageName", f"{_excerpt(image_name)} is not an image name (no spaces)")
    write_digest = raw.get("writeDigest", False)
    if write_digest is None:
        write_digest = False
    if not isinstance(write_digest, bool):
        raise _Problem(
            "writeDigest", f"must be true or false, got {_kind(write_digest)} {_excerpt(write_digest)}"
        )
    env = raw.get("env")
    env = "" if env is None else _str(env, "env")

    return Rule(
        index=index,
        registry_uri=uri,
        github_repository=git,
        account=hm["account"],
        region=hm["region"],
        repo_template=repo_template,
        repo_regex=repo_regex,
        segments=len(segments),
        literal_segments=literal_segments,
        tag_pattern=tag_pattern or None,
        tag_regex=tag_regex,
        repo_vars=tuple(repo_vars),
        tag_vars=tuple(tag_vars),
        git_scheme=gm["scheme"],
        git_netloc=netloc,
        git_path_template=git_path,
        allow=_tag_filters(raw.get("allowImageTag"), "allowImageTag", cache, budget),
        deny=_tag_filters(raw.get("denyImageTag"), "denyImageTag", cache, budget),
        env=env,
        mode=_choice(raw.get("mode", "pr"), "mode", MODES),
        base_branch=base_branch,
        image_name=image_name,
        write_digest=write_digest,
        order=_choice(raw.get("order", "push-time"), "order", ORDERS),
        labels=tuple(_str_list(raw.get("labels"), "labels")),
        reviewers=tuple(_str_list(raw.get("reviewers"), "reviewers")),
        provider=_choice(raw.get("provider", "github"), "provider", PROVIDERS),
        repo_groups=repo_group_indices,
        tag_groups=tag_group_indices,
    )


# --- the set ------------------------------------------------------------------------------------


class RuleSet:
    """Compiled rules plus an index for matching.

    Index: ``(account, region)`` → ``(segments, position, literal segment)`` → rule indices, each
    rule filed once under its rarest literal segment; rules without a literal segment sit under
    ``(segments, -1, "")`` and are always candidates for images of that depth.
    """

    def __init__(self, rules: list[Rule], source: str = "rules.yaml") -> None:
        self.rules = rules
        self.source = source
        self._index: dict[tuple[str, str], dict[tuple[int, int, str], list[int]]] = {}
        self._positions: dict[tuple[str, str], dict[int, list[int]]] = {}
        counts: dict[tuple[str, str, int, int, str], int] = {}
        for rule in rules:
            for pos, text in rule.literal_segments:
                key = (rule.account, rule.region, rule.segments, pos, text)
                counts[key] = counts.get(key, 0) + 1
        for rule in rules:
            host = (rule.account, rule.region)
            if rule.literal_segments:
                pos, text = min(
                    rule.literal_segments,
                    key=lambda p: (counts[(rule.account, rule.region, rule.segments, p[0], p[1])], -p[0]),
                )
            else:
                pos, text = -1, ""
            self._index.setdefault(host, {}).setdefault((rule.segments, pos, text), []).append(rule.index)
            positions = self._positions.setdefault(host, {}).setdefault(rule.segments, [])
            if pos not in positions:
                positions.append(pos)

    def __len__(self) -> int:
        return len(self.rules)

    def candidates(self, image: Image) -> list[int]:
        """Indices (ascending) of the rules the index cannot rule out for ``image``."""
        if image.account:
            hosts = [(image.account, image.region)]
        else:  # account unknown (explain on a moto event): any account in the region
            hosts = [h for h in self._index if h[1] == image.region]
        parts = image.repository.split("/")
        segments = len(parts)
        found: list[int] = []
        for host in hosts:
            index = self._index.get(host, {})
            for pos in self._positions.get(host, {}).get(segments, ()):
                found += index.get((segments, pos, parts[pos] if pos >= 0 else ""), ())
        return sorted(found)

    def match(self, image: Image, *, all_reasons: bool = False) -> Match:
        """Targets for ``image`` in rule order, and the rules that refused it with their reasons.

        Args:
            image: the validated image.
            all_reasons: also list every rule whose registry or repository does not match
                (``imagebump explain``). Off by default, so matching costs only the candidates
                the index yields, whatever the number of rules.
        """
        result = Match()
        indices = range(len(self.rules)) if all_reasons else self.candidates(image)
        seen: dict[tuple[str, str, str | None], int] = {}
        for i in indices:
            outcome = self.rules[i].evaluate(image)
            if isinstance(outcome, str):
                result.skipped.append(SkippedRule(rule=i, reason=outcome))
                continue
            key = (outcome.repo_url, outcome.path, outcome.image_name)
            if key in seen:
                result.skipped.append(
                    SkippedRule(
                        rule=i,
                        reason=f"same overlay {outcome.repo_url}/{outcome.path} as rule {seen[key]}: "
                        "one target per overlay",
                    )
                )
                continue
            seen[key] = i
            result.targets.append(outcome)
        return result


def _yaml_error(exc: Exception) -> str:
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def _loader() -> type:
    """PyYAML's safe loader (the C one when built: ~10x faster on 10,000 rules)."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return node.value
    return []


def _check_duplicate_keys(root: Any, loader: Any) -> None:
    """Refuse a mapping that repeats a key, among the keys written in it (merged keys may be overridden).

    Runs on the composed nodes, before ``<<`` merge keys are applied, so ``- <<: *base`` followed by
    one key of ``base`` is the standard override it is, while ``env: a`` twice is refused.
    """
    import yaml

    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        stack.extend(_children(node))
        if not isinstance(node, yaml.MappingNode):
            continue
        keys: set[Any] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            key = loader.construct_object(key_node)
            try:
                duplicate = key in keys
                keys.add(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "found an unhashable key", key_node.start_mark
                ) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"found duplicate key {_excerpt(key)}", key_node.start_mark
                )


def _expanded_sizes(root: Any, source: str) -> dict[int, int]:
    """Each node's size with every alias written out, by node identity — without expanding anything.

    One pass over the composed nodes (aliases share nodes; sizes are memoised), so a 'billion
    laughs' file costs a few hundred steps. A node that contains an alias to itself is refused.
    """
    cap = 1 << 62
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            sizes[key] = min(cap, 1 + sum(sizes[id(child)] for child in _children(node)))
            continue
        if key in sizes:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                mark = child.start_mark
                raise RulesError(
                    f"{source}: the YAML node at line {mark.line + 1} column {mark.column + 1} contains an "
                    "alias to itself (a recursive document); write the values out"
                )
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes


def _check_aliases(root: Any, source: str, rules_node: Any) -> None:
    """Refuse aliases that add more than MAX_ALIAS_EXPANSION nodes (or the written count, if larger).

    The message names the rule and the field that hold the largest expansion, and never the value.
    """
    import yaml

    sizes = _expanded_sizes(root, source)
    written = len(sizes)
    added = sizes[id(root)] - written
    limit = max(MAX_ALIAS_EXPANSION, written)
    if added <= limit:
        return
    total = sizes[id(root)]
    where = ""
    if isinstance(rules_node, yaml.SequenceNode) and rules_node.value:
        index, item = max(enumerate(rules_node.value), key=lambda p: sizes[id(p[1])])
        where = f"rule {index}: "
        if isinstance(item, yaml.MappingNode) and item.value:
            key_node, _ = max(item.value, key=lambda pair: sizes[id(pair[1])])
            name = key_node.value if isinstance(key_node, yaml.ScalarNode) else "(key)"
            where += f"{name if len(name) <= 60 else _excerpt(name)}: "
    raise RulesError(
        f"{source}: {where}YAML aliases expand this file to "
        f"{total if total < (1 << 62) else 'astronomically many'} nodes from {written} written (more than "
        f"{limit} added: a 'billion laughs' file); write the values out without anchors and aliases"
    )


def _top_level(root: Any, source: str) -> Any:
    """The node holding the list of rules (the root, or the value of ``rules:``); shape errors raised."""
    import yaml

    if isinstance(root, yaml.MappingNode):
        keys = [k.value if isinstance(k, yaml.ScalarNode) else _excerpt(k.tag) for k, _ in root.value]
        extra = sorted(_excerpt(k) if len(k) > 60 else k for k in keys if k != "rules")
        if extra or "rules" not in keys:
            raise RulesError(
                f"{source}: a mapping at the top must hold only 'rules:' (a list of rules); "
                f"found {', '.join(extra) or 'no rules key'}"
            )
        return next(v for k, v in root.value if isinstance(k, yaml.ScalarNode) and k.value == "rules")
    return root


def _load_yaml(text: str, source: str) -> Any:
    """Compose ``text``, check duplicate keys (before merges) and alias expansion, then construct."""

    loader = _loader()(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        rules_node = _top_level(root, source)
        _check_aliases(root, source, rules_node)
        _check_duplicate_keys(root, loader)
        return loader.construct_document(root)
    finally:
        loader.dispose()


def load_rules(text: str, source: str = "rules.yaml") -> RuleSet:
    """Parse and compile a whole rules file. A bad file is rejected whole.

    YAML merge keys (``- <<: *base``) are standard and work; a key written twice in one mapping is
    refused. Aliases may not expand the file beyond :data:`MAX_ALIAS_EXPANSION` extra nodes.

    Raises:
        RulesError: ``SOURCE: rule N: FIELD: problem`` (or ``SOURCE: problem`` for the file).
    """
    import yaml

    try:
        data = _load_yaml(text, source)
    except yaml.YAMLError as exc:
        raise RulesError(f"{source}: not valid YAML: {_yaml_error(exc)}") from None
    except RecursionError:
        raise RulesError(
            f"{source}: the YAML is nested too deeply to read; a rules file is a few levels deep"
        ) from None
    if isinstance(data, dict):
        data = data["rules"]  # _top_level checked it holds only that
    if data is None:
        raise RulesError(f"{source}: no rules: expected a list of rules (or 'rules:' holding one)")
    if not isinstance(data, list):
        raise RulesError(f"{source}: expected a list of rules (or 'rules:' holding one), got {_kind(data)}")
    cache: dict[tuple[str, bool], Any] = {}
    rules = []
    for index, raw in enumerate(data):
        try:
            rules.append(_compile_rule(index, raw, cache))
        except _Problem as problem:
            raise RulesError(f"{source}: rule {index}: {problem.field}: {problem.message}") from None
    return RuleSet(rules, source)


def load_rules_file(path: str | Path) -> RuleSet:
    """Read and compile the rules file at ``path`` (see :func:`load_rules`).

    Raises:
        RulesError: the file cannot be read, or is invalid.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise RulesError(
            f"rules file {str(p)!r} does not exist: mount it there or set IMAGEBUMP_RULES_FILE"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RulesError(f"rules file {str(p)!r} cannot be read: {exc}") from None
    return load_rules(text, source=str(p))

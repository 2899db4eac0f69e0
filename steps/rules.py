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
  captures ``[A-Za-z0-9]+``. A ``$n`` used twice must capture the same text both times.
- ``githubRepository`` = ``https://HOST/OWNER/REPO/PATH…`` (``http://host:port`` for a local
  remote). ``$n`` are substituted; the result must stay inside the repository (no ``..``, no
  ``.``, no empty segment) or that target is refused with a reason.
- ``allowImageTag`` / ``denyImageTag``: ``regexp:RE`` (full match) or a literal tag; an empty
  allow list allows every tag; deny wins. A digest-only push has no tag: a rule with an allow list
  or a tag pattern refuses it.
- Patterns that can backtrack exponentially on a 128-character tag are refused at load: a
  repeated group holding a repeat (``(a+)+``, ``(a?){30}``) with no separator pinning each
  round, or a repeated alternation whose branches overlap (``(a|a)*``, ``(a|a?)+``).

Matching does not try every rule: each rule is indexed under its registry host, its number of path
segments and its rarest literal path segment (``team/$1`` under ``team``; ``$1/api`` under ``api``),
so an event costs a few dict lookups plus the candidate rules, whatever the number of rules.
"""

from __future__ import annotations

import re
import re._constants as _sre  # the parser is stable since 3.11 (it backs re itself)
import re._parser as _sre_parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

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


# --- regular expressions --------------------------------------------------------------------


_TAG_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_CATEGORIES = {
    _sre.CATEGORY_DIGIT: frozenset("0123456789"),
    _sre.CATEGORY_WORD: frozenset(c for c in _TAG_ALPHABET if c not in ".-"),
    _sre.CATEGORY_SPACE: frozenset(),
}


def _charset(op: Any, av: Any) -> frozenset[str] | None:
    """The tag characters one single-character item matches (None: not a single-character item)."""
    if op == _sre.LITERAL:
        return frozenset(c for c in (chr(av),) if c in _TAG_ALPHABET)
    if op == _sre.NOT_LITERAL:
        return _TAG_ALPHABET - {chr(av)}
    if op == _sre.ANY:
        return _TAG_ALPHABET
    if op == _sre.IN:
        chars: set[str] = set()
        negate = False
        for iop, iav in av:
            if iop == _sre.NEGATE:
                negate = True
            elif iop == _sre.LITERAL:
                chars.add(chr(iav))
            elif iop == _sre.RANGE:
                chars.update(c for c in _TAG_ALPHABET if iav[0] <= ord(c) <= iav[1])
            elif iop == _sre.CATEGORY:
                if iav in _CATEGORIES:
                    chars.update(_CATEGORIES[iav])
                else:  # a negated category (\D, \W, \S): whatever it is not
                    pos = {
                        _sre.CATEGORY_NOT_DIGIT: _sre.CATEGORY_DIGIT,
                        _sre.CATEGORY_NOT_WORD: _sre.CATEGORY_WORD,
                        _sre.CATEGORY_NOT_SPACE: _sre.CATEGORY_SPACE,
                    }.get(iav)
                    chars.update(_TAG_ALPHABET - _CATEGORIES[pos] if pos is not None else _TAG_ALPHABET)
            else:
                return _TAG_ALPHABET
        chars &= _TAG_ALPHABET
        return frozenset(_TAG_ALPHABET - chars if negate else chars)
    return None


def _variable(av: Any) -> bool:
    """Whether a repeat's count varies (``?``, ``*``, ``+``, ``{n,m}``), unlike ``{n}``."""
    return av[0] != av[1]


def _repeated_chars(items: Any) -> frozenset[str]:
    """Union of what the repeats inside ``items`` can consume (conservative: all for complex bodies)."""
    found: set[str] = set()
    for op, av in items:
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) and _variable(av):
            sub = av[2]
            cs = _charset(*sub[0]) if len(sub) == 1 else None
            found |= cs if cs is not None else _TAG_ALPHABET
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
            found |= _repeated_chars(av[2])
        elif op == _sre.SUBPATTERN:
            found |= _repeated_chars(av[-1])
        elif op == _sre.BRANCH:
            for b in av[1]:
                found |= _repeated_chars(b)
    return frozenset(found)


def _required_chars(items: Any) -> list[frozenset[str]]:
    """Character sets of the single characters a sequence must match, outside any repeat."""
    sets: list[frozenset[str]] = []
    for op, av in items:
        cs = _charset(op, av)
        if cs is not None:
            sets.append(cs)
        elif op == _sre.SUBPATTERN:
            sets += _required_chars(av[-1])
    return sets


def _has_repeat(items: Any) -> bool:
    """Whether ``items`` holds a repeat whose count varies (``a?`` and ``a{1,3}`` included)."""
    for op, av in items:
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) and (_variable(av) or _has_repeat(av[2])):
            return True
        if op == _sre.SUBPATTERN and _has_repeat(av[-1]):
            return True
        if op == _sre.BRANCH and any(_has_repeat(b) for b in av[1]):
            return True
    return False


_ZERO_WIDTH = (_sre.AT, _sre.ASSERT, _sre.ASSERT_NOT)


def _first(items: Any) -> tuple[frozenset[str], bool]:
    """(characters a match of ``items`` can start with, whether it can match the empty string).

    Conservative: anything not understood may start with any tag character.
    """
    firsts: set[str] = set()
    for op, av in items:
        cs = _charset(op, av)
        if cs is not None:
            return frozenset(firsts | cs), False
        if op in _ZERO_WIDTH:
            continue
        if op == _sre.SUBPATTERN:
            sub, nullable = _first(av[-1])
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
            sub, nullable = _first(av[2])
            nullable = nullable or av[0] == 0
        elif op == _sre.BRANCH:
            pairs = [_first(b) for b in av[1]]
            sub = frozenset().union(*(f for f, _ in pairs))
            nullable = any(n for _, n in pairs)
        else:  # back-references, atomic groups, ...: anything
            return _TAG_ALPHABET, False
        firsts |= sub
        if not nullable:
            return frozenset(firsts), False
    return frozenset(firsts), True


def _ambiguous_branch(items: Any) -> bool:
    """Whether ``items`` holds an alternation two of whose branches can start alike, or match nothing.

    Repeated, such an alternation (``(a|a)*``, ``(a|a?)+``, ``(a|ab)+``) can match one text in
    exponentially many ways. Branches that start with different characters (``(foo|bar)+``) pick
    themselves from the next character and are fine.
    """
    for op, av in items:
        if op == _sre.BRANCH:
            seen: set[str] = set()
            for b in av[1]:
                chars, nullable = _first(b)
                if nullable or chars & seen:
                    return True
                seen |= chars
            if any(_ambiguous_branch(b) for b in av[1]):
                return True
        elif op == _sre.SUBPATTERN and _ambiguous_branch(av[-1]):
            return True
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) and _ambiguous_branch(av[2]):
            return True
    return False


_NESTED = (
    "nests quantifiers (like (a+)+ or (a?){30}) and can take exponential time on a near-miss tag; "
    "rewrite it without a repeated group that itself repeats (e.g. [a-z]+ instead of ([a-z]+)+)"
)
_ALTERNATION = (
    "repeats an alternation whose branches can match the same text or nothing (like (a|a)* or "
    "(a|a?)+) and can take exponential time on a near-miss tag; use a character class such as "
    "[ab]+, make the branches start with different characters, or list the tags separately"
)


def _catastrophic(pattern: str) -> str | None:
    r"""Why ``pattern`` can backtrack exponentially, or None.

    Refused, inside a group repeated more than once (``*``, ``+``, ``{n,}``, ``{n,m}``, ``{n}``
    with n > 1):

    - a repeat of varying count (``(a+)+``, ``(\w+\.?)*``, ``(.+-)+``, ``(a?){30}``), unless a
      required character the inner repeats cannot consume pins where each round ends:
      ``(\d+\.){3}`` and ``(?:[a-z]+-)*`` are accepted;
    - an alternation whose branches can start with the same character or match nothing
      (``(a|a)*``, ``(a|a?)+``). ``(foo|bar)+`` is accepted.
    """

    def walk(items: Any) -> str | None:
        for op, av in items:
            if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
                lo, hi, sub = av
                if hi > 1:
                    if _ambiguous_branch(sub):
                        return _ALTERNATION
                    if _has_repeat(sub):
                        consumed = _repeated_chars(sub)
                        if not any(cs and not (cs & consumed) for cs in _required_chars(sub)):
                            return _NESTED
                found = walk(sub)
            elif op == _sre.SUBPATTERN:
                found = walk(av[-1])
            elif op == _sre.BRANCH:
                found = next((r for r in map(walk, av[1]) if r), None)
            elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
                found = walk(av[1])
            else:
                found = None
            if found:
                return found
        return None

    try:
        return walk(_sre_parse.parse(pattern).data)
    except Exception:  # noqa: BLE001 - compile() reports syntax errors with a better message
        return None


def _compile(pattern: str, field_name: str, cache: dict[str, re.Pattern[str]]) -> re.Pattern[str]:
    cached = cache.get(pattern)
    if cached is not None:
        return cached
    if len(pattern) > _MAX_PATTERN_LEN:
        raise _Problem(
            field_name, f"regular expression is {len(pattern)} characters, over {_MAX_PATTERN_LEN}"
        )
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise _Problem(field_name, f"invalid regular expression {pattern!r}: {exc}") from None
    problem = _catastrophic(pattern)
    if problem:
        raise _Problem(field_name, f"regular expression {pattern!r} {problem}")
    cache[pattern] = compiled
    return compiled


def _tag_pattern_regex(pattern: str) -> tuple[str, list[int]]:
    """Turn the tag pattern of registryURI into a regex: ``$n`` → ``(?P<_cN>[A-Za-z0-9]+)``.

    A ``$n`` used twice in the tag becomes a back-reference; a ``$n`` also used in the repository
    part is checked for equality by :meth:`Rule.evaluate`. ``$`` not followed by a digit, and
    anything inside ``[...]`` or after ``\\``, stays regex syntax.
    """
    out: list[str] = []
    seen: list[int] = []
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
            if num in seen:
                out.append(f"(?P=_c{num})")
            else:
                out.append(f"(?P<_c{num}>{_TAG_CAPTURE})")
                seen.append(num)
            i = m.end()
            continue
        out.append(c)
        i += 1
    return "".join(out), seen


# --- one rule ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _TagFilter:
    text: str
    regex: re.Pattern[str] | None

    def matches(self, tag: str) -> bool:
        return bool(self.regex.fullmatch(tag)) if self.regex is not None else tag == self.text


@dataclass(slots=True)
class Rule:
    """One compiled rule. ``index`` is its 0-based position in the file."""

    index: int
    registry_uri: str
    github_repository: str
    account: str
    region: str
    repo_template: str
    repo_regex: re.Pattern[str]
    segments: int
    literal_segments: tuple[tuple[int, str], ...]
    tag_pattern: str | None
    tag_regex: re.Pattern[str] | None
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

    @property
    def host(self) -> str:
        return f"{self.account}.dkr.ecr.{self.region}.amazonaws.com"

    def evaluate(self, image: Image) -> Target | str:
        """The target this rule yields for ``image``, or the reason it yields none."""
        if image.region != self.region or (image.account and image.account != self.account):
            registry = (
                image.registry if image.account else f"(unknown account).dkr.ecr.{image.region}.amazonaws.com"
            )
            return f"registry {registry} is not {self.host} (registryURI {self.registry_uri})"
        m = self.repo_regex.fullmatch(image.repository)
        if not m:
            return f"repository {image.repository} does not match {self.host}/{self.repo_template}"
        captures = {int(k[2:]): v for k, v in m.groupdict().items()}
        if image.tag is None:
            if self.tag_regex is not None:
                return f"digest-only push (no tag): registryURI has the tag pattern {self.tag_pattern!r}"
            if self.allow:
                return "digest-only push (no tag): the rule has an allowImageTag list"
        else:
            if self.tag_regex is not None:
                tm = self.tag_regex.fullmatch(image.tag)
                if not tm:
                    pattern = self.tag_pattern
                    return f"tag {image.tag!r} does not match the tag pattern '{pattern}' of registryURI"
                for k, v in tm.groupdict().items():
                    num = int(k[2:])
                    if num in captures and captures[num] != v:
                        return f"${num} is {captures[num]!r} in the repository but {v!r} in the tag"
                    captures[num] = v
            for entry in self.deny:
                if entry.matches(image.tag):
                    return f"tag {image.tag!r} is denied by denyImageTag entry '{entry.text}'"
            if self.allow and not any(entry.matches(image.tag) for entry in self.allow):
                allowed = ", ".join(e.text for e in self.allow)
                return f"tag {image.tag!r} is not allowed by allowImageTag ({allowed})"
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


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise _Problem(name, f"must be a string, got {_kind(value)} {value!r} (quote it)")
    return value


def _str_list(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Problem(name, f"must be a list, got {_kind(value)} {value!r}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise _Problem(f"{name}[{i}]", f"must be a string, got {_kind(item)} {item!r} (quote it)")
    return list(value)


def _choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise _Problem(name, f"must be one of {', '.join(choices)}, got {value!r}")
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


def _tag_filters(value: Any, name: str, cache: dict[str, re.Pattern[str]]) -> tuple[_TagFilter, ...]:
    filters = []
    for i, item in enumerate(_str_list(value, name)):
        if item.startswith("regexp:"):
            filters.append(_TagFilter(item, _compile(item[len("regexp:") :], f"{name}[{i}]", cache)))
        elif _TAG_LITERAL_RE.fullmatch(item) and item.isascii():
            filters.append(_TagFilter(item, None))
        else:
            raise _Problem(
                f"{name}[{i}]",
                f"{item!r} is not a valid image tag, so it can never match; for a pattern write 'regexp:RE'",
            )
    return tuple(filters)


def _compile_rule(index: int, raw: Any, cache: dict[str, re.Pattern[str]]) -> Rule:
    if not isinstance(raw, dict):
        raise _Problem("(rule)", f"must be a mapping with registryURI and githubRepository, got {_kind(raw)}")
    for key in raw:
        if key not in KNOWN_FIELDS:
            raise _Problem(str(key), f"unknown field; known fields: {', '.join(KNOWN_FIELDS)}")
    for key in REQUIRED_FIELDS:
        if raw.get(key) in (None, ""):
            raise _Problem(key, "is required")

    # registryURI
    uri = _str(raw["registryURI"], "registryURI").strip()
    host, sep, rest = uri.partition("/")
    hm = _REGISTRY_RE.fullmatch(host)
    if not hm:
        raise _Problem(
            "registryURI",
            f"{uri!r}: the registry must be the literal host ACCOUNT.dkr.ecr.REGION.amazonaws.com "
            "(12-digit account, region like ap-northeast-1)",
        )
    repo_template, has_tag, tag_pattern = rest.partition(":")
    if not sep or not repo_template:
        raise _Problem("registryURI", f"{uri!r} has no repository after the registry host")
    literal = _VAR_RE.sub("x", repo_template)
    if (
        not _REPO_LITERAL_RE.fullmatch(literal)
        or "//" in literal
        or literal.startswith("/")
        or literal.endswith("/")
    ):
        raise _Problem(
            "registryURI",
            f"repository part {repo_template!r} can never match an ECR repository name "
            "(lowercase letters, digits, '.', '_', '-', segments separated by '/'; $n for one segment)",
        )
    repo_vars: list[int] = []
    regex_parts: list[str] = []
    pos = 0
    for vm in _VAR_RE.finditer(repo_template):
        num = int(vm[1])
        if num == 0:
            raise _Problem("registryURI", "$0 is not a capture; captures are numbered from $1")
        regex_parts.append(re.escape(repo_template[pos : vm.start()]))
        if num in repo_vars:
            regex_parts.append(f"(?P=_c{num})")
        else:
            regex_parts.append(f"(?P<_c{num}>{_SEGMENT_CAPTURE})")
            repo_vars.append(num)
        pos = vm.end()
    regex_parts.append(re.escape(repo_template[pos:]))
    repo_regex = re.compile("".join(regex_parts))
    segments = repo_template.split("/")
    literal_segments = tuple((i, s) for i, s in enumerate(segments) if "$" not in s)

    tag_regex = None
    tag_vars: list[int] = []
    if has_tag:
        if not tag_pattern:
            raise _Problem("registryURI", f"{uri!r} ends with ':' but has no tag pattern after it")
        source, tag_vars = _tag_pattern_regex(tag_pattern)
        tag_regex = _compile(source, "registryURI", cache)
    captured = set(repo_vars) | set(tag_vars)

    # githubRepository
    git = _str(raw["githubRepository"], "githubRepository").strip()
    gm = _GIT_URL_RE.fullmatch(git)
    if not gm:
        raise _Problem(
            "githubRepository", f"{git!r} must be https://HOST/OWNER/REPO/PATH (or http://HOST:PORT/…)"
        )
    netloc = gm["netloc"]
    if "@" in netloc:
        raise _Problem(
            "githubRepository",
            "must not contain credentials (user@ or token@): tokens come from the environment",
        )
    if not _NETLOC_RE.fullmatch(netloc):
        raise _Problem("githubRepository", f"host {netloc!r} is not a valid HOST[:PORT]")
    git_path = gm["path"] or ""
    if git_path.endswith("/") and len(git_path) > 1:
        git_path = git_path[:-1]
    if len(git_path.split("/")) < 3:
        raise _Problem(
            "githubRepository", f"{git!r} must name the repository as https://HOST/OWNER/REPO[/PATH]"
        )
    for vm in _VAR_RE.finditer(git_path):
        num = int(vm[1])
        if num not in captured:
            raise _Problem(
                "githubRepository",
                f"${num} is not captured by registryURI {uri!r} (it captures: "
                f"{', '.join(f'${n}' for n in sorted(captured)) or 'nothing'})",
            )
    if "?" in git_path or "#" in git_path:
        raise _Problem("githubRepository", f"{git!r} must not contain a query or fragment")

    base_branch = raw.get("baseBranch")
    if base_branch is not None:
        base_branch = _str(base_branch, "baseBranch")
        if not base_branch or _BRANCH_BAD_RE.search(base_branch):
            raise _Problem("baseBranch", f"{base_branch!r} is not a valid branch name")
    image_name = raw.get("imageName")
    if image_name is not None:
        image_name = _str(image_name, "imageName")
        if not image_name.strip() or any(c.isspace() for c in image_name):
            raise _Problem("imageName", f"{image_name!r} is not an image name (no spaces)")
    write_digest = raw.get("writeDigest", False)
    if write_digest is None:
        write_digest = False
    if not isinstance(write_digest, bool):
        raise _Problem("writeDigest", f"must be true or false, got {_kind(write_digest)} {write_digest!r}")
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
        allow=_tag_filters(raw.get("allowImageTag"), "allowImageTag", cache),
        deny=_tag_filters(raw.get("denyImageTag"), "denyImageTag", cache),
        env=env,
        mode=_choice(raw.get("mode", "pr"), "mode", MODES),
        base_branch=base_branch,
        image_name=image_name,
        write_digest=write_digest,
        order=_choice(raw.get("order", "push-time"), "order", ORDERS),
        labels=tuple(_str_list(raw.get("labels"), "labels")),
        reviewers=tuple(_str_list(raw.get("reviewers"), "reviewers")),
        provider=_choice(raw.get("provider", "github"), "provider", PROVIDERS),
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
    """PyYAML's safe loader (the C one when built: ~10x faster on 10,000 rules), duplicate keys refused."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc, valid-type]
        pass

    def construct_mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        loader.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "found an unhashable key", key_node.start_mark
                ) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"found duplicate key {key!r}", key_node.start_mark
                )
        return loader.construct_mapping(node, deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    _LOADER = Loader
    return Loader


_LOADER: type | None = None


def load_rules(text: str, source: str = "rules.yaml") -> RuleSet:
    """Parse and compile a whole rules file. A bad file is rejected whole.

    Raises:
        RulesError: ``SOURCE: rule N: FIELD: problem`` (or ``SOURCE: problem`` for the file).
    """
    import yaml

    try:
        data = yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise RulesError(f"{source}: not valid YAML: {_yaml_error(exc)}") from None
    if isinstance(data, dict):
        extra = sorted(str(k) for k in data if k != "rules")
        if extra or "rules" not in data:
            raise RulesError(
                f"{source}: a mapping at the top must hold only 'rules:' (a list of rules); "
                f"found {', '.join(extra) or 'no rules key'}"
            )
        data = data["rules"]
    if data is None:
        raise RulesError(f"{source}: no rules: expected a list of rules (or 'rules:' holding one)")
    if not isinstance(data, list):
        raise RulesError(f"{source}: expected a list of rules (or 'rules:' holding one), got {_kind(data)}")
    cache: dict[str, re.Pattern[str]] = {}
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

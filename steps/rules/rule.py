"""One rule, compiled: :class:`Rule` (patterns, index keys) and what it yields for an image.

:func:`compile_rule` turns a validated :class:`~steps.rules.schema.RuleSpec` into a :class:`Rule`:
the registry host (literal ``ACCOUNT.dkr.ecr.REGION.amazonaws.com``), the repository part and the
tag pattern through the ONE ``$n`` compiler (:func:`~steps.rules.patterns.dollar_regex`), the
allow and deny lists, and ``githubRepository``'s shape (no credentials, query or fragment; every
``$n`` it uses captured by registryURI). :meth:`Rule.evaluate` is pure: a target, or the reason
the rule yields none. :attr:`Rule.repository_prefix` and :meth:`Rule.match_repository` are the
one home of "may this ECR repository belong to this rule" (reconcile filters ECR's listing with
them).

Semantics (users read them in docs/rules.md; every key: docs/reference/rules.md):

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
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from steps.domain.errors import RuleFieldError as _Problem
from steps.domain.models import SETTINGS_FIELDS, HelmfileRef, Image, PromoteAfter, RuleSettings, Target
from steps.rules.patterns import (
    VAR_RE,
    Budget,
    TagFilter,
    TagList,
    collect_captures,
    compile_pattern,
    dollar_regex,
    group_indices,
    tag_filters,
)
from steps.rules.schema import RuleSpec, parse_rule
from steps.rules.show import excerpt as _excerpt
from steps.rules.show import shown as _shown

_REGISTRY_RE = re.compile(
    r"(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2})\.amazonaws\.com"
)
_REPO_LITERAL_RE = re.compile(r"[a-z0-9._/-]*")
_GIT_URL_RE = re.compile(r"(?P<scheme>https?)://(?P<netloc>[^/]*)(?P<path>/.*)?")
_NETLOC_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?")
_OWNER_REPO_RE = re.compile(r"[A-Za-z0-9_.-]+")
#: ECR's limit on a repository name: a longer repository part can never match.
_MAX_REPOSITORY_LEN = 256


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
    allow: tuple[TagFilter, ...] = ()
    deny: tuple[TagFilter, ...] = ()
    env: str = ""
    #: How its targets are written, gated and announced: one object every target shares.
    settings: RuleSettings = field(default_factory=RuleSettings)
    values_file: str | None = None
    values_keys: dict[str, str] | None = None
    helmfile: tuple[str, str, str] | None = None  # file, release, environment (templates: $n)
    repo_groups: dict[int, tuple[int, ...]] = field(default_factory=dict)  # $n -> group indices
    tag_groups: dict[int, tuple[int, ...]] = field(default_factory=dict)
    _allow: TagList = field(default_factory=TagList)
    _deny: TagList = field(default_factory=TagList)

    def __post_init__(self) -> None:
        self._allow = TagList.of(self.allow)
        self._deny = TagList.of(self.deny)

    @property
    def host(self) -> str:
        return f"{self.account}.dkr.ecr.{self.region}.amazonaws.com"

    @property
    def repository_prefix(self) -> str:
        """The fixed start of every repository this rule matches: ``hoge/fuga/`` for ``hoge/fuga/$1/$2``.

        The whole repository for a rule without ``$n``. A repository that does not start with it
        cannot match (a cheap filter before :meth:`match_repository`, e.g. over ECR's listing).
        """
        m = VAR_RE.search(self.repo_template)
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
        return None if collect_captures(m, self.repo_groups, captures) else captures

    def evaluate(self, image: Image) -> Target | str:
        """The target this rule yields for ``image``, or the reason it yields none."""
        if image.region != self.region or (image.account and image.account != self.account):
            registry = (
                image.registry if image.account else f"(unknown account).dkr.ecr.{image.region}.amazonaws.com"
            )
            return f"registry {registry} is not {self.host} (registryURI {self.registry_uri})"
        m = self.repo_regex.fullmatch(image.repository)
        captures: dict[int, str] = {}
        if m is None or collect_captures(m, self.repo_groups, captures):
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
                why = collect_captures(tm, self.tag_groups, in_tag)
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
        location = VAR_RE.sub(lambda v: captures[int(v[1])], self.git_path_template)
        where = _repo_and_path(location)
        if isinstance(where, str):
            return f"githubRepository {self.git_scheme}://{self.git_netloc}{location}: {where}"
        owner_repo, path = where
        uri = image.uri if image.account else f"{self.host}/{image.repository}"
        values: dict = {}
        if self.values_file is not None or self.helmfile is not None:
            values = _values_target(self, path, captures)
            if isinstance(values, str):
                return values
            path = values.pop("path")
        return Target.of(
            self.settings,
            rule=self.index,
            repo_url=f"{self.git_scheme}://{self.git_netloc}/{owner_repo}",
            path=path,
            env=self.env,
            image=uri,
            tag=image.tag,
            digest=image.digest,
            pushed_at=image.pushed_at,
            event_id=image.event_id,
            **values,
        )


def _values_target(rule: Rule, path: str, captures: dict[int, str]) -> dict | str:
    """The target's values-file fields (``path`` becomes the file's directory), or why none."""

    def resolve(template: str, what: str) -> str | None:
        value = VAR_RE.sub(lambda v: captures[int(v[1])], template)
        joined = posixpath.normpath(
            value.lstrip("/") if value.startswith("/") else posixpath.join(path, value)
        )
        if joined in (".", "") or joined == ".." or joined.startswith("../") or joined.startswith("/"):
            return None
        return joined

    fields: dict = {"values_keys": dict(rule.values_keys) if rule.values_keys else None}
    if rule.values_file is not None:
        file = resolve(rule.values_file, "valuesFile")
        if file is None:
            return f"valuesFile {rule.values_file!r} resolves outside the repository"
        fields["values_file"] = file
    else:
        assert rule.helmfile is not None
        template, release, environment = rule.helmfile
        file = resolve(template, "helmfile.file")
        if file is None:
            return f"helmfile.file {template!r} resolves outside the repository"
        sub = lambda t: VAR_RE.sub(lambda v: captures[int(v[1])], t)  # noqa: E731
        fields["helmfile"] = HelmfileRef(file=file, release=sub(release), environment=sub(environment))
    fields["path"] = posixpath.dirname(file) or "."
    return fields


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


def values_checks(spec: RuleSpec, captured: set[int], uri: str) -> None:
    """``valuesFile`` / ``helmfile`` / ``valuesKeys`` together: one target file, captured ``$n`` only."""
    if spec.values_file is not None and spec.helmfile is not None:
        raise _Problem("valuesFile", "a rule names either valuesFile or helmfile, not both")
    if spec.values_keys is not None and spec.values_file is None and spec.helmfile is None:
        raise _Problem("valuesKeys", "needs valuesFile or helmfile (the file whose keys it names)")
    templates = [("valuesFile", spec.values_file)]
    if spec.helmfile is not None:
        templates += [
            (f"helmfile.{k}", getattr(spec.helmfile, k)) for k in ("file", "release", "environment")
        ]
    for name, template in templates:
        for vm in VAR_RE.finditer(template or ""):
            if int(vm[1]) not in captured:
                raise _Problem(name, f"${vm[1]} is not captured by registryURI {_excerpt(uri)}")


def gate_checks(spec: RuleSpec, *, gate_written: bool) -> PromoteAfter | None:
    """``promoteAfter`` and ``gate`` together (issue 35); ``gate_written``: the rule as written has
    a ``gate`` key (a struct cannot tell a default from a value). The env it names is checked against
    the other rules by the loader (:func:`steps.rules.loader.load_rules`)."""
    after = spec.promote_after
    if after is None:
        if gate_written:
            raise _Problem("gate", "needs promoteAfter: {env, soak} (the environment to wait for)")
        return None
    if spec.env and after.env == spec.env:
        raise _Problem(
            "promoteAfter.env",
            f"{_excerpt(after.env)} is this rule's own env: name the environment before it",
        )
    if spec.gate == "check" and spec.mode != "pr":
        raise _Problem(
            "gate",
            "check needs mode: pr (the commit status goes on the pull request's head commit); use gate: wait",
        )
    return PromoteAfter(env=after.env, soak_seconds=after.soak_seconds)


@dataclass(frozen=True)
class _RegistryParts:
    """What ``registryURI`` compiles to (:func:`_compile_registry_uri`)."""

    account: str
    region: str
    repo_template: str
    repo_regex: Any
    repo_groups: dict[int, list[str]]
    segments: list[str]
    tag_pattern: str
    tag_regex: Any
    tag_groups: dict[int, list[str]]
    tag_group_indices: dict[int, tuple[int, ...]]

    @property
    def captured(self) -> set[int]:
        return set(self.repo_groups) | set(self.tag_groups)


def _check_commit_settings(spec: RuleSpec) -> None:
    """``commitMethod: api`` needs GitHub; ``requireVerified`` needs ``commitMethod: api``."""
    if spec.commit_method == "api" and spec.provider != "github":
        raise _Problem(
            "commitMethod",
            f"api needs provider: github (GitHub's git database API), got provider: {spec.provider}; "
            "use commitMethod: git or provider: github",
        )
    if spec.require_verified and spec.commit_method != "api":
        raise _Problem(
            "requireVerified",
            "needs commitMethod: api (commits pushed with git are unsigned, GitHub never verifies them); "
            "add commitMethod: api",
        )


def _compile_registry_uri(uri: str, cache: dict[tuple[str, bool], Any], budget: Budget) -> _RegistryParts:
    """``registryURI``: the literal registry host, the repository template and the optional tag pattern."""
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
    literal = VAR_RE.sub("x", repo_template)
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
    repo_source, repo_groups = dollar_regex(repo_template, literal=True)
    repo_regex = compile_pattern(repo_source, "registryURI", cache, captures=True, user_text=repo_template)

    tag_regex = None
    tag_groups: dict[int, list[str]] = {}
    tag_group_indices: dict[int, tuple[int, ...]] = {}
    if has_tag:
        if not tag_pattern:
            raise _Problem("registryURI", f"{_excerpt(uri)} ends with ':' but has no tag pattern after it")
        source, tag_groups = dollar_regex(tag_pattern, literal=False)
        tag_regex = compile_pattern(source, "registryURI", cache, captures=True, user_text=tag_pattern)
        budget.spend(tag_regex, "registryURI", tag_pattern)
        tag_group_indices = group_indices(tag_regex, tag_groups)
    return _RegistryParts(
        account=hm["account"],
        region=hm["region"],
        repo_template=repo_template,
        repo_regex=repo_regex,
        repo_groups=repo_groups,
        segments=repo_template.split("/"),
        tag_pattern=tag_pattern,
        tag_regex=tag_regex,
        tag_groups=tag_groups,
        tag_group_indices=tag_group_indices,
    )


def _compile_git_url(git: str, captured: set[int], uri: str) -> tuple[str, str, str]:
    """``githubRepository`` → (scheme, netloc, path template); shown redacted: a token in it must
    not reach a log. Every ``$n`` of its path must be captured by ``registryURI``."""

    def shown_git() -> str:  # only when a message needs it (a redacted, bounded excerpt)
        return _shown(git, "githubRepository")

    gm = _GIT_URL_RE.fullmatch(git)
    if not gm:
        raise _Problem(
            "githubRepository", f"{shown_git()} must be https://HOST/OWNER/REPO/PATH (or http://HOST:PORT/…)"
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
            f"{shown_git()} must not contain a query or fragment (tokens come from the environment, "
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
            "githubRepository", f"{shown_git()} must name the repository as https://HOST/OWNER/REPO[/PATH]"
        )
    for vm in VAR_RE.finditer(git_path):
        num = int(vm[1])
        if num not in captured:
            raise _Problem(
                "githubRepository",
                f"${num} is not captured by registryURI {_excerpt(uri)} (it captures: "
                f"{', '.join(f'${n}' for n in sorted(captured)) or 'nothing'})",
            )
    return gm["scheme"], netloc, git_path


def compile_rule(index: int, raw: Any, cache: dict[tuple[str, bool], Any]) -> Rule:
    """Validate (:func:`~steps.rules.schema.parse_rule`) and compile rule ``index`` as YAML gave it:
    the commit settings, ``registryURI``, ``githubRepository``, the values settings, the tag filters.

    Raises:
        RuleFieldError: the field at fault and the problem (load_rules adds source and index).
    """
    spec: RuleSpec = parse_rule(raw)
    budget = Budget()
    _check_commit_settings(spec)
    uri = spec.registry_uri
    registry = _compile_registry_uri(uri, cache, budget)
    captured = registry.captured
    git = spec.github_repository
    git_scheme, netloc, git_path = _compile_git_url(git, captured, uri)

    values_checks(spec, captured, uri)
    settings = RuleSettings.model_validate(
        {name: getattr(spec, name) for name in SETTINGS_FIELDS}
        | {"promote_after": gate_checks(spec, gate_written="gate" in raw)}
    )
    return Rule(
        index=index,
        registry_uri=uri,
        github_repository=git,
        account=registry.account,
        region=registry.region,
        repo_template=registry.repo_template,
        repo_regex=registry.repo_regex,
        segments=len(registry.segments),
        literal_segments=tuple((i, s) for i, s in enumerate(registry.segments) if "$" not in s),
        tag_pattern=registry.tag_pattern or None,
        tag_regex=registry.tag_regex,
        repo_vars=tuple(registry.repo_groups),
        tag_vars=tuple(registry.tag_groups),
        git_scheme=git_scheme,
        git_netloc=netloc,
        git_path_template=git_path,
        allow=tag_filters(spec.allow_image_tag, "allowImageTag", cache, budget),
        deny=tag_filters(spec.deny_image_tag, "denyImageTag", cache, budget),
        env=spec.env,
        settings=settings,
        values_file=spec.values_file,
        values_keys=dict(spec.values_keys) if spec.values_keys else None,
        helmfile=(spec.helmfile.file, spec.helmfile.release, spec.helmfile.environment)
        if spec.helmfile
        else None,
        repo_groups=group_indices(registry.repo_regex, registry.repo_groups),
        tag_groups=registry.tag_group_indices,
    )

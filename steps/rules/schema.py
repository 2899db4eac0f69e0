"""The rules schema: ONE msgspec struct, :class:`RuleSpec`, declares every field a rule may have.

Field names are the YAML keys users write (``registryURI``, ``writeDigest``, …); closed choices
are ``Literal`` types (``mode``, ``order``, ``provider``: :mod:`steps.domain.models` declares them and
their defaults, for the rules and the targets alike); unknown keys are refused and the types are
strict (``writeDigest: 'yes'`` is not a boolean, ``env: 1`` is not a string). :data:`FIELDS` lists
the fields in order with their YAML key, type, default and whether required (the generated
reference, ``imagebump/docs_gen.py``, reads it). The checks a type cannot say (a branch name, a
values file's path, ``promoteAfter.soak``'s duration) run in ``__post_init__``, so every
:class:`RuleSpec` msgspec builds has passed them.

Why :func:`parse_rule` walks the raw mapping itself before msgspec builds the struct: msgspec stops
at the first problem in the order of the *input* and says it in a message string (``Expected `str`,
got `int` - at `$.env```) that may print the input (``Invalid enum value 'merge'``, whole); it
accepts a tuple or a set (``!!set``) where a list is declared, and it runs the checks only once
every type is right. Messages name the first problem in the order of the *schema* (an unknown key
before the others, then field by field: its type, then its check) and show a value only through a
bounded excerpt (:mod:`steps.rules.show`): so :func:`parse_rule` goes through :class:`RuleSpec`'s
declared fields in order, asks msgspec about each scalar against its declared type, checks lists
and mappings itself (a list is a list), and :func:`_message` is the one place that words the
problem. A ``null`` for the fields of :data:`_NULL_IS_DEFAULT` means the default, as leaving the
key out does (msgspec would refuse it). Only then does ``msgspec.convert`` build the
:class:`RuleSpec` (should it still refuse, the field is named all the same, never its text).

What needs more than one field or a compiled pattern (the registry host, ``$n`` captures,
``githubRepository``'s shape) is checked when the rule compiles (:mod:`steps.rules.rule`).
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, NamedTuple, Union, get_args, get_origin

import msgspec

from steps.domain.errors import RuleFieldError
from steps.domain.models import (
    DEFAULT_COMMIT_METHOD,
    DEFAULT_GATE,
    DEFAULT_MODE,
    DEFAULT_ORDER,
    DEFAULT_PROVIDER,
    CommitMethod,
    GateMode,
    Mode,
    Order,
    Provider,
)
from steps.rules.show import excerpt, key_shown, kind, shown

_BRANCH_BAD_RE = re.compile(r"(^[-/.])|(\.\.)|([\s~^:?*\[\\])|(@\{)|(/$)|(\.lock$)|(//)")

#: A string that may not be empty.
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """What every mapping of a rule is: closed (unknown keys refused), immutable, keyword-built.

    ``__post_init__`` runs the field checks of :data:`_CHECKS` (each may normalize its value, e.g.
    strip it); a check's ValueError reaches a direct ``msgspec.convert`` caller as a
    ``msgspec.ValidationError`` naming the path.
    """

    def __post_init__(self) -> None:
        for name, check in _CHECKS.get(type(self), {}).items():
            value = getattr(self, name)
            if value is not None:
                msgspec.structs.force_setattr(self, name, check(value))


class HelmfileSpec(_Strict):
    """A rule's ``helmfile``: ``{file, release, environment}``."""

    file: NonEmpty
    release: NonEmpty
    environment: str = ""


#: ``promoteAfter.soak``: a number and a unit (``30m``, ``90s``, ``1h30m``, ``2h``).
_DURATION_RE = re.compile(r"(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")
#: The longest soak a rule may ask for (a week): a gate is evaluated from Argo CD's history, which
#: keeps ``revisionHistoryLimit`` entries (10 by default).
MAX_SOAK_SECONDS = 7 * 24 * 3600


def parse_soak(text: str) -> int:
    """``30m`` → 1800 seconds; raises ValueError naming the expected form."""
    m = _DURATION_RE.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None or not any(m.groups()):
        raise ValueError(f"{excerpt(text)} is not a duration: write it like 30m, 90s, 2h or 1h30m")
    hours, minutes, seconds = (int(g or 0) for g in m.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total > MAX_SOAK_SECONDS:
        raise ValueError(f"{excerpt(text)} is longer than a week ({MAX_SOAK_SECONDS // 3600}h)")
    return total


class PromoteAfterSpec(_Strict):
    """A rule's ``promoteAfter``: ``{env, soak}`` — the environment whose targets of the same push must
    have run the image live and Healthy for ``soak`` first (issue 35)."""

    env: NonEmpty
    soak: NonEmpty

    @property
    def soak_seconds(self) -> int:
        return parse_soak(self.soak)


#: The roles a rule's ``valuesKeys`` may name; ``repository`` and ``tag`` are required.
VALUES_KEY_ROLES = ("repository", "tag", "registry", "digest")


class RuleSpec(_Strict):
    """One rule as written (in the in-house format), validated; fields in the order messages list them."""

    registry_uri: NonEmpty = msgspec.field(name="registryURI")
    github_repository: NonEmpty = msgspec.field(name="githubRepository")
    allow_image_tag: list[str] = msgspec.field(default_factory=list, name="allowImageTag")
    deny_image_tag: list[str] = msgspec.field(default_factory=list, name="denyImageTag")
    env: str = ""
    mode: Mode = DEFAULT_MODE
    base_branch: str | None = msgspec.field(default=None, name="baseBranch")
    image_name: str | None = msgspec.field(default=None, name="imageName")
    write_digest: bool = msgspec.field(default=False, name="writeDigest")
    order: Order = DEFAULT_ORDER
    labels: list[str] = msgspec.field(default_factory=list)
    reviewers: list[str] = msgspec.field(default_factory=list)
    provider: Provider = DEFAULT_PROVIDER
    commit_method: CommitMethod = msgspec.field(default=DEFAULT_COMMIT_METHOD, name="commitMethod")
    require_verified: bool = msgspec.field(default=False, name="requireVerified")
    values_file: str | None = msgspec.field(default=None, name="valuesFile")
    values_keys: dict[str, str] | None = msgspec.field(default=None, name="valuesKeys")
    helmfile: HelmfileSpec | None = None
    notify: list[NonEmpty] = msgspec.field(default_factory=list)
    promote_after: PromoteAfterSpec | None = msgspec.field(default=None, name="promoteAfter")
    gate: GateMode = DEFAULT_GATE


# --- the checks a type cannot say: each takes a value of the right type (never None), returns it
# --- (normalized) or raises ValueError with the problem in the project's words (the value bounded)


def _strip(value: str) -> str:
    return value.strip()


def _branch(value: str) -> str:
    if not value or _BRANCH_BAD_RE.search(value):
        raise ValueError(f"{excerpt(value)} is not a valid branch name")
    return value


def _values_file(value: str) -> str:
    value = value.strip()
    if not value.strip("/") or "\\" in value or "\x00" in value or value.endswith("/"):
        raise ValueError(f"{excerpt(value)} must be the path of a file ('/' separated)")
    return value


def _values_keys(value: dict[str, str]) -> dict[str, str]:
    unknown = sorted(set(value) - set(VALUES_KEY_ROLES))
    if unknown:
        raise ValueError(f"unknown role {excerpt(unknown[0])}; roles: {', '.join(VALUES_KEY_ROLES)}")
    missing = [r for r in ("repository", "tag") if r not in value]
    if missing:
        raise ValueError(f"needs {' and '.join(missing)} (dotted paths such as image.repository)")
    for role, path in value.items():
        if not path.strip() or any(c.isspace() for c in path):
            raise ValueError(f"{role}: {excerpt(path)} is not a dotted path (such as image.tag)")
    return value


def _image_name(value: str) -> str:
    if not value.strip() or any(c.isspace() for c in value):
        raise ValueError(f"{excerpt(value)} is not an image name (no spaces)")
    return value


def _soak(value: str) -> str:
    parse_soak(value)
    return value.strip()


#: Each struct's field checks, by attribute name, run in field order.
_CHECKS: dict[type, dict[str, Callable[[Any], Any]]] = {
    RuleSpec: {
        "registry_uri": _strip,
        "github_repository": _strip,
        "base_branch": _branch,
        "image_name": _image_name,
        "values_file": _values_file,
        "values_keys": _values_keys,
    },
    PromoteAfterSpec: {"soak": _soak},
}
#: The fields of each struct for which YAML null (``env:`` with no value) means the default, as
#: leaving the key out does (attribute names; for any other field null is a value of the wrong type
#: unless the type allows None).
_NULL_IS_DEFAULT: dict[type, frozenset[str]] = {
    RuleSpec: frozenset(
        (
            "allow_image_tag",
            "deny_image_tag",
            "env",
            "write_digest",
            "labels",
            "reviewers",
            "require_verified",
            "notify",
        )
    ),
}


class RuleField(NamedTuple):
    """One field of :class:`RuleSpec` as a rules file writes it."""

    name: str  #: the attribute (``registry_uri``)
    key: str  #: the YAML key (``registryURI``)
    type: Any  #: the declared type (``Annotated``, ``Literal``, ``X | None``, a nested struct…)
    default: Any  #: what a rule that leaves the key out gets (``msgspec.NODEFAULT`` if required)
    required: bool


def _struct_fields(struct: type[msgspec.Struct]) -> tuple[RuleField, ...]:
    return tuple(
        RuleField(
            f.name,
            f.encode_name,
            f.type,
            f.default_factory() if f.default_factory is not msgspec.NODEFAULT else f.default,
            f.required,
        )
        for f in msgspec.structs.fields(struct)
    )


#: The fields of a rule, in the order messages list them.
FIELDS: tuple[RuleField, ...] = _struct_fields(RuleSpec)
_FIELDS_OF: dict[type, tuple[RuleField, ...]] = {
    RuleSpec: FIELDS,
    HelmfileSpec: _struct_fields(HelmfileSpec),
    PromoteAfterSpec: _struct_fields(PromoteAfterSpec),
}


def _choices(annotation: Any) -> tuple[str, ...]:
    return tuple(get_args(annotation))


#: The YAML keys a rule may hold, in the order messages list them.
KNOWN_FIELDS: tuple[str, ...] = tuple(f.key for f in FIELDS)
REQUIRED_FIELDS: tuple[str, ...] = tuple(f.key for f in FIELDS if f.required)
MODES = _choices(Mode)
ORDERS = _choices(Order)
PROVIDERS = _choices(Provider)
COMMIT_METHODS = _choices(CommitMethod)
GATES = _choices(GateMode)
_CHOICES = {
    "mode": MODES,
    "order": ORDERS,
    "provider": PROVIDERS,
    "commitMethod": COMMIT_METHODS,
    "gate": GATES,
}


# --- the walk: the first problem of a raw rule, in the schema's order ------------------------------


class _Problem(NamedTuple):
    """One problem of a raw rule: where (the YAML keys and list indexes down to it), what, the value."""

    loc: tuple[Any, ...]
    #: unknown (a key the mapping does not declare, or not a string), mapping, missing, too_short,
    #: string, list, bool, choice, check (``message`` says it), invalid (anything else msgspec refused)
    what: str
    value: Any
    message: str = ""


def _unknown_key(struct: type[msgspec.Struct], raw: dict, loc: tuple[Any, ...]) -> _Problem | None:
    """The first key of ``raw`` that ``struct`` does not declare: the nested mappings' first, in field
    order, then this mapping's, in the order written."""
    fields = _FIELDS_OF[struct]
    for field in fields:
        nested = _struct_in(field.type)
        value = raw.get(field.key)
        if nested is not None and isinstance(value, dict):
            found = _unknown_key(nested, value, (*loc, field.key))
            if found is not None:
                return found
    known = {field.key for field in fields}
    for key in raw:
        if not isinstance(key, str) or key not in known:
            return _Problem((*loc, key), "unknown", key)
    return None


def _struct_in(annotation: Any) -> type[msgspec.Struct] | None:
    """The struct ``annotation`` declares (alone or ``| None``), if any."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, msgspec.Struct):
            return candidate
    return None


def _problems(struct: type[msgspec.Struct], raw: dict, loc: tuple[Any, ...]) -> Iterator[_Problem]:
    """The problems of the fields of ``raw`` (a mapping for ``struct``), field by field: a missing
    required field, a value of the wrong type, a value its check refuses."""
    checks = _CHECKS.get(struct, {})
    null_is_default = _NULL_IS_DEFAULT.get(struct, frozenset())
    for field in _FIELDS_OF[struct]:
        where = (*loc, field.key)
        if field.key not in raw:
            if field.required:
                yield _Problem(where, "missing", raw)
            continue
        value = raw[field.key]
        if value is None and field.name in null_is_default:
            continue
        wrong = _type_problem(value, field.type, where)
        if wrong is not None:
            yield wrong
        elif value is not None and field.name in checks:
            try:
                checks[field.name](value)
            except ValueError as exc:
                yield _Problem(where, "check", value, str(exc))


def _type_problem(value: Any, annotation: Any, loc: tuple[Any, ...]) -> _Problem | None:
    """Why ``value`` is not of the declared type ``annotation`` (the first bad item of a list or a
    mapping), or None. msgspec decides for a scalar; a list must be a list, a mapping a mapping."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType) and type(None) in args:  # X | None
        if value is None:
            return None
        (annotation,) = (a for a in args if a is not type(None))
        origin, args = get_origin(annotation), get_args(annotation)
    struct = _struct_in(annotation) if origin is None else None
    if struct is not None:
        if not isinstance(value, dict):
            return _Problem(loc, "mapping", value)
        return next(_problems(struct, value, loc), None)
    if origin is list:
        if not isinstance(value, list):
            return _Problem(loc, "list", value)
        for index, item in enumerate(value):
            wrong = _type_problem(item, args[0], (*loc, index))
            if wrong is not None:
                return wrong
        return None
    if origin is dict:
        if not isinstance(value, dict):
            return _Problem(loc, "mapping", value)
        for key, item in value.items():
            wrong = _type_problem(key, args[0], (*loc, key, "[key]")) or _type_problem(
                item, args[1], (*loc, key)
            )
            if wrong is not None:
                return wrong
        return None
    try:
        msgspec.convert(value, annotation)
    except msgspec.ValidationError:
        pass
    else:
        return None
    base = args[0] if origin is Annotated else annotation
    if origin is Literal:
        return _Problem(loc, "choice", value)
    if base is bool:
        return _Problem(loc, "bool", value)
    if base is str:
        return _Problem(loc, "too_short" if isinstance(value, str) else "string", value)
    return _Problem(loc, "invalid", value)


def _first_problem(raw: Any) -> _Problem | None:
    """The problem :func:`parse_rule` reports for ``raw``: an unknown key before any other, then the
    first problem field by field, in the schema's order; None for a valid rule."""
    if not isinstance(raw, dict):
        return _Problem((), "mapping", raw)
    return _unknown_key(RuleSpec, raw, ()) or next(_problems(RuleSpec, raw, ()), None)


# --- the messages -----------------------------------------------------------------------------------

#: Mapping fields checked key by key: their shape as messages show it, their keys, and whether a key
#: is named dotted (``promoteAfter.env``) or in brackets (``helmfile[release]``, ``valuesKeys[tag]``).
_MAPPINGS = {
    "promoteAfter": ("{env: ENV, soak: DURATION} (e.g. {env: staging, soak: 30m})", ("env", "soak"), True),
    "helmfile": (
        "{file: HELMFILE, release: RELEASE[, environment: ENV]}",
        tuple(f.encode_name for f in msgspec.structs.fields(HelmfileSpec)),
        False,
    ),
    "valuesKeys": (
        "{repository: PATH, tag: PATH[, registry: PATH, digest: PATH]} of dotted paths such as image.tag",
        VALUES_KEY_ROLES,
        False,
    ),
}
#: The words for what :func:`_message` has no sentence of its own for (an empty string in
#: ``notify``). They were pydantic's ("String should have at least 1 character") until rules
#: messages were written in the project's words throughout.
_PLAIN = {
    "missing": "is required",
    "too_short": "must not be empty",
    "invalid": "is not a valid value",
}


def _part(part: Any) -> str:
    """One step of a location as a field name shows it: a key (bounded) or a list index."""
    return key_shown(part) if isinstance(part, str) else str(part)


def _field_name(loc: tuple[Any, ...]) -> str:
    """``("labels", 0)`` → ``labels[0]``; an unknown key as written (bounded)."""
    if not loc:
        return "(rule)"
    return key_shown(loc[0]) + "".join(f"[{_part(part)}]" for part in loc[1:])


def _message(problem: _Problem) -> RuleFieldError:
    """A problem → ``FIELD``, ``problem`` in the project's words (the value bounded)."""
    loc, what, value = problem.loc, problem.what, problem.value
    name = _field_name(loc)
    top = loc[0] if loc else None
    mapping = _MAPPINGS.get(top)
    if mapping is not None:  # a key inside a mapping field, or that mapping's shape
        shape, keys, dotted = mapping
        if len(loc) > 1 and loc[-1] == "[key]":  # a key that is not a string
            loc, what = loc[:-1], "unknown"
        name = ".".join(_part(p) for p in loc) if dotted else _field_name(loc)
        if what == "mapping" and len(loc) == 1:
            return RuleFieldError(name, f"must be a mapping {shape}, got {kind(value)}")
        if len(loc) > 1 and what == "unknown":
            word = "role" if top == "valuesKeys" else "field"
            return RuleFieldError(name, f"unknown {word}; known {word}s: {', '.join(keys)}")
        if len(loc) > 1 and (what in ("missing", "too_short") or (what == "string" and value is None)):
            said = f"is required ({shape})" if dotted else f"is required: {top} is a mapping {shape}"
            return RuleFieldError(name, said)
    if what == "unknown":  # or a key that is not a string (``1: x``)
        return RuleFieldError(name, f"unknown field; known fields: {', '.join(KNOWN_FIELDS)}")
    if what == "mapping":
        return RuleFieldError(
            "(rule)", f"must be a mapping with registryURI and githubRepository, got {kind(value)}"
        )
    if top in REQUIRED_FIELDS and (what in ("missing", "too_short") or (what == "string" and value is None)):
        return RuleFieldError(name, "is required")
    if what == "check":
        return RuleFieldError(name, problem.message)
    if what == "string":
        return RuleFieldError(name, f"must be a string, got {kind(value)} {shown(value, name)} (quote it)")
    if what == "list":
        return RuleFieldError(name, f"must be a list, got {kind(value)} {shown(value, name)}")
    if what == "bool":
        return RuleFieldError(name, f"must be true or false, got {kind(value)} {excerpt(value)}")
    if what == "choice" and top in _CHOICES:
        return RuleFieldError(name, f"must be one of {', '.join(_CHOICES[top])}, got {shown(value, name)}")
    return RuleFieldError(
        name, f"{_PLAIN.get(what, _PLAIN['invalid'])}, got {kind(value)} {shown(value, name)}"
    )


_AT_RE = re.compile(r" - at `\$\.?([^`]*)`$")


def parse_rule(raw: Any) -> RuleSpec:
    """Validate one rule as YAML gave it.

    A valid rule is built by msgspec alone (:func:`_built`, ~10 µs: a rules file of 10,000 rules
    is read on every event); the walk runs only for a rule msgspec refuses, to name its first problem.

    Raises:
        RuleFieldError: the first problem (an unknown key before the others), field named.
    """
    spec = _built(raw) if isinstance(raw, dict) else None
    if spec is not None:
        return spec
    problem = _first_problem(raw)
    if problem is not None:
        raise _message(problem)
    try:
        return msgspec.convert(_given(raw), RuleSpec)
    except msgspec.ValidationError as exc:  # what the walk let pass and msgspec did not (a bug): named
        where = _AT_RE.search(str(exc))  # the path only: msgspec's text may print the value
        raise RuleFieldError(key_shown(where[1]) if where else "(rule)", "is not valid") from None


#: The YAML keys whose null means the default, and the keys whose value must be a list (msgspec
#: also takes a tuple or a set, which YAML's ``!!set`` gives, where a list is declared).
_NULL_KEYS = frozenset(f.key for f in FIELDS if f.name in _NULL_IS_DEFAULT[RuleSpec])
_LIST_KEYS = frozenset(f.key for f in FIELDS if get_origin(f.type) is list)


def _built(raw: dict) -> RuleSpec | None:
    """``raw`` as a :class:`RuleSpec` when it is valid as written, else None (the walk says why).

    msgspec refuses whatever the walk refuses (the same declared types and checks), except a tuple
    or a set for a list and a null that means the default: those two are settled here first.
    """
    given = _given(raw)
    if any(key in _LIST_KEYS and not isinstance(value, list) for key, value in given.items()):
        return None
    try:
        return msgspec.convert(given, RuleSpec)
    except msgspec.ValidationError:
        return None


def _given(raw: dict) -> dict:
    """``raw`` without the keys whose null means the default (as if they were left out)."""
    return {key: value for key, value in raw.items() if not (value is None and key in _NULL_KEYS)}

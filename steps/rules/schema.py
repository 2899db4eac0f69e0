"""The rules schema: ONE pydantic model, :class:`RuleSpec`, declares every field a rule may have.

Field aliases are the YAML keys users write (``registryURI``, ``writeDigest``, …); closed choices
are ``Literal`` types (``mode``, ``order``, ``provider``: :mod:`steps.domain.models` declares them and
their defaults, for the rules and the targets alike); the model is strict (``writeDigest:
'yes'`` is not a boolean, ``env: 1`` is not a string) and forbids unknown keys. :func:`parse_rule`
validates one rule and turns pydantic's first error into the project's message, naming the field
and how to fix it (``mode: must be one of pr, commit, got 'merge'``). A message shows a value only
through a bounded excerpt (:mod:`steps.rules.show`): pydantic's own text, which prints inputs,
is never used (and ``hide_input_in_errors`` keeps it from printing them if anyone did).

What needs more than one field or a compiled pattern (the registry host, ``$n`` captures,
``githubRepository``'s shape) is checked when the rule compiles (:mod:`steps.rules.rule`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

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
_CUSTOM = "rule_field"
_UNKNOWN_KEY = ("extra_forbidden", "invalid_key")


def _problem(message: str) -> PydanticCustomError:
    """A field problem in the project's words (the message is already bounded)."""
    return PydanticCustomError(_CUSTOM, "{message}", {"message": message})


class HelmfileSpec(BaseModel):
    """A rule's ``helmfile``: ``{file, release, environment}``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, hide_input_in_errors=True)

    file: Annotated[str, Field(min_length=1)]
    release: Annotated[str, Field(min_length=1)]
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


class PromoteAfterSpec(BaseModel):
    """A rule's ``promoteAfter``: ``{env, soak}`` — the environment whose targets of the same push must
    have run the image live and Healthy for ``soak`` first (issue 35)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, hide_input_in_errors=True)

    env: Annotated[str, Field(min_length=1)]
    soak: Annotated[str, Field(min_length=1)]

    @field_validator("soak")
    @classmethod
    def _soak(cls, value: str) -> str:
        try:
            parse_soak(value)
        except ValueError as exc:
            raise _problem(str(exc)) from None
        return value.strip()

    @property
    def soak_seconds(self) -> int:
        return parse_soak(self.soak)


#: The roles a rule's ``valuesKeys`` may name; ``repository`` and ``tag`` are required.
VALUES_KEY_ROLES = ("repository", "tag", "registry", "digest")


class RuleSpec(BaseModel):
    """One rule as written (in the in-house format), validated; fields in the order messages list them."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, hide_input_in_errors=True)

    registry_uri: Annotated[str, Field(alias="registryURI", min_length=1)]
    github_repository: Annotated[str, Field(alias="githubRepository", min_length=1)]
    allow_image_tag: list[str] = Field(default_factory=list, alias="allowImageTag")
    deny_image_tag: list[str] = Field(default_factory=list, alias="denyImageTag")
    env: str = ""
    mode: Mode = DEFAULT_MODE
    base_branch: str | None = Field(default=None, alias="baseBranch")
    image_name: str | None = Field(default=None, alias="imageName")
    write_digest: bool = Field(default=False, alias="writeDigest")
    order: Order = DEFAULT_ORDER
    labels: list[str] = Field(default_factory=list)
    reviewers: list[str] = Field(default_factory=list)
    provider: Provider = DEFAULT_PROVIDER
    commit_method: CommitMethod = Field(default=DEFAULT_COMMIT_METHOD, alias="commitMethod")
    require_verified: bool = Field(default=False, alias="requireVerified")
    values_file: str | None = Field(default=None, alias="valuesFile")
    values_keys: dict[str, str] | None = Field(default=None, alias="valuesKeys")
    helmfile: HelmfileSpec | None = None
    notify: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    promote_after: PromoteAfterSpec | None = Field(default=None, alias="promoteAfter")
    gate: GateMode = DEFAULT_GATE

    @field_validator(
        "allow_image_tag",
        "deny_image_tag",
        "env",
        "write_digest",
        "labels",
        "reviewers",
        "require_verified",
        "notify",
        mode="before",
    )
    @classmethod
    def _null_is_unset(cls, value: Any, info: ValidationInfo) -> Any:
        """``env:`` with no value (YAML null) means the default, as leaving the key out does."""
        if value is None:
            return cls.model_fields[info.field_name].get_default(call_default_factory=True)
        return value

    @field_validator("registry_uri", "github_repository")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @field_validator("base_branch")
    @classmethod
    def _branch(cls, value: str | None) -> str | None:
        if value is not None and (not value or _BRANCH_BAD_RE.search(value)):
            raise _problem(f"{excerpt(value)} is not a valid branch name")
        return value

    @field_validator("values_file")
    @classmethod
    def _values_file(cls, value: str | None) -> str | None:
        if value is not None:
            value = value.strip()
            if not value.strip("/") or "\\" in value or "\x00" in value or value.endswith("/"):
                raise _problem(f"{excerpt(value)} must be the path of a file ('/' separated)")
        return value

    @field_validator("values_keys")
    @classmethod
    def _values_keys(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        unknown = sorted(set(value) - set(VALUES_KEY_ROLES))
        if unknown:
            raise _problem(f"unknown role {excerpt(unknown[0])}; roles: {', '.join(VALUES_KEY_ROLES)}")
        missing = [r for r in ("repository", "tag") if r not in value]
        if missing:
            raise _problem(f"needs {' and '.join(missing)} (dotted paths such as image.repository)")
        for role, path in value.items():
            if not path.strip() or any(c.isspace() for c in path):
                raise _problem(f"{role}: {excerpt(path)} is not a dotted path (such as image.tag)")
        return value

    @field_validator("image_name")
    @classmethod
    def _image_name(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or any(c.isspace() for c in value)):
            raise _problem(f"{excerpt(value)} is not an image name (no spaces)")
        return value


def _choices(annotation: Any) -> tuple[str, ...]:
    return tuple(get_args(annotation))


#: The YAML keys a rule may hold, in the order messages list them.
KNOWN_FIELDS: tuple[str, ...] = tuple(f.alias or name for name, f in RuleSpec.model_fields.items())
REQUIRED_FIELDS: tuple[str, ...] = tuple(
    f.alias or n for n, f in RuleSpec.model_fields.items() if f.is_required()
)
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


#: Mapping fields checked field by field: their shape as messages show it, and their keys.
_NESTED = {
    "promoteAfter": ("{env: ENV, soak: DURATION} (e.g. {env: staging, soak: 30m})", ("env", "soak")),
}


def _field_name(loc: tuple[Any, ...]) -> str:
    """``("labels", 0)`` → ``labels[0]``; an unknown key as written (bounded)."""
    if not loc:
        return "(rule)"
    name = key_shown(loc[0])
    return name + "".join(f"[{part}]" for part in loc[1:])


def _message(error: dict[str, Any]) -> RuleFieldError:
    """pydantic's error → ``FIELD``, ``problem`` in the project's words (the value bounded)."""
    loc, kind_of, value = tuple(error["loc"]), error["type"], error.get("input")
    name = _field_name(loc)
    top = loc[0] if loc else None
    nested = _NESTED.get(top) if len(loc) > 1 or kind_of in ("model_type", "dict_type") else None
    if nested is not None:  # a field inside a mapping field (promoteAfter.env), or that mapping's shape
        name = ".".join(key_shown(p) if isinstance(p, str) else str(p) for p in loc)
        if kind_of in _UNKNOWN_KEY:
            return RuleFieldError(name, f"unknown field; known fields: {', '.join(nested[1])}")
        if kind_of in ("model_type", "dict_type"):
            return RuleFieldError(name, f"must be a mapping {nested[0]}, got {kind(value)}")
        if kind_of in ("missing", "string_too_short") or (kind_of == "string_type" and value is None):
            return RuleFieldError(name, f"is required ({nested[0]})")
    if kind_of in _UNKNOWN_KEY:  # invalid_key: a key that is not a string (``1: x``)
        return RuleFieldError(name, f"unknown field; known fields: {', '.join(KNOWN_FIELDS)}")
    if kind_of in ("model_type", "model_attributes_type", "dict_type"):
        return RuleFieldError(
            "(rule)", f"must be a mapping with registryURI and githubRepository, got {kind(value)}"
        )
    if top in REQUIRED_FIELDS and (
        kind_of in ("missing", "string_too_short") or (kind_of == "string_type" and value is None)
    ):
        return RuleFieldError(name, "is required")
    if kind_of == _CUSTOM:
        return RuleFieldError(name, error["ctx"]["message"])
    if kind_of == "string_type":
        return RuleFieldError(name, f"must be a string, got {kind(value)} {shown(value, name)} (quote it)")
    if kind_of == "list_type":
        return RuleFieldError(name, f"must be a list, got {kind(value)} {shown(value, name)}")
    if kind_of == "bool_type":
        return RuleFieldError(name, f"must be true or false, got {kind(value)} {excerpt(value)}")
    if kind_of == "literal_error" and top in _CHOICES:
        return RuleFieldError(name, f"must be one of {', '.join(_CHOICES[top])}, got {shown(value, name)}")
    return RuleFieldError(name, f"{error['msg']}, got {kind(value)} {shown(value, name)}")


def parse_rule(raw: Any) -> RuleSpec:
    """Validate one rule as YAML gave it.

    Raises:
        RuleFieldError: the first problem (an unknown key before the others), field named.
    """
    try:
        return RuleSpec.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = min(range(len(errors)), key=lambda i: (errors[i]["type"] not in _UNKNOWN_KEY, i))
        raise _message(errors[first]) from None

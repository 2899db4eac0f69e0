"""Properties of :func:`steps.rules.schema.parse_rule` over generated rules: a valid rule reads back as
written (defaults where a key is missing or null), a rule with one thing wrong is refused with that
field named, and nothing but :class:`RuleFieldError` ever leaves it (no msgspec.ValidationError,
TypeError, KeyError), whatever YAML could have given."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steps.domain.errors import RuleFieldError, RulesError
from steps.rules import load_rules
from steps.rules.schema import (
    COMMIT_METHODS,
    FIELDS,
    GATES,
    MODES,
    ORDERS,
    PROVIDERS,
    HelmfileSpec,
    PromoteAfterSpec,
    RuleSpec,
    parse_rule,
)
from steps.rules.show import key_shown

REG = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
BY_KEY = {f.key: f for f in FIELDS}
texts = st.text(max_size=6)
names = st.from_regex(r"[a-z0-9][a-z0-9._/-]{0,8}", fullmatch=True)
paths = st.from_regex(r"[a-z]{1,5}(\.[a-z]{1,5}){0,2}", fullmatch=True)

#: Per YAML key: a valid value and what the attribute holds for it (None: the key's default).
VALID: dict[str, st.SearchStrategy[tuple[Any, Any]]] = {
    "registryURI": st.text(min_size=1, max_size=8).map(lambda v: (v, v.strip())),
    "githubRepository": st.text(min_size=1, max_size=8).map(lambda v: (v, v.strip())),
    "allowImageTag": st.lists(texts, max_size=3).map(lambda v: (v, v)),
    "denyImageTag": st.lists(texts, max_size=3).map(lambda v: (v, v)),
    "env": texts.map(lambda v: (v, v)),
    "mode": st.sampled_from(MODES).map(lambda v: (v, v)),
    "baseBranch": st.sampled_from(["main", "release/1.2", "feature-x"]).map(lambda v: (v, v)),
    "imageName": names.map(lambda v: (v, v)),
    "writeDigest": st.booleans().map(lambda v: (v, v)),
    "order": st.sampled_from(ORDERS).map(lambda v: (v, v)),
    "labels": st.lists(texts, max_size=3).map(lambda v: (v, v)),
    "reviewers": st.lists(texts, max_size=3).map(lambda v: (v, v)),
    "provider": st.sampled_from(PROVIDERS).map(lambda v: (v, v)),
    "commitMethod": st.sampled_from(COMMIT_METHODS).map(lambda v: (v, v)),
    "requireVerified": st.booleans().map(lambda v: (v, v)),
    "valuesFile": st.sampled_from(["values.yaml", " /charts/api/values.yaml "]).map(lambda v: (v, v.strip())),
    "valuesKeys": st.fixed_dictionaries(
        {"repository": paths, "tag": paths}, optional={"registry": paths, "digest": paths}
    ).map(lambda v: (v, v)),
    "helmfile": st.fixed_dictionaries(
        {"file": st.text(min_size=1, max_size=6), "release": st.text(min_size=1, max_size=6)},
        optional={"environment": texts},
    ).map(lambda v: (v, HelmfileSpec(**v))),
    "notify": st.lists(st.text(min_size=1, max_size=4), max_size=3).map(lambda v: (v, v)),
    "promoteAfter": st.tuples(
        st.text(min_size=1, max_size=6), st.sampled_from(["30m", " 90s ", "1h30m", "2h"])
    ).map(lambda es: ({"env": es[0], "soak": es[1]}, PromoteAfterSpec(env=es[0], soak=es[1].strip()))),
    "gate": st.sampled_from(GATES).map(lambda v: (v, v)),
}
#: The keys whose YAML null means the default; for the other optional keys null is None (their
#: default too); for the rest null is refused.
NULL_IS_DEFAULT = {
    "allowImageTag",
    "denyImageTag",
    "env",
    "writeDigest",
    "labels",
    "reviewers",
    "requireVerified",
}
NULL_IS_DEFAULT |= {"notify"}
NULL_ALLOWED = {"baseBranch", "imageName", "valuesFile", "valuesKeys", "helmfile", "promoteAfter"}
REQUIRED = ("registryURI", "githubRepository")
OPTIONAL = tuple(k for k in VALID if k not in REQUIRED)


@st.composite
def valid_rules(draw: st.DrawFn) -> tuple[dict, dict]:
    """A valid rule (keys in any order, some left out, some null) and the attributes it must give."""
    raw: dict[Any, Any] = {}
    expected = {f.name: f.default for f in FIELDS}
    for key in (*REQUIRED, *draw(st.lists(st.sampled_from(OPTIONAL), unique=True))):
        if key in NULL_IS_DEFAULT | NULL_ALLOWED and draw(st.integers(0, 4)) == 0:
            raw[key] = None  # the default
            continue
        raw[key], expected[BY_KEY[key].name] = draw(VALID[key])
    order = draw(st.permutations(list(raw)))
    return {k: raw[k] for k in order}, expected


@given(valid_rules())
def test_a_valid_rule_reads_back_as_written(case: tuple[dict, dict]) -> None:
    raw, expected = case
    spec = parse_rule(raw)
    assert isinstance(spec, RuleSpec)
    assert {f.name: getattr(spec, f.name) for f in FIELDS} == expected


#: Values of the wrong type for each kind of field (what YAML can give: scalars, lists, mappings, sets).
NOT_STR = st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.lists(texts, max_size=2))
NOT_STR |= st.dictionaries(texts, texts, max_size=2)
NOT_BOOL = st.one_of(st.integers(), texts, st.lists(st.booleans(), max_size=2))
NOT_LIST = st.one_of(
    texts, st.integers(), st.dictionaries(texts, texts, max_size=2), st.sets(texts, max_size=2)
)
NOT_A_CHOICE = st.one_of(texts, st.integers(), st.none(), st.lists(texts, max_size=1))


@st.composite
def one_wrong(draw: st.DrawFn, key: str) -> tuple[Any, str]:
    """A value of the wrong type for ``key`` and the field the refusal must name."""
    typ = BY_KEY[key].type
    if key in ("mode", "order", "provider", "commitMethod", "gate"):
        choices = {"mode": MODES, "order": ORDERS, "provider": PROVIDERS, "commitMethod": COMMIT_METHODS}
        return draw(NOT_A_CHOICE.filter(lambda v: v not in choices.get(key, GATES))), key
    if typ is bool:
        return draw(NOT_BOOL), key
    if key in ("allowImageTag", "denyImageTag", "labels", "reviewers", "notify"):
        if draw(st.booleans()):
            return draw(NOT_LIST), key
        items = draw(st.lists(st.text(min_size=1, max_size=3), max_size=3))
        at = draw(st.integers(0, len(items)))
        return [*items[:at], draw(NOT_STR | st.none()), *items[at:]], f"{key}[{at}]"
    if key == "valuesKeys":  # a mapping whose value is not a string
        return {"repository": "image.repository", "tag": draw(NOT_STR)}, "valuesKeys[tag]"
    if key == "helmfile":
        return {"file": draw(NOT_STR), "release": "r"}, "helmfile[file]"
    if key == "promoteAfter":
        which = draw(st.sampled_from(["shape", "env", "soak"]))
        if which == "shape":
            return draw(NOT_LIST.filter(lambda v: not isinstance(v, dict))), "promoteAfter"
        good = {"env": "staging", "soak": "30m"}
        return {**good, which: draw(NOT_STR | st.sampled_from(["", "thirty"]))}, f"promoteAfter.{which}"
    return draw(NOT_STR), key  # a string field


@st.composite
def broken_rules(draw: st.DrawFn) -> tuple[dict, str]:
    """A valid rule with one thing wrong (a value of the wrong type, a null where null is refused, a
    key the schema does not declare), and the field the refusal must name."""
    raw, _ = draw(valid_rules())
    how = draw(st.sampled_from(["wrong", "null", "unknown"]))
    if how == "unknown":
        key = draw(st.one_of(texts.filter(lambda k: k not in BY_KEY), st.integers(), st.none()))
        raw[key] = draw(VALID["env"])[0]
        if draw(st.booleans()):  # an unknown key is named before any other problem
            other = draw(st.sampled_from(list(VALID)))
            raw[other] = draw(one_wrong(other))[0]
        field = key_shown(key)
    elif how == "null":
        field = draw(st.sampled_from([k for k in VALID if k not in NULL_IS_DEFAULT | NULL_ALLOWED]))
        raw[field] = None
    else:
        key = draw(st.sampled_from(list(VALID)))
        raw[key], field = draw(one_wrong(key))
    order = draw(st.permutations(list(raw)))
    return {k: raw[k] for k in order}, field


@given(broken_rules())
def test_a_rule_with_one_thing_wrong_is_refused_with_that_field_named(case: tuple[dict, str]) -> None:
    raw, field = case
    try:
        parse_rule(raw)
    except RuleFieldError as refused:
        assert refused.field == field, (raw, str(refused))
    else:
        raise AssertionError(f"accepted {raw!r}")


ANYTHING = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), texts, st.binary(max_size=3)),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from([*BY_KEY, "env", "soak", "file", "tag", "x"]) | st.integers(), inner
        )
        | st.sets(texts, max_size=2)
    ),
    max_leaves=10,
)


@given(st.dictionaries(st.sampled_from([*BY_KEY, "x"]) | st.integers(), ANYTHING, max_size=6) | ANYTHING)
def test_nothing_but_a_rule_field_error_leaves_parse_rule(raw: Any) -> None:
    try:
        spec = parse_rule(raw)
    except RuleFieldError as refused:
        top = refused.field.split("[")[0].split(".")[0]
        assert top in ("(rule)", *REQUIRED) or top in {key_shown(k) for k in raw}, (raw, str(refused))
    else:
        assert isinstance(spec, RuleSpec)


@pytest.mark.parametrize("key", ["allowImageTag", "denyImageTag", "labels", "reviewers", "notify"])
def test_a_set_or_a_tuple_is_not_a_list(key: str) -> None:
    """msgspec would take a set (YAML's ``!!set``) or a tuple where a list is declared; a rule may not."""
    base = {"registryURI": "r", "githubRepository": "g"}
    for value in ({"a", "b"}, ("a",)):
        with pytest.raises(RuleFieldError) as refused:
            parse_rule({**base, key: value})
        assert refused.value.field == key and "must be a list" in refused.value.message
    with pytest.raises(RulesError) as info:
        load_rules(
            f"- registryURI: {REG}/team/api\n  githubRepository: https://github.com/o/r\n  {key}: !!set {{a}}\n"
        )
    assert (info.value.rule, info.value.field) == (0, key)

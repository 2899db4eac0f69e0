"""The steps' contracts (steps.domain.contract, msgspec): the wire form every version reads, the
errors a bad value gets, and the way pydantic (Hera's runner) reads them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steps.domain.errors import ContractError
from steps.domain.models import SETTINGS_FIELDS, ImagesEntry, Plan, PromoteAfter, RuleSettings, Target
from steps.resolve_image.decide import ResolveImageOutput

REPO = "https://github.com/o/deploy"
names = st.text("abcdefghijklmnopqrstuvwxyz0123456789-._/", min_size=1, max_size=20)
moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.none() | st.just(UTC)
)
settings = st.builds(
    RuleSettings,
    mode=st.sampled_from(["pr", "commit"]),
    base_branch=st.none() | names,
    image_name=st.none() | names,
    write_digest=st.booleans(),
    order=st.sampled_from(["push-time", "semver", "none"]),
    labels=st.lists(names, max_size=3).map(tuple),
    notify=st.lists(names, max_size=2).map(tuple),
    commit_method=st.sampled_from(["git", "api"]),
    promote_after=st.none() | st.builds(PromoteAfter, env=names, soak_seconds=st.integers(0, 604800)),
    gate=st.sampled_from(["wait", "check"]),
)
targets = st.builds(
    Target.of,
    settings,
    rule=st.integers(0, 1000),
    repo_url=st.just(REPO),
    path=names,
    env=st.text(max_size=10),
    image=names,
    tag=st.none() | names,
    digest=st.none() | st.just("sha256:" + "a" * 64),
    pushed_at=st.none() | moments,
    values_keys=st.none() | st.dictionaries(st.sampled_from(["repository", "tag"]), names, min_size=2),
)
entries = st.builds(ImagesEntry, name=names, newName=st.none() | names, newTag=st.none() | names)


@given(targets)
def test_a_target_round_trips_with_its_settings_at_the_top_level(target):
    wire = json.loads(target.model_dump_json())
    assert "settings" not in wire and SETTINGS_FIELDS <= set(wire)
    assert Target.model_validate_json(target.model_dump_json()) == target
    assert Target.model_validate(target.model_dump(mode="json")) == target
    assert Target.model_validate(target.model_dump()) == target


@given(targets, st.lists(targets, max_size=3))
def test_targets_nested_in_an_output_keep_the_same_wire_form(first, rest):
    out = ResolveImageOutput(targets=[first, *rest])
    wire = json.loads(out.model_dump_json())
    assert wire["targets"] == [json.loads(t.model_dump_json()) for t in out.targets]
    assert ResolveImageOutput.model_validate_json(out.model_dump_json()) == out


@given(entries, st.none() | entries, st.sampled_from(["update", "current", "stale", "held", "pinned"]))
def test_a_plan_round_trips(new, old, decision):
    plan = Plan(changed=True, decision=decision, file="k.yaml", image_name=new.name, old=old, new=new)
    assert Plan.model_validate_json(plan.model_dump_json()) == plan


def test_a_datetime_is_written_as_pydantic_wrote_it():
    """Steps of the last version read what this one writes, and the other way round."""
    target = Target(
        rule=0, repo_url=REPO, path="a", image="i", pushed_at=datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    )
    assert json.loads(target.model_dump_json())["pushed_at"] == "2026-12-07T12:00:00Z"
    east = datetime(2026, 12, 7, 12, 0, 0, 500, tzinfo=timezone(timedelta(hours=2)))
    later = target.model_copy(update={"pushed_at": east})
    assert json.loads(later.model_dump_json())["pushed_at"] == "2026-12-07T12:00:00.000500+02:00"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"rule": "0"}, "rule"),  # strict: a string is not an int
        ({"mode": "merge"}, "mode"),
        ({"labels": "a"}, "labels"),
        ({"pushed_at": "yesterday"}, "pushed_at"),
        ({"promote_after": {"env": "staging", "soak_seconds": -1}}, "promote_after.soak_seconds"),
        ({"bogus": 1}, ""),  # an unknown key: the whole value
    ],
)
def test_a_bad_value_names_its_field(data, field):
    base = {"rule": 0, "repo_url": REPO, "path": "a", "image": "i"}
    with pytest.raises(ContractError) as caught:
        Target.model_validate({**base, **data})
    assert caught.value.field == field
    assert isinstance(caught.value, ValueError)


def test_a_bad_value_deep_in_an_output_names_its_path():
    bad = {"rule": "x", "repo_url": REPO, "path": "a", "image": "i"}
    with pytest.raises(ContractError) as caught:
        ResolveImageOutput.model_validate({"targets": [{**bad, "rule": 0}, bad]})
    assert caught.value.field == "targets[1].rule"


def test_a_missing_field_and_text_that_is_not_json_are_contract_errors():
    with pytest.raises(ContractError):
        Target.model_validate({"rule": 0})
    with pytest.raises(ContractError):
        Target.model_validate_json("{not json")


def test_with_settings_validates_and_model_copy_replaces():
    target = Target(rule=0, repo_url=REPO, path="a", image="i")
    assert target.with_settings(mode="commit").settings.mode == "commit"
    assert target.model_copy(update={"mode": "commit"}).mode == "commit"
    assert target.model_copy(update={"repo_url": "https://github.com/o/other"}).repo_id.endswith("o/other")
    with pytest.raises(ContractError):
        target.with_settings(mode="merge")
    with pytest.raises(TypeError):
        target.with_settings(path="b")  # not a setting: model_copy changes it


def test_pydantic_validates_a_contract_as_the_contract_does():
    """Hera's runner (``validate_call``) reads a step's inputs through pydantic."""
    from pydantic import TypeAdapter, ValidationError

    data = {"rule": 0, "repo_url": REPO, "path": "a", "image": "i", "mode": "commit"}
    assert TypeAdapter(Target).validate_python(data) == Target.model_validate(data)
    with pytest.raises(ValidationError):
        TypeAdapter(Target).validate_python({**data, "mode": "merge"})

"""A target's rule settings (issue 32): one declaration the rule and its targets share, flat on the wire."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steps.domain.models import SETTINGS_FIELDS, PromoteAfter, RuleSettings, Target
from steps.rules import load_rules

REG = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
RULES = f"""
- registryURI: {REG}/team/$1
  githubRepository: https://github.com/o/deploy/apps/$1/prod
  env: production
  mode: commit
  order: semver
  labels: [imagebump]
  promoteAfter: {{env: staging, soak: 10m}}
- registryURI: {REG}/team/$1
  githubRepository: https://github.com/o/deploy/apps/$1/staging
  env: staging
"""


def test_every_target_of_a_rule_holds_the_rules_settings():
    from steps.domain.events import parse_image_reference

    rules = load_rules(RULES)
    match = rules.match(parse_image_reference(f"{REG}/team/api:1.2.3"))
    by_env = {t.env: t for t in match.targets}
    assert by_env["production"].settings == rules.rules[0].settings
    assert issubclass(Target, RuleSettings)  # a setting added to the rule is every target's field too
    assert by_env["production"].settings == RuleSettings(
        mode="commit",
        order="semver",
        labels=("imagebump",),
        promote_after=PromoteAfter(env="staging", soak_seconds=600),
    )
    assert by_env["staging"].settings == RuleSettings()  # a rule that says nothing gets the defaults


settings_values = st.fixed_dictionaries(
    {},
    optional={
        "mode": st.sampled_from(["pr", "commit"]),
        "base_branch": st.none() | st.sampled_from(["main", "release/1"]),
        "order": st.sampled_from(["push-time", "semver", "none"]),
        "labels": st.lists(st.sampled_from(["a", "b", "imagebump"]), max_size=3),
        "provider": st.sampled_from(["github", "local"]),
        "commit_method": st.sampled_from(["git", "api"]),
        "gate": st.sampled_from(["wait", "check"]),
        "write_digest": st.booleans(),
    },
)


@given(settings_values)
def test_the_wire_form_is_flat_and_round_trips(values):
    """Steps of every version read and write the same JSON: the settings at the top level."""
    target = Target.model_validate(
        {
            "rule": 0,
            "repo_url": "https://github.com/o/deploy",
            "path": "apps/api",
            "image": "team/api",
            **values,
        }
    )
    wire = json.loads(target.model_dump_json())
    assert "settings" not in wire and SETTINGS_FIELDS <= set(wire)
    assert {k: wire[k] for k in values} == json.loads(json.dumps(values))
    assert Target.model_validate_json(target.model_dump_json()) == target


def test_a_setting_changes_validated_through_with_settings():
    target = Target(rule=0, repo_url="https://github.com/o/deploy", path="apps/api", image="team/api")
    with pytest.raises(TypeError):
        target.with_settings(path="apps/web")  # not a setting
    changed = target.with_settings(mode="commit")
    assert (changed.settings.mode, target.settings.mode) == ("commit", "pr")
    with pytest.raises(ValueError):
        target.with_settings(mode="merge")

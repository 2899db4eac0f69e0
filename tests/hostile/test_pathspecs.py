"""A path a repository's writer chooses is a file's name to git, never pathspec magic or a glob.

A helmfile's values entry ``':/values.yaml'`` names the file ``values.yaml`` in a directory ``:``;
git's ``ls-tree -- :/values.yaml`` read it as "values.yaml from the top" (another file, found
"current"), ``:(exclude)x`` made ls-tree fail, and a NUL byte reached the command line as
``ValueError: embedded null byte``.
"""

from __future__ import annotations

import pytest

from steps.domain.errors import ConfigError
from steps.domain.models import HelmfileRef, Target
from steps.edit_kustomize import step as edit_kustomize
from tests.hostile import cases
from tests.hostile.cases import REGISTRY

edit_step = edit_kustomize.run.__wrapped__
IMAGE = f"{REGISTRY}/team/api"


def _values(tag: str, image: str = IMAGE) -> str:
    return f"image:\n  repository: {image}\n  tag: '{tag}'\n"


@pytest.fixture()
def step_env(git_env, outputs_dir, monkeypatch, moto):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    monkeypatch.setenv("AWS_REGION", cases.REGION)
    return git_env


def _target(remote) -> Target:
    return Target(
        rule=0,
        repo_url=remote.url,
        path=".",
        env="prod",
        image=IMAGE,
        tag="2.0",
        order="none",
        mode="commit",
        provider="local",
        helmfile=HelmfileRef(file="helmfile.yaml", release="api", environment=""),
    )


def _helmfile(*values: str) -> str:
    return "releases:\n- name: api\n  chart: ./c\n  values:\n" + "".join(f"  - {v}\n" for v in values)


def _refs(remote) -> str:
    return remote.git("for-each-ref", "--format=%(refname) %(objectname)")


def test_a_values_path_that_looks_like_magic_is_the_file_it_names(make_remote, step_env) -> None:
    remote = make_remote(
        {
            "helmfile.yaml": _helmfile("':/values.yaml'"),
            ":/values.yaml": _values("1.0"),  # what helmfile reads
            "values.yaml": _values("2.0"),  # the top-level file the magic named
        }
    )
    out = edit_step(_target(remote))
    assert out.plan.file == ":/values.yaml"
    assert out.decision == "update"
    assert out.plan.old.newTag == "1.0"


@pytest.mark.parametrize(
    "path", ["':(exclude)x'", "':!x'", "':(icase)VALUES.YAML'", "':(attr:foo)values.yaml'", "'v*.yaml'"]
)
def test_a_missing_file_named_like_magic_or_a_glob_is_skipped(path, make_remote, step_env) -> None:
    remote = make_remote(
        {
            "helmfile.yaml": _helmfile("values.yaml", path),
            "values.yaml": _values("1.0"),
            "VALUES.YAML": _values("1.0", f"{REGISTRY}/team/other"),
            "vx.yaml": _values("1.5"),
        }
    )
    out = edit_step(_target(remote))
    assert out.plan.file == "values.yaml"
    assert out.plan.old.newTag == "1.0"


def test_a_values_path_with_a_nul_byte_is_a_clear_error(make_remote, step_env) -> None:
    remote = make_remote({"helmfile.yaml": _helmfile('"values\\0.yaml"'), "values.yaml": _values("1.0")})
    before = _refs(remote)
    with pytest.raises(ConfigError, match="NUL byte") as info:
        edit_step(_target(remote))
    assert "embedded null byte" not in str(info.value)
    assert _refs(remote) == before

"""Values merged as Helm merges them: the documents of one values file (Helm 4), and a helmfile
release's ``--values`` sources in order, the later winning key by key. What is edited is the scalar
that decides what is deployed, never one a later document or source overrides."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from steps.domain.errors import ImageNotFoundError
from steps.domain.models import ValuesRef
from steps.kustomize import write_entry
from steps.kustomize.values import ValuesError, edit_values
from steps.kustomize.values.helmfile import locate_image

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
REPO = f"{ECR}/team/app"
OTHER = f"{ECR}/team/pinned"


def image(tag: str, repository: str = REPO) -> str:
    return f'image:\n  repository: {repository}\n  tag: "{tag}"\n'


def documents(text: str) -> list[dict]:
    return list(yaml.safe_load_all(text))


# --- the documents of one values file (Helm 4 merges them, the later winning) -----------------------


def test_a_later_document_that_overrides_only_the_tag_is_the_one_edited() -> None:
    before = image("1.0") + '---\nimage:\n  tag: "1.1"\n'
    edit = edit_values(before, REPO, tag="2.0", digest=None)
    first, second = documents(edit.text)
    assert first["image"]["tag"] == "1.0"  # the losing document: untouched
    assert second["image"]["tag"] == "2.0"


def test_a_later_document_with_the_whole_image_wins_over_the_earlier() -> None:
    before = image("1.0") + "---\n" + image("0.9")
    edit = edit_values(before, REPO, tag="2.0", digest=None)
    first, second = documents(edit.text)
    assert (first["image"]["tag"], second["image"]["tag"]) == ("1.0", "2.0")


def test_a_later_document_naming_another_repository_is_not_the_pushed_image() -> None:
    before = image("1.0") + f"---\nimage:\n  repository: {OTHER}\n"
    with pytest.raises(ImageNotFoundError):
        edit_values(before, REPO, tag="2.0", digest=None)


def test_a_digest_an_earlier_document_keeps_is_emptied_with_the_later_tag() -> None:
    before = image("1.0") + f"  digest: sha256:{'a' * 64}\n---\nimage:\n  tag: '1.1'\n"
    edit = edit_values(before, REPO, tag="2.0", digest=None)
    first, second = documents(edit.text)
    assert (first["image"]["digest"], first["image"]["tag"], second["image"]["tag"]) == ("", "1.0", "2.0")


# --- a helmfile release's sources ------------------------------------------------------------------------

RELEASE = """releases:
  - name: app
    chart: ./charts/app
    values:
      - values/base.yaml
      - values/{{ .Environment.Name }}.yaml
"""


def locate(files: dict[str, str], environment: str = "prod", helmfile: str = "helmfile.yaml"):
    return locate_image(files.get, helmfile, "app", environment, REPO)


def write(files: dict[str, str], environment: str = "prod", tag: str = "2.0") -> dict[str, str]:
    """The files after the edit the release's rule makes (only the located file changes)."""
    got = locate(files, environment)
    ref = ValuesRef(scope=list(got.scope) if got.scope else None, keys=got.keys, repository=got.repository)
    after = dict(files)
    after[got.file] = write_entry(got.text, REPO, source=got.file, tag=tag, digest=None, values=ref)
    return after


def test_a_later_file_that_overrides_only_the_tag_is_the_one_edited() -> None:
    files = {
        "helmfile.yaml": RELEASE,
        "values/base.yaml": image("1.0"),
        "values/prod.yaml": 'image:\n  tag: "1.1"\n',
    }
    after = write(files)
    assert after["values/base.yaml"] == files["values/base.yaml"]
    assert yaml.safe_load(after["values/prod.yaml"]) == {"image": {"tag": "2.0"}}


def test_a_later_file_that_overrides_only_the_repository_leaves_the_tag_where_it_is() -> None:
    files = {
        "helmfile.yaml": RELEASE,
        "values/base.yaml": image("1.0", OTHER),
        "values/prod.yaml": f"image:\n  repository: {REPO}\n",
    }
    after = write(files)
    assert after["values/prod.yaml"] == files["values/prod.yaml"]
    assert yaml.safe_load(after["values/base.yaml"])["image"] == {"repository": OTHER, "tag": "2.0"}


def test_a_later_file_that_pins_another_repository_means_the_release_is_not_this_images() -> None:
    files = {
        "helmfile.yaml": RELEASE,
        "values/base.yaml": image("1.0"),
        "values/prod.yaml": f"image:\n  repository: {OTHER}\n",
    }
    with pytest.raises(ImageNotFoundError) as caught:
        locate(files)
    assert caught.value.found == [OTHER]


def test_the_tag_and_digest_deciding_in_two_files_is_refused() -> None:
    files = {
        "helmfile.yaml": RELEASE,
        "values/base.yaml": image("1.0") + f"  digest: sha256:{'a' * 64}\n",
        "values/prod.yaml": 'image:\n  tag: "1.1"\n',
    }
    with pytest.raises(ValuesError) as caught:
        locate(files)
    assert caught.value.reason == "split-override"


def test_a_file_holding_the_image_twice_where_a_later_file_overrides_one_is_refused() -> None:
    files = {
        "helmfile.yaml": RELEASE,
        "values/base.yaml": image("1.0") + f"sidecar:\n  image:\n    repository: {REPO}\n    tag: '1.0'\n",
        "values/prod.yaml": f"sidecar:\n  image:\n    repository: {OTHER}\n",
    }
    with pytest.raises(ValuesError) as caught:
        locate(files)
    assert caught.value.reason == "split-override"


# --- environments' values are not chart values (helmfile pkg/state/state.go) ------------------------


ENVIRONMENTS = "environments:\n  prod:\n    values:\n      - env/prod.yaml\n---\n" + RELEASE


def test_an_image_only_in_an_environments_values_is_not_found() -> None:
    files = {
        "helmfile.yaml": ENVIRONMENTS,
        "env/prod.yaml": image("1.0"),
        "values/base.yaml": "replicas: 1\n",
    }
    with pytest.raises(ImageNotFoundError):
        locate(files)


def test_an_environments_values_never_outranks_the_release_values() -> None:
    files = {"helmfile.yaml": ENVIRONMENTS, "env/prod.yaml": image("1.0"), "values/base.yaml": image("0.9")}
    assert locate(files).file == "values/base.yaml"


# --- template blocks: decided exactly, or refused -----------------------------------------------------


CONDITIONAL = """releases:
  - name: app
    chart: ./charts/app
    values:
      - values/common.yaml
      {{- if eq .Environment.Name "production" }}
      - values/production.yaml
      {{- else if ne .Environment.Name "staging" }}
      - values/other.yaml
      {{- end }}
"""


@pytest.mark.parametrize(
    ("environment", "file"),
    [
        pytest.param("staging", "values/common.yaml", id="eq-false-ne-false"),
        pytest.param("production", "values/production.yaml", id="eq-true"),
        pytest.param("dev", "values/other.yaml", id="else-if-ne-true"),
    ],
)
def test_an_entry_inside_an_environment_condition_is_used_only_where_it_holds(
    environment: str, file: str
) -> None:
    files = {
        "helmfile.yaml": CONDITIONAL,
        "values/common.yaml": image("1.0"),
        "values/production.yaml": image("0.9"),
        "values/other.yaml": image("0.8"),
    }
    assert locate(files, environment).file == file


def test_releases_in_if_else_branches_by_environment() -> None:
    text = """releases:
{{- if eq .Environment.Name "production" }}
  - name: app
    values: [values/production.yaml]
{{- else }}
  - name: app
    values: [values/staging.yaml]
{{- end }}
"""
    files = {
        "helmfile.yaml": text,
        "values/production.yaml": image("0.9"),
        "values/staging.yaml": image("1.0"),
    }
    assert locate(files, "staging").file == "values/staging.yaml"
    assert locate(files, "production").file == "values/production.yaml"


@pytest.mark.parametrize(
    "block",
    [
        pytest.param("{{- if .Values.canary }}", id="values-condition"),
        pytest.param("{{- range .Values.extra }}", id="range"),
        pytest.param("{{- with .Values.extra }}", id="with"),
        pytest.param('{{- if eq (env "STAGE") "prod" }}', id="env-function"),
    ],
)
def test_an_entry_inside_a_block_imagebump_cannot_decide_is_refused(block: str) -> None:
    text = RELEASE + f"      {block}\n      - values/extra.yaml\n      {{{{- end }}}}\n"
    files = {"helmfile.yaml": text, "values/base.yaml": image("1.0"), "values/extra.yaml": "replicas: 2\n"}
    with pytest.raises(ValuesError) as caught:
        locate(files)
    assert caught.value.reason == "template"


# --- set / setString and installed: false ------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "name"),
    [
        pytest.param("set", "image.tag", id="set-tag"),
        pytest.param("setString", "image.repository", id="setString-repository"),
        pytest.param("set", "image", id="set-the-whole-image"),
    ],
)
def test_a_set_naming_a_key_of_the_image_is_refused(field: str, name: str) -> None:
    text = RELEASE + f"    {field}:\n      - name: {name}\n        value: '0.5'\n"
    files = {"helmfile.yaml": text, "values/base.yaml": image("1.0")}
    with pytest.raises(ValuesError) as caught:
        locate(files)
    assert caught.value.reason == "set-override"


def test_a_set_of_another_key_is_no_obstacle() -> None:
    text = RELEASE + "    set:\n      - name: replicaCount\n        value: 2\n"
    files = {"helmfile.yaml": text, "values/base.yaml": image("1.0")}
    assert locate(files).file == "values/base.yaml"


def test_a_release_that_is_not_installed_is_not_edited() -> None:
    text = RELEASE.replace("    chart:", "    installed: false\n    chart:")
    files = {"helmfile.yaml": text, "values/base.yaml": image("1.0")}
    with pytest.raises(ImageNotFoundError):
        locate(files)


# --- the promise as a property: never edit what a later source overrides -----------------------------

#: What one document of a values file says about the image: nothing, all of it, or a part.
PIECES = {
    "none": lambda tag: "replicas: 1\n",
    "complete": lambda tag: image(tag),
    "complete-other": lambda tag: image(tag, OTHER),
    "tag-only": lambda tag: f'image:\n  tag: "{tag}"\n',
    "repository-only": lambda tag: f"image:\n  repository: {REPO}\n",
    "other-repository-only": lambda tag: f"image:\n  repository: {OTHER}\n",
}

sources = st.lists(
    st.lists(st.sampled_from(sorted(PIECES)), min_size=1, max_size=2),  # a file: its documents
    min_size=1,
    max_size=4,
)


def helm_merge(files: dict[str, str], order: list[str]) -> dict:
    """What Helm deploys from ``order`` (``--values`` in order; each file's documents in order):
    MergeMaps, the later winning, mappings merged key by key."""

    def merge(base: dict, over: dict) -> dict:
        out = dict(base)
        for key, value in over.items():
            out[key] = (
                merge(out[key], value)
                if isinstance(value, dict) and isinstance(out.get(key), dict)
                else value
            )
        return out

    result: dict = {}
    for name in order:
        for document in yaml.safe_load_all(files[name]):
            if isinstance(document, dict):
                result = merge(result, document)
    return result


@settings(max_examples=150, deadline=None)
@given(sources)
@example([["complete"], ["tag-only"]])  # the audit: a later file overriding only image.tag
@example([["complete"], ["other-repository-only"]])  # a later file pinning another repository
@example([["complete", "tag-only"]])  # a later document overriding only the tag
@example([["complete-other"], ["repository-only"]])  # the repository from a later file
def test_the_edit_lands_where_helms_merge_takes_the_tag_never_in_an_overridden_file(layout) -> None:
    order = [f"values/{i}.yaml" for i in range(len(layout))]
    files = {
        name: "---\n".join(PIECES[piece](f"1.{i}.{j}") for j, piece in enumerate(pieces))
        for i, (name, pieces) in enumerate(zip(order, layout, strict=True))
    }
    files["helmfile.yaml"] = "releases:\n  - name: app\n    values:\n" + "".join(
        f"      - {n}\n" for n in order
    )
    deployed = helm_merge(files, order).get("image", {})
    if deployed.get("repository") != REPO:
        with pytest.raises(ImageNotFoundError):
            locate(files)
        return
    after = write(files, tag="9.9.9")
    now = helm_merge(after, order)["image"]
    assert (now["repository"], now["tag"]) == (REPO, "9.9.9")
    assert sum(after[n] != files[n] for n in files) == 1

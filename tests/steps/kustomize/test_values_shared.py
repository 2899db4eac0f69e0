"""Never change another image: a value shared through an anchor, an alias or a merge key (``<<``)
is edited only when every place Helm reads it is the pushed image; ingress-nginx's ``chroot``
deploys ``<image>-chroot@<digestChroot>``. Examples for the bugs seen, and the promise as a
Hypothesis property over documents that share values between the pushed image and others."""

from __future__ import annotations

from unittest import mock

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from steps.domain.errors import ConfigError, ImageNotFoundError
from steps.domain.models import Target
from steps.edit_kustomize import decide as edit_kustomize
from steps.kustomize.values import ValuesError, edit_values
from steps.kustomize.values import edit as values_edit
from steps.kustomize.values.find import truthy
from steps.kustomize.values.tree import compose

ECR = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
APP = f"{ECR}/team/app"
WORKER = f"{ECR}/team/worker"
DIGEST = "sha256:" + "c" * 64


def refused(text: str, repository: str = APP, **push) -> ValuesError:
    with pytest.raises(ValuesError) as caught:
        edit_values(text, repository, **({"tag": "2.0", "digest": None} | push))
    return caught.value


# --- anchors and aliases ----------------------------------------------------------------------------

ANCHORED_TAG = f"""app:
  image:
    repository: {APP}
    tag: &v "1.0"
worker:
  image:
    repository: {WORKER}
    tag: *v
"""


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(ANCHORED_TAG, id="anchor-at-the-pushed-image-alias-in-another"),
        pytest.param(
            f"worker:\n  image:\n    repository: {WORKER}\n    tag: &v '1.0'\n"
            f"app:\n  image:\n    repository: {APP}\n    tag: *v\n",
            id="anchor-in-another-image-alias-at-the-pushed-one",
        ),
        pytest.param(
            f"versions:\n  app: &v '1.0'\napp:\n  image:\n    repository: {APP}\n    tag: *v\n"
            f"worker:\n  image:\n    repository: {WORKER}\n    tag: *v\n",
            id="anchor-outside-any-image-aliased-by-two-repositories",
        ),
        pytest.param(
            f"app:\n  image: &i {APP}:1.0\nworker:\n  sidecar:\n    image: *i\n  other: *i\n",
            id="a-string-image-aliased-outside-any-image",
        ),
        pytest.param(
            f"app:\n  image:\n    repository: {APP}\n    tag: &v '1.0'\nconfig:\n  appVersion: *v\n",
            id="an-alias-outside-any-image",
        ),
    ],
)
def test_an_anchored_value_another_place_reads_is_refused(text: str) -> None:
    assert refused(text).reason == "anchor"


def test_the_refusal_names_the_anchor_and_the_other_image() -> None:
    message = str(refused(ANCHORED_TAG))
    assert "&v" in message and "worker.image.tag" in message and WORKER in message


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        pytest.param(
            f"a:\n  image:\n    repository: {APP}\n    tag: &v '1.0'\nb:\n  image:\n    repository: {APP}\n    tag: *v\n",
            {3: "    tag: &v '2.0'\n"},
            id="aliased-by-the-same-image",
        ),
        pytest.param(
            f"versions:\n  app: &v '1.0'\na:\n  image:\n    repository: {APP}\n    tag: *v\n"
            f"b:\n  image:\n    repository: {APP}\n    tag: *v\n",
            {1: "  app: &v '2.0'\n"},
            id="anchor-outside-any-image-aliased-by-the-same-image",
        ),
        pytest.param(
            f"image: &i\n  repository: {APP}\n  tag: '1.0'\nloki:\n  image: *i\n",
            {2: "  tag: '2.0'\n"},
            id="a-whole-image-aliased",
        ),
    ],
)
def test_an_anchored_value_only_the_same_image_reads_is_edited_once(text: str, lines: dict) -> None:
    edit = edit_values(text, APP, tag="2.0", digest=None)
    before, after = text.splitlines(keepends=True), edit.text.splitlines(keepends=True)
    assert {i: line for i, line in enumerate(after) if line != before[i]} == lines
    assert len(after) == len(before)


# --- merge keys -------------------------------------------------------------------------------------

MERGED = f"""base: &b
  repository: {APP}
  tag: "1.0"
other:
  <<: *b
  repository: {WORKER}
"""


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(MERGED, id="another-repository-inherits-the-tag"),
        pytest.param(
            f"x: &x\n  registry: {ECR}\n  repository: team/app\n  tag: '1'\ny:\n  <<: *x\n  registry: docker.io\n",
            id="another-registry-inherits-the-tag",
        ),
        pytest.param(
            f"base: &b {{repository: {APP}, tag: '1.0'}}\nlist:\n- <<: [*b]\n  repository: {WORKER}\n",
            id="a-merge-list-in-a-list-item",
        ),
        pytest.param(
            f"defaults: &d\n  tag: '1.0'\nbase: &b\n  <<: *d\n  repository: {APP}\n  tag: '1.0'\n"
            f"worker:\n  <<: *d\n  repository: {WORKER}\napp2:\n  <<: *b\n  tag: &t '1.0'\nw2:\n  repository: {WORKER}\n  tag: *t\n",
            id="merged-then-aliased",
        ),
    ],
)
def test_a_key_another_image_inherits_through_a_merge_key_is_refused(text: str) -> None:
    assert refused(text).reason == "anchor"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(MERGED + '  tag: "0.9"\n', id="the-other-image-sets-its-own-tag"),
        pytest.param(MERGED.replace(WORKER, APP), id="the-same-image-inherits-it"),
    ],
)
def test_a_merged_key_no_other_image_reads_is_edited(text: str) -> None:
    edit = edit_values(text, APP, tag="2.0", digest=None)
    assert edit.text == text.replace('tag: "1.0"', 'tag: "2.0"', 1)


def test_an_image_that_inherits_its_tag_reads_it_and_gets_its_own() -> None:
    text = f"base: &b\n  tag: '1.0'\nother:\n  <<: *b\n  repository: {APP}\n"
    edit = edit_values(text, APP, tag="2.0", digest=None)
    assert edit.old is not None and edit.old.newTag == "1.0"  # read through the merge key
    assert edit.text == text + '  tag: "2.0"\n'
    assert yaml.safe_load(edit.text)["base"] == {"tag": "1.0"}


def test_a_digest_inherited_through_a_merge_key_is_refused() -> None:
    text = f"base: &b\n  tag: '1.0'\n  digest: sha256:{'a' * 64}\nother:\n  <<: *b\n  repository: {APP}\n"
    assert refused(text).reason == "merge-key"


# --- ingress-nginx chroot ---------------------------------------------------------------------------

CHROOT = f"""controller:
  image:
    chroot: true
    registry: {ECR}
    image: team/app
    tag: "1.0"
    digest: sha256:{"a" * 64}
    digestChroot: sha256:{"b" * 64}
"""


def test_chroot_a_push_of_the_image_does_not_match_the_chroot_image() -> None:
    with pytest.raises(ImageNotFoundError) as caught:
        edit_values(CHROOT, APP, tag="2.0", digest=DIGEST)
    assert caught.value.found == [f"{APP}-chroot"]


def test_chroot_a_push_of_the_chroot_image_sets_tag_and_digest_chroot() -> None:
    edit = edit_values(CHROOT, f"{APP}-chroot", tag="2.0", digest=DIGEST)
    assert edit.text == CHROOT.replace('"1.0"', '"2.0"').replace(f"sha256:{'b' * 64}", DIGEST)
    edit = edit_values(CHROOT, f"{APP}-chroot", tag="2.0", digest=None)
    assert edit.text == CHROOT.replace('"1.0"', '"2.0"').replace(f"sha256:{'b' * 64}", '""')


@pytest.mark.parametrize(
    ("text", "deployed"),
    [
        pytest.param(CHROOT.replace("chroot: true", "chroot: false"), APP, id="false"),
        pytest.param(CHROOT.replace("    chroot: true\n", ""), APP, id="absent"),
        pytest.param(
            "global:\n  image:\n    chroot: true\n" + CHROOT.replace("    chroot: true\n", ""),
            f"{APP}-chroot",
            id="global-image-chroot",
        ),
        pytest.param(
            CHROOT.replace("chroot: true", 'chroot: "false"'), f"{APP}-chroot", id="a-string-is-true"
        ),
    ],
)
def test_chroot_is_read_as_the_chart_reads_it(text: str, deployed: str) -> None:
    edit = edit_values(text, deployed, tag="2.0", digest=DIGEST)
    key = "digestChroot" if deployed.endswith("-chroot") else "digest"
    assert yaml.safe_load(edit.text)["controller"]["image"][key] == DIGEST
    assert edit.edited == ["controller.image." + key, "controller.image.tag"]


@pytest.mark.parametrize(
    ("value", "true"),
    [("true", True), ("yes", True), ("on", True), ("false", False), ("no", False), ("off", False),
     ("", False), ("~", False), ("0", False), ("0.0", False), ("0x0", False), ("1", True),
     ('"false"', True), ("''", False), ("{}", False), ("{a: 1}", True)],
)  # fmt: skip
def test_truthy_is_go_templates_if(value: str, true: bool) -> None:
    (root,) = compose(f"x: {value}\n", "t.yaml")
    assert truthy(root.get("x")) is true


# --- the promise, for every sharing -----------------------------------------------------------------

REPOS = [APP, WORKER, f"{ECR}/team/other"]


@st.composite
def shared_documents(draw):
    """A values document of 2–5 images (each of APP or another repository) where each image's tag
    is its own, anchored, an alias of an earlier anchored tag (of an image or of a ``versions``
    block), or inherited from an earlier image merged with ``<<`` (its repository and tag
    overridden or not), or the image is an alias of an earlier image's whole mapping."""
    lines = ["versions:", "  v0: &v0 '1.0'", "  v1: &v1 '1.1'"]
    tags = ["v0", "v1"]  # anchored tags so far
    maps: list[str] = []  # anchored image mappings so far
    count = draw(st.integers(2, 5))
    for i in range(count):
        repo = draw(st.sampled_from(REPOS))
        how = draw(st.sampled_from(["own", "anchor", "alias", "merge", "whole"]))
        if how == "whole" and maps:
            lines.append(f"i{i}: *{draw(st.sampled_from(maps))}")
            continue
        anchor = draw(st.booleans())
        lines.append(f"i{i}:" + (f" &m{i}" if anchor else ""))
        if how == "merge" and maps:
            lines.append(f"  <<: *{draw(st.sampled_from(maps))}")
            if draw(st.booleans()):
                lines.append(f"  repository: {repo}")
            if draw(st.booleans()):
                lines.append(f"  tag: '{draw(st.sampled_from(['1.0', '1.1']))}'")
        else:
            lines.append(f"  repository: {repo}")
            if how == "alias":
                lines.append(f"  tag: *{draw(st.sampled_from(tags))}")
            elif how == "anchor":
                lines.append(f"  tag: &t{i} '{draw(st.sampled_from(['1.0', '1.1']))}'")
                tags.append(f"t{i}")
            else:
                lines.append(f"  tag: '{draw(st.sampled_from(['1.0', '1.1']))}'")
        if anchor:
            maps.append(f"m{i}")
    if draw(st.booleans()):
        lines.append(f"config:\n  appVersion: *{draw(st.sampled_from(tags))}")
    return "\n".join(lines) + "\n"


def _images(data: dict) -> dict[str, tuple]:
    """Every image as Helm reads it (aliases expanded, merge keys resolved): key → (repository, tag)."""
    return {
        k: (v.get("repository"), v.get("tag"))
        for k, v in data.items()
        if k.startswith("i") and isinstance(v, dict) and v.get("repository")
    }


@settings(max_examples=300, deadline=None)
@given(shared_documents(), st.sampled_from(["2.0", "1.1"]))
@example(f"i0:\n  repository: {APP}\n  tag: &v '1.0'\ni1:\n  repository: {WORKER}\n  tag: *v\n", "2.0")
@example(MERGED.replace("base:", "i0:").replace("other:", "i1:"), "2.0")
def test_an_edit_never_changes_another_image(text: str, new: str) -> None:
    """Whatever anchors, aliases and merge keys the pushed image shares with others: after an edit
    every image of another repository reads (alias-expanded, merge-resolved) as before, every
    image of the pushed one reads the new tag, and nothing else but the pushed image's fields
    changed; a refusal writes nothing."""
    before = yaml.safe_load(text)
    try:
        edit = edit_values(text, APP, tag=new, digest=None)
    except ImageNotFoundError:
        assert all(repo != APP for repo, _ in _images(before).values())
        return
    except ValuesError as exc:
        assert exc.reason in ("anchor", "ambiguous-entry", "merge-key")
        return
    after = yaml.safe_load(edit.text)
    old, now = _images(before), _images(after)
    assert old.keys() == now.keys()
    for key, (repo, tag) in now.items():
        assert (repo, tag) == ((APP, new) if repo == APP else old[key])
    assert after["config"] == before["config"] if "config" in before else "config" not in after
    for key in ("v0", "v1"):
        if after["versions"][key] != before["versions"][key]:  # an anchor outside any image
            assert after["versions"][key] == new


@settings(max_examples=200, deadline=None)
@given(shared_documents())
@example(f"i0:\n  repository: {APP}\n  tag: &v '1.0'\ni1:\n  repository: {WORKER}\n  tag: *v\n")
def test_an_edit_is_refused_for_sharing_only_when_it_would_change_another_image(text: str) -> None:
    """The other half: a refusal for sharing is never for sharing alone — the same edit made
    without the check changes another image, or a value outside any image that an alias reads."""
    try:
        edit_values(text, APP, tag="2.0", digest=None)
        return
    except (ValuesError, ImageNotFoundError) as exc:
        if getattr(exc, "reason", "") != "anchor":
            return
    with mock.patch.object(values_edit, "_refuse_other_images_changed"):
        unchecked = yaml.safe_load(edit_values(text, APP, tag="2.0", digest=None).text)
    before = yaml.safe_load(text)
    old, now = _images(before), _images(unchecked)
    others_changed = any(now[k] != old[k] for k in old if old[k][0] != APP)
    assert others_changed or unchecked.get("config") != before.get("config")


def test_the_edit_step_refuses_it_and_plans_nothing() -> None:
    """Through edit-kustomize's pure core: the refusal is the step's error (a ConfigError, no
    traceback at the entry point), never a plan that changes the worker."""
    t = Target(
        rule=0,
        repo_url="https://github.com/o/r",
        path="charts/app",
        image=APP,
        tag="2.0.0",
        order="semver",
        values_file="charts/app/values.yaml",
    )
    text = ANCHORED_TAG.replace('"1.0"', '"1.0.0"')
    with pytest.raises(ConfigError) as caught:
        edit_kustomize.decide(t, text, "charts/app/values.yaml", "a" * 40, "main", {}, values=t.values_ref())
    assert isinstance(caught.value, ValuesError) and caught.value.reason == "anchor"


def test_an_empty_digest_inherited_through_a_merge_key_stays_empty() -> None:
    text = f"base: &b\n  tag: '1.0'\n  digest: ''\nother:\n  <<: *b\n  repository: {APP}\n"
    edit = edit_values(text, APP, tag="2.0", digest=None)
    assert edit.text == text + '  tag: "2.0"\n'

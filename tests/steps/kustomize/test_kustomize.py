"""The kustomization editor: golden byte-for-byte edits, kustomize's reading of them, errors.

Golden cases live in ``tests/testdata/edit/<case>/``: ``original/`` and ``expected/`` are
renderable overlays (kustomization + a small Deployment), ``case.json`` holds the edit to apply
(``set``) and the image reference ``kubectl kustomize`` must render from ``expected/``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from steps import kustomize
from steps.domain.errors import ConfigError, ImageNotFoundError, KustomizationError
from steps.domain.models import ImagesEntry
from steps.kustomize import (
    KUSTOMIZATION_FILES,
    MAX_ALIAS_EXPANSION,
    MAX_KUSTOMIZATION_BYTES,
    ImageSpec,
    find_kustomization,
    get_image,
    parse_image_spec,
    read_images,
    set_image,
)
from tests.steps.kustomize.test_kustomize_parses import _spy_parses

EDIT = Path(__file__).resolve().parents[2] / "testdata" / "edit"
CASES = sorted(p.name for p in EDIT.iterdir() if (p / "case.json").is_file())
KUBECTL = "/usr/bin/kubectl"
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2f" * 32


def _case(case: str) -> tuple[dict, str, bytes]:
    meta = json.loads((EDIT / case / "case.json").read_text())
    original = (EDIT / case / "original" / meta["file"]).read_bytes().decode("utf-8")
    expected = (EDIT / case / "expected" / meta["file"]).read_bytes()
    return meta, original, expected


def _apply(meta: dict, text: str) -> str:
    spec = dict(meta["set"])
    return set_image(text, spec.pop("name"), **spec)


def test_there_are_enough_golden_cases():
    assert len(CASES) >= 20


@pytest.mark.parametrize("case", [pytest.param(c, id=c) for c in CASES])
def test_golden_edit_is_byte_exact(case: str):
    meta, original, expected = _case(case)
    assert _apply(meta, original).encode("utf-8") == expected


@pytest.mark.parametrize("case", [pytest.param(c, id=c) for c in CASES])
def test_golden_edit_is_idempotent(case: str):
    meta, _, expected = _case(case)
    text = expected.decode("utf-8")
    assert _apply(meta, text) is text


@pytest.mark.parametrize("side", ["original", "expected"])
@pytest.mark.parametrize("case", [pytest.param(c, id=c) for c in CASES])
def test_setting_current_values_returns_identical_text(case: str, side: str):
    meta = json.loads((EDIT / case / "case.json").read_text())
    text = (EDIT / case / side / meta["file"]).read_bytes().decode("utf-8")
    for entry in read_images(text):
        if entry.newName is None and entry.newTag is None and entry.digest is None:
            continue
        result = set_image(text, entry.name, new_name=entry.newName, tag=entry.newTag, digest=entry.digest)
        assert result is text, entry


def _render(directory: Path) -> list[dict]:
    if not Path(KUBECTL).exists():  # a missing kubectl must fail the run, not skip it
        pytest.fail(
            f"{KUBECTL} not found: install kubectl (with kustomize v5) to run the golden render tests"
        )
    proc = subprocess.run(
        [KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@pytest.mark.parametrize("case", [pytest.param(c, id=c) for c in CASES])
def test_expected_renders_to_the_meant_image(case: str):
    meta = json.loads((EDIT / case / "case.json").read_text())
    (deployment,) = [d for d in _render(EDIT / case / "expected") if d["kind"] == "Deployment"]
    images = [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert images == [meta["image"]]


def test_original_of_a_changing_case_renders_differently():
    meta = json.loads((EDIT / "tag-col0-sequence" / "case.json").read_text())
    (deployment,) = _render(EDIT / "tag-col0-sequence" / "original")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] != meta["image"]


# --- semantics ----------------------------------------------------------------------------

BASE = "images:\n- name: api\n  newTag: 1.0.0\n"


def test_no_op_returns_the_same_object():
    assert set_image(BASE, "api", tag="1.0.0") is BASE


def test_plain_number_tag_is_not_current_for_a_string():
    # `newTag: 1.10` reads as the float 1.1: setting the string "1.10" must quote it.
    assert set_image("images:\n- name: api\n  newTag: 1.10\n", "api", tag="1.10") == (
        'images:\n- name: api\n  newTag: "1.10"\n'
    )


def test_name_match_wins_over_new_name_match():
    text = "images:\n- name: a\n  newName: api\n  newTag: '1'\n- name: api\n  newTag: '1'\n"
    assert set_image(text, "api", tag="2") == (
        "images:\n- name: a\n  newName: api\n  newTag: '1'\n- name: api\n  newTag: '2'\n"
    )


def test_new_name_alone_keeps_tag_and_digest():
    text = f"images:\n- name: api\n  newTag: 1.0.0\n  digest: {D1}\n"
    assert set_image(text, "api", new_name="reg.example.com/api") == text + "  newName: reg.example.com/api\n"


def test_anchor_elsewhere_in_the_file_is_fine():
    text = "x: &v 1\ny: *v\nimages:\n- name: api\n  newTag: 1.0.0\n"
    assert set_image(text, "api", tag="2.0.0") == text.replace("1.0.0", "2.0.0")


def test_read_images_and_get_image():
    text = (
        f"images:\n- name: api\n  newName: reg/api\n  newTag: '1.10'\n  digest: {D1}\n- {{name: web, x: y}}\n"
    )
    entries = read_images(text)
    assert [e.name for e in entries] == ["api", "web"]
    assert entries[0].newTag == "1.10" and entries[0].digest == D1
    assert entries[1] == ImagesEntry(name="web")  # a key kustomize does not read is not an entry's
    assert get_image(text, "reg/api").name == "api"
    assert get_image(text, "nope") is None
    assert read_images("") == [] and read_images("resources: [a]\n") == []


def test_add_to_an_empty_file():
    assert set_image("", "api", tag="1.0.0", add=True) == "images:\n- name: api\n  newTag: 1.0.0\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("{}\n", "{images: [{name: api, newTag: 1.0.0}]}\n", id="empty-as-kyaml-writes-it"),
        pytest.param("{}", "{images: [{name: api, newTag: 1.0.0}]}", id="no-final-newline"),
        pytest.param(
            "{resources: [a.yaml]}\n",
            "{resources: [a.yaml], images: [{name: api, newTag: 1.0.0}]}\n",
            id="after-the-last-pair",
        ),
        pytest.param(
            "{\n  resources: [a.yaml],\n}\n",
            "{\n  resources: [a.yaml], images: [{name: api, newTag: 1.0.0}],\n}\n",
            id="multi-line-trailing-comma",
        ),
        pytest.param(
            "{images: null, resources: [a.yaml]}\n",
            "{images: [{name: api, newTag: 1.0.0}], resources: [a.yaml]}\n",
            id="null-images-replaced",
        ),
        pytest.param(
            "{images: [{name: web}]}\n",
            "{images: [{name: web}, {name: api, newTag: 1.0.0}]}\n",
            id="flow-images-appended",
        ),
    ],
)
def test_add_to_a_kustomization_written_as_one_flow_mapping(text: str, expected: str):
    """kustomize and argocd-image-updater add the entry to ``{}`` (how kyaml writes an empty
    kustomization): so do we, inside the braces, rewriting nothing else; the result reads back as
    the same mapping plus the entry."""
    result = set_image(text, "api", tag="1.0.0", add=True)
    assert result == expected
    before, after = yaml.safe_load(text), yaml.safe_load(result)
    images = after.pop("images")
    assert images[-1] == {"name": "api", "newTag": "1.0.0"}
    assert {k: v for k, v in before.items() if k != "images"} == after
    assert set_image(result, "api", tag="1.0.0") is result  # idempotent


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kwargs", "error", "expected"),
    [
        pytest.param(
            "images:\n- name: web\n- name: worker\n",
            {"tag": "1"},
            ImageNotFoundError,
            {"found": ["web", "worker"]},
            id="not-found-lists-names",
        ),
        pytest.param(
            "resources: [a]\n",
            {"tag": "1"},
            ImageNotFoundError,
            {"found": []},
            id="not-found-no-images",
        ),
        pytest.param(
            "images: [\n", {"tag": "1"}, KustomizationError, {"reason": "invalid-yaml"}, id="bad-yaml"
        ),
        pytest.param(
            "images:\n- name: api\n\tnewTag: 1\n",
            {"tag": "1"},
            KustomizationError,
            {"reason": "invalid-yaml"},
            id="tab-indentation",
        ),
        pytest.param(
            "images:\n- name: api\n---\nkind: Other\n",
            {"tag": "1"},
            KustomizationError,
            {"reason": "multiple-documents"},
            id="multi-document",
        ),
        pytest.param(
            "images:\n- name: api\n  newTag: a\n  newTag: b\n",
            {"tag": "1"},
            KustomizationError,
            {"reason": "duplicate-key"},
            id="duplicate-keys",
        ),
        pytest.param(
            "images: []\nimages: []\n",
            {"tag": "1"},
            KustomizationError,
            {"reason": "duplicate-key"},
            id="duplicate-top-key",
        ),
        pytest.param(
            "images:\n- &e {name: api, newTag: a}\nother: [*e]\n",
            {"tag": "1"},
            KustomizationError,
            {"reason": "anchor"},
            id="aliased-entry",
        ),
        pytest.param(
            "images:\n- name: api\n  newTag: &t a\nother: *t\n",
            {"tag": "1"},
            KustomizationError,
            {"reason": "anchor"},
            id="aliased-value",
        ),
        pytest.param(
            "base: &b {newTag: a}\nimages:\n- <<: *b\n  name: api\n",
            {"tag": "1"},
            KustomizationError,
            {"reason": "complex-key"},
            id="merge-key",
        ),
        pytest.param(
            "- a\n- b\n", {"tag": "1"}, KustomizationError, {"reason": "not-a-mapping"}, id="top-level-list"
        ),
        pytest.param(
            "images: api\n",
            {"tag": "1"},
            KustomizationError,
            {"reason": "images-not-a-list"},
            id="images-not-a-list",
        ),
        pytest.param(
            "images:\n- newTag: a\n",
            {"tag": "1"},
            KustomizationError,
            {"reason": "entry-without-name"},
            id="entry-without-name",
        ),
        pytest.param(
            "images:\n- name: api\n- name: api\n",
            {"tag": "1"},
            KustomizationError,
            {"reason": "ambiguous-entry"},
            id="ambiguous-name",
        ),
        pytest.param(
            "images:\n- name: api\n  newTag: |\n    a\n",
            {"tag": "1"},
            KustomizationError,
            {"reason": "block-scalar"},
            id="block-scalar",
        ),
        pytest.param(
            BASE, {"tag": "-bad"}, ConfigError, {"reason": "invalid-tag", "field": "tag"}, id="invalid-tag"
        ),
        pytest.param(
            BASE,
            {"tag": "a" * 129},
            ConfigError,
            {"reason": "invalid-tag", "field": "tag"},
            id="tag-too-long",
        ),
        pytest.param(
            BASE,
            {"digest": "sha256:abc"},
            ConfigError,
            {"reason": "invalid-digest", "field": "digest"},
            id="short-digest",
        ),
        pytest.param(
            BASE,
            {"digest": "md5:" + "a" * 64},
            ConfigError,
            {"reason": "invalid-digest", "field": "digest"},
            id="wrong-algorithm",
        ),
        pytest.param(
            BASE,
            {"new_name": "a b"},
            ConfigError,
            {"reason": "invalid-name", "field": "new name"},
            id="invalid-new-name",
        ),
        pytest.param(BASE, {}, ConfigError, {"reason": "nothing-to-set"}, id="nothing-to-set"),
    ],
)
def test_errors(text: str, kwargs: dict, error: type[Exception], expected: dict):
    original = text
    with pytest.raises(error) as excinfo:
        set_image(text, "api", **kwargs)
    assert {key: getattr(excinfo.value, key) for key in expected} == expected
    assert text == original


def test_a_tab_indented_file_is_told_to_indent_with_spaces():
    """The fix is the message's meaning (no field carries it): the hint names spaces."""
    with pytest.raises(KustomizationError) as excinfo:
        set_image("images:\n- name: api\n\tnewTag: 1\n", "api", tag="1")
    assert excinfo.value.reason == "invalid-yaml"
    assert "indent with spaces" in str(excinfo.value)


def test_not_found_error_carries_the_names():
    with pytest.raises(ImageNotFoundError) as excinfo:
        set_image("images:\n- name: web\n- {name: worker}\n", "api", tag="1")
    assert excinfo.value.found == ["web", "worker"]


def test_reading_bad_yaml_raises_kustomization_error():
    with pytest.raises(
        KustomizationError, match=r"^overlays/prod/kustomization\.yaml: "
    ) as info:  # the file to fix
        read_images("a: [\n", source="overlays/prod/kustomization.yaml")
    assert info.value.reason == "invalid-yaml"


# --- hostile input: size, alias bombs, nesting ----------------------------------------------------

IMAGES = "images:\n- name: api\n  newTag: '1.0'\n"
#: 'Billion laughs': 9 levels of 10 aliases, 10⁹ strings once expanded, a few hundred bytes written.
LAUGHS = "x:\n  l0: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"  l{i + 1}: &{n} [{', '.join([f'*{p}'] * 10)}]\n"
    for i, (p, n) in enumerate(zip("abcdefgh", "bcdefghi"))
)
READERS = [
    pytest.param(lambda text, source: read_images(text, source=source), id="read_images"),
    pytest.param(lambda text, source: get_image(text, "api", source=source), id="get_image"),
    pytest.param(lambda text, source: set_image(text, "api", tag="2.0", source=source), id="set_image"),
]


@pytest.mark.parametrize("call", READERS)
def test_a_kustomization_over_the_size_limit_is_refused_before_parsing(call):
    # Not even valid YAML after the limit: the size is checked first, so the message is about the size.
    text = IMAGES + "# " + "x" * MAX_KUSTOMIZATION_BYTES + "\n: [\n"
    with pytest.raises(
        KustomizationError, match=r"^overlays/prod/kustomization\.yaml: "
    ) as info:  # the file to fix
        call(text, "overlays/prod/kustomization.yaml")
    assert info.value.reason == "too-large"


def test_the_size_limit_counts_utf8_bytes_and_allows_the_limit_itself(monkeypatch):
    assert MAX_KUSTOMIZATION_BYTES == 1 << 20
    limit = 4096  # the same code with a smaller limit: parsing 1 MiB takes seconds
    monkeypatch.setattr(kustomize.yaml_nodes, "MAX_KUSTOMIZATION_BYTES", limit)
    pad = limit - len(IMAGES.encode()) - len("# \n")
    at_limit = IMAGES + "# " + "x" * pad + "\n"
    assert len(at_limit.encode()) == limit
    assert get_image(at_limit, "api").newTag == "1.0"
    # An edit may take a file at the limit a byte over it: still written.
    assert "newTag: '2.0.0'" in set_image(at_limit, "api", tag="2.0.0")
    with pytest.raises(KustomizationError) as info:
        read_images(at_limit + "\n")
    assert info.value.reason == "too-large"
    multibyte = IMAGES + "# " + "é" * (limit // 2) + "\n"  # fewer characters than the limit, more bytes
    assert len(multibyte) < limit
    with pytest.raises(KustomizationError) as info:
        read_images(multibyte)
    assert info.value.reason == "too-large"


@pytest.mark.parametrize("call", READERS)
def test_billion_laughs_is_refused_without_expanding(call):
    with pytest.raises(KustomizationError) as info:
        call(IMAGES + LAUGHS, "kustomization.yaml")
    assert info.value.reason == "alias-bomb"


def test_aliases_up_to_the_expansion_limit_are_fine(monkeypatch):
    assert MAX_ALIAS_EXPANSION == 10_000
    monkeypatch.setattr(kustomize.reader, "MAX_ALIAS_EXPANSION", 100)  # the same code, a smaller document
    text = IMAGES + "x: &x [" + ", ".join(["a"] * 49) + "]\ny: *x\n"  # *x adds the list's 50 nodes again
    z = "z: *x\n"
    assert set_image(text + z, "api", tag="2.0") == (text + z).replace("'1.0'", "'2.0'")
    with pytest.raises(KustomizationError) as info:
        read_images(text + z + "w: *x\n")
    assert info.value.reason == "alias-bomb"


def test_a_large_document_without_aliases_is_not_an_alias_bomb(monkeypatch):
    monkeypatch.setattr(kustomize.reader, "MAX_ALIAS_EXPANSION", 100)
    text = IMAGES + "x: [" + ", ".join(["a"] * 300) + "]\n"
    assert get_image(text, "api").newTag == "1.0"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("x: &a [*a]\n", id="sequence"),
        pytest.param("x: &a {k: [1, *a]}\n", id="mapping"),
    ],
)
def test_recursive_aliases_are_refused(text):
    with pytest.raises(KustomizationError) as info:
        set_image(IMAGES + text, "api", tag="2.0")
    assert info.value.reason == "recursive-alias"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("x: " + "[" * 100_000 + "]" * 100_000 + "\n", id="flow-sequences"),
        pytest.param("x: " + "{a: " * 1000 + "1" + "}" * 1000 + "\n", id="flow-mappings"),
        pytest.param("".join(" " * i + "k:\n" for i in range(1200)), id="block-mappings"),
    ],
)
def test_deep_nesting_is_refused_quickly(text):
    with pytest.raises(KustomizationError) as info:
        get_image(IMAGES + text, "api")
    assert info.value.reason == "too-deep"


# --- image specs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param("api:1.0", ImageSpec("api", tag="1.0"), id="tag"),
        pytest.param(f"api@{D1}", ImageSpec("api", digest=D1), id="digest"),
        pytest.param(f"api:1.0@{D1}", ImageSpec("api", tag="1.0", digest=D1), id="tag-and-digest"),
        pytest.param("host:5000/app:1.0", ImageSpec("host:5000/app", tag="1.0"), id="registry-port"),
        pytest.param("host:5000/app", ImageSpec("host:5000/app"), id="registry-port-no-tag"),
        pytest.param("api=reg.io/team/api", ImageSpec("api", new_name="reg.io/team/api"), id="new-name"),
        pytest.param(
            f"api=reg.io:443/api:v2@{D2}",
            ImageSpec("api", "reg.io:443/api", "v2", D2),
            id="new-name-tag-digest",
        ),
        pytest.param("a/b/c:_x-1.2", ImageSpec("a/b/c", tag="_x-1.2"), id="underscore-tag"),
    ],
)
def test_parse_image_spec(spec: str, expected: ImageSpec):
    assert parse_image_spec(spec) == expected
    assert str(expected) == spec


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param("", ("invalid-spec", ""), id="empty"),
        pytest.param(":1.0", ("invalid-spec", ""), id="no-name"),
        pytest.param("api:", ("invalid-tag", "tag"), id="empty-tag"),
        pytest.param("api:.1", ("invalid-tag", "tag"), id="tag-leading-dot"),
        pytest.param("api:1 0", ("invalid-tag", "tag"), id="tag-space"),
        pytest.param("api@", ("invalid-digest", "digest"), id="empty-digest"),
        pytest.param("api@sha256:XYZ", ("invalid-digest", "digest"), id="bad-digest"),
        pytest.param("api@sha256:" + "A" * 64, ("invalid-digest", "digest"), id="uppercase-digest"),
        pytest.param("api=", ("invalid-spec", ""), id="empty-new-name"),
        pytest.param("a pi:1", ("invalid-name", "image name"), id="space-in-name"),
        pytest.param("api=reg/a b", ("invalid-name", "new name"), id="space-in-new-name"),
    ],
)
def test_parse_image_spec_rejects(spec: str, expected: tuple[str, str]):
    with pytest.raises(ConfigError) as info:
        parse_image_spec(spec)
    assert (info.value.reason, info.value.field) == expected


# --- finding the file ----------------------------------------------------------------------


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in KUSTOMIZATION_FILES])
def test_find_kustomization(tmp_path: Path, name: str):
    (tmp_path / name).write_text("resources: []\n")
    (tmp_path / "deployment.yaml").write_text("kind: Deployment\n")
    assert find_kustomization(tmp_path) == tmp_path / name


def test_find_kustomization_none(tmp_path: Path):
    with pytest.raises(KustomizationError) as info:
        find_kustomization(tmp_path)
    assert info.value.reason == "no-kustomization"


def test_find_kustomization_several(tmp_path: Path):
    (tmp_path / "kustomization.yaml").write_text("")
    (tmp_path / "kustomization.yml").write_text("")
    with pytest.raises(KustomizationError) as info:
        find_kustomization(tmp_path)
    assert info.value.reason == "multiple-kustomizations"


def test_find_kustomization_not_a_directory(tmp_path: Path):
    with pytest.raises(KustomizationError) as info:
        find_kustomization(tmp_path / "missing")
    assert info.value.reason == "not-a-directory"


def test_golden_folders_are_renderable_copies(tmp_path: Path):
    # Rendering a copy proves case folders are self-contained (no reference outside the folder).
    shutil.copytree(EDIT / "crlf-line-endings" / "expected", tmp_path / "o")
    (deployment,) = _render(tmp_path / "o")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "api:1.4.2"


def test_removing_the_dash_line_key_keeps_comments_before_the_next_key():
    text = f"images:\n-   digest: {D1}  # pinned\n    # owned by team-a\n    name: api\n"
    assert set_image(text, "api", tag="1.0.0") == (
        "images:\n    # owned by team-a\n-   name: api\n    newTag: 1.0.0\n"
    )


def test_add_refuses_after_document_end_marker():
    with pytest.raises(KustomizationError) as info:
        set_image("resources: []\n...\n", "api", tag="1", add=True)
    assert info.value.reason == "document-end-marker"


# --- issue 12: verification both ways, kustomize's '*', name-only matching, unknown tags, linear ----------


@pytest.fixture(params=["entry-lines", "whole-file"])
def verification(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with both ways an edit is proven: the changed entry's lines, or every event of the file."""
    if request.param == "whole-file":
        monkeypatch.setattr(kustomize.edit, "can_verify_window", lambda doc: False)
    return request.param


@pytest.mark.parametrize("case", [pytest.param(c, id=c) for c in CASES])
def test_golden_edit_is_byte_exact_whichever_way_it_is_verified(case: str, verification: str):
    meta, original, expected = _case(case)
    assert _apply(meta, original).encode("utf-8") == expected


@pytest.mark.parametrize(
    ("corrupt", "text", "kwargs"),
    [
        pytest.param(
            lambda t: t.replace("newTag: 2.0.0", "newTag: 2.0.1"), BASE, {"tag": "2.0.0"}, id="wrong-value"
        ),
        pytest.param(
            lambda t: t.replace("\n  newTag: 2.0.0", "\n  newTag: 2.0.0\n  x: y"),
            BASE,
            {"tag": "2.0.0"},
            id="extra-key",
        ),
        pytest.param(
            lambda t: t.replace("other: 1", "other: 2"),
            BASE + "other: 1\n",
            {"tag": "2.0.0"},
            id="change-outside-the-entry",
        ),
        pytest.param(
            lambda t: t.replace("- name: web", "  name: web"),
            BASE + "- name: web\n",
            {"tag": "2.0.0"},
            id="next-entry-swallowed",
        ),
        pytest.param(
            lambda t: t.replace("name: web", "name: wex"),
            BASE,
            {"name": "web", "tag": "3.0.0", "add": True},
            id="added-entry-changed",
        ),
        pytest.param(
            lambda t: t.replace("images:\n", "images:\n- x\n"),
            BASE,
            {"name": "web", "tag": "3.0.0", "add": True},
            id="added-before-the-entries",
        ),
    ],
)
def test_a_wrong_splice_is_caught_whichever_way_it_is_verified(
    monkeypatch, verification, corrupt, text, kwargs
):
    """The proof is real: a splice that changes more, or other, than meant raises instead of returning it."""
    apply = kustomize.splice.Splicer.apply
    monkeypatch.setattr(kustomize.splice.Splicer, "apply", lambda self: corrupt(apply(self)))
    kwargs = dict(kwargs)
    name = kwargs.pop("name", "api")
    with pytest.raises(KustomizationError) as info:
        set_image(text, name, **kwargs)
    assert info.value.reason == "edit-mismatch"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param(
            {"new_name": "*", "tag": "2"},
            "images:\n- name: api\n  newName: reg/api\n  newTag: '2'\n",
            id="keep-new-name",
        ),
        pytest.param(
            {"new_name": "reg/new", "tag": "*"},
            "images:\n- name: api\n  newName: reg/new\n  newTag: '1'\n",
            id="keep-tag-drop-digest",
        ),
        pytest.param(
            {"tag": "2", "digest": "*"},
            f"images:\n- name: api\n  newName: reg/api\n  newTag: '2'\n  digest: {D1}\n",
            id="keep-digest",
        ),
        pytest.param({"new_name": "*", "tag": "*", "digest": "*"}, None, id="keep-all-is-no-change"),
    ],
)
def test_star_keeps_what_the_file_has(kwargs: dict, expected: str | None):
    text = f"images:\n- name: api\n  newName: reg/api\n  newTag: '1'\n  digest: {D1}\n"
    result = set_image(text, "api", **kwargs)
    assert result is text if expected is None else result == expected


def test_star_with_add_writes_only_what_is_given():
    """kustomize replaces a '*' with nothing for a new entry (setimage.go ``replaceNewName(v, "")``)."""
    assert (
        set_image("images: []\n", "api", new_name="*", tag="1.2", add=True)
        == 'images: [{name: api, newTag: "1.2"}]\n'
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param("api=*:v1", ImageSpec("api", "*", "v1"), id="keep-new-name"),
        pytest.param("api=reg/api:*", ImageSpec("api", "reg/api", "*"), id="keep-tag"),
        pytest.param("api=reg/api@*", ImageSpec("api", "reg/api", None, "*"), id="keep-digest"),
        pytest.param(f"api:*@{D1}", ImageSpec("api", tag="*", digest=D1), id="keep-tag-set-digest"),
        pytest.param("api=*:*", ImageSpec("api", "*", "*"), id="keep-both"),
    ],
)
def test_parse_image_spec_takes_kustomizes_star(spec: str, expected: ImageSpec):
    assert parse_image_spec(spec) == expected
    assert str(expected) == spec


def test_match_by_name_only_or_also_by_new_name():
    text = "images:\n- name: foo\n  newName: bar\n  newTag: '1'\n"
    assert get_image(text, "bar").name == "foo"  # the pipeline: name, else newName
    assert get_image(text, "bar", by_new_name=False) is None  # kustomize: name only
    assert (
        set_image(text, "bar", tag="2", add=True, by_new_name=False) == text + '- name: bar\n  newTag: "2"\n'
    )
    assert set_image(text, "bar", tag="2", add=True) == text.replace("'1'", "'2'")


@pytest.mark.parametrize(
    "value", ["!Ref foo", "!!python/name:os.system ''", "!!binaryish x", "!custom {a: 1}"]
)
def test_an_unknown_tag_is_refused_by_an_edit_in_one_line(value: str):
    text = f"images:\n- name: api\n  newTag: '1'\nextra: {value}\n"
    assert get_image(text, "api").newTag == "1"  # reading ignores it, as kustomize does
    with pytest.raises(KustomizationError) as info:
        set_image(text, "api", tag="2")
    assert info.value.reason == "unknown-tag"
    assert "line 4, column 8" in str(info.value)  # where to fix it
    assert "\n" not in str(info.value)


def test_known_tags_are_fine():
    text = "images:\n- name: !!str api\n  newTag: !!str 1\nreplicas: !!int 3\n"
    assert set_image(text, "api", tag="2") == text.replace("!!str 1", '"2"')


def test_an_edit_parses_the_file_once_and_rereads_only_the_entry(monkeypatch):
    """Linear in the file (issue 12): one libyaml pass over it, then the changed entry's lines (plus
    libyaml's C-only count of the result's events); the timings are in bench/hostile.py."""
    text = "images:\n" + "".join(f"- name: app{i}\n  newTag: '1.0'\n" for i in range(5000))
    sizes = _spy_parses(monkeypatch)
    result = set_image(text, "app2500", tag="2.0")
    assert result == text.replace("app2500\n  newTag: '1.0'", "app2500\n  newTag: '2.0'")
    assert sizes[0] == len(text) and len(sizes) == 2 and sizes[1] < 100, sizes
    sizes.clear()
    set_image(text, "new", tag="2.0", add=True)
    assert sizes[0] == len(text) and len(sizes) == 2 and sizes[1] < 100, sizes


def test_a_flow_sequence_is_verified_over_the_whole_file(monkeypatch):
    text = "images: [{name: api, newTag: '1'}, {name: web, newTag: '1'}]\n"
    sizes = _spy_parses(monkeypatch)
    assert set_image(text, "web", tag="2") == text.replace("web, newTag: '1'", "web, newTag: '2'")
    assert sizes == [len(text), len(text)]


@pytest.mark.parametrize("style", ["|", ">", "|-"])
def test_a_key_is_inserted_after_a_block_scalar_not_inside_it(style: str, verification: str):
    text = f"images:\n- name: api\n  note: {style}\n    two\n    lines\n- name: web\n"
    assert set_image(text, "api", tag="2") == text.replace("    lines\n", '    lines\n  newTag: "2"\n')


def test_an_entry_that_takes_a_value_from_an_alias_is_refused_clearly():
    text = "tag: &t 1.0\nimages:\n- name: api\n  newTag: *t\n"
    assert get_image(text, "api").newTag == "1.0"
    # the message says where, and which alias
    with pytest.raises(KustomizationError, match=r"at line 3, column 3 .*\*t") as info:
        set_image(text, "api", new_name="reg/api")
    assert (info.value.reason, info.value.field) == ("aliased-value", "newTag")


def _random_kustomization(rng) -> tuple[str, list[str]]:
    """A kustomization in one of many layouts people write: CRLF, comments, indentation, quoting,
    key orders, flow entries, block scalars, blank lines, a trailing newline or not."""
    eol = rng.choice(["\n", "\r\n"])
    indent = rng.choice([0, 2])
    lines = ["# header"] * (rng.random() < 0.3) + ["---"] * (rng.random() < 0.2)
    lines += ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization"]
    if rng.random() < 0.5:
        lines += ["resources:", " " * indent + "- deployment.yaml"]
    lines.append("images:" + " # the images" * (rng.random() < 0.2))
    names = rng.sample(["api", "web", "worker", "reg.io/x/api", "db"], rng.randint(1, 4))
    for name in names:
        if rng.random() < 0.2:
            lines.append(" " * indent + f"- {{name: {name}, newTag: '1.0'}}")
            continue
        keys = [("name", name)]
        if rng.random() < 0.5:
            keys.append(("newName", rng.choice([f"reg.io/a/{name}", "'reg.io/b'"])))
        if rng.random() < 0.7:
            keys.append(("newTag", rng.choice(["1.0", "'1.1'", '"2"', "v3", "1.10", ""])))
        if rng.random() < 0.4:
            keys.append(("digest", D1))
        dash = " " * indent + "-" + " " * rng.choice([1, 3])
        if rng.random() < 0.15:
            keys.append(("note", "|" + eol + " " * (len(dash) + 2) + "text"))
        rng.shuffle(keys)
        for i, (key, value) in enumerate(keys):
            lines.append(
                (dash if i == 0 else " " * len(dash))
                + f"{key}: {value}".rstrip()
                + "  # c" * (rng.random() < 0.15 and not value.startswith("|"))
            )
            if rng.random() < 0.1:
                lines.append(" " * len(dash) + "# inner comment")
        lines += [""] * (rng.random() < 0.2)
    lines += ["namePrefix: p-"] * (rng.random() < 0.4) + ["# trailer"] * (rng.random() < 0.2)
    return eol.join(lines) + eol * (rng.random() < 0.9), names


def _meant(data: dict, name: str, new_name, tag, digest) -> dict:
    """What the edit must mean, computed on plain data (kustomize's rules, '*' keeps)."""
    images = data.setdefault("images", None) or []
    data["images"] = images
    entry = next((e for e in images if e.get("name") == name), None)
    if entry is None:
        images.append(entry := {"name": name})
    if new_name not in (None, "*"):
        entry["newName"] = new_name
    if tag is not None:
        if tag != "*":
            entry["newTag"] = tag
        if digest is None:
            entry.pop("digest", None)
    if digest is not None:
        if digest != "*":
            entry["digest"] = digest
        if tag is None:
            entry.pop("newTag", None)
    return data


def test_random_layouts_edit_as_meant_whichever_way_it_is_verified(monkeypatch):
    """300 seeded layouts x edits: the same bytes with either verification, meaning what was meant as an
    independent reader (ruamel's YAML 1.2 loader, the previous verifier) reads it."""
    import random

    from ruamel.yaml import YAML

    def load(text: str):
        return YAML(typ="safe", pure=True).load(text) or {}

    window_ready = kustomize.verify.can_verify_window
    rng = random.Random(12)
    proven_by_lines = 0
    for _ in range(300):
        text, names = _random_kustomization(rng)
        name = rng.choice([*names, "newone"])
        kwargs = {
            "new_name": rng.choice([None, None, "*", "reg.io/new/x"]),
            "tag": rng.choice([None, "2.0", "*", "yes", "1.10"]),
            "digest": rng.choice([None, None, D2, "*"]),
        }
        if all(v is None for v in kwargs.values()):
            kwargs["tag"] = "3.0"
        if name not in names and all(v in (None, "*") for v in kwargs.values()):
            with pytest.raises(ConfigError) as info:  # a new entry that would set nothing
                set_image(text, name, add=True, by_new_name=False, **kwargs)
            assert info.value.reason == "nothing-to-set"
            continue
        results = []
        for ready in (window_ready, lambda doc: False):
            monkeypatch.setattr(kustomize.edit, "can_verify_window", ready)
            results.append(set_image(text, name, add=True, by_new_name=False, **kwargs))
        assert results[0] == results[1], (text, name, kwargs)
        assert load(results[0]) == _meant(load(text), name, **kwargs), (text, name, kwargs, results[0])
        monkeypatch.setattr(kustomize.edit, "can_verify_window", window_ready)
        doc = kustomize.reader.parse_document(text, "k", record=True)
        proven_by_lines += window_ready(doc) and results[0] != text
    assert proven_by_lines > 150  # most edits are proven on the entry's own lines

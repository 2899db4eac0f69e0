"""Issue 34: the values-file writer on a zoo of chart shapes, and every peer's bug it must not have.

Fixtures: tests/testdata/values (written for these tests in real charts' shapes). For each: one
image updated, only the expected bytes changed, the parsed documents equal except those fields.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from steps.domain.errors import ImageNotFoundError
from steps.kustomize.values import ValuesError, edit_values, find_pushed, hold_reason, normalise, values_entry

ZOO = Path(__file__).resolve().parents[2] / "testdata" / "values"
ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64


def read(name: str) -> str:
    return (ZOO / name).read_bytes().decode("utf-8")


def changed_lines(before: str, after: str) -> dict[int, str]:
    """Line number (1-based) → new line, for a same-length edit."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    assert len(a) == len(b), "lines were added or removed"
    return {i + 1: y for i, (x, y) in enumerate(zip(a, b)) if x != y}


def load_all(text: str) -> list:
    return list(yaml.safe_load_all(text))


def set_path(docs: list, path: tuple, value) -> None:
    node = docs
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def assert_only(before: str, after: str, fields: dict[tuple, object]) -> None:
    """The parsed documents are equal except ``fields`` (path from the document index → value)."""
    want = copy.deepcopy(load_all(before))
    for path, value in fields.items():
        set_path(want, path, value)
    assert load_all(after) == want


# --- the zoo: one image updated, only the expected bytes -----------------------------------------

ZOO_CASES = [
    # (fixture, pushed repository, tag, digest, {line: new line}, {parsed path: value})
    (
        "bitnami.yaml",
        f"{ECR}/team/redis",
        "8.2.2-debian-12-r0",
        D1,
        {16: "  tag: 8.2.2-debian-12-r0\n", 17: f'  digest: "{D1}"\n'},
        {(0, "image", "tag"): "8.2.2-debian-12-r0", (0, "image", "digest"): D1},
    ),
    (
        "ingress-nginx.yaml",
        f"{ECR}/ingress-nginx/controller",
        "v1.15.2",
        D1,
        {16: '    tag: "v1.15.2"\n', 17: f"    digest: {D1}\n"},
        {(0, "controller", "image", "tag"): "v1.15.2", (0, "controller", "image", "digest"): D1},
    ),
    (
        "argo.yaml",
        f"{ECR}/argoproj/argocd",
        "v3.1.0",
        None,
        {6: '    tag: "v3.1.0"\n'},
        {(0, "global", "image", "tag"): "v3.1.0"},
    ),
    (
        "argo.yaml",
        f"{ECR}/oliver006/redis_exporter",
        "v1.76.0",
        None,
        {24: "    tag: v1.76.0\n"},
        {(0, "redis-ha", "exporter", "tag"): "v1.76.0"},
    ),
    (
        "prometheus.yaml",
        f"{ECR}/thanos/thanos",
        "v0.43.0",
        D2,
        {
            11: "    tag: v0.43.0\n",
            12: f'    sha: "{"2" * 64}"\n',
            19: "      tag: v0.43.0\n",
            20: f'      sha: "{"2" * 64}"\n',
        },
        {
            (0, "prometheusOperator", "thanosImage", "tag"): "v0.43.0",
            (0, "prometheusOperator", "thanosImage", "sha"): "2" * 64,
            (0, "thanosRuler", "thanosRulerSpec", "image", "tag"): "v0.43.0",
            (0, "thanosRuler", "thanosRulerSpec", "image", "sha"): "2" * 64,
        },
    ),
    (
        "grafana.yaml",
        f"{ECR}/grafana/grafana",
        "12.1.0",
        None,
        {11: '  tag: "12.1.0"\n'},
        {(0, "image", "tag"): "12.1.0"},
    ),
    (
        "openfaas.yaml",
        "nats",  # Docker Hub's short name: docker.io/library/nats
        "2.10.10",
        None,
        {13: "  image: nats:2.10.10\n"},
        {(0, "nats", "image"): "nats:2.10.10"},
    ),
    (
        "datadog.yaml",
        f"{ECR}/datadoghq/agent",
        "7.82.0",
        None,
        {9: "    tag: 7.82.0\n"},
        {(0, "agents", "image", "tag"): "7.82.0"},
    ),
    (
        "toplevel-list.yaml",
        f"{ECR}/library/alpine",
        "3.15",
        None,
        {3: '  tag: "3.15"\n'},
        {(0, 0, "tag"): "3.15"},
    ),
    (
        "containers.yaml",
        f"{ECR}/tools/envoy",
        "v1.31",
        None,
        {12: f'        image: "{ECR}/tools/envoy:v1.31"\n'},
        {(0, "components", "cart", "sidecars", 0, "image"): f"{ECR}/tools/envoy:v1.31"},
    ),
    (
        "multi-doc.yaml",
        f"{ECR}/team/api",
        "1.4.3",
        None,
        {10: "    tag: 1.4.3 # kargo drops this comment\n"},
        {(1, "app", "image", "tag"): "1.4.3"},
    ),
    (
        "values.yaml.gotmpl",
        f"{ECR}/apache/superset",
        "2.0",
        None,
        {7: '          tag: "2.0"\n'},
        None,  # a Go template: PyYAML cannot read it, the writer's own re-read proves it
    ),
    (
        "helmfile/overrides/api/values.prod.yaml",
        f"{ECR}/team/api",
        "1.4.3",
        None,
        {2: "  tag: 1.4.3\n"},
        {(0, "image", "tag"): "1.4.3"},
    ),
]


@pytest.mark.parametrize(
    ("fixture", "repository", "tag", "digest", "lines", "fields"),
    ZOO_CASES,
    ids=[f"{c[0]}:{c[1].rsplit('/', 1)[-1]}" for c in ZOO_CASES],
)
def test_zoo_one_image_updated_only_its_bytes(fixture, repository, tag, digest, lines, fields) -> None:
    before = read(fixture)
    edit = edit_values(before, repository, tag=tag, digest=digest, source=fixture)
    assert edit.changed
    assert changed_lines(before, edit.text) == lines
    if fields is not None:
        assert_only(before, edit.text, fields)
    again = edit_values(edit.text, repository, tag=tag, digest=digest, source=fixture)
    assert not again.changed and again.text is edit.text  # idempotent: nothing left to change


def test_zoo_several_matches_all_updated_and_each_reported() -> None:
    before = read("bitnami.yaml")
    edit = edit_values(before, "docker.io/bitnami/os-shell", tag="12-debian-12-r52", digest=None)
    assert edit.edited == ["sysctl.image.tag", "volumePermissions.image.tag"]
    assert [f.where for f in edit.found] == ["volumePermissions.image", "sysctl.image"]
    assert_only(
        before,
        edit.text,
        {
            (0, "volumePermissions", "image", "tag"): "12-debian-12-r52",
            (0, "sysctl", "image", "tag"): "12-debian-12-r52",
        },
    )


def test_zoo_string_images_in_list_items_at_any_depth() -> None:
    before = read("containers.yaml")
    edit = edit_values(before, f"{ECR}/tools/busybox", tag="1.37", digest=None)
    assert edit.edited == [
        "components.accounting.initContainers[0].image",
        "components.cart.extraContainers[0].image",
    ]
    assert set(changed_lines(before, edit.text)) == {6, 15}


def test_zoo_a_repository_without_tag_key_gets_one() -> None:
    """cert-manager has no tag key (the chart defaults to appVersion): the tag is added under the repository."""
    before = read("cert-manager.yaml")
    edit = edit_values(before, f"{ECR}/jetstack/cert-manager-controller", tag="v1.19.7", digest=None)
    lines = edit.text.splitlines()
    at = lines.index(f"  repository: {ECR}/jetstack/cert-manager-controller")
    assert lines[at + 1] == "  tag: v1.19.7"
    assert edit.text.replace("\n  tag: v1.19.7", "", 1) == before
    assert yaml.safe_load(edit.text)["image"]["tag"] == "v1.19.7"


def test_zoo_anchor_edited_once_and_sharing_keys_reported() -> None:
    before = read("anchors.yaml")
    edit = edit_values(before, f"{ECR}/grafana/enterprise-logs", tag="v1.5.3", digest=None)
    assert changed_lines(before, edit.text) == {5: "  tag: v1.5.3\n"}
    assert any("loki-distributed.loki.image" in note for note in edit.notes)
    docs = yaml.safe_load(edit.text)
    assert docs["loki-distributed"]["loki"]["image"]["tag"] == "v1.5.3"

    edit = edit_values(before, f"{ECR}/team/api", tag="1.4.3", digest=None)
    assert changed_lines(before, edit.text) == {14: "  api: &apiTag 1.4.3\n"}
    assert any("versions.api" in note for note in edit.notes)


def test_zoo_crlf_kept() -> None:
    before = read("bitnami.yaml").replace("\n", "\r\n")
    edit = edit_values(before, f"{ECR}/team/redis", tag="8.2.2", digest=None)
    assert changed_lines(before, edit.text) == {16: "  tag: 8.2.2\r\n"}
    assert "\n" not in edit.text.replace("\r\n", "")


def test_zoo_value_keys_name_a_chart_of_no_known_shape() -> None:
    before = read("elastic.yaml")
    with pytest.raises(ImageNotFoundError):
        edit_values(before, f"{ECR}/elasticsearch/elasticsearch", tag="8.6.0", digest=None)
    keys = {"repository": "image", "tag": "imageTag"}
    edit = edit_values(before, f"{ECR}/elasticsearch/elasticsearch", tag="8.6.0", digest=None, keys=keys)
    assert changed_lines(before, edit.text) == {2: 'imageTag: "8.6.0"\n'}


def test_value_keys_naming_another_repository_is_a_pin() -> None:
    keys = {"repository": "image", "tag": "imageTag"}
    _, _, matches = find_pushed(read("elastic.yaml"), f"{ECR}/team/api", keys=keys)
    entry = values_entry(matches, f"{ECR}/team/api", "elastic.yaml")
    assert entry is not None and entry.newName == f"{ECR}/elasticsearch/elasticsearch"


@pytest.mark.parametrize("tag", ["1.20", "1e3", "yes", "null", "0x1F", "010", "~", "true", "1_000"])
def test_a_tag_yaml_would_read_as_something_else_is_quoted(tag: str) -> None:
    before = f"image:\n  repository: {ECR}/team/api\n  tag: 1.0.0\n"
    edit = edit_values(before, f"{ECR}/team/api", tag=tag, digest=None)
    assert yaml.safe_load(edit.text)["image"]["tag"] == tag
    assert edit.text == before.replace("tag: 1.0.0", f'tag: "{tag}"')


def test_normalised_names_match_as_the_runtime_reads_them() -> None:
    assert (
        normalise("nginx")
        == normalise("docker.io/library/nginx")
        == normalise("index.docker.io/library/nginx")
    )
    assert normalise("bitnami/redis") == "docker.io/bitnami/redis"
    assert normalise("localhost:5005/app") == "localhost:5005/app"
    assert normalise("ghcr.io/org/app") != normalise("org/app")


def test_ambiguous_same_repository_under_two_tags_is_reported_not_guessed() -> None:
    before = f"a:\n  image: {ECR}/team/api:1.0\nb:\n  image: {ECR}/team/api:2.0\n"
    with pytest.raises(ValuesError) as caught:
        edit_values(before, f"{ECR}/team/api", tag="3.0", digest=None)
    assert caught.value.reason == "ambiguous-entry"
    assert "a.image" in str(caught.value) and "b.image" in str(caught.value)  # the fields to choose from


def test_a_digest_only_push_writes_the_digest_field() -> None:
    before = f"image:\n  repository: {ECR}/team/api\n  tag: 1.0\n  digest: ''\n"
    edit = edit_values(before, f"{ECR}/team/api", tag=None, digest=D1)
    assert edit.text == before.replace("digest: ''", f"digest: '{D1}'")


def test_a_tag_only_push_clears_a_stale_digest() -> None:
    """A digest left next to a new tag would keep pulling the old image."""
    before = f"image:\n  repository: {ECR}/team/api\n  tag: 1.0\n  digest: {D1}\n"
    edit = edit_values(before, f"{ECR}/team/api", tag="1.1", digest=None)
    assert yaml.safe_load(edit.text)["image"] == {"repository": f"{ECR}/team/api", "tag": "1.1", "digest": ""}


def test_hold_marker_on_any_line_of_the_images_mapping() -> None:
    base = f"image:\n  repository: {ECR}/team/api\n  tag: 1.0\nother: x  # imagebump:hold not mine\n"
    _, _, matches = find_pushed(base, f"{ECR}/team/api")
    assert hold_reason(base, matches) is None
    for line in range(3):
        lines = base.splitlines(keepends=True)
        lines[line] = lines[line].rstrip("\n") + "  # imagebump:hold waiting for QA\n"
        text = "".join(lines)
        _, _, matches = find_pushed(text, f"{ECR}/team/api")
        assert hold_reason(text, matches) == "waiting for QA"
    above = f"# imagebump:hold pinned for the audit\nimage:\n  repository: {ECR}/team/api\n  tag: 1.0\n"
    _, _, matches = find_pushed(above, f"{ECR}/team/api")
    assert hold_reason(above, matches) == "pinned for the audit"
    quoted = f"image:\n  repository: {ECR}/team/api\n  tag: '1.0 # imagebump:hold'\n"
    _, _, matches = find_pushed(quoted, f"{ECR}/team/api")
    assert hold_reason(quoted, matches) is None


# --- refusals: nothing written ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "repository", "reason"),
    [
        ("sops.yaml", f"{ECR}/team/api", "encrypted"),
        ("values.yaml.gotmpl", f"{ECR}/miniflux/miniflux", "template"),
        ("block-scalar.yaml", f"{ECR}/team/api", "block-scalar"),
    ],
)
def test_refused_with_a_clear_error(fixture: str, repository: str, reason: str) -> None:
    with pytest.raises(ValuesError) as caught:
        edit_values(read(fixture), repository, tag="9.9.9", digest=None, source=fixture)
    assert caught.value.reason == reason


def test_a_tag_written_as_a_block_scalar_is_refused() -> None:
    before = f"image:\n  repository: {ECR}/team/api\n  tag: |\n    1.0\n"
    with pytest.raises(ValuesError) as caught:
        edit_values(before, f"{ECR}/team/api", tag="1.1", digest=None)
    assert caught.value.reason == "block-scalar"


def test_an_image_line_next_to_a_template_action_is_refused() -> None:
    before = f"{{{{- if .Values.api }}}}\nimage:\n  repository: {ECR}/team/api\n  tag: 1.0\n{{{{- end }}}}\n"
    with pytest.raises(ValuesError) as caught:
        edit_values(before, f"{ECR}/team/api", tag="1.1", digest=None)
    assert caught.value.reason == "template"
    far = "{{- if .Values.x }}\nx: 1\n{{- end }}\n\n" + f"image:\n  repository: {ECR}/team/api\n  tag: 1.0\n"
    edit = edit_values(far, f"{ECR}/team/api", tag="1.0.1", digest=None)
    assert edit.text == far.replace("tag: 1.0", "tag: 1.0.1")


# --- the peers' bugs, one test each (docs/helm-values.md lists them) -------------------------------


def test_argocd_image_updater_884_first_write_keeps_the_file() -> None:
    """argocd-image-updater #884: the first write-back corrupted the values file (re-serialised it)."""
    before = read("ingress-nginx.yaml")
    edit = edit_values(before, f"{ECR}/ingress-nginx/controller", tag="v1.15.2", digest=None)
    assert set(changed_lines(before, edit.text)) == {16, 17}  # the tag, and the stale digest cleared
    assert "## use *either* current default registry/image" in edit.text


def test_argocd_image_updater_1584_other_images_tags_kept() -> None:
    """#1584: updating one image blanked the other images' tags in a shared values file."""
    before = read("bitnami.yaml")
    edit = edit_values(before, f"{ECR}/team/redis", tag="8.2.2", digest=None)
    after = yaml.safe_load(edit.text)
    assert after["sentinel"]["image"]["tag"] == "8.2.1-debian-12-r0"
    assert after["sysctl"]["image"]["tag"] == "12-debian-12-r51"


def test_argocd_image_updater_543_974_registry_never_repeated_into_repository() -> None:
    """#543 / #974: a chart with a separate registry ended up with ghcr.io/ghcr.io/…."""
    before = read("bitnami.yaml")
    edit = edit_values(before, f"{ECR}/team/redis", tag="8.2.2", digest=None)
    image = yaml.safe_load(edit.text)["image"]
    assert image["registry"] == ECR and image["repository"] == "team/redis"
    assert f"{ECR}/{ECR}" not in edit.text


def test_argocd_image_updater_603_no_formatting_churn() -> None:
    """#603: formatting churn (indentation, quoting, flow style, comments rewritten)."""
    before = (
        "# comment\n\nimage:\n    repository: '" + ECR + "/team/api'   # single-quoted\n    tag: '1.0'\n"
        "flow: {a: 1, b: [x, y]}\nlong: " + "x" * 200 + "\n"
    )
    edit = edit_values(before, f"{ECR}/team/api", tag="1.1", digest=None)
    assert edit.text == before.replace("tag: '1.0'", "tag: '1.1'")


def test_argocd_image_updater_821_only_the_rules_values_file() -> None:
    """#821: an Application with two charts got the wrong values updated. The rule names the file;
    a file that does not hold the pushed image is never written."""
    with pytest.raises(ImageNotFoundError):
        edit_values(read("grafana.yaml"), f"{ECR}/team/redis", tag="8.2.2", digest=None)


def test_argocd_image_updater_243_several_targets_each_updated() -> None:
    """#243: several write-back targets; every image of the pushed repository is updated and reported."""
    before = read("openfaas.yaml")
    edit = edit_values(before, f"{ECR}/openfaasltd/faas-netes", tag="0.5.15", digest=None)
    assert edit.edited == ["faasnetesPro.image", "operator.image"]
    assert set(changed_lines(before, edit.text)) == {6, 10}


def test_flux_5307_block_scalar_not_silently_skipped() -> None:
    """flux2 #5307: setter markers inside block scalars were skipped silently; imagebump refuses, loudly."""
    with pytest.raises(ValuesError) as caught:
        edit_values(read("block-scalar.yaml"), f"{ECR}/team/api", tag="1.4.3", digest=None)
    assert caught.value.reason == "block-scalar"


def test_flux_566_go_templated_yaml_not_corrupted() -> None:
    """image-automation-controller #566: Go-templated YAML corrupted. Plain lines are edited, the
    template bytes stay; an image line in a template is refused."""
    before = read("values.yaml.gotmpl")
    edit = edit_values(before, f"{ECR}/apache/superset", tag="2.0", digest=None)
    assert edit.text == before.replace("tag: dockerize", 'tag: "2.0"')
    with pytest.raises(ValuesError):
        edit_values(before, f"{ECR}/miniflux/miniflux", tag="2.3.3", digest=None)


def test_flux_624_top_level_list_updated() -> None:
    """image-automation-controller #624: a file with a top-level list was not updated."""
    before = read("toplevel-list.yaml")
    edit = edit_values(before, f"{ECR}/library/alpine", tag="3.21", digest=None)
    assert yaml.safe_load(edit.text)[0]["tag"] == "3.21"


def test_flux_960_tag_at_digest_setter() -> None:
    """image-automation-controller #960: no tag@digest setter."""
    before = f"image:\n  repository: {ECR}/team/api\n  tag: 1.0@{D1}  # pinned by digest\n"
    edit = edit_values(before, f"{ECR}/team/api", tag="1.1", digest=D2)
    assert edit.text == before.replace(f"1.0@{D1}", f"1.1@{D2}")
    string = f"image: {ECR}/team/api:1.0@{D1}\n"
    assert (
        edit_values(string, f"{ECR}/team/api", tag="1.1", digest=D2).text
        == f"image: {ECR}/team/api:1.1@{D2}\n"
    )


def test_kargo_trailing_comment_and_multi_document() -> None:
    """Kargo's yaml-update drops a trailing comment on the rewritten line and sees only the first document."""
    before = read("multi-doc.yaml")
    edit = edit_values(before, f"{ECR}/team/api", tag="1.4.3", digest=None)
    assert "tag: 1.4.3 # kargo drops this comment\n" in edit.text
    assert edit.text.endswith("---\nthird: document\n")


def test_renovate_26719_separate_digest_key_updated() -> None:
    """renovate #26719: a separate digest: key was not updated."""
    before = read("ingress-nginx.yaml")
    edit = edit_values(before, f"{ECR}/ingress-nginx/controller", tag="v1.15.2", digest=D2)
    image = yaml.safe_load(edit.text)["controller"]["image"]
    assert image["digest"] == D2 and image["tag"] == "v1.15.2"
    assert image["digestChroot"].startswith("sha256:e7a3")  # another image's digest: untouched

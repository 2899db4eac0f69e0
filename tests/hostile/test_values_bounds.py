"""Values files and helmfiles whose author wants to exhaust edit-kustomize's memory or time.

Under the 4 MiB byte limit a file can still be a million empty documents or two million
one-character nodes (1.3 GiB once read), a helmfile can hold 120,000 releases, and a values file
can hold the pushed image tens of thousands of times. Each is refused by a count, as it is read,
with a ValuesError naming the limit and the file; memory is measured with tracemalloc, never time.
"""

from __future__ import annotations

import tracemalloc

import pytest

from steps.domain.errors import ValuesError
from steps.kustomize.values import tree
from steps.kustomize.values.edit import edit_values
from steps.kustomize.values.helmfile import release_sources

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
HEAD = f"image:\n  repository: {IMAGE}\n  tag: '1.0'\n"


def _peak(fn, *args, **kwargs):
    tracemalloc.start()
    try:
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - returned for the caller to check
            result = exc
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("text", "limit", "reason"),
    [
        pytest.param(
            HEAD + "---\n" * 1_000_000, "1000 YAML documents", "too-many-documents", id="empty-documents"
        ),
        pytest.param(
            HEAD + "x: [" + ",".join(["1"] * 600_000) + "]\n",
            "500000 YAML nodes",
            "too-many-nodes",
            id="flow-items",
        ),
        pytest.param(
            HEAD + "y:\n" + "- 1\n" * 600_000, "500000 YAML nodes", "too-many-nodes", id="block-items"
        ),
    ],
)
def test_a_values_file_of_too_many_documents_or_nodes_is_refused_in_bounded_memory(
    text, limit, reason
) -> None:
    assert len(text.encode()) <= tree.MAX_VALUES_BYTES  # the byte limit lets each of them in

    error, peak = _peak(edit_values, text, IMAGE, tag="2.0", digest=None, source="apps/x/values.yaml")

    assert isinstance(error, ValuesError), error
    assert error.reason == reason
    assert str(error).startswith(f"apps/x/values.yaml: holds more than {limit}")
    assert peak < 400 << 20  # was 1.3 GiB (documents) — the pod's limit is 1 GiB


def test_the_source_is_named() -> None:
    with pytest.raises(ValuesError, match=r"^apps/x/values\.yaml: holds more than 1000 YAML documents"):
        tree.compose(HEAD + "---\n" * 1_001, "apps/x/values.yaml")


def test_a_file_at_the_limits_is_read() -> None:
    docs = tree.compose(HEAD + "---\n" * (tree.MAX_VALUES_DOCUMENTS - 1), "values.yaml")
    assert len(docs) == tree.MAX_VALUES_DOCUMENTS


def test_a_helmfile_of_too_many_releases_is_refused_in_bounded_memory() -> None:
    text = (
        "releases:\n"
        + "".join(f"- name: r{i}\n  values: [a.yaml]\n" for i in range(120_000))
        + "- name: api\n  values: [v.yaml]\n"
    )
    assert len(text.encode()) <= tree.MAX_VALUES_BYTES

    error, peak = _peak(release_sources, text, "helmfile.yaml", "api", "")

    assert isinstance(error, ValuesError), error
    assert error.reason == "too-many-nodes"
    assert str(error).startswith("helmfile.yaml: holds more than 500000 YAML nodes")
    assert peak < 400 << 20  # was 531 MiB


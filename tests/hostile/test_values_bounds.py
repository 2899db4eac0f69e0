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
from steps.kustomize.values.edit import MAX_VALUES_MATCHES, edit_values
from steps.kustomize.values.helmfile import release_sources
from steps.kustomize.yaml_nodes import line_start

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


# -- an image held in many places: refused above a bound, and linear below it ---------------------


def _entries(n: int, *, tag: bool = True) -> str:
    return "".join(f"i{i}:\n  repository: {IMAGE}\n" + ("  tag: '1.0'\n" if tag else "") for i in range(n))


def test_a_file_holding_the_image_in_too_many_places_is_refused() -> None:
    text = _entries(MAX_VALUES_MATCHES + 1)  # 32,000 of them (2.7 MiB) took 345 s

    with pytest.raises(
        ValuesError, match=rf"^apps/x/values\.yaml: holds the image {IMAGE} 1001 times"
    ) as info:
        edit_values(text, IMAGE, tag="2.0", digest=None, source="apps/x/values.yaml")
    assert info.value.reason == "too-many-matches"
    assert str(MAX_VALUES_MATCHES) in str(info.value)


@pytest.mark.parametrize("tag", [True, False], ids=["replaced", "inserted"])
def test_an_edit_of_many_places_reads_the_events_a_bounded_number_of_times(tag, monkeypatch) -> None:
    """The re-read located each inserted key by scanning every event (n² with a tag added to each)."""
    scans = [0]

    class Counted(list):
        def __iter__(self):
            scans[0] += 1
            return super().__iter__()

    compose = tree.compose

    def counted(text, source):
        docs = compose(text, source)
        docs.events = Counted(docs.events)
        return docs

    monkeypatch.setattr("steps.kustomize.values.edit.compose", counted)
    result = edit_values(_entries(MAX_VALUES_MATCHES, tag=tag), IMAGE, tag="2.0", digest=None)

    assert result.changed
    assert len(result.edited) == MAX_VALUES_MATCHES
    assert scans[0] <= 3  # a constant, not one per place


def test_finding_line_starts_scans_each_line_not_the_text_before_it() -> None:
    """``line_start`` looked back for each of five break characters over the whole text before the
    position (four are absent from most files): reading every line of a file was quadratic."""
    scanned = [0]

    class Spy(str):
        def rfind(self, sub, start=0, end=None):
            scanned[0] += (len(self) if end is None else end) - start
            return str.rfind(self, sub, start, end)

    lines = 20_000
    text = Spy("key: value\n" * lines)
    for n in range(lines):
        assert line_start(text, n * 11 + 5) == n * 11
    assert scanned[0] <= 5 * 256 * lines  # a window per call; was 5 × len(text) / 2 per call

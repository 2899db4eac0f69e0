"""Issue 34's promise as properties: a values-file edit changes only the tag's bytes, and the file
reads as before except that tag, whatever the layout around it (Hypothesis)."""

from __future__ import annotations

import io

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from steps.kustomize.values import ValuesError, edit_values, find_pushed
from steps.kustomize.values.tree import reread
from tests.steps.kustomize.go_yaml_v2 import helm_reads_as_text

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
REPO = f"{ECR}/team/api"

tags = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,24}", fullmatch=True)
words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
comments = st.one_of(st.just(""), st.text(alphabet="abc XYZ:#-_.", max_size=20).map(lambda t: "# " + t))
values = st.one_of(
    words, st.integers(0, 9999).map(str), st.just('"quoted # not a comment"'), st.just("[a, b]")
)


@st.composite
def documents(draw):
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    step = " " * draw(st.sampled_from([2, 4]))
    style = draw(st.sampled_from(["", "'", '"']))
    old = draw(tags)
    shape = draw(st.sampled_from(["mapping", "string"]))
    trailing = draw(comments)
    before = [
        f"{k}: {v}" for k, v in draw(st.lists(st.tuples(words, values), max_size=4, unique_by=lambda p: p[0]))
    ]
    after = [
        f"z{k}: {v}"
        for k, v in draw(st.lists(st.tuples(words, values), max_size=4, unique_by=lambda p: p[0]))
    ]
    before = [f"w{line}" for line in before]
    blank = draw(st.booleans())
    lines = [*before, *([""] if blank else []), "app:"]
    if shape == "mapping":
        lines += [f"{step}image:", f"{step * 2}repository: {REPO}"]
        prefix = f"{step * 2}tag: "
        token = f"{style}{old}{style}" if style else old
    else:
        prefix = f"{step}image: "
        token = f"{style}{REPO}:{old}{style}" if style else f"{REPO}:{old}"
    head = eol.join(lines) + eol + prefix
    tail = (f"  {trailing}" if trailing else "") + eol + eol.join([*after, ""])
    return head, token, tail, shape, old


@settings(max_examples=80, deadline=None)
@given(documents(), tags)
def test_only_the_tags_bytes_change(doc, new: str) -> None:
    head, token, tail, shape, old = doc
    text = head + token + tail
    try:
        yaml.safe_load(text)
    except yaml.YAMLError:
        return  # a generated layout YAML itself rejects: nothing to promise
    edit = edit_values(text, REPO, tag=new, digest=None)
    # the same tag, read as that text: nothing to write (a plain 1.10, which Helm reads as 1.1, is
    # written quoted: the checks below hold for it)
    if old == new and (shape != "mapping" or token[0] in "'\"" or helm_reads_as_text(token)):
        assert edit.text is text
        return
    assert edit.text.startswith(head) and edit.text.endswith(tail)
    written = edit.text[len(head) : len(edit.text) - len(tail)]
    read = yaml.safe_load(f"x: {written}")["x"]
    assert read == (new if shape == "mapping" else f"{REPO}:{new}")
    if token[0] in "'\"":
        assert written[0] in "'\""  # a quoted value stays quoted
    want = yaml.safe_load(text)
    if shape == "mapping":
        want["app"]["image"]["tag"] = new
    else:
        want["app"]["image"] = f"{REPO}:{new}"
    assert yaml.safe_load(edit.text) == want


@settings(max_examples=80, deadline=None)
@given(tags)
def test_every_tag_reads_back_as_the_same_string_in_yaml_1_1_and_1_2(new: str) -> None:
    text = f"image:\n  repository: {REPO}\n  tag: 1.0.0\n"
    edit = edit_values(text, REPO, tag=new, digest=None)
    assert yaml.safe_load(edit.text)["image"]["tag"] == new  # YAML 1.1 (PyYAML, Helm's sigs.k8s.io/yaml)
    assert YAML(typ="safe").load(io.StringIO(edit.text))["image"]["tag"] == new  # YAML 1.2


# --- the re-read: it accepts the planned edit and nothing else -------------------------------------

edits = st.sampled_from(["insert", "delete", "replace"])
chars = st.sampled_from(list(" x1:#-'\"&*[]{},\n"))


@settings(max_examples=150, deadline=None)
@given(documents(), tags, st.data())
def test_a_reread_that_accepts_a_text_proves_it_reads_as_planned(doc, new: str, data) -> None:
    """The verification of every edit (:func:`steps.kustomize.values.tree.reread`): the planned
    edit is accepted, and whatever else a text changes, if the re-read accepts it, the text reads as
    the original with the planned field set — a change it lets through changes nothing YAML reads."""
    head, token, tail, shape, _old = doc
    text = head + token + tail
    try:
        want = yaml.safe_load(text)
    except yaml.YAMLError:
        return
    docs, _, (match,) = find_pushed(text, REPO)
    node = (match.tag_slot if shape == "mapping" else match.string_slot).value
    value = new if shape == "mapping" else f"{REPO}:{new}"
    written = f'"{value}"'
    result = text[: node.start] + written + text[node.end :]
    replaced = {id(node.event): value}
    reread(docs, result, "values.yaml", replaced, [])  # the planned edit itself reads back
    if shape == "mapping":
        want["app"]["image"]["tag"] = value
    else:
        want["app"]["image"] = value
    # one more change anywhere outside the written value
    at = data.draw(
        st.integers(0, len(result)).filter(lambda i: not node.start <= i <= node.start + len(written))
    )
    how, char = data.draw(edits), data.draw(chars)
    cut = at + (how != "insert")
    changed = result[:at] + ("" if how == "delete" else char) + result[cut:]
    try:
        reread(docs, changed, "values.yaml", replaced, [])
    except ValuesError as exc:
        assert exc.reason == "edit-mismatch"
        return
    assert yaml.safe_load(changed) == want


ORIGINAL = "base: &b {a: 1}\nimage:\n  repository: r\n  tag: 1.0\nother: yes\nlist: [a, b]\nshared: *b\n---\nsecond: 2\n"
PLANNED = ORIGINAL.replace("  tag: 1.0\n", '  tag: "2.0"\n')


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param('tag: "2.0"\n', 'tag: "2.0"\n  pullPolicy: Always\n', id="a-new-key"),
        pytest.param("other: yes", "other: 'yes'", id="the-quoting-of-another-value"),
        pytest.param("[a, b]", "[a, c]", id="a-list-item"),
        pytest.param("second: 2", "second: 3", id="another-document"),
        pytest.param("shared: *b", "shared: {a: 1}", id="an-alias-written-out"),
        pytest.param("&b {a: 1}", "&b {a: 2}", id="what-an-alias-reads"),
        pytest.param("repository: r", "repository: r2", id="the-repository"),
        pytest.param('tag: "2.0"', "tag: 2.0", id="the-tag-read-as-a-number"),
        pytest.param('tag: "2.0"', 'tag: "2.1"', id="another-tag"),
        pytest.param('tag: "2.0"', 'tag: &t "2.0"', id="an-anchor-added"),
    ],
)
def test_a_reread_refuses_any_change_but_the_planned_one(old: str, new: str) -> None:
    docs, _, (match,) = find_pushed(ORIGINAL, "docker.io/library/r")
    replaced = {id(match.tag_slot.value.event): "2.0"}
    reread(docs, PLANNED, "values.yaml", replaced, [])
    assert old in PLANNED
    with pytest.raises(ValuesError) as caught:
        reread(docs, PLANNED.replace(old, new, 1), "values.yaml", replaced, [])
    assert caught.value.reason == "edit-mismatch"


def test_a_reread_refuses_a_missing_or_different_inserted_key() -> None:
    text = "image:\n  repository: r\n  pullPolicy: Always\n"
    docs, _, (match,) = find_pushed(text, "r")
    inserted = [(match.tag_slot.after, "tag", "v1.2")]
    reread(docs, text.replace("r\n", "r\n  tag: v1.2\n", 1), "values.yaml", {}, inserted)
    for wrong in (
        text,
        text.replace("r\n", "r\n  tag: v1.3\n", 1),
        text.replace("r\n", "r\n  tags: v1.2\n", 1),
    ):
        with pytest.raises(ValuesError) as caught:
            reread(docs, wrong, "values.yaml", {}, inserted)
        assert (caught.value.reason, caught.value.field) == ("edit-mismatch", "tag")


@settings(max_examples=300, deadline=None)
@example("08")
@example("0815")
@example("0o17")
@example("2024-1-1")
@example("2024-2-30")
@example("1_2.3")
@example("12:30")
@example("0X0")  # Go's ParseInt takes 0X and 0B, which YAML 1.1's tables (lower case only) do not
@example("0B101")
@example("-0XFF")
@example("0B12")
@example("0X10000000000000000")  # past uint64: ParseInt and ParseUint fail, and it is no float: text
@given(st.from_regex(r"[A-Za-z0-9_+-][A-Za-z0-9_.:+-]{0,24}", fullmatch=True) | tags)
def test_a_plain_tag_is_quoted_whenever_helm_reads_another_value(tag: str) -> None:
    """imagebump's "Helm reads this tag as another value" (a plain ``1.10``, ``y``, ``0x1F``,
    ``0815``, ``2024-1-1``) holds for every plain tag go-yaml v2, which Helm reads values with,
    reads as anything but that text."""
    from steps.kustomize.values import find_pushed, misread_tags

    text = f"image:\n  repository: {REPO}\n  tag: {tag}\n"
    try:
        if not isinstance(yaml.safe_load(text)["image"]["tag"], (str, int, float, bool, type(None))):
            return
    except yaml.YAMLError:
        return
    _, _, matches = find_pushed(text, REPO, source="values.yaml")
    if not helm_reads_as_text(tag):  # (quoting more, where a YAML 1.1 reader would misread it, is harmless)
        assert misread_tags(matches), "Helm deploys another value than the tag the file seems to say"

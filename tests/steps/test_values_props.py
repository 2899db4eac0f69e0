"""Issue 34's promise as properties: a values-file edit changes only the tag's bytes, and the file
reads as before except that tag, whatever the layout around it (Hypothesis)."""

from __future__ import annotations

import io

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from steps.kustomize.values import edit_values

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
    if old == new:
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

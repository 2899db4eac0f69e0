"""How often a kustomization is parsed: once to read it, then only the changed entry's lines.

Editing is linear in the file's size (issue 12: "a 1 MiB kustomization … must edit in well under a
second"); a path that parses the same 1 MiB text three times is three times that. These tests count
the libyaml passes (every module of :mod:`steps.kustomize` that parses goes through ``parse_events``)
on the paths a user runs: :func:`steps.kustomize.edit_image` (what ``imagebump set-image`` uses)
and the edit-kustomize step, against a real ``git http-backend`` remote. The timings are
``python -m bench.hostile``'s, never a test's.
"""

from __future__ import annotations

import pytest

from imagebump.local import builders
from steps import kustomize
from steps.domain.models import ImagesEntry, Target
from steps.edit_kustomize.step import run

ACCOUNT, REGION = "123456789012", "us-west-2"
IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/team/api"
BIG = "images:\n" + "".join(f"- name: app{i}\n  newTag: '1.0'\n" for i in range(3000))


def _spy_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    events = kustomize.yaml_nodes.parse_events
    for module in (kustomize.reader, kustomize.verify):  # every module that parses
        monkeypatch.setattr(module, "parse_events", lambda text: (sizes.append(len(text)), events(text))[1])
    return sizes


@pytest.mark.parametrize(
    ("text", "name", "kw", "old", "new"),
    [
        pytest.param(
            BIG,
            "app1500",
            {"tag": "2.0"},
            ImagesEntry(name="app1500", newTag="1.0"),
            ImagesEntry(name="app1500", newTag="2.0"),
            id="set-tag",
        ),
        pytest.param(
            "images:\n- name: api\n  newTag: '1'\n  digest: sha256:" + "1" * 64 + "\n",
            "api",
            {"new_name": "reg/api", "tag": "*"},
            ImagesEntry(name="api", newTag="1", digest="sha256:" + "1" * 64),
            ImagesEntry(name="api", newName="reg/api", newTag="1"),
            id="star-keeps-the-tag-drops-the-digest",
        ),
        pytest.param(
            "images:\n- name: api\n  newName: reg/api\n  newTag: '1'\n",
            "reg/api",
            {"tag": "2"},
            ImagesEntry(name="api", newName="reg/api", newTag="1"),
            ImagesEntry(name="api", newName="reg/api", newTag="2"),
            id="found-by-new-name",
        ),
        pytest.param(
            BIG, "new", {"tag": "2.0", "add": True}, None, ImagesEntry(name="new", newTag="2.0"), id="add"
        ),
    ],
)
def test_edit_image_says_what_the_entry_was_and_is_from_one_parse(monkeypatch, text, name, kw, old, new):
    sizes = _spy_parses(monkeypatch)
    edit = kustomize.edit_image(text, name, **kw)
    assert sizes[0] == len(text) and all(size < 200 for size in sizes[1:]), sizes
    assert edit.changed and edit.text != text
    assert (edit.old, edit.new) == (old, new)
    # and they are what the file says, before and after
    monkeypatch.undo()
    assert kustomize.get_image(text, name) == old
    assert kustomize.get_image(edit.text, new.name) == new


def test_edit_image_when_nothing_changes_returns_the_text_itself_and_the_entry_twice(monkeypatch):
    sizes = _spy_parses(monkeypatch)
    edit = kustomize.edit_image(BIG, "app7", tag="1.0")
    assert (
        edit.text is BIG
        and not edit.changed
        and edit.old == edit.new == ImagesEntry(name="app7", newTag="1.0")
    )
    assert sizes == [len(BIG)]


def test_the_edit_kustomize_step_parses_the_overlay_once_before_editing_it(
    make_remote, git_env, outputs_dir, monkeypatch
):
    """Before: the entry was read for the ECR lookups, read again by decide, parsed a third time
    to edit. Now: read once, parsed once more to edit (the edit's own read), then the entry's lines."""
    text = builders.kustomization(
        [{"name": f"app{i}", "newTag": "1.0"} for i in range(3000)] + [{"name": IMAGE, "newTag": "v1"}]
    )
    remote = make_remote({"README.md": "# gitops\n", "overlays/prod/kustomization.yaml": text})
    target = Target(
        rule=0, repo_url=remote.url, path="overlays/prod", env="prod", image=IMAGE, tag="v2", order="none"
    )
    sizes = _spy_parses(monkeypatch)
    out = run.__wrapped__(target)
    assert (out.changed, out.decision, out.plan.new.newTag) == (True, "update", "v2")
    whole = [size for size in sizes if size >= len(text)]
    assert len(whole) == 2, sizes

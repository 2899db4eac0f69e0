"""Issue 30 item 2 and issue 31 item 4: ``# imagebump:hold`` on every shape of an images entry.

The marker holds the entry it is written on — above its ``-``, after the dash, on any line of it,
inside a flow mapping's braces, after it indented deeper — block or flow, whatever YAML line break
the file uses, and never another entry. One finder (:func:`steps.kustomize.hold_marker`) serves the
events (edit-kustomize's plan), the sweep and commit-pr's re-check; the property tests drive the
first and the last through their pure cores.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from steps import kustomize
from steps.commit_pr import decide as commit_pr
from steps.domain.models import ImagesEntry, Plan
from steps.edit_kustomize import decide as edit_kustomize
from steps.kustomize.holds import hold_at
from tests.fixtures.hang_guard import run_guarded
from tests.steps.commit_pr.support import target

REGISTRY = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/"
NAMES = ("api", "web", "worker", "db")
BREAKS = ("\n", "\r\n", "\r", "\x85", "\u2028", "\u2029")
FILE = "overlays/prod/kustomization.yaml"


# --- the shapes users wrote (each was written through before) ------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            "images:\n- {name: web}\n# imagebump:hold why\n- {name: api, newTag: 1.4.1}\n", id="flow-above"
        ),
        pytest.param(
            "images:\n# imagebump:hold why\n- {name: api, newTag: 1.4.1}\n- {name: web}\n",
            id="flow-above-first",
        ),
        pytest.param(
            "images:\n- # imagebump:hold why\n  {name: api, newTag: 1.4.1}\n- {name: web}\n",
            id="flow-after-dash",
        ),
        pytest.param(
            "images:\n- {name: api,\n   # imagebump:hold why\n   newTag: 1.4.1}\n- {name: web}\n",
            id="flow-inside",
        ),
        pytest.param(
            "images:\n- {name: api,  # imagebump:hold why\n   newTag: 1.4.1}\n- {name: web}\n",
            id="flow-first-line",
        ),
        pytest.param(
            "images:\n- {name: api,\n   newTag: 1.4.1}  # imagebump:hold why\n- {name: web}\n",
            id="flow-last-line",
        ),
        pytest.param(
            "images:\n- {name: api, newTag: 1.4.1}\n  # imagebump:hold why\n- {name: web}\n", id="flow-below"
        ),
        pytest.param(
            "images: [\n  {name: web},\n  # imagebump:hold why\n  {name: api, newTag: 1.4.1}\n]\n",
            id="flow-seq-above",
        ),
        pytest.param(
            "images: [{name: web}, {name: api, newTag: 1.4.1}]  # imagebump:hold why\n",
            id="flow-seq-same-line",
        ),
        pytest.param(
            "images: [  # imagebump:hold why\n  {name: api},\n  {name: web}\n]\n", id="flow-seq-after-open"
        ),
        pytest.param(
            "images: [\n  {name: web},\n  {name: api}\n  # imagebump:hold why\n]\n",
            id="flow-seq-before-close",
        ),
        pytest.param(
            "images:\r- name: web\r  newTag: '1'\r# imagebump:hold why\r- name: api\r", id="cr-above"
        ),
        pytest.param(
            "images:\u2028- name: web\u2028# imagebump:hold why\u2028- name: api\u2028", id="ls-above"
        ),
        pytest.param(
            "images:\x85- {name: web}\x85# imagebump:hold why\x85- {name: api}\x85", id="nel-flow-above"
        ),
        pytest.param(
            "images:\u2029- name: api\u2029  # imagebump:hold why\u2029- name: web\u2029", id="ps-below"
        ),
    ],
)
def test_a_marker_holds_the_entry_it_is_written_on_and_no_other(text: str) -> None:
    assert kustomize.hold_marker(text, "api") == "why"
    assert kustomize.hold_marker(text, "web") is None


@pytest.mark.parametrize(
    "text",
    [
        # the marker ends web's last line: under CR-only breaks the old finder saw one long line
        pytest.param("images:\r- name: web\r  newTag: '1'  # imagebump:hold why\r- name: api\r", id="cr"),
        pytest.param("images:\u2028- name: web  # imagebump:hold why\u2028- name: api\u2028", id="ls"),
        pytest.param("images:\x85- {name: web}  # imagebump:hold why\x85- {name: api}\x85", id="nel"),
        pytest.param("images:\r\n- name: web\r\n  # imagebump:hold why\r\n- name: api\r\n", id="crlf-below"),
    ],
)
def test_a_marker_on_one_entry_never_holds_the_next_whatever_the_line_break(text: str) -> None:
    assert kustomize.hold_marker(text, "web") == "why"
    assert kustomize.hold_marker(text, "api") is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('images:\n- name: api\n  newTag: "1 # imagebump:hold"\n', id="in-a-quoted-value"),
        pytest.param("images:\n- name: api\n  newTag: |\n    # imagebump:hold\n", id="in-a-block-scalar"),
        pytest.param("images:\n- name: api  # imagebump:holder\n", id="another-word"),
        pytest.param("# imagebump:hold\nimages:\n- name: api\n", id="above-the-images-key"),
        pytest.param("images:\n- name: api\nlabels:\n# imagebump:hold\n- x\n", id="in-another-list"),
    ],
)
def test_what_is_no_marker_of_the_entry_holds_nothing(text: str) -> None:
    assert kustomize.hold_marker(text, "api") is None


def test_a_block_scalar_header_comment_is_a_comment() -> None:
    text = "images:\n- name: api\n  newTag: |  # imagebump:hold why\n    1.4.1\n- name: web\n"
    assert kustomize.hold_marker(text, "api") == "why"
    assert kustomize.hold_marker(text, "web") is None


def test_an_entry_written_twice_through_an_alias_is_held_by_a_marker_on_either() -> None:
    text = "images:\n- &e {name: api, newTag: 1.4.1}\n- name: web\n- *e  # imagebump:hold why\n"
    assert kustomize.hold_marker(text, "api") == "why"
    assert kustomize.hold_marker(text, "web") is None


@pytest.mark.parametrize(
    ("text", "path", "held"),
    [
        pytest.param(
            "image:  # imagebump:hold why\n  repository: r\n  tag: 1\n", ("image",), "why", id="key-line"
        ),
        pytest.param("# imagebump:hold why\nimage:\n  repository: r\n", ("image",), "why", id="above-key"),
        pytest.param(
            "image:\n  repository: r\n  tag: 1  # imagebump:hold why\n", ("image",), "why", id="value"
        ),
        pytest.param("a: 1  # imagebump:hold why\nimage:\n  tag: 1\n", ("image",), None, id="previous-key"),
        pytest.param(
            "image: {repository: r,\n  # imagebump:hold why\n  tag: 1}\n", ("image",), "why", id="flow"
        ),
        pytest.param(
            "app:\n  image:\n    tag: 1  # imagebump:hold why\n", ("app", "image"), "why", id="nested"
        ),
        pytest.param(
            "app:\n  image:\n    tag: 1\n  # imagebump:hold why\n  other: 2\n",
            ("app", "image"),
            None,
            id="sibling",
        ),
        pytest.param("list:\n- a\n- b  # imagebump:hold why\n", ("list", 1), "why", id="index"),
        pytest.param("list:\n- a\n- b  # imagebump:hold why\n", ("list", 0), None, id="other-index"),
        pytest.param("list:\n- a\n", ("nope",), None, id="no-such-node"),
    ],
)
def test_hold_at_finds_the_marker_of_any_mapping_node(text: str, path: tuple, held: str | None) -> None:
    """The finder works on any YAML file's nodes (a Helm values file's ``image:`` mapping)."""
    assert hold_at(text, path) == held


# --- properties ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Drawn:
    text: str
    names: tuple[str, ...]
    held: int | None  # the index of the entry the marker is written on
    reason: str
    where: str


_BLOCK_POSITIONS = ("above", "above-left", "dash-line", "after-dash", "value", "inside", "below")
_FLOW_POSITIONS = ("above", "above-left", "after-dash", "same-line", "below")
_FLOW_MULTILINE_POSITIONS = ("above", "after-dash", "first-line", "inside", "last-line", "below")
_FLOW_SEQ_POSITIONS = ("above", "same-line", "inside", "below")


def _block_list_entry(name: str, shape: str, where: str | None, marker: str, dash: int) -> list[str]:
    d, k = " " * dash, " " * (dash + 2)
    mark = lambda line: f"{line}  {marker}"  # noqa: E731
    if shape == "block":
        lines = [f"{d}- name: {name}", f"{k}newTag: 1.0.0"]
        if where == "dash-line":
            lines[0] = mark(lines[0])
        elif where == "after-dash":
            lines = [f"{d}- {marker}", f"{k}name: {name}", f"{k}newTag: 1.0.0"]
        elif where == "value":
            lines[1] = mark(lines[1])
        elif where == "inside":
            lines.insert(1, f"{k}{marker}")
    elif shape == "flow":
        lines = [f"{d}- {{name: {name}, newTag: 1.0.0}}"]
        if where == "same-line":
            lines[0] = mark(lines[0])
        elif where == "after-dash":
            lines = [f"{d}- {marker}", f"{k}{{name: {name}, newTag: 1.0.0}}"]
    else:  # a flow mapping over two lines
        lines = [f"{d}- {{name: {name},", f"{k} newTag: 1.0.0}}"]
        if where == "first-line":
            lines[0] = mark(lines[0])
        elif where == "last-line":
            lines[1] = mark(lines[1])
        elif where == "inside":
            lines.insert(1, f"{k} {marker}")
        elif where == "after-dash":
            lines = [f"{d}- {marker}", f"{k}{{name: {name},", f"{k} newTag: 1.0.0}}"]
    if where == "above":
        lines.insert(0, f"{d}{marker}")
    elif where == "above-left":
        lines.insert(0, marker)
    elif where == "below":
        lines.append(f"{k}{marker}")
    return lines


def _flow_list_entry(name: str, last: bool, where: str | None, marker: str) -> list[str]:
    comma = "" if last else ","
    lines = [f"  {{name: {name}, newTag: 1.0.0}}{comma}"]
    if where == "inside":
        lines = [f"  {{name: {name},", f"   {marker}", f"   newTag: 1.0.0}}{comma}"]
    elif where == "same-line":
        lines[0] += f"  {marker}"
    elif where == "above":
        lines.insert(0, f"  {marker}")
    elif where == "below":
        lines.append(f"    {marker}")
    elif where == "before-close":  # after the last entry, at its column, before the `]`
        lines.append(f"  {marker}")
    return lines


_reasons = st.text(alphabet="abcXYZ019-_ ", max_size=12).map(str.strip)


@st.composite
def kustomizations(draw) -> Drawn:
    """A kustomization with 2-4 entries and at most one hold marker, in any legal position."""
    names = tuple(REGISTRY + n for n in draw(st.permutations(NAMES)))[: draw(st.integers(2, 4))]
    held = draw(st.none() | st.integers(0, len(names) - 1))
    reason = draw(_reasons)
    marker = f"# imagebump:hold {reason}".rstrip()
    decoy = "# imagebump:holder not a marker"
    brk = draw(st.sampled_from(BREAKS))
    blank = draw(st.booleans())
    flow_list = draw(st.booleans())
    where = ""
    lines = ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization"]
    if flow_list:
        lines.append("images: [")
        for i, name in enumerate(names):
            positions = _FLOW_SEQ_POSITIONS + (("after-open",) if i == 0 else ())
            positions += ("before-close",) if i == len(names) - 1 else ()
            at = draw(st.sampled_from(positions)) if i == held else None
            where = at or where
            if at == "after-open":  # on the `images: [` line
                lines[-1] += f"  {marker}"
            if i != held and draw(st.booleans()):
                at = draw(st.sampled_from(_FLOW_SEQ_POSITIONS))
                lines += _flow_list_entry(name, i == len(names) - 1, at, decoy)
            else:
                lines += _flow_list_entry(name, i == len(names) - 1, at, marker)
            if blank:
                lines.append("")
        lines.append("]")
    else:
        dash = draw(st.sampled_from((0, 2)))
        lines.append("images:")
        for i, name in enumerate(names):
            shape = draw(st.sampled_from(("block", "flow", "flow-multiline")))
            positions = {"block": _BLOCK_POSITIONS, "flow": _FLOW_POSITIONS}.get(
                shape, _FLOW_MULTILINE_POSITIONS
            )
            at = draw(st.sampled_from(positions)) if i == held else None
            where = f"{shape}/{at}" if at else where
            if i != held and draw(st.booleans()):
                lines += _block_list_entry(name, shape, draw(st.sampled_from(positions)), decoy, dash)
            else:
                lines += _block_list_entry(name, shape, at, marker, dash)
            if blank:
                lines.append("")
    # text that looks like a marker but is a value: a block scalar and a quoted scalar
    lines += [
        "configMapGenerator:",
        "- name: notes",
        "  literals:",
        "  - |",
        "    # imagebump:hold not a comment",
    ]
    lines.append('commonAnnotations: {note: "# imagebump:hold a value"}')
    text = brk.join(lines) + brk
    return Drawn(text, names, held, reason, f"{'flow-list' if flow_list else 'block-list'} {where} {brk!r}")


@settings(max_examples=300, deadline=None)
@given(kustomizations())
@example(Drawn("images:\r- {name: a}\r# imagebump:hold r\r- {name: b}\r", ("a", "b"), 1, "r", "cr"))
@example(
    Drawn("images:\u2028- {name: a}  # imagebump:hold r\u2028- {name: b}\u2028", ("a", "b"), 0, "r", "ls")
)
def test_the_marker_holds_exactly_the_entry_it_is_on(drawn: Drawn) -> None:
    assert [e.name for e in kustomize.read_images(drawn.text)] == list(drawn.names), drawn.where
    for i, name in enumerate(drawn.names):
        expected = drawn.reason if i == drawn.held else None
        assert kustomize.hold_marker(drawn.text, name) == expected, (drawn.where, name)


def _target(name: str):
    return target("https://github.com/team/gitops", tag="2.0.0", order="none").model_copy(
        update={"image": name}
    )


@settings(max_examples=150, deadline=None)
@given(kustomizations())
def test_imagebump_never_writes_through_a_hold(drawn: Drawn) -> None:
    """Events (edit-kustomize's plan) and commit-pr's re-check on the newest base: the held entry is
    never written; every other entry is, and writing it keeps the marker where it was."""
    for i, name in enumerate(drawn.names):
        plan = edit_kustomize.decide(_target(name), drawn.text, FILE, "c0ffee", "main", {})
        planned = Plan(
            changed=True,
            decision="update",
            file=FILE,
            image_name=name,
            old=ImagesEntry(name=name, newTag="1.0.0"),
            new=ImagesEntry(name=name, newTag="2.0.0"),
        )
        applied = commit_pr.decide(drawn.text, _target(name), planned)
        if i == drawn.held:
            assert plan.decision == "held" and not plan.changed, drawn.where
            assert applied.text is None, drawn.where
            continue
        assert plan.decision == "update" and plan.changed, (drawn.where, name)
        assert applied.text is not None, (drawn.where, name)
        assert kustomize.get_image(applied.text, name).newTag == "2.0.0"
        if drawn.held is not None:  # writing another entry keeps the hold on the held one
            assert kustomize.hold_marker(applied.text, drawn.names[drawn.held]) == drawn.reason, drawn.where


# --- end to end: the event's step and the sweep, on a real remote and moto's ECR ---------------------

REGION = "us-west-2"
OVERLAY = "apps/api/overlays/prod"


@pytest.fixture()
def _aws(git_env, outputs_dir, monkeypatch, moto):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    monkeypatch.setenv("AWS_REGION", REGION)
    return moto


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param(
            "images:{b}- {{name: {web}}}{b}# imagebump:hold INC-7{b}- {{name: {api}, newTag: 1.4.1}}{b}",
            id="flow-above-lf",
        ),
        pytest.param(
            "images:{b}- # imagebump:hold INC-7{b}  {{name: {api}, newTag: 1.4.1}}{b}- {{name: {web}}}{b}",
            id="flow-after-dash",
        ),
        pytest.param(
            "images:{b}- {{name: {web}}}{b}# imagebump:hold INC-7{b}- {{name: {api}, newTag: 1.4.1}}{b}",
            id="flow-above-cr",
        ),
        pytest.param(
            "images:{b}- name: {web}{b}# imagebump:hold INC-7{b}- name: {api}{b}  newTag: 1.4.1{b}",
            id="block-above-ls",
        ),
    ],
)
def test_the_event_and_the_sweep_hold_a_flow_entry(
    make_remote, _aws, git_token, layout: str, request
) -> None:
    import secrets
    from datetime import UTC, datetime, timedelta

    from imagebump.local import builders
    from steps.edit_kustomize.step import run
    from steps.git import GitAuth
    from steps.reconcile.step import scan_targets
    from steps.rules import load_rules
    from tests.fixtures.ecr_times import ACCOUNT, set_pushed_at

    brk = {"flow-above-cr": "\r", "block-above-ls": "\u2028"}.get(request.node.callspec.id, "\n")
    name = f"team/api-{secrets.token_hex(4)}"
    ecr = _aws.client("ecr")
    ecr.create_repository(repositoryName=name)
    now = datetime.now(UTC).replace(microsecond=0)
    for tag, when in (("1.4.1", now - timedelta(hours=3)), ("1.5.0", now - timedelta(hours=2))):
        digest = builders.digest_for(f"{name}:{tag}:{secrets.token_hex(4)}")
        ecr.put_image(
            repositoryName=name,
            imageManifest=builders.image_manifest(digest),
            imageTag=tag,
            imageDigest=digest,
        )
        set_pushed_at(name, tag, when)
    api = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/{name}"
    text = layout.format(b=brk, api=api, web=f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/team/web")
    remote = make_remote({f"{OVERLAY}/kustomization.yaml": text})
    event = target(remote.url, OVERLAY, tag="1.5.0", order="push-time").model_copy(
        update={"image": api, "pushed_at": now - timedelta(hours=2)}
    )
    out = run.__wrapped__(event)
    assert (out.decision, out.changed) == ("held", False) and "INC-7" in out.reason
    rules = load_rules(
        f"- registryURI: {api}\n  githubRepository: {remote.url}/{OVERLAY}\n"
        "  env: prod\n  mode: commit\n  provider: local\n"
    )
    swept = scan_targets(rules, auth=GitAuth(git_token))
    (row,) = swept.report
    assert row.state == "held" and "INC-7" in row.reason
    assert swept.targets == []


def test_the_positions_docs_holds_md_shows_each_hold_their_entry() -> None:
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "holds.md").read_text()
    shown = next(b for b in re.findall(r"```yaml\n(.*?)```", page, re.S) if "after the dash" in b)
    entries = kustomize.read_images(shown)
    assert len(entries) >= 5
    for entry in entries:
        assert kustomize.hold_marker(shown, entry.name), entry.name


@pytest.mark.parametrize("brk", BREAKS, ids=["lf", "crlf", "cr", "nel", "ls", "ps"])
def test_the_marker_survives_an_edit_that_removes_its_line_under_every_line_break(brk: str) -> None:
    digest = "sha256:" + "a" * 64
    b = brk
    text = f"images:{b}- name: api{b}  newTag: 1.4.1{b}  digest: {digest}  # imagebump:hold INC-5{b}- name: web{b}"
    edited = kustomize.set_image(text, "api", tag="1.5.0")
    assert kustomize.get_image(edited, "api").digest is None
    assert kustomize.hold_marker(edited, "api") == "INC-5"
    assert kustomize.hold_marker(edited, "web") is None
    assert brk in edited and all(other not in edited for other in set(BREAKS) - {brk, "\n", "\r"})


def look_alike_answers() -> list[str | None]:
    """Half a MiB: every entry marked, every value holding ``# imagebump:hold``; one line each way."""
    block = "".join(
        f'- name: app{i}\n  newTag: "1 # imagebump:hold no"  # imagebump:hold r{i}\n' for i in range(4000)
    )
    flow = "images: [" + ", ".join(f'{{name: app{i}, newTag: "# imagebump:hold no"}}' for i in range(6000))
    return [
        kustomize.hold_marker("images:\n" + block, "app3999"),
        kustomize.hold_marker(flow + "]  # imagebump:hold end\n", "app5999"),
        kustomize.hold_marker(flow + "]  # imagebump:hold end\n", "app0"),
    ]


def test_a_large_file_full_of_markers_and_look_alikes_cannot_make_the_finder_hang() -> None:
    """:func:`look_alike_answers`: a finder that rescans its line per look-alike needs hours there,
    the finder's one pass answers at once. A child process with a deadline guards against a hang;
    nothing is timed (the bench measures: bench/hostile.py)."""
    program = f"from {__name__} import look_alike_answers\nprint(look_alike_answers())\n"
    done = run_guarded(program, what="hold_marker on a file of look-alikes")
    assert done.stdout.strip() == repr(["r3999", "end", None]), done.stderr

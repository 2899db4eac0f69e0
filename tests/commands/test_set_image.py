"""``imagebump set-image``: exit codes, messages, and the file left untouched on failure."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from imagebump.cli import main

EDIT = Path(__file__).resolve().parents[1] / "testdata" / "edit"
D2 = "sha256:" + "2f" * 32
KUSTOMIZATION = (
    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
    "images:\n- name: web  # front\n  newTag: 2.0.0\n- name: worker\n  newTag: 1.4.1\n"
)


@pytest.fixture()
def overlay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    directory = tmp_path / "overlays" / "prod"
    directory.mkdir(parents=True)
    (directory / "kustomization.yaml").write_text(KUSTOMIZATION)
    return directory


def _snapshot(path: Path) -> tuple[bytes, int]:
    st = path.stat()
    return path.read_bytes(), st.st_mtime_ns


def test_changed(overlay: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["set-image", "overlays/prod", "worker:1.4.2"]) == 0
    out = capsys.readouterr().out
    assert out == "overlays/prod/kustomization.yaml: worker 1.4.1 → 1.4.2\n"
    assert (overlay / "kustomization.yaml").read_text() == KUSTOMIZATION.replace("1.4.1", "1.4.2")


def test_file_path_and_digest(overlay: Path, capsys: pytest.CaptureFixture[str]):
    path = overlay / "kustomization.yaml"
    assert main(["set-image", str(path), f"web=reg.example.com:5000/web@{D2}"]) == 0
    assert "web 2.0.0 → reg.example.com:5000/web@sha256:2f2f2f2f2f2f…" in capsys.readouterr().out
    assert path.read_text() == KUSTOMIZATION.replace(
        "  newTag: 2.0.0\n", f"  newName: reg.example.com:5000/web\n  digest: {D2}\n"
    )


def test_already_current_writes_nothing(overlay: Path, capsys: pytest.CaptureFixture[str]):
    path = overlay / "kustomization.yaml"
    before = _snapshot(path)
    assert main(["set-image", "overlays/prod", "worker:1.4.1"]) == 0
    assert "worker already current (1.4.1)" in capsys.readouterr().out
    assert _snapshot(path) == before


def test_not_found_exit_1_lists_names(overlay: Path, capsys: pytest.CaptureFixture[str]):
    path = overlay / "kustomization.yaml"
    before = _snapshot(path)
    assert main(["set-image", "overlays/prod", "api:1.4.2"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "imagebump set-image: image 'api' not in overlays/prod/kustomization.yaml (found: web, worker); "
        "add it under images: or pass --add\n"
    )
    assert _snapshot(path) == before


def test_add(overlay: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["set-image", "overlays/prod", "api:1.4.2", "--add"]) == 0
    assert "api added (1.4.2)" in capsys.readouterr().out
    assert (overlay / "kustomization.yaml").read_text() == KUSTOMIZATION + "- name: api\n  newTag: 1.4.2\n"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param("{}\n", "{images: [{name: api, newTag: 1.4.2}]}\n", id="empty-as-kyaml-writes-it"),
        pytest.param(
            "{resources: [deployment.yaml]}  # generated\n",
            "{resources: [deployment.yaml], images: [{name: api, newTag: 1.4.2}]}  # generated\n",
            id="resources",
        ),
    ],
)
def test_add_to_a_kustomization_written_as_one_flow_mapping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    """As ``kustomize edit set image`` and argocd-image-updater do, ``--add`` adds the entry to a
    flow-mapping kustomization (kyaml writes an empty one as ``{}``); the rest of the file is kept and
    ``kubectl kustomize`` renders the new image."""
    shutil.copy(EDIT / "add-creates-images" / "original" / "deployment.yaml", tmp_path / "deployment.yaml")
    path = tmp_path / "kustomization.yaml"
    path.write_text(content)
    assert main(["set-image", str(tmp_path), "api:1.4.2", "--add"]) == 0
    assert "api added (1.4.2)" in capsys.readouterr().out
    assert path.read_text() == expected
    if "deployment.yaml" in content:
        rendered = subprocess.run(
            ["/usr/bin/kubectl", "kustomize", str(tmp_path)], capture_output=True, text=True, check=True
        ).stdout
        assert "image: api:1.4.2" in rendered


@pytest.mark.parametrize(
    ("content", "spec", "message"),
    [
        pytest.param("images: [\n", "web:1", "invalid YAML at line 2", id="bad-yaml"),
        pytest.param("images:\n- name: web\n---\na: 1\n", "web:1", "2 YAML documents", id="multi-document"),
        pytest.param(
            "images:\n- name: web\n  name: x\n", "web:1", "duplicate key 'name'", id="duplicate-key"
        ),
        pytest.param(KUSTOMIZATION, "web:.bad", "invalid tag '.bad'", id="bad-tag"),
        pytest.param(KUSTOMIZATION, "web@sha256:abc", "invalid digest", id="bad-digest"),
        pytest.param(KUSTOMIZATION, "web", "nothing to set", id="nothing-to-set"),
        pytest.param(b"images: \xff\n", "web:1", "not UTF-8", id="not-utf8"),
    ],
)
def test_bad_input_exit_2_untouched(
    overlay: Path, capsys: pytest.CaptureFixture[str], content: str | bytes, spec: str, message: str
):
    path = overlay / "kustomization.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = _snapshot(path)
    assert main(["set-image", "overlays/prod", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith("imagebump set-image: error: ") and message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2
    assert _snapshot(path) == before


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        pytest.param(lambda d: None, "no kustomization in", id="none-found"),
        pytest.param(
            lambda d: [(d / n).write_text("images: []\n") for n in ("kustomization.yaml", "Kustomization")],
            "multiple kustomization files",
            id="several",
        ),
    ],
)
def test_no_kustomization_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], setup, message: str):
    setup(tmp_path)
    assert main(["set-image", str(tmp_path), "web:1"]) == 2
    assert message in capsys.readouterr().err


def test_missing_path_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["set-image", str(tmp_path / "nope"), "web:1"]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_keeps_mode_bytes_and_leaves_no_temp_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    shutil.copytree(EDIT / "crlf-line-endings" / "original", tmp_path / "o")
    path = tmp_path / "o" / "kustomization.yaml"
    os.chmod(path, 0o640)
    assert main(["set-image", str(tmp_path / "o"), "api:1.4.2"]) == 0
    assert path.read_bytes() == (EDIT / "crlf-line-endings" / "expected" / "kustomization.yaml").read_bytes()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in path.parent.iterdir()) == ["deployment.yaml", "kustomization.yaml"]


# --- issue 12: symbolic links, kustomize's '*', name-only matching, unknown tags, unwritable ----------


def _git_repo(root: Path) -> Path:
    """A real git work tree (``git init``): set-image finds its top by the ``.git`` it holds."""
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_a_link_out_of_the_repository_is_refused_and_nothing_changes(tmp_path: Path, capsys) -> None:
    outside = tmp_path / "outside" / "kustomization.yaml"
    outside.parent.mkdir()
    outside.write_text(KUSTOMIZATION)
    repo = _git_repo(tmp_path / "repo")
    overlay = repo / "overlays" / "prod"
    overlay.mkdir(parents=True)
    link = overlay / "kustomization.yaml"
    link.symlink_to(outside)
    before = outside.read_bytes()

    assert main(["set-image", str(overlay), "worker:9.9.9"]) == 2

    err = capsys.readouterr().err
    assert "leaves the repository" in err and "symbolic link" in err and "Traceback" not in err
    assert outside.read_bytes() == before
    assert link.is_symlink() and os.readlink(link) == str(outside)
    assert sorted(p.name for p in overlay.iterdir()) == ["kustomization.yaml"]


def test_a_link_inside_the_repository_is_edited_through_and_stays_a_link(tmp_path: Path, capsys) -> None:
    repo = _git_repo(tmp_path / "repo")
    shared = repo / "shared" / "kustomization.yaml"
    shared.parent.mkdir()
    shared.write_text(KUSTOMIZATION)
    overlay = repo / "overlays" / "prod"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").symlink_to("../../shared/kustomization.yaml")

    assert main(["set-image", str(overlay), "worker:1.4.2"]) == 0

    assert "worker 1.4.1 → 1.4.2" in capsys.readouterr().out
    link = overlay / "kustomization.yaml"
    assert link.is_symlink() and os.readlink(link) == "../../shared/kustomization.yaml"
    assert shared.read_text() == KUSTOMIZATION.replace("1.4.1", "1.4.2")
    assert sorted(p.name for p in shared.parent.iterdir()) == ["kustomization.yaml"]


def test_an_overlay_directory_linked_out_of_the_repository_is_refused(tmp_path: Path, capsys) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "kustomization.yaml").write_text(KUSTOMIZATION)
    repo = _git_repo(tmp_path / "repo")
    (repo / "overlays").mkdir()
    (repo / "overlays" / "prod").symlink_to(elsewhere, target_is_directory=True)

    assert main(["set-image", str(repo / "overlays" / "prod"), "worker:9"]) == 2
    assert "leaves the repository" in capsys.readouterr().err
    assert (elsewhere / "kustomization.yaml").read_text() == KUSTOMIZATION


@pytest.mark.parametrize(
    ("link", "code"),
    [
        pytest.param("real/kustomization.yaml", 0, id="inside-the-directory-given"),
        pytest.param("../sibling/kustomization.yaml", 2, id="out-of-the-directory-given"),
    ],
)
def test_outside_a_git_work_tree_the_directory_given_is_the_boundary(
    tmp_path: Path, capsys, link: str, code: int
):
    given = tmp_path / "overlay"
    for directory in (given / "real", tmp_path / "sibling"):
        directory.mkdir(parents=True)
        (directory / "kustomization.yaml").write_text(KUSTOMIZATION)
    (given / "kustomization.yaml").symlink_to(link)

    assert main(["set-image", str(given), "worker:1.4.2"]) == code

    target = (given / link).resolve()
    assert (given / "kustomization.yaml").is_symlink()
    if code == 0:
        assert target.read_text() == KUSTOMIZATION.replace("1.4.1", "1.4.2")
    else:
        assert "leaves the directory given" in capsys.readouterr().err
        assert target.read_text() == KUSTOMIZATION


NAMED = "images:\n- name: api\n  newName: reg.example.com/team/api\n  newTag: 1.0.0\n  digest: " + D2 + "\n"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            "api=*:1.5.0",
            "images:\n- name: api\n  newName: reg.example.com/team/api\n  newTag: 1.5.0\n",
            id="keep-new-name-set-tag",
        ),
        pytest.param(
            "api=reg.example.com/new:*",
            "images:\n- name: api\n  newName: reg.example.com/new\n  newTag: 1.0.0\n",
            id="set-new-name-keep-tag",
        ),
        pytest.param("api:2.0.0@*", NAMED.replace("1.0.0", "2.0.0"), id="set-tag-keep-digest"),
        pytest.param(
            f"api:*@{D2.replace('2f', '3e')}",
            NAMED.replace(D2, D2.replace("2f", "3e")),
            id="keep-tag-set-digest",
        ),
        pytest.param("api=*:*@*", NAMED, id="keep-everything"),
    ],
)
def test_kustomize_star_keeps_that_part(tmp_path: Path, spec: str, expected: str) -> None:
    """kustomize's ``*``: "preserve the appropriate values from the kustomization file" (setimage.go)."""
    path = tmp_path / "kustomization.yaml"
    path.write_text(NAMED)
    assert main(["set-image", str(path), spec]) == 0
    assert path.read_text() == expected


def test_star_cannot_be_the_name(tmp_path: Path, capsys) -> None:
    (tmp_path / "kustomization.yaml").write_text(NAMED)
    assert main(["set-image", str(tmp_path), "*:1.0"]) == 2
    assert "NAME cannot be '*'" in capsys.readouterr().err


def test_add_matches_name_only_as_kustomize_does(tmp_path: Path, capsys) -> None:
    """``{name: foo, newName: bar}`` is not the entry ``bar``: ``bar:123 --add`` adds one."""
    path = tmp_path / "kustomization.yaml"
    text = "images:\n- name: foo\n  newName: bar\n  newTag: '1'\n"
    path.write_text(text)

    assert main(["set-image", str(tmp_path), "bar:123"]) == 1
    assert "image 'bar' not in" in capsys.readouterr().err and path.read_text() == text

    assert main(["set-image", str(tmp_path), "bar:123", "--add"]) == 0
    assert f"{path}: bar added (123)" in capsys.readouterr().out
    assert path.read_text() == text + '- name: bar\n  newTag: "123"\n'


@pytest.mark.parametrize(
    ("value", "tag"),
    [
        pytest.param("!Ref foo", "'!Ref'", id="cloudformation-style"),
        pytest.param(
            "!!python/object/apply:os.system ['touch MARKER']",
            "'tag:yaml.org,2002:python/object/apply",
            id="python-object",
        ),
    ],
)
def test_an_unknown_yaml_tag_is_one_clear_line(
    tmp_path: Path, capsys, monkeypatch, value: str, tag: str
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "kustomization.yaml"
    path.write_text(f"images:\n- name: api\n  newTag: '1'\nx-other: {value}\n")
    before = _snapshot(path)
    assert main(["set-image", str(path), "api:2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"imagebump set-image: error: {path}: unknown YAML tag {tag}")
    assert "line 4, column 10" in err and len(err.strip().splitlines()) == 1, err
    assert _snapshot(path) == before and not (tmp_path / "MARKER").exists()


def _make_unwritable(directory: Path):
    """Really unwritable: mode 555 for a normal user; for root (who ignores modes) the immutable flag."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        return lambda: directory.chmod(0o755)
    subprocess.run(["chattr", "+i", str(directory)], check=True)  # fails loudly where chattr cannot
    return lambda: subprocess.run(["chattr", "-i", str(directory)], check=True)


def test_an_unwritable_directory_exits_2_and_changes_nothing(overlay: Path, capsys) -> None:
    path = overlay / "kustomization.yaml"
    before = _snapshot(path)
    restore = _make_unwritable(overlay)
    try:
        assert main(["set-image", "overlays/prod", "worker:1.4.2"]) == 2
    finally:
        restore()
    err = capsys.readouterr().err
    assert err.startswith("imagebump set-image: error: overlays/prod/kustomization.yaml: cannot write")
    assert "Traceback" not in err and "unexpected" not in err
    assert _snapshot(path) == before
    assert sorted(p.name for p in overlay.iterdir()) == ["kustomization.yaml"]


def test_the_command_parses_the_file_once(tmp_path: Path, capsys, monkeypatch) -> None:
    """Issue 12, "editing is linear in the file's size": the command read the file three times
    (the entry before, the edit, the entry after); now one parse tells it all, and the edit rereads
    only the changed entry's lines. bench/hostile.py times the command on 1 MiB."""
    from steps import kustomize

    text = "images:\n" + "".join(f"- name: app{i}\n  newTag: '1.0'\n" for i in range(3000))
    (tmp_path / "kustomization.yaml").write_text(text)
    sizes: list[int] = []
    events = kustomize.yaml_nodes.parse_events
    for module in (kustomize.reader, kustomize.verify):  # every module that parses
        monkeypatch.setattr(module, "parse_events", lambda t: (sizes.append(len(t)), events(t))[1])

    assert main(["set-image", str(tmp_path), "app1500:2.0"]) == 0
    assert f"{tmp_path / 'kustomization.yaml'}: app1500 1.0 → 2.0" in capsys.readouterr().out
    assert [size for size in sizes if size >= len(text)] == [len(text)], sizes


@pytest.mark.parametrize("spec", ["new:*", "new=*", "new@*", "new=*:*@*"])
def test_add_with_only_star_is_refused_it_would_keep_nothing(overlay: Path, capsys, spec: str) -> None:
    """Before: ``- name: new`` appended and "new added ((unset))" printed: an entry that sets nothing."""
    path = overlay / "kustomization.yaml"
    before = _snapshot(path)
    assert main(["set-image", "overlays/prod", spec, "--add"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "'new' is not in overlays/prod/kustomization.yaml" in captured.err
    assert "nothing to keep" in captured.err and "new:TAG" in captured.err
    assert _snapshot(path) == before


def test_add_with_star_and_a_value_writes_the_value_as_kustomize_does(overlay: Path, capsys) -> None:
    """kustomize leaves a ``*`` out of a new entry (setimage.go); what is given is still set."""
    assert main(["set-image", "overlays/prod", "new=*:1.2", "--add"]) == 0
    assert "new added (1.2)" in capsys.readouterr().out
    assert (overlay / "kustomization.yaml").read_text() == KUSTOMIZATION + '- name: new\n  newTag: "1.2"\n'

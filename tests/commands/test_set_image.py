"""``imagebump set-image``: exit codes, messages, and the file left untouched on failure."""

from __future__ import annotations

import os
import shutil
import stat
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
    ("content", "spec", "message"),
    [
        pytest.param("images: [\n", "web:1", "invalid YAML at line 2", id="bad-yaml"),
        pytest.param("images:\n- name: web\n---\na: 1\n", "web:1", "2 YAML documents", id="multi-document"),
        pytest.param("images:\n- name: web\n  name: x\n", "web:1", "duplicate key 'name'", id="duplicate-key"),
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

"""A plain install, not a checkout: the wheel pip builds from pyproject.toml, installed into a
directory of its own and run from elsewhere (its dependencies come from the test environment).

Checks what a user of ``pip install imagebump`` meets: the licence is an SPDX expression (no
deprecation warning on install), ``imagebump demo`` has its own extra and names it when it is
missing, and the files ``imagebump run --local`` and ``imagebump demo`` read ship in the wheel.
The missing extra is simulated with an import blocker for ``moto`` in the child process (we cannot
uninstall it from the environment the suite runs in); everything else is real.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy of the source: setuptools writes build/ and *.egg-info into the tree it
    # builds, and two test workers building the same checkout at once trip over each other's files.
    source = tmp_path_factory.mktemp("source") / "imagebump"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache"),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("imagebump-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return target


def _metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return archive.read(name).decode()


def _run(installed: Path, cwd: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Python with the plain install first on the path (ahead of the checkout's editable install)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("IMAGEBUMP_", "PYTHON"))}
    environ.update(PYTHONPATH=str(installed), **env)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_licence_is_an_spdx_expression(wheel: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    metadata = _metadata(wheel)
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert not [line for line in metadata.splitlines() if line.startswith("License:")]


def test_the_demo_has_its_own_extra(wheel: Path) -> None:
    lines = _metadata(wheel).splitlines()
    assert "Provides-Extra: demo" in lines
    assert any(line.startswith("Requires-Dist: moto[server]") and 'extra == "demo"' in line for line in lines)
    # the base install does not pull the emulator in
    assert not any(line.startswith("Requires-Dist: moto") and "extra ==" not in line for line in lines)
    assert "setup demo" in (ROOT / "dev").read_text()  # ./dev demo installs that extra


def test_a_plain_install_ships_what_run_and_demo_read(installed: Path, tmp_path: Path) -> None:
    code = (
        "import json, imagebump, imagebump.commands.run as r, imagebump.local.demo, "
        "imagebump.local.stack as s, imagebump.local.world as w; "
        "print(json.dumps([imagebump.__file__, str(r.DEFAULT_TEMPLATE), str(s.CLOUDFORMATION_TEMPLATE), "
        "r.DEFAULT_TEMPLATE.is_file(), s.CLOUDFORMATION_TEMPLATE.is_file(), w.WORKFLOW_TEMPLATE.is_file()]))"
    )
    proc = _run(installed, tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    module, template, stack, *present = json.loads(proc.stdout)
    for path in (module, template, stack):
        assert Path(path).is_relative_to(installed), path  # the plain install's own files, not the checkout's
    assert present == [True, True, True]


def test_demo_without_its_extra_names_the_extra(installed: Path, tmp_path: Path) -> None:
    blocker = (
        "import sys\n"
        "class NoMoto:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'moto' or name.startswith('moto.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoMoto())\n"
        "from imagebump.cli import main\n"
        "sys.exit(main(['demo']))\n"
    )
    proc = _run(installed, tmp_path, blocker)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'imagebump[demo]'" in proc.stderr
    assert "Traceback" not in proc.stderr and "unexpected error" not in proc.stderr
    assert proc.stderr.count("\n") == 1  # one line: what is missing and the fix


@pytest.mark.slow
def test_the_demo_runs_from_a_plain_install(installed: Path, tmp_path: Path) -> None:
    """With the extra present, the demo runs from the wheel alone, away from any checkout."""
    code = "import sys\nfrom imagebump.cli import main\nsys.exit(main(['demo', '--json']))\n"
    proc = _run(installed, tmp_path, code, HOME=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["ok"] is True


def test_an_editable_install_is_quiet(tmp_path: Path) -> None:
    """``./dev`` installs the checkout editable: a quiet pip install of it prints nothing of
    setuptools' (its "BuildBackendWarning: Editable installation ... !!" block came from the
    meta-path-finder strategy that a flat layout without ``package-dir`` selects)."""
    source = tmp_path / "imagebump"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", "site"
        ),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
        # --ignore-installed: into the prefix only (without it pip uninstalls this suite's own install)
        + ["--ignore-installed", "--prefix", str(tmp_path / "prefix"), "-e", str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    # pip's own notes about this machine's package index are not ours; anything else is
    ours = [
        line for line in proc.stderr.splitlines() if line.strip() and "is ignored: it is neither" not in line
    ]
    assert ours == []

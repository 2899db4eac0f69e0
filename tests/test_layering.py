"""Import rules that keep the layers apart (issue 14), read from the source with ``ast``.

- ``sensors/`` reads results, never the interpreter or the sandbox (not even through another
  module): the local sensor depends on :mod:`workflows.local.results` and :mod:`workflows.local.logs`.
- ``workflows/*.py`` at the top level are declarations (Hera definitions, render, rbac, names):
  none imports the local runtime :mod:`workflows.local`.
- ``steps/``, ``workflows/`` and ``sensors/`` never import the CLI package :mod:`imagebump` (the
  steps image and the version they need are in :mod:`workflows.names` / ``steps.runtime.harness``).
- No module of ``steps/``, ``workflows/``, ``sensors/`` or ``imagebump/`` is over 400 lines (two listed exceptions, each with a ceiling and why).
- :mod:`workflows.names` and ``sensors/`` do not import Hera (checked statically, through every
  project module they import, and by importing them in a fresh interpreter).
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("imagebump", "steps", "workflows", "sensors")


def _file_of(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _direct_imports(module: str) -> frozenset[str]:
    """Every module ``module``'s source imports (anywhere in it), absolute, project or not."""
    path = _file_of(module)
    assert path is not None, module
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            found.add(source)
            found.update(
                f"{source}.{alias.name}" for alias in node.names if _file_of(f"{source}.{alias.name}")
            )
    # importing a.b.c runs a/__init__ and a/b/__init__ first
    found.update(".".join(m.split(".")[:i]) for m in list(found) for i in range(1, m.count(".") + 1))
    return frozenset(found)


def _closure(module: str) -> set[str]:
    """``module`` and everything it imports, transitively through project modules."""
    seen, stack = set(), [module]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.split(".")[0] in PACKAGES and _file_of(current):
            stack.extend(_direct_imports(current))
    return seen


def _modules(folder: str, recursive: bool = False) -> list[str]:
    paths = (ROOT / folder).rglob("*.py") if recursive else (ROOT / folder).glob("*.py")
    return sorted(_module_of(p) for p in paths)


SENSORS = _modules("sensors")
TOP_LEVEL_WORKFLOWS = _modules("workflows")


@pytest.mark.parametrize("module", SENSORS)
def test_sensors_do_not_import_the_interpreter_or_the_sandbox(module: str) -> None:
    forbidden = {"workflows.local.interpreter", "workflows.local.sandbox"}
    assert not (_closure(module) & forbidden), f"{module} loads {sorted(_closure(module) & forbidden)}"


@pytest.mark.parametrize("module", TOP_LEVEL_WORKFLOWS)
def test_top_level_workflows_do_not_import_the_local_runtime(module: str) -> None:
    runtime = sorted(
        m for m in _closure(module) if m == "workflows.local" or m.startswith("workflows.local.")
    )
    assert not runtime, f"{module} (a declaration) imports the local runtime: {runtime}"


@pytest.mark.parametrize("module", ["workflows", "workflows.names", *SENSORS])
def test_names_and_sensors_do_not_import_hera(module: str) -> None:
    hera = sorted(m for m in _closure(module) if m == "hera" or m.startswith("hera."))
    assert not hera, f"{module} imports Hera: {hera}"


def test_importing_names_and_sensors_loads_no_hera() -> None:
    """The same rule at run time, where a third-party import could pull Hera in indirectly."""
    code = (
        "import sys, workflows, workflows.names, " + ", ".join(SENSORS) + "\n"
        "print(sorted(m for m in sys.modules if m == 'hera' or m.startswith('hera.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_rules_can_fail() -> None:
    """The checker sees what it must forbid (a rule that could not fail would prove nothing)."""
    assert "workflows.local.interpreter" in _closure("workflows.local.executor")
    assert "hera.workflows" in _closure("workflows.common")
    assert "imagebump" in _direct_imports("imagebump.cli")  # `from imagebump import X` is seen


STEPS = _modules("steps", recursive=True)


@pytest.mark.parametrize("module", STEPS)
def test_steps_import_nothing_above_them(module: str) -> None:
    """``steps/`` is the bottom layer: it never imports the CLI, the declarations or the sensors."""
    above = sorted(m for m in _closure(module) if m.split(".")[0] in {"imagebump", "workflows", "sensors"})
    assert not above, f"{module} imports {above}"


@pytest.mark.parametrize("package", ["sensors", "workflows.local"])
def test_the_package_docstring_names_every_module_and_what_they_import(package: str) -> None:
    """A newcomer reads ``sensors/`` and ``workflows/local/`` from their ``__init__``: every module is
    named there, and every project module they import (besides their own) is in its "may import"."""
    path = _file_of(package)
    assert path is not None
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    modules = [_module_of(p) for p in sorted(path.parent.glob("*.py")) if p.name != "__init__.py"]
    unnamed = [m for m in modules if f"``{m.rpartition('.')[2]}``" not in doc]
    assert not unnamed, f"{package}/__init__.py does not name {unnamed}"
    imported = {
        dep
        for m in modules
        for dep in _direct_imports(m)
        if dep.split(".")[0] in PACKAGES
        and not dep.startswith(f"{package}.")
        and (file := _file_of(dep)) is not None
        and file.name != "__init__.py"  # a parent package, run on the way to a module
    }
    unlisted = sorted(dep for dep in imported if dep not in doc)
    assert not unlisted, f"{package}/__init__.py's 'may import' list misses {unlisted}"


BELOW_THE_CLI = sorted({*STEPS, *_modules("workflows", recursive=True), *_modules("sensors", recursive=True)})


@pytest.mark.parametrize("module", BELOW_THE_CLI)
def test_nothing_below_the_cli_imports_it(module: str) -> None:
    """``imagebump`` (the CLI) sits on top: steps, declarations, the local runtime and the sensors
    never import it, not even through another module (its ``__init__`` says so)."""
    cli = sorted(m for m in _closure(module) if m == "imagebump" or m.startswith("imagebump."))
    assert not cli, f"{module} imports the CLI package: {cli}"


@pytest.mark.parametrize(
    "package",
    sorted({_module_of(p) for pkg in PACKAGES for p in (ROOT / pkg).rglob("__init__.py")} | {"bench"}),
)
def test_every_package_says_what_lives_there(package: str) -> None:
    """Each package's docstring is a paragraph (what lives there and what it may import)."""
    path = _file_of(package)
    assert path is not None
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert len(doc.split()) >= 12, f"{package}: its __init__ needs a docstring saying what lives there"


def test_the_steps_image_has_one_home() -> None:
    """:mod:`workflows.names` names the steps image; :mod:`imagebump` re-exports it (lazily), and its
    tag is the CLI's version (the installed metadata the declarations read is this source's)."""
    import imagebump
    from workflows import names

    assert (imagebump.IMAGE, imagebump.IMAGE_REPOSITORY) == (names.IMAGE, names.IMAGE_REPOSITORY)
    assert names.IMAGE == f"{names.IMAGE_REPOSITORY}:{imagebump.__version__}"


#: Lines a module may have (issue 14: "no module over ~400 lines except declarations and test data").
MAX_LINES = 400
#: Modules allowed past MAX_LINES, each with its own ceiling and why. Ceilings are today's sizes, so
#: these may shrink and never grow; an entry no longer needed fails below, so the list stays true.
#: No declaration module needs one today (the largest, workflows/image_update.py, is well under).
OVER_THE_LIMIT: dict[str, tuple[int, str]] = {}


def _lines(relative: str) -> int:
    return len((ROOT / relative).read_text().splitlines())


@pytest.mark.parametrize(
    "relative",
    sorted(p.relative_to(ROOT).as_posix() for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")),
)
def test_no_module_is_over_400_lines(relative: str) -> None:
    """A module is small enough to read in one sitting; what grows past it is split by job."""
    ceiling, why = OVER_THE_LIMIT.get(relative, (MAX_LINES, ""))
    lines = _lines(relative)
    assert lines <= ceiling, (
        f"{relative} has {lines} lines (at most {ceiling}{': ' + why if why else ''}): split it by job"
    )


def test_every_exception_to_the_size_limit_is_still_needed() -> None:
    stale = [r for r in OVER_THE_LIMIT if not (ROOT / r).is_file() or _lines(r) <= MAX_LINES]
    assert stale == [], f"back under {MAX_LINES} lines or gone: remove from OVER_THE_LIMIT: {stale}"

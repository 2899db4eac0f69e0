"""The steps packages say, in one short paragraph each, what lives there (issue 14), and the package
docstring of ``steps`` accounts for every module and subpackage. Who may import whom is not read
from prose: tests/test_layering.py enforces it on the imports themselves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("steps", "steps/rules", "steps/kustomize")


def _doc(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_docstring_is_a_title_and_one_short_paragraph(package: str) -> None:
    doc = _doc(ROOT / package / "__init__.py")
    title, *paragraphs = doc.split("\n\n")
    assert len(paragraphs) == 1, f"{package}: a title line and one paragraph, not {len(paragraphs)}"
    assert len(doc.splitlines()) <= 24, (
        f"{package}: {len(doc.splitlines())} lines; move reference text to modules"
    )


def test_the_steps_docstring_names_every_module_of_the_package() -> None:
    doc = _doc(ROOT / "steps" / "__init__.py")
    modules = sorted(p.stem for p in (ROOT / "steps").glob("*.py") if p.stem != "__init__")
    packages = sorted(p.parent.name for p in (ROOT / "steps").glob("*/__init__.py"))
    missing = [m for m in modules if f"``{m}``" not in doc] + [p for p in packages if f"``{p}/``" not in doc]
    assert missing == [], f"steps/__init__.py does not say what these are: {missing}"

"""The steps packages say, in one paragraph each, what lives there and what it may import (issue 14:
"each package has a one-paragraph docstring saying what lives there and what it may import"); the
long reference text lives in the modules it describes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("steps", "steps/rules", "steps/kustomize")


def _doc(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_docstring_is_one_paragraph_with_its_import_rule(package: str) -> None:
    doc = _doc(ROOT / package / "__init__.py")
    title, *paragraphs = doc.split("\n\n")
    assert len(paragraphs) == 1, f"{package}: a title line and one paragraph, not {len(paragraphs)}"
    assert len(doc.splitlines()) <= 24, (
        f"{package}: {len(doc.splitlines())} lines; move reference text to modules"
    )
    assert "import" in paragraphs[0], f"{package}: say what it may import"


def test_the_steps_docstring_names_every_module_of_the_package() -> None:
    doc = _doc(ROOT / "steps" / "__init__.py")
    modules = sorted(p.stem for p in (ROOT / "steps").glob("*.py") if p.stem != "__init__")
    packages = sorted(p.parent.name for p in (ROOT / "steps").glob("*/__init__.py"))
    missing = [m for m in modules if f"``{m}``" not in doc] + [p for p in packages if f"``{p}/``" not in doc]
    assert missing == [], f"steps/__init__.py does not say what these are: {missing}"


def test_the_rules_reference_text_lives_in_its_modules() -> None:
    """What each rules field means is in rule.py, the hostile-pattern caps in patterns.py."""
    assert "``githubRepository`` = ``https://HOST/OWNER/REPO/PATH…``" in _doc(ROOT / "steps/rules/rule.py")
    assert "atomic groups and possessive quantifiers" in _doc(ROOT / "steps/rules/patterns.py")

"""Every exception class the steps define lives in :mod:`steps.domain.errors` (issue 14: "every exception
the steps raise or catch is in steps/domain/errors.py"), so one file answers "what can go wrong here?"."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _step_modules() -> list[str]:
    return sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "steps").rglob("*.py")
    )


def test_every_exception_class_of_the_steps_is_declared_in_errors() -> None:
    elsewhere = []
    for name in _step_modules():
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
                and name != "steps.domain.errors"
            ):
                elsewhere.append(f"{name}.{attr}")
    assert elsewhere == [], f"declare these in steps/domain/errors.py and import them: {elsewhere}"


def test_the_errors_moved_here_keep_their_kinds() -> None:
    """Callers that caught the old kinds still catch them: both are ValueErrors."""
    from steps.domain import errors
    from steps.runtime import launcher as _entry

    assert _entry.BadInput is errors.BadInput and issubclass(errors.BadInput, ValueError)
    assert issubclass(errors.CarriedObjectsError, ValueError)
    assert not issubclass(errors.EditMismatch, errors.ImagebumpError)  # never leaves the kustomize package

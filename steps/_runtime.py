"""What every step needs from its runtime, without importing Hera.

A step runs as ``python -m hera.workflows.runner -e steps.<module>:run ARGS.json``. Hera prints the
return value (our pydantic output model, as JSON) as the template's ``result``; named output
parameters are files under ``$hera__outputs_directory/parameters/<name>`` that the template
declares with ``valueFrom.path`` (and a ``default`` for skipped steps). :func:`emit_outputs`
writes those files from the output model, one per field, in kebab-case.

:func:`step_entry` wraps a step's ``run`` so known errors become a one-line message on stderr and
the exit code Argo's retryStrategy keys on (see :mod:`steps.errors`).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, TypeVar

from pydantic import BaseModel

from steps.errors import ImagebumpError

DEFAULT_OUTPUTS_DIRECTORY = "/tmp/hera-outputs"

F = TypeVar("F", bound=Callable[..., Any])


def outputs_directory() -> Path:
    """The directory Hera's runner (and Argo's executor) reads output parameters from."""
    return Path(os.environ.get("hera__outputs_directory", DEFAULT_OUTPUTS_DIRECTORY))


def kebab(name: str) -> str:
    """``pr_url`` -> ``pr-url``: Python names are snake_case, Argo names kebab-case."""
    return name.replace("_", "-")


def output_value(value: Any) -> str:
    """How a field is written as an Argo parameter: strings as is, everything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return "[" + ",".join(v.model_dump_json() for v in value) + "]"
    return json.dumps(value, default=str)


def emit_outputs(output: BaseModel) -> BaseModel:
    """Write each field of ``output`` to ``<outputs dir>/parameters/<kebab-name>``; return it."""
    directory = outputs_directory() / "parameters"
    directory.mkdir(parents=True, exist_ok=True)
    for name in type(output).model_fields:
        (directory / kebab(name)).write_text(output_value(getattr(output, name)))
    return output


def step_entry(fn: F) -> F:
    """Wrap a step's ``run``: write its outputs; map known errors to a message and exit code.

    ``functools.wraps`` keeps the signature, which Hera's runner reads to parse the inputs.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            result = fn(*args, **kwargs)
        except ImagebumpError as exc:
            print(f"imagebump: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(exc.exit_code) from None
        if isinstance(result, BaseModel):
            emit_outputs(result)
        return result

    return wrapper  # type: ignore[return-value]

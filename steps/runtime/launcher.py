"""A step's process entry point that accepts exactly what Hera's runner accepts, without Hera.

Every step template runs it (issue 15): Hera's runner constructor renders the template
(``source: '{{inputs.parameters}}'``, inputs from the function's signature), with this module in
the arguments instead of ``hera.workflows.runner`` (:class:`workflows.common.StepRunner`); Argo's
executor writes that source to a file and appends its path to the arguments. Hera's runner (hera
7.1.0, ``hera/workflows/_runner/util.py`` ``_run``) imports all of ``hera.workflows`` (its
generated Argo models, ``requests``, ``yaml``, …: 0.6–2 s of a pod's cold start here, bench/README.md)
to call one function. This module does the same call for what our steps use, importing only the
step's module and msgspec, that for inputs that are not strings (tests/steps/runtime/test_entry.py runs every step through both and compares):

``python -m steps.runtime.launcher -e MODULE:FUNCTION ARGS_PATH``

* argv: the same flags as Hera's (``--entrypoint``/``-e`` and the positional path, parsed by
  :mod:`argparse` as Hera does, so a usage error exits 2 with argparse's message as there);
* inputs: ``ARGS_PATH`` holds Argo's ``{{inputs.parameters}}`` — a JSON list of objects; items
  without both ``name`` and ``value`` are skipped; an empty file or ``null`` is no inputs. Each
  parameter of the function (signature as :func:`inspect.signature` shows it, through
  ``functools.wraps``) takes the value of the input of the same name, missing ones are a
  ``KeyError`` as in Hera (the templates render every input). A ``str`` (or ``str | None``)
  parameter gets the string as is; any other annotation gets ``json.loads(value)`` (the string
  itself when it is not JSON) validated as Hera's ``_parse`` + ``validate_call`` do: by
  ``msgspec.convert(..., strict=False)`` for our contracts and scalars (a contract through
  pydantic, as Hera's runner does it, is validated by the same :meth:`Contract.model_validate`);
  inputs that are not parameters (``env``) are ignored;
* outputs: nothing of its own: our steps write ``$hera__outputs_directory/parameters/<name>``
  themselves (:func:`steps.runtime.harness.emit_outputs`); the return value is printed to stdout as
  Hera prints it (a string as is, anything else ``json.dumps`` with a contract or a pydantic model
  as its JSON form; nothing for a falsy result) — Argo's ``result``;
* exit codes: whatever the step raises as ``SystemExit`` (0, 2, 3, 75 from
  :func:`steps.runtime.harness.step_entry`) passes through unchanged; an uncaught exception is a
  traceback and exit 1, as in Hera. One deliberate difference: inputs that do not validate
  (a user's ``concurrency=abc``) are one JSON error record and exit 2 (bad input, not retried)
  where Hera's runner prints a traceback and exits 1 (retried four times).

Moved steps: a Workflow resubmitted (or retried) from the Argo UI runs the manifest it was made from,
which may name a step where an older release kept it. :data:`MOVED` maps each such entrypoint to
where the step lives now (looked up before the import), so those Workflows still run; Hera's runner
has no such map (the templates render this module, not Hera's).

Not supported (refused with exit 3 before the step runs, so a step that starts using them is
noticed): Hera's ``Annotated[..., Parameter/Artifact]`` inputs and ``Input``/``Output`` classes.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import json
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from steps.domain.errors import EXIT_CONFIG as EXIT_BAD_INPUT
from steps.domain.errors import BadInput

EXIT_UNSUPPORTED = 3

#: Entrypoints older manifests name → the same step's entrypoint now (issue 32: each step a package
#: with ``step`` and ``decide``). Never remove an entry: Argo keeps Workflows, and their manifests,
#: for as long as their TTL says, and any of them can be resubmitted.
MOVED: dict[str, str] = {
    "steps.edit_kustomize:run": "steps.edit_kustomize.step:run",
    "steps.resolve_image:run": "steps.resolve_image.step:run",
    "steps.verify_live.states:run": "steps.live_states.step:run",
}


class Arguments(typing.NamedTuple):
    """What Hera's runner's parser gives: the ``MODULE:FUNCTION`` and the inputs file."""

    entrypoint: str
    args_path: Path


def _parse_args(argv: list[str] | None = None) -> Arguments:
    """Hera's runner's arguments. The form the templates render (``-e MODULE:FUNCTION PATH``) is
    read directly (what the parser gives, tests compare), without importing :mod:`argparse`."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 3 and args[0] in ("-e", "--entrypoint") and not any(a.startswith("-") for a in args[1:]):
        return Arguments(args[1], Path(args[2]))
    return _argparse(args)


def _argparse(argv: list[str]) -> Arguments:
    """Hera's runner's parser (hera 7.1.0 ``_runner/util.py``): every other form, usage errors exit 2."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--entrypoint", "-e", type=str, required=True)
    parser.add_argument("args_path", type=Path)
    parsed = parser.parse_args(argv)
    return Arguments(parsed.entrypoint, parsed.args_path)


def read_inputs(path: Path) -> dict[str, str]:
    """Argo's ``{{inputs.parameters}}`` file → ``{name: value}`` (Hera's rules, see module doc)."""
    items = json.loads(path.read_text() or "[]") or []
    if not isinstance(items, list):
        raise TypeError(f"{path}: expected a JSON list of parameters, got {type(items).__name__}")
    inputs: dict[str, str] = {}
    for item in items:
        if isinstance(item, dict) and "name" in item and "value" in item:
            inputs[str(item["name"])] = item["value"]
    return inputs


def _is_str(annotation: Any) -> bool:
    if annotation is str:
        return True
    args = typing.get_args(annotation)
    return bool(args) and all(a in (str, type(None)) for a in args)


def _unsupported(function: Any) -> str | None:
    sig = inspect.signature(function)
    for name, param in sig.parameters.items():
        if typing.get_origin(param.annotation) is typing.Annotated:
            return f"parameter {name!r} is Annotated (Hera Parameter/Artifact): run it with Hera's runner"
        if isinstance(param.annotation, str):
            return f"parameter {name!r} has a string annotation (from __future__ import annotations?)"
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            return f"parameter {name!r} is *args/**kwargs"
    for cls in getattr(sig.return_annotation, "__mro__", ()):
        if cls.__module__.startswith("hera."):
            return "the return annotation is a Hera Output class: run it with Hera's runner"
    return None


def function_kwargs(function: Any, inputs: dict[str, str]) -> dict[str, Any]:
    """The keyword arguments Hera's runner would call ``function`` with (validated).

    msgspec is imported for the first input that is not a string: a step taking only strings (the
    exit handler) may end without it (issue 33). A contract input (:class:`steps.domain.contract.
    Contract`) and the scalars our steps take are validated by msgspec as Hera's runner validates
    them with pydantic (lax: ``"3"`` is an int). No step takes a pydantic model."""
    kwargs: dict[str, Any] = {}
    for name, param in inspect.signature(function).parameters.items():
        value = inputs[name]  # KeyError, as Hera's _map_function_annotations
        annotation = param.annotation
        if _is_str(annotation):
            kwargs[name] = value
            continue
        try:
            loaded: Any = json.loads(value)
        except (json.JSONDecodeError, TypeError):
            loaded = value
        if annotation is inspect.Parameter.empty:
            kwargs[name] = loaded
            continue
        kwargs[name] = _validated(name, annotation, loaded, value)
    return kwargs


def _validated(name: str, annotation: Any, loaded: Any, value: str) -> Any:
    """``loaded`` as ``annotation``; raises BadInput naming the input and the field at fault."""
    import msgspec

    try:
        return msgspec.convert(loaded, annotation, strict=False)
    except msgspec.ValidationError as exc:  # "Expected `int`, got `str` - at `$.rule`"
        raise BadInput(f"input {name}: {exc} (got {value[:80]!r})") from None


def serialize(value: Any) -> str:
    """What Hera's ``hera.shared.serialization.serialize`` prints for a step's return value."""
    if isinstance(value, str):
        return value

    def default(o: Any) -> Any:
        if hasattr(o, "__struct_fields__"):  # a contract (a msgspec struct)
            return o.model_dump(mode="json")
        dump = getattr(o, "model_dump", None)
        if dump is None:
            raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")
        return dump(by_alias=True, mode="json")

    return json.dumps(value, default=default)


def _bad_input(step: str, exc: Exception) -> None:
    record = {
        "level": "error",
        "component": "step",
        "step": step,
        "logger": __name__,
        "message": f"bad input: {exc}"[:2000],
        "error": type(exc).__name__,
        "exit_code": EXIT_BAD_INPUT,
    }
    try:
        from steps.runtime.harness import redact, utc_timestamp

        record = {"ts": utc_timestamp(), **record, "message": redact(record["message"])}
    except ImportError:  # pragma: no cover - steps.runtime.harness is always there in the image
        pass
    sys.stderr.write(json.dumps(record) + "\n")


def main(argv: list[str] | None = None, *, imported: Callable[[], None] | None = None) -> int:
    """Run the step; ``imported()`` (when given) is called once the step's module is imported."""
    args = _parse_args(argv)
    module_name, function_name = MOVED.get(args.entrypoint, args.entrypoint).split(":")
    module = importlib.import_module(module_name)
    function = getattr(module, function_name)
    if imported is not None:
        imported()
    function = getattr(function, "wrapped_function", function)  # a Hera @script, as Hera unwraps it
    reason = _unsupported(function)
    if reason:
        sys.stderr.write(f"steps.runtime.launcher: {args.entrypoint}: {reason}\n")
        return EXIT_UNSUPPORTED
    inputs = read_inputs(args.args_path)
    try:
        kwargs = function_kwargs(function, inputs)
    except BadInput as exc:
        # the step's name in its log records, as steps.runtime.harness names it (STEP_NAME of a
        # step package's step module, else the module's own name)
        step = getattr(module, "STEP_NAME", None) or module_name.rsplit(".", 1)[-1].replace("_", "-")
        _bad_input(step, exc)
        return EXIT_BAD_INPUT
    result = function(**kwargs)
    if result:
        print(serialize(result))
    return 0


def _keep_imports() -> None:
    """What the step imported lives as long as the process: out of the collector's sight
    (:func:`gc.freeze`), and collection back on for what the step itself makes."""
    gc.freeze()
    gc.enable()


if __name__ == "__main__":
    # A step process is short: its cyclic collector only costs it time where nothing can be freed.
    # Off while the step's modules import (no garbage worth collecting; 10-15% of the imports'
    # time), on for the step's own work, and nothing left for the collections the interpreter
    # runs at exit: those walk every object the imports made, 0.1-0.4 s per process measured here
    # (bench/README.md), longer than the exit of a forked step (which skips them: os._exit).
    gc.disable()
    try:
        code = main(imported=_keep_imports)
    finally:
        gc.freeze()
    sys.exit(code)

"""A minimal stand-in for ``python -m hera.workflows.runner`` — measured as a proposed fix.

Same contract as Hera's runner for what imagebump's steps use: ``-e module:function ARGS.json``
where ARGS.json is ``[{"name": ..., "value": ...}, ...]``; ``str`` parameters are passed as is,
every other annotated parameter is parsed from JSON and validated with pydantic's TypeAdapter;
the return value is printed as JSON (the template's ``result``). Output parameter files are
written by the step itself (``steps._runtime.step_entry``), exactly as under Hera's runner.

Why: ``hera.workflows.runner`` imports all of ``hera.workflows`` (the generated Argo models:
~0.5–1.5 s of CPU) in every step process, only to call one function. The benchmark runs the
rendered template with its ``args`` pointed here (``bench.waste``) to show the difference; the
proposal for the owners is in ``bench/README.md``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3 or args[0] not in ("-e", "--entrypoint"):
        print("usage: python -m bench.fastrunner -e module:function ARGS.json", file=sys.stderr)
        return 2
    module_name, _, function_name = args[1].partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    raw = json.loads(Path(args[2]).read_text() or "[]") or []
    given = {p["name"].replace("-", "_"): p["value"] for p in raw if "name" in p and "value" in p}
    signature = inspect.signature(function)
    kwargs = {}
    for name, param in signature.parameters.items():
        if name not in given:
            continue
        value = given[name]
        annotation = param.annotation
        if annotation is str or annotation is inspect.Parameter.empty:
            kwargs[name] = value
            continue
        from pydantic import TypeAdapter

        kwargs[name] = TypeAdapter(annotation).validate_python(json.loads(value))
    result = function(**kwargs)
    if result is not None:
        dump = getattr(result, "model_dump_json", None)
        print(dump() if dump else json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

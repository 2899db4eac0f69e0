"""Pure pieces of Argo's template language, as far as the local runtime speaks it.

Go durations, ``{{...}}`` variables and their substitution, the ``when``/retry condition
evaluator, ``lastRetry.*`` operands, dag ``depends``, and the static check of which variables a
field may name. No I/O and no state; table-tested in tests/workflows/local/test_expressions.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from steps.domain.errors import ConfigError
from workflows.local.errors import UnsupportedFeatureError

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any, where: str) -> float:
    """Argo duration (``"10s"``, ``"1m30s"``, ``"100ms"``, ``"5"`` or an int) → seconds."""
    text = str(value).strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise UnsupportedFeatureError(where, f"duration {text!r} is not a Go duration like '10s'")
    return sum(float(n) * _UNITS[u] for n, u in parts)


VAR = re.compile(r"\{\{\s*(.*?)\s*\}\}")


def variables(text: str) -> list[str]:
    """The names inside each ``{{ ... }}`` of ``text``, in order."""
    return VAR.findall(text)


def substitute(text: str, lookup: Callable[[str], str]) -> str:
    """``text`` with each ``{{name}}`` replaced by ``lookup(name)``."""
    return VAR.sub(lambda m: lookup(m.group(1)), text)


def go_json(value: Any) -> str:
    """JSON as Argo (Go's encoding/json) writes it into ``{{item}}``: compact."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_TOKEN = re.compile(r"""\s*('(?:[^']*)'|"(?:[^"]*)"|==|!=|<=|>=|<|>|&&|\|\||[^\s'"=!<>&|]+)""")


def _tokens(text: str) -> list[str]:
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot read {text!r} at {pos}")
        out.append(m.group(1))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


def literal(token: str) -> Any:
    """A condition operand as a value: a quoted string, an int, a float, or the bare word itself."""
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"":
        return token[1:-1]
    try:
        return int(token)
    except ValueError:
        pass
    try:
        return float(token)
    except ValueError:
        return token


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _compare(a: Any, op: str, b: Any) -> bool:
    if isinstance(a, (int, float)) != isinstance(b, (int, float)):
        a, b = str(a), str(b)
    return _OPS[op](a, b)


def evaluate_condition(text: str, resolve: Callable[[str], Any] = literal) -> bool:
    """Evaluate a ``when``/retry condition of the shape our templates use.

    Grammar: ``clause (('&&'|'||') clause)*`` (``&&`` binds tighter), ``clause`` is ``true``,
    ``false`` or ``operand OP operand`` with OP one of ``== != < <= > >=``; an operand is a quoted
    string, a number or a bare word (``resolve`` may map names such as ``lastRetry.exitCode``).
    Raises ValueError for anything else.
    """
    return _evaluate(_tokens(text), resolve)


def _evaluate(tokens: list[str], resolve: Callable[[str], Any]) -> bool:
    """:func:`evaluate_condition` of ``text``'s tokens."""
    if not tokens:
        raise ValueError("empty condition")
    disjuncts: list[list[list[str]]] = [[[]]]
    for tok in tokens:
        if tok == "||":
            disjuncts.append([[]])
        elif tok == "&&":
            disjuncts[-1].append([])
        else:
            disjuncts[-1][-1].append(tok)

    def clause(parts: list[str]) -> bool:
        if len(parts) == 1 and parts[0].lower() in ("true", "false"):
            return parts[0].lower() == "true"
        if len(parts) == 3 and parts[1] in _OPS:
            return _compare(resolve(parts[0]), parts[1], resolve(parts[2]))
        raise ValueError(f"cannot evaluate {' '.join(parts)!r}")

    return any(all(clause(c) for c in conj) for conj in disjuncts)


#: A bare word govaluate reads as one operand (Argo's ``when`` then takes it as a string): a letter,
#: then letters, digits and ``_`` (a ``.`` makes it an accessor, which fails with no parameters).
_GOVALUATE_WORD = re.compile(r"[^\W\d_]\w*")
#: A bare number govaluate reads: digits and points that Go's ``strconv.ParseFloat`` takes.
_GOVALUATE_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)")


def evaluate_when(text: str) -> bool:
    """A step's ``when`` (after substitution), read as Argo reads it: govaluate, with bare words as
    strings (argo-workflows ``workflow/controller/steps.go`` ``shouldExecute``).

    govaluate splits an unquoted operand at anything but letters, digits and ``_``
    (Knetic/govaluate ``parsing.go``: ``isVariableName``; ``-``, ``+``, ``/``, ``:`` are operators), so
    ``pr-created == committed`` is ``pr - created == committed`` and fails ("Value 'pr' cannot be
    used with the modifier '-'"), and Argo errors the step. Such an operand is a ValueError here
    too, naming the fix: quote it (``'{{steps.x.outputs.parameters.action}}' == 'committed'``)."""
    tokens = _tokens(text)
    for token in tokens:
        if token in ("&&", "||") or token in _OPS or token[0] in "'\"":
            continue
        if token in ("in", "IN"):
            raise ValueError(f"govaluate reads the bare word {token!r} as its 'in' operator: quote it")
        if not (_GOVALUATE_WORD.fullmatch(token) or _GOVALUATE_NUMBER.fullmatch(token)):
            raise ValueError(
                f"govaluate does not read the bare operand {token!r} as one string (Argo errors the "
                "step): quote it, e.g. '{{steps.NAME.outputs.parameters.P}}' == 'value'"
            )
    return _evaluate(tokens, literal)


def retry_operand(token: str, exit_code: int | None, status: str) -> Any:
    """A retry ``expression`` operand: ``lastRetry.exitCode`` (-1 when unknown, ``asInt(...)``
    allowed), ``lastRetry.status``, or a literal. Any other ``lastRetry.*`` is a ValueError."""
    m = re.fullmatch(r"(?:asInt\()?lastRetry\.(exitCode|status)\)?", token)
    if m:
        if m.group(1) == "exitCode":
            return exit_code if exit_code is not None else -1
        return status
    if token.startswith("lastRetry."):
        raise ValueError(f"unknown {token}")
    return literal(token)


def task_dependencies(task: dict[str, Any], where: str) -> list[str]:
    """The tasks a dag task waits for: ``dependencies`` plus ``depends`` (``a && b.Succeeded`` only)."""
    deps = list(task.get("dependencies") or [])
    depends = task.get("depends")
    if depends:
        for part in re.split(r"\s*&&\s*", str(depends).strip()):
            m = re.fullmatch(r"([A-Za-z0-9_-]+)(?:\.Succeeded)?", part)
            if not m:
                raise UnsupportedFeatureError(f"{where}.depends", f"{depends!r} (only 'a && b.Succeeded')")
            deps.append(m.group(1))
    return deps


def dag_ancestors(graph: dict[str, set[str]], name: str) -> set[str]:
    """Tasks ``name`` depends on, directly or not; a cycle is a ConfigError."""
    seen: set[str] = set()
    stack = list(graph[name])
    while stack:
        dep = stack.pop()
        if dep == name:
            raise ConfigError(f"dag task {name!r} depends on itself (a dependency cycle)")
        if dep not in seen:
            seen.add(dep)
            stack.extend(graph[dep])
    return seen


def check_variables(
    text: str,
    where: str,
    *,
    workflow_parameters: set[str] | dict[str, Any],
    input_names: set[str],
    visible_steps: set[str],
    has_item: bool,
    prefix: str = "steps",
    allow_all_inputs: bool = False,
) -> None:
    """Refuse any ``{{variable}}`` in ``text`` the local runtime cannot resolve at ``where``.

    Allowed: ``workflow.name``, ``workflow.status`` and ``workflow.failures`` (the exit handler), ``workflow.parameters.P`` (declared), ``inputs.parameters.P``
    (declared by the template), ``inputs.parameters`` (the script source only), ``item`` /
    ``item.F`` (under withParam/withItems), ``<prefix>.S.outputs.parameters.P`` and
    ``<prefix>.S.outputs.result`` for an earlier step/task ``S``.
    """
    if text.count("{{") != len(variables(text)):
        raise UnsupportedFeatureError(where, f"unbalanced '{{{{' in {text!r}")
    for var in variables(text):
        if var.startswith("="):
            raise UnsupportedFeatureError(where, f"expression {{{{{var}}}}}")
        parts = var.split(".")
        if var in ("workflow.name", "workflow.status", "workflow.failures"):
            continue  # status, failures: resolved in the exit handler only (scope.Scope.lookup)
        if len(parts) == 3 and parts[:2] == ["workflow", "parameters"]:
            if parts[2] not in workflow_parameters:
                raise ConfigError(f"{where}: {{{{{var}}}}} names no spec.arguments parameter")
            continue
        if len(parts) == 3 and parts[:2] == ["inputs", "parameters"]:
            if parts[2] not in input_names:
                raise ConfigError(f"{where}: {{{{{var}}}}} names no input of this template")
            continue
        if var == "inputs.parameters" and allow_all_inputs:
            continue
        if parts[0] == "item" and has_item and len(parts) <= 2:
            continue
        if (
            parts[0] in ("steps", "tasks")
            and parts[0] == prefix
            and len(parts) >= 4
            and parts[2] == "outputs"
        ):
            if parts[1] not in visible_steps:
                raise ConfigError(f"{where}: {{{{{var}}}}} names no earlier step/task")
            if (len(parts) == 5 and parts[3] == "parameters") or (len(parts) == 4 and parts[3] == "result"):
                continue
        raise UnsupportedFeatureError(where, f"variable {{{{{var}}}}}")


__all__ = [
    "VAR",
    "check_variables",
    "dag_ancestors",
    "evaluate_condition",
    "evaluate_when",
    "go_json",
    "literal",
    "parse_duration",
    "retry_operand",
    "substitute",
    "task_dependencies",
    "variables",
]

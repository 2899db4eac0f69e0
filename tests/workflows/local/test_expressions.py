"""Table tests of the local runtime's pure expression pieces (workflows/local/expressions.py).

No processes, no files: durations, ``{{...}}`` substitution, ``when``/retry conditions, dag
``depends`` and the static variable check, each as the executor meets them in a template.
"""

from __future__ import annotations

import pytest

from steps.domain.errors import ConfigError
from workflows.local.errors import NOT_SUPPORTED, UnsupportedFeatureError
from workflows.local.expressions import (
    check_variables,
    dag_ancestors,
    evaluate_condition,
    go_json,
    parse_duration,
    retry_operand,
    substitute,
    task_dependencies,
    variables,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("true", True, id="true"),
        pytest.param("false", False, id="false"),
        pytest.param("TRUE", True, id="true-any-case"),
        pytest.param("true == true", True, id="eq"),
        pytest.param("'a' != 'a'", False, id="ne-quoted"),
        pytest.param('"b" == b', True, id="quoted-equals-bare"),
        pytest.param("false == true || 1 == 1", True, id="or"),
        pytest.param("true == true && 1 == 2", False, id="and"),
        pytest.param("1 == 2 && 1 == 1 || 2 == 2", True, id="and-binds-tighter"),
        pytest.param("10 > 9", True, id="numbers-compare-as-numbers"),
        pytest.param("'10' > '9'", False, id="strings-compare-as-strings"),
        pytest.param("2 == '2'", True, id="number-vs-string-as-text"),
        pytest.param("1.5 >= 1.5", True, id="float"),
    ],
)
def test_evaluate_condition(text: str, expected: bool) -> None:
    assert evaluate_condition(text) is expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("a b", id="two-words"),
        pytest.param("1 ==", id="no-right-operand"),
        pytest.param("a = b", id="single-equals"),
        pytest.param("x && ", id="dangling-and"),
    ],
)
def test_evaluate_condition_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(ValueError):
        evaluate_condition(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("10s", 10, id="s"),
        pytest.param("1m30s", 90, id="m-s"),
        pytest.param("100ms", 0.1, id="ms"),
        pytest.param("5", 5, id="bare"),
        pytest.param(7, 7, id="int"),
        pytest.param("1h", 3600, id="h"),
        pytest.param("1.5s", 1.5, id="fraction"),
        pytest.param("250us", 0.00025, id="us"),
    ],
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text, "x") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["ten", "10 s", "1d", "s", "-1s"])
def test_parse_duration_refuses_what_go_would_not_read(text: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match=rf"^{NOT_SUPPORTED}backoff\.duration: duration"):
        parse_duration(text, "backoff.duration")


@pytest.mark.parametrize(
    ("token", "exit_code", "status", "expected"),
    [
        pytest.param("lastRetry.exitCode", 2, "Failed", 2, id="exit-code"),
        pytest.param("asInt(lastRetry.exitCode)", 75, "Failed", 75, id="asInt"),
        pytest.param("lastRetry.exitCode", None, "Error", -1, id="unknown-exit-code"),
        pytest.param("lastRetry.status", 1, "Error", "Error", id="status"),
        pytest.param("'Failed'", 1, "Error", "Failed", id="literal"),
        pytest.param("2", 1, "Error", 2, id="number"),
    ],
)
def test_retry_operand(token: str, exit_code: int | None, status: str, expected: object) -> None:
    assert retry_operand(token, exit_code, status) == expected


def test_retry_operand_refuses_unknown_last_retry_fields() -> None:
    with pytest.raises(ValueError, match="unknown lastRetry.duration"):
        retry_operand("lastRetry.duration", 1, "Failed")


@pytest.mark.parametrize(
    ("exit_code", "retried"),
    [pytest.param(2, False, id="bad-input-not-retried"), pytest.param(75, True, id="transient-retried")],
)
def test_the_templates_retry_expression(exit_code: int, retried: bool) -> None:
    """The expression workflows/common.py renders: everything but exit 2 is retried."""
    expression = "asInt(lastRetry.exitCode) != 2"
    assert evaluate_condition(expression, lambda t: retry_operand(t, exit_code, "Failed")) is retried


@pytest.mark.parametrize(
    ("text", "names", "rendered"),
    [
        pytest.param("plain", [], "plain", id="no-variables"),
        pytest.param("{{a}}-{{ b }}", ["a", "b"], "A-B", id="spaces-inside"),
        pytest.param(
            "{{inputs.parameters.x}}/{{item}}",
            ["inputs.parameters.x", "item"],
            "INPUTS.PARAMETERS.X/ITEM",
            id="dots",
        ),
    ],
)
def test_variables_and_substitute(text: str, names: list[str], rendered: str) -> None:
    assert variables(text) == names
    assert substitute(text, str.upper) == rendered


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param({"a": 1, "b": [1, 2]}, '{"a":1,"b":[1,2]}', id="compact"),
        pytest.param("ü", '"ü"', id="not-ascii-escaped"),
    ],
)
def test_go_json(value: object, text: str) -> None:
    assert go_json(value) == text


@pytest.mark.parametrize(
    ("task", "deps"),
    [
        pytest.param({"name": "c"}, [], id="none"),
        pytest.param({"name": "c", "dependencies": ["a"]}, ["a"], id="dependencies"),
        pytest.param({"name": "c", "depends": "a && b.Succeeded"}, ["a", "b"], id="depends"),
        pytest.param({"name": "c", "dependencies": ["a"], "depends": "b"}, ["a", "b"], id="both"),
    ],
)
def test_task_dependencies(task: dict, deps: list[str]) -> None:
    assert task_dependencies(task, "dag.tasks[2]") == deps


@pytest.mark.parametrize("depends", ["a || b", "a.Failed", "!a"])
def test_task_dependencies_refuses_other_depends(depends: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match=r"dag\.tasks\[0\]\.depends"):
        task_dependencies({"name": "c", "depends": depends}, "dag.tasks[0]")


def test_dag_ancestors_and_cycles() -> None:
    graph = {"a": set(), "b": {"a"}, "c": {"b"}}
    assert dag_ancestors(graph, "c") == {"a", "b"}
    with pytest.raises(ConfigError, match="'a' depends on itself"):
        dag_ancestors({"a": {"b"}, "b": {"a"}}, "a")


_CONTEXT = {
    "workflow_parameters": {"event": None},
    "input_names": {"path"},
    "visible_steps": {"resolve"},
    "has_item": True,
}


@pytest.mark.parametrize(
    "text",
    [
        "{{workflow.name}}",
        "{{workflow.parameters.event}}",
        "{{inputs.parameters.path}}",
        "{{item}} {{item.env}}",
        "{{steps.resolve.outputs.parameters.targets}}",
        "{{steps.resolve.outputs.result}}",
    ],
)
def test_check_variables_accepts(text: str) -> None:
    check_variables(text, "where", **_CONTEXT)


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        pytest.param("{{=sprig.upper('a')}}", UnsupportedFeatureError, "expression", id="expression"),
        pytest.param("{{workflow.uid}}", UnsupportedFeatureError, "variable {{workflow.uid}}", id="unknown"),
        pytest.param("{{a", UnsupportedFeatureError, "unbalanced", id="unbalanced"),
        pytest.param(
            "{{workflow.parameters.x}}", ConfigError, "names no spec.arguments", id="undeclared-param"
        ),
        pytest.param("{{inputs.parameters.x}}", ConfigError, "names no input", id="undeclared-input"),
        pytest.param("{{steps.later.outputs.result}}", ConfigError, "no earlier step", id="later-step"),
        pytest.param(
            "{{tasks.resolve.outputs.result}}", UnsupportedFeatureError, "variable", id="tasks-in-steps"
        ),
        pytest.param(
            "{{inputs.parameters}}", UnsupportedFeatureError, "variable", id="all-inputs-outside-source"
        ),
    ],
)
def test_check_variables_refuses(text: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message.replace("{", r"\{").replace("}", r"\}").replace(".", r"\.")):
        check_variables(text, "where", **_CONTEXT)


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        pytest.param("committed == committed && true == true", True, id="bare-words"),
        pytest.param("'pr-created' == 'committed'", False, id="quoted-hyphen"),
        pytest.param("Succeeded == Succeeded && 3 > 0", True, id="number"),
        pytest.param("pr-created == committed", ValueError, id="hyphen-is-minus"),
        pytest.param("branch-taken != committed", ValueError, id="hyphen-is-minus-2"),
        pytest.param("1.4.2 == x", ValueError, id="not-a-float"),
        pytest.param("a.b == c", ValueError, id="accessor"),
        pytest.param("in == x", ValueError, id="in-operator"),
    ],
)
def test_when_reads_bare_words_as_govaluate_does(when, expected) -> None:
    """Argo's ``when`` is govaluate with variables turned into strings (workflow/controller/steps.go
    ``shouldExecute``): a bare word is letters, digits and ``_`` (Knetic/govaluate parsing.go
    ``isVariableName``); anything else splits into operators and errors the step."""
    from workflows.local.expressions import evaluate_when

    if expected is ValueError:
        with pytest.raises(ValueError, match="quote it"):
            evaluate_when(when)
    else:
        assert evaluate_when(when) is expected

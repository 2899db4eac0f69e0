"""The local executor runs a CronWorkflow that reuses another WorkflowTemplate's template by
``templateRef`` — as the ``image-reconcile`` CronWorkflow reuses ``image-update``'s
``update-target`` — and refuses, at construction, every form of it that it does not support.

Templates: ``tests/testdata/executor/ref-caller.yaml`` (a CronWorkflow: fan-out by templateRef,
``parallelism: 2``, a zero-second ``suspend``) and ``ref-library.yaml`` (the WorkflowTemplate it
references, whose ``update`` holds a mutex). Step functions: ``tests/workflows/stepfns.py``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import yaml

from steps.domain.errors import ConfigError
from workflows.local.errors import NOT_SUPPORTED, UnsupportedFeatureError
from workflows.local.executor import LocalExecutor

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "testdata" / "executor"
CALLER = DATA / "ref-caller.yaml"
LIBRARY = DATA / "ref-library.yaml"


@pytest.fixture()
def state(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir()
    return path


def make(
    state: Path, logs: list, caller: str | Path = CALLER, library: str | Path = LIBRARY
) -> LocalExecutor:
    return LocalExecutor(
        caller,
        project_root=ROOT,
        env={"STEPFNS_STATE_DIR": str(state)},
        log=logs.append,
        workflow_templates=[library],
    )


def markers(state: Path) -> list[tuple[str, str]]:
    path = state / "markers"
    return [tuple(line.split()) for line in path.read_text().splitlines()] if path.exists() else []


def most_at_once(lines: list[tuple[str, str]]) -> int:
    running = peak = 0
    for what, _ in lines:
        running += 1 if what == "start" else -1
        peak = max(peak, running)
    return peak


def test_a_cron_workflow_runs_a_referenced_template_in_its_own_scope(state: Path) -> None:
    logs: list = []
    result = make(state, logs).run({}, "caller-1")

    assert result.phase == "Succeeded", [(n.name, n.message) for n in result.nodes if n.phase != "Succeeded"]
    # update's `work` is the library's (it writes markers), not the caller's `work` (a greeting)
    lines = markers(state)
    assert sorted(label for what, label in lines if what == "start") == ["a", "b", "c", "d"]
    assert result.node(".own").outputs == {"greeting": "hello caller"}
    assert len(result.nodes_for("update")) == 4 and result.node(".tick").phase == "Succeeded"
    # parallelism: 2 on main — never more than two of its items at once
    assert most_at_once(lines) <= 2
    assert {r["mutex"] for r in logs if r.get("event") == "mutex-acquired"} == {
        f"overlay-{x}" for x in "abcd"
    }


def test_a_referenced_template_shares_the_mutex_with_runs_of_its_own_workflow_template(state: Path) -> None:
    """A sweep and an event for the same overlay: the referencing run and a run of the library take
    the same named lock, so they never interleave."""
    logs: list = []
    caller, library = (
        make(state, logs),
        LocalExecutor(LIBRARY, project_root=ROOT, log=logs.append, env={"STEPFNS_STATE_DIR": str(state)}),
    )
    results = {}
    threads = [
        threading.Thread(target=lambda: results.update(c=caller.run({"labels": "shared"}, "caller-2"))),
        threading.Thread(target=lambda: results.update(l=library.run({"event": "shared"}, "library-2"))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert {r.phase for r in results.values()} == {"Succeeded"}
    lines = markers(state)
    assert sorted(label for what, label in lines if what == "start") == ["library", "shared"]
    assert most_at_once(lines) == 1  # serialised on overlay-shared


def _patched(path: Path, patch) -> str:
    doc = yaml.safe_load(path.read_text())
    patch(doc)
    return yaml.safe_dump(doc)


def _tpl(doc: dict, name: str) -> dict:
    templates = (
        doc["spec"]["workflowSpec"]["templates"]
        if doc["kind"] == "CronWorkflow"
        else doc["spec"]["templates"]
    )
    return next(t for t in templates if t["name"] == name)


def _ref(doc: dict) -> dict:
    return _tpl(doc, "main")["steps"][1][0]


REFUSED_CALLER = [
    pytest.param(
        lambda d: _ref(d)["templateRef"].update(name="nope"),
        "templateRef.name",
        "'nope' is not",
        id="unknown-workflow-template",
    ),
    pytest.param(
        lambda d: _ref(d)["templateRef"].update(template="nope"),
        "templateRef.template",
        "no template",
        id="unknown-template",
    ),
    pytest.param(
        lambda d: _ref(d)["templateRef"].update(clusterScope=True),
        "templateRef.clusterScope",
        "",
        id="cluster-scope",
    ),
    pytest.param(
        lambda d: _ref(d).update(template="work"), "templateRef", "not both", id="template-and-templateRef"
    ),
    pytest.param(
        lambda d: _ref(d)["templateRef"].update(version="2"),
        "templateRef.version",
        "",
        id="unknown-templateRef-field",
    ),
    pytest.param(lambda d: _ref(d).update(inline={"suspend": {}}), "inline", "", id="inline-template"),
    pytest.param(
        lambda d: _tpl(d, "tick")["suspend"].pop("duration"),
        "suspend",
        "manual resume",
        id="suspend-without-duration",
    ),
    pytest.param(
        lambda d: _tpl(d, "work").update(parallelism=2),
        "parallelism",
        "steps and dag",
        id="parallelism-on-a-script",
    ),
    pytest.param(
        lambda d: d["spec"].update(stopStrategy={"expression": "true"}),
        "spec.stopStrategy",
        "",
        id="cron-stop-strategy",
    ),
    pytest.param(lambda d: d["spec"].update(when="{{= true }}"), "spec.when", "", id="cron-when"),
]


@pytest.mark.parametrize(("patch", "field", "detail"), REFUSED_CALLER)
def test_unsupported_forms_are_refused_at_construction(patch, field: str, detail: str, state: Path) -> None:
    with pytest.raises(UnsupportedFeatureError) as info:
        make(state, [], caller=_patched(CALLER, patch))
    message = str(info.value)
    assert message.startswith(NOT_SUPPORTED) and field in message and detail in message


def test_a_referenced_template_is_validated_strictly_too(state: Path) -> None:
    artifacts = _patched(LIBRARY, lambda d: _tpl(d, "work").update(outputs={"artifacts": [{"name": "a"}]}))
    with pytest.raises(
        UnsupportedFeatureError, match=r"workflowtemplates\[library\]\.templates\[work\]\.outputs"
    ):
        make(state, [], library=artifacts)


def test_a_referenced_template_may_use_only_the_running_workflows_parameters(state: Path) -> None:
    """The referenced template runs under the caller: `event` is the library's parameter, not the caller's."""
    uses_event = _patched(
        LIBRARY,
        lambda d: _tpl(d, "update")["steps"][0][0]["arguments"]["parameters"][0].update(
            value="{{workflow.parameters.event}}"
        ),
    )
    with pytest.raises(ConfigError, match=r"workflow\.parameters\.event.*names no spec.arguments parameter"):
        make(state, [], library=uses_event)


def test_only_named_workflow_templates_can_be_referenced(state: Path) -> None:
    with pytest.raises(ConfigError, match="named WorkflowTemplates"):
        make(state, [], library=CALLER)


def test_without_a_list_the_workflow_templates_rendered_alongside_are_found(state: Path) -> None:
    """As a cluster finds a WorkflowTemplate by name in its namespace, the executor finds it among the
    templates rendered in the same directory (``manifests/workflows/``; here the test data)."""
    logs: list = []
    executor = LocalExecutor(
        CALLER, project_root=ROOT, env={"STEPFNS_STATE_DIR": str(state)}, log=logs.append
    )
    assert "library" in executor.referenced
    result = executor.run({"labels": "solo"}, "caller-3")
    assert result.phase == "Succeeded" and [label for _, label in markers(state)] == ["solo", "solo"]


def test_a_name_several_workflow_templates_carry_is_refused(state: Path) -> None:
    with pytest.raises(ConfigError, match="names several WorkflowTemplates"):
        LocalExecutor(
            CALLER, project_root=ROOT, log=[].append, workflow_templates=[LIBRARY, LIBRARY.read_text()]
        )

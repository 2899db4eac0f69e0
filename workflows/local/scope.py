"""What a template's ``{{...}}`` variables resolve against while it runs (one scope per template call).

``workflow.name`` and ``workflow.parameters.*`` (the run), ``inputs.parameters.*`` (bound by
:func:`bind_inputs`), ``item`` / ``item.F`` (a fan-out item), and the outputs of earlier steps or
tasks (``steps.S.outputs.parameters.P``, ``tasks.S.outputs.result``). A name that cannot be
resolved at run time is a :class:`~workflows.local.errors.NodeError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from workflows.local.errors import NOT_SUPPORTED, NodeError
from workflows.local.expressions import go_json, substitute
from workflows.local.results import StepOutputs


@dataclass
class Scope:
    workflow_name: str
    params: dict[str, Any]
    inputs: dict[str, str]
    #: outputs of the steps/tasks that ran so far (shared by the items of one fan-out)
    steps: dict[str, StepOutputs] = field(default_factory=dict)
    item: Any = None
    has_item: bool = False
    where: str = ""  # the WorkflowTemplate whose templates `template:` names ('' = the one being run)
    #: ``{{workflow.status}}`` and ``{{workflow.failures}}``: set for the exit handler only (Argo
    #: resolves them once the entrypoint finished; argo-workflows docs/variables.md, "Exit Handler")
    exit_status: dict[str, str] | None = None

    def with_item(self, item: Any) -> Scope:
        """The scope of one fan-out item: the same inputs and step outputs, plus ``{{item}}``."""
        return replace(self, item=item, has_item=True)

    def lookup(self, var: str) -> str:
        parts = var.split(".")
        if var == "workflow.name":
            return self.workflow_name
        if var in ("workflow.status", "workflow.failures") and self.exit_status is not None:
            return self.exit_status[parts[1]]
        if parts[:2] == ["workflow", "parameters"]:
            return str(self.params[parts[2]])
        if var == "inputs.parameters":
            return json.dumps([{"name": k, "value": v} for k, v in self.inputs.items()])
        if parts[:2] == ["inputs", "parameters"]:
            return self.inputs[parts[2]]
        if parts[0] == "item":
            if not self.has_item:
                raise NodeError(f"{{{{{var}}}}} used outside withParam/withItems")
            item = self.item
            if len(parts) == 1:
                return item if isinstance(item, str) else go_json(item)
            if not isinstance(item, dict) or parts[1] not in item:
                raise NodeError(f"{{{{{var}}}}}: the item has no field {parts[1]!r}")
            value = item[parts[1]]
            return value if isinstance(value, str) else go_json(value)
        if parts[0] in ("steps", "tasks"):
            outs = self.steps.get(parts[1])
            if outs is None:
                raise NodeError(f"{{{{{var}}}}}: step {parts[1]!r} has not run")
            if parts[3] == "result":
                if outs.result is None:
                    raise NodeError(f"{{{{{var}}}}}: step {parts[1]!r} has no result")
                return outs.result
            value = outs.parameters.get(parts[4])
            if value is None:
                raise NodeError(
                    f"{{{{{var}}}}}: step {parts[1]!r} has no output {parts[4]!r} (and no default)"
                )
            return value
        raise NodeError(f"{NOT_SUPPORTED}variable {{{{{var}}}}}")

    def render(self, text: Any) -> str:
        """``text`` with every ``{{...}}`` resolved in this scope."""
        return substitute(str(text), self.lookup)


def bind_inputs(tpl: dict[str, Any], given: dict[str, str], where: str) -> dict[str, str]:
    """A template's input parameters: the arguments ``given``, else ``value``, else ``default``."""
    inputs: dict[str, str] = {}
    for p in (tpl.get("inputs") or {}).get("parameters") or []:
        if p["name"] in given:
            inputs[p["name"]] = given[p["name"]]
        elif "value" in p:
            inputs[p["name"]] = str(p["value"])
        elif "default" in p:
            inputs[p["name"]] = str(p["default"])
        else:
            raise NodeError(
                f"{where}: input parameter {p['name']!r} of template {tpl['name']!r} has no value"
            )
        if p.get("enum") and inputs[p["name"]] not in [str(e) for e in p["enum"]]:
            raise NodeError(f"{where}: input {p['name']!r}={inputs[p['name']]!r} not in enum {p['enum']}")
    return inputs


__all__ = ["Scope", "bind_inputs"]

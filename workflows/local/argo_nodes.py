"""A finished run's nodes as Argo's ``status.nodes`` holds them: what an exit handler reads. Pure.

The exit handler's steps read the finished Workflow (on a cluster from the API, here from a file),
so the shape must be Argo's, not a kinder one (argo-workflows v4.1, ``workflow/controller``):

- a node's id is ``NodeID(name)``: the Workflow's name, ``-``, and the FNV-1a 32-bit hash of the
  node's name (``pkg/apis/workflow/v1alpha1/workflow_types.go``); ``status.nodes`` is a Go map, and
  ``encoding/json`` writes a map's keys sorted, so the nodes come in the order of their ids, not of
  their runs;
- a template with a ``retryStrategy`` runs under a ``Retry`` node named as the step, with one ``Pod``
  child per attempt, ``NAME(0)``, ``NAME(1)``, … (``operator.go``: ``fmt.Sprintf("%s(%d)",
  retryNodeName, retryNum)``); the Retry node carries its last attempt's phase and outputs
  (``processNodeRetries``: ``node.Outputs = lastChildNode.Outputs.DeepCopy()``);
- an attempt that failed still has outputs: the wait container saves the output parameters after
  the main container ends, whatever its exit code, and a file the step did not write takes the
  parameter's ``default`` (``workflow/executor/postmain.go``, ``executor.go`` ``SaveParameters``).

The local executor runs a retried template's attempts as one node (:class:`NodeResult` with its
``attempts``); every attempt before the last was retried, so it failed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from workflows.local.results import NodeResult


def node_id(workflow: str, name: str) -> str:
    """Argo's ``Workflow.NodeID``: ``WORKFLOW-<fnv32a(name)>`` (the root node is the Workflow's name)."""
    if name == workflow:
        return workflow
    h = 0x811C9DC5
    for byte in name.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{workflow}-{h}"


def _defaults(template: Mapping[str, Any]) -> dict[str, str]:
    """The output parameters' ``valueFrom.default``: what a failed attempt's node holds."""
    out = {}
    for param in (template.get("outputs") or {}).get("parameters") or []:
        default = (param.get("valueFrom") or {}).get("default")
        if default is not None:
            out[str(param["name"])] = str(default)
    return out


def _node(
    workflow: str, name: str, kind: str, template: str, phase: str, message: str, outputs: dict[str, str]
):
    return {
        "id": node_id(workflow, name),
        "name": name,
        "displayName": name.rsplit(".", 1)[-1],
        "type": kind,
        "templateName": template,
        "phase": phase,
        "message": message,
        "outputs": {"parameters": [{"name": k, "value": v} for k, v in outputs.items()]},
    }


def _pod_message(n: NodeResult) -> str:
    """A failed attempt's node message as Argo writes it: ``main: Error (exit code N): <the
    container's termination message>`` (``operator.go``, the pod's failure reason); the step writes
    its error there (:data:`steps.runtime.harness.TERMINATION_LOG`)."""
    if str(n.phase) not in ("Failed", "Error") or n.exit_code is None:
        return n.message
    said = re.sub(r"^exit code -?\d+:?\s*", "", n.message)
    return f"main: Error (exit code {n.exit_code})" + (f": {said}" if said else "")


def _retry_message(n: NodeResult) -> str:
    """A failed Retry node's own message (``processNodeRetries``), which names no cause."""
    if str(n.phase) not in ("Failed", "Error"):
        return ""
    return "retryStrategy.expression evaluated to false" if n.exit_code == 2 else "No more retries left"


def status_nodes(
    workflow: str, nodes: Iterable[NodeResult], templates: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """``status.nodes`` of the run ``workflow`` whose nodes are ``nodes`` (ids sorted, as Argo's JSON)."""
    out: list[dict[str, Any]] = []
    for n in nodes:
        template = templates.get(n.template) or {}
        phase, outputs = str(n.phase), dict(n.outputs)
        if "script" not in template and "container" not in template:
            kind = "DAG" if "dag" in template else "Steps"
            out.append(_node(workflow, n.name, kind, n.template, phase, n.message, outputs))
        elif not template.get("retryStrategy") or phase == "Skipped":
            kind = "Skipped" if phase == "Skipped" else "Pod"
            out.append(_node(workflow, n.name, kind, n.template, phase, n.message, outputs))
        else:
            attempts = max(1, n.attempts)
            children = [f"{n.name}({i})" for i in range(attempts)]
            retry = _node(workflow, n.name, "Retry", n.template, phase, _retry_message(n), outputs)
            retry["children"] = [node_id(workflow, c) for c in children]
            out.append(retry)
            retried = "main: Error (exit code 75)"  # each failed (it was retried), its outputs the defaults
            for child in children[:-1]:
                out.append(_node(workflow, child, "Pod", n.template, "Failed", retried, _defaults(template)))
            out.append(_node(workflow, children[-1], "Pod", n.template, phase, _pod_message(n), outputs))
    return {node["id"]: node for node in sorted(out, key=lambda node: node["id"])}

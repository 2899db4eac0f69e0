"""What a local run returns: the Phase of a node, its outputs, and how node names are built and read.

Plain data with no dependency on the interpreter, so :mod:`sensors.local`, ``imagebump run
--local``'s progress line and the demo read results without loading the executor. Node names
follow Argo's: ``<workflow>.<step>`` for a step (or dag task) of a steps/dag template, and
``<step node>(<i>)`` for item ``i`` of a ``withParam``/``withItems`` fan-out, so
``image-update-abc.update-target(1).commit-pr`` is the commit-pr step of the second target.
"""

from __future__ import annotations

import enum
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any


class Phase(enum.StrEnum):
    """A node's or a workflow's phase, spelled as Argo spells it (logs and JSON carry these strings)."""

    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ERROR = "Error"
    SKIPPED = "Skipped"
    OMITTED = "Omitted"  # a dag task whose dependency did not succeed

    @property
    def ok(self) -> bool:
        """Succeeded or Skipped: what lets the steps after it run."""
        return self in (Phase.SUCCEEDED, Phase.SKIPPED)


SUCCEEDED, FAILED, ERROR, SKIPPED = Phase.SUCCEEDED, Phase.FAILED, Phase.ERROR, Phase.SKIPPED


@dataclass(frozen=True)
class StepOutputs:
    """What later steps may read of a step (``{{steps.NAME.outputs.parameters.P}}`` / ``.result``)."""

    parameters: dict[str, str] = field(default_factory=dict)
    result: str | None = None

    @staticmethod
    def aggregate(names: set[str], items: list[StepOutputs]) -> StepOutputs:
        """The outputs of a fanned-out step: each parameter (and the result) as a JSON list, item order."""
        return StepOutputs(
            {n: json.dumps([o.parameters.get(n) for o in items]) for n in names},
            json.dumps([o.result for o in items]),
        )


@dataclass
class NodeResult:
    """One executed (or skipped) node: a script attempt series, a steps/dag group or a step."""

    name: str
    template: str
    phase: Phase
    exit_code: int | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    duration: float = 0.0
    attempts: int = 0
    message: str = ""
    item: Any = None
    result: str | None = None
    #: ``time.monotonic()`` when the node's result was made: its end (the bench's push → commit)
    finished_at: float = field(default_factory=time.monotonic)

    def step_outputs(self) -> StepOutputs:
        return StepOutputs(dict(self.outputs), self.result)


@dataclass
class WorkflowResult:
    """What :meth:`LocalExecutor.run` returns. ``phase`` is Succeeded, Failed or Error."""

    name: str
    phase: Phase
    nodes: list[NodeResult]
    message: str = ""
    duration: float = 0.0
    outputs: dict[str, str] = field(default_factory=dict)

    def node(self, suffix: str) -> NodeResult:
        """The first node whose name ends with ``suffix`` (e.g. ``".resolve-image"``)."""
        for node in self.nodes:
            if node.name.endswith(suffix):
                return node
        raise KeyError(suffix)

    def nodes_for(self, template: str) -> list[NodeResult]:
        """All nodes that ran (or skipped) ``template``, in completion order."""
        return [n for n in self.nodes if n.template == template]

    def item_node(self, step: str, index: int) -> NodeResult | None:
        """The node of item ``index`` of the fanned-out step ``step`` itself (its mutex, its phase)."""
        return next(
            (n for n in self.nodes if item_index(n.name, step) == index and _is_item(n.name, step)), None
        )

    def item_nodes(self, step: str, index: int) -> dict[str, NodeResult]:
        """The nodes that ran under item ``index`` of ``step``, by template (e.g. ``update-target``, 1 →
        ``{"edit-kustomize": …, "commit-pr": …}``); the item's own node is not among them."""
        return {
            n.template: n
            for n in self.nodes
            if item_index(n.name, step) == index and not _is_item(n.name, step)
        }


# -- node names (built by the interpreter, read by everyone else) -----------------------------


def child_node_name(parent: str, step: str) -> str:
    """The node of step (or dag task) ``step`` of the steps/dag node ``parent``."""
    return f"{parent}.{step}"


def item_node_name(step_node: str, index: int) -> str:
    """The node of item ``index`` of the fanned-out step node ``step_node``."""
    return f"{step_node}({index})"


def _item_pattern(step: str) -> re.Pattern[str]:
    return re.compile(rf"\.{re.escape(step)}\((\d+)\)(?=\.|$)")


def item_index(node_name: str, step: str) -> int | None:
    """Which item of the fanned-out step ``step`` the node ``node_name`` is (or runs under); None if none."""
    m = _item_pattern(step).search(node_name)
    return int(m.group(1)) if m else None


def _is_item(node_name: str, step: str) -> bool:
    m = _item_pattern(step).search(node_name)
    return m is not None and m.end() == len(node_name)


__all__ = [
    "ERROR",
    "FAILED",
    "SKIPPED",
    "SUCCEEDED",
    "NodeResult",
    "Phase",
    "StepOutputs",
    "WorkflowResult",
    "child_node_name",
    "item_index",
    "item_node_name",
]

"""edit-kustomize: read the overlay from a fresh partial clone and decide; push nothing.

STUB — to be implemented (signature and output model are the contract the WorkflowTemplate uses).
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
from pydantic import BaseModel

from steps._runtime import step_entry
from steps.models import Decision, Plan, Target


class EditKustomizeOutput(BaseModel):
    plan: Plan
    changed: bool
    decision: Decision
    reason: str = ""


@step_entry
def run(target: Target) -> EditKustomizeOutput:
    raise NotImplementedError

"""resolve-image: an ECR push event (or a manual image reference) → the targets to update.

STUB — to be implemented (signature and output model are the contract the WorkflowTemplate uses).
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
from pydantic import BaseModel, Field

from steps._runtime import step_entry
from steps.models import Image, Target


class SkippedRule(BaseModel):
    rule: int
    reason: str


class ResolveImageOutput(BaseModel):
    image: Image | None = None
    targets: list[Target] = Field(default_factory=list)
    skipped: list[SkippedRule] = Field(default_factory=list)
    reason: str = ""
    event_id: str = ""


@step_entry
def run(event: str = "", image: str = "") -> ResolveImageOutput:
    raise NotImplementedError

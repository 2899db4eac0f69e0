"""commit-pr: re-apply the plan on the newest base; commit, or keep one living PR per target.

STUB — to be implemented (signature and output model are the contract the WorkflowTemplate uses).
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
from typing import Literal

from pydantic import BaseModel

from steps._runtime import step_entry
from steps.models import Plan, Target

Action = Literal["committed", "pr-created", "pr-updated", "unchanged"]


class CommitPrOutput(BaseModel):
    action: Action
    commit_sha: str = ""
    pr_url: str = ""
    pr_number: int = 0
    branch: str = ""
    reason: str = ""


@step_entry
def run(target: Target, plan: Plan) -> CommitPrOutput:
    raise NotImplementedError

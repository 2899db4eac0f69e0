"""What commit-pr reports: its ``action`` and the rest of its outputs (both modes return it)."""

# No `from __future__ import annotations`: Hera's runner reads the step's real annotation objects.
from typing import Literal

from pydantic import BaseModel, Field

#: ``branch-taken``: the living proposal branch has a commit imagebump did not make (a person's
#: now, :mod:`steps.domain.branch_owner`): nothing pushed until its pull request is merged or closed.
Action = Literal["committed", "pr-created", "pr-updated", "unchanged", "branch-taken"]


class CommitPrOutput(BaseModel):
    action: Action
    commit_sha: str = ""
    pr_url: str = ""
    pr_number: int = 0
    branch: str = ""
    reason: str = ""
    seconds_since_push: str = Field(
        default="", description="seconds from the image's ECR push to the end of this step; '' if unknown"
    )
    verified: str = Field(
        default="",
        description="commitMethod api: GitHub's verification of the commit (true | false); '' with git",
    )
    verification_reason: str = Field(
        default="", description="commitMethod api: GitHub's verification reason (valid, unsigned, …)"
    )

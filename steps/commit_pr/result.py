"""What commit-pr reports: its ``action`` and the rest of its outputs (both modes return it)."""

# No `from __future__ import annotations`: Hera's runner reads the step's real annotation objects.
from typing import Literal

from steps.domain.contract import Contract

#: ``branch-taken``: the living proposal branch has a commit imagebump did not make (a person's
#: now, :mod:`steps.domain.branch_owner`): nothing pushed until its pull request is merged or closed.
Action = Literal["committed", "pr-created", "pr-updated", "unchanged", "branch-taken"]


class CommitPrOutput(Contract, kw_only=True):
    action: Action
    commit_sha: str = ""
    pr_url: str = ""
    pr_number: int = 0
    branch: str = ""
    reason: str = ""
    #: seconds from the image's ECR push to the end of this step; '' if unknown
    seconds_since_push: str = ""
    #: commitMethod api: GitHub's verification of the commit (true | false); '' with git
    verified: str = ""
    #: commitMethod api: GitHub's verification reason (valid, unsigned, …)
    verification_reason: str = ""

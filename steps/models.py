"""The values that travel between steps (as Argo parameters, i.e. JSON) — the shared contract.

``Image`` leaves resolve-image, a list of ``Target`` fans out (``withParam``), each target's
``Plan`` leaves edit-kustomize and enters commit-pr. They are plain data: no I/O here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Mode = Literal["pr", "commit"]
Order = Literal["push-time", "semver", "none"]
Provider = Literal["github", "local"]


class Image(BaseModel):
    """One pushed image, validated as ECR validates it.

    ``registry`` is ``{account}.dkr.ecr.{region}.amazonaws.com``; ``uri`` is
    ``{registry}/{repository}`` (no tag). A digest-only push has ``tag=None``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    account: str
    region: str
    repository: str
    tag: str | None = None
    digest: str | None = None
    pushed_at: datetime | None = None
    event_id: str | None = None

    @property
    def registry(self) -> str:
        return f"{self.account}.dkr.ecr.{self.region}.amazonaws.com"

    @property
    def uri(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def reference(self) -> str:
        """``uri[:tag][@digest]`` — what ``docker pull`` takes."""
        ref = self.uri
        if self.tag:
            ref += f":{self.tag}"
        if self.digest:
            ref += f"@{self.digest}"
        return ref


class Target(BaseModel):
    """One overlay to update for one image: the result of one matching rule."""

    model_config = ConfigDict(extra="forbid")

    rule: int = Field(description="0-based index of the rule that produced this target")
    repo_url: str = Field(description="https://HOST/OWNER/REPO")
    path: str = Field(description="overlay directory inside the repository, relative, no '..'")
    env: str = ""
    image: str = Field(description="repository URI of the pushed image, no tag")
    tag: str | None = None
    digest: str | None = None
    pushed_at: datetime | None = None
    event_id: str | None = None
    mode: Mode = "pr"
    base_branch: str | None = Field(default=None, description="None: the remote's default branch")
    image_name: str | None = Field(
        default=None, description="images[].name to set; None: the entry whose name or newName is `image`"
    )
    write_digest: bool = False
    order: Order = "push-time"
    labels: list[str] = Field(default_factory=list)
    reviewers: list[str] = Field(default_factory=list)
    provider: Provider = "github"

    @property
    def key(self) -> str:
        """What serialises writers: one overlay of one repository."""
        return f"{self.repo_url}/{self.path}"


class ImagesEntry(BaseModel):
    """One entry of a kustomization's ``images:`` list (kustomize's field names)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    newName: str | None = None
    newTag: str | None = None
    digest: str | None = None


Decision = Literal["update", "current", "stale"]


class Plan(BaseModel):
    """What edit-kustomize decided for one target; commit-pr re-applies it on the newest base."""

    model_config = ConfigDict(extra="forbid")

    changed: bool
    decision: Decision
    reason: str = ""
    file: str = Field(description="path of the kustomization file inside the repository")
    image_name: str = Field(description="the images[].name of the entry that is (or would be) set")
    old: ImagesEntry | None = None
    new: ImagesEntry
    base_commit: str = ""
    base_branch: str = ""
    pr_branch: str = Field(
        default="", description="mode pr: the proposal branch edit-kustomize looked at ('' = not looked at)"
    )
    pr_entry: ImagesEntry | None = Field(
        default=None, description="mode pr: the entry that branch proposed then (None: no branch or no entry)"
    )
    pr_decision: Decision | None = Field(
        default=None, description="mode pr: the new image against pr_entry (None: nothing to compare)"
    )
    pr_reason: str = ""

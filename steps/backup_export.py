"""backup-export: Argo CD's configuration → one sanitised, encrypted archive in S3.

STUB — to be implemented (signature and output model are the contract the CronWorkflow uses).
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
from pydantic import BaseModel, Field

from steps._runtime import step_entry


class BackupExportOutput(BaseModel):
    url: str = Field(description="s3://BUCKET/KEY of the archive written")
    sha256: str
    counts: dict[str, int] = Field(default_factory=dict)
    deleted: list[str] = Field(default_factory=list)


@step_entry
def run(
    bucket: str,
    prefix: str = "argocd-backups",
    cluster: str = "in-cluster",
    namespace: str = "argocd",
    kms_key_id: str = "",
    keep: int = 30,
    keep_days: int = 0,
) -> BackupExportOutput:
    raise NotImplementedError

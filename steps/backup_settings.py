"""The settings of a backup, declared once: :class:`BackupSettings`.

``imagebump backup`` (its flags' defaults), the ``backup-export`` step (its parameters' defaults),
the ``argocd-backup`` CronWorkflow (each parameter's ``valueFrom.default`` and the example
``imagebump-backup`` ConfigMap) all read :data:`DEFAULTS` / :meth:`BackupSettings.defaults`, so a
default changes in one place. :meth:`BackupSettings.parse` checks the values and turns pydantic's
errors into a :class:`steps.errors.ConfigError` that names the setting and the fix. Pure; imports
pydantic and :mod:`steps.errors` only.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from steps.errors import ConfigError

_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]")
_NAMESPACE_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class BackupSettings(BaseModel):
    """Where a backup goes and how long archives stay (the ConfigMap ``imagebump-backup``'s keys)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bucket: str
    prefix: str = "argocd-backups"
    cluster: str = "in-cluster"
    namespace: str = "argocd"
    kms_key_id: str = ""
    keep: int = 30
    keep_days: int = 0

    @field_validator("bucket", mode="before")
    @classmethod
    def _bucket(cls, value: Any) -> Any:
        if not isinstance(value, str) or not _BUCKET_RE.fullmatch(value):
            raise ValueError(f"bucket {value!r} is not a valid S3 bucket name; pass --bucket NAME")
        return value

    @field_validator("prefix", "cluster")
    @classmethod
    def _segment(cls, value: str, info: Any) -> str:
        parts = value.strip("/").split("/") if value.strip("/") else []
        if (info.field_name == "cluster" and not parts) or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"{info.field_name} {value!r} is not a usable S3 key segment")
        return value

    @field_validator("namespace", mode="before")
    @classmethod
    def _namespace(cls, value: Any) -> Any:
        if not isinstance(value, str) or not _NAMESPACE_RE.fullmatch(value):
            raise ValueError(f"namespace {value!r} is not a valid Kubernetes namespace name")
        return value

    @model_validator(mode="after")
    def _retention(self) -> BackupSettings:
        if self.keep < 0 or self.keep_days < 0:
            raise ValueError(
                f"keep ({self.keep}) and keep-days ({self.keep_days}) must be 0 (off) or positive"
            )
        return self

    @classmethod
    def parse(cls, **values: Any) -> BackupSettings:
        """The settings from ``values`` (missing ones take their defaults); ConfigError when one is bad."""
        try:
            return cls(**values)
        except ValidationError as exc:
            raise ConfigError(_message(exc)) from None

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every setting that has a default, with it (``bucket`` has none: it must be given)."""
        return {name: f.default for name, f in cls.model_fields.items() if not f.is_required()}

    @property
    def prefix_path(self) -> str:
        """``PREFIX/CLUSTER/``: where this cluster's archives live in the bucket."""
        return "/".join(p for p in (self.prefix.strip("/"), self.cluster.strip("/")) if p) + "/"


def _message(exc: ValidationError) -> str:
    """The first error's own message (ours name the setting and the fix), else pydantic's, named."""
    first = exc.errors()[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, ValueError):
        return str(cause)
    where = ".".join(str(p) for p in first.get("loc", ())) or "settings"
    return f"backup setting {where}: {first.get('msg', 'invalid')}"


#: The defaults, as a mapping: what ``imagebump backup``, the step and the CronWorkflow fall back to.
DEFAULTS: dict[str, Any] = BackupSettings.defaults()

"""The settings of a backup, declared once: :class:`BackupSettings`.

``imagebump backup`` (its flags' defaults), the ``backup-export`` step (its parameters' defaults),
the ``argocd-backup`` CronWorkflow (each parameter's ``valueFrom.default`` and the example
``imagebump-backup`` ConfigMap) all read :data:`DEFAULTS` / :meth:`BackupSettings.defaults`, so a
default changes in one place. :meth:`BackupSettings.parse` checks the values and turns pydantic's
errors into a :class:`steps.domain.errors.ConfigError` that names the setting and how to fix it where the
settings came from: ``imagebump backup``'s flag (:data:`FLAGS`, the default) or, for the
``backup-export`` step of the CronWorkflow, the key of the ConfigMap ``imagebump-backup``
(:class:`ConfigMapKeys`). Pure; imports pydantic and :mod:`steps.domain.errors` only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from steps.domain.errors import ConfigError, SettingError

_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]")
_NAMESPACE_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")

#: The ConfigMap the ``argocd-backup`` CronWorkflow takes these settings from, one key per setting
#: (workflows/names.py ``BACKUP_CONFIGMAP``; tests check they agree).
CONFIGMAP = "imagebump-backup"
#: The shipped example ConfigMap's bucket starts with this: a bucket that does is not set yet.
PLACEHOLDER = "CHANGE-ME-"
#: What each ``imagebump backup`` flag takes, for "pass --flag VALUE".
_FLAG_VALUES = {
    "bucket": "NAME",
    "namespace": "NAME",
    "cluster": "NAME",
    "kms_key_id": "KEY",
    "keep": "N",
    "keep_days": "DAYS",
}


class Source(Protocol):
    """Where the settings came from: says how to change some of them."""

    def fix(self, settings: tuple[str, ...]) -> str: ...


class _Flags:
    """The settings are ``imagebump backup``'s flags."""

    def fix(self, settings: tuple[str, ...]) -> str:
        return " and ".join(
            f"pass --{name.replace('_', '-')} {_FLAG_VALUES.get(name, name.upper().replace('_', '-'))}"
            for name in settings
        )


#: ``imagebump backup``: an error names the flag (``pass --bucket NAME``).
FLAGS: Source = _Flags()


@dataclass(frozen=True)
class ConfigMapKeys:
    """The settings are keys of the ConfigMap ``name`` (in ``namespace``, when known): the
    ``argocd-backup`` CronWorkflow's parameters, which its ``backup-export`` step receives."""

    name: str = CONFIGMAP
    namespace: str = ""

    def fix(self, settings: tuple[str, ...]) -> str:
        keys = " and ".join(f"`{name}`" for name in settings)
        where = f"ConfigMap {self.name}" + (f" in namespace {self.namespace}" if self.namespace else "")
        return f"set key{'s' if len(settings) > 1 else ''} {keys} of {where}"


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
        if value == "":
            raise SettingError("bucket is not set", "bucket")
        if isinstance(value, str) and value.startswith(PLACEHOLDER):
            raise SettingError(f"bucket is not set: {value!r} is the example's placeholder", "bucket")
        if not isinstance(value, str) or not _BUCKET_RE.fullmatch(value):
            raise SettingError(f"bucket {value!r} is not a valid S3 bucket name", "bucket")
        return value

    @field_validator("prefix", "cluster")
    @classmethod
    def _segment(cls, value: str, info: Any) -> str:
        parts = value.strip("/").split("/") if value.strip("/") else []
        if (info.field_name == "cluster" and not parts) or any(p in ("", ".", "..") for p in parts):
            raise SettingError(f"{info.field_name} {value!r} is not a usable S3 key segment", info.field_name)
        return value

    @field_validator("namespace", mode="before")
    @classmethod
    def _namespace(cls, value: Any) -> Any:
        if not isinstance(value, str) or not _NAMESPACE_RE.fullmatch(value):
            raise SettingError(f"namespace {value!r} is not a valid Kubernetes namespace name", "namespace")
        return value

    @model_validator(mode="after")
    def _retention(self) -> BackupSettings:
        if self.keep < 0 or self.keep_days < 0:
            raise SettingError(
                f"keep ({self.keep}) and keep-days ({self.keep_days}) must be 0 (off) or positive",
                *(name for name in ("keep", "keep_days") if getattr(self, name) < 0),
            )
        return self

    @classmethod
    def parse(cls, *, source: Source = FLAGS, **values: Any) -> BackupSettings:
        """The settings from ``values`` (missing ones take their defaults); a ConfigError when one is
        bad, saying how to fix it where ``source`` says the values came from."""
        try:
            return cls(**values)
        except ValidationError as exc:
            raise ConfigError(_message(exc, source), field=_setting_at_fault(exc)) from None

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every setting that has a default, with it (``bucket`` has none: it must be given)."""
        return {name: f.default for name, f in cls.model_fields.items() if not f.is_required()}

    @property
    def prefix_path(self) -> str:
        """``PREFIX/CLUSTER/``: where this cluster's archives live in the bucket."""
        return "/".join(p for p in (self.prefix.strip("/"), self.cluster.strip("/")) if p) + "/"


def _message(exc: ValidationError, source: Source) -> str:
    """The first error's own message (ours name the setting), else pydantic's, named; then how
    to fix it where the settings came from."""
    first = exc.errors()[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, SettingError):
        return f"{cause}; {source.fix(cause.settings)}"
    loc = tuple(str(p) for p in first.get("loc", ()))
    message = f"backup setting {'.'.join(loc) or 'settings'}: {first.get('msg', 'invalid')}"
    if len(loc) == 1 and loc[0] in BackupSettings.model_fields:
        message += f"; {source.fix(loc)}"
    return message


def _setting_at_fault(exc: ValidationError) -> str:
    """The name of the (first) setting the first error is about, "" when none is."""
    first = exc.errors()[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, SettingError):
        return cause.settings[0] if cause.settings else ""
    loc = tuple(str(p) for p in first.get("loc", ()))
    return loc[0] if len(loc) == 1 else ""


#: The defaults, as a mapping: what ``imagebump backup``, the step and the CronWorkflow fall back to.
DEFAULTS: dict[str, Any] = BackupSettings.defaults()

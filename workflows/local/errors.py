"""The local runtime's two errors: a template it refuses, and a node it could not run."""

from __future__ import annotations

from steps.domain.errors import ConfigError

#: Every refusal's message starts with this (tests and users grep for it).
NOT_SUPPORTED = "not supported by the local executor: "


class UnsupportedFeatureError(ConfigError, ValueError):
    """The template uses something the local executor does not implement."""

    def __init__(self, field_path: str, detail: str = "") -> None:
        super().__init__(
            f"{NOT_SUPPORTED}{field_path}{': ' + detail if detail else ''} "
            "(the local executor runs only what imagebump's templates use; run this template on Argo)"
        )
        self.field = field_path


class NodeError(Exception):
    """Something the executor itself could not do for one node (phase ``Error``)."""


__all__ = ["NOT_SUPPORTED", "NodeError", "UnsupportedFeatureError"]

"""Push → live on one machine: the settings ``--argocd-context`` and ``--live-timeout`` give the
local executors of ``image-update`` and ``image-reconcile``.

Off by default (``verify-live: false``): a laptop has no Argo CD. With a kubeconfig context the
rendered templates' ``verify-live`` step (and reconcile's live states) reach Argo CD through that
context: the step processes get ``IMAGEBUMP_ARGOCD_CONTEXT`` and an absolute ``KUBECONFIG`` (a step's
``HOME`` is its own temporary directory, so ``~/.kube/config`` must be resolved here).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from steps.domain.errors import ConfigError

VERIFY_PARAMETER = "verify-live"
TIMEOUT_PARAMETER = "live-timeout"


def live_parameters(argocd_context: str | None, live_timeout: str | None = None) -> dict[str, str]:
    """The workflow parameters: verify-live on only with a context; the timeout when given."""
    params = {VERIFY_PARAMETER: "true" if argocd_context else "false"}
    if live_timeout:
        from steps.verify_live.step import parse_duration

        try:
            parse_duration(live_timeout)
        except ConfigError:
            raise ConfigError(
                f"--live-timeout {live_timeout!r}: expected a duration like 15m, 90s or 1h"
            ) from None
        params[TIMEOUT_PARAMETER] = live_timeout
    return params


def live_environment(argocd_context: str | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the steps need to reach Argo CD through ``argocd_context`` (nothing without one)."""
    if not argocd_context:
        return {}
    environ = os.environ if environ is None else environ
    kubeconfig = environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
    paths = [str(Path(p).expanduser().resolve()) for p in kubeconfig.split(os.pathsep) if p]
    if not any(Path(p).is_file() for p in paths):
        raise ConfigError(
            f"--argocd-context {argocd_context}: no kubeconfig at {kubeconfig}; set KUBECONFIG to the "
            "file that holds the context"
        )
    return {"IMAGEBUMP_ARGOCD_CONTEXT": argocd_context, "KUBECONFIG": os.pathsep.join(paths)}


def apply_live(executor: Any, parameters: Mapping[str, str]) -> Any:
    """Make ``parameters`` the defaults of the executor's workflow parameters it declares."""
    for key, value in parameters.items():
        if key in executor.workflow_parameters:
            executor.workflow_parameters[key] = value
    return executor

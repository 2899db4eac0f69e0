"""The hardening of every imagebump pod: its user, and the pod and container securityContexts.

Plain data in the manifest's (camelCase) shape, no Hera: :mod:`workflows.common` builds Hera's
models from it and :mod:`sensors.argo` writes it into the Sensor's and EventSource's pods. The
steps image (./Dockerfile) runs as the same user.
"""

from __future__ import annotations

from typing import Any

#: The user and group every imagebump pod runs as.
UID = 10001


def pod_security_context() -> dict[str, Any]:
    """The pod-level securityContext of every imagebump pod, in the manifest's (camelCase) shape."""
    return {
        "runAsNonRoot": True,
        "runAsUser": UID,
        "runAsGroup": UID,
        "fsGroup": UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    """The container-level securityContext of every step container (read-only root, no privileges)."""
    return {
        "runAsNonRoot": True,
        "runAsUser": UID,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }

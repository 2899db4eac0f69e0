"""A FAKE Kubernetes API — for the backup/restore and push → live tests, and the demo: in memory,
plus a small HTTP front.

No API server can run on this machine, so this fake implements the narrow surface imagebump uses
(:class:`steps.kube.api.KubeApi`) with the server behaviour backup, restore and verify-live rely on:
``store`` (:class:`FakeKube`: the objects, and what the API server does to them — its docstring
lists it), ``writes`` (create, replace, delete), ``status`` (Status answers, RBAC grants) and
``http`` (:class:`FakeKubeServer`: the same store behind the API server's paths on 127.0.0.1, for
the real ``kubernetes`` client and ``kubectl``).
"""

from __future__ import annotations

from imagebump.local.kube_fake.http import FakeKubeServer, Recorded
from imagebump.local.kube_fake.status import (
    APP_FINALIZER,
    NAMESPACE,
    SERVICE_ACCOUNT,
    STATUS_SUBRESOURCE,
    SYSTEM_NAMESPACES,
    TOKEN,
    FakeStatus,
    Grant,
    merge_patch,
)
from imagebump.local.kube_fake.store import FakeKube

__all__ = [
    "APP_FINALIZER",
    "NAMESPACE",
    "SERVICE_ACCOUNT",
    "STATUS_SUBRESOURCE",
    "SYSTEM_NAMESPACES",
    "TOKEN",
    "FakeKube",
    "FakeKubeServer",
    "FakeStatus",
    "Grant",
    "Recorded",
    "merge_patch",
]

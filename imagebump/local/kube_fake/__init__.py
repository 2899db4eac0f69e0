"""A FAKE Kubernetes API — for the backup/restore and push → live tests, and the demo: in memory,
plus a small HTTP front.

Why a fake: no API server can run on this machine, and ``kmock`` 0.8 (tried) ignores
``limit``/``continue`` and label selectors and has no server-side apply — exactly what backup and
restore rely on. So this fake implements the narrow surface imagebump uses
(:class:`steps.kube.api.KubeApi`: paged list in one namespace or all, get, create, replace, delete)
with the server behaviour that matters here:

- it fills in server-populated fields (uid, resourceVersion, creationTimestamp, generation,
  managedFields; an Application's status, as its controller would) so sanitising is tested;
- a replace (PUT) must carry the live ``resourceVersion`` (else 409) and replaces the object
  whole; ``stringData`` is folded into ``data``; kinds with a status subresource keep their
  status (ApplicationSet only: upstream manifests/crds — AppProject and Application have none, so
  their ``status`` is written like any field);
- delete honours finalizers as the API server does (an object with finalizers only gets a
  ``deletionTimestamp``; it goes when the last finalizer is removed), the uid precondition, and
  ``propagationPolicy`` (owned objects are deleted by the garbage collector unless ``Orphan``).
  An Application marked for deletion while it holds ``resources-finalizer.argocd.argoproj.io`` is
  recorded in :attr:`FakeKube.cascaded`: Argo CD would now delete everything it deployed (an
  ApplicationSet holding it, in :attr:`FakeKube.cascaded_sets`: its controller would delete its
  Applications);
- namespaces exist or not: with :attr:`FakeKube.namespaces` a set (:meth:`FakeKube.fresh`, or
  ``seeded(model_namespaces=True)``: Kubernetes' own four; :meth:`FakeKube.seed` and
  :meth:`FakeKube.create_namespace` add one), ``GET /api/v1/namespaces/NAME`` answers 404 for
  a missing one and a create there is refused as the API server does (404 ``namespaces "X" not
  found``); a list or get there finds nothing. ``namespaces`` None (the default: a bare
  ``FakeKube()``, ``seeded()``) means every namespace exists, for tests that do not model them;
- a write fails on request: :meth:`FakeKube.fail_write` makes the Nth write from now answer a
  status (422 as an admission webhook refuses, 429, 500, 503) or cuts the connection (code 0,
  over HTTP), once, without doing it — to test a restore that stops part-way;
- pages with opaque ``continue`` tokens; answers 403 with the API server's Status shape when a
  test forbids a verb, or — given :attr:`FakeKube.grants` — whenever RBAC would (the grants are
  computed from rendered Roles/Bindings by tests/test_rbac.py's rules).

:class:`FakeKubeServer` serves the same store over HTTP on 127.0.0.1:0 with the API server's
paths, so tests drive the REAL adapter (:class:`steps.kube.client.KubernetesApi` over the official
``kubernetes`` client, loaded from a kubeconfig) and, with discovery and OpenAPI v3 documents
served, the real ``kubectl`` (``apply --server-side``). Server-side apply is simplified: applied
top-level fields replace the live ones, labels and annotations are merged; field ownership is not
modelled.
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

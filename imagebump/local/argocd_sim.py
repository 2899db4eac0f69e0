"""A SIMULATED Argo CD — its application controller and the one API-server call imagebump makes — for
the demo and the tests of push → live.

No Argo CD runs on this machine, so this small controller plays its part on the Kubernetes API fake
(:class:`tests.fakes.kube.FakeKube`, or anything with the same in-memory ``list``/``get``/
``replace``): it writes Application status the way argo-cd's application controller does, and only
what verify-live and reconcile read. It refreshes an Application when it carries
``argocd.argoproj.io/refresh`` (set by Argo CD's API server, :class:`ArgoCDApiServer`), when it has
no status yet, and every :attr:`ArgoCDSimulator.git_poll_seconds` (Argo CD's own Git poll,
``timeout.reconciliation``). A refresh removes the annotation, resolves the branch each source
tracks (``targetRevision``; ``HEAD``/empty: the remote's default branch), renders the source's path
at that commit with ``kubectl kustomize`` and, with automated sync, "syncs": sets ``status.sync``
(``Synced``, ``revision`` or ``revisions[]`` for multi-source), ``status.operationState``
(``Succeeded``, ``finishedAt``, ``syncResult.revision(s)``), ``status.resources`` (the managed
objects), ``health`` and ``summary.images``, then ``reconciledAt``. Without automated sync it only
compares: ``OutOfSync`` at the new revision.

``summary.images`` comes from **Pods only**, as in Argo CD (argo-cd ``controller/cache/info.go``,
``populatePodInfo``: a resource node's images are its Pod spec's; ``pkg/apis/application/v1alpha1/
types.go``, ``ApplicationTree.GetSummary``: the union over the tree's nodes). The simulator keeps the
Pods a cluster would have: a Deployment/StatefulSet/ReplicaSet runs ``spec.replicas`` Pods (default
1; ``0``: none, no image), a DaemonSet and a bare Pod one; a Job's Pod and a CronJob's last run stay
as completed Pods with the images they ran — a CronJob's run happens once when it first appears
and then only on :meth:`ArgoCDSimulator.run_cronjobs` (its schedule), so after a sync it shows the
previous image until its next run.

Knobs: :attr:`ArgoCDSimulator.wrong_manifest` makes its syncs run the previous revision's manifests
while reporting the new one synced, history entry and all (the repo-server failure this project was
born from); :attr:`ArgoCDSimulator.health_of` reports another health (``Suspended``, ``Missing``);
:attr:`ArgoCDSimulator.transition_time` False plays Argo CD without ``lastTransitionTime``;
:meth:`ArgoCDSimulator.resync` syncs the same revision again (a new history entry, as Argo CD);
:attr:`ArgoCDSimulator.stale` makes named Applications' running Pods run given images whatever Git
holds; :attr:`ArgoCDSimulator.stuck` names Applications whose comparison fails (``ComparisonError``:
they never sync); :attr:`ArgoCDSimulator.progressing_seconds` keeps a synced Application
``Progressing`` with old and new Pods (a rolling update) that long. Writes go through the in-memory
store, not the HTTP front, so a test of the API server's requests sees only imagebump's.
"""

from __future__ import annotations

import copy
import json
import secrets as _random
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from steps.domain.errors import ImagebumpError
from steps.kube import api as kube

REFRESH_ANNOTATION = "argocd.argoproj.io/refresh"
#: Workload kinds → where their Pod spec is.
_POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
}
#: Kinds that run ``spec.replicas`` Pods (default 1).
_REPLICATED = ("Deployment", "StatefulSet", "ReplicaSet", "ReplicationController")
#: Kinds whose Pod runs to completion and stays as a completed Pod.
_RUN_TO_COMPLETION = ("Job", "CronJob")


def application(
    name: str,
    repo_url: str,
    path: str,
    *,
    namespace: str = "argocd",
    target_revision: str = "HEAD",
    automated: bool = True,
) -> dict[str, Any]:
    """An Argo CD Application deploying ``path`` of ``repo_url`` (no status: the simulator syncs it
    at its first pass, as a freshly created Application)."""
    spec: dict[str, Any] = {
        "project": "default",
        "source": {"repoURL": repo_url, "path": path, "targetRevision": target_revision},
        "destination": {"server": "https://kubernetes.default.svc", "namespace": name},
    }
    if automated:
        spec["syncPolicy"] = {"automated": {"prune": True, "selfHeal": True}}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _helm_only(source: dict[str, Any]) -> bool:
    """A chart from a Helm repository, or a ``ref:`` source without a path (multi-source values)."""
    return bool(source.get("chart")) or (bool(source.get("ref")) and not source.get("path"))


def kubectl_available(kubectl: str = "kubectl") -> bool:
    """Can the simulator render overlays here (``kubectl`` with its built-in kustomize)?"""
    return shutil.which(kubectl) is not None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def pod_images(doc: dict[str, Any]) -> list[str]:
    """The images of a workload's Pod spec (init containers too, as ``populatePodInfo``), sorted."""
    path = _POD_SPEC_PATHS.get(str(doc.get("kind")))
    spec: Any = doc if path else None
    for key in path or ():
        spec = spec.get(key) if isinstance(spec, dict) else None
    if not isinstance(spec, dict):
        return []
    found = set()
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            if isinstance(container, dict) and container.get("image"):
                found.add(str(container["image"]))
    return sorted(found)


@dataclass(frozen=True)
class Pod:
    """A Pod the simulated cluster has: its owner (``Kind/name``), images and whether it runs."""

    owner: str
    images: tuple[str, ...]
    running: bool = True


def pods_of(
    documents: list[dict[str, Any]], previous: list[Pod], override: list[str] | None = None
) -> list[Pod]:
    """The Pods a cluster has once ``documents`` are applied: replicated kinds run ``spec.replicas``
    Pods (0: none), a DaemonSet and a Pod one (``override``: the images they run instead, a wrong
    render); a Job's Pod completes with its images; a CronJob keeps its last run's completed Pod
    (``previous``) and has one run when it first appears."""
    pods: list[Pod] = []
    for doc in documents:
        if not isinstance(doc, dict) or str(doc.get("kind")) not in _POD_SPEC_PATHS:
            continue
        kind = str(doc.get("kind"))
        owner = f"{kind}/{(doc.get('metadata') or {}).get('name', '')}"
        images = tuple(pod_images(doc))
        if kind in _RUN_TO_COMPLETION:
            last = [p for p in previous if p.owner == owner]
            if kind == "CronJob" and last:
                pods.extend(last)  # its next run is on its schedule, not at the sync
            else:
                pods.append(Pod(owner, images, running=False))
            continue
        replicas = (doc.get("spec") or {}).get("replicas", 1) if kind in _REPLICATED else 1
        running = tuple(override) if override is not None else images
        pods.extend(Pod(owner, running) for _ in range(int(replicas or 0)))
    return pods


def _summary_images(pods: list[Pod]) -> list[str]:
    return sorted({image for pod in pods for image in pod.images})


def _resources(documents: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """``status.resources``: every managed object, as the application controller lists it."""
    out = []
    for doc in documents:
        if not isinstance(doc, dict) or not doc.get("kind"):
            continue
        group, _, version = str(doc.get("apiVersion") or "v1").rpartition("/")
        meta = doc.get("metadata") or {}
        out.append(
            {
                "group": group,
                "version": version,
                "kind": str(doc["kind"]),
                "namespace": str(meta.get("namespace") or namespace),
                "name": str(meta.get("name") or ""),
                "status": "Synced",
                "health": {"status": "Healthy"},
            }
        )
    return out


class ArgoCDSimulator:
    """Plays Argo CD's application controller on a Kubernetes API fake, in a thread."""

    def __init__(
        self,
        store: Any,
        *,
        git_token: str | None = None,
        kubectl: str = "kubectl",
        poll: float = 0.05,
        git_poll: float | None = 1.0,
        on_sync: Callable[[str, str], None] | None = None,
    ) -> None:
        self.store = store
        self.git_token = git_token
        self.kubectl = kubectl
        self.poll = poll
        #: Argo CD's own Git poll (``timeout.reconciliation``, 180 s by default there): every
        #: Application whose branch moved is refreshed after this many seconds (None: never)
        self.git_poll_seconds = git_poll
        self.on_sync = on_sync
        self.wrong_manifest = False
        #: Applications (``namespace/name``) whose repo server hands back manifests running these
        #: images, whatever Git holds (a stale or wrong render), from their next sync on
        self.stale: dict[str, list[str]] = {}
        self.stuck: set[str] = set()
        self.progressing_seconds = 0.0
        #: Applications (``namespace/name``) whose workloads fail now: health ``Degraded`` from the
        #: next pass until removed (then ``Healthy`` again), with ``health.lastTransitionTime``
        self.degraded: set[str] = set()
        #: Applications (``namespace/name``) whose health Argo CD reports as this status from the next
        #: pass until removed: ``Suspended`` (a paused rollout, a suspended CronJob), ``Missing``,
        #: ``Progressing`` (argo-cd gitops-engine ``pkg/health``: Healthy, Progressing, Degraded,
        #: Suspended, Missing, Unknown)
        self.health_of: dict[str, str] = {}
        #: Argo CD 2.14+ records ``status.health.lastTransitionTime`` (argo-cd#18660); before 2.14, and
        #: on 3.x unless the controller persists resource health, it is absent: False plays those
        self.transition_time = True
        #: How long a sync operation runs: ``deployStartedAt``/``startedAt`` are that much before
        #: ``deployedAt``/``finishedAt`` (argo-cd ``controller/sync.go``: the operation's start, and the
        #: history entry written as it completes)
        self.sync_seconds = 2.0
        #: The controller's clock for the times it writes (``deployedAt``, ``finishedAt``, …): a test
        #: injects one to play a soak without sleeping (None: the time now)
        self.clock: Callable[[], Any] | None = None
        self.errors: list[str] = []
        self._pods: dict[str, list[Pod]] = {}  # namespace/name → the Pods it has now
        self._docs: dict[str, list[dict[str, Any]]] = {}  # namespace/name → its last rendered objects
        self._settle: dict[str, float] = {}  # namespace/name → when Progressing ends
        self._polled: dict[str, float] = {}  # namespace/name → its last Git poll
        self._ids: dict[str, int] = {}  # name → the last history id (kept when the limit keeps none)
        self._resync: set[str] = set()  # namespace/name → a sync of the same revision asked for
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="argocd-sim", daemon=True)

    def __enter__(self) -> ArgoCDSimulator:
        if self._thread.ident is not None:  # entered before: a new thread for this run
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._loop, name="argocd-sim", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    # -- the controller loop -----------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.reconcile_once()
            except Exception as exc:  # keep playing; a test reads .errors
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(self.poll)

    def _stamp(self, before: float = 0.0) -> str:
        if self.clock is None:
            return (
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - before)) if before else _now()
            )
        import datetime as _dt

        return (self.clock() - _dt.timedelta(seconds=before)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _health_now(self, key: str) -> str:
        return "Degraded" if key in self.degraded else self.health_of.get(key, "Healthy")

    def _set_health(self, status: dict[str, Any], health: str) -> None:
        """``status.health``, with ``lastTransitionTime`` when it changes (argo-cd
        ``pkg/apis/application/v1alpha1/types.go``, ``HealthStatus.LastTransitionTime``)."""
        before = status.get("health") or {}
        if not self.transition_time:
            status["health"] = {"status": health}
        elif before.get("status") == health and before.get("lastTransitionTime"):
            status["health"] = {"status": health, "lastTransitionTime": before["lastTransitionTime"]}
        else:
            status["health"] = {"status": health, "lastTransitionTime": self._stamp()}

    def _record_history(self, app: dict[str, Any], sync: dict[str, Any], multi: bool) -> None:
        """One ``status.history`` entry per successful sync, a re-sync of the same revision too (a
        person's Sync, self-heal), as the application controller records it (argo-cd
        ``controller/state.go``, ``persistRevisionHistory``, called for every completed sync
        operation: ``id`` the last one's + 1, ``revision``/``revisions``, ``deployedAt``,
        ``deployStartedAt``, ``source``), keeping the newest ``spec.revisionHistoryLimit`` (default
        10; 0 keeps none)."""
        status = app["status"]
        history = list(status.get("history") or [])
        key = "revisions" if multi else "revision"
        spec = app.get("spec") or {}
        name = f"{app['metadata'].get('namespace', '')}/{app['metadata'].get('name', '')}"
        last = history[-1].get("id", -1) if history else self._ids.get(name, -1)
        self._ids[name] = last + 1  # ids go on even when the limit keeps no entry
        entry = {
            "id": last + 1,
            key: sync[key],
            "deployedAt": self._stamp(),
            "deployStartedAt": self._stamp(self.sync_seconds),
        }
        entry["sources" if multi else "source"] = spec.get("sources" if multi else "source")
        limit = spec.get("revisionHistoryLimit")
        limit = limit if isinstance(limit, int) and limit >= 0 else 10
        status["history"] = (history + [entry])[-limit:] if limit else []

    def _degrade(self, key: str) -> None:
        """Apply :attr:`degraded` to one Application (health only: Argo CD keeps no health history)."""
        app = self.store.get(kube.APPLICATION, *key.split("/", 1))
        if app is None or "reconciledAt" not in (app.get("status") or {}):
            return
        want = self._health_now(key)
        have = ((app.get("status") or {}).get("health") or {}).get("status")
        if have == want or (have == "Progressing" and key in self._settle):
            return  # a rolling update settles on its own time
        app = copy.deepcopy(app)
        self._set_health(app["status"], want)
        app["status"]["reconciledAt"] = self._stamp()
        self._write(app)

    def reconcile_once(self) -> None:
        """One pass over every Application: refresh those asked to (or due a Git poll whose branch
        moved), settle rolling updates."""
        now = time.monotonic()
        for app in kube.list_all(self.store, kube.APPLICATION, None):
            meta = app["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            annotations = meta.get("annotations") or {}
            if REFRESH_ANNOTATION in annotations or "reconciledAt" not in (app.get("status") or {}):
                self._polled[key] = now
                self._refresh(app, key)
            elif key in self._settle and now >= self._settle[key]:
                self._healthy(app, key)
            elif (
                self.git_poll_seconds is not None
                and now - self._polled.get(key, now) >= self.git_poll_seconds
            ):
                self._polled[key] = now
                if self._branch_moved(app):
                    self._refresh(app, key)
            else:
                self._polled.setdefault(key, now)
            self._degrade(key)

    def _branch_moved(self, app: dict[str, Any]) -> bool:
        """Does a source's branch point elsewhere than the revision synced (one ``ls-remote`` each)?"""
        spec = app.get("spec") or {}
        sync = (app.get("status") or {}).get("sync") or {}
        multi = isinstance(spec.get("sources"), list) and bool(spec.get("sources"))
        sources = spec["sources"] if multi else [spec.get("source") or {}]
        synced = sync.get("revisions") if multi else [sync.get("revision")]
        try:
            now = [self._resolve(s) for s in sources if not s.get("chart")]
        except (OSError, subprocess.SubprocessError, ValueError, ImagebumpError):
            return True  # let the refresh record the error
        return any(r not in (synced or []) for r in now)

    def _write(self, app: dict[str, Any]) -> bool:
        """Store ``app``; False when it changed meanwhile (a refresh asked for): the next pass redoes it."""
        try:
            self.store.replace(kube.APPLICATION, app["metadata"]["namespace"], app)
        except ImagebumpError:
            return False
        return True

    def _refresh(self, app: dict[str, Any], key: str) -> None:
        app = copy.deepcopy(app)
        annotations = app["metadata"].get("annotations") or {}
        annotations.pop(REFRESH_ANNOTATION, None)
        app["metadata"]["annotations"] = annotations or None
        if app["metadata"]["annotations"] is None:
            del app["metadata"]["annotations"]
        status = app.setdefault("status", {})
        spec = app.get("spec") or {}
        multi = isinstance(spec.get("sources"), list) and bool(spec.get("sources"))
        sources = spec["sources"] if multi else [spec.get("source") or {}]
        if key in self.stuck:
            status["conditions"] = [
                {
                    "type": "ComparisonError",
                    "message": "rpc error: repo server unavailable",
                    "lastTransitionTime": self._stamp(),
                }
            ]
            status["reconciledAt"] = self._stamp()
            self._write(app)
            return None
        try:
            revisions, documents = [], []
            for source in sources:
                revision, rendered = (
                    self._render_helm(source, sources) if _helm_only(source) else self._render(source)
                )
                revisions.append(revision)
                documents.extend(rendered)
        except (OSError, subprocess.SubprocessError, ValueError, ImagebumpError) as exc:
            status["conditions"] = [
                {"type": "ComparisonError", "message": str(exc)[:300], "lastTransitionTime": self._stamp()}
            ]
            status["reconciledAt"] = self._stamp()
            self._write(app)
            return None
        status.pop("conditions", None)
        sync = {
            "status": "Synced",
            "revisions" if multi else "revision": revisions if multi else revisions[0],
        }
        auto = (spec.get("syncPolicy") or {}).get("automated")
        if not (isinstance(auto, dict) and auto.get("enabled", True) is not False):
            current = status.get("sync") or {}
            same = (
                current.get("revisions" if multi else "revision")
                == sync["revisions" if multi else "revision"]
            )
            status["sync"] = {**sync, "status": "Synced" if same else "OutOfSync"}
            status["reconciledAt"] = self._stamp()
            self._write(app)
            return None
        # stale: a render that differs; a re-sync asked for (a person's Sync, self-heal) syncs anyway
        same = self._docs.get(key) == documents and key not in self.stale and key not in self._resync
        self._resync.discard(key)
        if self.wrong_manifest and key in self._docs:
            # the comparison saw the new revision's render and started a sync; the sync operation's own
            # render (argo-cd controller/sync.go SyncAppState generates the manifests again) came back as
            # the previous revision's: the sync is recorded, Synced at the new revision
            documents = self._docs[key]
        if same and (status.get("sync") or {}).get("status") == "Synced":
            # the new revision renders what runs: Argo CD records the comparison and starts no sync
            # (controller/appcontroller.go autoSync: "Skipping auto-sync: application status is
            # Synced"); the last operation, its history entry and the Pods stay as they were
            status["sync"] = sync
            status["reconciledAt"] = self._stamp()
            self._write(app)
            return None
        previous = (self._docs.get(key), self._pods.get(key, []))
        self._docs[key] = documents
        before = self._pods.get(key, [])
        pods = pods_of(documents, before, self.stale.get(key))
        status["sync"] = sync
        finished = self._stamp()
        status["operationState"] = {
            "phase": "Succeeded",
            "message": "successfully synced (all tasks run)",
            "startedAt": self._stamp(self.sync_seconds),
            "finishedAt": finished,
            "operation": {
                "sync": {"revisions" if multi else "revision": sync["revisions" if multi else "revision"]}
            },
            "syncResult": {"revisions" if multi else "revision": sync["revisions" if multi else "revision"]},
        }
        status["reconciledAt"] = finished
        destination = str((spec.get("destination") or {}).get("namespace") or app["metadata"]["name"])
        status["resources"] = _resources(documents, destination)
        self._pods[key] = pods
        old_running = [p for p in before if p.running]
        new_running = [p for p in pods if p.running]
        if self.progressing_seconds > 0 and _summary_images(old_running) != _summary_images(new_running):
            self._set_health(status, "Progressing")  # a rolling update: old and new Pods run
            status["summary"] = {"images": _summary_images([*old_running, *pods])}
            self._settle[key] = time.monotonic() + self.progressing_seconds
        else:
            self._set_health(status, self._health_now(key))
            status["summary"] = {"images": _summary_images(pods)}
        self._record_history(app, sync, multi)
        if not self._write(app):  # not synced after all: what runs and was rendered stays as before
            self._docs[key], self._pods[key] = previous
            if previous[0] is None:
                del self._docs[key], self._pods[key]
            self._settle.pop(key, None)
            return None
        if self.on_sync:
            self.on_sync(key, ",".join(revisions))

    def refresh(self, namespace: str, name: str) -> None:
        """Argo CD's own periodic poll of Git (every 3 min by default): refresh one Application now."""
        app = self.store.get(kube.APPLICATION, namespace, name)
        if app is not None:
            self._refresh(app, f"{namespace}/{name}")

    def resync(self, namespace: str, name: str) -> None:
        """A sync of the revision already synced (a person's Sync, or self-heal after drift): Argo CD
        runs the operation and appends a history entry for it like any other."""
        key = f"{namespace}/{name}"
        app = self.store.get(kube.APPLICATION, namespace, name)
        if app is not None:
            self._resync.add(key)
            self._refresh(app, key)

    def run_cronjobs(self, namespace: str, name: str) -> None:
        """The CronJobs of an Application run now (their schedule came): each one's completed Pod
        now has the images its current spec runs."""
        key = f"{namespace}/{name}"
        app = self.store.get(kube.APPLICATION, namespace, name)
        if app is None:
            return
        crons = [d for d in self._docs.get(key, []) if isinstance(d, dict) and d.get("kind") == "CronJob"]
        owners = {f"CronJob/{(d.get('metadata') or {}).get('name', '')}" for d in crons}
        kept = [p for p in self._pods.get(key, []) if p.owner not in owners]
        self._pods[key] = kept + pods_of(crons, [])
        app = copy.deepcopy(app)
        status = app.setdefault("status", {})
        status["summary"] = {"images": _summary_images(self._pods[key])}
        status["reconciledAt"] = self._stamp()
        self._write(app)

    def _healthy(self, app: dict[str, Any], key: str) -> None:
        app = copy.deepcopy(app)
        status = app.setdefault("status", {})
        self._set_health(status, self._health_now(key))
        status["summary"] = {"images": _summary_images(self._pods.get(key, []))}
        status["reconciledAt"] = self._stamp()
        self._settle.pop(key, None)
        self._write(app)

    # -- git and kustomize ---------------------------------------------------------------------
    def _git(self, args: list[str], cwd: str | None = None) -> str:
        from steps.git import GitAuth, run_git

        auth = GitAuth(self.git_token) if self.git_token else None
        return run_git(args, cwd, auth, what="simulated Argo CD repo-server").stdout

    def _render_helm(
        self, source: dict[str, Any], sources: list[dict[str, Any]]
    ) -> tuple[str, list[dict[str, Any]]]:
        """A source Argo CD renders without kustomize: a ``ref:`` source (the commit it tracks,
        nothing rendered), or a chart from a Helm repository, simulated with no ``helm`` binary: one
        Deployment running the images its ``helm.valueFiles`` hold (``$ref/…`` read at the ``ref``
        source's commit), found as imagebump finds them (:mod:`steps.kustomize.values`)."""
        from steps.kustomize.values import find_images, read_documents

        if not source.get("chart"):
            return self._resolve(source), []
        images: list[str] = []
        for value_file in (source.get("helm") or {}).get("valueFiles") or []:
            ref, _, rest = str(value_file).removeprefix("$").partition("/")
            origin = next((s for s in sources if s.get("ref") == ref), None)
            if origin is None:
                raise ValueError(f"valueFiles {value_file}: no source with ref {ref}")
            commit = self._resolve(origin)
            with tempfile.TemporaryDirectory(prefix="argocd-sim-") as tmp:
                self._git(["clone", "--quiet", "--no-checkout", str(origin.get("repoURL")), tmp])
                text = self._git(["show", f"{commit}:{rest}"], cwd=tmp)
            for found in find_images(read_documents(text, rest), source=rest):
                images.append(found.reference)
        name = str(source.get("chart"))
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": 1,
                "template": {
                    "spec": {"containers": [{"name": f"c{i}", "image": im} for i, im in enumerate(images)]}
                },
            },
        }
        return str(source.get("targetRevision") or ""), [deployment] if images else []

    def _resolve(self, source: dict[str, Any]) -> str:
        """The commit the source's ``targetRevision`` points to now."""
        url = str(source.get("repoURL") or "")
        revision = str(source.get("targetRevision") or "HEAD")
        ref = "HEAD" if revision == "HEAD" else f"refs/heads/{revision.removeprefix('refs/heads/')}"
        listed = self._git(["ls-remote", url, ref]).split()
        if not listed:
            raise ValueError(f"{url}: no {ref}")
        return listed[0]

    def _render(self, source: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        """(the commit the source's ``targetRevision`` resolves to, the objects its path renders)."""
        url = str(source.get("repoURL") or "")
        commit = self._resolve(source)
        with tempfile.TemporaryDirectory(prefix="argocd-sim-") as tmp:
            self._git(["clone", "--quiet", "--no-checkout", url, tmp])
            self._git(["checkout", "--quiet", commit], cwd=tmp)
            target = Path(tmp) / str(source.get("path") or ".")
            out = subprocess.run(
                [self.kubectl, "kustomize", str(target)],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            if out.returncode != 0:
                raise ValueError(f"kustomize build failed: {out.stderr.strip()[:300]}")
            return commit, [d for d in yaml.safe_load_all(out.stdout) if isinstance(d, dict)]


# -- Argo CD's API server: the one call imagebump makes ---------------------------------------------
#: What Argo CD's API server answers (grpc-gateway: the gRPC code in the body, the HTTP status).
_UNAUTHENTICATED = (401, {"error": "no session information", "code": 16, "message": "no session information"})
_PERMISSION_DENIED = (403, {"error": "permission denied", "code": 7, "message": "permission denied"})


@dataclass
class ApiCall:
    """One request the simulated API server answered (no token in it: only whether one was sent)."""

    path: str
    query: dict[str, list[str]]
    authorized: bool
    status: int


class ArgoCDApiServer:
    """Argo CD's API server, simulated, for ``GET /api/v1/applications/{name}`` only.

    As argo-cd ``server/application/application.go`` ``Server.Get``: the bearer token must be a
    known account's (else 401) holding ``applications, get`` (else 403 ``permission denied``; an
    Application that does not exist is 403 too when no project is given, so an account cannot tell).
    Without ``refresh`` it answers the Application; with ``refresh=normal`` (or ``hard``) it sets the
    annotation ``argocd.argoproj.io/refresh`` itself — with the server's own rights, as
    ``util/argo/argo.go`` ``RefreshApp`` does — and answers once the controller has removed it
    (:class:`ArgoCDSimulator` does), or 500 ``application refresh deadline exceeded``.

    ``accounts``: token → the permissions the account holds (``"applications, get"``). A fresh
    random token with only ``applications, get`` is :attr:`token`.
    """

    GET = "applications, get"

    def __init__(
        self, store: Any, *, accounts: dict[str, set[str]] | None = None, wait: float = 30.0
    ) -> None:
        self.store = store
        self.token = "argocd-sim-" + _random.token_hex(16)
        self.accounts = {self.token: {self.GET}} if accounts is None else accounts
        self.wait = wait
        self.calls: list[ApiCall] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("ArgoCDApiServer is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ArgoCDApiServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:  # requests carry tokens: log nothing
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                status, body = server.answer(self.path, self.headers.get("Authorization", ""))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="argocd-api", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def answer(self, raw_path: str, authorization: str) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for one GET."""
        parts = urlsplit(raw_path)
        query = parse_qs(parts.query)
        token = authorization.removeprefix("Bearer ").strip() if authorization.startswith("Bearer ") else ""
        status, body = self._answer(parts.path, query, token)
        self.calls.append(ApiCall(parts.path, query, bool(token), status))
        return status, body

    def _answer(self, path: str, query: dict[str, list[str]], token: str) -> tuple[int, dict[str, Any]]:
        prefix = "/api/v1/applications/"
        if not path.startswith(prefix) or "/" in path[len(prefix) :]:
            return 404, {"error": "Not Found", "code": 5, "message": "Not Found"}
        if not token or token not in self.accounts:
            return _UNAUTHENTICATED
        if self.GET not in self.accounts[token]:
            return _PERMISSION_DENIED
        name = unquote(path[len(prefix) :])
        namespace = (query.get("appNamespace") or ["argocd"])[0]
        app = self.store.get(kube.APPLICATION, namespace, name)
        if app is None:
            return _PERMISSION_DENIED
        if not query.get("refresh"):
            return 200, app
        refresh = "hard" if query["refresh"][0] == "hard" else "normal"
        for _ in range(5):  # RefreshApp: a merge patch, retried on a conflict
            current = copy.deepcopy(self.store.get(kube.APPLICATION, namespace, name) or app)
            current["metadata"].setdefault("annotations", {})[REFRESH_ANNOTATION] = refresh
            try:
                self.store.replace(kube.APPLICATION, namespace, current)
                break
            except ImagebumpError:
                continue
        deadline = time.monotonic() + self.wait
        while time.monotonic() < deadline:
            now = self.store.get(kube.APPLICATION, namespace, name)
            if now is not None and REFRESH_ANNOTATION not in (now["metadata"].get("annotations") or {}):
                return 200, now
            time.sleep(0.02)
        return 500, {"error": "application refresh deadline exceeded", "code": 2}

"""A SIMULATED Argo CD application controller, for the demo and the tests of push → live.

No Argo CD runs on this machine, so this small controller plays its part on the Kubernetes API fake
(:class:`tests.fakes.kube.FakeKube`, or anything with the same in-memory ``list``/``get``/
``replace``): it writes Application status the way argo-cd's application controller does, and only
what verify-live and the sweep read. On each Application carrying ``argocd.argoproj.io/refresh``
(and once at start for every Application without status) it removes the annotation, resolves the
branch each source tracks (``targetRevision``; ``HEAD``/empty: the remote's default branch), renders
the source's path at that commit with ``kubectl kustomize`` and, with automated sync, "syncs": sets
``status.sync`` (``Synced``, ``revision`` or ``revisions[]`` for multi-source),
``status.operationState`` (``Succeeded``, ``finishedAt``, ``syncResult.revision(s)``), ``health``
and ``summary.images`` (every container image of the rendered Deployments, Pods, …), then
``reconciledAt``. Without automated sync it only compares: ``OutOfSync`` at the new revision.

Knobs: :attr:`ArgoCDSimulator.wrong_manifest` makes it run the images of the previous revision while
reporting the new one synced (the repo-server failure this project was born from);
:attr:`ArgoCDSimulator.stale` makes named Applications run given images whatever Git holds;
:attr:`ArgoCDSimulator.stuck` names Applications whose comparison fails (``ComparisonError``: they
never sync); :attr:`ArgoCDSimulator.progressing_seconds` keeps a synced Application ``Progressing``
with old and new images (a rolling update) that long. Writes go through the in-memory store, not the
HTTP front, so a test of the API server's requests sees only imagebump's.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from steps.domain.errors import ImagebumpError
from steps.kube import api as kube

REFRESH_ANNOTATION = "argocd.argoproj.io/refresh"
_POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


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


def images_of(documents: list[dict[str, Any]]) -> list[str]:
    """Every container image of the rendered workloads, sorted and unique (``summary.images``)."""
    found: set[str] = set()
    for doc in documents:
        if not isinstance(doc, dict):
            continue
        path = _POD_SPEC_PATHS.get(str(doc.get("kind")), ("spec", "template", "spec"))
        spec: Any = doc
        for key in path:
            spec = spec.get(key) if isinstance(spec, dict) else None
        if not isinstance(spec, dict):
            continue
        for group in ("initContainers", "containers"):
            for container in spec.get(group) or []:
                if isinstance(container, dict) and container.get("image"):
                    found.add(str(container["image"]))
    return sorted(found)


class ArgoCDSimulator:
    """Plays Argo CD's application controller on a Kubernetes API fake, in a thread."""

    def __init__(
        self,
        store: Any,
        *,
        git_token: str | None = None,
        kubectl: str = "kubectl",
        poll: float = 0.05,
        on_sync: Callable[[str, str], None] | None = None,
    ) -> None:
        self.store = store
        self.git_token = git_token
        self.kubectl = kubectl
        self.poll = poll
        self.on_sync = on_sync
        self.wrong_manifest = False
        #: Applications (``namespace/name``) whose repo server hands back manifests running these
        #: images, whatever Git holds (a stale or wrong render), from their next sync on
        self.stale: dict[str, list[str]] = {}
        self.stuck: set[str] = set()
        self.progressing_seconds = 0.0
        self.errors: list[str] = []
        self._running: dict[str, list[str]] = {}  # namespace/name → images it runs now
        self._settle: dict[str, float] = {}  # namespace/name → when Progressing ends
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="argocd-sim", daemon=True)

    def __enter__(self) -> ArgoCDSimulator:
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

    def reconcile_once(self) -> None:
        """One pass over every Application: refresh those asked to, settle rolling updates."""
        for app in kube.list_all(self.store, kube.APPLICATION, None):
            meta = app["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            annotations = meta.get("annotations") or {}
            if REFRESH_ANNOTATION in annotations or "reconciledAt" not in (app.get("status") or {}):
                self._refresh(app, key)
            elif key in self._settle and time.monotonic() >= self._settle[key]:
                self._healthy(app, key)

    def _write(self, app: dict[str, Any]) -> None:
        try:
            self.store.replace(kube.APPLICATION, app["metadata"]["namespace"], app)
        except ImagebumpError:  # changed meanwhile (imagebump's refresh patch): next pass
            pass

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
                    "lastTransitionTime": _now(),
                }
            ]
            status["reconciledAt"] = _now()
            return self._write(app)
        try:
            revisions, images = [], []
            for source in sources:
                revision, rendered = (
                    self._render_helm(source, sources) if _helm_only(source) else self._render(source)
                )
                revisions.append(revision)
                images.extend(rendered)
        except (OSError, subprocess.SubprocessError, ValueError, ImagebumpError) as exc:
            status["conditions"] = [
                {"type": "ComparisonError", "message": str(exc)[:300], "lastTransitionTime": _now()}
            ]
            status["reconciledAt"] = _now()
            return self._write(app)
        images = sorted(set(images))
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
            status["reconciledAt"] = _now()
            return self._write(app)
        before = self._running.get(key, (status.get("summary") or {}).get("images") or [])
        running = list(before) if self.wrong_manifest and before else images
        running = list(self.stale.get(key, running))
        status["sync"] = sync
        finished = _now()
        status["operationState"] = {
            "phase": "Succeeded",
            "message": "successfully synced (all tasks run)",
            "startedAt": finished,
            "finishedAt": finished,
            "operation": {
                "sync": {"revisions" if multi else "revision": sync["revisions" if multi else "revision"]}
            },
            "syncResult": {"revisions" if multi else "revision": sync["revisions" if multi else "revision"]},
        }
        status["reconciledAt"] = finished
        self._running[key] = running
        if self.progressing_seconds > 0 and sorted(before) != sorted(running):
            status["health"] = {"status": "Progressing"}
            status["summary"] = {"images": sorted(set(before) | set(running))}
            self._settle[key] = time.monotonic() + self.progressing_seconds
        else:
            status["health"] = {"status": "Healthy"}
            status["summary"] = {"images": running}
        self._write(app)
        if self.on_sync:
            self.on_sync(key, ",".join(revisions))

    def refresh(self, namespace: str, name: str) -> None:
        """Argo CD's own periodic poll of Git (every 3 min by default): refresh one Application now."""
        app = self.store.get(kube.APPLICATION, namespace, name)
        if app is not None:
            self._refresh(app, f"{namespace}/{name}")

    def _healthy(self, app: dict[str, Any], key: str) -> None:
        app = copy.deepcopy(app)
        status = app.setdefault("status", {})
        status["health"] = {"status": "Healthy"}
        status["summary"] = {"images": self._running.get(key, [])}
        status["reconciledAt"] = _now()
        self._settle.pop(key, None)
        self._write(app)

    # -- git and kustomize ---------------------------------------------------------------------
    def _git(self, args: list[str], cwd: str | None = None) -> str:
        from steps.git import GitAuth, run_git

        auth = GitAuth(self.git_token) if self.git_token else None
        return run_git(args, cwd, auth, what="simulated Argo CD repo-server").stdout

    def _render_helm(self, source: dict[str, Any], sources: list[dict[str, Any]]) -> tuple[str, list[str]]:
        """A source Argo CD renders without kustomize (issue 34): a ``ref:`` source (the commit it
        tracks, nothing rendered), or a chart from a Helm repository, simulated: its images are the
        ones its ``helm.valueFiles`` hold (``$ref/…`` read at the ``ref`` source's commit), found as
        imagebump finds them (:mod:`steps.kustomize.values`) — no ``helm`` binary here."""
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
        return str(source.get("targetRevision") or ""), images

    def _resolve(self, source: dict[str, Any]) -> str:
        url = str(source.get("repoURL") or "")
        revision = str(source.get("targetRevision") or "HEAD")
        ref = "HEAD" if revision == "HEAD" else f"refs/heads/{revision.removeprefix('refs/heads/')}"
        listed = self._git(["ls-remote", url, ref]).split()
        if not listed:
            raise ValueError(f"{url}: no {ref}")
        return listed[0]

    def _render(self, source: dict[str, Any]) -> tuple[str, list[str]]:
        """(the commit the source's ``targetRevision`` resolves to, the images its path renders)."""
        url = str(source.get("repoURL") or "")
        revision = str(source.get("targetRevision") or "HEAD")
        ref = "HEAD" if revision == "HEAD" else f"refs/heads/{revision.removeprefix('refs/heads/')}"
        listed = self._git(["ls-remote", url, ref]).split()
        if not listed:
            raise ValueError(f"{url}: no {ref}")
        commit = listed[0]
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
            return commit, images_of(list(yaml.safe_load_all(out.stdout)))

"""The gate's reads: Argo CD's Applications (one list per evaluation) and Git (what the environment's
overlay sets at each revision Argo CD deployed), through verify-live's seams. Read-only; what is
read survives any restart, so a restarted evaluator decides the same (issue 35).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from steps.domain.errors import ImagebumpError
from steps.domain.models import Target


def same_image(target: Target, tags: Iterable[str] = ()) -> Callable[[str | None], bool]:
    """Does a rendered image reference (``name:tag``, ``name@digest``, ``name:tag@digest``) name
    ``target``'s image? The same digest where the reference has one; else its tag is ``target``'s or
    another tag ECR gave the same digest (``tags``: reconcile's ``same_image_tags``, e.g. staging's
    commit tag ``abc1234`` for production's ``1.2.3``). A tag moved to another digest after staging
    deployed it cannot be told apart by its tag: write digests (``writeDigest``) to be sure."""
    names = {t for t in (target.tag, *tags) if t}

    def same(ref: str | None) -> bool:
        if not ref:
            return False
        name_tag, at, digest = ref.partition("@")
        if at and target.digest:
            return digest == target.digest
        last = name_tag.rsplit("/", 1)[-1]
        return ":" in last and last.rsplit(":", 1)[1] in names

    return same


class ArgoGitReader:
    """One evaluation's reads: the Applications listed once, one partial clone per repository."""

    def __init__(self, api: Any, namespace: str, scratch: Path | None = None) -> None:
        self.api, self.namespace = api, namespace
        self._apps: list[dict[str, Any]] | None = None
        self._tmp = None if scratch is not None else tempfile.TemporaryDirectory(prefix="gate-")
        self.scratch = scratch if scratch is not None else Path(self._tmp.name)  # type: ignore[union-attr]
        self._clones: dict[str, Any] = {}
        self._branches: dict[str, str] = {}
        #: what earlier evaluations saw (:mod:`steps.gate.memory`; None: Argo CD alone)
        self.memory: Any = None

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()

    def apps(self) -> list[dict[str, Any]]:
        from steps.verify_live import argocd

        if self._apps is None:
            self._apps = argocd.list_applications(self.api, self.namespace)
        return self._apps

    def _default_branch(self, repo_url: str) -> str:
        from steps import git

        if repo_url not in self._branches:
            self._branches[repo_url] = git.default_branch(repo_url, git.GitAuth.from_env(write=False))
        return self._branches[repo_url]

    def deployments(self, target: Target) -> list[tuple[str, int | None, dict[str, Any]]]:
        """The Applications deploying ``target``'s overlay (``namespace/name``, source, Application)."""
        from steps.verify_live import argocd

        default = self._default_branch(target.repo_url)
        branch = target.settings.base_branch or default
        found = argocd.select(
            self.apps(), target.repo_url, target.path, branch, branch == default, file=target.values_file
        )
        return [(d.display, d.source_index, app) for d, app in found]

    def image_at(self, target: Target) -> Callable[[str], str | None]:
        """``revision →`` the image ``target``'s overlay sets there, rendered in full as kustomize renders
        it (``name:tag`` or ``name@digest``, what Pods then run) (None: cannot tell)."""
        from steps.git import PartialClone
        from steps.kustomize import KUSTOMIZATION_FILES, read_entry
        from steps.verify_live.decide import expected_image

        branch = target.settings.base_branch or self._default_branch(target.repo_url)
        key = f"{target.repo_url}#{branch}"
        if key not in self._clones:
            self._clones[key] = PartialClone(
                target.repo_url, [branch], self.scratch / str(len(self._clones)), filter="blob:none"
            )
        clone = self._clones[key]
        files = (
            [target.values_file]
            if target.values_file
            else [f"{target.path}/{n}".lstrip("/") for n in KUSTOMIZATION_FILES]
        )
        seen: dict[str, str | None] = {}

        def at(revision: str) -> str | None:
            if revision in seen:
                return seen[revision]
            found = None
            try:
                if clone.known(revision):
                    for file in files:
                        text = clone.show(revision, file)
                        if text is None:
                            continue
                        entry = read_entry(
                            text,
                            target.settings.image_name or target.image,
                            source=file,
                            values=target.values_ref(),
                        )
                        if entry is not None:
                            found = expected_image(entry.newName or entry.name, entry.newTag, entry.digest)
                        break
            except ImagebumpError:
                found = None
            seen[revision] = found
            return found

        return at

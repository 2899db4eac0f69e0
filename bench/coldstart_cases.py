"""What the cold-start benchmark gives each step process (:mod:`bench.coldstart`): one
:class:`Case` per step as its template renders it, with inputs that validate (an ECR push event
from :mod:`imagebump.local.builders`, a target, a plan), and the template's inputs and environment
as Argo renders them (``{{inputs.parameters}}``, the literal ``env``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from imagebump.local import builders
from workflows import names

PROJECT_ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = PROJECT_ROOT / names.MANIFESTS_DIR

_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
_DIGEST = "sha256:" + "a" * 64
_EVENT = builders.ecr_push_event(
    "team/api",
    _DIGEST,
    "1.4.2",
    event_id="6f0e8b2c-1111-2222-3333-444455556666",
    when="2026-11-16T01:54:34Z",
)


def _target(mode: str, provider: str) -> str:
    return json.dumps(
        {
            "rule": 0,
            "repo_url": "https://github.com/acme/gitops",
            "path": "overlays/prod",
            "env": "prod",
            "image": _IMAGE,
            "tag": "1.4.2",
            "digest": _DIGEST,
            "mode": mode,
            "provider": provider,
            "event_id": _EVENT["id"],
        }
    )


_PLAN = json.dumps(
    {
        "changed": True,
        "decision": "update",
        "file": "overlays/prod/kustomization.yaml",
        "image_name": "api",
        "old": {"name": "api", "newName": _IMAGE, "newTag": "1.4.1"},
        "new": {"name": "api", "newName": _IMAGE, "newTag": "1.4.2"},
        "base_branch": "main",
    }
)


_UPDATE = names.rendered(names.IMAGE_UPDATE)


@dataclass(frozen=True)
class Case:
    """One step process as a template renders it, with inputs that validate."""

    name: str
    manifest: str
    template: str
    values: dict[str, str]


CASES = (
    Case("resolve-image", _UPDATE, "resolve-image", {"event": json.dumps(_EVENT)}),
    Case("edit-kustomize", _UPDATE, "edit-kustomize", {"target": _target("commit", "local")}),
    Case(
        "commit-pr (commit)",
        _UPDATE,
        "commit-pr",
        {"target": _target("commit", "github"), "plan": _PLAN},
    ),
    Case("commit-pr (pr)", _UPDATE, "commit-pr", {"target": _target("pr", "github"), "plan": _PLAN}),
    Case("reconcile", names.rendered(names.IMAGE_RECONCILE), "reconcile", {}),
    Case("backup-export", names.rendered(names.ARGOCD_BACKUP), "backup-export", {"bucket": "backups"}),
)


def template(manifest: str, name: str) -> dict[str, Any]:
    """The named template of a rendered manifest (``manifest``: a path under manifests/)."""
    doc = yaml.safe_load((MANIFESTS / manifest).read_text())
    spec = doc["spec"].get("workflowSpec", doc["spec"])  # a CronWorkflow's templates are one level down
    for tpl in spec["templates"]:
        if tpl["name"] == name:
            return tpl
    raise KeyError(f"{manifest}: no template {name!r}")


def inputs_file(tpl: dict[str, Any], values: dict[str, str]) -> list[dict[str, str]]:
    """``{{inputs.parameters}}`` as Argo renders it: every declared input, defaults included."""
    out = []
    for p in (tpl.get("inputs") or {}).get("parameters") or []:
        value = values.get(p["name"], p.get("value", p.get("default")))
        if value is None:
            raise KeyError(f"template {tpl['name']}: input {p['name']!r} needs a value")
        out.append({"name": p["name"], "value": str(value)})
    return out


def step_env(tpl: dict[str, Any], work: Path) -> dict[str, str]:
    """The template's literal env (paths under /tmp moved into ``work``) plus what a pod has."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
    }
    for item in tpl["script"].get("env") or []:
        if "value" in item:
            env[item["name"]] = str(item["value"]).replace("/tmp", str(work))
    return env

"""Reading a finished ``image-update`` workflow: what each target's steps did. Pure.

The executor's result is a list of nodes (template, name, phase, outputs, duration); a target's
nodes run under item ``i`` of the ``update-target`` fan-out, which :mod:`workflows.local.results`
(the one home of node names) decodes (:func:`target_nodes`). :func:`target_results` and
:func:`failure_details` feed the demo's report; :func:`progress_line` is ``imagebump run
--local``'s one line per event. Imports only :mod:`workflows.local.results` (plain data) and
:mod:`steps.domain.models` (the one way an image reference is written; lazily) of the project.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from workflows.local.results import NodeResult, WorkflowResult, item_index

STEP_TEMPLATES = ("resolve-image", "edit-kustomize", "commit-pr", "verify-live")
#: The fanned-out step of ``image-update`` that runs one target per item.
TARGET_STEP = "update-target"


def node(result: WorkflowResult, template: str) -> NodeResult | None:
    """The first node of ``template`` (e.g. ``resolve-image``), or None."""
    return next(iter(result.nodes_for(template)), None)


def targets(result: WorkflowResult) -> list[dict[str, Any]]:
    """The targets resolve-image output ([] when it did not succeed or its output is not JSON)."""
    resolve = node(result, "resolve-image")
    if resolve is None:
        return []
    try:
        found = json.loads(resolve.outputs.get("targets") or "[]")
    except ValueError:
        return []
    return found if isinstance(found, list) else []


def target_nodes(result: WorkflowResult, index: int) -> dict[str, NodeResult]:
    """Target ``index``'s step nodes by template (``edit-kustomize``, ``commit-pr``)."""
    nodes = result.item_nodes(TARGET_STEP, index)
    return {template: n for template, n in nodes.items() if template in STEP_TEMPLATES}


def image_label(event: dict[str, Any]) -> str:
    """``team/api:1.4.2`` (or ``team/api@sha256:0123456789ab…`` for a push without a tag) from a
    push event, written by :func:`steps.domain.models.image_ref`."""
    from steps.domain.models import image_ref  # msgspec: not when `imagebump --help` imports this module

    detail = event.get("detail") if isinstance(event.get("detail"), dict) else {}
    tag, digest = detail.get("image-tag"), detail.get("image-digest")
    return image_ref(
        str(tag) if tag else None,
        str(digest) if digest else None,
        name=str(detail.get("repository-name") or "?"),
        one=True,
        short=True,
        mark="…",
    )


@dataclass
class TargetResult:
    """One target of one workflow: what the rule said and what the steps did."""

    env: str
    repo_url: str
    path: str
    mode: str
    provider: str
    decision: str = ""
    reason: str = ""
    action: str = ""
    commit_sha: str = ""
    branch: str = ""
    pr_url: str = ""
    phase: str = ""
    message: str = ""
    steps: dict[str, float] = field(default_factory=dict)
    #: verify-live's outcome ("" when it did not run) and its outputs (timings, applications)
    live: str = ""
    live_outputs: dict[str, str] = field(default_factory=dict)


def target_results(result: WorkflowResult) -> list[TargetResult]:
    """The targets resolve-image output, each with its edit-kustomize / commit-pr outcome."""
    resolve = node(result, "resolve-image")
    if resolve is None or resolve.phase != "Succeeded":
        return []
    out = []
    for i, t in enumerate(targets(result)):
        nodes = target_nodes(result, i)
        tr = TargetResult(
            env=t.get("env", ""),
            repo_url=t["repo_url"],
            path=t["path"],
            mode=t.get("mode", ""),
            provider=t.get("provider", ""),
        )
        edit, commit = nodes.get("edit-kustomize"), nodes.get("commit-pr")
        for step in (edit, commit):
            if step is None:
                continue
            if step.phase != "Skipped":
                tr.steps[step.template] = round(step.duration, 3)
            if step.phase in ("Failed", "Error") and not tr.message:
                tr.phase, tr.message = step.phase, f"{step.template}: {step.message}"
        if edit is not None:
            tr.decision = edit.outputs.get("decision", "")
            tr.reason = edit.outputs.get("reason", "")
        if commit is not None and commit.phase == "Succeeded":
            tr.action = commit.outputs.get("action", "")
            tr.commit_sha = commit.outputs.get("commit-sha", "")
            tr.branch = commit.outputs.get("branch", "")
            tr.pr_url = commit.outputs.get("pr-url", "")
            tr.reason = commit.outputs.get("reason", "") or tr.reason
        elif edit is not None and edit.phase == "Succeeded":
            tr.action = "unchanged"
        live = nodes.get("verify-live")
        if live is not None and live.phase != "Skipped":
            tr.live, tr.live_outputs = live.outputs.get("result", ""), dict(live.outputs)
            tr.steps["verify-live"] = round(live.duration, 3)
            if live.phase in ("Failed", "Error") and not tr.message:
                tr.phase, tr.message = (
                    live.phase,
                    f"verify-live: {live.outputs.get('message') or live.message}",
                )
        if not tr.phase:
            last = commit or edit
            tr.phase = "Succeeded" if tr.action else (last.phase if last is not None else "")
        out.append(tr)
    return out


def failure_details(result: WorkflowResult) -> list[str]:
    """Failed/Errored steps of a workflow, one line each: ``step [env] (failed, N attempts): message``."""
    envs = {i: t.get("env") or t.get("path") or str(i) for i, t in enumerate(targets(result))}
    lines = []
    for step in result.nodes:
        if step.phase in ("Failed", "Error") and step.template in STEP_TEMPLATES:
            env = envs.get(item_index(step.name, TARGET_STEP), "")
            where = f"{step.template} [{env}]" if env else step.template
            attempts = f"{step.attempts} attempt{'s' if step.attempts != 1 else ''}"
            lines.append(f"{where} ({step.phase.lower()}, {attempts}): {step.message}")
    if not lines and result.message:
        lines.append(result.message)
    return lines


def resolved_image(result: WorkflowResult) -> str:
    """``ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG@DIGEST`` (``REPO@DIGEST`` for a push without a
    tag) from resolve-image's ``image`` output: :attr:`steps.domain.models.Image.reference`; the output as
    it is when it is not an image."""
    from steps.domain.models import Image

    resolve = node(result, "resolve-image")
    if resolve is None or not resolve.outputs.get("image"):
        return ""
    try:
        return Image.model_validate_json(resolve.outputs["image"]).reference
    except ValueError:  # ContractError is one
        return resolve.outputs["image"]


# --- `imagebump run --local`'s progress line ----------------------------------------------------
def target_label(target: dict[str, Any]) -> str:
    return target.get("env") or target.get("path") or "target"


def target_outcome(result: WorkflowResult, index: int) -> str:
    """One target's outcome in a few words: ``committed abc1234``, ``pr-updated URL``, ``branch-taken
    URL`` (a person pushed to the PR branch: left to them), ``unchanged``…"""
    nodes = target_nodes(result, index)
    commit, edit = nodes.get("commit-pr"), nodes.get("edit-kustomize")
    if commit is not None and commit.phase == "Succeeded":
        action = commit.outputs.get("action", "")
        if action == "committed":
            return f"committed {commit.outputs.get('commit-sha', '')[:7]}".strip() + live_words(nodes)
        if action.startswith("pr-") or action == "branch-taken":  # taken: a person pushed to it
            where = commit.outputs.get("pr-url") or commit.outputs.get("branch", "")
            return f"{action} {where}".strip()
        return action or "done"
    if edit is not None and edit.phase == "Succeeded" and (commit is None or commit.phase == "Skipped"):
        decision = edit.outputs.get("decision", "")
        reason = edit.outputs.get("reason", "")
        if decision == "current":
            return "unchanged"
        return f"skipped ({decision}{': ' + reason if reason else ''})" if decision else "unchanged"
    failed = next((n for n in (commit, edit) if n is not None and n.phase in ("Failed", "Error")), None)
    if failed is not None:
        return f"{failed.template} {failed.phase.lower()}: {failed.message[:120]}"
    return "not run"


def live_words(nodes: dict[str, NodeResult]) -> str:
    """`` → live 41.2s after the push`` (or `` → mismatch: …``) when verify-live ran, else ``""``."""
    live = nodes.get("verify-live")
    if live is None or live.phase == "Skipped":
        return ""
    result = live.outputs.get("result") or live.phase.lower()
    if result == "live" and live.outputs.get("seconds-push-to-healthy"):
        return f" → live {float(live.outputs['seconds-push-to-healthy']):.1f}s after the push"
    if result == "idle":  # synced and healthy at the commit; no Pod runs the image now
        synced = live.outputs.get("seconds-push-to-synced")
        when = f" {float(synced):.1f}s after the push" if synced else ""
        return f" → idle: synced{when}, no Pod runs the image now"
    message = live.outputs.get("message") or live.message
    return f" → {result}" + (f": {message[:160]}" if result != "live" and message else "")


def printable(text: str) -> str:
    """``text`` that any terminal can take (:func:`steps.domain.terminal.for_terminal`): control
    characters, bidi overrides and lone surrogates (from JSON escapes) escaped, cut at 4,000."""
    from steps.domain.terminal import for_terminal

    return for_terminal(text, 4000)


def progress_line(event: dict[str, Any], result: WorkflowResult) -> str:
    """``event 13cde686… team/api:1.4.2 → 2 targets: staging committed abc1234, production pr-updated …  (3.2s)``."""
    event_id = str(event.get("id") or "?")
    head = f"event {event_id[:8]}{'…' if len(event_id) > 8 else ''} {image_label(event)}"
    took = f"  ({result.duration:.1f}s)"
    resolve = node(result, "resolve-image")
    if resolve is None:  # not the image-update template (tests, custom templates)
        return f"{head} → {result.phase.lower()}{': ' + result.message if result.message else ''}{took}"
    if resolve.phase != "Succeeded":
        why = resolve.message or result.message
        return f"{head} → {result.phase.upper()}: {why[:200]}{took}"
    found = targets(result)
    if not found:
        reason = resolve.outputs.get("reason") or "no rule matched"
        return f"{head} → no targets: {reason}{took}"
    parts = [f"{target_label(t)} {target_outcome(result, i)}" for i, t in enumerate(found)]
    status = "" if result.phase == "Succeeded" else f" [{result.phase.upper()}]"
    noun = "target" if len(found) == 1 else "targets"
    return f"{head} → {len(found)} {noun}: {', '.join(parts)}{status}{took}"

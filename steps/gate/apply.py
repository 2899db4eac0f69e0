"""The gate applied in reconcile: every gated target reconcile found behind (or, ``gate: check``,
proposed) gets ``waiting``, ``blocked`` or ``promoted`` from the facts of the environment before.

Reconcile considers only the newest allowed image of each target, so an older image that a newer
push overtook during its soak is never promoted: the newer one is the one gated, and its clock
starts at its own live time in the environment before (Argo CD's history of that image).

- ``gate: wait``: ``waiting`` and ``blocked`` hand nothing over (no commit, no pull request);
  ``promoted`` hands the target to update-target, the same edit and commit-pr as any update.
- ``gate: check``: the target is handed over at once (the pull request opens); the decision is the
  commit status ``imagebump/soak: ENV`` on the pull request's head (:mod:`steps.gate.status`).

Without Argo CD (``reader`` None) a gated target waits: nothing proves the environment before ran it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from steps.domain.contract import Contract
from steps.domain.errors import ImagebumpError
from steps.domain.models import Target
from steps.gate.decide import GateDecision
from steps.gate.evaluate import EnvTarget, combine
from steps.gate.read import same_image
from steps.gate.status import STATUS_OF, report_statuses

log = logging.getLogger(__name__)
GATED_STATES = ("behind", "proposed")


def gated(target: Target | None) -> bool:
    return target is not None and target.settings.promote_after is not None


def _person(item: Any) -> str | None:
    """Git: did a person hold or roll back this environment target's entry?"""
    if item.hold is not None:
        return "held"
    verdict = item.verdict
    if verdict is not None and verdict.state == "held":
        return "rolled-back"
    return None


def _env_targets(item: Any, items: Sequence[Any]) -> list[Any]:
    """The items of ``item``'s ``promoteAfter.env`` for the same image repository (the same push)."""
    target = item.verdict.update or item.sample
    env = target.settings.promote_after.env
    return [i for i in items if i is not item and i.sample.env == env and i.sample.image == target.image]


def decide_item(item: Any, items: Sequence[Any], reader: Any, now: datetime) -> GateDecision:
    """One gated reconcile item's decision (reads through ``reader``)."""
    target: Target = item.verdict.update or item.sample
    env_items = _env_targets(item, items)
    envs = [(i.sample, _person(i)) for i in env_items]
    tags = {  # the tags ECR gave the gated digest, as the environment before's rules allow them
        tag
        for i in env_items
        if target.digest and getattr(getattr(i, "newest", None), "digest", None) == target.digest
        for tag in getattr(i, "same_image_tags", ())
    }
    return decide_target(target, envs, reader, now, tags=tags)


def decide_target(
    target: Target,
    envs: Sequence[tuple[Target, str | None]],
    reader: Any,
    now: datetime,
    *,
    tags: Iterable[str] = (),
) -> GateDecision:
    """The gate for ``target``'s image over the targets of its ``promoteAfter.env`` (each with a
    person's ``held`` / ``rolled-back`` from Git, or None). ``tags``: the other tags ECR gave the
    same digest (the environment before may deploy it under one of them). A read that fails:
    waiting, with why."""
    after = target.settings.promote_after
    assert after is not None
    soak = timedelta(seconds=after.soak_seconds)
    shown = f"{target.image}:{target.tag}" if target.tag else f"{target.image}@{target.digest}"
    if reader is None:
        return GateDecision(
            "waiting",
            shown,
            after.env,
            time_left=soak,
            note=f"no Argo CD to read: nothing proves {after.env} ran it",
        )
    read: list[EnvTarget] = []
    same = same_image(target, tags)
    try:
        for env_target, person in envs:
            read.append(
                EnvTarget(
                    f"{env_target.repo_url}/{env_target.path}",
                    reader.deployments(env_target),
                    reader.image_at(env_target),
                    person,  # type: ignore[arg-type]
                    same=same,
                )
            )
    except ImagebumpError as exc:
        return GateDecision(
            "waiting", shown, after.env, time_left=soak, note=f"cannot read {after.env}: {exc}"
        )
    if not any(t.apps for t in read):
        hydrated = _hydrated(reader, [t for t, _ in envs])
        if hydrated:
            return GateDecision(
                "waiting",
                shown,
                after.env,
                time_left=soak,
                wait="hydrated",
                note=f"{', '.join(hydrated)} deploy {after.env} through Argo CD's source hydrator, "
                "whose hydrated commits the gate cannot read yet: promote by hand (imagebump set-image)",
            )
    memory = getattr(reader, "memory", None)
    if memory is None:
        return combine(shown, "wanted", after.env, soak, read, now)
    from steps.gate.memory import record_key

    key = record_key(target.repo_url, target.path, target.digest or shown)
    try:
        seen = memory.load(key)
    except Exception as exc:  # noqa: BLE001 (any store error): decide from Argo CD alone
        log.warning("gate: what earlier evaluations saw of %s is unreadable: %s", shown, exc)
        return combine(shown, "wanted", after.env, soak, read, now)
    before = dict(seen)
    decision = combine(shown, "wanted", after.env, soak, read, now, memory=seen)
    if seen != before:
        try:
            memory.save(key, seen)
        except Exception as exc:  # noqa: BLE001 (any store error): the next evaluation sees it again
            log.warning("gate: what this evaluation saw of %s is not kept: %s", shown, exc)
    return decision


def _hydrated(reader: Any, env_targets: Sequence[Target]) -> list[str]:
    """The Applications that deploy one of ``env_targets``' overlays as ``spec.sourceHydrator``'s
    ``drySource`` (Argo CD 3.x): verify-live's selection reads ``source``/``sources`` only, and their
    ``status.history`` holds hydrated commits, not the overlay's."""
    from steps.verify_live.argocd import normalise_path, normalise_repo_url

    apps = getattr(reader, "apps", None)
    found = []
    for app in apps() if callable(apps) else ():
        dry = ((app.get("spec") or {}).get("sourceHydrator") or {}).get("drySource") or {}
        for t in env_targets:
            if normalise_repo_url(str(dry.get("repoURL") or "")) == normalise_repo_url(
                t.repo_url
            ) and normalise_path(str(dry.get("path") or "")) == normalise_path(t.path):
                meta = app.get("metadata") or {}
                found.append(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
    return found


def apply_gates(
    items: Sequence[Any], reader: Any, now: datetime, forge_for: Any = None
) -> dict[int, GateDecision]:
    """Decide every gated item; ``gate: wait`` items not promoted get their state and hand nothing
    over. Returns the decisions by ``id(item)`` (for the report's fields)."""
    decisions: dict[int, GateDecision] = {}
    for item in items:
        verdict = item.verdict
        if verdict is None or verdict.state not in GATED_STATES:
            continue
        target = verdict.update or item.sample
        if not gated(target) or (verdict.state == "proposed" and target.settings.gate != "check"):
            continue
        decision = decide_item(item, items, reader, now)
        decisions[id(item)] = decision
        reason = f"{decision.state}: promoteAfter {decision.env}: {decision.note}"
        if decision.state == "waiting" and decision.seconds_left is not None:
            reason += f"; {decision.seconds_left}s of the soak left"
        if target.settings.gate == "check":  # the pull request opens at once; the status says the rest
            state = decision.state if verdict.state == "proposed" else verdict.state
            item.verdict = dataclasses.replace(verdict, state=state, reason=f"{verdict.reason}; {reason}")
        elif decision.state == "promoted":
            item.verdict = dataclasses.replace(
                verdict, state="promoted", reason=f"{verdict.reason}; {reason}"
            )
        else:
            item.verdict = dataclasses.replace(verdict, state=decision.state, reason=reason, update=None)
        log.info("gate %s/%s: %s", target.repo_url, target.path, reason)
    from steps.notify.promotion import announce  # issue 36: live-before, blocked; once each

    announce(
        [
            (i.verdict.update or i.sample, decisions[id(i)], i.branch if i.branch_sha and not i.no_pr else "")
            for i in items
            if id(i) in decisions
        ],
        forge_for=forge_for,
    )
    rows = [
        (i.verdict.update or i.sample, i.branch_sha, decisions[id(i)])
        for i in items
        if id(i) in decisions and i.branch_sha and (i.verdict.update or i.sample).settings.gate == "check"
    ]
    done: dict[str, str] = {}
    if rows:
        try:
            done = dict(report_statuses(rows, forge_for or _github_forge))
        except ImagebumpError as exc:  # a status not set now is set by the next evaluation
            log.warning("gate: commit statuses not set: %s", exc)
    for item in items:  # gate: check: a decision is new where this evaluation set its status
        decision = decisions.get(id(item))
        if decision is None or decision.state == "waiting":
            continue
        if (item.verdict.update or item.sample).settings.gate == "check":
            new = bool(item.branch_sha) and done.get(item.branch_sha) == STATUS_OF[decision.state]
            decisions[id(item)] = dataclasses.replace(decision, settled=not new)
    return decisions


def _github_forge(repo_url: str) -> Any:
    from steps.forge.pull_requests import GitHubForge

    return GitHubForge.for_repo_url(repo_url)


def gate_fields(decision: GateDecision | None) -> dict[str, Any]:
    """The report row's gate fields (:class:`steps.reconcile.report.TargetState`): the environment
    waited on, the time left and why it waits (waiting), the reason (blocked)."""
    if decision is None:
        return {}
    return {
        "gate": decision.state,
        "waiting_on": decision.env,
        "time_left": decision.seconds_left,
        "blocked_reason": decision.reason or "",
        "wait_reason": decision.wait or "",
    }


def open_gate_reader(rules: Any) -> Any:
    """The reads the gate needs (:class:`steps.gate.read.ArgoGitReader`) when a rule has
    ``promoteAfter`` and Argo CD is configured (``IMAGEBUMP_ARGOCD_*``, as verify-live); else None."""
    from steps.verify_live import argocd

    if not any(r.settings.promote_after is not None for r in getattr(rules, "rules", ())):
        return None
    if not argocd.configured():
        log.info("gated rules, but %s: gated targets wait", argocd.NOT_CONFIGURED)
        return None
    from steps.gate.memory import memory_from_env
    from steps.gate.read import ArgoGitReader

    reader = ArgoGitReader(argocd.connect(), argocd.argocd_namespace())
    reader.memory = memory_from_env()  # what earlier evaluations saw (steps.gate.memory)
    return reader


#: How often image-gate evaluates (its schedule: every minute): a block is counted by the evaluation
#: whose last interval holds the time it happened.
EVALUATION_INTERVAL = timedelta(minutes=1)


class GateOutcome(Contract, kw_only=True):
    """One gate decided this evaluation (the metrics ``imagebump_promotions_total`` and
    ``imagebump_decisions_total``): ``promoted`` or ``blocked``, the environment waited on, and for
    ``promoted`` the seconds from that environment going live to the promotion."""

    result: str
    env: str
    seconds: float = 0.0


def outcomes(
    decisions: dict[int, GateDecision], now: datetime, interval: timedelta = EVALUATION_INTERVAL
) -> list[GateOutcome]:
    """The promotions and blocks among ``decisions``, each counted once (``waiting`` is the gauge's).

    A promotion is decided once: the target then goes to update-target and is no longer behind. A
    block stays decided at every evaluation until a newer image, so it is counted only by the
    evaluation whose last ``interval`` holds the time it happened (Argo CD's or Git's time of the
    fact that blocked it, :attr:`GateDecision.decided_at`): the evaluations are stateless, the count
    is still once per image. A block whose time nothing records (a person's hold; a rollback Argo CD
    has not synced yet, counted once it has) is not counted: the gauge shows it. A ``gate: check``
    decision is counted where the evaluation set its commit status (``settled`` otherwise): its pull
    request stays open after the promotion, and the status is set once."""
    found = []
    for d in decisions.values():
        if d.state == "waiting" or d.settled:
            continue
        if d.state == "blocked" and not (d.decided_at is not None and now - interval < d.decided_at < now):
            continue
        seconds = (now - d.live_since).total_seconds() if d.state == "promoted" and d.live_since else 0.0
        found.append(GateOutcome(result=d.state, env=d.env, seconds=round(max(seconds, 0.0), 3)))
    return found


def gated_rules(rules: Any) -> Any:
    """Only the rules with ``promoteAfter`` and the rules of the environments they wait on (the
    short evaluation: ``image-gate``, ``reconcile --gated``); indices and sources kept."""
    from steps.rules import RuleSet

    waited = {r.settings.promote_after.env for r in rules.rules if r.settings.promote_after is not None}
    kept = [r for r in rules.rules if r.settings.promote_after is not None or r.env in waited]
    return RuleSet(kept, rules.source)

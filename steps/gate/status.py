"""``gate: check``: the commit status ``imagebump/soak: ENV`` on the pull request's head commit.

commit-pr sets it ``pending`` when it opens or updates the pull request (:func:`soak_pending`); each
evaluation of the gate then sets what it decided (:func:`report_statuses`): ``success`` once the soak
passed, ``failure`` when the environment before blocked the image, ``pending`` (with the time left)
while it waits — a branch protection rule can require the context, and a reviewer sees it on the PR.
Setting a status needs the GitHub App's "Commit statuses: write" permission (a token's ``repo:status``)
and nothing more; a status GitHub refuses is a warning, never a failed step (:mod:`steps.forge`).
On a host without an API (``provider: local``) the status is a git note on the commit
(:mod:`steps.forge.local_status`), set with the write token (on one machine, every step has it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from steps.domain.errors import ImagebumpError
from steps.domain.models import Target
from steps.gate.decide import GateDecision

log = logging.getLogger(__name__)
#: The commit status context, per environment waited on.
CONTEXT = "imagebump/soak: {env}"
#: The gate's state → the commit status state.
STATUS_OF = {"waiting": "pending", "promoted": "success", "blocked": "failure"}


def context(env: str) -> str:
    return CONTEXT.format(env=env)


def checks(target: Target) -> bool:
    """Does this target carry the soak status (``gate: check`` with ``promoteAfter``)?"""
    return target.settings.promote_after is not None and target.settings.gate == "check"


def describe(decision: GateDecision) -> str:
    """The status description (GitHub keeps 140 characters; the forge cuts it)."""
    if decision.state == "promoted":
        return f"{decision.env} ran {decision.image.rsplit('/', 1)[-1]} live and Healthy for the soak"
    if decision.state == "blocked":
        return f"blocked: {decision.env} went {decision.reason} during the soak; never promoted"
    left = decision.seconds_left
    return f"waiting for {decision.env}: " + (
        f"{left}s of the soak left" if left is not None else "not live yet"
    )


def _lifted_by_a_person(description: str | None) -> bool:
    """Was the failure there a person's hold or rollback (:func:`describe`)? A person lifts those,
    and Git says so; every other block Argo CD may forget, so it stands."""
    return any(
        (description or "").startswith("blocked: ") and f" went {reason} " in (description or "")
        for reason in ("held", "rolled-back")
    )


def status_forge(target: Target, forge: Any) -> Any:
    """Where ``target``'s commit statuses live: ``forge`` (GitHub's API), or for ``provider: local``
    git notes in its repository."""
    if target.settings.provider == "local":
        from steps.forge.local_status import GitNoteStatuses

        return GitNoteStatuses(target.repo_url)
    return forge


def soak_pending(forge: Any, target: Target, sha: str) -> None:
    """commit-pr, after opening or updating a ``gate: check`` pull request: ``pending`` on its head
    (unless the gate already said something on that commit)."""
    if not checks(target) or not sha:
        return
    assert target.settings.promote_after is not None
    forge = status_forge(target, forge)
    name = context(target.settings.promote_after.env)
    try:
        if name in forge.statuses(sha):
            return
    except (
        ImagebumpError
    ) as exc:  # e.g. an App without "Commit statuses: read": a warning, never a failed step
        log.warning("could not read the statuses of %s (%s not set): %s", sha[:12], name, exc)
        return
    forge.set_status(
        sha,
        state="pending",
        context=name,
        description=f"waiting for {target.settings.promote_after.env} to run it for the soak",
    )


def report_statuses(
    rows: Sequence[tuple[Target, str, GateDecision]], forge_for: Callable[[str], Any]
) -> Mapping[str, str]:
    """Set each ``gate: check`` decision on its pull request's head commit (``(target, head sha,
    decision)``), only when it differs from the status there now. Returns ``sha → state`` set."""
    done: dict[str, str] = {}
    for target, sha, decision in rows:
        if not checks(target) or not sha:
            continue
        forge = (
            status_forge(target, None) if target.settings.provider == "local" else forge_for(target.repo_url)
        )
        name = context(decision.env)
        want = STATUS_OF[decision.state]
        try:
            now = forge.statuses(sha).get(name)
        except ImagebumpError as exc:  # set nothing over a status that could not be read
            log.warning("could not read the statuses of %s (%s not set): %s", sha[:12], name, exc)
            continue
        if (
            now is not None
            and (now.state == want or now.state in ("success", "failure"))
            and want == "pending"
        ):
            continue  # pending again says nothing new; a decision already there stands
        if now is not None and now.state == want:
            continue
        if now is not None and now.state == "failure" and not _lifted_by_a_person(now.description):
            continue  # a block stands on this commit (a newer image is a new head commit, judged afresh)
        if forge.set_status(sha, state=want, context=name, description=describe(decision)[:140]):
            done[sha] = want
    return done

"""commit-pr's re-check of rollbacks on the newest base (issue 30, item 4).

edit-kustomize judged the entry's history at the plan's base; a person's rollback that lands
between that and commit-pr is in the newest base only. :func:`reapply` re-applies the plan with
the pure :func:`steps.commit_pr.decide.decide` and, when the file on the newest base is not
the one the plan read (a commit landed on it since; :func:`_changed_since_plan`), judges the
entry's history again there
(:func:`steps.entry_history.held_by_rollback`, every standing rollback): a rollback that stands
makes the outcome ``unchanged`` with the rollback as its reason, in both modes. Either way
:attr:`~steps.commit_pr.decide.Applied.clean_at` says at which commit only imagebump's commits were
found touching the file (the plan's base, or the newest base when it was judged again), so the
commit made on it can record that (:func:`steps.commit_pr.message.history_line`).

commit-pr does not read ECR: push times are unknown here, so with ``order: push-time`` the history
gives no evidence (its re-check already refuses an entry changed since the plan, naming both),
and the event's own push time (``target.pushed_at``) is what a rollback is compared with.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from steps.commit_pr.decide import Applied, decide
from steps.domain.models import Plan, Target, same_entry
from steps.runtime.timing import timed


def reapply(repo: Any, text: str, target: Target, plan: Plan, previous: Applied | None = None) -> Applied:
    """:func:`~steps.commit_pr.decide.decide` on ``text`` (the file on the newest base in ``repo``), then the
    rollback re-check when the file changed since the plan; :attr:`Applied.on` says on which commit.

    ``previous``: after a lost race, the last attempt's outcome. What it carries on: the commit it
    stood on when the commit made there said that only imagebump's commits touched the file (its
    ``clean_at`` was its ``on``: ``clean_from`` below), and how far no commit since the plan's base
    touched the file (its ``untouched_to``)."""
    head = repo.cloned_head()
    if previous is None:
        clean_from, untouched_from = None, ""
    else:
        said = previous.clean_at and previous.clean_at == previous.on
        clean_from, untouched_from = (previous.clean_at if said else ""), previous.untouched_to
    applied = _reapply(repo, text, target, plan, head, clean_from, untouched_from)
    return replace(applied, on=head)


def _reapply(
    repo: Any, text: str, target: Target, plan: Plan, head: str, clean_from: str | None, untouched_from: str
) -> Applied:
    """:func:`reapply` with what the last attempt carries on.

    ``clean_from`` (after a lost race): the commit ``repo`` stood on before the race moved it, when
    the commit made there could say that only imagebump's commits touched the file ("": it could
    not). When the file did not change since the plan and no commit since ``clean_from`` touched it
    (:meth:`steps.git.ClonedRepo.untouched_between`: the commits the race's fetch brought say so),
    that holds for the newest base too, so the commit made on it says it (a burst's next event on
    this overlay then reads no deeper). None, the first attempt: the plan's own verdict, for the
    plan's own base (only a commit whose parent is that base may carry it).

    The same bytes on another commit are not enough where it can be shown otherwise: in a
    repository made from the plan's base (a seeded one, after a lost race) a commit since the base
    that touched the file — changed it and back, a person's change and their rollback of it — has
    the history judged again, as any change does; none did, and the plan's verdict holds for the
    newest base too. ``untouched_from`` (the last attempt's :attr:`Applied.untouched_to`): the
    commit up to which that was shown already, so only the commits after it are asked about (each
    race's fetch reaches the last base, not necessarily the plan's)."""
    with timed("kustomize"):
        applied = decide(text, target, plan)
    if applied.text is None:
        return applied
    changed, untouched_to = _changed_since_plan(repo, text, plan, applied.current, head, untouched_from)
    if not changed:
        if untouched_to:  # no commit since the plan's base touched the file: its history is the base's
            return replace(applied, clean_at=head if plan.history_clean else "", untouched_to=untouched_to)
        if clean_from is None:
            return replace(applied, clean_at=plan.base_commit if plan.history_clean else "")
        if not clean_from:
            return replace(applied, clean_at="")
        # ``clean_from`` is a commit this repository holds (its head before the race): no commit is
        # fetched to answer (asked about one it lacked, the partial clone would fetch it)
        with timed("history"):
            vouched = repo.untouched_between(clean_from, head, plan.file)
        return replace(applied, clean_at=head if vouched else "")
    from steps.entry_history import rollback_verdict

    with timed("history"):
        verdict = rollback_verdict(
            repo,
            "HEAD",
            plan.file,
            plan.image_name,
            order=target.settings.order,
            new=plan.new,
            new_pushed_at=target.pushed_at,
            pushed_at=lambda _entry: None,
            current=(text, applied.current) if applied.current is not None else None,
        )
    if verdict.held is not None:
        return Applied(None, applied.current, verdict.held)
    return replace(applied, clean_at=head if verdict.only_imagebump else "")


def _changed_since_plan(
    repo: Any, text: str, plan: Plan, current: Any, head: str, untouched_from: str
) -> tuple[bool, str]:
    """Could a commit have changed the entry's history since the plan? And the newest commit up
    to which no commit since the plan's base was shown to touch the file ("" when not shown).

    The plan carried the file's text: the file on the newest base differs from it (another file's
    commit costs no history read); or, the same bytes on another commit of a repository made from
    the plan's base (:func:`steps.git.seed`, which holds that commit: asking fetches nothing), a
    commit since touched the file — changed it and back, a person's rollback of their own change
    that then stands (:meth:`steps.git.ClonedRepo.untouched_between`; the commits a lost race
    fetched, ``RACE_DEPTH``: a base further back counts as touched and is judged). A clone of the
    newest base, which lacks the plan's base, compares the text only. Otherwise: the newest base is
    another commit than the plan's, or, for a plan naming no base commit, the entry differs from
    the one the plan saw."""
    if plan.base_text:
        if text != plan.base_text:
            return True, ""
        if not plan.base_commit or repo.seed_commit != plan.base_commit:
            return False, ""
        since = untouched_from or plan.base_commit  # shown untouched up to it: ask after it only
        if head == since:
            return False, head
        with timed("history"):
            untouched = repo.untouched_between(since, head, plan.file)
        return (False, head) if untouched else (True, "")
    if plan.base_commit:
        return repo.head() != plan.base_commit, ""
    return not same_entry(current, plan.old), ""

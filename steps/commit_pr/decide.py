"""commit-pr's pure core: the plan re-applied to the overlay file as it is on the newest base.

:func:`decide` re-checks the file's entry against the plan (never a downgrade:
:func:`steps.domain.never_downgrade.recheck`) and re-applies the edit with the pure editor; no
I/O, table-tested without git in tests/steps/commit_pr/test_commit_pr.py. Both modes call it
(:mod:`steps.commit_pr.commit_mode`, :mod:`steps.commit_pr.pr_mode`).
"""

from __future__ import annotations

from dataclasses import dataclass

from steps.domain.models import ImagesEntry, Plan, Target, entry_ref


@dataclass(frozen=True)
class Applied:
    """The outcome of re-applying the plan to the file as it is now."""

    text: str | None  # the new file text; None: nothing to write
    current: ImagesEntry | None
    reason: str
    #: the commit at which only imagebump's commits touched the file within the rollback check's
    #: bound ("" = not known): a commit made on it may say so (Imagebump-History)
    clean_at: str = ""
    #: the newest commit up to which no commit since the plan's base was shown to touch the file
    #: ("" = not shown): a lost race's next attempt asks only about the commits after it
    untouched_to: str = ""
    #: the commit the plan was re-applied on (the newest base then)
    on: str = ""


def decide(text: str, target: Target, plan: Plan) -> Applied:
    """commit-pr's pure core: re-check the file's entry against the plan and re-apply the edit.

    Returns ``Applied.text`` None with a reason when nothing must change: the entry says
    ``plan.new`` already, :func:`steps.domain.never_downgrade.recheck` refuses, or the entry on the
    newest base is pinned or carries a hold marker (:mod:`steps.domain.intent`).
    """
    from steps.domain.intent import marker_hold, pinned
    from steps.domain.models import entry_sets
    from steps.domain.never_downgrade import recheck
    from steps.kustomize import entry_hold, read_entry, values_misread, write_entry

    values = plan.values  # a Helm values file: the same decisions, the values-file writer
    current = read_entry(text, plan.image_name, source=plan.file, values=values)
    why = recheck(target, plan, current)
    if (
        why is not None
        and values is not None
        and current is not None
        and entry_sets(current, plan.new)
        and values_misread(text, plan.image_name, source=plan.file, values=values)
    ):
        why = None  # the file says the tag, Helm reads a number (tag: 1.10 is 1.1): quoting it is the change
    if why is None and current is not None:  # pinned or held on the newest base since the plan
        why = pinned(current, target.image) or marker_hold(
            entry_hold(text, plan.image_name, source=plan.file, values=values)
        )
    if why is not None:
        return Applied(None, current, why)
    if values is not None and current is None:
        return Applied(None, None, f"{plan.file} no longer holds {plan.image_name}")
    new_text = write_entry(
        text,
        plan.image_name,
        new_name=plan.new.newName if values is None else None,
        tag=plan.new.newTag if values is None else target.tag,
        digest=plan.new.digest if values is None else target.digest,
        source=plan.file,
        values=values,
    )
    if new_text == text:
        return Applied(None, current, f"{plan.file} already sets {plan.image_name} to {entry_ref(plan.new)}")
    return Applied(new_text, current, "")

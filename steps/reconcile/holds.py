"""reconcile: the behind targets that a person's rollback holds (state ``held``).

Asked only for targets that are ``behind`` after every other check, so a sweep where nothing is
behind reads no history and makes no extra request. For each, the last commit that changed the
entry's image (:func:`steps.entry_history.last_image_change`, within the bound, on the sweep's one
clone of the repository, deepened once per branch and shared by its targets) is judged by
:func:`steps.domain.intent.rollback` with the push times ECR's listing already gave (no ECR call); a
rollback holds until the newest allowed image was pushed after the rollback commit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from steps.domain.errors import ImagebumpError
from steps.domain.models import ImagesEntry, image_ref


def hold_rolled_back(repo: Any, items: Sequence[Any], *, count: Callable[[], None]) -> None:
    """Turn each ``behind`` item (:class:`steps.reconcile.git.Item`) that a rollback holds into ``held``.

    Push times come from the sweep's ECR listing (:meth:`steps.reconcile.ecr.Overlay.pushed_at`). A history
    that cannot be read leaves the item ``behind`` (commit-pr and the events still guard it) and
    says so in its reason.
    """
    from steps.entry_history import held_by_rollback

    depths: dict[str, int] = {}
    for item in items:
        verdict = item.verdict
        if verdict is None or verdict.state != "behind" or verdict.update is None or item.current is None:
            continue
        newest = verdict.update

        def pushed_at(entry: ImagesEntry, item: Any = item, image: str = newest.image) -> Any:
            return item.overlay.pushed_at(entry, image)

        try:
            why = held_by_rollback(
                repo,
                item.rev,
                item.file,
                item.current.name,
                order=newest.order,
                new_ref=image_ref(newest.tag, newest.digest),
                new_pushed_at=newest.pushed_at,
                pushed_at=pushed_at,
                branch=newest.base_branch or repo.branch,
                count=count,
                depths=depths,
                values=item.values,
            )
        except ImagebumpError as exc:
            reason = f"{verdict.reason}; its history could not be read to find a rollback ({exc})"
            item.verdict = dataclasses.replace(verdict, reason=reason)
            continue
        if why is not None:
            item.verdict = dataclasses.replace(verdict, state="held", reason=why, update=None)

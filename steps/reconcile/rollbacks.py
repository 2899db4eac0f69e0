"""reconcile: the behind targets that a person's rollback holds (state ``held``).

Asked only for targets that are ``behind`` after every other check, so a reconcile run where nothing is
behind reads no history and makes no extra request. For each, the last commit that changed the
entry's image (:func:`steps.entry_history.last_image_change`, within the bound, on reconcile's one
clone of the repository, deepened once per branch and shared by its targets) is judged by
:func:`steps.domain.intent.rollback` with the push times ECR's listing already gave (no ECR call); a
rollback holds until the newest allowed image was pushed after the rollback commit.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

from steps.domain.errors import ImagebumpError
from steps.domain.models import ImagesEntry

log = logging.getLogger(__name__)


def hold_rolled_back(repo: Any, items: Sequence[Any], *, count: Callable[[], None]) -> None:
    """Turn each ``behind`` item (:class:`steps.reconcile.overlay_read.Item`) that a rollback holds into ``held``.

    Push times come from reconcile's ECR listing (:meth:`steps.reconcile.model.Overlay.pushed_at`). A history
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

        notes: list[str] = []
        try:
            why = held_by_rollback(
                repo,
                item.rev,
                item.file,
                item.current.name,
                order=newest.settings.order,
                new=ImagesEntry(name=item.current.name, newTag=newest.tag, digest=newest.digest),
                new_pushed_at=newest.pushed_at,
                pushed_at=pushed_at,
                branch=newest.settings.base_branch or repo.branch,
                count=count,
                depths=depths,
                notes=notes,
                values=item.values,
            )
        except ImagebumpError as exc:
            reason = f"{verdict.reason}; its history could not be read to find a rollback ({exc})"
            item.verdict = dataclasses.replace(verdict, reason=reason)
            continue
        except Exception as exc:  # noqa: BLE001 - one overlay's history costs only its own row
            log.warning(
                "history of %s in %s could not be read", item.file, item.sample.repo_url, exc_info=True
            )
            reason = (
                f"its history could not be read to find a rollback ({type(exc).__name__}: {str(exc)[:200]}); "
                "not handed over: the event path re-checks it"
            )
            item.failure = "failed"
            item.verdict = dataclasses.replace(verdict, state="unknown", reason=reason, update=None)
            continue
        if why is not None:
            item.verdict = dataclasses.replace(verdict, state="held", reason=why, update=None)
        elif notes:
            reason = f"{verdict.reason}; history read stopped early: {'; '.join(notes)}"
            item.verdict = dataclasses.replace(verdict, reason=reason)

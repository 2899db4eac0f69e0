"""The commits that changed an images entry's image, read from a partial shallow clone's history.

Read-only; asked only for a target that would otherwise change (edit-kustomize's ``update``, the
reconcile's ``behind``; commit-pr's re-check when the newest base changed the file), so a run where
nothing moves reads no history. Bounded in commits: at most :data:`steps.domain.intent.HISTORY_LIMIT`
commits that touched the kustomization, newest first, within at most :data:`MAX_DEPTH` commits of
the branch; and in bytes: a commit's message is read streaming, :data:`MESSAGE_KEEP` bytes of its
head and of its tail kept (the rest is not held in memory), and a version of the file larger
than :data:`BLOB_LIMIT` ends the read there with a reason (:attr:`History.bound`) — the history
before it is not seen, as a rollback beyond the 20 commits is not. At most about
``HISTORY_LIMIT * (2 * MESSAGE_KEEP + 2 * BLOB_LIMIT)`` bytes are held, far inside a pod's 1 GiB.

Renames are followed: when the file was added by a commit that deleted a kustomization file (a
``kustomization.yml`` renamed ``kustomization.yaml``, an overlay moved), the history goes on with
the old file (:func:`steps.git.history.renamed_from`), up to :data:`RENAMES` times.

Unforgeable: which commits touched the file and its versions come from NUL-terminated raw output
(object ids only); what a commit says is parsed from its object by length
(:mod:`steps.git.history`). A commit date beyond year 9999 or before 1970 is clamped, never raised.

Cost, on the clone every step already makes (``blob:none``): one ``fetch --depth`` of
:data:`DEPTHS`\\ [0] commits (commits and trees, no file contents) — none when the clone already
brought them (edit-kustomize clones :data:`DEPTHS`\\ [0] deep and says so in ``depths``) — one
``git log`` of the file, and one fetch of the file's earlier versions those commits name (one
request for all of them);
deeper only while the history goes on past the shallow boundary. bench/README.md "History read"
has the numbers. The fast path (:func:`only_imagebump`) stops early at imagebump's commit whose
``Imagebump-History`` line vouches, for its own parent, for the touches before it, so it seldom
fetches deeper (bench/README.md, "Waste found" item 8).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from steps.domain.intent import (
    HISTORY_LIMIT,
    ImageChange,
    by_imagebump,
    changed_image,
    history_mark,
    trailer_values,
)
from steps.git import history as githistory

if TYPE_CHECKING:
    from steps.domain.models import ImagesEntry, ValuesRef
    from steps.git import ClonedRepo

#: How deep the clone is fetched, step by step, while no decision is found (commits from the tip).
DEPTHS = (50, 250, 1000)
#: The most commits of the branch ever fetched for one entry's history.
MAX_DEPTH = DEPTHS[-1]
#: Bytes of a commit message's head, and of its tail, that are read (the trailer is at the end).
MESSAGE_KEEP = 64 * 1024
#: The largest version of the kustomization read (bytes); a larger one ends the read with a reason.
BLOB_LIMIT = 1024 * 1024
#: How many renames of the file are followed back.
RENAMES = 5
#: How many merges deep a merge's change is followed into side branches (a side merged into a side).
SIDE_MERGES = 5
_PR_NUMBER = re.compile(r"\(#(\d{1,9})\)\s*$")


@dataclass(frozen=True)
class History:
    """The image changes of one entry, newest first, and why the read stopped early (``bound``:
    "" when it reached the entry's beginning or the commit bound)."""

    changes: tuple[ImageChange, ...] = ()
    bound: str = ""
    # the file's path at each change (renames followed): ``paths[i]`` for ``changes[i]``
    paths: tuple[str, ...] = field(default=(), compare=False)


def _entry(text: str | None, name: str, file: str, values: ValuesRef | None = None) -> ImagesEntry | None:
    from steps import kustomize
    from steps.domain.errors import ImagebumpError

    if text is None:
        return None
    try:
        return kustomize.read_entry(text, name, by_new_name=False, source=file, values=values)
    except ImagebumpError:
        return None  # not a readable kustomization then: no evidence either way


class _Reader:
    """One entry's history read: blob texts and parsed entries shared across deepening steps."""

    def __init__(
        self,
        repo: ClonedRepo,
        name: str,
        tick: Callable[[], None] | None,
        current: tuple[str, ImagesEntry] | None,
        values: ValuesRef | None = None,
    ) -> None:
        self.repo, self.name, self.tick, self.current = repo, name, tick, current
        self.values = values  # a steps.domain.models.ValuesRef: the file is a Helm values file
        self.texts: dict[str, str | None] = {}  # blob id -> text (None: larger than BLOB_LIMIT)
        self.sizes: dict[str, int] = {}
        self.entries: dict[tuple[str, str], ImagesEntry | None] = {}

    def load(self, oids: set[str]) -> None:
        """Fetch (one request) and read (one ``cat-file``) the blobs not read yet."""
        wanted = sorted(o for o in oids if o not in self.texts and o not in githistory.ZERO)
        if not wanted:
            return
        if self.tick is not None:
            self.tick()
        read = githistory.read_blobs(
            self.repo,
            wanted,
            BLOB_LIMIT,
            fetch=self.tick is not None,
            what=f"fetch of {len(wanted)} earlier version(s) of a kustomization from {self.repo.url}",
        )
        for oid, (size, data) in read.items():
            self.sizes[oid] = size
            self.texts[oid] = None if data is None else data.decode("utf-8", "replace")

    def too_large(self, oid: str) -> bool:
        return oid in self.texts and self.texts[oid] is None

    def entry(self, oid: str, file: str) -> ImagesEntry | None:
        if oid in githistory.ZERO:
            return None
        key = (oid, file)
        if key not in self.entries:
            text = self.texts.get(oid)
            known = self.current is not None and text is not None and text == self.current[0]
            self.entries[key] = self.current[1] if known else _entry(text, self.name, file, self.values)
        return self.entries[key]


def _walk(reader: _Reader, rev: str, file: str, limit: int, boundary: set[str]) -> tuple[list, str, bool]:
    """``([(touch, path, before, after)], bound, deeper)``: the image changes found newest first;
    ``deeper`` True when the walk reached the shallow boundary before its end."""
    repo = reader.repo
    found: list[tuple[githistory.Touch, str, ImagesEntry, ImagesEntry]] = []
    seen, renames, path, at = 0, 0, file, rev
    while seen < limit:
        touches = githistory.touching(repo, at, path, limit - seen)
        reader.load({o for t in touches for o in (t.old, t.new)})
        tips: dict[str, githistory.Touch] | None = (
            None  # the merges' side tips: one git log, when first asked
        )
        for touch in touches:
            if touch.commit in boundary:
                return found, "", True  # its parent was not fetched: deepen and look again
            seen += 1
            for oid in (touch.new, touch.old):
                if reader.too_large(oid):
                    bound = (
                        f"the version of {path} at commit {touch.commit[:12]} is {reader.sizes[oid]} bytes, "
                        f"over the {BLOB_LIMIT}-byte bound: its history before that was not read"
                    )
                    return found, bound, False
            after = reader.entry(touch.new, path)
            if touch.old in githistory.ZERO:  # the file begins here, or was renamed from another
                previous = (
                    githistory.renamed_from(repo, touch.commit, path, touch.new)
                    if renames < RENAMES
                    else None
                )
                if previous is None:
                    return found, "", False
                old = githistory.blob_at(repo, f"{touch.commit}^", previous)
                if old is None:
                    return found, "", False
                reader.load({old})
                if reader.too_large(old):
                    return (
                        found,
                        f"the version of {previous} before commit {touch.commit[:12]} is over the {BLOB_LIMIT}-byte bound: its history before that was not read",
                        False,
                    )
                before = reader.entry(old, previous)
                if before is None or after is None:
                    return found, "", False  # the entry begins here
                if changed_image(before, after):
                    found.append((touch, path, before, after))
                renames += 1
                path, at = previous, f"{touch.commit}^"
                break
            before = reader.entry(touch.old, path)
            if before is None or after is None:
                return found, "", False  # the entry (or the file) begins here: nothing before counts
            if changed_image(before, after):
                if touch.merge:
                    if tips is None:
                        merges = [t for t in touches if t.merge and t.commit not in boundary]
                        tips = githistory.side_changes(repo, merges, path)
                    touch = _made_by(reader, touch, path, after, boundary, tips=tips)
                found.append((touch, path, before, after))
        else:
            return found, "", False  # every commit that touched the file read
    return found, "", False


def _made_by(
    reader: _Reader,
    merge: githistory.Touch,
    path: str,
    after: ImagesEntry,
    boundary: set[str],
    depth: int = 0,
    tips: dict[str, githistory.Touch] | None = None,
) -> githistory.Touch:
    """Who made the image change a merge made on its branch (read against its first parent).

    When the merge took a side branch's version of the file and that side's newest change of the
    entry's image set exactly this image, the change is that commit's: imagebump's pull request
    merged with a merge commit stays imagebump's, a person's branch stays theirs. Otherwise the
    merge made it — a conflict resolved by hand, or the side's older file taken over the branch's
    newer image (the side never set that image: the merge undid the branch's changes) — and its
    author, a person unless the merge's own message says imagebump, made it. The touch returned
    keeps the merge's versions of the file (``old``, ``new``): what changed on the branch.
    ``tips``: :func:`steps.git.history.side_changes` of the walk's merges, read once for all of them
    (default: this merge's alone).
    """
    repo = reader.repo
    tip = githistory.made_by_side_tip(
        merge, githistory.side_changes(repo, [merge], path) if tips is None else tips
    )
    if tip is not None:  # the usual case, read from one git log: the side's tip made exactly this change
        return replace(merge, commit=tip)
    for side in merge.parents[1:]:
        if githistory.blob_at(repo, side, path) != merge.new:
            continue
        touches = githistory.touching(repo, side, path, HISTORY_LIMIT, exclude=merge.parents[0])
        reader.load({o for t in touches for o in (t.old, t.new)})
        for touch in touches:
            if touch.commit in boundary:
                break  # its parent was not fetched: whether it made the change is not known
            before, now = reader.entry(touch.old, path), reader.entry(touch.new, path)
            if before is None or now is None:
                break
            if changed_image(before, now):
                if changed_image(now, after):
                    break  # the side's newest image is another: the merge set this one
                if touch.merge and depth < SIDE_MERGES:
                    touch = _made_by(reader, touch, path, now, boundary, depth + 1)
                return replace(merge, commit=touch.commit)
    return merge


def entry_history(
    repo: ClonedRepo,
    rev: str,
    file: str,
    name: str,
    *,
    branch: str | None = None,
    limit: int = HISTORY_LIMIT,
    count: Callable[[], None] | None = None,
    depths: dict[str, int] | None = None,
    fetch: bool = True,
    current: tuple[str, ImagesEntry] | None = None,
    values: ValuesRef | None = None,
) -> History:
    """Every commit at ``rev`` (at most ``limit`` commits that touched ``file`` back, renames
    followed) that changed the image of the entry named ``name``, newest first.

    ``repo`` is a :class:`steps.git.ClonedRepo` (partial, possibly shallow: deepened here as far
    as needed, at most :data:`MAX_DEPTH` commits, from ``branch``, default the clone's);
    ``count`` is called once per network request; ``fetch`` False reads a local repository as it
    is (no request: a shallow history is read as far as it goes); ``depths`` (branch → commits
    fetched), shared by the callers of one clone, keeps a second entry from fetching it again.
    ``current`` (the file's text at ``rev`` and its entry, when the caller has read them) spares
    parsing that text again; every other version is parsed once, however many commits share it.
    ``values`` (a :class:`steps.domain.models.ValuesRef`): ``file`` is a Helm values file.
    """
    tick = (count or (lambda: None)) if fetch else None
    reader = _Reader(repo, name, tick, current, values)
    branch = branch or repo.branch
    reached = depths if depths is not None else {}
    found: list = []
    bound = ""
    for depth in DEPTHS:
        boundary = githistory.shallow(repo)
        if boundary and tick is not None and reached.get(branch, 1) < depth:
            tick()
            githistory.deepen(repo, branch, depth)
            reached[branch] = depth
            boundary = githistory.shallow(repo)
        found, bound, deeper = _walk(reader, rev, file, limit, boundary)
        if not deeper or tick is None:
            break
    infos = {
        oid: githistory.parse_commit(obj)
        for oid, obj in githistory.read_objects(repo, [t.commit for t, *_ in found], MESSAGE_KEEP).items()
        if obj.kind == "commit"
    }
    changes, paths = [], []
    for touch, path, before, after in found:
        info = infos.get(touch.commit)
        if info is None:
            continue
        changes.append(ImageChange(touch.commit, info.author, info.committed_at, info.message, before, after))
        paths.append(path)
    return History(tuple(changes), bound, tuple(paths))


def last_image_change(repo: ClonedRepo, rev: str, file: str, name: str, **history: Any) -> ImageChange | None:
    """The newest commit that changed the entry's image (:func:`entry_history`), or None."""
    changes = entry_history(repo, rev, file, name, **history).changes
    return changes[0] if changes else None


def only_imagebump(
    repo: ClonedRepo,
    rev: str,
    file: str,
    limit: int = HISTORY_LIMIT,
    *,
    branch: str | None = None,
    count: Callable[[], None] | None = None,
    depths: dict[str, int] | None = None,
    fetch: bool = True,
) -> bool:
    """True when no change :func:`entry_history` could find at ``rev`` can be a rollback: every
    commit among the last ``limit`` that touched ``file`` carries imagebump's trailer, up to where
    the file begins (a root commit added it, or a commit that deleted no kustomization beside it:
    :func:`steps.git.history.renamed_from`). A rollback is a change made by someone else
    (:func:`steps.domain.intent.rollback`), so no version of the file needs reading then.

    Cheap: one ``git log`` of the file and one ``git cat-file --batch`` of those commits, on the
    commits and trees the clone brought (no file version is fetched or read); deeper only as
    :func:`entry_history` deepens (``branch``, ``count``, ``depths``, ``fetch`` as there: a
    ``depths`` shared with it fetches nothing twice). False — read the history as ever — whenever
    it cannot tell: a commit without the trailer (a person's edit, even of another line), a
    rename, the shallow boundary where no deeper fetch is allowed, a commit it could not read.

    It stops early at imagebump's commit that says, made on its own parent, how many earlier
    touches it found to be imagebump's (``Imagebump-History``,
    :func:`steps.domain.intent.history_mark`): those together with the ones walked reach ``limit``.
    In a monorepo whose overlays all take commits that spares fetching deeper: the file's last 20
    touches may lie hundreds of commits back, its last imagebump commit a few dozen.
    """
    tick = (count or (lambda: None)) if fetch else None
    branch = branch or repo.branch
    reached = depths if depths is not None else {}
    for depth in DEPTHS:
        boundary = githistory.shallow(repo)
        if boundary and tick is not None and reached.get(branch, 1) < depth:
            tick()
            githistory.deepen(repo, branch, depth)
            reached[branch] = depth
            boundary = githistory.shallow(repo)
        verdict = _judged_by_messages(repo, rev, file, limit, boundary)
        if verdict is not None:
            return verdict
        if tick is None:
            return False
    return False


def _judged_by_messages(repo: ClonedRepo, rev: str, file: str, limit: int, boundary: set[str]) -> bool | None:
    """:func:`only_imagebump` on the commits at hand; None when it reached the shallow boundary."""
    touches = githistory.touching(repo, rev, file, limit)
    # a merge's change is its side tip's when that tip made exactly that change (_made_by's usual case);
    # not asked of a merge at the shallow boundary: its parents were not fetched (nor lazily fetched here)
    merges = [t for t in touches if t.merge and t.commit not in boundary]
    tips = githistory.side_changes(repo, merges, file)
    made = {t.commit: githistory.made_by_side_tip(t, tips) for t in merges}
    objects = githistory.read_objects(
        repo, [t.commit for t in touches] + [c for c in made.values() if c], MESSAGE_KEEP
    )
    for seen, touch in enumerate(touches, 1):
        obj = objects.get(touch.commit)
        if obj is None or obj.kind != "commit":
            return False
        info = githistory.parse_commit(obj)
        ours = by_imagebump(info.message)
        tip = objects.get(made.get(touch.commit) or "")
        if not ours and tip is not None and tip.kind == "commit":  # a merge of imagebump's branch
            ours = by_imagebump(githistory.parse_commit(tip).message)
        # imagebump's commit that found only imagebump's commits behind it, made on this very parent,
        # vouches for them: they need not be walked (nor fetched) again
        vouched = history_mark(info.message, info.first_parent, file) if ours and info.parents == 1 else 0
        if touch.commit in boundary:
            # its parent was not fetched, so whether it touched the file is not known: only what it
            # vouches for counts; else deepen and look again
            return True if vouched and seen - 1 + vouched >= limit else None
        if touch.old in githistory.ZERO:  # the file begins here, unless it was renamed from another
            return info.parents == 0 or githistory.renamed_from(repo, touch.commit, file, touch.new) is None
        if not ours:
            return False
        if seen + vouched >= limit:
            return True
    return len(touches) >= limit


def _pull_request_trailers(repo: ClonedRepo, number: str, tick: Callable[[], None]) -> list[str]:
    """The ``Imagebump-Image`` values of the head commit of pull request ``number``
    (``refs/pull/N/head``, which GitHub keeps after the pull request is merged and its branch
    deleted: https://docs.github.com/en/pull-requests/collaborating-with-pull-requests/reviewing-changes-in-pull-requests/checking-out-pull-requests-locally)."""
    tick()
    sha = githistory.fetch_ref(repo, f"refs/pull/{number}/head", f"fetch of pull request #{number}'s head")
    if sha is None:
        return []
    obj = githistory.read_objects(repo, [sha], MESSAGE_KEEP).get(sha)
    if obj is None or obj.kind != "commit":
        return []
    return trailer_values(githistory.parse_commit(obj).message)


def _sets(value: str, change: ImageChange) -> bool:
    """Does the trailer ``value`` (``REPO:TAG@DIGEST``) name the image ``change`` set?"""
    from steps.domain.models import image_ref

    repo = value.split("@", 1)[0]
    last = repo.rpartition("/")[2]
    if ":" in last:
        repo = repo[: len(repo) - len(last)] + last.rpartition(":")[0]
    return value == image_ref(change.after.newTag, change.after.digest, name=repo)


def by_pull_request(repo: ClonedRepo, change: ImageChange, tick: Callable[[], None] | None) -> ImageChange:
    """``change`` marked imagebump's when it is the squash merge of imagebump's own pull request
    whose message lost the trailer (GitHub's "pull request title" squash message,
    ``TITLE (#N)``): the pull request's head commit (``refs/pull/N/head``) carries the trailer
    for the very image the change set. A subject without ``(#N)``, a head that is not imagebump's
    or that proposed another image, or no such ref (not GitHub): it stays a person's change."""
    if change.by_imagebump or tick is None:
        return change
    subject = change.message.split("\n", 1)[0]
    found = _PR_NUMBER.search(subject)
    if found is None:
        return change
    number = found.group(1)
    if any(_sets(v, change) for v in _pull_request_trailers(repo, number, tick)):
        return ImageChange(
            change.commit,
            change.author,
            change.committed_at,
            change.message,
            change.before,
            change.after,
            via_pull_request=f"squash merge of imagebump's pull request #{number}",
        )
    return change


@dataclass(frozen=True)
class ReadAhead:
    """:func:`only_imagebump`'s answer at ``rev`` for ``file`` within ``limit``, read before the
    caller knew it would need it (edit-kustomize reads it while ECR answers): :func:`rollback_verdict`
    takes it instead of reading again, for that very revision, file and bound only."""

    rev: str
    file: str
    limit: int
    only_imagebump: bool


@dataclass(frozen=True)
class Verdict:
    """What the rollback check found: why a standing rollback holds (None: none does), and whether
    only imagebump touched the file within the bound there (:func:`only_imagebump`): what the
    commit made on that base may record (:func:`steps.domain.intent.history_trailer`)."""

    held: str | None
    only_imagebump: bool = False


def held_by_rollback(repo: ClonedRepo, rev: str, file: str, name: str, **kwargs: Any) -> str | None:
    """Why a standing rollback holds the entry (:func:`rollback_verdict`'s ``held``), or None."""
    return rollback_verdict(repo, rev, file, name, **kwargs).held


def rollback_verdict(
    repo: ClonedRepo,
    rev: str,
    file: str,
    name: str,
    *,
    order: str,
    new: ImagesEntry,
    new_pushed_at: datetime | None,
    pushed_at: Callable[[ImagesEntry], datetime | None],
    notes: list[str] | None = None,
    ahead: ReadAhead | None = None,
    **history: Any,
) -> Verdict:
    """The :class:`Verdict` on writing ``new`` (an :class:`steps.domain.models.ImagesEntry`, pushed
    at ``new_pushed_at``) into the entry ``name`` of ``file`` at ``rev``: why a standing rollback
    holds it (None: none does), and whether :func:`only_imagebump` held there.

    Every change :func:`entry_history` (``history``: its keyword arguments) finds is judged by
    :func:`steps.domain.intent.standing_rollbacks` (a later hotfix does not make an earlier
    rollback forgotten) and :func:`steps.domain.intent.held_by_standing`; ``pushed_at`` gives an
    entry's ECR push time (``order: push-time``). A change without the trailer that would count as
    a rollback is checked against its pull request (:func:`by_pull_request`). When the read
    stopped at a byte bound, its reason is appended to ``notes`` (and logged). ``ahead``: the
    :func:`only_imagebump` answer already read for this ``rev``, ``file`` and bound (another is ignored).
    """
    import logging

    from steps.domain.intent import held_by_standing, rollback, standing_rollbacks

    if history.get("depths") is None:
        history["depths"] = {}  # one clone's deepening, shared by the two reads below
    asks = {k: history[k] for k in ("branch", "count", "depths", "fetch") if k in history}
    limit = history.get("limit", HISTORY_LIMIT)
    if ahead is not None and (ahead.rev, ahead.file, ahead.limit) == (rev, file, limit):
        clean = ahead.only_imagebump
    else:
        clean = only_imagebump(repo, rev, file, limit, **asks)
    if clean:
        # nobody else touched the file within the bound: no rollback, nothing to read
        return Verdict(None, only_imagebump=True)
    found = entry_history(repo, rev, file, name, **history)
    if found.bound:
        logging.getLogger(__name__).warning("history of %s [%s]: %s", file, name, found.bound)
        if notes is not None:
            notes.append(found.bound)
    tick = (history.get("count") or (lambda: None)) if history.get("fetch", True) else None
    changes = [
        by_pull_request(repo, c, tick) if rollback(c, order, pushed_at) is not None else c  # type: ignore[arg-type]
        for c in found.changes
    ]
    standing = standing_rollbacks(changes, order, pushed_at)  # type: ignore[arg-type]
    return Verdict(held_by_standing(standing, new, new_pushed_at, order))  # type: ignore[arg-type]

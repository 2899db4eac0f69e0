"""The last commit that changed an images entry's image, read from a partial shallow clone's history.

Read-only; asked only for a target that would otherwise change (edit-kustomize's ``update``, the
sweep's ``behind``), so a run where nothing moves reads no history. Bounded: at most
:data:`steps.domain.intent.HISTORY_LIMIT` commits that touched the kustomization, newest first, within at
most :data:`MAX_DEPTH` commits of the branch.

Cost, on the clone every step already makes (``blob:none``, depth 1): one ``fetch --depth`` of
:data:`DEPTHS`\\ [0] commits (commits and trees, no file contents), one ``git log`` of the
file with its blob ids, and one fetch of the file's versions those commits name (one request for
all of them); deeper only while no decision was found and the history goes on. bench/README.md
"History read" has the numbers.

Returns a :class:`steps.domain.intent.ImageChange` (who, when, from → to, the message) or None: no commit
in the bound changed the entry's image (or the entry or file was created there).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from steps.domain.intent import HISTORY_LIMIT, ImageChange, changed_image

#: How deep the clone is fetched, step by step, while no decision is found (commits from the tip).
DEPTHS = (50, 250, 1000)
#: The most commits of the branch ever fetched for one entry's history.
MAX_DEPTH = DEPTHS[-1]
_ZERO = frozenset({"0" * 40, "0" * 64})
_RS, _US = "\x1e", "\x1f"


def _shallow(repo: Any) -> set[str]:
    """The clone's shallow boundary (commits whose parents were not fetched)."""
    path = repo.path / ".git" / "shallow"
    return set(path.read_text().split()) if path.is_file() else set()


def _log(repo: Any, rev: str, file: str, limit: int) -> list[tuple[str, str, datetime, str, str, str]]:
    """``(commit, author, committed at, message, old blob, new blob)`` of the last ``limit``
    commits at ``rev`` that touched ``file``, newest first (merges without a diff left out)."""
    out = repo.git(
        "log",
        f"-n{limit}",
        f"--format={_RS}%H{_US}%an <%ae>{_US}%ct{_US}%B{_US}",
        "--raw",
        "--no-abbrev",
        "--no-renames",
        rev,
        "--",
        file,
        what=f"reading the history of {file}",
    ).stdout
    found = []
    for record in out.split(_RS)[1:]:
        commit, author, when, message, raw = (record.split(_US) + ["", "", "", ""])[:5]
        line = next((x for x in raw.splitlines() if x.startswith(":")), "")
        fields = line[1:].split("\t", 1)[0].split()
        if len(fields) < 4:
            continue
        at = datetime.fromtimestamp(int(when), UTC) if when.strip().isdigit() else datetime.now(UTC)
        found.append((commit.strip(), author, at, message, fields[2], fields[3]))
    return found


def _texts(repo: Any, oids: set[str], have: dict[str, str], count: Callable[[], None] | None) -> None:
    """Add the text of each blob in ``oids`` to ``have``: fetched in ONE request (a partial clone
    would otherwise fetch them one request each; ``count`` None: a local repository, nothing is
    fetched), then one ``cat-file`` for all."""
    wanted = sorted(o for o in oids if o not in have and o not in _ZERO)
    if not wanted:
        return
    if count is not None:
        _fetch_blobs(repo, wanted, count)
    _read_blobs(repo, wanted, have)


def _fetch_blobs(repo: Any, wanted: list[str], count: Callable[[], None]) -> None:
    """Fetch the blobs ``wanted`` in one request (protocol v2 lets a client want any object)."""
    count()
    repo.git(
        "-c",
        "fetch.negotiationAlgorithm=noop",
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--recurse-submodules=no",
        "origin",
        *wanted,
        what=f"fetch of {len(wanted)} earlier version(s) of a kustomization from {repo.url}",
    )


def _read_blobs(repo: Any, wanted: list[str], have: dict[str, str]) -> None:
    """Read the blobs ``wanted`` with one ``cat-file``; a random marker (no file can guess it)
    separates them, as the output is decoded text."""
    marker = "imagebump-" + secrets.token_hex(16)
    out = repo.git("cat-file", f"--batch={marker} %(objectname)", input="\n".join(wanted) + "\n").stdout
    for chunk in out.split(marker + " ")[1:]:
        oid, _, body = chunk.partition("\n")
        have[oid.strip()] = body.removesuffix("\n")


def _entry(text: str | None, name: str, file: str, values: Any = None):
    from steps import kustomize
    from steps.domain.errors import ImagebumpError

    if text is None:
        return None
    try:
        return kustomize.read_entry(text, name, by_new_name=False, source=file, values=values)
    except ImagebumpError:
        return None  # not a readable kustomization then: no evidence either way


def last_image_change(
    repo: Any,
    rev: str,
    file: str,
    name: str,
    *,
    branch: str | None = None,
    limit: int = HISTORY_LIMIT,
    count: Callable[[], None] | None = None,
    depths: dict[str, int] | None = None,
    fetch: bool = True,
    current: tuple[str, Any] | None = None,
    values: Any = None,
) -> ImageChange | None:
    """The newest commit at ``rev`` (at most ``limit`` commits that touched ``file`` back) that
    changed the image of the entry named ``name``, or None.

    ``repo`` is a :class:`steps.git.ClonedRepo` (partial, possibly shallow: deepened here as far
    as needed, at most :data:`MAX_DEPTH` commits, from ``branch``, default the clone's);
    ``count`` is called once per network request; ``fetch`` False reads a local repository as it
    is (no request: a shallow history is read as far as it goes); ``depths`` (branch → commits
    fetched), shared by the callers of one clone, keeps a second entry from fetching it again.
    ``current`` (the file's text at ``rev`` and its entry, when the caller has read them) spares
    parsing that text again; every other version is parsed once, however many commits share it.
    ``values`` (a :class:`steps.domain.models.ValuesRef`): ``file`` is a Helm values file.
    """
    texts: dict[str, str] = {}
    entries: dict[str, Any] = {}

    def entry_of(oid: str) -> Any:
        if oid not in entries:
            text = texts.get(oid)
            known = current is not None and text is not None and text == current[0]
            entries[oid] = current[1] if known else _entry(text, name, file, values)  # type: ignore[index]
        return entries[oid]

    tick = (count or (lambda: None)) if fetch else None
    branch = branch or repo.branch
    reached = depths if depths is not None else {}
    for depth in DEPTHS:
        boundary = _shallow(repo)
        if boundary and tick is not None and reached.get(branch, 1) < depth:
            tick()
            repo.git(
                "fetch",
                "--quiet",
                f"--depth={depth}",
                "--filter=blob:none",
                "--no-tags",
                "--no-write-fetch-head",
                "origin",
                f"refs/heads/{branch}",
                what=f"fetch of the history of '{branch}' from {repo.url}",
            )
            reached[branch] = depth
            boundary = _shallow(repo)
        commits = _log(repo, rev, file, limit)
        _texts(repo, {oid for c in commits for oid in c[4:6]}, texts, tick)
        for commit, author, at, message, old, new in commits:
            if commit in boundary:
                break  # its parent was not fetched: deepen and look again
            before, after = entry_of(old), entry_of(new)
            if before is None or after is None:
                return None  # the entry (or the file) begins here: nothing was rolled back
            if changed_image(before, after):
                return ImageChange(commit, author.strip(), at, message, before, after)
        else:
            return None  # every commit in the bound read: no change of the image
        if tick is None:
            return None  # a local repository's history ends here
    return None


def held_by_rollback(
    repo: Any,
    rev: str,
    file: str,
    name: str,
    *,
    order: str,
    new_ref: str,
    new_pushed_at: datetime | None,
    pushed_at: Callable[[Any], datetime | None],
    **history: Any,
) -> str | None:
    """Why a rollback holds the entry ``name`` of ``file`` against writing ``new_ref`` (pushed at
    ``new_pushed_at``), or None: :func:`last_image_change` (``history``: its keyword arguments)
    judged by :func:`steps.domain.intent.rollback` and :func:`steps.domain.intent.rollback_hold`; ``pushed_at``
    gives an entry's ECR push time (``order: push-time``)."""
    from steps.domain.intent import rollback, rollback_hold

    change = last_image_change(repo, rev, file, name, **history)
    return rollback_hold(rollback(change, order, pushed_at), new_pushed_at, new_ref)  # type: ignore[arg-type]


def unless_rolled_back(
    target: Any,
    plan: Any,
    repo: Any,
    ask: Callable[[list], dict],
    known: dict,
    current: tuple[str, Any] | None = None,
) -> Any:
    """edit-kustomize: ``plan`` (a :class:`steps.domain.models.Plan` that changes something), or the same
    plan ``held`` (``changed: false``) when a person's rollback of its entry stands.

    ``ask`` is ECR's push-time lookup (``[ImageKey] → {ImageKey: datetime | None}``), called only
    for ``order: push-time`` and only for what ``known`` (the push times already asked) lacks.
    """
    from steps.domain.errors import InvalidEventError
    from steps.domain.intent import pinned
    from steps.domain.models import ImagesEntry, image_ref
    from steps.domain.never_downgrade import image_key
    from steps.runtime.timing import timed

    def pushed_at(entry: ImagesEntry) -> datetime | None:
        if target.order != "push-time" or pinned(entry, target.image):
            return None
        key = image_key(entry.newTag, entry.digest)
        if key not in known:
            try:
                known.update(ask([key]))
            except InvalidEventError:  # not an ECR image: no push times
                known[key] = None
        return known.get(key)

    new_at = target.pushed_at or pushed_at(
        ImagesEntry(name=plan.image_name, newTag=target.tag, digest=target.digest)
    )
    with timed("history"):
        why = held_by_rollback(
            repo,
            plan.base_commit,
            plan.file,
            plan.image_name,
            order=target.order,
            new_ref=image_ref(plan.new.newTag, plan.new.digest),
            new_pushed_at=new_at,
            pushed_at=pushed_at,
            current=current,
            values=plan.values,
        )
    if why is None:
        return plan
    return plan.model_copy(update={"changed": False, "decision": "held", "reason": why})

"""reconcile: every overlay the rules map an ECR repository to, against the newest image it allows.

Events make imagebump fast; this sweep makes it complete. A push whose event was lost (a queue
purged, a Sensor outage, a Workflow that failed all its retries) leaves its overlays behind; the
CronWorkflow ``image-reconcile`` runs this step every few minutes and hands the overlays that are
behind to the same ``update-target`` steps an event runs, so every push is reflected within one
sweep interval.

Reads:

* the rules file at ``$IMAGEBUMP_RULES_FILE`` (default ``/etc/imagebump/rules/rules.yaml``);
* ECR, read-only, through botocore's *adaptive* retry mode and at most ``concurrency`` calls at
  once: ``DescribeRepositories`` once per registry (paginated; ECR cannot filter by prefix, so the
  pages are filtered by each rule's fixed prefix — the repository part before its first ``$n`` —
  before ``$n`` is matched), skipped for rules that name one repository; ``DescribeImages`` once
  per matching repository (paginated): every tag with its digest and push time;
* Git, read-only (``IMAGEBUMP_GIT_READ_TOKEN[_FILE]``, else anonymous): ONE partial
  (``blob:none``), depth-1, sparse clone per Git repository per sweep whose cone holds every
  overlay of that repository; in ``mode: pr`` the targets' proposal branches
  (:func:`steps.branches.branch_name`), listed with one ``ls-remote`` and fetched together into
  that clone, their files in one batch.

Targets are computed exactly as resolve-image computes them: every tag ECR holds is matched with
:meth:`steps.rules.RuleSet.match`; the targets of one overlay (repository, path, image) are that
overlay's candidates, and the newest is chosen by the rule's ``order`` (push time, or semver
precedence). Only tagged images are candidates: ECR leaves an image untagged when its tag moves to
a newer push, and multi-platform pushes leave their per-platform manifests untagged, so an untagged
image is never "the newest release" (a digest-only push is still handled by its event).

Each target gets a state (:func:`decide`, pure):

* ``behind``: the overlay holds an older image (by the rule's order) than the newest allowed, and
  no living proposal already offers it — handed to update-target;
* ``current``: the overlay holds the newest allowed image;
* ``ahead``: the overlay (or its living proposal branch) holds something newer than the newest
  allowed — never touched;
* ``proposed`` (``mode: pr``): the target's proposal branch already proposes the newest;
* ``unknown``: with the reason (``order: none`` has no newest; the overlay or its image entry is
  missing; the repository could not be read).

Writes nothing but its outputs: ``targets`` (the behind ones, in resolve-image's shape, at most
``limit`` of them so a Workflow's status stays small; the rest are left for the next sweep and the
reason says so), ``report`` (one line per target; with ``full: false`` only the targets that are
not current), ``counts`` (targets per state and env: the gauge), ``behind``, ``ecr-calls``,
``git-calls``, ``git-clones`` (what the sweep cost) and ``reason`` (a summary). It pushes nothing:
the update-target steps do, under the same per-overlay mutex as events.

Errors: a bad rules file or a refused ECR listing (no ``ecr:DescribeRepositories``) is a
:class:`~steps.errors.ConfigError`; ECR failing for now is a :class:`~steps.errors.TransientError`.
A Git repository that cannot be read makes its targets ``unknown`` (with the reason) and the
sweep goes on with the others.
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
import logging
import os
import re
import secrets
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cmp_to_key
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, Field

from steps._runtime import step_entry
from steps.branches import branch_name
from steps.errors import ConfigError, ImagebumpError, TransientError
from steps.models import Image, ImagesEntry, Target

log = logging.getLogger(__name__)

#: Modules this step imports only when it runs (a local executor's warm interpreter imports them ahead).
LAZY_IMPORTS = (
    "steps.ecr",
    "steps.git",
    "steps.kustomize",
    "steps.order",
    "steps.rules",
    "yaml",
    "boto3",
    "botocore.config",
    "botocore.exceptions",
)

DEFAULT_RULES_FILE = "/etc/imagebump/rules/rules.yaml"
DEFAULT_CONCURRENCY = 8
MAX_CONCURRENCY = 64
#: Behind targets handed over per sweep: the list is a Workflow output parameter (etcd-sized).
DEFAULT_LIMIT = 500

State = Literal["behind", "current", "ahead", "proposed", "unknown"]
STATES: tuple[str, ...] = ("behind", "current", "ahead", "proposed", "unknown")

__all__ = [
    "ReconcileOutput",
    "StateCount",
    "TargetState",
    "decide",
    "pick_newest",
    "render_table",
    "run",
    "sweep",
]


class TargetState(BaseModel):
    """One target of the sweep: where, what the overlay holds, the newest allowed, and the verdict."""

    repo_url: str
    path: str
    env: str = ""
    current: str = Field(default="", description="the overlay's newTag[@digest] ('' when unreadable)")
    newest: str = Field(default="", description="the newest allowed image as it would be written")
    state: State
    reason: str = ""


class StateCount(BaseModel):
    state: State
    env: str
    count: int


class ReconcileOutput(BaseModel):
    targets: list[Target] = Field(default_factory=list)
    report: list[TargetState] = Field(default_factory=list)
    counts: list[StateCount] = Field(default_factory=list)
    behind: int = 0
    ecr_calls: int = 0
    git_calls: int = 0
    git_clones: int = 0
    reason: str = ""


# ============================================================================ pure core


_VAR = re.compile(r"\$[0-9]+")


def repository_prefix(repo_template: str) -> str:
    """The fixed text a rule's repository names start with: everything before its first ``$n``."""
    m = _VAR.search(repo_template)
    return repo_template if m is None else repo_template[: m.start()]


def repository_matches(repo_template: str, name: str) -> bool:
    """Whether ``name`` has the shape of ``repo_template`` (``$n`` = one non-empty path segment).

    A cheap pre-filter before ECR is asked for a repository's images; the rules themselves
    (:meth:`steps.rules.RuleSet.match`) still decide, image by image.
    """
    parts, names = repo_template.split("/"), name.split("/")
    if len(parts) != len(names):
        return False
    for part, segment in zip(parts, names):
        if "$" not in part:
            if part != segment:
                return False
            continue
        if not _pieces_fit(_VAR.split(part), segment):
            return False
    return True


def _pieces_fit(pieces: list[str], segment: str) -> bool:
    """Whether ``segment`` is ``pieces[0] X pieces[1] X … pieces[-1]`` with every X non-empty.

    Whoever creates ECR repositories chooses their names, so no backtracking regular expression:
    one left-to-right scan (the leftmost place of each middle piece is never worse than a later one).
    """
    first, last = pieces[0], pieces[-1]
    if not segment.startswith(first):
        return False
    pos = len(first)
    for piece in pieces[1:-1]:
        found = segment.find(piece, pos + 1)  # a variable takes at least one character
        if found < 0:
            return False
        pos = found + len(piece)
    return len(segment) - len(last) >= pos + 1 and segment.endswith(last)


def _natural(tag: str) -> tuple:
    """``1.10`` after ``1.9``: digits compare as numbers (a deterministic tie-break)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"([0-9]+)", tag) if p)


def _utc(t: datetime | None) -> datetime:
    if t is None:
        return datetime.min.replace(tzinfo=UTC)
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def pick_newest(candidates: Sequence[Target]) -> tuple[Target | None, str]:
    """The newest of one overlay's candidates by their rule's order, or None and why.

    ``push-time``: the latest ECR push; ties (one image with several tags, or two pushes in the same
    instant) go to the higher version, then the naturally larger tag, so the choice is stable.
    ``semver``: the highest Semantic Versioning precedence among tags that are versions.
    ``none``: never guessed.
    """
    from steps.order import _semver_cmp, parse_semver

    if not candidates:
        return None, "no tag in ECR that the rules allow"
    orders = sorted({c.order for c in candidates})
    rules = sorted({c.rule for c in candidates})
    if len(orders) > 1:
        return None, (
            f"rules {', '.join(map(str, rules))} map images to this overlay with different orders "
            f"({', '.join(orders)}); give them one order"
        )
    order = orders[0]
    if order == "none":
        return None, (
            f"rule {rules[0]} has order: none, so no image is 'the newest': the sweep cannot "
            "reconcile this target (its events still update it); use push-time or semver"
        )
    if order == "semver":
        versions = [(parse_semver(c.tag), c) for c in candidates]
        versions = [(v, c) for v, c in versions if v is not None]
        if not versions:
            return None, "rule orders by semver but no allowed tag in ECR is a semantic version"

        def cmp(a: tuple, b: tuple) -> int:
            c = _semver_cmp(a[0], b[0])
            if c:
                return c
            ka, kb = (
                (_utc(a[1].pushed_at), _natural(a[1].tag or "")),
                (_utc(b[1].pushed_at), _natural(b[1].tag or "")),
            )
            return (ka > kb) - (ka < kb)

        return max(versions, key=cmp_to_key(cmp))[1], ""

    def key(c: Target) -> tuple:
        v = parse_semver(c.tag)
        return (_utc(c.pushed_at), v is not None, _natural(c.tag or ""), c.digest or "")

    return max(candidates, key=key), ""


def _ref(tag: str | None, digest: str | None) -> str:
    return (tag or "") + (f"@{digest}" if digest else "")


def _short(ref: str) -> str:
    """``1.4.2@sha256:0123456789ab…`` for tables."""
    tag, at, digest = ref.partition("@")
    return f"{tag}@{digest[:19]}…" if at and len(digest) > 19 else ref


@dataclass(frozen=True)
class Verdict:
    """What :func:`decide` says about one target."""

    state: State
    reason: str
    current: str = ""
    newest: str = ""
    update: Target | None = None  # behind: the target to hand to update-target


def _written(
    newest: Target, current: ImagesEntry, same_image_tags: Iterable[str]
) -> tuple[str | None, str | None]:
    """(tag, digest) as update-target would write them: the file's own tag if it names the same
    image; the digest only with ``writeDigest`` (or when there is no tag)."""
    tag = newest.tag
    if current.newTag and current.newTag in set(same_image_tags):
        tag = current.newTag  # another allowed tag of the very same image: no tag churn
    digest = newest.digest if (newest.write_digest or not tag) else None
    return tag, digest


def _says(entry: ImagesEntry, tag: str | None, digest: str | None) -> bool:
    return (entry.newTag or None) == (tag or None) and (entry.digest or None) == (digest or None)


def decide(
    *,
    newest: Target | None,
    why_no_newest: str = "",
    same_image_tags: Iterable[str] = (),
    current: ImagesEntry | None,
    current_error: str = "",
    current_pushed_at: datetime | None = None,
    branch: str = "",
    proposed: ImagesEntry | None = None,
    proposed_pushed_at: datetime | None = None,
) -> Verdict:
    """The state of one target. Pure: every fact was read before.

    Args:
        newest: the newest allowed image as a Target (:func:`pick_newest`), None if there is none.
        why_no_newest: why there is none (``order: none``, no version tag, ...).
        same_image_tags: every allowed tag of the newest image's digest (the file may use another).
        current: the overlay's images entry; None when unreadable (``current_error`` says why).
        current_pushed_at: ECR push time of what the overlay holds (None: unknown, not needed).
        branch: mode pr: the target's proposal branch ('' when not looked at).
        proposed: the entry that branch proposes (None: no branch, file or entry).
        proposed_pushed_at: ECR push time of the proposed image.
    """
    from steps.order import decide as order_decide

    if current is None:
        return Verdict("unknown", current_error or "the overlay's images entry could not be read")
    held = _ref(current.newTag, current.digest)
    if newest is None:
        return Verdict("unknown", why_no_newest or "no newest image", current=held)
    tag, digest = _written(newest, current, same_image_tags)
    new = _ref(tag, digest)
    if current.digest and current.digest == newest.digest:
        return Verdict("current", f"pins digest {current.digest[:19]}, the newest allowed image", held, new)
    verdict, why = order_decide(
        current_tag=current.newTag,
        current_digest=current.digest,
        current_pushed_at=current_pushed_at,
        new_tag=tag,
        new_digest=digest,
        new_pushed_at=newest.pushed_at,
        order=newest.order,
    )
    if verdict == "current":
        return Verdict("current", f"holds the newest allowed image: {why}", held, new)
    if verdict == "stale":
        return Verdict(
            "ahead",
            f"holds something newer than the newest allowed {_short(new)}: {why}; never touched",
            held,
            new,
        )
    update = newest.model_copy(update={"tag": tag})
    if newest.mode == "pr" and proposed is not None:
        offered = _ref(proposed.newTag, proposed.digest) or "(unset)"
        if _says(proposed, tag, digest) and (proposed.newName or None) == (current.newName or None):
            return Verdict("proposed", f"the PR branch {branch} already proposes {_short(new)}", held, new)
        again, why2 = order_decide(
            current_tag=proposed.newTag,
            current_digest=proposed.digest,
            current_pushed_at=proposed_pushed_at,
            new_tag=tag,
            new_digest=digest,
            new_pushed_at=newest.pushed_at,
            order=newest.order,
        )
        if again == "current":
            return Verdict(
                "proposed", f"the PR branch {branch} already proposes the same image: {why2}", held, new
            )
        if again == "stale":
            return Verdict(
                "ahead",
                f"the PR branch {branch} proposes {_short(offered)}, newer than the newest "
                f"allowed {_short(new)}: {why2}; never touched",
                held,
                new,
            )
        why = f"{why}; the PR branch {branch} proposes the older {_short(offered)}"
    return Verdict("behind", why, held, new, update)


def count_states(report: Iterable[TargetState]) -> list[StateCount]:
    """Targets per (state, env), every state listed for every env seen (zeros too: gauges reset)."""
    seen = Counter((t.state, t.env or "none") for t in report)
    envs = sorted({env for _, env in seen})
    return [StateCount(state=s, env=e, count=seen.get((s, e), 0)) for e in envs for s in STATES]


def render_table(report: Sequence[TargetState]) -> str:
    """The human view (stderr): one line per target, worst first, then a count per state."""
    rank = {s: i for i, s in enumerate(("behind", "unknown", "ahead", "proposed", "current"))}
    rows = sorted(report, key=lambda t: (rank[t.state], t.repo_url, t.path))
    head = ("STATE", "ENV", "OVERLAY", "CURRENT", "NEWEST", "REASON")
    lines = [
        (
            t.state,
            t.env or "-",
            f"{t.repo_url}/{t.path}",
            _short(t.current) or "-",
            _short(t.newest) or "-",
            t.reason,
        )
        for t in rows
    ]
    widths = [max(len(r[i]) for r in [head, *lines]) for i in range(5)]
    out = ["  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5] for r in [head, *lines]]
    totals = Counter(t.state for t in report)
    out.append(f"{len(report)} target(s): " + ", ".join(f"{totals.get(s, 0)} {s}" for s in STATES))
    return "\n".join(line.rstrip() for line in out) + "\n"


# ============================================================================ I/O: ECR


class _Calls:
    """What the sweep cost, counted from every thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ecr = self.git = self.clones = 0

    def add(self, what: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + n)


@dataclass
class _Overlay:
    """One target overlay: the targets every allowed tag yields for it, and what ECR says."""

    key: tuple[str, str, str]
    candidates: list[Target] = field(default_factory=list)
    images: list[Any] = field(default_factory=list)  # steps.ecr.EcrImage of the candidates' repository


def _pool(concurrency: int, jobs: Sequence[Any], fn: Callable[[Any], Any]) -> list[Any]:
    if len(jobs) <= 1 or concurrency <= 1:
        return [fn(job) for job in jobs]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(jobs)), thread_name_prefix="reconcile") as pool:
        return list(pool.map(fn, jobs))


def _scan_ecr(
    rules: Any, *, concurrency: int, calls: _Calls, client_for: Callable[[str], Any]
) -> tuple[dict[tuple[str, str, str], _Overlay], list[str]]:
    """Every overlay the rules map an ECR image to, with its candidates. ECR read-only."""
    from steps import ecr

    notes: list[str] = []
    registries: dict[tuple[str, str], list[Any]] = {}
    for rule in rules.rules:
        registries.setdefault((rule.account, rule.region), []).append(rule)

    # 1. the repositories each registry holds that some rule can match (one paginated listing)
    def repositories(item: tuple[tuple[str, str], list[Any]]) -> list[tuple[str, str, str]]:
        (account, region), group = item
        wanted: set[str] = set()
        templated = [r for r in group if "$" in r.repo_template]
        for rule in group:
            if "$" not in rule.repo_template:
                wanted.add(rule.repo_template)
        if templated:
            common = os.path.commonprefix([repository_prefix(r.repo_template) for r in templated])
            names = ecr.list_repositories(
                account, client=client_for(region), prefix=common, on_call=lambda: calls.add("ecr")
            )
            for rule in templated:
                prefix = repository_prefix(rule.repo_template)
                wanted.update(
                    n for n in names if n.startswith(prefix) and repository_matches(rule.repo_template, n)
                )
        return [(account, region, name) for name in sorted(wanted)]

    found = [repo for listed in _pool(concurrency, list(registries.items()), repositories) for repo in listed]

    # 2. every image of each of those repositories (one paginated DescribeImages each)
    def images(repo: tuple[str, str, str]) -> tuple[tuple[str, str, str], Any]:
        account, region, name = repo
        return repo, ecr.list_images(
            name, registry_id=account, client=client_for(region), on_call=lambda: calls.add("ecr")
        )

    overlays: dict[tuple[str, str, str], _Overlay] = {}
    for (account, region, name), listing in _pool(concurrency, found, images):
        if listing is None:
            notes.append(f"ECR repository {name} ({account}, {region}) does not exist")
            continue
        # 3. every allowed tag → targets, exactly as resolve-image matches an event's image
        for image in listing:
            for tag in image.tags:
                match = rules.match(
                    Image(
                        account=account,
                        region=region,
                        repository=name,
                        tag=tag,
                        digest=image.digest,
                        pushed_at=image.pushed_at,
                    )
                )
                for target in match.targets:
                    key = (target.repo_url, target.path, target.image_name or target.image)
                    overlay = overlays.setdefault(key, _Overlay(key, images=listing))
                    overlay.candidates.append(target)
    return overlays, notes


def _pushed_at(images: Sequence[Any], entry: ImagesEntry | None, image: str) -> datetime | None:
    """ECR push time of what ``entry`` names, from the listing we already have (None: unknown)."""
    if entry is None or (entry.newName or entry.name) != image:
        return None
    for found in images:
        if entry.digest and found.digest == entry.digest:
            return found.pushed_at
    if entry.newTag and not entry.digest:
        for found in images:
            if entry.newTag in found.tags:
                return found.pushed_at
    return None


# ============================================================================ I/O: Git

_REGULAR = ("100644", "100755")


@dataclass(eq=False)
class _Item:
    """One target overlay on its way through the Git phase."""

    overlay: _Overlay
    newest: Target | None
    why_no_newest: str
    same_image_tags: frozenset[str]
    path: str | None = ""
    file: str = ""
    current: ImagesEntry | None = None
    error: str = ""
    branch: str = ""
    proposed: ImagesEntry | None = None
    verdict: Verdict | None = None

    @property
    def sample(self) -> Target:
        return self.newest or self.overlay.candidates[0]

    def decide(self) -> Verdict:
        sample = self.sample
        return decide(
            newest=self.newest,
            why_no_newest=self.why_no_newest,
            same_image_tags=self.same_image_tags,
            current=self.current,
            current_error=self.error,
            current_pushed_at=_pushed_at(self.overlay.images, self.current, sample.image),
            branch=self.branch,
            proposed=self.proposed,
            proposed_pushed_at=_pushed_at(self.overlay.images, self.proposed, sample.image),
        )


def _overlay_dir(path: str) -> str | None:
    """The overlay directory relative to the repository root ('' = root), or None if it escapes."""
    p = PurePosixPath(path.strip())
    if p.is_absolute() or ".." in p.parts or "\\" in path:
        return None
    text = p.as_posix()
    return "" if text == "." else text


def _ls_tree(repo: Any, rev: str, paths: Sequence[str]) -> dict[str, tuple[str, str, str]]:
    """``path → (mode, type, oid)`` of the entries ``paths`` list at ``rev`` (dirs with a trailing
    ``/`` list their entries). Reads trees only: in a partial clone no blob is fetched."""
    if not paths:
        return {}
    out = repo.git(
        "--literal-pathspecs",
        "ls-tree",
        "-z",
        rev,
        "--",
        *paths,
        what=f"listing {len(paths)} path(s) at {rev[:12]} of {repo.url}",
    ).stdout
    entries = {}
    for record in out.split("\0"):
        if not record:
            continue
        meta, _, name = record.partition("\t")
        mode, kind, oid = meta.split(" ", 2)
        entries[name] = (mode, kind, oid)
    return entries


def _blobs(repo: Any, oids: Iterable[str], *, fetch: bool, calls: _Calls) -> dict[str, str]:
    """``oid → text`` of the given blobs (at most the kustomize size limit each; others left out).

    ``fetch``: the blobs may be missing from the partial clone; get them all in ONE request
    (protocol v2 lets a client want any object) instead of one lazy fetch per blob.
    """
    from steps.kustomize import MAX_KUSTOMIZATION_BYTES

    wanted = sorted(set(oids))
    if not wanted:
        return {}
    if fetch:
        calls.add("git")
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
            what=f"fetch of {len(wanted)} file(s) from {repo.url}",
        )
    sizes = {}
    for line in repo.git(
        "cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)", input="\n".join(wanted) + "\n"
    ).stdout.splitlines():
        oid, kind, size = (line.split(" ") + ["", ""])[:3]
        if kind == "blob" and size.isdigit() and int(size) <= MAX_KUSTOMIZATION_BYTES:
            sizes[oid] = int(size)
    small = [oid for oid in wanted if oid in sizes]
    if not small:
        return {}
    # One process for every blob. The output is text (run_git decodes it), so a random marker,
    # which no file can guess, separates the objects instead of byte counts.
    marker = "imagebump-" + secrets.token_hex(16)
    out = repo.git("cat-file", f"--batch={marker} %(objectname)", input="\n".join(small) + "\n").stdout
    texts = {}
    for chunk in out.split(marker + " ")[1:]:
        oid, _, body = chunk.partition("\n")
        texts[oid.strip()] = body.removesuffix("\n")
    return texts


def _read_at(repo: Any, rev: str, items: Sequence[_Item], *, fetch: bool, calls: _Calls) -> None:
    """Fill ``file``/``current``/``error`` of each item from its overlay at ``rev`` (object store)."""
    from steps import kustomize

    dirs = sorted({item.path for item in items})
    entries = _ls_tree(repo, rev, [f"{d}/" for d in dirs if d])
    if "" in dirs:
        entries.update(_ls_tree(repo, rev, [name for name in kustomize.KUSTOMIZATION_FILES]))
    chosen: dict[str, tuple[str, str] | str] = {}
    for d in dirs:
        where = d or "(repository root)"
        names = [f"{d}/{n}" if d else n for n in kustomize.KUSTOMIZATION_FILES]
        present = [n for n in names if n in entries]
        if not present:
            inside = any(name.startswith(f"{d}/") for name in entries) if d else bool(entries)
            chosen[d] = (
                f"no kustomization in {where}: expected one of {', '.join(kustomize.KUSTOMIZATION_FILES)}"
                if inside
                else f"overlay directory {where} does not exist; fix the path in the rule"
            )
        elif len(present) > 1:
            chosen[d] = (
                f"ambiguous: {where} holds {', '.join(p.rsplit('/', 1)[-1] for p in present)}; keep one"
            )
        else:
            mode, kind, oid = entries[present[0]]
            if kind != "blob" or mode not in _REGULAR:
                chosen[d] = f"{present[0]} is not a regular file (a symbolic link?); refusing to follow it"
            else:
                chosen[d] = (present[0], oid)
    texts = _blobs(repo, [c[1] for c in chosen.values() if isinstance(c, tuple)], fetch=fetch, calls=calls)
    for item in items:
        found = chosen[item.path]
        if isinstance(found, str):
            item.error = found
            continue
        item.file, oid = found
        text = texts.get(oid)
        if text is None:
            item.error = (
                f"{item.file} is larger than {kustomize.MAX_KUSTOMIZATION_BYTES} bytes; not reading it"
            )
            continue
        _set_entry(item, text)


def _set_entry(item: _Item, text: str) -> None:
    from steps import kustomize

    wanted = item.sample.image_name or item.sample.image
    if "\ufffd" in text:
        item.error = f"{item.file} is not UTF-8"
        return
    try:
        item.current = kustomize.get_image(text, wanted, source=item.file)
    except ImagebumpError as exc:
        item.error = str(exc)
        return
    if item.current is None:
        names = [e.name for e in kustomize.read_images(text, source=item.file)]
        listed = f"found: {', '.join(names)}" if names else "it has no images entries"
        item.error = f"image {wanted!r} not in {item.file} ({listed}); add it under images:"


def _read_proposals(repo: Any, items: Sequence[_Item], *, calls: _Calls) -> None:
    """mode pr: what each item's proposal branch proposes (``proposed``), all branches in one go."""
    from steps import kustomize

    wanted = {item.branch for item in items}
    patterns = sorted({f"refs/heads/{b.split('/', 1)[0]}/*" for b in wanted})
    calls.add("git")
    listed = repo.git(
        "ls-remote", "origin", *patterns, what=f"listing proposal branches of {repo.url}"
    ).stdout
    heads = {}
    for line in listed.splitlines():
        sha, _, ref = line.partition("\t")
        if ref.startswith("refs/heads/") and ref[len("refs/heads/") :] in wanted:
            heads[ref[len("refs/heads/") :]] = sha
    if not heads:
        return
    calls.add("git")
    repo.git(
        "fetch",
        "--quiet",
        "--filter=blob:none",
        "--depth",
        "1",
        "--no-tags",
        "origin",
        *[f"+refs/heads/{b}:refs/remotes/origin/{b}" for b in sorted(heads)],
        what=f"fetch of {len(heads)} proposal branch(es) from {repo.url}",
    )
    located: dict[int, str] = {}
    for b, sha in sorted(heads.items()):
        users = [item for item in items if item.branch == b]
        entries = _ls_tree(repo, sha, sorted({item.file for item in users}))
        for item in users:
            mode, kind, oid = entries.get(item.file, ("", "", ""))
            if kind == "blob" and mode in _REGULAR:
                located[id(item)] = oid
    texts = _blobs(repo, located.values(), fetch=True, calls=calls)
    for item in items:
        text = texts.get(located.get(id(item), ""))
        if text is None or "\ufffd" in text:
            continue
        try:
            item.proposed = (
                kustomize.get_image(text, item.current.name, source=item.file) if item.current else None
            )
        except ImagebumpError:
            item.proposed = None  # not a readable kustomization there: no proposal to protect


def _sweep_repository(repo_url: str, items: list[_Item], *, auth: Any, calls: _Calls, scratch: Path) -> None:
    """Read every overlay of one Git repository from ONE partial sparse clone; decide each."""
    from steps import git

    bad = [item for item in items if item.path is None]
    for item in bad:
        item.verdict = Verdict("unknown", f"overlay path {item.sample.path!r} leaves the repository")
    items = [item for item in items if item.path is not None]
    if not items:
        return
    bases = Counter(item.sample.base_branch for item in items)
    branch = None if None in bases else bases.most_common(1)[0][0]
    try:
        calls.add("git")
        calls.add("clones")
        repo = git.clone(
            repo_url,
            scratch / "repo",
            branch=branch,
            paths=sorted({i.path for i in items if i.path}),
            sparse=True,
            auth=auth,
        )
        head = repo.head()
        on_clone: list[_Item] = []
        others: dict[str, list[_Item]] = {}  # base branch → its items (fetched into the same clone)
        for item in items:
            if item.sample.base_branch in (None, repo.branch):
                on_clone.append(item)
            else:
                others.setdefault(item.sample.base_branch or "", []).append(item)
        _read_at(repo, head, on_clone, fetch=False, calls=calls)
        for base, group in sorted(others.items()):
            calls.add("git")
            sha = repo.fetch(base)
            if sha is None:
                for item in group:
                    item.error = f"branch '{base}' does not exist in {repo_url}; fix baseBranch in the rule"
                continue
            _read_at(repo, sha, group, fetch=True, calls=calls)
        pending = []
        for item in items:
            item.verdict = item.decide()
            if (
                item.verdict.state == "behind"
                and item.verdict.update is not None
                and item.verdict.update.mode == "pr"
            ):
                item.branch = branch_name(item.verdict.update)
                pending.append(item)
        if pending:
            _read_proposals(repo, pending, calls=calls)
            for item in pending:
                item.verdict = item.decide()
    except ImagebumpError as exc:
        retry = " (it may pass: the next sweep tries again)" if isinstance(exc, TransientError) else ""
        for item in items:
            if item.verdict is None or item.verdict.state == "behind":
                item.verdict = Verdict(
                    "unknown",
                    f"cannot read {repo_url}: {exc}{retry}",
                    item.verdict.current if item.verdict else "",
                    item.verdict.newest if item.verdict else "",
                )


# ============================================================================ the sweep


def sweep(
    rules: Any,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    limit: int = DEFAULT_LIMIT,
    client_for: Callable[[str], Any] | None = None,
    auth: Any = None,
    full: bool = True,
) -> ReconcileOutput:
    """Compare every target overlay of ``rules`` with the newest image ECR holds that its rule allows.

    Args:
        rules: a :class:`steps.rules.RuleSet`.
        concurrency: ECR calls and Git repositories worked on at once.
        limit: at most this many behind targets in ``targets`` (the rest wait for the next sweep).
        client_for: ``region → ECR client`` (default: :func:`steps.ecr.make_listing_client`).
        auth: Git read token (:class:`steps.git.GitAuth`) or None for anonymous.
        full: list current targets in ``report`` too.

    Raises:
        ConfigError: ECR refused to list (permissions) or a bad argument.
        TransientError: ECR failed for now.
    """
    from steps import ecr

    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ConfigError(f"concurrency {concurrency}: must be between 1 and {MAX_CONCURRENCY}")
    if limit < 0:
        raise ConfigError(f"limit {limit}: must be 0 or more")
    calls = _Calls()
    clients: dict[str, Any] = {}
    clients_lock = threading.Lock()

    def default_client(region: str) -> Any:
        with clients_lock:
            if region not in clients:
                clients[region] = ecr.make_listing_client(region, max_pool_connections=concurrency)
            return clients[region]

    overlays, notes = _scan_ecr(
        rules, concurrency=concurrency, calls=calls, client_for=client_for or default_client
    )

    items: list[_Item] = []
    for key in sorted(overlays):
        overlay = overlays[key]
        best, why = pick_newest(overlay.candidates)
        same = frozenset(
            c.tag for c in overlay.candidates if best is not None and c.digest == best.digest and c.tag
        )
        items.append(_Item(overlay, best, why, same, path=_overlay_dir(overlay.candidates[0].path)))
    by_repo: dict[str, list[_Item]] = {}
    for item in items:
        by_repo.setdefault(item.sample.repo_url, []).append(item)

    def one(repo_url: str) -> None:
        with tempfile.TemporaryDirectory(prefix="reconcile-") as scratch:
            _sweep_repository(repo_url, by_repo[repo_url], auth=auth, calls=calls, scratch=Path(scratch))

    _pool(concurrency, sorted(by_repo), one)

    report: list[TargetState] = []
    behind: list[Target] = []
    deferred = 0
    for item in items:
        v = item.verdict or Verdict("unknown", "not decided")
        reason = v.reason
        if v.state == "behind" and v.update is not None:
            if len(behind) < limit:
                behind.append(v.update)
            else:
                deferred += 1
                reason += f"; deferred to the next sweep (at most {limit} updates per sweep)"
        s = item.sample
        report.append(
            TargetState(
                repo_url=s.repo_url,
                path=s.path,
                env=s.env,
                current=v.current,
                newest=v.newest,
                state=v.state,
                reason=reason,
            )
        )
    counts = count_states(report)
    totals = Counter(t.state for t in report)
    summary = f"{len(report)} target(s): " + ", ".join(f"{totals.get(s, 0)} {s}" for s in STATES)
    summary += f"; {calls.ecr} ECR call(s), {calls.clones} clone(s), {calls.git} Git call(s)"
    if deferred:
        summary += f"; {deferred} behind target(s) deferred to the next sweep (limit {limit})"
    if notes:
        summary += "; " + "; ".join(notes)
    return ReconcileOutput(
        targets=behind,
        report=report if full else [t for t in report if t.state != "current"],
        counts=counts,
        behind=totals.get("behind", 0),
        ecr_calls=calls.ecr,
        git_calls=calls.git,
        git_clones=calls.clones,
        reason=summary,
    )


def rules_file() -> str:
    """Where the rules are mounted: ``$IMAGEBUMP_RULES_FILE`` or the default path."""
    return os.environ.get("IMAGEBUMP_RULES_FILE") or DEFAULT_RULES_FILE


@step_entry
def run(
    concurrency: int = DEFAULT_CONCURRENCY, limit: int = DEFAULT_LIMIT, full: bool = False
) -> ReconcileOutput:
    """Sweep every rule's overlays; output the behind ones for update-target, and the report."""
    from steps import git
    from steps.rules import load_rules_file

    if not 1 <= concurrency <= MAX_CONCURRENCY:  # before any I/O
        raise ConfigError(f"concurrency {concurrency}: must be between 1 and {MAX_CONCURRENCY}")
    rules = load_rules_file(rules_file())
    out = sweep(
        rules, concurrency=concurrency, limit=limit, auth=git.GitAuth.from_env(write=False), full=full
    )
    for t in out.report:  # the pod's log: what needs a look (the current ones are only counted)
        if t.state != "current":
            log.info(
                "%s %s/%s (%s): current %s, newest %s: %s",
                t.state,
                t.repo_url,
                t.path,
                t.env or "-",
                _short(t.current) or "-",
                _short(t.newest) or "-",
                t.reason,
            )
    log.info("reconcile: %s", out.reason)
    return out

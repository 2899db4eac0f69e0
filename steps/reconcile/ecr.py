"""reconcile's ECR gathering: every overlay the rules map an ECR image to, with its candidates.

ECR read-only, through :mod:`steps.aws.ecr` (botocore's adaptive retries; at most ``concurrency`` calls
at once): ``DescribeRepositories`` once per registry, filtered by each rule's fixed prefix
(:attr:`steps.rules.Rule.repository_prefix`) and shape (:meth:`steps.rules.Rule.match_repository`),
skipped for rules that name one repository; ``DescribeImages`` once per matching repository, read
page by page. Every tag is matched with :meth:`steps.rules.RuleSet.match`, exactly as resolve-image
matches an event, and folded at once into its overlay's running newest (:class:`Overlay`): memory is
bounded by the targets, not by the images (plus 16 bytes per image and tag of push time,
:class:`PushTimes`, for repositories a ``push-time`` rule maps); time is linear in images.

A refused or failing ``DescribeRepositories`` listing stops the sweep (nothing can be enumerated);
a repository whose ``DescribeImages`` is refused or keeps failing makes only its own targets
``unknown`` (:class:`Unreadable`, with the reason and the :data:`~steps.reconcile.report.ErrorKind`),
and the sweep goes on with the others.
"""

from __future__ import annotations

import os
import threading
from array import array
from bisect import bisect_left
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from steps.domain.errors import ConfigError, ImagebumpError, RepositoryMissing
from steps.domain.models import Image, ImagesEntry, Target
from steps.reconcile.decide import pick_newest
from steps.reconcile.report import ErrorKind, error_kind


class Calls:
    """What the sweep cost, counted from every thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ecr = self.git = self.clones = 0

    def add(self, what: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + n)


class PushTimes:
    """ECR push times of one repository's images, by digest and by tag: what the Git phase asks for
    the image an overlay holds (or a proposal branch proposes), which may be any image of the
    repository, allowed or not. Kept only for repositories a ``push-time`` rule maps.

    Compact, because it is the one part of a scan that grows with images: 16 bytes per digest and
    per tag (a 64-bit hash of the key and the time, in two arrays sorted by hash after the listing,
    :meth:`freeze`), where a dict of strings to datetimes took ~300 bytes. Two keys of one
    repository sharing a 64-bit hash is a 1-in-10⁸ event at a million keys.
    """

    __slots__ = ("_keys", "_times")

    def __init__(self) -> None:
        self._keys = array("q")
        self._times = array("d")

    def add(self, image: Any) -> None:
        if image.pushed_at is None:
            return
        at = _utc(image.pushed_at).timestamp()
        for key in (("digest", image.digest), *(("tag", tag) for tag in image.tags)):
            self._keys.append(hash(key))
            self._times.append(at)

    def freeze(self) -> PushTimes:
        """Sort by hash (after the last :meth:`add`), so :meth:`of` can bisect."""
        order = sorted(range(len(self._keys)), key=self._keys.__getitem__)
        self._keys = array("q", (self._keys[i] for i in order))
        self._times = array("d", (self._times[i] for i in order))
        return self

    def _get(self, key: tuple[str, str]) -> float | None:
        h = hash(key)
        i = bisect_left(self._keys, h)
        return self._times[i] if i < len(self._keys) and self._keys[i] == h else None

    def of(self, entry: ImagesEntry | None) -> datetime | None:
        """Push time of what ``entry`` names: by its digest when it has one, else by its tag —
        :func:`steps.domain.never_downgrade.image_key`, the very lookup edit-kustomize asks ECR
        with, so a moved tag cannot make the sweep and an event disagree about a rollback."""
        from steps.domain.never_downgrade import image_key

        if entry is None:
            return None
        tag, digest = image_key(entry.newTag, entry.digest)
        key = ("digest", digest) if digest else ("tag", tag) if tag else None
        at = self._get(key) if key is not None else None
        return None if at is None else datetime.fromtimestamp(at, UTC)


def _utc(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)


class Overlay:
    """One target overlay, and the newest allowed image for it seen so far (a running maximum).

    Memory is bounded by the rules, not by the images: the running newest per order, the first
    candidate of each (rule, order) (so :func:`~steps.reconcile.decide.pick_newest` can still name
    every rule and order when it refuses to choose), and the tags of the newest image.
    """

    __slots__ = ("key", "times", "_best", "_reps", "_same")

    def __init__(self, key: tuple[str, str, str], times: dict[str, PushTimes] | None = None) -> None:
        self.key = key
        #: image URI → its repository's push times (shared by every overlay of one scan)
        self.times: dict[str, PushTimes] = times if times is not None else {}
        self._best: dict[str, Target] = {}  # order → newest candidate of that order so far
        self._reps: dict[tuple[int, str], Target] = {}  # (rule, order) → its first candidate
        self._same: dict[str, tuple[str | None, set[str]]] = {}  # order → (newest's digest, its tags)

    @property
    def candidates(self) -> list[Target]:
        """The candidates kept (at most two per rule): the first one seen comes first."""
        kept = list(self._reps.values())
        kept += [b for b in self._best.values() if all(b is not k for k in kept)]
        return kept

    def add_image(self, digest: str | None, targets: Sequence[Target]) -> None:
        """The targets one image's tags yield for this overlay (in tag order)."""
        for c in targets:
            self._reps.setdefault((c.rule, c.order), c)
            if c.order == "none":
                continue
            current = self._best.get(c.order)
            best, _ = pick_newest([current, c] if current is not None else [c])
            if best is not None:
                self._best[c.order] = best
        for order in {c.order for c in targets}:
            best = self._best.get(order)
            if best is None or best.digest != digest:
                continue
            tags = {c.tag for c in targets if c.order == order and c.tag}
            known, same = self._same.get(order, (None, set()))
            self._same[order] = (digest, same | tags if known == digest else tags)

    def merge(self, other: Overlay) -> None:
        """Fold in what another repository's images yield for the same overlay (``other`` second)."""
        for rep, c in other._reps.items():
            self._reps.setdefault(rep, c)
        for order, theirs in other._best.items():
            mine = self._best.get(order)
            best = theirs if mine is None else (pick_newest([mine, theirs])[0] or mine)
            self._best[order] = best
            mine_same = self._same.get(order, (None, set()))
            their_same = other._same.get(order, (None, set()))
            merged: set[str] = set()
            for digest, tags in (mine_same, their_same):
                if digest is not None and digest == best.digest:
                    merged |= tags
            self._same[order] = (best.digest, merged)

    def newest(self) -> tuple[Target | None, str]:
        """The newest candidate by the rule's order, or None and why (:func:`pick_newest`)."""
        orders = {order for _, order in self._reps}
        if len(orders) == 1:
            (order,) = orders
            if order in self._best:
                return self._best[order], ""
        return pick_newest(self.candidates)

    def same_image_tags(self, newest: Target | None) -> frozenset[str]:
        """Every allowed tag of the newest image (the overlay may hold another tag of it)."""
        if newest is None:
            return frozenset()
        digest, tags = self._same.get(newest.order, (None, set()))
        return frozenset(tags) if digest == newest.digest else frozenset()

    def pushed_at(self, entry: ImagesEntry | None, image: str) -> datetime | None:
        """ECR push time of what ``entry`` names when it names ``image`` (None: unknown)."""
        if entry is None or (entry.newName or entry.name) != image:
            return None
        times = self.times.get(image)
        return times.of(entry) if times is not None else None


@dataclass
class Unreadable:
    """A target of an ECR repository whose images could not be listed: reported ``unknown``."""

    repo_url: str
    path: str
    env: str
    reason: str
    error: ErrorKind


def _unreadable(rules: Any, account: str, region: str, name: str, exc: ImagebumpError) -> list[Unreadable]:
    """The targets the rules give repository ``name`` whatever its tags, as :class:`Unreadable`.

    Without the listing there is no tag: each rule that matches the repository is evaluated without
    its tag filters (they only say *which* tags yield its target). A rule whose overlay depends on
    a ``$n`` of its tag pattern yields one row naming the rule instead of an overlay.
    """
    import dataclasses

    from steps.rules.patterns import VAR_RE

    retry = " (it may pass: the next sweep tries again)" if error_kind(exc) == "transient" else ""
    why = f"cannot list the images of ECR repository {name} ({account}, {region}): {exc}{retry}"
    out: list[Unreadable] = []
    seen: set[tuple[str, str, str | None]] = set()
    for rule in rules.rules:
        if (rule.account, rule.region) != (account, region) or rule.match_repository(name) is None:
            continue
        used = {int(v) for v in VAR_RE.findall(rule.git_path_template)}
        found: Any = f"its overlay depends on the tag (a $n of the tag pattern {rule.tag_pattern!r})"
        if used <= set(rule.repo_vars):
            bare = dataclasses.replace(rule, tag_pattern=None, tag_regex=None, allow=(), deny=())
            found = bare.evaluate(Image(account=account, region=region, repository=name))
        if isinstance(found, Target):
            key = (found.repo_id, found.edited, found.image_name)
            if key not in seen:
                seen.add(key)
                out.append(Unreadable(found.repo_url, found.path, found.env, why, error_kind(exc)))
        else:
            out.append(
                Unreadable(
                    rule.github_repository,
                    "",
                    rule.env,
                    f"{why}; rule {rule.index}: {found}",
                    error_kind(exc),
                )
            )
    return out


def pool(concurrency: int, jobs: Sequence[Any], fn: Callable[[Any], Any]) -> list[Any]:
    if len(jobs) <= 1 or concurrency <= 1:
        return [fn(job) for job in jobs]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(jobs)), thread_name_prefix="reconcile") as pool:
        return list(pool.map(fn, jobs))


def make_clients(concurrency: int) -> Callable[[str], Any]:
    """``region → ECR listing client`` (:func:`steps.aws.ecr.make_listing_client`), one per region."""
    from steps.aws import ecr

    clients: dict[str, Any] = {}
    lock = threading.Lock()

    def client_for(region: str) -> Any:
        with lock:
            if region not in clients:
                try:
                    clients[region] = ecr.make_listing_client(region, max_pool_connections=concurrency)
                except ValueError as exc:  # botocore: "Invalid endpoint: ..." (a bad AWS_ENDPOINT_URL)
                    if "endpoint" not in str(exc).lower():
                        raise
                    raise ConfigError(
                        f"cannot make an ECR client for {region}: {exc}; fix AWS_ENDPOINT_URL "
                        "(or --endpoint-url): expected http(s)://HOST[:PORT]"
                    ) from None
            return clients[region]

    return client_for


def scan_ecr(
    rules: Any, *, concurrency: int, calls: Calls, client_for: Callable[[str], Any]
) -> tuple[dict[tuple[str, str, str], Overlay], list[str], list[Unreadable]]:
    """Every overlay the rules map an ECR image to, with its candidates; the targets of the
    repositories whose images could not be listed; notes. ECR read-only."""
    from steps.aws import ecr

    notes: list[str] = []
    unreadable: list[Unreadable] = []
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
            common = os.path.commonprefix([r.repository_prefix for r in templated])
            names = ecr.list_repositories(
                account, client=client_for(region), prefix=common, on_call=lambda: calls.add("ecr")
            )
            for rule in templated:
                prefix = rule.repository_prefix
                wanted.update(
                    n for n in names if n.startswith(prefix) and rule.match_repository(n) is not None
                )
        return [(account, region, name) for name in sorted(wanted)]

    found = [repo for listed in pool(concurrency, list(registries.items()), repositories) for repo in listed]

    # 2. every image of each of those repositories (one paginated DescribeImages each), streamed:
    # 3. every allowed tag → targets, exactly as resolve-image matches an event's image, folded at
    # once into the running newest of its overlay, so memory follows the targets, not the images
    times: dict[str, PushTimes] = {}

    def images(repo: tuple[str, str, str]) -> tuple[tuple[str, str, str], Any]:
        account, region, name = repo
        client = client_for(region)  # a bad endpoint stays fatal: it is no one repository's fault
        wants_times = any(
            r.order == "push-time"
            and (r.account, r.region) == (account, region)
            and r.match_repository(name) is not None
            for r in rules.rules
        )
        pushed = PushTimes() if wants_times else None
        found: dict[tuple[str, str, str], Overlay] = {}
        try:
            for image in ecr.iter_images(
                name, registry_id=account, client=client, on_call=lambda: calls.add("ecr")
            ):
                if pushed is not None:
                    pushed.add(image)
                by_key: dict[tuple[str, str, str], list[Target]] = {}
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
                        key = (target.repo_id, target.edited, target.image_name or target.image)
                        by_key.setdefault(key, []).append(target)
                for key, targets in by_key.items():
                    overlay = found.get(key)
                    if overlay is None:
                        overlay = found[key] = Overlay(key, times)
                    overlay.add_image(image.digest, targets)
        except RepositoryMissing:
            return repo, None
        except ImagebumpError as exc:  # refused or failing for this repository only: its targets
            return repo, exc  # are unknown, the sweep goes on with the others
        return repo, (found, pushed.freeze() if pushed is not None else None)

    overlays: dict[tuple[str, str, str], Overlay] = {}
    for (account, region, name), listing in pool(concurrency, found, images):
        if listing is None:
            notes.append(f"ECR repository {name} ({account}, {region}) does not exist")
            continue
        if isinstance(listing, ImagebumpError):
            unreadable.extend(_unreadable(rules, account, region, name, listing))
            continue
        seen, pushed = listing
        if pushed is not None:
            times[f"{account}.dkr.ecr.{region}.amazonaws.com/{name}"] = pushed
        for key, overlay in seen.items():
            if key in overlays:
                overlays[key].merge(overlay)
            else:
                overlays[key] = overlay
    return overlays, notes, unreadable

"""reconcile's ECR gathering: every overlay the rules map an ECR image to, with its candidates.

ECR read-only, through :mod:`steps.aws.ecr` (botocore's adaptive retries; at most ``concurrency`` calls
at once): ``DescribeRepositories`` once per registry, filtered by each rule's fixed prefix
(:attr:`steps.rules.Rule.repository_prefix`) and shape (:meth:`steps.rules.Rule.match_repository`),
skipped for rules that name one repository; ``DescribeImages`` once per matching repository, read
page by page. Every tag is matched with :meth:`steps.rules.RuleSet.match`, exactly as resolve-image
matches an event, and folded at once into its overlay's running newest (:class:`~steps.reconcile.model.Overlay`): memory is
bounded by the targets, not by the images (plus 16 bytes per image and tag of push time,
:class:`~steps.reconcile.model.PushTimes`, for repositories a ``push-time`` rule maps); time is linear in images.

A refused or failing ``DescribeRepositories`` listing stops reconcile (nothing can be enumerated);
a repository whose ``DescribeImages`` is refused or keeps failing makes only its own targets
``unknown`` (:class:`~steps.reconcile.model.Unreadable`, with the reason and the :data:`~steps.reconcile.report.ErrorKind`),
and reconcile goes on with the others.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from steps.domain.errors import ConfigError, ImagebumpError, RepositoryMissing
from steps.domain.models import Image, Target
from steps.reconcile.model import Calls, Overlay, PushTimes, Unreadable
from steps.reconcile.report import error_kind

__all__ = ["make_clients", "pool", "scan_ecr"]


def _unreadable(rules: Any, account: str, region: str, name: str, exc: ImagebumpError) -> list[Unreadable]:
    """The targets the rules give repository ``name`` whatever its tags, as :class:`Unreadable`.

    Without the listing there is no tag: each rule that matches the repository is evaluated without
    its tag filters (they only say *which* tags yield its target). A rule whose overlay depends on
    a ``$n`` of its tag pattern yields one row naming the rule instead of an overlay.
    """
    import dataclasses

    from steps.rules.patterns import VAR_RE

    retry = " (it may pass: the next reconcile run tries again)" if error_kind(exc) == "transient" else ""
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
            key = (found.repo_id, found.edited, found.settings.image_name)
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
            r.settings.order == "push-time"
            and (r.account, r.region) == (account, region)
            and r.match_repository(name) is not None
            for r in rules.rules
        )
        pushed = PushTimes() if wants_times else None
        found: dict[tuple[str, str, str], Overlay] = {}
        try:
            for image in ecr.iter_images(
                name,
                registry_id=account,
                client=client,
                on_call=lambda: calls.add("ecr"),
                status="ANY" if wants_times else "",
            ):
                if pushed is not None:
                    pushed.add(image)  # an archived image still orders what an overlay holds
                if image.status != "ACTIVE":
                    continue  # never a candidate: an archived image cannot be pulled
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
                        key = (target.repo_id, target.edited, target.settings.image_name or target.image)
                        by_key.setdefault(key, []).append(target)
                for key, targets in by_key.items():
                    overlay = found.get(key)
                    if overlay is None:
                        overlay = found[key] = Overlay(key, times)
                    overlay.add_image(image.digest, targets)
        except RepositoryMissing:
            return repo, None
        except ImagebumpError as exc:  # refused or failing for this repository only: its targets
            return repo, exc  # are unknown, reconcile goes on with the others
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

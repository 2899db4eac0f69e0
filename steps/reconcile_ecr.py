"""reconcile's ECR gathering: every overlay the rules map an ECR image to, with its candidates.

ECR read-only, through :mod:`steps.ecr` (botocore's adaptive retries; at most ``concurrency`` calls
at once): ``DescribeRepositories`` once per registry, filtered by each rule's fixed prefix
(:attr:`steps.rules.Rule.repository_prefix`) and shape (:meth:`steps.rules.Rule.match_repository`),
skipped for rules that name one repository; ``DescribeImages`` once per matching repository. Every
tag is matched with :meth:`steps.rules.RuleSet.match`, exactly as resolve-image matches an event.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from steps.errors import ConfigError
from steps.models import Image, Target


class Calls:
    """What the sweep cost, counted from every thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ecr = self.git = self.clones = 0

    def add(self, what: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + n)


@dataclass
class Overlay:
    """One target overlay: the targets every allowed tag yields for it, and what ECR says."""

    key: tuple[str, str, str]
    candidates: list[Target] = field(default_factory=list)
    images: list[Any] = field(default_factory=list)  # steps.ecr.EcrImage of the candidates' repository


def pool(concurrency: int, jobs: Sequence[Any], fn: Callable[[Any], Any]) -> list[Any]:
    if len(jobs) <= 1 or concurrency <= 1:
        return [fn(job) for job in jobs]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(jobs)), thread_name_prefix="reconcile") as pool:
        return list(pool.map(fn, jobs))


def make_clients(concurrency: int) -> Callable[[str], Any]:
    """``region → ECR listing client`` (:func:`steps.ecr.make_listing_client`), one per region."""
    from steps import ecr

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
) -> tuple[dict[tuple[str, str, str], Overlay], list[str]]:
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

    # 2. every image of each of those repositories (one paginated DescribeImages each)
    def images(repo: tuple[str, str, str]) -> tuple[tuple[str, str, str], Any]:
        account, region, name = repo
        return repo, ecr.list_images(
            name, registry_id=account, client=client_for(region), on_call=lambda: calls.add("ecr")
        )

    overlays: dict[tuple[str, str, str], Overlay] = {}
    for (account, region, name), listing in pool(concurrency, found, images):
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
                    overlay = overlays.setdefault(key, Overlay(key, images=listing))
                    overlay.candidates.append(target)
    return overlays, notes

"""Scenario ``api_commits``: what ``commitMethod: api`` costs in GitHub requests, and its burst drain.

In-process, one machine: a real ``git http-backend`` remote (:class:`imagebump.local.git_server.
GitHttpServer`) and the project's GitHub API fake (tests/fixtures/github.py), whose git database
writes into that same bare repository and which enforces GitHub's documented secondary limits on
content-creating requests (80 a minute, 500 an hour per installation; real windows, real
``Retry-After`` waits). commit-pr runs as :func:`steps.commit_pr.step.land`, authenticated as a GitHub
App (installation token), ``provider: github``.

Reported:

- ``requests_per_event``: HTTP requests the fake answered per event, all and content-creating, for
  ``commitMethod: api`` in ``mode: commit``, in ``mode: pr`` (first event: branch and PR created;
  next event on a base that did not move: one commit stacked on the branch with its lease, PR updated
  — ``api_pr_updated``; next event after a commit landed on the base: the branch rebuilt on it, moved
  with its lease — ``api_pr_rebuilt``, issue 33), and ``commitMethod: git`` in ``mode: pr`` for
  comparison (git's own requests go to the git remote, not the API);
- ``burst``: ``events`` pushes into as many overlays of one repository, ``mode: pr``, run
  ``concurrency`` at a time (``imagebump run --local``'s default 4), once per method: drain time,
  API requests, rate-limit answers waited out, PRs open.

Steps run in threads of this process (no executor, no Argo): what differs between the methods is
commit-pr, and this isolates it. Nothing here asserts on time.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.testbed import KUSTOMIZATION

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/app{i:02d}"
_ENV = (
    "IMAGEBUMP_GIT_TOKEN",
    "IMAGEBUMP_GIT_READ_TOKEN",
    "IMAGEBUMP_GITHUB_API_URL",
    "IMAGEBUMP_GITHUB_APP_ID",
    "IMAGEBUMP_GITHUB_APP_INSTALLATION_ID",
    "IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE",
    "IMAGEBUMP_REQUIRE_VERIFIED",
)


@contextmanager
def _world(overlays: int):
    """A remote with ``overlays`` overlays, the GitHub fake over it, and this process's env as the App."""
    from imagebump.local.git_server import GitHttpServer
    from steps.forge import github as gh
    from tests.fixtures.github import GitHubFake
    from tests.steps.commit_pr.support import write_app_key

    saved = {k: os.environ.get(k) for k in _ENV}
    with tempfile.TemporaryDirectory(prefix="bench-api-") as tmp:
        token = "ibt_" + secrets.token_hex(20)
        key = Path(tmp) / "app.pem"
        write_app_key(key)
        with GitHttpServer(Path(tmp) / "remotes", token) as server, GitHubFake() as fake:
            files = {
                f"apps/app{i:02d}/overlays/prod/kustomization.yaml": KUSTOMIZATION.format(
                    image=IMAGE.format(i=i), tag="1.0.0"
                )
                for i in range(overlays)
            }
            server.create_repo("bench/api", files)
            fake.serve_git(server)
            fake.app_ids.add("777")
            fake.next_installation_token = token
            fake.ahead = lambda o, r, b, h: int(server.git("bench/api", "rev-list", "--count", f"{b}..{h}"))
            for k in _ENV:
                os.environ.pop(k, None)
            os.environ.update(
                {
                    "IMAGEBUMP_GITHUB_API_URL": fake.url,
                    "IMAGEBUMP_GITHUB_APP_ID": "777",
                    "IMAGEBUMP_GITHUB_APP_INSTALLATION_ID": "42",
                    "IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE": str(key),
                }
            )
            gh.clear_token_cache()
            try:
                yield server, fake
            finally:
                gh.clear_token_cache()
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v


def _event(server: Any, i: int, tag: str, *, mode: str, method: str) -> tuple[Any, Any]:
    from steps.domain.models import ImagesEntry, Plan, Target

    path = f"apps/app{i:02d}/overlays/prod"
    target = Target(
        rule=0,
        repo_url=server.url("bench/api"),
        path=path,
        env="prod",
        image=IMAGE.format(i=i),
        tag=tag,
        mode=mode,
        provider="github",
        commit_method=method,
    )
    plan = Plan(
        changed=True,
        decision="update",
        file=f"{path}/kustomization.yaml",
        image_name=IMAGE.format(i=i),
        new=ImagesEntry(name=IMAGE.format(i=i), newTag=tag),
        base_branch="main",
    )
    return target, plan


def _count(calls: list[Any]) -> dict[str, int]:
    content = [
        c
        for c in calls
        if (c.method != "GET" and not c.path.endswith("/graphql") and "access_tokens" not in c.path)
        or (c.path.endswith("/graphql") and "mutation" in str((c.body or {}).get("query", "")))
    ]
    return {"requests": len(calls), "content_creating": len(content)}


def requests_per_event() -> dict[str, Any]:
    """API requests per event, by method and mode (the App's token minted before, not counted)."""
    from steps.commit_pr import step as commit_pr
    from steps.forge.github import GitHubSettings, installation_token

    out: dict[str, Any] = {}
    with _world(4) as (server, fake):
        installation_token(GitHubSettings.from_env())
        base_moves = "base_moves"  # someone's commit lands on the base between two events
        cases = [
            ("api_commit", 0, "1.0.1", "commit", "api"),
            ("api_pr_created", 1, "1.0.1", "pr", "api"),
            ("api_pr_updated", 1, "1.0.2", "pr", "api"),  # the base did not move: one commit stacked
            ("git_pr_created", 2, "1.0.1", "pr", "git"),
            ("git_pr_updated", 2, "1.0.2", "pr", "git"),
            ("", 3, "1.0.1", "pr", "api"),  # a PR for overlay 3, then the base moves
            (base_moves, 0, "", "", ""),
            ("api_pr_rebuilt", 3, "1.0.2", "pr", "api"),  # the base moved: rebuilt on it
        ]
        for name, i, tag, mode, method in cases:
            if name == base_moves:
                server.commit_files("bench/api", {"README.md": "someone's change\n"}, "docs: a change")
                continue
            before = len(fake.calls)
            result = commit_pr.land(*_event(server, i, tag, mode=mode, method=method))
            if name:
                out[name] = {
                    "action": result.action,
                    "verified": result.verified,
                    **_count(fake.calls[before:]),
                }
    return out


def burst(events: int, concurrency: int, method: str) -> dict[str, Any]:
    """``events`` pushes into as many overlays, ``mode: pr``, ``concurrency`` at a time, real limits."""
    from steps.commit_pr import step as commit_pr

    with _world(events) as (server, fake):
        limits = fake.enforce_secondary_limits(80, 500)
        outcomes: dict[str, int] = {}
        started = time.monotonic()

        def one(i: int) -> str:
            try:
                return commit_pr.land(*_event(server, i, "1.0.1", mode="pr", method=method)).action
            except Exception as exc:  # noqa: BLE001 - counted, not raised: a benchmark reports
                return f"error: {type(exc).__name__}"

        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for action in pool.map(one, range(events)):
                outcomes[action] = outcomes.get(action, 0) + 1
        drain = time.monotonic() - started
        return {
            "method": method,
            "events": events,
            "concurrency": concurrency,
            "drain_s": round(drain, 2),
            "outcomes": outcomes,
            "open_prs": len(fake.open_pulls()),
            "rate_limited": limits.limited,
            **_count([c for c in fake.calls if "access_tokens" not in c.path]),
        }


def run(events: int = 27, concurrency: int = 4, log: Any = print) -> dict[str, Any]:
    """The whole scenario: requests per event, then the burst with each method."""
    log("[api_commits] GitHub requests per event …")
    result: dict[str, Any] = {"requests_per_event": requests_per_event()}
    result["burst"] = []
    for method in ("api", "git"):
        log(f"[api_commits] burst of {events} into {events} overlays, mode pr, commitMethod {method} …")
        b = burst(events, concurrency, method)
        log(f"[api_commits] {method}: drained in {b['drain_s']:.1f}s, {b['rate_limited']} rate-limit answers")
        result["burst"].append(b)
    return result

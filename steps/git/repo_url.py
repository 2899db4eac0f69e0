"""``https://HOST/OWNER/REPO`` repository URLs: the one shape a rule's ``githubRepository`` takes.

Apart from :mod:`steps.forge.github` so that a step that only checks a URL (commit-pr in commit mode,
before any I/O) does not import the GitHub client (githubkit, httpx: ~0.15–0.3 s of a cold
start). :mod:`steps.forge.github` re-exports :func:`parse_repo_url`.
"""

from __future__ import annotations

import re

from steps.domain.errors import ConfigError

_REPO_URL = re.compile(
    r"^(?P<scheme>https?)://(?P<host>[^/@\s]+)/(?P<owner>[^/\s]+)/(?P<repo>[^/\s]+?)(?:\.git)?/?$"
)


def parse_repo_url(repo_url: str) -> tuple[str, str, str]:
    """``https://HOST/OWNER/REPO[.git]`` → ``(host, owner, repo)``.

    Raises:
        ConfigError: the URL is not of that shape (credentials in the URL are refused too).
    """
    match = _REPO_URL.match(repo_url.strip())
    if not match:
        # Never echo a URL that may carry credentials.
        shown = repo_url if "@" not in repo_url else "<url with credentials>"
        raise ConfigError(
            f"repository URL {shown!r} is not https://HOST/OWNER/REPO; "
            "fix the rule's repository (no credentials, no extra path)"
        )
    return match["host"], match["owner"], match["repo"]

"""``https://HOST/OWNER/REPO`` repository URLs: the one shape a rule's ``githubRepository`` takes,
and the one spelling of a repository (:func:`repo_id`) wherever repositories are compared or named.

Apart from :mod:`steps.forge.github` so that a step that only checks a URL (commit-pr in commit mode,
before any I/O) does not import the GitHub client (githubkit, httpx: ~0.15–0.3 s of a cold
start). :mod:`steps.forge.github` re-exports :func:`parse_repo_url`.

One repository, one identity: ``https://github.com/Acme/GitOps.git/`` and
``HTTPS://GitHub.com/acme/gitops`` are the same repository (GitHub owner and repository names are
case-insensitive; its API answers with the canonical case, e.g. a pull request labelled
``Acme:branch``). Two rules that spell one repository differently must share its per-overlay lock,
find its open pull requests and share its clone in a reconcile run: :func:`repo_id` is the key for all
three. Hosts other than GitHub's keep their owner and repository case (a plain git server's paths
are case-sensitive).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

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


#: The GitHub API base (GitHub Enterprise: ``https://HOST/api/v3``); its host is a GitHub host.
API_URL_ENV = "IMAGEBUMP_GITHUB_API_URL"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_REPO_URL_ANY_CASE = re.compile(_REPO_URL.pattern, re.IGNORECASE)  # HTTPS://… is the same URL


def github_hosts(env: Mapping[str, str] | None = None) -> frozenset[str]:
    """Host names whose owner and repository names are case-insensitive: ``github.com`` and the
    host of ``$IMAGEBUMP_GITHUB_API_URL`` (GitHub Enterprise; an ``api.`` in front is dropped, as
    ``api.github.com`` serves ``github.com``)."""
    env = os.environ if env is None else env
    hosts = {"github.com"}
    api = (env.get(API_URL_ENV) or "").strip()
    if api:
        try:
            host = (urlsplit(api).hostname or "").lower()
        except ValueError:
            host = ""
        if host:
            hosts.add(host.removeprefix("api."))
    return frozenset(hosts)


def repo_id(repo_url: str, *, hosts: frozenset[str] | None = None) -> str:
    """The one spelling of a repository: ``scheme://host[:port]/owner/repo`` with the scheme and
    host lowercased, a default port, ``.git`` and trailing slashes dropped, and owner and repository
    lowercased on a GitHub host (:func:`github_hosts`). Two URLs name the same repository exactly
    when their ids are equal. A URL not of the ``https://HOST/OWNER/REPO`` shape is returned with
    only its trailing slashes and ``.git`` dropped (it is refused where it is used)."""
    text = repo_url.strip()
    match = _REPO_URL_ANY_CASE.match(text)
    if not match:
        return text.rstrip("/").removesuffix(".git")
    netloc = match["host"].lower()
    try:
        parts = urlsplit(f"//{netloc}")
        host, port = (parts.hostname or netloc), parts.port
    except ValueError:
        host, port = netloc, None
    scheme = match["scheme"].lower()
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        netloc = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    else:
        netloc = host if ":" not in host else f"[{host}]"
    owner, repo = match["owner"], match["repo"]
    if host in (github_hosts() if hosts is None else hosts):
        owner, repo = owner.lower(), repo.lower()
    return f"{scheme}://{netloc}/{owner}/{repo}"


def is_own_head(label: str, ref: str, owner: str) -> bool:
    """Is a pull request's head (GitHub's ``label``, ``OWNER:REF``) branch ``ref`` of ``owner``'s
    repository, not a fork's? GitHub compares logins without case and labels with the canonical
    case (``Acme:…`` for a rule's ``acme``)."""
    head_owner, _, head_ref = label.partition(":")
    return head_ref == ref and head_owner.casefold() == owner.casefold()

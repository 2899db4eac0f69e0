"""The forge (GitHub): pull requests and the GitHub API.

``forges`` (what commit-pr, the gate and notifications need of any forge — the protocol, a pull
request, a commit status — and the local forge for hosts without an API; it imports no client),
``github`` (the githubkit client, GitHub App and token auth, repository URLs) and
``pull_requests`` (GitHub's forge: find, create, update a pull request, labels, reviewers,
comments, commit statuses) and ``github_commits`` (``commitMethod: api``: commits
made through GitHub's git database API — Verified —, refs moved fast-forward or with a lease, the
secondary rate limits honoured) and ``local_status`` (commit statuses on a host without an API:
git notes on the commit). Who it may import: docs/development.md (checked by tests/test_layering.py).
"""

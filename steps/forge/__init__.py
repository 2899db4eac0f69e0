"""The forge (GitHub): pull requests and the GitHub API.

``github`` (the githubkit client, GitHub App and token auth, repository URLs) and
``pull_requests`` (the narrow seam commit-pr needs: find, create, update a pull request, with a
local forge for hosts without an API) and ``github_commits`` (``commitMethod: api``: commits
made through GitHub's git database API — Verified —, refs moved fast-forward or with a lease, the
secondary rate limits honoured) and ``local_status`` (commit statuses on a host without an API:
git notes on the commit). Who it may import: docs/development.md (checked by tests/test_layering.py).
"""

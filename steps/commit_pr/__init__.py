"""The commit-pr step: land one overlay edit on the target branch, as a commit or a pull request.

``step`` (``run``: the I/O side — clone, land, outputs), ``commit_mode`` and ``pr_mode`` (the two
ways to land), ``message`` (commit message and pull-request text). May import :mod:`steps.git`,
:mod:`steps.forge.pull_requests`, :mod:`steps.kustomize`, :mod:`steps.proposals`, :mod:`steps.runtime` and
:mod:`steps.domain`.
"""

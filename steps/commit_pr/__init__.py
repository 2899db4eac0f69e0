"""The commit-pr step: land one overlay edit on the target branch, as a commit or a pull request.

``step`` (``run``: the I/O side — settings, credentials, land, outputs), ``decide`` (the pure core:
the plan re-applied to the file as it is now), ``rollbacks`` (that re-application plus the entry's
history judged again on the newest base when the file changed since the plan), ``base_branch`` (the base both modes start from:
seeded from the plan's objects, else cloned), ``commit_mode`` and ``pr_mode`` (the two ways to
land; ``stack``: whether a pull request's update is one more commit on its branch or the branch
rebuilt on the newest base, pure), ``retry`` (backoff after a lost push race), ``message`` (commit message and pull-request
text), ``settings`` (commit-pr's environment), ``result`` (its outputs). Who it may import: docs/development.md (checked by tests/test_layering.py).
"""

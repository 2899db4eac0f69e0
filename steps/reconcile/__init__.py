"""The reconcile step (the image-reconcile CronWorkflow): find overlays behind their newest image.

``step`` (``run``: the I/O side), ``decide`` (pure: each target's state and verdict), ``model`` (the
overlays, push times and call counts the phases pass on), ``ecr_scan`` (the ECR scan: each overlay's
newest allowed image), ``overlay_read`` (each overlay's current entry, read from one clone per Git
repository), ``rollbacks`` (the behind targets a person's rollback holds), ``report`` (counts,
states, errors).
Who it may import: docs/development.md (checked by tests/test_layering.py).
"""

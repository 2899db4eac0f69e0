"""The resolve-image step: an ECR push event (or a manual image reference) → the targets to update.

``step`` (``run``: the I/O side — the input checked, the rules file, ECR, the outputs), ``decide``
(the pure core: what ECR said about the image and the rules → the targets, or a skip with its
reason; and the step's output model). The step is ``steps.resolve_image.step:run``. Who it may
import: docs/development.md (checked by tests/test_layering.py).
"""

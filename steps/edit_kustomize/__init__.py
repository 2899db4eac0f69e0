"""The edit-kustomize step: decide what one target's overlay (or values file) should say; push nothing.

``step`` (``run``: the I/O side — the partial clone, the file, ECR's push times, the outputs),
``decide`` (the pure core: the file's text and the push times → the plan), ``rollbacks`` (a plan that
would change, held when a person's rollback of its entry stands; the history read itself is
:mod:`steps.entry_history`). The step is ``steps.edit_kustomize.step:run``. Who it may import:
docs/development.md (checked by tests/test_layering.py).
"""

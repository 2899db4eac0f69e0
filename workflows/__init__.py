"""Declarations of what runs on a cluster, and the local runtime that runs them without one.

Top-level modules only declare: Hera definitions (``image_update``, ``image_reconcile``,
``argocd_backup``, wired by ``common``), ``rbac``, ``render`` (writes ``manifests/``) and ``names``
(plain constants, no Hera). They may import ``steps`` (the step functions they wire) and
``sensors``, never :mod:`workflows.local`, the local runtime (its own docstring says what it may
import). This ``__init__`` imports nothing, so ``import workflows.names`` does not load Hera.
"""

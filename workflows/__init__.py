"""Declarations of what runs on a cluster, and the local runtime that runs them without one.

Top-level modules only declare: Hera definitions (``image_update``, ``image_reconcile``,
``argocd_backup``, wired by ``common``; ``verify_live``, the push → live step both use;
``image_gate``, the promotion gate's CronWorkflow built by ``image_reconcile``'s builder; ``notify``, the exit
handler of ``image-update`` and ``argocd-backup``), ``rbac``, ``names`` (the names every manifest agrees on:
plain constants, no Hera) and ``pod_security`` (every pod's user and securityContexts). They may
import ``steps`` (the step functions they wire), never :mod:`sensors`, :mod:`render` (which
renders both into ``manifests/``) or ``local``, the local runtime (its own
docstring says what it may import). This ``__init__`` imports nothing, so ``import
workflows.names`` does not load Hera.
"""

"""Argo CD backup and restore: the backup-export step and the code ``imagebump restore`` runs.

``export`` (the backup-export step's ``run``), ``decide`` (its pure core: the archive's key and which archives expire), ``settings`` (its ConfigMap settings), ``archive``
(what an archive holds and how objects are sanitised), ``live_objects`` (the live Argo CD objects,
read through :mod:`steps.kube.api`; which namespaces Argo CD watches:
:mod:`steps.kube.argocd_namespaces`), ``retention`` (pure: which old archives expire), ``retention_s3`` (listing and deleting them), ``object_diff`` (archive vs live), ``restore`` (the restore
the CLI runs; no template runs it), ``restore_plan`` (pure: what a restore would change) and
``restore_report``. Who it may import: docs/development.md (checked by tests/test_layering.py).
"""

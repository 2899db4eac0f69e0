"""Kubernetes: the narrow seam backup-export, restore and verify-live read and write Argo CD through.

``api`` (the ``KubeApi`` protocol, ``Resource``, ``Page`` and error mapping) and ``client`` (its
implementation over the official ``kubernetes`` client), ``argocd_namespaces`` (which namespaces
Argo CD watches for Applications: ``application.namespaces``). Who it may import: docs/development.md (checked by tests/test_layering.py).
"""

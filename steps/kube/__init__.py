"""Kubernetes: the narrow seam backup-export and restore read and write Argo CD through.

``api`` (the ``KubeApi`` protocol, ``Resource``, ``Page`` and error mapping) and ``client`` (its
implementation over the official ``kubernetes`` client). May import :mod:`steps.domain`.
"""

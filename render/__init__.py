"""Rendering: every cluster-side manifest under ``manifests/``, from the declarations.

``manifests`` (``render_all``, ``write_all``, ``check``; ``imagebump render`` and ``./dev render``
call it). It sits above both :mod:`workflows` (the Argo templates, RBAC) and :mod:`sensors` (the
Argo Events objects): it may import both, and nothing below imports it.
"""

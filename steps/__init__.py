"""The steps: the work each pod does, as plain Python (no Hera, no Kubernetes objects).

One module per step — ``resolve_image``, ``edit_kustomize``, ``commit_pr``, ``reconcile``,
``backup_export`` — each a ``run`` function with a typed input and output, shaped gather → decide →
act: I/O at the edges, a pure ``decide`` in the middle (``reconcile_decide``, ``restore_plan``,
``never_downgrade`` and the step modules' own ``decide``). ``never_downgrade`` owns the rule that an
overlay never moves to an older image. Shared domain modules: ``models`` (the values that travel
between steps, image-reference formatting), ``events``, ``rules/``, ``order``, ``kustomize/``,
``git*``, ``github``/``forge``, ``ecr``, ``kube``/``kube_client``, ``s3``, ``archive``; one home
each for settings and secrets (``settings``), redaction (``redact``), logging and outputs
(``_runtime``) and every exception (``errors``). Modules here import the standard library,
third-party packages and each other only — never ``imagebump``, ``workflows`` or ``sensors``
(enforced by ``tests/test_layering.py``).
"""

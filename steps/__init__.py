"""The steps: the work each pod does, as plain Python (no Hera, no Kubernetes objects).

One module per step — ``resolve_image``, ``edit_kustomize``, ``commit_pr`` (acting in
``commit_mode`` / ``pr_mode``, messages from ``commit_message``), ``reconcile`` (``reconcile_ecr``,
``reconcile_git``, ``reconcile_report``, ``reconcile_holds`` — the targets a rollback holds), ``backup_export`` (``backup_settings``, ``retention``) and
``restore`` (``restore_report``), ``verify_live/`` (push → live: Argo CD refreshed and watched until
the commit runs, and the sweep's live states) — each a ``run`` with a typed input and output, shaped gather →
decide → act: I/O at the edges, a pure ``decide`` in the middle (each step module's own
``decide``, ``reconcile_decide``, ``restore_plan``), and ``never_downgrade`` the one home of the rule
that an overlay or a living proposal never moves to an older image; ``intent`` the one home of
what people decided (imagebump's commit trailer, pins, hold markers, rollbacks), read from history
by ``entry_history``. A step process starts in
``_entry`` (Hera's runner's call, without Hera), runs under ``_runtime`` (logging, outputs, exit
codes) and reports where its time went through ``timing``. Shared domain modules: ``models`` (the
values that travel between steps, the closed choices, image-reference formatting), ``events``,
``rules/``, ``order``, ``kustomize/``, ``branches`` / ``proposals`` (a target's proposal branch, and
what it proposes), the git layer (``git`` over ``git_auth``, ``git_process``, ``git_failures``,
``git_repo`` — a clone — ``git_commit`` — what a commit is made of — and ``git_objects`` — git's
object format), ``repo_url``, ``github`` / ``forge``, ``ecr``, ``kube`` / ``kube_client``,
``live``, ``argocd_namespaces``, ``s3``, ``archive``, ``object_diff``, ``scratch``,
``regex_tokens``; one home each for settings and secrets (``settings``), redaction (``redact``) and
every exception (``errors``). Modules here import the standard library, third-party packages and
each other only — never ``imagebump``, ``workflows`` or ``sensors`` (enforced by
``tests/test_layering.py``).
"""

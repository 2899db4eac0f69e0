"""The steps: the work each pod does, as plain Python (no Hera, no Kubernetes objects).

Read the tree bottom up; each package may import only those below it (docs/development.md draws
the graph; tests/test_layering.py enforces it):

- ``domain/`` — the values and rules every step speaks: models, errors, events, version order,
  never-downgrade, branch names. Pure.
- ``runtime/`` — what every step process runs inside: the ``launcher`` (a pod's command),
  the ``harness`` (logging, outputs, exit codes), settings, redaction, timing, scratch dirs.
- ``kustomize/`` (read and edit a kustomization's ``images:``), ``rules/`` (which overlays an
  image push updates), ``git/`` (clones, commits, pushes), ``aws/`` (ECR, S3), ``kube/``
  (the Kubernetes seam) — the seams to the outside world, and ``forge/`` (GitHub: pull requests)
  above git.
- ``proposals`` — what an open proposal branch proposes (read by edit-kustomize and commit-pr).
- The steps, each a ``run`` with a typed input and output, shaped gather → decide → act: I/O at
  the edges, a pure decision in the middle. One module for a one-module step, a package otherwise:
  ``resolve_image`` (an ECR event → the targets its rules select), ``edit_kustomize`` (plan one
  overlay edit, never a downgrade), ``commit_pr/`` (land it: ``step`` and ``decide``),
  ``reconcile/`` (the sweep: ``step`` and ``decide``), ``argocd_backup/`` (backup-export's ``export``
  and the restore ``imagebump restore`` runs, with its pure ``restore_plan``). A step never
  imports another step.

Modules here import the standard library, third-party packages and each other only — never
``imagebump``, ``workflows``, ``sensors`` or ``render``, and never Hera.
"""

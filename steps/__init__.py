"""The steps: the work each pod does, as plain Python (no Hera, no Kubernetes objects).

Read the tree bottom up (docs/development.md draws who may import whom; tests/test_layering.py
enforces it): ``domain/`` (the values and rules every step speaks: models, errors, events, version
order, never-downgrade, branch names; pure), ``runtime/`` (what every step process runs inside:
the ``launcher`` a pod starts, the ``harness`` — logging, outputs, exit codes —, settings,
redaction, timing, scratch directories), the seams to the outside — ``kustomize/`` (a
kustomization's ``images:``), ``rules/`` (which overlays an image push updates), ``git/``,
``aws/`` (ECR, S3), ``kube/`` (and Argo CD's namespaces) — and ``forge/`` (GitHub) above git, then
``proposals`` (what an open proposal branch proposes) and ``entry_history`` (the bounded history of
an images entry: was it rolled back by a person?), then the steps, each a ``run`` with a typed input and output,
shaped gather → decide → act with a pure decision in the middle: ``resolve_image/``,
``edit_kustomize/``, ``commit_pr/`` and ``reconcile/`` (``step`` and its pure ``decide``), ``argocd_backup/`` (backup-export's ``export`` and the restore ``imagebump restore``
runs, with its pure ``restore_plan``), ``verify_live/`` (push → live: Argo CD refreshed and watched
until the commit runs, with its pure ``decide``), ``live_states/`` (reconcile's live state of every
current target, each Application judged as verify-live judges it), ``notify/`` (the exit handlers' messages: one per
outcome per destination, with its pure ``decide``), ``gate/`` (the promotion gate's pure
``decide``). A step never imports another step, and nothing here imports
``imagebump``, ``workflows``, ``sensors``, ``render`` or Hera.
"""

#: imagebump's version, declared here at the bottom of the tree so every step reads it without
#: importing anything (``importlib.metadata`` costs a cold step pod ~20 ms); ``pyproject.toml``
#: takes the distribution's version from it and the CLI re-exports it.
__version__ = "0.1.0"

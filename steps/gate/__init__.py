"""The promotion gate (issue 35): a target of a rule with ``promoteAfter: {env, soak}`` gets an
image only after the environment before it ran that image (the same digest), live and continuously
Healthy, for ``soak``.

Modules:

- ``decide`` — the pure core: from a timeline of facts about the environment before
  (each one survives any restart: Argo CD's Application status and history, Git, ECR), decides
  ``waiting``, ``blocked`` or ``promoted`` for one image.
- ``facts`` — one Argo CD Application (its ``status.history``, health, sync, images) and Git (a
  person's hold or rollback) as that timeline (pure).
- ``evaluate`` — one gated target's decision over every Application of every target of the
  environment before (pure).
- ``memory`` — what earlier evaluations saw (a block they decided, when they saw the image live or
  unwell), kept across restarts beside the notifications' ledger: where Argo CD forgets.
- ``read`` — the reads: Argo CD's Applications and the overlay's image at each revision (Git).
- ``apply`` — the gate in reconcile: gated targets behind become ``waiting``, ``blocked`` or
  ``promoted`` (``gate: wait`` hands over only the promoted ones).
- ``status`` — ``gate: check``: the commit status ``imagebump/soak: ENV`` on the pull request's head.
"""

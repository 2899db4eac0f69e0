"""The promotion gate (issue 35): a target of a rule with ``promoteAfter: {env, soak}`` gets an
image only after the environment before it ran that image (the same digest), live and continuously
Healthy, for ``soak``.

Modules:

- ``decide`` — the pure core: from a timeline of facts about the environment before
  (each one survives any restart: Argo CD's Application status and history, Git, ECR), decides
  ``waiting``, ``blocked`` or ``promoted`` for one image.
"""

"""verify-live: prove Argo CD runs what imagebump committed, and time push → live.

``step`` (typed input/output and ``run``), ``decide`` (an Application's status → its live
state, pure), ``argocd`` (finding Applications, refreshing them), ``revisions`` (what Git
says about a revision, read from a ``steps.git.PartialClone``; reconcile's live states, :mod:`steps.live_states`, read Argo CD and Git through
``argocd`` and ``revisions`` too). The step is
``steps.verify_live.step:run``. Who it may import: docs/development.md (checked by tests/test_layering.py).
"""

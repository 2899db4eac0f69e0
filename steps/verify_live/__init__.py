"""verify-live: prove Argo CD runs what imagebump committed, and time push → live.

:mod:`.step` (typed input/output and ``run``), :mod:`.decide` (an Application's status → its live
state, pure), :mod:`.argocd` (finding Applications, refreshing them), :mod:`.history` (what Git
says about a revision). The step is ``steps.verify_live.step:run``.
"""

"""The live-states step (the image-reconcile CronWorkflow): the live state in Argo CD of every current target.

``step`` (``run``: the I/O side — one list of Applications, one clone per repository, the outputs
and the table), ``decide`` (the pure core: a target's Applications, each judged by verify-live's
:func:`steps.verify_live.decide.decide`, → the target's live state; the output models). It reads
verify-live's seams to Argo CD and Git (``steps.verify_live.argocd``, ``steps.verify_live.revisions``;
the clone itself is ``steps.git.PartialClone``) and changes nothing. The step is ``steps.live_states.step:run``. Who it may import:
docs/development.md (checked by tests/test_layering.py).
"""

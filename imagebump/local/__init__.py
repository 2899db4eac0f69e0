"""Everything imagebump runs on one machine without a cluster or a cloud account.

``moto`` (the AWS emulator in server mode) and ``git_server`` (``git http-backend`` with token
auth; its HTTP side in ``git_http_backend``) are the real parts; ``stack`` deploys
``manifests/aws/cloudformation.yaml`` into moto; ``world`` starts a whole local world from them
(``demo_repo``: its GitOps repository and rules); ``drive`` pushes images and runs the local
sensor until done; ``outcome`` decodes a finished workflow (the demo's report and ``run
--local``'s progress line); ``reconciler`` runs the rendered ``image-reconcile`` CronWorkflow once or
every N (``imagebump reconcile``, ``run --local``); ``demo`` is ``imagebump demo``'s report and
renderer; ``builders`` builds ECR events, image manifests and kustomizations for the demo, the
benchmarks and the tests. May import ``steps`` (errors) and :mod:`workflows.local.results`
(plain data), and ``sensors``, the rest of ``workflows``, ``steps.reconcile.step`` and
``imagebump.commands`` lazily, inside functions; never imported by ``steps/``.
"""

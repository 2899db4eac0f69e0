"""The step runtime: what every step process runs inside, whatever the step.

``launcher`` (a step pod's ``python -m steps.runtime.launcher -e steps.x:run``: Hera's runner's
call, without Hera), ``harness`` (``step_entry``: JSON-line logging, outputs, exit codes),
``settings`` (``$NAME`` / ``$NAME_FILE`` settings and secrets), ``redact`` (the one redaction),
``timing`` (where a step's time went) and ``scratch_dir`` (a step's private scratch directory).
Who it may import: docs/development.md (checked by tests/test_layering.py).
"""

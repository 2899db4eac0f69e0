"""Former home of the local executor: a re-export for callers not yet moved to :mod:`workflows.local`.

Kept only for ``imagebump/local/demo.py`` and ``bench/world.py`` (owned by other work in
progress); new code imports :mod:`workflows.local.executor` and :mod:`workflows.local.results`.
Delete this module once they have switched (tests/test_layering.py names it as the one exception).
"""

from workflows.local.executor import LocalExecutor
from workflows.local.logs import json_logger
from workflows.local.results import NodeResult, WorkflowResult

__all__ = ["LocalExecutor", "NodeResult", "WorkflowResult", "json_logger"]

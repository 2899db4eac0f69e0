"""A step's scratch directory (its clones): private, and deleted — by the step, or after it.

A step clones into a fresh ``mkdtemp`` under its ``TMPDIR``. Deleting a clone is file-system work
(tens of files and directories; ~10–100 ms on a journalled disk under load) that the step's result
does not wait for. When the runtime that started the step says it deletes the step's whole
``TMPDIR`` once the step has exited (:data:`DELETED_AFTER`, set by the local executor, which then
deletes it on a background thread), the scratch directory is left to it; otherwise (a pod, a test,
a shell) the step deletes it on the way out, as ``tempfile.TemporaryDirectory`` would. Either way
the directory is the step's alone and is gone after the step.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from steps.runtime.timing import timed

#: "1": whoever started this step deletes its ``TMPDIR`` (and everything in it) after it exits.
DELETED_AFTER = "IMAGEBUMP_TMPDIR_DELETED_AFTER_STEP"


def _left_to_runtime(path: Path) -> bool:
    tmpdir = os.environ.get("TMPDIR")
    if os.environ.get(DELETED_AFTER) != "1" or not tmpdir:
        return False
    return path.resolve().is_relative_to(Path(tmpdir).resolve())


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A fresh private directory under ``TMPDIR``, deleted on exit unless the runtime deletes it."""
    with timed("scratch"):
        path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if not _left_to_runtime(path):
            with timed("scratch"):
                shutil.rmtree(path, ignore_errors=True)

"""imagebump: an ECR image push becomes a Git change (the CLI package).

``cli`` dispatches to ``commands/`` (one module per subcommand); ``local/`` holds what runs on
one machine without a cluster (moto, ``git http-backend``, the demo world). This package may
import ``steps``, ``workflows`` and ``sensors``; none of them imports it (the version is declared
at the bottom, ``steps.__version__``, and re-exported here; tests/test_layering.py checks it).
``IMAGE`` / ``IMAGE_REPOSITORY`` (the steps image) live in :mod:`workflows.names`, re-exported here.
"""

from steps import __version__

__all__ = ["IMAGE", "IMAGE_REPOSITORY", "__version__"]


def __getattr__(name: str) -> object:
    """``IMAGE`` and ``IMAGE_REPOSITORY`` from :mod:`workflows.names`, loaded when first asked for:
    ``imagebump --help`` and ``--version`` do not pay for what ``workflows.names`` imports."""
    if name in ("IMAGE", "IMAGE_REPOSITORY"):
        from workflows import names

        return getattr(names, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

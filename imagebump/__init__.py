"""imagebump: an ECR image push becomes a Git change (the CLI package).

``cli`` dispatches to ``commands/`` (one module per subcommand); ``local/`` holds what runs on
one machine without a cluster (moto, ``git http-backend``, the demo world). This package may
import ``steps``, ``workflows`` and ``sensors``; none of them imports it (steps read the version
from package metadata).
"""

__version__ = "0.1.0"

#: The steps image every WorkflowTemplate/CronWorkflow names; built from ./Dockerfile.
IMAGE_REPOSITORY = "ghcr.io/imagebump/imagebump"
IMAGE = f"{IMAGE_REPOSITORY}:{__version__}"

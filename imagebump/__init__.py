"""imagebump: an ECR image push becomes a Git change."""

__version__ = "0.1.0"

#: The steps image every WorkflowTemplate/CronWorkflow names; built from ./Dockerfile.
IMAGE_REPOSITORY = "ghcr.io/imagebump/imagebump"
IMAGE = f"{IMAGE_REPOSITORY}:{__version__}"

"""The names every manifest, the RBAC, the sensors and the local runtime agree on — no Hera here.

The steps image, namespace, labels, ServiceAccounts, the ConfigMaps and Secrets the templates mount,
the names of the WorkflowTemplate and CronWorkflows (and where they are rendered), as plain data
(the pod hardening is :mod:`workflows.pod_security`). Importing this module must stay cheap and side-effect free: it imports
only the standard library (``IMAGE`` and ``OUTPUTS_DIR`` come from :mod:`steps.runtime.harness` when first
read). :mod:`workflows.common` (which loads Hera and sets ``global_config.image``) builds its Hera
models from these values, and :mod:`sensors` and the local runtime read them without loading Hera
(tests/test_layering.py checks that).
"""

from __future__ import annotations

import os
from pathlib import Path

#: The steps image every WorkflowTemplate/CronWorkflow names (``IMAGE``: ``IMAGE_REPOSITORY:<version>``,
#: see :func:`__getattr__`); built from ./Dockerfile. :mod:`imagebump` re-exports both.
IMAGE_REPOSITORY = "ghcr.io/imagebump/imagebump"

#: Namespace every imagebump object lives in (Argo Workflows and Argo Events must watch it).
NAMESPACE = "imagebump"
#: Argo CD's namespace, read by backup-export and verify-live.
ARGOCD_NAMESPACE = "argocd"

LABELS = {"app.kubernetes.io/part-of": "imagebump"}

# The templates (their metadata.name; the rendered files are manifests/workflows/<name>.yaml).
IMAGE_UPDATE = "image-update"  # WorkflowTemplate: an ECR push → one Git change per overlay
IMAGE_RECONCILE = "image-reconcile"  # CronWorkflow: reconcile
ARGOCD_BACKUP = "argocd-backup"  # CronWorkflow: Argo CD's configuration → S3
#: The Sensor that creates ``image-update`` Workflows is named after that template; its leader
#: election Lease is ``sensor-<name>`` (argo-events v1.9.11 pkg/sensors/listener.go).
SENSOR = IMAGE_UPDATE

#: Where ``imagebump render`` writes the generated manifests, relative to the project root.
MANIFESTS_DIR = "manifests"


def rendered(name: str) -> str:
    """Where the template ``name`` is rendered, relative to ``manifests/``: ``workflows/<name>.yaml``."""
    return f"workflows/{name}.yaml"


def rendered_file(name: str, project_root: str | os.PathLike[str]) -> Path:
    """The rendered manifest of template ``name`` in a source tree:
    ``<project_root>/manifests/workflows/<name>.yaml`` (what ``imagebump run --local`` reads)."""
    return Path(project_root) / MANIFESTS_DIR / rendered(name)


# ServiceAccounts, one per privilege set (see workflows/rbac.py and manifests/aws/).
SA_WORKFLOW = "imagebump-workflow"  # commit-pr and the workflow's own pods: no cloud role
SA_ECR_READER = "imagebump-ecr-reader"  # resolve-image, edit-kustomize: ECR read via IRSA
SA_BACKUP = "imagebump-backup"  # backup-export: S3 write + Argo CD read
SA_LIVE = "imagebump-live"  # verify-live: read Argo CD Applications (no write on any)
SA_SENSOR = "imagebump-sensor"  # the Sensor: create Workflows, hold a Lease
SA_EVENTSOURCE = "imagebump-eventsource"  # the SQS EventSource: SQS receive via IRSA
SA_NOTIFY = "imagebump-notify"  # the exit handler's notify: read its own Workflow

# Configuration objects the templates mount (names are documented in docs/install.md).
RULES_CONFIGMAP = "imagebump-rules"
RULES_KEY = "rules.yaml"
RULES_DIR = "/etc/imagebump/rules"
ENV_CONFIGMAP = "imagebump-env"  # optional plain settings: AWS_REGION, IMAGEBUMP_GITHUB_API_URL, ...
GIT_SECRET = "imagebump-git"  # write token (key `token`): commit-pr only
GIT_TOKEN_KEY = "token"  # → env IMAGEBUMP_GIT_TOKEN of commit-pr's main container
GIT_APP_KEY_KEY = "app-private-key"  # GitHub App private key → file GIT_DIR/app-private-key
GIT_DIR = "/etc/imagebump/git"
GIT_READ_SECRET = "imagebump-git-read"  # optional read-only token (key `token`): edit-kustomize
GIT_READ_DIR = "/etc/imagebump/git-read"
ARGOCD_SECRET = "imagebump-argocd"  # optional Argo CD account token (key `token`): verify-live's refresh
ARGOCD_DIR = "/etc/imagebump/argocd"
BACKUP_CONFIGMAP = "imagebump-backup"
NOTIFY_SECRET = "imagebump-notify"  # optional notifications file (key `notify.yaml`): notify only
NOTIFY_KEY = "notify.yaml"
NOTIFY_DIR = "/etc/imagebump/notify"

#: The Workflows controller resolves ``valueFrom.configMapKeyRef`` of workflow parameters only from
#: ConfigMaps carrying this label (argo-workflows v4.0.10: workflow/common/configmap.go
#: ``GetConfigMapValue`` refuses any other ConfigMap; workflow/controller/controller.go
#: ``newTypedConfigMapInformer`` watches only ConfigMaps with the label key). Without it every
#: parameter without a ``valueFrom.default`` fails the Workflow at start.
PARAMETER_CONFIGMAP_LABELS = {"workflows.argoproj.io/configmap-type": "Parameter"}


def __getattr__(name: str) -> str:
    """The two names :mod:`steps.runtime.harness` decides, read from it when first asked for (it loads
    pydantic; ``imagebump --help`` reads this module and must not wait for that):

    - ``IMAGE``: the steps image, tagged with imagebump's installed version
      (:func:`steps.runtime.harness.imagebump_version`: ``steps.__version__``, which ``pyproject.toml``
      gives the distribution);
    - ``OUTPUTS_DIR``: where a step writes its output parameters (Hera's runner): /tmp/hera-outputs,
      on the /tmp emptyDir.
    """
    if name == "IMAGE":
        from steps.runtime.harness import imagebump_version

        value = f"{IMAGE_REPOSITORY}:{imagebump_version()}"
    elif name == "OUTPUTS_DIR":
        from steps.runtime.harness import DEFAULT_OUTPUTS_DIRECTORY as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # once: later reads are plain module attributes
    return value

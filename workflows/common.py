"""Wiring shared by every Hera definition: image, names, pod hardening, retries, volumes.

Nothing here runs in a pod. The constants are the contract between the rendered manifests
(`manifests/`), the RBAC and AWS side, and the step code's environment variables.
Import this module before building any step template: it sets ``global_config.image``.
"""

from __future__ import annotations

from hera.shared import global_config
from hera.workflows import (
    ConfigMapEnvFrom,
    EmptyDirVolume,
    Env,
    Parameter,
    Resources,
    RetryStrategy,
)
from hera.workflows import models as m
from pydantic import BaseModel

from imagebump import IMAGE
from steps._runtime import DEFAULT_OUTPUTS_DIRECTORY, kebab
from steps.errors import EXIT_CONFIG

# Every step template renders `image: IMAGE` even when a definition forgets to pass it.
global_config.image = IMAGE

#: Namespace every imagebump object lives in (Argo Workflows and Argo Events must watch it).
NAMESPACE = "imagebump"
#: Argo CD's namespace, read by backup-export.
ARGOCD_NAMESPACE = "argocd"

LABELS = {"app.kubernetes.io/part-of": "imagebump"}

# ServiceAccounts, one per privilege set (see workflows/rbac.py and manifests/aws/).
SA_WORKFLOW = "imagebump-workflow"  # commit-pr and the workflow's own pods: no cloud role
SA_ECR_READER = "imagebump-ecr-reader"  # resolve-image, edit-kustomize: ECR read via IRSA
SA_BACKUP = "imagebump-backup"  # backup-export: S3 write + Argo CD read
SA_SENSOR = "imagebump-sensor"  # the Sensor: create Workflows, hold a Lease
SA_EVENTSOURCE = "imagebump-eventsource"  # the SQS EventSource: SQS receive via IRSA

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
BACKUP_CONFIGMAP = "imagebump-backup"

#: The Workflows controller resolves ``valueFrom.configMapKeyRef`` of workflow parameters only from
#: ConfigMaps carrying this label (argo-workflows v4.0.10: workflow/common/configmap.go
#: ``GetConfigMapValue`` refuses any other ConfigMap; workflow/controller/controller.go
#: ``newTypedConfigMapInformer`` watches only ConfigMaps with the label key). Without it every
#: parameter without a ``valueFrom.default`` fails the Workflow at start.
PARAMETER_CONFIGMAP_LABELS = {"workflows.argoproj.io/configmap-type": "Parameter"}

OUTPUTS_DIR = DEFAULT_OUTPUTS_DIRECTORY  # /tmp/hera-outputs, on the /tmp emptyDir

UID = 10001

POD_SECURITY_CONTEXT = m.PodSecurityContext(
    run_as_non_root=True,
    run_as_user=UID,
    run_as_group=UID,
    fs_group=UID,
    seccomp_profile=m.SeccompProfile(type="RuntimeDefault"),
)

CONTAINER_SECURITY_CONTEXT = m.SecurityContext(
    run_as_non_root=True,
    run_as_user=UID,
    read_only_root_filesystem=True,
    allow_privilege_escalation=False,
    capabilities=m.Capabilities(drop=["ALL"]),
)


def tmp_volume() -> EmptyDirVolume:
    """Private scratch space: the root filesystem is read-only; /tmp is the pod's own emptyDir."""
    return EmptyDirVolume(name="tmp", mount_path="/tmp", size_limit="1Gi")


def base_env() -> list[Env]:
    """Environment every step gets: where outputs go, a writable HOME, no bytecode writes."""
    return [
        Env(name="hera__outputs_directory", value=OUTPUTS_DIR),
        Env(name="HOME", value="/tmp"),
        Env(name="PYTHONDONTWRITEBYTECODE", value="1"),
    ]


def base_env_from() -> list[ConfigMapEnvFrom]:
    """Optional non-secret settings (AWS_REGION, IMAGEBUMP_GITHUB_API_URL, GitHub App id, ...)."""
    return [ConfigMapEnvFrom(name=ENV_CONFIGMAP, optional=True)]


def resources(cpu: str = "100m", memory: str = "128Mi", memory_limit: str = "512Mi") -> Resources:
    return Resources(cpu_request=cpu, memory_request=memory, cpu_limit="1", memory_limit=memory_limit)


def retry_transient(limit: int = 4) -> RetryStrategy:
    """Retry with exponential backoff unless the step said "bad input" (exit 2, steps.errors).

    `retryPolicy: Always` also retries pod errors (eviction, node loss); the expression refuses
    only the terminal exit code. 75 (transient) and any other failure are retried.
    """
    return RetryStrategy(
        limit=limit,
        retry_policy="Always",
        expression=f"asInt(lastRetry.exitCode) != {EXIT_CONFIG}",
        backoff=m.Backoff(duration="10s", factor=2, max_duration="5m"),
    )


def outputs_of(model: type[BaseModel], defaults: dict[str, str] | None = None) -> list[Parameter]:
    """One output parameter per field of a step's output model (kebab-case, as emit_outputs writes).

    ``defaults`` maps kebab names to the value used when the file is absent (default ``""``).
    """
    defaults = defaults or {}
    return [output(kebab(name), defaults.get(kebab(name), "")) for name in model.model_fields]


def output(name: str, default: str = "") -> Parameter:
    """An output parameter the step writes itself (steps._runtime.emit_outputs).

    ``default`` is used when the step wrote no file (it failed) and, from Argo 3.7.16 / 4.0.7 on,
    for references to the outputs of a skipped step (nothing here reads those).
    """
    return Parameter(
        name=name,
        value_from=m.ValueFrom(path=f"{OUTPUTS_DIR}/parameters/{name}", default=default),
    )

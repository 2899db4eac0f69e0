"""The demo's GitOps repository and rules: a base Deployment with a staging overlay (``mode: commit``)
and a production overlay (``mode: pr``), and the rules mapping an ECR repository to both.

Pure text; :func:`imagebump.local.world.build_world` serves it, the README test and the e2e tests
reuse it. The overlays' exact text (comments, a quoted tag) is what ``imagebump demo`` shows diffs
of. Imports nothing of the project.
"""

from __future__ import annotations

REGION = "us-west-2"
ECR_REPOSITORY = "team/api"
MANIFESTS_REPO = "demo/manifests"
APP = "api"
STAGING_PATH = f"apps/{APP}/overlays/staging"
PRODUCTION_PATH = f"apps/{APP}/overlays/production"


#: The demo's Helm values file (issue 34): the api chart's values, updated next to the overlays.
HELM_VALUES_PATH = f"charts/{APP}/values.yaml"
#: The env of the demo's values-file target.
HELM_ENV = "helm"


def helm_values_file(image: str, tag: str = "1.4.1") -> str:
    """The api chart's values (Bitnami's shape: registry + repository + tag + digest)."""
    registry, _, repository = image.partition("/")
    return (
        "# Values of the api Helm chart: imagebump updates the image where the chart keeps it.\n"
        "replicaCount: 2\n"
        "\n"
        "image:\n"
        f"  registry: {registry}\n"
        f"  repository: {repository}\n"
        f"  tag: {tag}  # set by imagebump\n"
        '  digest: ""\n'
        "  pullPolicy: IfNotPresent\n"
    )


def helm_rule(
    git_base_url: str, registry: str, *, repository: str = ECR_REPOSITORY, provider: str = "local"
) -> str:
    """A rule naming the chart's values file (``valuesFile``), committed directly (``mode: commit``)."""
    prefix, _, _ = repository.rpartition("/")
    uri = f"{registry}/{prefix}/$1" if prefix else f"{registry}/$1"
    return (
        f"- registryURI: {uri}\n"
        f"  githubRepository: {git_base_url}/{MANIFESTS_REPO}/charts/$1\n"
        "  valuesFile: values.yaml\n"
        f"  env: {HELM_ENV}\n"
        "  mode: commit\n"
        f"  provider: {provider}\n"
        "  denyImageTag:\n"
        "    - latest\n"
    )


def manifests_files(
    image: str, *, staging_tag: str = "1.4.1", production_tag: str = "1.4.0"
) -> dict[str, str]:
    """The demo repository: a base Deployment of ``image`` and a staging and a production overlay."""
    base = f"apps/{APP}/base"
    return {
        "README.md": "# demo/manifests\n\nGitOps repository of the imagebump demo (Argo CD would sync it).\n",
        f"{base}/kustomization.yaml": "resources:\n  - deployment.yaml\n",
        f"{base}/deployment.yaml": (
            "apiVersion: apps/v1\n"
            "kind: Deployment\n"
            "metadata:\n"
            f"  name: {APP}\n"
            "spec:\n"
            "  replicas: 1\n"
            "  selector:\n"
            "    matchLabels:\n"
            f"      app: {APP}\n"
            "  template:\n"
            "    metadata:\n"
            "      labels:\n"
            f"        app: {APP}\n"
            "    spec:\n"
            "      containers:\n"
            f"        - name: {APP}\n"
            f"          image: {image}:1.0.0\n"
        ),
        f"{STAGING_PATH}/kustomization.yaml": (
            "# Staging: imagebump commits new images here directly (mode: commit).\n"
            "apiVersion: kustomize.config.k8s.io/v1beta1\n"
            "kind: Kustomization\n"
            f"namespace: {APP}-staging\n"
            "resources:\n"
            "- ../../base\n"
            "\n"
            "images:\n"
            f"- name: {image}\n"
            f'  newTag: "{staging_tag}"  # set by imagebump\n'
        ),
        f"{PRODUCTION_PATH}/kustomization.yaml": (
            "# Production: imagebump proposes new images on a branch (mode: pr).\n"
            "apiVersion: kustomize.config.k8s.io/v1beta1\n"
            "kind: Kustomization\n"
            f"namespace: {APP}-production\n"
            "resources:\n"
            "  - ../../base\n"
            "images:\n"
            f"  - name: {image}\n"
            f"    newTag: {production_tag}\n"
        ),
    }


def default_rules(
    git_base_url: str,
    registry: str,
    *,
    repository: str = ECR_REPOSITORY,
    owner_repo: str = MANIFESTS_REPO,
    provider: str = "local",
) -> str:
    """Rules: every push of ``repository`` → a staging commit and a production proposal."""
    prefix, _, _ = repository.rpartition("/")
    uri = f"{registry}/{prefix}/$1" if prefix else f"{registry}/$1"
    repo = f"{git_base_url}/{owner_repo}"
    return (
        "# imagebump demo rules: one push of team/<app> updates two overlays.\n"
        f"- registryURI: {uri}\n"
        f"  githubRepository: {repo}/apps/$1/overlays/staging\n"
        "  env: staging\n"
        "  mode: commit\n"
        f"  provider: {provider}\n"
        "  denyImageTag:\n"
        "    - latest\n"
        f"- registryURI: {uri}\n"
        f"  githubRepository: {repo}/apps/$1/overlays/production\n"
        "  env: production\n"
        "  mode: pr\n"
        f"  provider: {provider}\n"
        "  writeDigest: true\n"
        "  denyImageTag:\n"
        "    - latest\n"
    )

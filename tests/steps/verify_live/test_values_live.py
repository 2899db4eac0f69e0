"""Issue 34, verify-live: which Argo CD Applications deploy a Helm values file (or a helmfile)."""

from __future__ import annotations

import pytest

from steps.verify_live.argocd import deploys_file

REPO = "https://github.com/o/r"


def app(*sources: dict) -> dict:
    return {"spec": {"sources": list(sources)}} if len(sources) > 1 else {"spec": {"source": sources[0]}}


def helm_status(application: dict) -> dict:
    """As Argo CD reports a source it renders with Helm (a Chart.yaml found, no helm: in the spec)."""
    return {**application, "status": {"sourceType": "Helm"}}


def named(application: dict, name: str, namespace: str) -> dict:
    spec = {**application["spec"], "destination": {"namespace": namespace}}
    return {**application, "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(
    ("application", "file", "want"),
    [
        # a Helm chart in Git: its own values file is in its path
        (
            app({"repoURL": REPO, "path": "charts/api", "targetRevision": "main"}),
            "charts/api/values.yaml",
            None,
        ),
        # helm.valueFiles relative to the path
        (
            app(
                {
                    "repoURL": REPO + ".git",
                    "path": "charts/api",
                    "helm": {"valueFiles": ["../../env/prod.yaml"]},
                }
            ),
            "env/prod.yaml",
            None,
        ),
        # the common multi-source pattern: chart from a Helm repository, values from Git via $values
        (
            app(
                {
                    "repoURL": "https://charts.example.com",
                    "chart": "api",
                    "targetRevision": "1.2.0",
                    "helm": {"valueFiles": ["$values/charts/api/values-prod.yaml"]},
                },
                {"repoURL": "git@github.com:o/r.git", "targetRevision": "HEAD", "ref": "values"},
            ),
            "charts/api/values-prod.yaml",
            1,
        ),
        # a plugin source (helmfile) whose path contains the file
        (
            app({"repoURL": REPO, "path": "deploy", "plugin": {"name": "helmfile"}}),
            "deploy/helmfile.yaml",
            None,
        ),
        # a chart found by Argo CD (Chart.yaml, no helm: in the spec): its values.yaml
        (
            helm_status(app({"repoURL": REPO, "path": "charts/api"})),
            "charts/api/values.yaml",
            None,
        ),
        # valueFiles with Argo CD's build variables (newEnv) and a glob
        (
            named(
                app(
                    {
                        "repoURL": REPO,
                        "path": "charts/api",
                        "helm": {
                            "valueFiles": ["values-$ARGOCD_APP_NAME.yaml", "env/${ARGOCD_APP_NAMESPACE}.yaml"]
                        },
                    }
                ),
                "api-prod",
                "prod",
            ),
            "charts/api/env/prod.yaml",
            None,
        ),
        (
            app({"repoURL": REPO, "path": "charts/api", "helm": {"valueFiles": ["overrides/*.yaml"]}}),
            "charts/api/overrides/prod.yaml",
            None,
        ),
        (
            app({"repoURL": REPO, "path": "charts/api", "helm": {"valueFiles": ["v-[a-c]?[^x].y*ml"]}}),
            "charts/api/v-bzz.yaml",
            None,
        ),
    ],
)
def test_an_application_deploys_the_values_file(application: dict, file: str, want) -> None:
    assert deploys_file(application, REPO, file, "main", True) == want


@pytest.mark.parametrize(
    ("application", "file"),
    [
        (app({"repoURL": REPO, "path": "charts/web"}), "charts/api/values.yaml"),  # another chart
        (app({"repoURL": "https://github.com/o/other", "path": "charts/api"}), "charts/api/values.yaml"),
        (app({"repoURL": REPO, "path": "charts/api", "targetRevision": "release"}), "charts/api/values.yaml"),
        (
            app(
                {
                    "repoURL": "https://charts.example.com",
                    "chart": "api",
                    "helm": {"valueFiles": ["$values/charts/api/values-prod.yaml"]},
                },
                {"repoURL": "https://github.com/o/other", "ref": "values"},  # $values from another repository
            ),
            "charts/api/values-prod.yaml",
        ),
        (
            app(
                {
                    "repoURL": "https://charts.example.com",
                    "chart": "api",
                    "helm": {"valueFiles": ["$values/charts/api/values-staging.yaml"]},
                },
                {"repoURL": REPO, "ref": "values"},
            ),
            "charts/api/values-prod.yaml",
        ),
        # a chart with a values file per environment: staging's Application does not deploy
        # production's file beside the chart, though it is inside its path (Helm reads values.yaml
        # and the valueFiles listed, nothing else)
        (
            app({"repoURL": REPO, "path": "charts/api", "helm": {"valueFiles": ["values-staging.yaml"]}}),
            "charts/api/values-prod.yaml",
        ),
        (helm_status(app({"repoURL": REPO, "path": "charts/api"})), "charts/api/values-prod.yaml"),
        (
            {
                **app(
                    {"repoURL": REPO, "path": "charts/api"},
                    {"repoURL": REPO, "path": "charts/worker", "helm": {"valueFiles": ["v.yaml"]}},
                ),
                "status": {"sourceTypes": ["Helm", "Helm"]},
            },
            "charts/api/values-prod.yaml",
        ),
        # a glob does not cross a directory (Go's filepath.Match)
        (
            app({"repoURL": REPO, "path": "charts/api", "helm": {"valueFiles": ["*.yaml"]}}),
            "charts/api/overrides/prod.yaml",
        ),
        # a malformed glob matches nothing (Go's filepath.Match: ErrBadPattern), never a traceback
        (
            app(
                {
                    "repoURL": REPO,
                    "path": "charts/api",
                    "helm": {"valueFiles": ["[z-a].yaml", "[.yaml", "x\\"]},
                }
            ),
            "charts/api/b.yaml",
        ),
        # a $ref of another repository is never read as a path of this one
        (
            app(
                {"repoURL": REPO, "path": "charts/api", "helm": {"valueFiles": ["$other/values.yaml"]}},
                {"repoURL": "https://github.com/o/other", "ref": "other"},
            ),
            "values.yaml",
        ),
    ],
)
def test_an_application_that_does_not_deploy_it(application: dict, file: str) -> None:
    assert deploys_file(application, REPO, file, "main", True) is False

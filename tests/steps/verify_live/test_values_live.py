"""Issue 34, verify-live: which Argo CD Applications deploy a Helm values file (or a helmfile)."""

from __future__ import annotations

import pytest

from steps.verify_live.argocd import deploys_file

REPO = "https://github.com/o/r"


def app(*sources: dict) -> dict:
    return {"spec": {"sources": list(sources)}} if len(sources) > 1 else {"spec": {"source": sources[0]}}


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
    ],
)
def test_an_application_that_does_not_deploy_it(application: dict, file: str) -> None:
    assert deploys_file(application, REPO, file, "main", True) is False

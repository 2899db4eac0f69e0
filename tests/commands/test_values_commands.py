"""Issue 34 from the command line: ``imagebump set-image --values`` and ``imagebump explain`` on
rules that name a Helm values file or a helmfile release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagebump.cli import main

ECR = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
VALUES = (
    "# api chart\nimage:\n  registry: " + ECR + "\n  repository: team/api  # pushed by CI\n  tag: 1.4.1\n"
    '  digest: ""\nsidecar:\n  image: ' + ECR + "/team/api:1.4.1\n"
)


@pytest.fixture()
def values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "values.yaml"
    path.write_text(VALUES)
    return path


def test_set_image_values_sets_every_place_and_says_which(values: Path, capsys) -> None:
    assert main(["set-image", "--values", "values.yaml", f"{ECR}/team/api:1.20"]) == 0
    out = capsys.readouterr().out
    assert "image.tag" in out and "sidecar.image" in out and "1.4.1 → 1.20" in out
    assert values.read_text() == VALUES.replace("tag: 1.4.1", 'tag: "1.20"').replace("api:1.4.1", "api:1.20")


def test_set_image_values_already_current_writes_nothing(values: Path, capsys) -> None:
    before = values.stat().st_mtime_ns
    assert main(["set-image", "--values", "values.yaml", f"{ECR}/team/api:1.4.1"]) == 0
    assert "already current" in capsys.readouterr().out
    assert values.stat().st_mtime_ns == before and values.read_text() == VALUES


def test_set_image_values_image_not_there_exits_1(values: Path, capsys) -> None:
    assert main(["set-image", "--values", "values.yaml", f"{ECR}/team/web:1.0"]) == 1
    assert f"{ECR}/team/api" in capsys.readouterr().err
    assert values.read_text() == VALUES


def test_set_image_values_refusal_exits_2_nothing_written(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "secrets.yaml"
    text = f"image:\n  repository: {ECR}/team/api\n  tag: 1.0.0\nsops:\n  version: 3.7.1\n"
    path.write_text(text)
    assert main(["set-image", "--values", "secrets.yaml", f"{ECR}/team/api:1.0.1"]) == 2
    assert "SOPS" in capsys.readouterr().err
    assert path.read_text() == text


def test_set_image_values_keys(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "values.yaml"
    path.write_text(f'image: "{ECR}/search/es"\nimageTag: "8.5.1"\n')
    argv = ["set-image", "--values", "values.yaml", f"{ECR}/search/es:8.6.0"]
    assert main([*argv, "--values-key", "repository=image", "--values-key", "tag=imageTag"]) == 0
    assert path.read_text() == f'image: "{ECR}/search/es"\nimageTag: "8.6.0"\n'
    assert main([*argv, "--values-key", "colour=x"]) == 2


def test_explain_shows_the_values_file_and_helmfile_targets(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        f"- registryURI: {ECR}/team/$1\n  githubRepository: https://github.com/acme/deploy/charts/$1\n"
        "  valuesFile: values-prod.yaml\n  env: prod\n"
        f"- registryURI: {ECR}/team/$1\n  githubRepository: https://github.com/acme/deploy\n"
        "  helmfile: {file: /helmfile.yaml, release: $1, environment: staging}\n  env: staging\n"
    )
    assert main(["explain", "--rules", str(rules), f"{ECR}/team/api:1.4.2"]) == 0
    out = json.loads(capsys.readouterr().out)
    prod, staging = out["targets"]
    assert (prod["values_file"], prod["path"]) == ("charts/api/values-prod.yaml", "charts/api")
    assert staging["helmfile"] == {"file": "helmfile.yaml", "release": "api", "environment": "staging"}

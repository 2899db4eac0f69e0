"""Issue 34 end to end, no mocks: a push updates a Helm values file (commit) and a helmfile
release's values (a PR branch) through ``imagebump run --local``'s pieces (moto → EventBridge → SQS →
local sensor → the rendered WorkflowTemplate → a real git remote), and ``imagebump reconcile`` moves
values-file targets from behind to current."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from imagebump.local import builders
from imagebump.local.demo_repo import MANIFESTS_REPO, manifests_files
from imagebump.local.drive import digest_of, push_image, run_until_done
from imagebump.local.outcome import target_results
from imagebump.local.world import World, build_world
from tests.fixtures import ecr_clock

pytestmark = pytest.mark.slow

VALUES_FILE = "charts/api/values-staging.yaml"
HELMFILE = "deploy/helmfile.yaml"
HELM_VALUES = "deploy/overrides/api/values.prod.yaml"


def files(image: str) -> dict[str, str]:
    registry, _, repository = image.partition("/")
    return manifests_files(image) | {
        VALUES_FILE: (
            "# staging values of the api chart\n"
            "image:\n"
            f"  registry: {registry}\n"
            f"  repository: {repository}\n"
            "  tag: 1.4.1  # set by imagebump\n"
            '  digest: ""\n'
            "replicaCount: 2\n"
        ),
        HELMFILE: (
            "environments:\n  prod: {}\n---\nreleases:\n  - name: api\n    chart: ./charts/api\n"
            "    values:\n      - overrides/api/values.{{ .Environment.Name }}.yaml\n"
        ),
        HELM_VALUES: f"image:\n  repository: {image}\n  tag: 1.4.0\n",
    }


def rules(world: World) -> str:
    prefix = world.repository.rsplit("/", 1)[0]
    uri = f"{world.registry}/{prefix}/$1"
    repo = f"{world.git.base_url}/{MANIFESTS_REPO}"
    return (
        f"- registryURI: {uri}\n  githubRepository: {repo}/charts/$1\n  valuesFile: values-staging.yaml\n"
        "  env: staging\n  mode: commit\n  provider: local\n"
        f"- registryURI: {uri}\n  githubRepository: {repo}\n"
        "  helmfile: {file: /deploy/helmfile.yaml, release: $1, environment: prod}\n"
        "  env: production\n  mode: pr\n  provider: local\n"
    )


@pytest.fixture()
def world(moto, tmp_path: Path, monkeypatch):
    with build_world(tmp_path, moto=moto, files=files, rules=rules) as w:
        monkeypatch.setenv("IMAGEBUMP_GIT_TOKEN", w.token)
        monkeypatch.delenv("IMAGEBUMP_GIT_READ_TOKEN", raising=False)
        monkeypatch.setenv("AWS_REGION", w.region)
        yield w


def test_a_push_commits_a_values_file_and_proposes_a_helmfile_release(world: World) -> None:
    event_id = push_image(world, "1.4.2")

    report = run_until_done(world, 1, timeout=90, visibility_timeout=3)

    assert not report.timed_out
    result = next(o for o in report.outcomes if o.event_id == event_id).result
    assert result.phase == "Succeeded", [(n.name, n.message) for n in result.nodes if n.phase != "Succeeded"]
    by_env = {t.env: t for t in target_results(result)}
    assert (by_env["staging"].action, by_env["production"].action) == ("committed", "pr-created")
    digest = digest_of(world, "1.4.2")
    after = world.read(VALUES_FILE)
    assert after == files(f"{world.registry}/{world.repository}")[VALUES_FILE].replace(
        "tag: 1.4.1", "tag: 1.4.2"
    ).replace('digest: ""', f'digest: "{digest}"')
    assert (
        world.read(HELM_VALUES) == files(f"{world.registry}/{world.repository}")[HELM_VALUES]
    )  # pr: main kept
    proposed = yaml.safe_load(world.read(HELM_VALUES, by_env["production"].branch))
    assert proposed["image"]["tag"] == "1.4.2"


def sweep(world: World, capsys) -> dict:
    """``imagebump reconcile --apply`` as a user runs it; its JSON report."""
    from imagebump.cli import main

    code = main(
        ["reconcile", "--rules", str(world.rules_path), "--endpoint-url", world.moto.endpoint_url, "--apply"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_reconcile_moves_values_targets_from_behind_to_current(world: World, capsys) -> None:
    name = world.repository
    ecr_clock.advance()
    digest = builders.digest_for(f"{world.stack_name}/{name}:1.4.3")
    world.client("ecr").put_image(
        repositoryName=name,
        imageManifest=builders.image_manifest(digest),
        imageTag="1.4.3",
        imageDigest=digest,
    )  # no event: a lost push

    first = sweep(world, capsys)
    assert {t["env"]: t["state"] for t in first["targets"]} == {"staging": "behind", "production": "behind"}
    assert "tag: 1.4.3  # set by imagebump" in world.read(VALUES_FILE)
    second = sweep(world, capsys)
    assert {t["env"]: t["state"] for t in second["targets"]} == {
        "staging": "current",
        "production": "proposed",
    }
    assert second["submitted"] == 0


def test_push_to_live_through_a_multi_source_values_application(moto, tmp_path: Path) -> None:
    """verify-live on a values file: the chart from a Helm repository, the values from Git through a
    ``ref: values`` source (``$values/…``), against the simulated Argo CD."""
    from imagebump.local.argocd_sim import ArgoCDSimulator, application
    from tests.fakes.kube import FakeKube, FakeKubeServer

    kube = FakeKube()
    with build_world(tmp_path, moto=moto, files=files, rules=rules) as world, FakeKubeServer(kube) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig", context="sim")
        world.set_live("sim", "60s", kubeconfig=str(kubeconfig))
        world.set_env_config({"IMAGEBUMP_LIVE_POLL_SECONDS": "0.1"})
        app = application("api-helm", world.manifests_url, "")
        app["spec"].pop("source")
        app["spec"]["sources"] = [
            {
                "repoURL": "https://charts.example.com",
                "chart": "api",
                "targetRevision": "1.2.0",
                "helm": {"valueFiles": [f"$values/{VALUES_FILE}"]},
            },
            {"repoURL": world.manifests_url, "targetRevision": "HEAD", "ref": "values"},
        ]
        kube.seed(app)
        sim = ArgoCDSimulator(kube, git_token=world.token, poll=0.05)
        sim.reconcile_once()
        with sim:
            push_image(world, "1.4.2")
            report = run_until_done(world, 1, timeout=120, visibility_timeout=5)
        (outcome,) = report.outcomes
        by_env = {t.env: t for t in target_results(outcome.result)}
        staging = by_env["staging"]
        assert staging.action == "committed" and staging.live == "live", staging.live_outputs
        assert ":1.4.2" in staging.live_outputs["image"] or "@sha256:" in staging.live_outputs["image"]


def test_holds_and_pins_on_values_files(moto, tmp_path: Path) -> None:
    """A ``# imagebump:hold`` on the image's mapping holds it; ``valuesKeys`` naming another
    repository pins it: nothing is written to either file."""
    pinned_file = "charts/api/values-dr.yaml"

    def held_files(image: str) -> dict[str, str]:
        out = files(image)
        out[VALUES_FILE] = out[VALUES_FILE].replace(
            "image:\n", "image:  # imagebump:hold until the QA sign-off\n"
        )
        out[pinned_file] = f"image: {image}-dr\nimageTag: 1.4.1\n"
        return out

    def held_rules(world: World) -> str:
        prefix = world.repository.rsplit("/", 1)[0]
        uri = f"{world.registry}/{prefix}/$1"
        repo = f"{world.git.base_url}/{MANIFESTS_REPO}"
        return (
            f"- registryURI: {uri}\n  githubRepository: {repo}/charts/$1\n  valuesFile: values-staging.yaml\n"
            "  env: staging\n  mode: commit\n  provider: local\n"
            f"- registryURI: {uri}\n  githubRepository: {repo}/charts/$1\n  valuesFile: values-dr.yaml\n"
            "  valuesKeys: {repository: image, tag: imageTag}\n  env: dr\n  mode: commit\n  provider: local\n"
        )

    with build_world(tmp_path, moto=moto, files=held_files, rules=held_rules) as world:
        before = {f: world.read(f) for f in (VALUES_FILE, pinned_file)}
        push_image(world, "1.4.2")
        report = run_until_done(world, 1, timeout=90, visibility_timeout=3)
        (outcome,) = report.outcomes
        by_env = {t.env: t for t in target_results(outcome.result)}
        assert by_env["staging"].decision == "held" and "QA sign-off" in by_env["staging"].reason
        assert by_env["dr"].decision == "pinned"
        assert {f: world.read(f) for f in before} == before


def test_reconcile_quotes_a_tag_helm_reads_as_a_number(moto, tmp_path: Path, capsys, monkeypatch) -> None:
    """``tag: 1.10`` written plain is the number 1.1 to Helm: the chart runs ``api:1.1`` while the
    file seems to say 1.10. With 1.10 the newest image, the sweep calls both targets ``behind`` (not
    ``current``), writes the tag quoted on the commit target and proposes it quoted on the PR
    branch; the next sweep finds them ``current`` and ``proposed``."""

    def plain_files(image: str) -> dict[str, str]:
        out = files(image)
        out[VALUES_FILE] = out[VALUES_FILE].replace("tag: 1.4.1", "tag: 1.10")
        out[HELM_VALUES] = out[HELM_VALUES].replace("tag: 1.4.0", "tag: 1.10")
        return out

    with build_world(tmp_path, moto=moto, files=plain_files, rules=rules) as world:
        monkeypatch.setenv("IMAGEBUMP_GIT_TOKEN", world.token)
        monkeypatch.delenv("IMAGEBUMP_GIT_READ_TOKEN", raising=False)
        monkeypatch.setenv("AWS_REGION", world.region)
        ecr_clock.advance()
        digest = builders.digest_for(f"{world.stack_name}/{world.repository}:1.10")
        world.client("ecr").put_image(
            repositoryName=world.repository,
            imageManifest=builders.image_manifest(digest),
            imageTag="1.10",
            imageDigest=digest,
        )

        first = sweep(world, capsys)
        assert {t["env"]: t["state"] for t in first["targets"]} == {
            "staging": "behind",
            "production": "behind",
        }
        assert yaml.safe_load(world.read(VALUES_FILE))["image"]["tag"] == "1.10"  # a string now
        assert 'tag: "1.10"' in world.read(VALUES_FILE)
        second = sweep(world, capsys)
        assert {t["env"]: t["state"] for t in second["targets"]} == {
            "staging": "current",
            "production": "proposed",
        }
        assert second["submitted"] == 0

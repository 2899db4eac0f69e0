"""The shared builders (ECR events, put_events entries, kustomizations) and the outcome decoder.

Pure functions, checked against the real event samples copied into tests/testdata/events/ and
against ``kubectl kustomize``-free expectations; the decoder against executor results built from
the executor's own result types (no process runs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from imagebump.local import builders, outcome
from steps.domain.events import parse_event
from steps.domain.models import Image
from workflows.local.results import NodeResult, WorkflowResult

EVENTS = Path(__file__).resolve().parents[1] / "testdata" / "events"


@pytest.mark.parametrize(("sample", "tag"), [("push.json", "1.4.2"), ("push-digest-only.json", None)])
def test_the_push_event_has_the_real_shape(sample, tag) -> None:
    real = json.loads((EVENTS / sample).read_text())
    built = builders.ecr_push_event(
        real["detail"]["repository-name"],
        real["detail"]["image-digest"],
        tag,
        account=real["account"],
        region=real["region"],
        event_id=real["id"],
        when=real["time"],
    )
    assert built == real
    assert sorted(built) == sorted(real) and sorted(built["detail"]) == sorted(real["detail"])


def test_a_built_push_parses_as_an_image_and_skips_are_skipped() -> None:
    digest = builders.digest_for("team/api:2.0.0")
    assert digest.startswith("sha256:") and len(digest) == 71
    image = parse_event(json.dumps(builders.ecr_push_event("team/api", digest, "2.0.0")))
    assert (image.repository, image.tag, image.digest) == ("team/api", "2.0.0", digest)
    for kwargs in ({"action": "DELETE"}, {"result": "FAILURE"}):
        skipped = parse_event(json.dumps(builders.ecr_push_event("team/api", digest, "2.0.0", **kwargs)))
        assert type(skipped).__name__ == "Skip"


def test_event_bridge_entry_round_trips_the_detail() -> None:
    event = builders.ecr_push_event("team/api", builders.digest_for("x"), "1.0", account="111122223333")
    entry = builders.event_bridge_entry(event)
    assert entry["Source"] == "aws.ecr" and entry["DetailType"] == "ECR Image Action"
    assert json.loads(entry["Detail"]) == event["detail"]
    assert entry["Resources"] == ["arn:aws:ecr:us-west-2:111122223333:repository/team/api"]


def test_image_manifests_differ_per_digest() -> None:
    a, b = (json.loads(builders.image_manifest(builders.digest_for(n))) for n in "ab")
    assert a["schemaVersion"] == 2 and a["config"]["digest"] != b["config"]["digest"]


def test_kustomization_text() -> None:
    text = builders.kustomization([("r/api", "1.0"), ("r/web", "2.0")], namespace="prod", header="hi")
    assert text.startswith("# hi\n")
    doc = yaml.safe_load(text)
    assert doc == {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": "prod",
        "resources": ["../../base"],
        "images": [{"name": "r/api", "newTag": "1.0"}, {"name": "r/web", "newTag": "2.0"}],
    }
    assert "images" not in yaml.safe_load(builders.kustomization(resources=["deployment.yaml"]))


def test_kustomization_entries_with_every_field() -> None:
    digest = builders.digest_for("r/api:1.10")
    entries = [
        {"name": "api", "newName": "r/api", "newTag": "1.10", "digest": digest},
        {"digest": digest, "name": "web", "newTag": None},  # kustomize's field order, None left out
    ]
    text = builders.kustomization(entries)
    assert text.endswith(
        f'images:\n- name: api\n  newName: r/api\n  newTag: "1.10"\n  digest: {digest}\n'
        f"- name: web\n  digest: {digest}\n"
    )
    assert yaml.safe_load(text)["images"][0]["newTag"] == "1.10"
    with pytest.raises(ValueError, match="newtag"):
        builders.kustomization([{"name": "api", "newtag": "1"}])


# --- the outcome decoder --------------------------------------------------------------------------
def _node(name: str, template: str, phase: str = "Succeeded", **outputs: str) -> NodeResult:
    return NodeResult(name=name, template=template, phase=phase, outputs=outputs, duration=0.5, attempts=1)


TARGETS = json.dumps(
    [{"env": "staging", "path": "a", "repo_url": "r"}, {"env": "production", "path": "b", "repo_url": "r"}]
)


def _result(*nodes: NodeResult, phase: str = "Succeeded") -> WorkflowResult:
    return WorkflowResult("wf", phase, list(nodes), duration=3.21)


@pytest.mark.parametrize(
    ("nodes", "phase", "expected"),
    [
        pytest.param(
            [
                _node("wf.resolve", "resolve-image", targets=TARGETS),
                _node("wf.update-target(0).edit", "edit-kustomize", decision="update"),
                _node(
                    "wf.update-target(0).commit",
                    "commit-pr",
                    action="committed",
                    **{"commit-sha": "abcdef12"},
                ),
                _node("wf.update-target(1).edit", "edit-kustomize", decision="current"),
                _node("wf.update-target(1).commit", "commit-pr", phase="Skipped"),
            ],
            "Succeeded",
            "event 13cde686… team/api:1.4.2 → 2 targets: staging committed abcdef1, production unchanged  (3.2s)",
            id="both",
        ),
        pytest.param(
            [
                _node("wf.resolve", "resolve-image", targets=TARGETS),
                _node("wf.update-target(0).edit", "edit-kustomize", decision="current"),
                _node("wf.update-target(0).commit", "commit-pr", phase="Skipped"),
                _node("wf.update-target(1).edit", "edit-kustomize", decision="update"),
                _node(
                    "wf.update-target(1).commit",
                    "commit-pr",
                    action="branch-taken",
                    **{"pr-url": "https://github.example/o/r/pull/7", "branch": "imagebump/x"},
                ),
            ],
            "Succeeded",
            "event 13cde686… team/api:1.4.2 → 2 targets: staging unchanged, "
            "production branch-taken https://github.example/o/r/pull/7  (3.2s)",
            id="branch-taken",
        ),
        pytest.param(
            [_node("wf.resolve", "resolve-image", targets="[]", reason="no rule for team/api")],
            "Succeeded",
            "event 13cde686… team/api:1.4.2 → no targets: no rule for team/api  (3.2s)",
            id="no-target",
        ),
        pytest.param(
            [],
            "Failed",
            "event 13cde686… team/api:1.4.2 → failed  (3.2s)",
            id="not-image-update",
        ),
    ],
)
def test_progress_line(nodes, phase, expected) -> None:
    event = json.loads((EVENTS / "push.json").read_text())
    assert outcome.progress_line(event, _result(*nodes, phase=phase)) == expected
    from imagebump.commands import run  # `run --local` prints the same line: this very function

    assert run.progress_line is outcome.progress_line and run.printable is outcome.printable


def test_target_nodes_belong_to_their_target_only() -> None:
    result = _result(
        _node("wf.update-target(1).edit", "edit-kustomize"),
        _node("wf.update-target(11).edit", "edit-kustomize", decision="x"),
    )
    assert outcome.target_nodes(result, 1)["edit-kustomize"].outputs == {}
    assert outcome.target_nodes(result, 11)["edit-kustomize"].outputs == {"decision": "x"}


def test_target_results_and_failure_details() -> None:
    result = _result(
        _node("wf.resolve", "resolve-image", targets=TARGETS),
        _node("wf.update-target(0).edit", "edit-kustomize", decision="update"),
        _node("wf.update-target(0).commit", "commit-pr", action="pr-created", branch="imagebump/x"),
        _node("wf.update-target(1).edit", "edit-kustomize", phase="Failed"),
        phase="Failed",
    )
    got = outcome.target_results(result)
    assert [(t.env, t.action, t.branch, t.phase) for t in got] == [
        ("staging", "pr-created", "imagebump/x", "Succeeded"),
        ("production", "", "", "Failed"),
    ]
    assert outcome.failure_details(result) == ["edit-kustomize [production] (failed, 1 attempt): "]


DIGEST = "sha256:" + "0123456789abcdef" * 4
REGISTRY = "123456789012.dkr.ecr.us-west-2.amazonaws.com"


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        pytest.param("1.4.2", f"{REGISTRY}/team/api:1.4.2@{DIGEST}", id="tagged"),
        pytest.param(None, f"{REGISTRY}/team/api@{DIGEST}", id="digest-only"),
    ],
)
def test_resolved_image_is_a_reference_docker_pull_takes(tag, expected) -> None:
    """The demo report's image: a push without a tag reads ``REPO@DIGEST``, never ``REPO:None@…``."""
    image = Image(account="123456789012", region="us-west-2", repository="team/api", tag=tag, digest=DIGEST)
    resolve = _node("wf.resolve", "resolve-image", image=image.model_dump_json(), targets="[]")
    assert outcome.resolved_image(_result(resolve)) == expected
    assert (
        outcome.resolved_image(_result(_node("wf.resolve", "resolve-image", image="not json"))) == "not json"
    )


def test_progress_line_of_a_push_without_a_tag_shows_the_short_digest() -> None:
    event = builders.ecr_push_event("team/api", DIGEST, None)
    line = outcome.progress_line(event, _result(phase="Succeeded"))
    assert " team/api@sha256:0123456789ab… → " in line


@pytest.mark.parametrize(
    ("outputs", "expected"),
    [
        ({"result": "live", "seconds-push-to-healthy": "41.25"}, " → live 41.2s after the push"),
        (
            {"result": "idle", "seconds-push-to-synced": "12.5"},
            " → idle: synced 12.5s after the push, no Pod",
        ),
        ({"result": "mismatch", "message": "argocd/api runs x"}, " → mismatch: argocd/api runs x"),
    ],
    ids=["live", "idle", "mismatch"],
)
def test_the_progress_line_names_verify_lives_outcome(outputs: dict, expected: str) -> None:
    """Issue 30 item 7: ``idle`` shows on the progress line like the other outcomes."""
    nodes = {
        "verify-live": NodeResult(
            name="verify-live", template="verify-live", phase="Succeeded", outputs=outputs
        )
    }
    assert outcome.live_words(nodes).startswith(expected)

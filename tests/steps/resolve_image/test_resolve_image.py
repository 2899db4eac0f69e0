"""resolve-image against moto's ECR server on 127.0.0.1 (and once through Hera's runner)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imagebump.local import builders
from imagebump.local.moto import MotoServer
from steps.aws import ecr
from steps.domain.errors import ConfigError, InvalidEventError, RulesError, TransientError
from steps.resolve_image.step import ResolveImageOutput, resolve, run
from steps.rules import load_rules

ROOT = Path(__file__).resolve().parents[3]
EVENTS = ROOT / "tests" / "testdata" / "events"
ACCOUNT = "123456789012"  # moto's default account
REGISTRY = f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com"
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64


class Registry:
    """One fresh ECR repository per test in the session's moto server."""

    def __init__(self, moto: MotoServer) -> None:
        self.client = moto.client("ecr")
        self.repository = f"team/app-{uuid.uuid4().hex[:8]}"
        self.client.create_repository(repositoryName=self.repository)

    def push(self, tag: str | None, digest: str) -> None:
        kwargs = {"imageTag": tag} if tag else {}
        self.client.put_image(
            repositoryName=self.repository,
            imageManifest=builders.image_manifest(digest),
            imageDigest=digest,
            **kwargs,
        )

    def push_index(self, tag: str | None, digest: str, manifests: list[str], size: int = 1000) -> None:
        """An OCI image index listing ``manifests`` (what ``docker buildx`` pushes, tagged or not);
        its bytes name its digest, as another digest means other bytes in ECR."""
        kwargs = {"imageTag": tag} if tag else {}
        self.client.put_image(
            repositoryName=self.repository,
            imageManifest=json.dumps(
                {
                    "schemaVersion": 2,
                    "mediaType": "application/vnd.oci.image.index.v1+json",
                    "manifests": [
                        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d, "size": size}
                        for d in manifests
                    ],
                    "annotations": {"n": digest},
                }
            ),
            imageManifestMediaType="application/vnd.oci.image.index.v1+json",
            imageDigest=digest,
            **kwargs,
        )

    def event(self, tag: str | None = "1.4.2", digest: str | None = D1, *, account: bool = True) -> str:
        body = json.loads((EVENTS / ("push.json" if account else "push-no-account.json")).read_text())
        body["detail"]["repository-name"] = self.repository
        for key, value in (("image-tag", tag), ("image-digest", digest)):
            if value is None:
                body["detail"].pop(key, None)
            else:
                body["detail"][key] = value
        return json.dumps(body)


RULES = f"""\
- registryURI: {REGISTRY}/team/$1
  githubRepository: https://github.com/o/gitops/apps/$1/overlays/staging
  env: staging
  denyImageTag: [latest]
- registryURI: {REGISTRY}/team/$1:v$2.*
  githubRepository: https://github.com/o/gitops/apps/$1/overlays/prod-v$2
  env: production
  order: semver
  writeDigest: true
"""


@pytest.fixture()
def registry(moto: MotoServer) -> Registry:
    return Registry(moto)


@pytest.fixture()
def env(moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outputs_dir: Path) -> Path:
    """ECR reached through boto3's own AWS_ENDPOINT_URL; the rules file in tmp_path."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    monkeypatch.setenv("IMAGEBUMP_RULES_FILE", str(rules))
    return outputs_dir


def outputs(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in (directory / "parameters").iterdir()}


def test_push_event_yields_targets_with_ecr_digest_and_push_time(registry: Registry, env: Path) -> None:
    registry.push("v1.4.2", D1)
    out = run(event=registry.event(tag="v1.4.2"))
    assert out.reason == ""
    assert [(t.env, t.path) for t in out.targets] == [
        ("staging", f"apps/{registry.repository[5:]}/overlays/staging"),
        ("production", f"apps/{registry.repository[5:]}/overlays/prod-v1"),
    ]
    for t in out.targets:
        assert (t.tag, t.digest, t.image) == ("v1.4.2", D1, f"{REGISTRY}/{registry.repository}")
        assert isinstance(t.pushed_at, datetime)
        assert t.pushed_at != datetime(2026, 11, 16, 1, 54, 34, tzinfo=UTC)  # ECR's time, not the event's
        assert t.event_id == "13cde686-328b-6117-af20-0e5566167481"
    assert out.targets[1].settings.write_digest is True and out.targets[1].settings.order == "semver"
    files = outputs(env)
    assert json.loads(files["targets"])[0]["repo_url"] == "https://github.com/o/gitops"
    assert files["event-id"] == "13cde686-328b-6117-af20-0e5566167481"
    assert files["reason"] == ""
    assert json.loads(files["image"])["digest"] == D1


def test_a_gate_wait_target_is_left_to_the_gate_and_its_decision_is_waiting(
    registry: Registry, env: Path
) -> None:
    """issue 35: a target of a rule with promoteAfter and gate: wait gets no commit or PR from the
    push; the push's decision for it is ``waiting`` (the ``gated`` output the decision metric counts)."""
    (env.parent / "rules.yaml").write_text(
        RULES.replace(
            "  writeDigest: true\n", "  writeDigest: true\n  promoteAfter: {env: staging, soak: 30m}\n"
        )
    )
    registry.push("v1.4.2", D1)
    out = run(event=registry.event(tag="v1.4.2"))
    assert [t.env for t in out.targets] == ["staging"]
    assert [(g.decision, g.env, g.waiting_on, g.rule) for g in out.gated] == [
        ("waiting", "production", "staging", 1)
    ]
    assert json.loads(outputs(env)["gated"]) == [
        {"decision": "waiting", "env": "production", "rule": 1, "waiting_on": "staging"}
    ]


def test_moved_tag_is_skipped(registry: Registry, env: Path) -> None:
    registry.push("1.4.2", D1)
    registry.push("1.4.2", D2)  # the tag moves before our event is handled
    out = run(event=registry.event(tag="1.4.2", digest=D1))
    assert out.targets == []
    assert out.reason == f"tag 1.4.2 moved from {D1} to {D2} since the push; a newer event handles it"
    assert json.loads(outputs(env)["targets"]) == []


def test_missing_account_is_filled_from_ecr(registry: Registry, env: Path) -> None:
    registry.push("1.4.2", D1)
    out = run(event=registry.event(account=False))
    assert out.image is not None and out.image.account == ACCOUNT
    assert [t.image for t in out.targets] == [f"{REGISTRY}/{registry.repository}"]


def _recording(client) -> list[str]:
    """The names of the ECR operations ``client`` calls from now on (botocore's own event hook)."""
    calls: list[str] = []
    client.meta.events.register("before-call.ecr", lambda model, **_: calls.append(model.name))
    return calls


def test_missing_account_costs_no_extra_ecr_call_when_the_image_is_there(registry: Registry) -> None:
    """moto's EventBridge omits ``account``: the image's own description names its registry, so the
    event path still makes one ECR call; only an image gone from ECR asks for the repository too."""
    registry.push("1.4.2", D1)
    calls = _recording(registry.client)
    rules = load_rules(RULES)

    found = resolve(event=registry.event(account=False), rules=rules, client=registry.client)
    assert calls == ["DescribeImages"]
    assert found.image is not None and found.image.account == ACCOUNT and len(found.targets) == 1

    calls.clear()
    gone = resolve(event=registry.event(tag="9.9.9", account=False), rules=rules, client=registry.client)
    assert calls == ["DescribeImages", "DescribeRepositories"]
    assert gone.targets == [] and f"registry {ACCOUNT}" in gone.reason


def test_digest_only_push(registry: Registry, env: Path) -> None:
    registry.push(None, D1)
    out = run(event=registry.event(tag=None))
    assert [(t.env, t.tag, t.digest) for t in out.targets] == [("staging", None, D1)]
    assert [s.rule for s in out.skipped] == [1] and "digest-only" in out.skipped[0].reason


def test_the_manifests_of_a_multi_platform_push_are_not_images_to_deploy(
    registry: Registry, env: Path
) -> None:
    """``docker buildx`` pushes each platform's manifest (and its attestation manifest) untagged,
    then the image index with the tag, in the same second; ECR sends a push event for each. The
    untagged ones are parts of the index: only the index's push yields targets."""
    children = ["sha256:" + c * 64 for c in "cde"]  # amd64, arm64, an attestation manifest
    for child in children:
        registry.push(None, child)
    index = "sha256:" + "f" * 64
    registry.push_index("1.5.0", index, children)
    for child in children:
        out = run(event=registry.event(tag=None, digest=child))
        assert out.targets == [] and "image index" in out.reason and index in out.reason
    out = run(event=registry.event(tag="1.5.0", digest=index))
    assert [(t.env, t.tag, t.digest) for t in out.targets] == [("staging", "1.5.0", index)]
    registry.push(None, D2)  # a digest-only push no index lists is still an image to deploy
    assert [t.digest for t in run(event=registry.event(tag=None, digest=D2)).targets] == [D2]


def test_image_gone_from_ecr_is_a_skip_for_an_event(registry: Registry, env: Path) -> None:
    out = run(event=registry.event(tag="9.9.9"))
    assert out.targets == []
    assert "not in ECR" in out.reason and "9.9.9" in out.reason


def test_event_with_denied_tag_explains(registry: Registry, env: Path) -> None:
    registry.push("latest", D1)
    out = run(event=registry.event(tag="latest"))
    assert out.targets == []
    assert "2 rule(s) refused it" in out.reason
    assert "denied" in out.skipped[0].reason


def test_manual_tag_only_gets_digest_from_ecr(registry: Registry, env: Path) -> None:
    registry.push("1.4.2", D2)
    out = run(image=f"{REGISTRY}/{registry.repository}:1.4.2")
    assert [(t.tag, t.digest) for t in out.targets] == [("1.4.2", D2)]
    assert out.event_id == ""


def test_manual_digest_only(registry: Registry, env: Path) -> None:
    registry.push("1.4.2", D1)
    out = run(image=f"{REGISTRY}/{registry.repository}@{D1}")
    assert [(t.tag, t.digest) for t in out.targets] == [(None, D1)]


@pytest.mark.parametrize(
    ("ref_suffix", "fragment"),
    [
        pytest.param(":0.0.1", "is not in ECR", id="missing-tag"),
        pytest.param(f"@{D2}", "is not in ECR", id="missing-digest"),
        pytest.param(f":1.4.2@{D2}", f"points to {D1}, not {D2}", id="tag-digest-disagree"),
    ],
)
def test_manual_image_problems_are_config_errors(
    registry: Registry, env: Path, ref_suffix: str, fragment: str
) -> None:
    registry.push("1.4.2", D1)
    with pytest.raises(ConfigError) as info:
        run.__wrapped__(image=f"{REGISTRY}/{registry.repository}{ref_suffix}")  # type: ignore[attr-defined]
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        pytest.param({}, ConfigError, "got neither", id="neither"),
        pytest.param({"event": "{}", "image": "x"}, ConfigError, "got both", id="both"),
    ],
)
def test_neither_or_both_inputs(env: Path, kwargs: dict, error: type, fragment: str) -> None:
    with pytest.raises(error) as info:
        run.__wrapped__(**kwargs)  # type: ignore[attr-defined]
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        pytest.param({"event": "[1]"}, "wrong-type", id="bad-event"),
        pytest.param({"image": "nginx:1"}, "not-ecr-reference", id="bad-image"),
    ],
)
def test_bad_input(env: Path, kwargs: dict, reason: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        run.__wrapped__(**kwargs)  # type: ignore[attr-defined]
    assert info.value.reason == reason


def test_bad_input_exits_2_through_step_entry(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        run()
    assert info.value.code == 2
    assert "exactly one of" in capsys.readouterr().err


def test_missing_repository_is_a_config_error(env: Path) -> None:
    with pytest.raises(ConfigError) as info:
        run.__wrapped__(image=f"{REGISTRY}/team/nothing-here:1")  # type: ignore[attr-defined]
    assert info.value.reason == "repository-missing"
    assert "'team/nothing-here'" in str(info.value)  # the repository to check


def test_missing_rules_file(env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("IMAGEBUMP_RULES_FILE", str(tmp_path / "absent.yaml"))
    with pytest.raises(RulesError) as info:
        run.__wrapped__(image=f"{REGISTRY}/team/x:1")  # type: ignore[attr-defined]
    assert (info.value.reason, info.value.field) == ("no-file", "IMAGEBUMP_RULES_FILE")


@pytest.mark.parametrize("name", ["delete.json", "scan.json", "push-failed.json", "replication.json"])
def test_non_push_events_skip_without_ecr(env: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens: ECR must not be asked
    out = run(event=(EVENTS / name).read_text())
    assert out.targets == [] and out.image is None and out.reason
    assert out.event_id.startswith("13cde686")


def test_no_matching_rule(registry: Registry, env: Path, moto: MotoServer) -> None:
    client = moto.client("ecr")
    name = f"other/app-{uuid.uuid4().hex[:8]}"
    client.create_repository(repositoryName=name)
    client.put_image(
        repositoryName=name, imageManifest=builders.image_manifest(D1), imageDigest=D1, imageTag="1"
    )
    out = resolve(image=f"{REGISTRY}/{name}:1", rules=load_rules(RULES), client=client)
    assert out.targets == [] and "no rule matches its repository" in out.reason


def test_ecr_unreachable_is_transient() -> None:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "ecr",
        region_name="us-west-2",
        endpoint_url="http://127.0.0.1:9",
        config=Config(retries={"max_attempts": 1}, connect_timeout=1),
    )
    with pytest.raises(TransientError) as info:
        ecr.describe_image("team/api", region="us-west-2", tag="1", client=client)
    assert info.value.reason == "unreachable"


def test_repository_account(registry: Registry) -> None:
    assert ecr.repository_account(registry.repository, region="us-west-2", client=registry.client) == ACCOUNT


def test_describe_image_returns_none_for_unknown_tag(registry: Registry) -> None:
    assert (
        ecr.describe_image(registry.repository, region="us-west-2", tag="nope", client=registry.client)
        is None
    )
    registry.push("1", D1)
    found = ecr.describe_image(registry.repository, region="us-west-2", digest=D1, client=registry.client)
    assert found is not None and found.digest == D1 and found.tags == ("1",) and found.pushed_at is not None


def test_through_hera_runner(registry: Registry, moto: MotoServer, tmp_path: Path) -> None:
    registry.push("1.4.2", D1)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    args = tmp_path / "args.json"
    args.write_text(
        json.dumps([{"name": "event", "value": registry.event()}, {"name": "image", "value": ""}])
    )
    out_dir = tmp_path / "outputs"
    proc = subprocess.run(
        [sys.executable, "-m", "hera.workflows.runner", "-e", "steps.resolve_image.step:run", str(args)],
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "hera__outputs_directory": str(out_dir),
            "IMAGEBUMP_RULES_FILE": str(rules),
            "AWS_ENDPOINT_URL": moto.endpoint_url,
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    files = outputs(out_dir)
    assert set(files) >= {"image", "targets", "skipped", "reason", "event-id"}
    targets = json.loads(files["targets"])
    assert [(t["env"], t["tag"], t["digest"]) for t in targets] == [("staging", "1.4.2", D1)]
    assert files["event-id"] == "13cde686-328b-6117-af20-0e5566167481"
    assert (
        ResolveImageOutput.model_validate_json(proc.stdout.strip().splitlines()[-1]).targets[0].digest == D1
    )


def test_through_hera_runner_bad_input_exits_2(tmp_path: Path) -> None:
    args = tmp_path / "args.json"
    args.write_text(json.dumps([{"name": "event", "value": ""}, {"name": "image", "value": ""}]))
    proc = subprocess.run(
        [sys.executable, "-m", "hera.workflows.runner", "-e", "steps.resolve_image.step:run", str(args)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "hera__outputs_directory": str(tmp_path / "o")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert "exactly one of" in proc.stderr and "Traceback" not in proc.stderr


def test_an_artifact_about_another_image_is_not_an_image_to_deploy() -> None:
    """A signature, SBOM or attestation pushed as an OCI referrer (ECR's subjectManifestDigest)."""
    from steps.aws.ecr import EcrImage
    from steps.domain.models import Image
    from steps.resolve_image.decide import decide
    from steps.rules import load_rules

    pushed = Image(account="123456789012", region="us-west-2", repository="team/api", digest=D2)
    artifact = EcrImage(digest=D2, subject=D1)
    out = decide(pushed, manual=False, account="123456789012", found=artifact, rules=load_rules(RULES))
    assert out.targets == [] and "artifact about" in out.reason and D1 in out.reason


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    manifests=st.integers(min_value=1, max_value=4),
    indexes=st.lists(st.tuples(st.booleans(), st.sets(st.integers(0, 3))), max_size=3),
    order=st.randoms(use_true_random=False),
)
def test_no_event_of_a_multi_platform_push_pins_an_overlay_to_one_of_its_manifests(
    moto: MotoServer, env: Path, manifests: int, indexes: list[tuple[bool, set[int]]], order
) -> None:
    """Over every mix of untagged manifests and indexes (tagged or not) listing any of them, handled
    in any order: a manifest a tagged index lists yields no targets; every other push (a tagged index,
    an untagged index, a manifest no tagged index lists) is an image to deploy, at its own digest."""
    registry = Registry(moto)
    children = [builders.digest_for(f"m{i}:{uuid.uuid4()}") for i in range(manifests)]
    for child in children:
        registry.push(None, child)
    pushed: list[tuple[str | None, str]] = [(None, child) for child in children]
    listed_by_tagged: set[str] = set()
    for n, (tagged, members) in enumerate(indexes):
        digest = builders.digest_for(f"i{n}:{uuid.uuid4()}")
        listed = [children[m] for m in sorted(members) if m < manifests]
        tag = f"1.5.{n}" if tagged else None
        registry.push_index(tag, digest, listed, size=9)
        pushed.append((tag, digest))
        if tagged:
            listed_by_tagged.update(listed)
    order.shuffle(pushed)
    for tag, digest in pushed:
        out = run(event=registry.event(tag=tag, digest=digest))
        if digest in listed_by_tagged:
            assert out.targets == [], (tag, digest)
        else:
            assert [(t.tag or None, t.digest) for t in out.targets] == [(tag, digest)], out.reason

"""``imagebump explain``: one JSON object, no AWS access, exit 0 or 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from imagebump.cli import main

ROOT = Path(__file__).resolve().parents[2]
TESTDATA = ROOT / "tests" / "testdata"
IN_HOUSE = TESTDATA / "rules" / "in-house.yaml"
EXAMPLE = TESTDATA / "rules" / "example.yaml"
EVENTS = TESTDATA / "events"
REG = "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com"
USW2 = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
DIGEST = "sha256:7f5b2640fe6fb4f46592dfd3410c4a79dac4f89e4782432e0378abcd12340000"


@pytest.fixture(autouse=True)
def no_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Explain must not reach AWS: point every endpoint at a closed port."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict | None, str]:
    code = main(["explain", *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def test_image_with_two_targets(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = explain(capsys, "--rules", str(IN_HOUSE), f"{REG}/hoge/fuga/api/web:abc1234")
    assert code == 0
    assert set(out) >= {"image", "targets", "skipped"}
    assert out["image"]["repository"] == "hoge/fuga/api/web"
    assert [
        {k: t[k] for k in ("repo_url", "path", "env", "image", "tag", "digest", "mode", "rule")}
        for t in out["targets"]
    ] == [
        {
            "repo_url": "https://github.com/AAA/BBB",
            "path": "services/fuga/api/web/overlays/stg",
            "env": "staging",
            "image": f"{REG}/hoge/fuga/api/web",
            "tag": "abc1234",
            "digest": None,
            "mode": "pr",
            "rule": 0,
        },
        {
            "repo_url": "https://github.com/AAA/AAAAAA",
            "path": "services/api/web/abc1234/overlays/stg",
            "env": "staging",
            "image": f"{REG}/hoge/fuga/api/web",
            "tag": "abc1234",
            "digest": None,
            "mode": "pr",
            "rule": 1,
        },
    ]
    assert out["skipped"] == []


def test_every_rule_without_target_is_listed_with_reason(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = explain(capsys, "--rules", str(IN_HOUSE), f"{REG}/team/web:abc1234")
    assert code == 0
    assert out["targets"] == []
    assert out["skipped"] == [
        {"rule": 0, "reason": f"repository team/web does not match {REG}/hoge/$1/$2/$3"},
        {"rule": 1, "reason": f"repository team/web does not match {REG}/hoge/fuga/$1/$2"},
    ]


def test_digest_given_is_shown(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = explain(capsys, "--rules", str(IN_HOUSE), f"{REG}/hoge/a/b/c:abc1234@{DIGEST}")
    assert code == 0 and out["targets"][0]["digest"] == DIGEST


def test_event_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = explain(capsys, "--rules", str(EXAMPLE), "--event", str(EVENTS / "push.json"))
    assert code == 0
    assert [(t["rule"], t["path"], t["digest"], t["mode"]) for t in out["targets"]] == [
        (1, "apps/api/overlays/prod", DIGEST, "pr")
    ]
    assert {s["rule"] for s in out["skipped"]} == {0, 2}
    assert out["image"]["event_id"] == "13cde686-328b-6117-af20-0e5566167481"


def test_event_without_account_matches_by_region(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = explain(capsys, "--rules", str(EXAMPLE), "--event", str(EVENTS / "push-no-account.json"))
    assert code == 0
    assert out["image"]["account"] == ""
    assert [t["image"] for t in out["targets"]] == [f"{USW2}/team/api"]


@pytest.mark.parametrize(
    "name", ["delete.json", "scan.json", "push-failed.json", "replication.json", "update-storage-class.json"]
)
def test_skip_kind_event(capsys: pytest.CaptureFixture[str], name: str) -> None:
    code, out, _ = explain(capsys, "--rules", str(IN_HOUSE), "--event", str(EVENTS / name))
    assert code == 0
    assert out["image"] is None and out["targets"] == [] and out["skipped"] == []
    assert out["reason"]


def test_event_from_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((EVENTS / "push.json").read_bytes())))
    code, out, _ = explain(capsys, "--rules", str(EXAMPLE), "--event", "-")
    assert code == 0 and len(out["targets"]) == 1


def test_examples_at_repository_root_agree(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = explain(
        capsys,
        "--rules",
        str(ROOT / "examples" / "rules.yaml"),
        "--event",
        str(ROOT / "examples" / "push-event.json"),
    )
    assert code == 0 and len(out["targets"]) == 1


def _bad_json(tmp: Path) -> list[str]:
    (tmp / "bad.json").write_text("{not json")
    return ["--rules", str(IN_HOUSE), "--event", str(tmp / "bad.json")]


def _bad_rules(tmp: Path) -> list[str]:
    (tmp / "rules.yaml").write_text("- registryURI: x\n  githubRepository: https://github.com/o/r\n")
    return ["--rules", str(tmp / "rules.yaml"), f"{REG}/a/b:1"]


def _big_event(tmp: Path) -> list[str]:
    (tmp / "big.json").write_text("{" + " " * 300_000 + "}")
    return ["--rules", str(IN_HOUSE), "--event", str(tmp / "big.json")]


BAD = [
    pytest.param(lambda t: ["--rules", str(IN_HOUSE)], "exactly one of IMAGE and --event", id="neither"),
    pytest.param(
        lambda t: ["--rules", str(IN_HOUSE), "--event", str(EVENTS / "push.json"), f"{REG}/a/b:1"],
        "exactly one of",
        id="both",
    ),
    pytest.param(
        lambda t: ["--rules", str(IN_HOUSE), "nginx:latest"], "not an ECR image reference", id="bad-image"
    ),
    pytest.param(
        lambda t: ["--rules", str(IN_HOUSE), f"{REG}/Hoge/a:1"],
        "not a valid ECR repository name",
        id="bad-repo",
    ),
    pytest.param(
        lambda t: ["--rules", str(t / "missing.yaml"), f"{REG}/a/b:1"], "does not exist", id="missing-rules"
    ),
    pytest.param(
        lambda t: ["--rules", str(IN_HOUSE), "--event", str(t / "missing.json")],
        "cannot read event file",
        id="missing-event",
    ),
    pytest.param(_bad_json, "not JSON", id="event-not-json"),
    pytest.param(_big_event, "over the 262144-byte limit", id="event-too-big"),
    pytest.param(_bad_rules, "rule 0: registryURI", id="bad-rules"),
    pytest.param(lambda t: [f"{REG}/a/b:1"], "--rules", id="no-rules-argument"),
]


@pytest.mark.parametrize(("make_args", "fragment"), BAD)
def test_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path, make_args, fragment: str) -> None:
    args = make_args(tmp_path)
    try:
        code = main(["explain", *args])
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert fragment in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2, err


def test_needs_no_aws_credentials(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(key, raising=False)
    shutil.copy(EVENTS / "push.json", tmp_path / "e.json")
    code, out, _ = explain(capsys, "--rules", str(EXAMPLE), "--event", str(tmp_path / "e.json"))
    assert code == 0 and out["targets"]


def test_example_rules_are_the_test_copy() -> None:
    assert (ROOT / "examples" / "rules.yaml").read_text() == EXAMPLE.read_text()
    assert (ROOT / "examples" / "push-event.json").read_text() == (EVENTS / "push.json").read_text()

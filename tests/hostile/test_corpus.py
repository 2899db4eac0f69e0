"""The hostile-input corpus (issue 8, item 2): every entry point meets input meant to break it.

Each case expects a clear error (the right class from :mod:`steps.domain.errors`, a message that names
the problem) or a skip with a reason — never a traceback, never a hang, never a write to Git, and
an invalid SQS message is dead-lettered, never silently deleted. The tables are in
:mod:`tests.hostile.cases`; this module holds the checks:

- SQS bodies → :func:`steps.domain.events.parse_event` (and the CLI: exit 2, no traceback);
- manual references → :func:`steps.domain.events.parse_image_reference`;
- rules files → :func:`steps.rules.load_rules` (catastrophic regexes refused at load, or matching
  bounded — checked in a child process with a generous deadline, so a hang fails instead of
  blocking the suite);
- kustomizations → :mod:`steps.kustomize` (YAML bombs in a child process likewise);
- repositories → ``edit_kustomize.run`` / ``commit_pr.run`` against the real git fixture, the
  remote's refs compared before and after;
- the local sensor with moto's SQS: a handful of hostile bodies end in the DLQ.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
import threading
import uuid
from pathlib import Path

import pytest

from steps import kustomize, rules
from steps.commit_pr import step as commit_pr
from steps.domain import events
from steps.domain.errors import ConfigError, ImagebumpError
from steps.domain.models import ImagesEntry, Plan, Target
from steps.edit_kustomize import step as edit_kustomize
from tests.fixtures.hang_guard import run_guarded
from tests.hostile import cases
from tests.hostile.cases import (
    EVENT_CASES,
    KUSTOMIZATION,
    KUSTOMIZATION_CASES,
    OVERLAY,
    REDOS_PATTERNS,
    REFERENCE_CASES,
    REGISTRY,
    REPO_CASES,
    RULE,
    RULES_CASES,
    Error,
)

ROOT = Path(__file__).resolve().parents[2]
#: A deadline for work that must be fast (milliseconds when linear); exponential work takes hours.
BOUND_SECONDS = 30

edit_step = edit_kustomize.run.__wrapped__  # the bare steps: raise our errors instead of exiting
commit_step = commit_pr.run.__wrapped__


def check(fn, expected, *args, **kwargs):
    """Call ``fn`` and check the outcome against an :class:`Error` or :class:`Skipped` expectation."""
    if isinstance(expected, Error):
        with pytest.raises(expected.cls, match=expected.pattern or None) as info:
            fn(*args, **kwargs)
        assert isinstance(info.value, ImagebumpError)
        assert "Traceback" not in str(info.value)
        wanted = {"reason": expected.reason, "field": expected.field, "rule": expected.rule}
        wanted = {key: value for key, value in wanted.items() if value not in ("", None)}
        assert {key: getattr(info.value, key) for key in wanted} == wanted, str(info.value)
        return info.value
    result = fn(*args, **kwargs)
    assert isinstance(result, events.Skip), f"expected a skip, got {result!r}"
    assert result.reason and re.search(expected.pattern, result.reason), result.reason
    return result


def run_bounded(code: str, payload: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (reads ``PAYLOAD``, a path) in a child interpreter; fail if it outlives the deadline."""
    data = tmp_path / "payload.txt"
    data.write_text(payload, encoding="utf-8")
    program = f"import sys\nfrom pathlib import Path\nPAYLOAD = Path({str(data)!r})\n" + textwrap.dedent(code)
    return run_guarded(
        program, what="unbounded work on hostile input (see the case id)", timeout=BOUND_SECONDS, cwd=tmp_path
    )


def test_corpus_size() -> None:
    total = (
        len(EVENT_CASES)
        + len(REFERENCE_CASES)
        + len(RULES_CASES)
        + len(REDOS_PATTERNS)
        + len(KUSTOMIZATION_CASES)
        + len(REPO_CASES)
        + len(cases.RULES_BOMB_CASES)
        + len(cases.SET_IMAGE_LINK_CASES)
    )
    assert total >= 40
    assert events.MAX_BODY_BYTES == cases.MAX_BODY_BYTES


# -- SQS bodies ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "expected"), EVENT_CASES)
def test_event_body(body, expected) -> None:
    check(events.parse_event, expected, body)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        p
        for p in EVENT_CASES
        if isinstance(p.values[1], Error)
        and p.id
        in {
            "body-not-json",
            "body-oversized-bytes",
            "type-array",
            "repo-shell-subst",
            "tag-newline-injection",
            "repo-rtl-override",
            "body-invalid-utf8",
        }
    ],
)
def test_cli_explain_refuses_hostile_events(body, expected, tmp_path, capsys) -> None:
    from imagebump.cli import main

    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(RULE)
    event_file = tmp_path / "event.json"
    event_file.write_bytes(body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass"))

    code = main(["explain", "--rules", str(rules_file), "--event", str(event_file)])

    _out, err = capsys.readouterr()
    assert code == 2, err
    assert err.startswith("imagebump explain: error: ") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.strip() != "imagebump explain: error:", err
    if expected.pattern:
        assert re.search(expected.pattern, err), err


# -- manual references ---------------------------------------------------------------------------


@pytest.mark.parametrize(("ref", "expected"), REFERENCE_CASES)
def test_image_reference(ref, expected) -> None:
    check(events.parse_image_reference, expected, ref)


@pytest.mark.parametrize("ref", [f"{REGISTRY}/team/api:$(rm -rf /)", f"{REGISTRY}/ｔｅａｍ/api:1.0"])
def test_cli_explain_refuses_hostile_references(ref, tmp_path, capsys) -> None:
    from imagebump.cli import main

    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(RULE)
    assert main(["explain", "--rules", str(rules_file), ref]) == 2
    err = capsys.readouterr().err
    assert err.startswith("imagebump explain: error: ") and "Traceback" not in err


# -- rules files -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), RULES_CASES)
def test_rules_file(text, expected, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # a `touch MARKER` payload would land here
    error = check(rules.load_rules, expected, text)
    assert not (tmp_path / "MARKER").exists()
    # a message names the problem in a line or two: never an expanded alias, never a token
    assert len(str(error)) < 600 and "lol, lol" not in str(error) and "ghp_" not in str(error), str(error)


@pytest.mark.parametrize(("text", "expected"), cases.RULES_BOMB_CASES)
def test_rules_alias_bomb_is_refused_cheaply(text, expected, tmp_path) -> None:
    proc = run_bounded(
        """
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        from steps.rules import RulesError, load_rules
        try:
            load_rules(PAYLOAD.read_text())
        except RulesError as exc:
            import json
            print(json.dumps({"reason": exc.reason, "rule": exc.rule, "field": exc.field, "message": str(exc)}))
        """,
        text,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    refused = json.loads(proc.stdout)
    assert (refused["reason"], refused["rule"], refused["field"]) == (
        expected.reason,
        expected.rule,
        expected.field,
    )
    message = refused["message"]
    assert len(message) < 600 and "lol" not in message, message


@pytest.mark.parametrize("text", next(p for p in RULES_CASES if p.id == "rules-python-object").values[:1])
def test_cli_explain_refuses_hostile_rules(text, tmp_path, capsys) -> None:
    from imagebump.cli import main

    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(text)
    assert main(["explain", "--rules", str(rules_file), f"{REGISTRY}/team/api:1.0"]) == 2
    err = capsys.readouterr().err
    assert "not valid YAML" in err and "Traceback" not in err
    assert not (tmp_path / "MARKER").exists()


@pytest.mark.parametrize("pattern", REDOS_PATTERNS)
def test_catastrophic_regex_is_refused_or_bounded(pattern, tmp_path) -> None:
    """A ReDoS pattern is refused at load, or matching a 128-character near-miss stays fast."""
    text = RULE + f"  allowImageTag: ['regexp:{pattern}']\n"
    try:
        rules.load_rules(text)
    except rules.RulesError as exc:
        assert "rule 0: allowImageTag[0]" in str(exc)
        return
    proc = run_bounded(
        """
        from steps.domain.models import Image
        from steps.rules import load_rules
        ruleset = load_rules(PAYLOAD.read_text())
        for tag in ("a" * 127 + "-", "a" * 64 + "-" + "1" * 63, "a" * 127 + "!"[:0] + "_",
                    "1" * 127 + "_", ("1." * 64)[:127] + "_"):
            ruleset.match(Image(account="123456789012", region="us-west-2", repository="team/api", tag=tag))
        print("bounded")
        """,
        text,
        tmp_path,
    )
    assert proc.returncode == 0 and "bounded" in proc.stdout, proc.stderr


# -- kustomizations (pure) ----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "name", "tag", "expected"), KUSTOMIZATION_CASES)
def test_kustomization_edit(text, name, tag, expected) -> None:
    check(kustomize.set_image, expected, text, name, tag=tag)


def test_kustomization_yaml_bomb_is_refused_or_bounded(tmp_path) -> None:
    """Billion laughs beside ``images:``: reading and editing must not expand 10⁹ aliases."""
    proc = run_bounded(
        """
        from steps.domain.errors import KustomizationError
        from steps.kustomize import get_image, set_image
        text = PAYLOAD.read_text()
        try:
            get_image(text, "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api")
            set_image(text, "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api", tag="2.0")
            print("edited")
        except KustomizationError as exc:
            print("refused:", exc)
        """,
        cases.BOMB_KUSTOMIZATION,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(("edited", "refused:")), proc.stdout


def test_kustomization_python_tag_is_never_constructed(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = cases.PYTHON_TAG_KUSTOMIZATION
    name = f"{REGISTRY}/team/api"
    assert kustomize.get_image(text, name).newTag == "1.0"
    try:
        result = kustomize.set_image(text, name, tag="2.0")
    except ConfigError as exc:
        assert "kustomization.yaml" in str(exc)
    else:
        assert "!!python/object/apply:os.system" in result and "newTag: '2.0'" in result
    assert not (tmp_path / "MARKER").exists()


def test_a_large_kustomization_is_read_and_edited_in_linear_time(tmp_path) -> None:
    """27,000 entries (~1 MiB): reading, editing and adding once took 91 s each; bounded like a bomb."""
    assert len(cases.LARGE_KUSTOMIZATION.encode()) <= kustomize.MAX_KUSTOMIZATION_BYTES
    proc = run_bounded(
        """
        from steps.kustomize import get_image, set_image
        text = PAYLOAD.read_text()
        assert get_image(text, "team/app13500").newTag == "1.0"
        edited = set_image(text, "team/app13500", tag="2.0")
        assert edited.count("newTag: '2.0'") == 1 and len(edited) == len(text)
        added = set_image(text, "team/new", tag="2.0", add=True)
        assert added.startswith(text) and added.endswith("- name: team/new\\n  newTag: \\"2.0\\"\\n")
        print("done")
        """,
        cases.LARGE_KUSTOMIZATION,
        tmp_path,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr[-2000:]


@pytest.mark.parametrize(("target", "code"), cases.SET_IMAGE_LINK_CASES)
def test_set_image_cli_and_symbolic_links(target, code, tmp_path, capsys) -> None:
    from imagebump.cli import main

    repo = tmp_path / "gitops"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shared = repo / "shared" / "kustomization.yaml"
    shared.parent.mkdir()
    shared.write_text(KUSTOMIZATION)
    overlay = repo / OVERLAY
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").symlink_to(target)
    real = (overlay / "kustomization.yaml").resolve()
    before = real.read_bytes() if real.is_file() else None

    assert main(["set-image", str(overlay), f"{REGISTRY}/team/api:2.0"]) == code

    err = capsys.readouterr().err
    assert (overlay / "kustomization.yaml").is_symlink() and os.readlink(
        overlay / "kustomization.yaml"
    ) == target
    if code:
        assert "symbolic link" in err and "Traceback" not in err
        assert (real.read_bytes() if real.is_file() else None) == before
    else:
        assert shared.read_text() == KUSTOMIZATION.replace("'1.0'", "'2.0'")


def test_set_image_cli_refuses_a_symlinked_multi_document_file(tmp_path, capsys) -> None:
    from imagebump.cli import main

    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(KUSTOMIZATION + "---\n" + KUSTOMIZATION)
    before = (overlay / "kustomization.yaml").read_bytes()
    assert main(["set-image", str(overlay), f"{REGISTRY}/team/api:2.0"]) == 2
    err = capsys.readouterr().err
    assert "YAML documents" in err and "Traceback" not in err
    assert (overlay / "kustomization.yaml").read_bytes() == before


# -- repositories: edit-kustomize and commit-pr against a real remote ---------------------------------


@pytest.fixture()
def step_env(git_env, outputs_dir, monkeypatch, moto):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    monkeypatch.setenv("AWS_REGION", cases.REGION)
    return git_env


def _refs(remote) -> str:
    return remote.git("for-each-ref", "--format=%(refname) %(objectname)")


def _target(remote, *, path: str = OVERLAY, tag: str | None = "2.0", **extra) -> Target:
    fields = {"order": "none", "mode": "commit", "provider": "local", **extra}
    return Target(
        rule=0, repo_url=remote.url, path=path, env="prod", image=f"{REGISTRY}/team/api", tag=tag, **fields
    )


@pytest.mark.parametrize(("files", "symlinks", "path", "expected"), REPO_CASES)
def test_repository(files, symlinks, path, expected, make_remote, step_env) -> None:
    remote = make_remote(
        {"README.md": "# gitops\n", "apps/api/base/kustomization.yaml": "resources: []\n", **files}
    )
    if symlinks:
        remote.commit_files({}, "hostile links", symlinks=symlinks)
    before = _refs(remote)

    error = check(edit_step, expected, _target(remote, path=path))

    assert "edit-kustomize-" not in str(error)  # no scratch paths in messages
    assert _refs(remote) == before


def _plan(file: str, tag: str = "2.0", digest: str | None = None) -> Plan:
    return Plan(
        changed=True,
        decision="update",
        reason="hostile",
        file=file,
        image_name=f"{REGISTRY}/team/api",
        old=ImagesEntry(name=f"{REGISTRY}/team/api", newTag="1.0"),
        new=ImagesEntry(name=f"{REGISTRY}/team/api", newTag=tag, digest=digest),
        base_commit="",
        base_branch="",
    )


COMMIT_CASES = [
    pytest.param(
        {},
        _plan(f"{OVERLAY}/kustomization.yaml", tag="$(rm -rf /)"),
        {},
        Error(ConfigError, "invalid tag"),
        id="commit-shell-tag",
    ),
    pytest.param(
        {},
        _plan(f"{OVERLAY}/kustomization.yaml", tag="1.0\nimages: []"),
        {},
        Error(ConfigError, "invalid tag"),
        id="commit-newline-tag",
    ),
    pytest.param(
        {},
        _plan(f"{OVERLAY}/kustomization.yaml", digest="sha256:" + "Z" * 64),
        {},
        Error(ConfigError, "invalid digest"),
        id="commit-bad-digest",
    ),
    pytest.param(
        {},
        _plan("../../etc/passwd"),
        {},
        Error(ConfigError, "relative path inside the repository"),
        id="commit-file-dot-dot",
    ),
    pytest.param(
        {},
        _plan("/etc/passwd"),
        {},
        Error(ConfigError, "relative path inside the repository"),
        id="commit-file-absolute",
    ),
    pytest.param(
        {f"{OVERLAY}/kustomization.yaml": "/etc/passwd"},
        _plan(f"{OVERLAY}/kustomization.yaml"),
        {},
        Error(ConfigError, "symbolic link"),
        id="commit-file-symlink-out",
    ),
    pytest.param(
        {OVERLAY: "/etc"},
        _plan(f"{OVERLAY}/kustomization.yaml"),
        {},
        Error(ConfigError, "symbolic link"),
        id="commit-overlay-symlink-out",
    ),
    pytest.param(
        {},
        _plan(f"{OVERLAY}/.git/config"),
        {},
        Error(ConfigError, "\\.git|does not exist"),
        id="commit-file-into-dot-git",
    ),
    pytest.param(
        {},
        _plan(f"{OVERLAY}/kustomization.yaml"),
        {"base_branch": "--upload-pack=touch MARKER"},
        Error(ConfigError, "upload-pack|branch"),
        id="commit-branch-option",
    ),
    pytest.param(
        {},
        _plan(f"{OVERLAY}/kustomization.yaml"),
        {"base_branch": "--upload-pack=touch${IFS}MARKER"},
        Error(ConfigError, "upload-pack|branch"),
        id="commit-branch-option-no-space",
    ),
]


@pytest.mark.parametrize(("symlinks", "plan", "extra", "expected"), COMMIT_CASES)
def test_commit_pr(symlinks, plan, extra, expected, make_remote, step_env, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    files = {"README.md": "# gitops\n"}
    if not symlinks:
        files[f"{OVERLAY}/kustomization.yaml"] = KUSTOMIZATION
    remote = make_remote(files)
    if symlinks:
        remote.commit_files({}, "hostile links", symlinks=symlinks)
    before = _refs(remote)

    error = check(commit_step, expected, _target(remote, **extra), plan)

    assert "imagebump-commit-pr-" not in str(error)
    assert step_env not in str(error)  # the token never shows
    assert _refs(remote) == before
    assert not (tmp_path / "MARKER").exists()


def test_huge_kustomization_is_refused(make_remote, step_env) -> None:
    """5 MiB — larger than any real kustomization — is refused by size, before YAML parsing."""
    remote = make_remote({"README.md": "x\n", f"{OVERLAY}/kustomization.yaml": cases.HUGE_KUSTOMIZATION})
    before = _refs(remote)
    with pytest.raises(ConfigError, match=cases.SIZE_PATTERN) as info:
        edit_step(_target(remote))
    assert "kustomization.yaml" in str(info.value)
    assert _refs(remote) == before


# -- the local sensor: hostile bodies are dead-lettered, not dropped ----------------------------------


def test_hostile_bodies_end_in_the_dlq(moto, tmp_path, git_token) -> None:
    """Real template, real executor, moto's SQS with a DLQ: nothing hostile is deleted silently."""
    from sensors.local import LocalSensor
    from workflows.local.executor import LocalExecutor

    sqs = moto.client("sqs")
    name = f"hostile-{uuid.uuid4().hex[:10]}"
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(
        QueueName=name,
        Attributes={
            "VisibilityTimeout": "1",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "1"}),
        },
    )["QueueUrl"]

    def count(url: str) -> int:
        attrs = sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    try:
        expected = len(cases.DLQ_BODIES)
        for body in cases.DLQ_BODIES:
            sqs.send_message(QueueUrl=queue, MessageBody=body)
        # AWS refuses a body over 256 KiB at SendMessage; moto may accept it: then it must be dead-lettered too.
        try:
            sqs.send_message(QueueUrl=queue, MessageBody=cases.event(padding="x" * cases.MAX_BODY_BYTES))
            expected += 1
        except Exception as exc:  # noqa: BLE001 - botocore's ClientError: the queue's own size guard
            assert "size" in str(exc).lower() or "long" in str(exc).lower(), exc
        logs: list[dict] = []
        executor = LocalExecutor(
            ROOT / "manifests" / "workflows" / "image-update.yaml",
            project_root=ROOT,
            secrets={"imagebump-git": {"token": git_token}},
            configmaps={"imagebump-rules": {"rules.yaml": RULE}},
            env={
                "AWS_ENDPOINT_URL": moto.endpoint_url,
                "AWS_REGION": cases.REGION,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
            },
            log=logs.append,
            work_root=tmp_path,
        )
        sensor = LocalSensor(
            queue,
            executor,
            sqs_client=sqs,
            concurrency=2,
            wait_seconds=1,
            visibility_timeout=1,
            heartbeat_seconds=0.5,
            log=logs.append,
        )
        watchdog = threading.Timer(120, sensor.stop)
        watchdog.start()
        try:
            stats = sensor.run(stop_when=lambda s: count(dlq) >= expected or s.skipped + s.succeeded > 0)
        finally:
            watchdog.cancel()
        # let the redrive finish for messages whose visibility just expired
        deleted = [r for r in logs if r.get("event") == "message-deleted"]
        assert deleted == [], f"hostile bodies were deleted instead of dead-lettered: {deleted}"
        assert (stats.succeeded, stats.skipped) == (0, 0)
        assert count(dlq) == expected
        assert count(queue) == 0
        failed = [
            r for r in logs if r.get("event") == "node-finished" and r.get("template") == "resolve-image"
        ]
        assert failed and all(
            r["phase"] == "Failed"
            and r.get("exit_code") == 2
            and "InvalidEventError" in r.get("stderr_tail", "")
            for r in failed
        ), failed
    finally:
        for url in (queue, dlq):
            sqs.delete_queue(QueueUrl=url)

"""The local executor runs hand-written WorkflowTemplates (tests/testdata/executor/) step by step.

Each script template runs as its own ``python -m hera.workflows.runner`` process, so these tests
also cover the runner's argument file and output files. Step functions: ``tests/workflows/stepfns.py``.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from pathlib import Path

import pytest
import yaml

from imagebump.local import builders
from steps.domain.errors import ConfigError
from workflows.local.errors import NOT_SUPPORTED, UnsupportedFeatureError
from workflows.local.executor import LocalExecutor
from workflows.local.sandbox import wait_deleted

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "testdata" / "executor"


@pytest.fixture()
def state(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir()
    return path


@pytest.fixture()
def logs() -> list[dict]:
    return []


def make(name: str, state: Path, logs: list[dict], **kwargs) -> LocalExecutor:
    return LocalExecutor(
        DATA / name,
        project_root=ROOT,
        env={"STEPFNS_STATE_DIR": str(state)},
        log=logs.append,
        work_root=kwargs.pop("work_root", None),
        **kwargs,
    )


def test_fan_out_when_and_skipped_defaults(state: Path, logs: list[dict]) -> None:
    result = make("fanout.yaml", state, logs).run({"names": "a,b,c"}, "fanout-1", event_id="ev-1")

    assert result.phase == "Succeeded", result.message
    assert result.node(".generate").outputs["items"].startswith("[")
    greetings = sorted(n.outputs["greeting"] for n in result.nodes_for("greet"))
    assert greetings == ["hello a", "hello b", "hello c"]
    shouts = {n.name: n for n in result.nodes_for("shout")}
    assert shouts["fanout-1.per-item(1).shout"].phase == "Skipped"
    assert shouts["fanout-1.per-item(1).shout"].outputs == {"loud": "skipped"}
    # the aggregated fan-out output reached the next step, the skipped one by its default
    assert result.node(".summary").outputs["joined"] == "HELLO A,HELLO C,skipped"
    assert {r["event_id"] for r in logs} == {"ev-1"}
    assert {r["workflow"] for r in logs} == {"fanout-1"}
    finished = [r for r in logs if r["event"] == "node-finished"]
    assert all({"node", "phase", "duration"} <= set(r) for r in finished)


def test_retry_with_backoff_until_success(state: Path, logs: list[dict]) -> None:
    result = make("retry.yaml", state, logs).run({"succeed-on": "3"}, "retry-1")

    assert result.phase == "Succeeded", result.message
    node = result.node(".flaky")
    assert (node.attempts, node.outputs["attempt"]) == (3, "3")
    assert [r["delay"] for r in logs if r["event"] == "retry-scheduled"] == [0.1, 0.2]
    failed = [r for r in logs if r["event"] == "attempt-failed"]
    assert [r["exit_code"] for r in failed] == [75, 75]
    assert "attempt 1 failing with 75" in failed[0]["stderr_tail"]


@pytest.mark.parametrize(
    ("params", "attempts"),
    [
        pytest.param({"succeed-on": "9", "code": "2"}, 1, id="config-error-exit-2-not-retried"),
        pytest.param({"succeed-on": "9", "code": "75"}, 4, id="transient-retried-up-to-limit"),
    ],
)
def test_retry_gives_up(state: Path, logs: list[dict], params: dict, attempts: int) -> None:
    result = make("retry.yaml", state, logs).run(params, "retry-2")

    assert result.phase == "Failed"
    node = result.node(".flaky")
    assert node.attempts == attempts
    assert node.exit_code == int(params["code"])
    assert (state / "attempts").read_text() == str(attempts)


def test_active_deadline_kills_the_process(state: Path, logs: list[dict]) -> None:
    result = make("deadline.yaml", state, logs).run({}, "deadline-1")

    assert result.phase == "Failed"
    node = result.node(".sleep")
    assert "activeDeadlineSeconds exceeded" in node.message
    assert node.exit_code == -9  # SIGKILL to the process group
    assert not (state / "sleep-finished").exists()


def test_mutex_serialises_concurrent_workflows(state: Path, logs: list[dict]) -> None:
    executor = make("mutex.yaml", state, logs)
    results = {}

    def go(label: str) -> None:
        results[label] = executor.run({"key": "team-api-prod", "label": label}, f"mutex-{label}")

    threads = [threading.Thread(target=go, args=(label,)) for label in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert {r.phase for r in results.values()} == {"Succeeded"}
    lines = (state / "markers").read_text().splitlines()
    # no interleaving: each start is immediately followed by its own end
    assert len(lines) == 4
    assert [line.split()[0] for line in lines] == ["start", "end", "start", "end"]
    assert lines[0].split()[1] == lines[1].split()[1] and lines[2].split()[1] == lines[3].split()[1]
    assert any(r["event"] == "mutex-acquired" and r["mutex"] == "overlay-team-api-prod" for r in logs)


def test_each_step_has_a_private_fresh_temp_dir(state: Path, logs: list[dict], tmp_path: Path) -> None:
    work_root = tmp_path / "work"
    work_root.mkdir()
    result = make("isolation.yaml", state, logs, work_root=work_root).run({}, "isolation-1")

    assert result.phase == "Succeeded", result.message
    first, second = result.node(".first").outputs, result.node(".second").outputs
    assert first["cwd"] == first["tmpdir"] == first["home"]
    assert first["cwd"] != second["cwd"]
    assert second["sees-other"] == "false"
    assert json.loads(second["listing"]) == ["mounts"]  # only its own staging/tmp, nothing of the first
    wait_deleted()  # the executor deletes step dirs in the background, as pods are garbage-collected
    assert not Path(first["cwd"]).exists() and not Path(second["cwd"]).exists()
    assert list(work_root.iterdir()) == []


def test_env_secrets_and_mounts_are_rewritten_into_the_step(state: Path, logs: list[dict]) -> None:
    executor = make(
        "secrets.yaml",
        state,
        logs,
        secrets={"imagebump-git": {"token": "s3cr3t-token-value"}},
        configmaps={"imagebump-rules": {"rules.yaml": "rules: []\n"}},
    )
    result = executor.run({}, "secrets-1")

    assert result.phase == "Succeeded", result.message
    out = result.node(".show").outputs
    assert out["rules"] == "rules: []\n"
    assert out["rules-file"].endswith("/mounts/etc/imagebump/rules/rules.yaml")
    assert out["token-file-ok"] == "true"
    assert out["outputs-dir"].endswith("/mounts/tmp/hera-outputs")
    keys = set(json.loads(out["env-keys"]))
    assert "IMAGEBUMP_GITHUB_APP_ID" not in keys  # optional ref to a secret that was not given
    assert "STEPFNS_STATE_DIR" in keys and "AWS_SECRET_ACCESS_KEY" not in keys  # only what was passed


def test_secrets_are_redacted_from_stderr_tails(state: Path, logs: list[dict]) -> None:
    executor = make(
        "secrets.yaml",
        state,
        logs,
        secrets={"imagebump-git": {"token": "s3cr3t-token-value"}},
        configmaps={"imagebump-rules": {"rules.yaml": ""}},
    )
    result = executor.run({"fail": "yes"}, "secrets-2")

    assert result.phase == "Failed"
    text = json.dumps(logs) + json.dumps([n.message for n in result.nodes])
    assert "s3cr3t-token-value" not in text
    assert "token is ***" in text


def test_encoded_forms_of_a_secret_are_redacted_from_logs(state: Path, logs: list[dict]) -> None:
    """A step that prints a secret base64-encoded or in an HTTP Basic header (``x-access-token:TOKEN``)
    leaks it as surely as in clear: the executor's logs mask those forms too (steps.runtime.redact's)."""
    token = "s3cr3t-token-value"
    executor = make(
        "secrets.yaml",
        state,
        logs,
        secrets={"imagebump-git": {"token": token}},
        configmaps={"imagebump-rules": {"rules.yaml": ""}},
    )
    result = executor.run({"fail": "yes"}, "secrets-3")

    assert result.phase == "Failed"
    text = json.dumps(logs) + json.dumps([n.message for n in result.nodes])
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    for form in (token, base64.b64encode(token.encode()).decode().rstrip("="), basic.rstrip("=")):
        assert form not in text
    assert "base64 ***" in text and "Authorization: Basic ***" in text


def test_missing_secret_is_refused_at_construction(state: Path, logs: list[dict]) -> None:
    with pytest.raises(ConfigError, match="secret 'imagebump-git'.*secrets="):
        make("secrets.yaml", state, logs, configmaps={"imagebump-rules": {"rules.yaml": ""}})


def test_unknown_workflow_parameter_is_refused(state: Path, logs: list[dict]) -> None:
    with pytest.raises(ConfigError, match="'nope' is not declared"):
        make("retry.yaml", state, logs).run({"nope": "1"}, "retry-x")


def _patched(name: str, patch) -> str:
    doc = yaml.safe_load((DATA / name).read_text())
    patch(doc)
    return yaml.safe_dump(doc)


def _tpl(doc: dict, name: str) -> dict:
    return next(t for t in doc["spec"]["templates"] if t["name"] == name)


UNSUPPORTED = [
    pytest.param(
        lambda d: d["spec"]["templates"].append({"name": "c", "container": {"image": "x"}}),
        "templates[c].container",
        id="container-template",
    ),
    pytest.param(
        lambda d: d["spec"]["templates"].append({"name": "r", "resource": {"action": "create"}}),
        "templates[r].resource",
        id="resource-template",
    ),
    pytest.param(
        lambda d: _tpl(d, "greet")["outputs"].update(artifacts=[{"name": "a", "path": "/tmp/a"}]),
        "templates[greet].outputs.artifacts",
        id="artifacts",
    ),
    pytest.param(
        lambda d: _tpl(d, "main")["steps"][0][0]["arguments"]["parameters"][0].update(
            value="{{workflow.uid}}"
        ),
        "variable {{workflow.uid}}",
        id="unknown-variable",
    ),
    pytest.param(
        lambda d: _tpl(d, "main")["steps"][0][0]["arguments"]["parameters"][0].update(
            value="{{=sprig.upper('a')}}"
        ),
        "expression",
        id="expression-variable",
    ),
    pytest.param(
        lambda d: _tpl(d, "per-item")["steps"][1][0].update(
            when="{{steps.greet.outputs.parameters.flag}} =~ tr.*"
        ),
        "when",
        id="when-regex",
    ),
    pytest.param(
        lambda d: _tpl(d, "greet").update(
            retryStrategy={"limit": 1, "expression": "lastRetry.message == 'x'"}
        ),
        "retryStrategy.expression",
        id="retry-expression",
    ),
    pytest.param(
        lambda d: _tpl(d, "greet").update(synchronization={"semaphores": [{"configMapKeyRef": {}}]}),
        "synchronization.semaphores",
        id="semaphore",
    ),
    pytest.param(lambda d: _tpl(d, "greet")["script"].update(command=["bash"]), "script.command", id="bash"),
    pytest.param(
        lambda d: _tpl(d, "main")["steps"][0][0].update(continueOn={"failed": True}),
        "continueOn",
        id="continueOn",
    ),
]


@pytest.mark.parametrize(("patch", "field"), UNSUPPORTED)
def test_unsupported_features_are_refused(patch, field: str, state: Path, logs: list[dict]) -> None:
    with pytest.raises(UnsupportedFeatureError) as info:
        LocalExecutor(_patched("fanout.yaml", patch), project_root=ROOT, log=logs.append)
    message = str(info.value)
    assert message.startswith(NOT_SUPPORTED)
    assert field in message
    assert isinstance(info.value, ValueError) and isinstance(info.value, ConfigError)


def test_dag_cycle_is_refused(logs: list[dict]) -> None:
    def cycle(doc: dict) -> None:
        tasks = _tpl(doc, "main")["dag"]["tasks"]
        tasks[0]["depends"] = "second"

    with pytest.raises(ConfigError, match="dependency cycle"):
        LocalExecutor(_patched("isolation.yaml", cycle), project_root=ROOT, log=logs.append)


IMAGE_UPDATE = ROOT / "manifests" / "workflows" / "image-update.yaml"


def test_accepts_the_rendered_image_update_template(logs: list[dict]) -> None:
    doc = yaml.safe_load(IMAGE_UPDATE.read_text())
    secrets, configmaps = _references(doc)
    executor = LocalExecutor(
        IMAGE_UPDATE, project_root=ROOT, secrets=secrets, configmaps=configmaps, log=logs.append
    )
    assert "event" in executor.workflow_parameters


def _references(doc: dict) -> tuple[dict, dict]:
    """Dummy values for every Secret/ConfigMap key the template references."""
    secrets: dict[str, dict[str, str]] = {}
    configmaps: dict[str, dict[str, str]] = {}

    def walk(node) -> None:
        if isinstance(node, dict):
            if "secretKeyRef" in node:
                secrets.setdefault(node["secretKeyRef"]["name"], {})[node["secretKeyRef"]["key"]] = "dummy"
            if "configMapKeyRef" in node:
                configmaps.setdefault(node["configMapKeyRef"]["name"], {})[node["configMapKeyRef"]["key"]] = (
                    "dummy"
                )
            if "secretName" in node:
                secrets.setdefault(node["secretName"], {})
            if "configMap" in node and isinstance(node["configMap"], dict) and "name" in node["configMap"]:
                configmaps.setdefault(node["configMap"]["name"], {})
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    return secrets, configmaps


KUSTOMIZATION = builders.kustomization([("123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api", "1.4.1")])


@pytest.mark.slow
def test_runs_the_rendered_image_update_template_end_to_end(moto, make_remote, git_token, logs) -> None:
    """The very YAML a cluster gets: an ECR push becomes a commit (commit mode), no Kubernetes."""
    remote = make_remote(
        {
            "services/api/overlays/staging/kustomization.yaml": KUSTOMIZATION,
            "services/api/base/kustomization.yaml": "resources: []\n",
        }
    )
    ecr = moto.client("ecr")
    repo = f"team/api{uuid.uuid4().hex[:6]}"
    ecr.create_repository(repositoryName=repo)
    digest = builders.digest_for(repo)
    ecr.put_image(
        repositoryName=repo,
        imageManifest=builders.image_manifest(digest),
        imageTag="1.4.2",
        imageDigest=digest,
    )
    account = ecr.describe_repositories(repositoryNames=[repo])["repositories"][0]["registryId"]
    rules = (
        f"- githubRepository: {remote.url}/services/api/overlays/staging\n"
        f"  registryURI: {account}.dkr.ecr.us-west-2.amazonaws.com/{repo}\n"
        f"  imageName: 123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api\n"
        "  env: staging\n  mode: commit\n  provider: local\n"
    )
    event = builders.ecr_push_event(repo, digest, "1.4.2", account=account)
    executor = LocalExecutor(
        IMAGE_UPDATE,
        project_root=ROOT,
        log=logs.append,
        backoff_scale=0.01,
        secrets={"imagebump-git": {"token": git_token}, "imagebump-git-read": {"token": git_token}},
        configmaps={"imagebump-rules": {"rules.yaml": rules}},
        env={
            "AWS_ENDPOINT_URL": moto.endpoint_url,
            "AWS_REGION": "us-west-2",
            "AWS_DEFAULT_REGION": "us-west-2",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        },
    )

    result = executor.run({"event": json.dumps(event)}, "image-update-e2e", event_id=event["id"])

    messages = [(n.name, n.phase, n.message) for n in result.nodes if n.phase != "Succeeded"]
    assert result.phase == "Succeeded", messages
    commit = result.node(".commit-pr")
    assert commit.outputs["action"] == "committed"
    assert "newTag: 1.4.2" in remote.read("services/api/overlays/staging/kustomization.yaml")
    assert git_token not in json.dumps(logs)


def test_step_records_are_forwarded_in_the_one_log_format(state: Path, logs: list[dict]) -> None:
    """A step's JSON lines reach the executor's log as they are (plus workflow, node, attempt), its
    other stderr lines as ``step-stderr`` records; every record has ts, level and component."""
    result = make("logs.yaml", state, logs).run({}, "logs-1", event_id="ev-9")

    assert result.phase == "Succeeded", result.message
    (record,) = [r for r in logs if r.get("logger") == "steps.chatty"]
    assert (record["component"], record["level"], record["message"]) == (
        "step",
        "info",
        "hello from the step",
    )
    assert (record["workflow"], record["node"], record["attempt"], record["event_id"]) == (
        "logs-1",
        "logs-1.chatty",
        1,
        "ev-9",
    )
    (plain,) = [r for r in logs if r.get("event") == "step-stderr"]
    assert (plain["step"], plain["message"]) == ("chatty", "a plain line on stderr")
    for r in logs:
        assert {"ts", "level", "component"} <= set(r), r
        assert r["level"] in ("debug", "info", "warning", "error")
    finished = [r for r in logs if r.get("event") == "node-finished" and r.get("template") == "chatty"]
    assert finished and finished[0]["component"] == "executor" and finished[0]["step"] == "chatty"


@pytest.mark.parametrize("succeed_on", ["1", "9"])
def test_the_exit_handler_runs_after_the_entrypoint_whatever_its_result(
    succeed_on: str, state: Path, logs: list[dict]
) -> None:
    """spec.onExit runs as Argo runs it: after main, succeeded or failed, with {{workflow.status}},
    {{workflow.failures}} and the finished Workflow's nodes (their outputs) to read."""
    result = make("onexit.yaml", state, logs).run({"succeed-on": succeed_on, "code": "2"}, "exit-1")

    seen = json.loads((state / "exit.json").read_text())
    want = "Succeeded" if succeed_on == "1" else "Failed"
    assert result.phase == want, result.message
    assert seen["status"] == seen["phase"] == want
    flaky = seen["nodes"]["exit-1.main.flaky"] if "exit-1.main.flaky" in seen["nodes"] else None
    flaky = flaky or next(n for n in seen["nodes"].values() if n["templateName"] == "flaky")
    assert flaky["phase"] == want
    # Argo's wire format: a JSON string holding the JSON list, the quoted "null" when none failed
    if want == "Succeeded":
        assert seen["failures"] == '"null"'
        assert {"name": "attempt", "value": "1"} in flaky["outputs"]["parameters"]
    else:
        failures = json.loads(json.loads(seen["failures"]))
        assert [f["templateName"] for f in failures] == ["flaky"]
        assert {"displayName", "message", "phase"} <= set(failures[0])
    assert result.node(".onExit").phase == "Succeeded"
    assert result.nodes_for("record")[0].phase == "Succeeded"
    events = [r["event"] for r in logs]
    assert events.index("exit-handler-started") < events.index("workflow-finished")


def test_a_failing_exit_handler_fails_a_workflow_that_succeeded(state: Path, logs: list[dict]) -> None:
    result = make("onexit.yaml", state, logs).run({"exit-fails": "true"}, "exit-2")
    assert result.phase == "Failed"
    assert "exit-handler" in result.message


def test_an_exit_handler_that_names_no_template_is_refused(tmp_path: Path) -> None:
    doc = yaml.safe_load((DATA / "onexit.yaml").read_text())
    doc["spec"]["onExit"] = "nope"
    with pytest.raises(ConfigError, match="onExit"):
        LocalExecutor(yaml.safe_dump(doc), project_root=ROOT)


PARALLEL_GROUP = """\
apiVersion: argoproj.io/v1alpha1
kind: WorkflowTemplate
metadata:
  name: parallel-group
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - name: a
        template: pause
      - name: b
        template: pause
      - name: c
        template: pause
    - - name: after
        template: pause
  - name: pause
    suspend:
      duration: '0'
"""


def test_a_group_runs_its_steps_at_once_on_threads_kept_from_earlier_groups(
    logs: list[dict], thread_starts
) -> None:
    """A group's steps run at once (the first on the caller's thread, the others on threads kept
    for that), and later groups reuse those threads: runs one after another start no more threads
    than one group has siblings (each thread started waits to be scheduled, between one step's end
    and the next one's start; before, every group started its own)."""
    started = thread_starts()
    executor = LocalExecutor(PARALLEL_GROUP, project_root=ROOT, log=logs.append)
    for i in range(5):
        result = executor.run(workflow_name=f"parallel-{i}")
        assert result.phase == "Succeeded", result.message
        assert sorted(n.name for n in result.nodes if n.template == "pause") == [
            f"parallel-{i}.{name}" for name in ("a", "after", "b", "c")
        ]
    assert len(started) <= 2


def test_a_finished_steps_directory_is_deleted_by_a_process_of_its_own(tmp_path: Path, monkeypatch) -> None:
    """A step's directory is deleted in the background by an ``rm`` process at the lowest priority,
    not by the executor's own thread (whose ``rmtree`` held the interpreter while the next step was
    being prepared); every discarded directory is gone once ``wait_deleted`` returns."""
    from workflows.local import sandbox

    on_the_deleter: list[str] = []
    rmtree = sandbox.shutil.rmtree

    def watched(path, *args, **kwargs):
        if threading.current_thread().name == "step-dir-deleter":
            on_the_deleter.append(str(path))
        return rmtree(path, *args, **kwargs)

    monkeypatch.setattr(sandbox.shutil, "rmtree", watched)
    step = tmp_path / "imagebump-step-x"
    (step / "repo" / ".git" / "objects").mkdir(parents=True)
    for i in range(50):
        (step / "repo" / ".git" / "objects" / f"o{i}").write_text("x")
    (step / "link").symlink_to(tmp_path)  # followed by nothing: the link goes, its target stays
    sandbox.discard(str(step))
    sandbox.wait_deleted([str(step)])
    assert not step.exists()
    assert tmp_path.exists()
    assert on_the_deleter == []


def test_the_exit_handler_sees_a_retried_step_in_argos_shape(
    state: Path, logs: list[dict], tmp_path: Path
) -> None:
    """What the exit handler reads is as unkind as Argo's ``status.nodes`` (workflows/local/argo_nodes.py):
    a retried template is a Retry node with the last attempt's phase and outputs, over one node per
    attempt ``NAME(i)``; an attempt that failed holds the outputs' defaults; ids are ``WORKFLOW-fnv32a(name)``
    and the nodes come sorted by id, not in the order they ran."""
    doc = yaml.safe_load((DATA / "onexit.yaml").read_text())
    flaky = next(t for t in doc["spec"]["templates"] if t["name"] == "flaky")
    flaky["retryStrategy"] = {"limit": "3", "retryPolicy": "Always"}
    path = tmp_path / "onexit-retry.yaml"
    path.write_text(yaml.safe_dump(doc))
    executor = LocalExecutor(path, project_root=ROOT, env={"STEPFNS_STATE_DIR": str(state)}, log=logs.append)

    result = executor.run({"succeed-on": "3", "code": "75"}, "exit-3")

    assert result.phase == "Succeeded", result.message
    nodes = json.loads((state / "exit.json").read_text())["nodes"]
    retry = nodes["exit-3.flaky"]
    assert (retry["type"], retry["phase"]) == ("Retry", "Succeeded")
    assert {"name": "attempt", "value": "3"} in retry["outputs"]["parameters"]
    attempts = [nodes[f"exit-3.flaky({i})"] for i in range(3)]
    assert [(a["type"], a["phase"]) for a in attempts] == [
        ("Pod", "Failed"),
        ("Pod", "Failed"),
        ("Pod", "Succeeded"),
    ]
    assert attempts[0]["outputs"]["parameters"] == [{"name": "attempt", "value": "none"}]  # the default
    assert retry["children"] == [a["id"] for a in attempts]
    assert nodes["exit-3.flaky(0)"]["id"] == f"exit-3-{_fnv32a('exit-3.flaky(0)')}"
    assert list(nodes) == sorted(nodes, key=lambda name: nodes[name]["id"])  # a Go map's JSON: by id


def _fnv32a(text: str) -> int:
    """FNV-1a, 32 bits (Go's hash/fnv New32a), as Argo hashes a node's name into its id."""
    h = 0x811C9DC5
    for byte in text.encode():
        h = ((h ^ byte) * 0x01000193) % 2**32
    return h


def test_a_retry_ends_at_the_first_attempts_start_plus_max_duration(
    state: Path, logs: list[dict], tmp_path: Path
) -> None:
    """Argo ends every attempt after the first at the first attempt's start + backoff.maxDuration
    (operator.go processNodeRetries: executionDeadline = maxDurationDeadline), whatever the pod's own
    activeDeadlineSeconds: the retry is stopped there, and no attempt starts after it."""
    doc = yaml.safe_load((DATA / "retry.yaml").read_text())
    flaky = next(t for t in doc["spec"]["templates"] if t["name"] == "flaky")
    # 4 s: room for the first attempt's process to start and fail on a loaded machine (with 1 s a
    # slow start used it all and no retry began); the second attempt would sleep 60 s
    flaky["retryStrategy"]["backoff"] = {"duration": "10ms", "factor": "1", "maxDuration": "4s"}
    flaky["activeDeadlineSeconds"] = 600
    flaky["script"]["args"][-1] = "tests.workflows.stepfns:fail_then_sleep"
    flaky["inputs"]["parameters"] = [{"name": "seconds", "default": "60"}]
    flaky["outputs"]["parameters"][0]["valueFrom"]["default"] = "none"
    main = doc["spec"]["templates"][0]["steps"][0][0]
    main["arguments"] = {"parameters": [{"name": "seconds", "value": "60"}]}
    path = tmp_path / "retry-max-duration.yaml"
    path.write_text(yaml.safe_dump(doc))
    executor = LocalExecutor(path, project_root=ROOT, env={"STEPFNS_STATE_DIR": str(state)}, log=logs.append)

    result = executor.run({}, "retry-md")

    assert result.phase == "Failed"
    assert (state / "retry-started").read_text() == "2"  # the retry ran, and was ended
    assert not (state / "sleep-finished").exists()
    assert result.node(".flaky").attempts == 2  # no third attempt after maxDuration

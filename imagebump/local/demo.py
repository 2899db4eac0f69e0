"""The local world of ``imagebump demo`` — and the setup pieces tests and benchmarks reuse.

:func:`build_world` starts, on 127.0.0.1 only, everything an image push needs to become a Git
change without a cluster or a cloud account, and stops / removes it again on exit:

* moto's AWS emulator in server mode (:func:`imagebump.local.moto.moto_server`), unless the
  caller passes a running one;
* the AWS side deployed FROM ``manifests/aws/cloudformation.yaml`` into moto's CloudFormation
  (queue, dead-letter queue, EventBridge rule; its Outputs give the queue URLs);
* an ECR repository (``team/api``);
* a manifests repository ``demo/manifests`` served by ``git http-backend`` with token auth
  (:class:`imagebump.local.git_server.GitHttpServer`): a base Deployment and two overlays,
  staging (``mode: commit``) and production (``mode: pr``, ``provider: local``);
* the rules file mapping the ECR repository to both overlays.

:func:`push_image` puts an image into ECR (``put_image`` with a digest and a manifest; moto's ECR
emits no events) and sends its push event through EventBridge (``put_events``), which the rule
routes to the queue. :func:`run_until_done` runs the local sensor (:mod:`sensors.local`) and the
local executor (:mod:`workflows.local_executor`, each step its own process) until the given
number of messages reached an outcome.

Steps get only what the WorkflowTemplate gives them: AWS through an explicit environment
passthrough (``AWS_ENDPOINT_URL`` = moto, fake credentials, ``AWS_REGION``), the rules as the
``imagebump-rules`` ConfigMap, the Git token as ``imagebump run --local`` gives it with only
``IMAGEBUMP_GIT_TOKEN`` set (:func:`imagebump.commands.run.local_secrets`: the ``imagebump-git``
Secret, and the same token as ``imagebump-git-read``). The token is random per world and never
printed. ``anonymous_read=True`` makes the remote serve reads without a token (a public repository).

:func:`run_demo` is the demo itself: build, push one image, run until done, and report the event,
the targets, both diffs and the timings (:func:`render_report`, or :meth:`DemoReport.summary` as
JSON). It reads and writes only under its temporary directory and moto's memory.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CLOUDFORMATION_TEMPLATE = PROJECT_ROOT / "manifests" / "aws" / "cloudformation.yaml"
WORKFLOW_TEMPLATE = PROJECT_ROOT / "manifests" / "workflows" / "image-update.yaml"

REGION = "us-west-2"
ECR_REPOSITORY = "team/api"
MANIFESTS_REPO = "demo/manifests"
APP = "api"
STAGING_PATH = f"apps/{APP}/overlays/staging"
PRODUCTION_PATH = f"apps/{APP}/overlays/production"
#: A syntactically valid OIDC issuer for the IRSA roles the stack also creates (moto ignores it).
DEMO_OIDC_PROVIDER = "oidc.eks.us-west-2.amazonaws.com/id/IMAGEBUMPDEMO0000000000000000000"
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}

STEP_TEMPLATES = ("resolve-image", "edit-kustomize", "commit-pr")


# ============================================================================ the manifests


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


# ============================================================================ the world


@dataclass
class World:
    """Handles on everything :func:`build_world` started. Use only inside its ``with`` block."""

    root: Path
    moto: Any  # imagebump.local.moto.MotoServer
    git: Any  # imagebump.local.git_server.GitHttpServer
    token: str = field(repr=False)
    stack_name: str
    stack_outputs: dict[str, str]
    queue_url: str
    dlq_url: str
    account: str
    region: str
    repository: str
    manifests: str
    manifests_url: str
    rules_path: Path
    template: Path = WORKFLOW_TEMPLATE
    backoff_scale: float = 0.02
    #: extra environment for every step (on top of AWS passthrough)
    extra_env: dict[str, str] = field(default_factory=dict)
    #: the ``imagebump-env`` ConfigMap (envFrom of every step)
    env_configmap: dict[str, str] = field(default_factory=dict)
    #: overrides of the Git tokens the steps get (tests: a wrong token)
    step_token: str | None = field(default=None, repr=False)
    #: the Secrets the steps get instead (tests: a cluster without the optional read Secret)
    step_secrets: dict[str, dict[str, str]] | None = field(default=None, repr=False)
    logs: list[dict[str, Any]] = field(default_factory=list, repr=False)
    log_sink: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False)
    pushes: dict[str, float] = field(default_factory=dict)  # event id -> monotonic time of the ECR push
    _executor: Any = field(default=None, repr=False)

    # --- AWS ---------------------------------------------------------------------------------

    def client(self, service: str) -> Any:
        return self.moto.client(service)

    @property
    def registry(self) -> str:
        return f"{self.account}.dkr.ecr.{self.region}.amazonaws.com"

    @property
    def image_uri(self) -> str:
        """The pushed repository's URI (no tag): what the overlays' ``images[].name`` hold."""
        return f"{self.registry}/{self.repository}"

    def queue_depth(self, url: str | None = None) -> int:
        """Messages on the queue (visible + in flight); ``url`` defaults to the main queue."""
        attrs = self.client("sqs").get_queue_attributes(
            QueueUrl=url or self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    def dlq_messages(self) -> list[dict[str, Any]]:
        """Peek at the dead-letter queue (bodies parsed; messages become visible again at once)."""
        sqs = self.client("sqs")
        out = (
            sqs.receive_message(
                QueueUrl=self.dlq_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=0,
                VisibilityTimeout=0,
                AttributeNames=["All"],
            ).get("Messages")
            or []
        )
        bodies = []
        for message in out:
            try:
                bodies.append(json.loads(message["Body"]))
            except ValueError:
                bodies.append({"body": message["Body"]})
        return bodies

    def set_max_receive_count(self, count: int) -> None:
        """Shorten the queue's redrive policy (tests: dead-letter after ``count`` receives)."""
        sqs = self.client("sqs")
        arn = sqs.get_queue_attributes(QueueUrl=self.dlq_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sqs.set_queue_attributes(
            QueueUrl=self.queue_url,
            Attributes={
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": str(count)}),
            },
        )

    # --- Git ---------------------------------------------------------------------------------

    def git_cmd(self, *args: str) -> str:
        """Run git in the manifests repository's bare repository; return stdout."""
        return self.git.git(self.manifests, *args)

    def read(self, path: str, ref: str = "main") -> str | None:
        try:
            return self.git_cmd("show", f"{ref}:{path}")
        except RuntimeError:
            return None

    def rev(self, ref: str = "main") -> str:
        return self.git_cmd("rev-parse", "--verify", f"{ref}^{{commit}}").strip()

    def log(self, ref: str = "main") -> list[str]:
        """Commit subjects on ``ref``, newest first."""
        return self.git_cmd("log", "--format=%s", ref).splitlines()

    def branches(self) -> list[str]:
        return sorted(self.git_cmd("for-each-ref", "--format=%(refname:short)", "refs/heads/").split())

    def show(self, sha: str) -> str:
        """``git show`` of one commit (header, message, patch), no colour."""
        return self.git_cmd("show", "--no-color", "--format=medium", sha)

    def branch_diff(self, branch: str, base: str = "main") -> str:
        """What ``branch`` proposes against ``base``: commits and ``git diff base...branch``."""
        commits = self.git_cmd("log", "--no-color", "--format=commit %H%n%n    %s%n", f"{base}..{branch}")
        return commits + self.git_cmd("diff", "--no-color", f"{base}...{branch}")

    # --- configuration the steps get -----------------------------------------------------------

    @property
    def rules_text(self) -> str:
        return self.rules_path.read_text()

    def set_rules(self, text: str) -> None:
        """Replace the rules (validated by the steps, as a mounted ConfigMap would be)."""
        self.rules_path.write_text(text)
        self._executor = None

    def set_env_config(self, values: dict[str, str]) -> None:
        """Add to the ``imagebump-env`` ConfigMap (e.g. ``IMAGEBUMP_GITHUB_API_URL``)."""
        self.env_configmap.update(values)
        self._executor = None

    def set_step_token(self, token: str | None) -> None:
        """Give the steps another Git token (None: the server's own)."""
        self.step_token = token
        self._executor = None

    def set_step_secrets(self, secrets: dict[str, dict[str, str]] | None) -> None:
        """Give the steps exactly these Secrets (None: as ``imagebump run --local`` does)."""
        self.step_secrets = secrets
        self._executor = None

    def step_env(self) -> dict[str, str]:
        """The explicit environment passthrough every step gets (no secrets in it)."""
        return {
            "AWS_ENDPOINT_URL": self.moto.endpoint_url,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            **FAKE_AWS,
            **self.extra_env,
        }

    def executor(self) -> Any:
        """The local executor for the rendered ``image-update`` template (built once, shared)."""
        if self._executor is None:
            from imagebump.commands.run import local_secrets
            from workflows.local_executor import LocalExecutor

            token = self.step_token if self.step_token is not None else self.token
            self._executor = LocalExecutor(
                self.template,
                project_root=PROJECT_ROOT,
                # as `imagebump run --local` with only IMAGEBUMP_GIT_TOKEN: the write token also reads
                secrets=(
                    self.step_secrets
                    if self.step_secrets is not None
                    else local_secrets({"IMAGEBUMP_GIT_TOKEN": token})
                ),
                configmaps={
                    "imagebump-rules": {"rules.yaml": self.rules_text},
                    "imagebump-env": {"AWS_REGION": self.region, **self.env_configmap},
                },
                env=self.step_env(),
                log=self._log,
                work_root=self.root / "steps",
                backoff_scale=self.backoff_scale,
            )
        return self._executor

    def sweep_executor(self) -> Any:
        """The local executor for the rendered ``image-reconcile`` CronWorkflow (it references the
        ``image-update`` template), with the same Secrets, ConfigMaps and environment as events."""
        from imagebump.commands.reconcile import build_executor

        executor = self.executor()  # same settings; its mutexes are this process's, shared
        return build_executor(
            secrets=executor.secrets,
            configmaps=executor.configmaps,
            env=executor.env,
            log=self._log,
            update_template=self.template,
            work_root=self.root / "steps",
            backoff_scale=self.backoff_scale,
        )

    def _log(self, record: dict[str, Any]) -> None:
        record.setdefault("mono", time.monotonic())
        self.logs.append(record)
        if self.log_sink is not None:
            self.log_sink(record)


def _check_prerequisites() -> None:
    from steps.errors import ConfigError

    if shutil.which("git") is None:
        raise ConfigError(
            "git is not installed: the demo serves a Git repository with git http-backend; "
            "install git (e.g. apt-get install -y git)"
        )
    exec_path = subprocess.run(
        ["git", "--exec-path"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not (Path(exec_path) / "git-http-backend").exists():
        raise ConfigError(f"git-http-backend is missing from {exec_path}: it ships with git; reinstall git")
    for path in (CLOUDFORMATION_TEMPLATE, WORKFLOW_TEMPLATE):
        if not path.is_file():
            raise ConfigError(
                f"{path.relative_to(PROJECT_ROOT)} is missing: run the demo from a full "
                "checkout (render the WorkflowTemplate with `imagebump render`)"
            )


@contextmanager
def _quiet_moto() -> Iterator[None]:
    """Silence moto's CloudFormation parser warnings (moto runs in this process)."""
    import logging
    import warnings

    logger = logging.getLogger("moto")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


@contextmanager
def quiet_request_logs() -> Iterator[None]:
    """Silence the request log of moto's in-process server (werkzeug) while the demo runs."""
    import logging

    logger = logging.getLogger("werkzeug")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def deploy_stack(moto: Any, name_prefix: str, *, repository_prefix: str = "") -> tuple[str, dict[str, str]]:
    """Deploy ``manifests/aws/cloudformation.yaml`` into moto's CloudFormation; (stack, outputs)."""
    from steps.errors import TransientError

    cfn = moto.client("cloudformation")
    stack = f"{name_prefix}-stack"
    with _quiet_moto():  # it warns that it skips AWS::SQS::QueuePolicy (no policies in moto)
        cfn.create_stack(
            StackName=stack,
            TemplateBody=CLOUDFORMATION_TEMPLATE.read_text(),
            Parameters=[
                {"ParameterKey": "NamePrefix", "ParameterValue": name_prefix},
                {"ParameterKey": "OidcProvider", "ParameterValue": DEMO_OIDC_PROVIDER},
                {"ParameterKey": "RepositoryPrefix", "ParameterValue": repository_prefix},
            ],
            Capabilities=["CAPABILITY_NAMED_IAM"],
        )
    deadline = time.monotonic() + 30
    while True:
        description = cfn.describe_stacks(StackName=stack)["Stacks"][0]
        status = description["StackStatus"]
        if status == "CREATE_COMPLETE":
            break
        if not status.endswith("IN_PROGRESS") or time.monotonic() > deadline:
            raise TransientError(
                f"CloudFormation stack {stack} ended {status}: "
                f"{description.get('StackStatusReason', 'no reason given')}"
            )
        time.sleep(0.2)
    outputs = {o["OutputKey"]: o["OutputValue"] for o in description.get("Outputs", [])}
    return stack, outputs


@contextmanager
def build_world(
    tmpdir: Path | str,
    *,
    moto: Any = None,
    rules: str | Callable[[World], str] | None = None,
    files: dict[str, str] | None = None,
    max_receive_count: int | None = None,
    log_sink: Callable[[dict[str, Any]], None] | None = None,
    backoff_scale: float = 0.02,
    anonymous_read: bool = False,
) -> Iterator[World]:
    """Start the whole local world under ``tmpdir``; stop it (servers, stack, repository) on exit.

    Args:
        tmpdir: an existing directory for the bare repositories, rules and step temp dirs (the
            caller removes it; ``imagebump demo --keep`` keeps it).
        moto: a running :class:`~imagebump.local.moto.MotoServer` to reuse (tests); default:
            start one here. Names are unique per world, so worlds can share one server.
        rules: rules text, or a function of the world returning it; default :func:`default_rules`.
        files: the manifests repository's files; default :func:`manifests_files`.
        max_receive_count: shorten the stack queue's redrive policy (tests of the DLQ).
        log_sink: also receives every sensor/executor log record (e.g. JSON lines to stderr).
        backoff_scale: multiplies the template's retry backoffs (10s → 0.2s by default).
        anonymous_read: the Git remote serves clones without a token (pushes still need it).

    Yields:
        A :class:`World`.
    """
    from imagebump.local.git_server import GitHttpServer
    from imagebump.local.moto import moto_server

    _check_prerequisites()
    root = Path(tmpdir).resolve()
    (root / "steps").mkdir(parents=True, exist_ok=True)
    suffix = uuid.uuid4().hex[:8]
    with ExitStack() as stack:
        server = moto if moto is not None else stack.enter_context(moto_server(region=REGION))
        ecr = server.client("ecr")
        # moto's backends are per process: a shared server (tests), or a name left by another
        # world in this process, gets a unique owner; the app name stays `api` either way
        unique = ECR_REPOSITORY.replace("/", f"{suffix}/", 1)
        repository = ECR_REPOSITORY if moto is None else unique
        try:
            created = ecr.create_repository(repositoryName=repository)["repository"]
        except ecr.exceptions.RepositoryAlreadyExistsException:
            repository = unique
            created = ecr.create_repository(repositoryName=repository)["repository"]
        stack.callback(lambda: _quietly(ecr.delete_repository, repositoryName=repository, force=True))
        account = created["registryId"]

        # the rule only forwards this world's repository (RepositoryPrefix), so worlds sharing
        # moto's EventBridge do not see each other's pushes
        stack_name, outputs = deploy_stack(
            server, f"imagebump-{suffix}", repository_prefix=repository.rsplit("/", 1)[0] + "/"
        )
        cfn = server.client("cloudformation")
        stack.callback(lambda: _quietly(cfn.delete_stack, StackName=stack_name))

        token = "ibdemo_" + secrets.token_hex(20)
        git = stack.enter_context(GitHttpServer(root / "git", token, anonymous_read=anonymous_read))
        image = f"{account}.dkr.ecr.{REGION}.amazonaws.com/{repository}"
        if files is None:
            files = manifests_files(image)
        manifests_url = git.create_repo(MANIFESTS_REPO, files)

        world = World(
            root=root,
            moto=server,
            git=git,
            token=token,
            stack_name=stack_name,
            stack_outputs=outputs,
            queue_url=outputs["QueueUrl"],
            dlq_url=outputs["DeadLetterQueueUrl"],
            account=account,
            region=REGION,
            repository=repository,
            manifests=MANIFESTS_REPO,
            manifests_url=manifests_url,
            rules_path=root / "rules.yaml",
            backoff_scale=backoff_scale,
            log_sink=log_sink,
        )
        if callable(rules):
            rules = rules(world)
        if rules is None:
            rules = default_rules(git.base_url, world.registry, repository=repository)
        world.rules_path.write_text(rules)
        if max_receive_count is not None:
            world.set_max_receive_count(max_receive_count)
        yield world


def _quietly(fn: Callable[..., Any], **kwargs: Any) -> None:
    try:
        fn(**kwargs)
    except Exception:  # noqa: BLE001 - best-effort cleanup of a server about to stop
        pass


# ============================================================================ pushes


def digest_of(world: World, tag: str) -> str:
    """A digest unique to this world's repository and ``tag`` (an image manifest's sha256)."""
    return "sha256:" + hashlib.sha256(f"{world.stack_name}/{world.repository}:{tag}".encode()).hexdigest()


def put_image(world: World, tag: str, digest: str | None = None) -> str:
    """Push ``tag`` to the world's ECR repository (moto needs the digest given); return the digest."""
    digest = digest or digest_of(world, tag)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "size": 1469,
                "digest": "sha256:" + hashlib.sha256(digest.encode()).hexdigest(),
            },
            "layers": [],
        }
    )
    world.client("ecr").put_image(
        repositoryName=world.repository, imageManifest=manifest, imageTag=tag, imageDigest=digest
    )
    return digest


def send_push_event(world: World, tag: str | None, digest: str) -> str:
    """Send the ECR push event through EventBridge (``put_events``); return the event id."""
    detail = {
        "result": "SUCCESS",
        "repository-name": world.repository,
        "image-digest": digest,
        "action-type": "PUSH",
    }
    if tag:
        detail["image-tag"] = tag
    response = world.client("events").put_events(
        Entries=[
            {
                "Source": "aws.ecr",
                "DetailType": "ECR Image Action",
                "Detail": json.dumps(detail),
                "Resources": [f"arn:aws:ecr:{world.region}:{world.account}:repository/{world.repository}"],
            }
        ]
    )
    if response.get("FailedEntryCount"):
        from steps.errors import TransientError

        raise TransientError(f"EventBridge refused the push event: {response['Entries']}")
    return response["Entries"][0]["EventId"]


def push_image(world: World, tag: str, digest: str | None = None) -> str:
    """Push an image to ECR and send its push event through EventBridge; return the event id."""
    started = time.monotonic()
    digest = put_image(world, tag, digest)
    event_id = send_push_event(world, tag, digest)
    world.pushes[event_id] = started
    return event_id


# ============================================================================ running


@dataclass
class Outcome:
    """One workflow the sensor ran: its event, result and when it finished (monotonic)."""

    event: dict[str, Any]
    result: Any  # workflows.local_executor.WorkflowResult
    finished: float

    @property
    def event_id(self) -> str:
        return str(self.event.get("id") or "")


@dataclass
class RunReport:
    """What :func:`run_until_done` saw."""

    outcomes: list[Outcome]
    stats: Any  # sensors.local.SensorStats
    timed_out: bool
    seconds: float


def make_sensor(
    world: World,
    *,
    concurrency: int = 2,
    visibility_timeout: int = 30,
    on_result: Callable[[dict[str, Any], Any], None] | None = None,
) -> Any:
    """A :class:`sensors.local.LocalSensor` on the world's queue with its executor (1 s long polls)."""
    from sensors.local import LocalSensor

    return LocalSensor(
        world.queue_url,
        world.executor(),
        sqs_client=world.client("sqs"),
        concurrency=concurrency,
        wait_seconds=1,
        visibility_timeout=visibility_timeout,
        heartbeat_seconds=max(0.5, visibility_timeout / 3),
        log=world._log,
        on_result=on_result,
    )


def run_until(
    world: World,
    *,
    timeout: float = 60,
    max_events: int | None = None,
    stop_when: Callable[[Any], bool] | None = None,
    concurrency: int = 2,
    visibility_timeout: int = 30,
    sensor: Any = None,
) -> RunReport:
    """Run the local sensor until ``max_events`` messages were handled, ``stop_when(stats)``, or
    ``timeout`` seconds (then it is stopped; running workflows still finish)."""
    outcomes: list[Outcome] = []
    lock = threading.Lock()

    def record(event: dict[str, Any], result: Any) -> None:
        with lock:
            outcomes.append(Outcome(event, result, time.monotonic()))

    if sensor is None:
        sensor = make_sensor(
            world, concurrency=concurrency, visibility_timeout=visibility_timeout, on_result=record
        )
    else:
        sensor.on_result = record
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        sensor.stop()

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    started = time.monotonic()
    timer.start()
    try:
        stats = sensor.run(stop_when=stop_when, max_events=max_events)
    finally:
        timer.cancel()
    return RunReport(outcomes, stats, timed_out.is_set(), time.monotonic() - started)


def run_until_done(world: World, n_events: int = 1, timeout: float = 60, **kwargs: Any) -> RunReport:
    """Run the local sensor and executor until ``n_events`` messages reached an outcome."""
    return run_until(world, timeout=timeout, max_events=n_events, **kwargs)


# ============================================================================ reading results


@dataclass
class TargetResult:
    """One target of one workflow: what the rule said and what the steps did."""

    env: str
    repo_url: str
    path: str
    mode: str
    provider: str
    decision: str = ""
    reason: str = ""
    action: str = ""
    commit_sha: str = ""
    branch: str = ""
    pr_url: str = ""
    phase: str = ""
    message: str = ""
    steps: dict[str, float] = field(default_factory=dict)


def target_results(result: Any) -> list[TargetResult]:
    """The targets resolve-image output, each with its edit-kustomize / commit-pr outcome."""
    resolve = next((n for n in result.nodes if n.template == "resolve-image"), None)
    if resolve is None or resolve.phase != "Succeeded":
        return []
    try:
        targets = json.loads(resolve.outputs.get("targets") or "[]")
    except ValueError:
        return []
    out = []
    for i, t in enumerate(targets):
        prefix = f".update-target({i})."
        nodes = {n.template: n for n in result.nodes if prefix in n.name and n.template in STEP_TEMPLATES}
        tr = TargetResult(
            env=t.get("env", ""),
            repo_url=t["repo_url"],
            path=t["path"],
            mode=t.get("mode", ""),
            provider=t.get("provider", ""),
        )
        edit, commit = nodes.get("edit-kustomize"), nodes.get("commit-pr")
        for node in (edit, commit):
            if node is None:
                continue
            if node.phase != "Skipped":
                tr.steps[node.template] = round(node.duration, 3)
            if node.phase in ("Failed", "Error") and not tr.message:
                tr.phase, tr.message = node.phase, f"{node.template}: {node.message}"
        if edit is not None:
            tr.decision = edit.outputs.get("decision", "")
            tr.reason = edit.outputs.get("reason", "")
        if commit is not None and commit.phase == "Succeeded":
            tr.action = commit.outputs.get("action", "")
            tr.commit_sha = commit.outputs.get("commit-sha", "")
            tr.branch = commit.outputs.get("branch", "")
            tr.pr_url = commit.outputs.get("pr-url", "")
            tr.reason = commit.outputs.get("reason", "") or tr.reason
        elif edit is not None and edit.phase == "Succeeded":
            tr.action = "unchanged"
        if not tr.phase:
            last = commit or edit
            tr.phase = "Succeeded" if tr.action else (last.phase if last is not None else "")
        out.append(tr)
    return out


def failure_details(result: Any) -> list[str]:
    """Failed/Errored steps of a workflow, one line each: ``step [env] (failed, N attempts): message``."""
    envs: dict[str, str] = {}
    resolve = next((n for n in result.nodes if n.template == "resolve-image"), None)
    if resolve is not None:
        try:
            for i, t in enumerate(json.loads(resolve.outputs.get("targets") or "[]")):
                envs[f".update-target({i})."] = t.get("env") or t.get("path") or str(i)
        except ValueError:
            pass
    lines = []
    for node in result.nodes:
        if node.phase in ("Failed", "Error") and node.template in STEP_TEMPLATES:
            env = next((e for key, e in envs.items() if key in node.name), "")
            where = f"{node.template} [{env}]" if env else node.template
            attempts = f"{node.attempts} attempt{'s' if node.attempts != 1 else ''}"
            lines.append(f"{where} ({node.phase.lower()}, {attempts}): {node.message}")
    if not lines and result.message:
        lines.append(result.message)
    return lines


# ============================================================================ the demo


@dataclass
class DemoReport:
    """Everything the demo shows."""

    ok: bool
    error: str = ""
    event: dict[str, Any] = field(default_factory=dict)
    image: str = ""
    targets: list[TargetResult] = field(default_factory=list)
    staging_diff: str = ""
    production_diff: str = ""
    timings: list[tuple[str, float]] = field(default_factory=list)
    total_seconds: float = 0.0
    setup_seconds: float = 0.0
    wall_seconds: float = 0.0
    kept: str = ""
    stack: dict[str, str] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)
    endpoint_url: str = ""
    git_base_url: str = ""
    #: ``--lost-push``: one push whose event was lost, then one sweep (empty when not asked)
    sweep: dict[str, Any] = field(default_factory=dict)

    def step_seconds(self) -> dict[str, float]:
        """Stable keys for benchmarks: ``queue``, ``resolve-image``, ``edit-kustomize[ENV]``,
        ``commit-pr[ENV]``, ``workflow``, ``end-to-end``."""
        out: dict[str, float] = {}
        for name, seconds in self.timings:
            key = name.replace(" [", "[").split(" ")[0] if name[:1].isalpha() and "[" in name else name
            key = {
                "push → event picked up from SQS": "queue",
                "workflow (all steps)": "workflow",
                "end to end: ECR push → Git change": "end-to-end",
                "end to end: ECR push → workflow ended": "end-to-end",
            }.get(key, key)
            out[key] = round(seconds, 3)
        return out

    def summary(self) -> dict[str, Any]:
        """The machine-readable summary (``imagebump demo --json``)."""
        staging = next((t for t in self.targets if t.mode == "commit"), None)
        production = next((t for t in self.targets if t.mode == "pr"), None)
        return {
            "ok": self.ok,
            "error": self.error or None,
            "event_id": self.event.get("id"),
            "event": self.event or None,
            "image": self.image,
            "targets": [
                {
                    "env": t.env,
                    "repo_url": t.repo_url,
                    "path": t.path,
                    "mode": t.mode,
                    "provider": t.provider,
                    "decision": t.decision,
                    "action": t.action,
                    "commit_sha": t.commit_sha,
                    "branch": t.branch,
                    "pr_url": t.pr_url,
                    "reason": t.reason,
                    "steps": t.steps,
                }
                for t in self.targets
            ],
            "actions": {t.env or t.path: t.action for t in self.targets},
            "commit_sha": staging.commit_sha if staging else "",
            "branch": production.branch if production else "",
            "steps": [{"step": name, "seconds": round(seconds, 3)} for name, seconds in self.timings],
            "step_seconds": self.step_seconds(),
            "total_seconds": round(self.total_seconds, 3),
            "setup_seconds": round(self.setup_seconds, 3),
            "wall_seconds": round(self.wall_seconds, 3),
            "staging_diff": self.staging_diff,
            "production_diff": self.production_diff,
            "details": self.details,
            "kept": self.kept or None,
            "aws_endpoint_url": self.endpoint_url,
            "git_base_url": self.git_base_url,
            "sweep": self.sweep or None,
        }


def run_demo(
    *,
    keep: bool = False,
    tag: str = "1.4.2",
    timeout: float = 120,
    log_sink: Callable[[dict[str, Any]], None] | None = None,
    progress: Callable[[str], None] | None = None,
    lost_push: bool = False,
) -> DemoReport:
    """Build the world, push one image, run until its event is done, and collect what to show.

    ``lost_push``: then push one more image while the sensor is stopped, purge the queue (its event
    is lost), and run one sweep (``imagebump reconcile --apply``'s template): both overlays follow.

    Never raises for a failing pipeline: the report says ``ok=False`` with the reason. Raises
    :class:`steps.errors.ConfigError` when a prerequisite (git, git-http-backend) is missing.
    """
    say = progress or (lambda _msg: None)
    wall = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="imagebump-demo-"))
    report = DemoReport(ok=False)
    try:
        say(
            "starting moto (AWS emulator), deploying manifests/aws/cloudformation.yaml, "
            "serving demo/manifests over git http-backend …"
        )
        with quiet_request_logs(), build_world(tmp, log_sink=log_sink) as world:
            world.executor().warm()  # as `imagebump run --local` does before its first message
            report.setup_seconds = time.monotonic() - wall
            report.stack = {"stack": world.stack_name, **world.stack_outputs}
            report.endpoint_url, report.git_base_url = world.moto.endpoint_url, world.git.base_url
            say(f"pushing {world.repository}:{tag} to ECR and sending its push event through EventBridge …")
            event_id = push_image(world, tag)
            pushed = world.pushes[event_id]
            say("running the local sensor and executor until the event is done …")
            run = run_until_done(world, 1, timeout=timeout)
            fill_report(report, world, run, event_id, pushed, timeout=timeout)
            if lost_push and report.ok:
                _lose_a_push_then_sweep(report, world, say)
    finally:
        report.wall_seconds = time.monotonic() - wall
        if keep:
            report.kept = str(tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return report


def _lose_a_push_then_sweep(report: DemoReport, world: World, say: Callable[[str], None]) -> None:
    """Push a newer image with the sensor stopped, purge its event from the queue, sweep once."""
    from imagebump.commands.reconcile import run_sweep

    lost = "1.5.0"
    say(
        f"pushing {world.repository}:{lost} with the sensor stopped, purging the queue (its event is lost), "
        "then one sweep …"
    )
    time.sleep(1.1)  # moto keeps push times in whole seconds: make this push the newest
    push_image(world, lost)
    world.client("sqs").purge_queue(QueueUrl=world.queue_url)
    sweep = run_sweep(world.sweep_executor(), apply=True)
    report.sweep = {
        "lost_tag": lost,
        "behind": sweep.behind,
        "submitted": sweep.submitted,
        "updates": sweep.updates,
        "seconds": round(sweep.seconds, 3),
        **sweep.calls,
        "message": sweep.message,
    }
    if sweep.exit_code != 0 or sweep.submitted != 2:
        report.ok = False
        report.error = (
            f"the sweep after a lost push did not bring both overlays up: {sweep.message or sweep.updates}"
        )


def fill_report(
    report: DemoReport, world: World, run: RunReport, event_id: str, pushed: float, *, timeout: float
) -> None:
    """Fill ``report`` from one run of the sensor: the event, targets, diffs, timings, or the error."""
    outcome = next((o for o in run.outcomes if o.event_id == event_id), None)
    if outcome is None:
        depth, dlq = world.queue_depth(), world.queue_depth(world.dlq_url)
        report.error = (
            f"the push event {event_id} was not handled within {timeout:.0f}s "
            f"(sensor: {run.stats.received} received, {run.stats.skipped} filtered out; "
            f"queue {depth}, DLQ {dlq}); "
            "rerun with --verbose to see the sensor's log"
        )
        return
    report.event = outcome.event
    result = outcome.result
    resolve = next((n for n in result.nodes if n.template == "resolve-image"), None)
    if resolve is not None and resolve.outputs.get("image"):
        try:
            image = json.loads(resolve.outputs["image"])
            report.image = (
                f"{image.get('account')}.dkr.ecr.{image.get('region')}.amazonaws.com/"
                f"{image.get('repository')}:{image.get('tag')}@{image.get('digest')}"
            )
        except (ValueError, AttributeError):
            report.image = resolve.outputs["image"]
    report.targets = target_results(result)
    # timings: queue pickup, each step, workflow, end to end
    submitted = next(
        (
            r["mono"]
            for r in world.logs
            if r.get("event") == "workflow-submitted" and r.get("event_id") == event_id
        ),
        None,
    )
    if submitted is not None:
        report.timings.append(("push → event picked up from SQS", submitted - pushed))
    if resolve is not None:
        report.timings.append(("resolve-image", resolve.duration))
    for t in report.targets:
        for step in ("edit-kustomize", "commit-pr"):
            if step in t.steps:
                report.timings.append((f"{step} [{t.env or t.path}]", t.steps[step]))
    report.timings.append(("workflow (all steps)", result.duration))
    report.total_seconds = outcome.finished - pushed
    done = "Git change" if result.phase == "Succeeded" else "workflow ended"
    report.timings.append((f"end to end: ECR push → {done}", report.total_seconds))

    if result.phase != "Succeeded":
        depth, dlq = world.queue_depth(), world.queue_depth(world.dlq_url)
        report.details = failure_details(result)
        report.error = (
            f"the workflow for event {event_id} ended {result.phase}; its message stays on the queue "
            f"({depth} there, {dlq} in the DLQ): SQS redelivers it, and after maxReceiveCount receives the "
            "redrive policy moves it to the dead-letter queue. Failed steps:\n"
            + "\n".join(f"  - {line}" for line in report.details)
        )
        return
    if not report.targets:
        reason = resolve.outputs.get("reason", "") if resolve is not None else ""
        report.error = f"the event matched no target: {reason or 'no rule matched'}"
        return
    problems = []
    for t in report.targets:
        if t.mode == "commit":
            if t.action != "committed" or not t.commit_sha:
                problems.append(f"{t.env}: expected a commit, got {t.action or t.phase} ({t.reason})")
            else:
                report.staging_diff = world.show(t.commit_sha)
        elif t.mode == "pr":
            if not t.branch or t.action not in ("pr-created", "pr-updated"):
                got = t.action or t.phase
                problems.append(f"{t.env}: expected a pull request branch, got {got} ({t.reason})")
            else:
                report.production_diff = world.branch_diff(t.branch)
    if problems:
        report.error = "; ".join(problems)
        return
    report.ok = True


def render_report(report: DemoReport) -> str:
    """The demo's human-readable output: short headed sections, both diffs verbatim, a timing table."""
    out: list[str] = []

    def section(title: str) -> None:
        out.append("")
        out.append(f"== {title} " + "=" * max(3, 72 - len(title)))

    if report.stack:
        section("AWS side (moto, from manifests/aws/cloudformation.yaml)")
        out.append(f"stack      {report.stack.get('stack', '')}")
        out.append(f"queue      {report.stack.get('QueueUrl', '')}")
        out.append(f"DLQ        {report.stack.get('DeadLetterQueueUrl', '')}")
        out.append(f"rule       {report.stack.get('RuleArn', '')}")
    if report.event:
        section("1. The ECR push event (EventBridge → SQS)")
        out.append(json.dumps(report.event, indent=2))
    if report.image:
        out.append(f"\nresolved image: {report.image}")
    if report.targets:
        section("2. Matched targets")
        width = max(len(t.env or "-") for t in report.targets)
        for t in report.targets:
            where = t.commit_sha[:12] if t.action == "committed" else (t.branch or "")
            out.append(f"{(t.env or '-'):<{width}}  mode={t.mode:<6} {t.repo_url}/{t.path}")
            did = t.action or t.phase or "?"
            out.append(f"{'':<{width}}  → {t.decision or '?'} → {did} {where}".rstrip())
            if t.message:
                out.append(f"{'':<{width}}  ! {t.message}")
    if report.staging_diff:
        section("3. Staging: the commit on main (git show)")
        out.append(report.staging_diff.rstrip("\n"))
    if report.production_diff:
        branch = next((t.branch for t in report.targets if t.mode == "pr"), "")
        section("4. Production: the pull request branch vs main (git diff main...BRANCH)")
        out.append(f"branch {branch}")
        out.append(report.production_diff.rstrip("\n"))
    if report.timings:
        section("5. Timing")
        width = max(len(name) for name, _ in report.timings)
        out.append(f"{'step':<{width}}  seconds")
        out.append(f"{'-' * width}  -------")
        for name, seconds in report.timings:
            out.append(f"{name:<{width}}  {seconds:7.2f}")
        out.append(f"\n(setup {report.setup_seconds:.1f}s; whole demo {report.wall_seconds:.1f}s)")
    if report.sweep:
        s = report.sweep
        section("6. A push whose event was lost, then one sweep (imagebump reconcile --apply)")
        outcomes = ", ".join(f"{u['env']} {u['outcome']}" for u in s["updates"]) or "nothing to do"
        out.append(
            f"pushed {s['lost_tag']}, queue purged → sweep: {s['behind']} behind → {outcomes} "
            f"({s['seconds']:.1f}s; {s.get('ecr_calls', 0)} ECR calls, {s.get('git_clones', 0)} clone)"
        )
    section("Result")
    if report.ok:
        out.append(
            "OK: one ECR push became a staging commit and a production pull request branch"
            + (", and a push whose event was lost followed within one sweep." if report.sweep else ".")
        )
    else:
        out.append(f"FAILED: {report.error}")
    if report.kept:
        out.append(f"kept: {report.kept} (bare repository under git/, rules.yaml)")
    else:
        out.append("cleaned up: servers stopped, temporary files removed (--keep keeps them).")
    return "\n".join(out).lstrip("\n") + "\n"


__all__ = [
    "DemoReport",
    "Outcome",
    "RunReport",
    "TargetResult",
    "World",
    "build_world",
    "default_rules",
    "deploy_stack",
    "digest_of",
    "failure_details",
    "fill_report",
    "make_sensor",
    "manifests_files",
    "push_image",
    "put_image",
    "render_report",
    "run_demo",
    "run_until",
    "run_until_done",
    "send_push_event",
    "target_results",
]

"""The local world: everything an image push needs to become a Git change, on 127.0.0.1 only.

:func:`build_world` starts (and stops and removes on exit) moto with the CloudFormation stack, an
ECR repository, a ``git http-backend`` manifests repository with token auth and the rules file;
what it starts and what the steps get from it: its docstring. Pushing images and running the
sensor until done: :mod:`imagebump.local.drive`. Imports :mod:`imagebump.local` modules; the
executor, sensor and commands lazily.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagebump.local.demo_repo import (
    ECR_REPOSITORY,
    MANIFESTS_REPO,
    REGION,
    default_rules,
    manifests_files,
)
from imagebump.local.live import apply_live, live_environment, live_parameters
from imagebump.local.stack import CLOUDFORMATION_TEMPLATE, PROJECT_ROOT, deploy_stack
from workflows import names

WORKFLOW_TEMPLATE = names.rendered_file(names.IMAGE_UPDATE, PROJECT_ROOT)
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


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
    #: Secrets the steps get besides those (the demo: ``imagebump-notify``, its receiver)
    extra_secrets: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    #: Argo CD's API server for verify-live's refresh (``set_argocd_api``): its URL and account token
    argocd_token: str | None = field(default=None, repr=False)
    logs: list[dict[str, Any]] = field(default_factory=list, repr=False)
    log_sink: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False)
    pushes: dict[str, float] = field(default_factory=dict)  # event id -> monotonic time of the ECR push
    #: push → live: the workflow parameters verify-live reads (off unless a test or the demo sets them)
    live: dict[str, str] = field(default_factory=lambda: {"verify-live": "false"})
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

    def set_live(
        self, argocd_context: str | None, live_timeout: str | None = None, kubeconfig: str | None = None
    ) -> None:
        """Turn push → live on (a kubeconfig context) or off (None) for the executors built from now."""
        self.live = live_parameters(argocd_context, live_timeout)
        self.extra_env.update(
            live_environment(argocd_context, {"KUBECONFIG": kubeconfig} if kubeconfig else None)
        )
        self._executor = None

    def set_argocd_api(self, url: str, token: str) -> None:
        """verify-live refreshes through this Argo CD API server (``IMAGEBUMP_ARGOCD_REFRESH=api``),
        with ``token`` in the Secret ``imagebump-argocd`` as on a cluster."""
        self.env_configmap.update({"IMAGEBUMP_ARGOCD_REFRESH": "api", "IMAGEBUMP_ARGOCD_SERVER": url})
        self.argocd_token = token
        self._executor = None

    def set_step_token(self, token: str | None) -> None:
        """Give the steps another Git token (None: the server's own)."""
        self.step_token = token
        self._executor = None

    def set_step_secrets(self, secrets: dict[str, dict[str, str]] | None) -> None:
        """Give the steps exactly these Secrets (None: as ``imagebump run --local`` does)."""
        self.step_secrets = secrets
        self._executor = None

    def set_extra_secrets(self, secrets: dict[str, dict[str, str]]) -> None:
        """Give the steps these Secrets too (the demo's ``imagebump-notify``)."""
        self.extra_secrets = secrets
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
            from workflows.local.executor import LocalExecutor

            token = self.step_token if self.step_token is not None else self.token
            self._executor = LocalExecutor(
                self.template,
                project_root=PROJECT_ROOT,
                # as `imagebump run --local` with only IMAGEBUMP_GIT_TOKEN: the write token also reads
                secrets=(
                    self.step_secrets
                    if self.step_secrets is not None
                    else local_secrets(
                        {"IMAGEBUMP_GIT_TOKEN": token}
                        | ({"IMAGEBUMP_ARGOCD_TOKEN": self.argocd_token} if self.argocd_token else {})
                    )
                )
                | self.extra_secrets,
                configmaps={
                    names.RULES_CONFIGMAP: {names.RULES_KEY: self.rules_text},
                    names.ENV_CONFIGMAP: {"AWS_REGION": self.region, **self.env_configmap},
                },
                env=self.step_env(),
                log=self.record_log,
                work_root=self.root / "steps",
                backoff_scale=self.backoff_scale,
            )
            apply_live(self._executor, self.live)
        return self._executor

    def reconcile_executor(self) -> Any:
        """The local executor for the rendered ``image-reconcile`` CronWorkflow (it references the
        ``image-update`` template), with the same Secrets, ConfigMaps and environment as events."""
        from imagebump.local.reconciler import build_executor

        executor = self.executor()  # same settings; its mutexes are this process's, shared
        sweep = build_executor(
            secrets=executor.secrets,
            configmaps=executor.configmaps,
            env=executor.env,
            log=self.record_log,
            update_template=self.template,
            work_root=self.root / "steps",
            backoff_scale=self.backoff_scale,
        )
        return apply_live(sweep, self.live)

    def record_log(self, record: dict[str, Any]) -> None:
        """Keep one log record of the executor or sensor (and pass it to ``log_sink``)."""
        record.setdefault("mono", time.monotonic())
        self.logs.append(record)
        if self.log_sink is not None:
            self.log_sink(record)


def _check_prerequisites() -> None:
    from steps.domain.errors import ConfigError

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
def build_world(
    tmpdir: Path | str,
    *,
    moto: Any = None,
    rules: str | Callable[[World], str] | None = None,
    files: dict[str, str] | Callable[[str], dict[str, str]] | None = None,
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
        files: the manifests repository's files, or a function of the image's repository URI
            returning them; default :func:`manifests_files`.
        max_receive_count: shorten the stack queue's redrive policy (tests of the DLQ).
        log_sink: also receives every sensor/executor log record (e.g. JSON lines to stderr).
        backoff_scale: multiplies the template's retry backoffs (10s → 0.2s by default).
        anonymous_read: the Git remote serves clones without a token (pushes still need it).

    Yields:
        A :class:`World`.

    :func:`build_world` starts, and stops / removes again on exit:

    * moto's AWS emulator in server mode (:func:`imagebump.local.moto.moto_server`), unless the
      caller passes a running one;
    * the AWS side deployed FROM ``manifests/aws/cloudformation.yaml`` into moto's CloudFormation
      (:func:`imagebump.local.stack.deploy_stack`: queue, dead-letter queue, EventBridge rule);
    * an ECR repository (``team/api``);
    * a manifests repository ``demo/manifests`` served by ``git http-backend`` with token auth
      (:class:`imagebump.local.git_server.GitHttpServer`), from :mod:`imagebump.local.demo_repo`;
    * the rules file mapping the ECR repository to both overlays.

    Steps get only what the WorkflowTemplate gives them: AWS through an explicit environment
    passthrough (``AWS_ENDPOINT_URL`` = moto, fake credentials, ``AWS_REGION``), the rules as the
    ``imagebump-rules`` ConfigMap, the Git token as ``imagebump run --local`` gives it with only
    ``IMAGEBUMP_GIT_TOKEN`` set (:func:`imagebump.commands.run.local_secrets`: the ``imagebump-git``
    Secret, and the same token as ``imagebump-git-read``). The token is random per world and never
    printed. ``anonymous_read=True`` makes the remote serve reads without a token (a public repository).
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
        if callable(files):
            files = files(image)
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

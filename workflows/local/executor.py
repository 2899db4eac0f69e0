"""``LocalExecutor``: run a rendered WorkflowTemplate on this machine, with no Kubernetes.

Reads the WorkflowTemplate YAML a cluster gets (``manifests/workflows/image-update.yaml``) and
runs it the way Argo would, for development, the demo and small installs. It is not a second
Argo: no scheduler, no persistence, no API. The pieces: :mod:`documents` (reading),
:mod:`validation` (the supported subset, refused at construction), :mod:`interpreter` (the run),
:mod:`sandbox` (each step's pod), :mod:`launchers` (how its process starts), :mod:`mutexes`.

What each script template gets, mirroring its pod:

* its own process running the template's own command (``python -m steps.runtime.launcher -e
  steps.x:run <script>``; ``python`` is this interpreter) — forked from a warm interpreter that has
  imported the step entry and the steps already (:mod:`.forkserver_client`; ``prefork=False`` or
  ``IMAGEBUMP_LOCAL_PREFORK=0`` starts a new interpreter instead) — the rendered ``source`` (Hera's
  ``{{inputs.parameters}}``: the JSON list of ALL declared inputs, defaults included) written to
  ``<tmp>/mounts/argo/staging/script`` and appended to the arguments as Argo does;
* its own fresh ``tempfile.mkdtemp()`` as cwd, ``HOME`` and ``TMPDIR``, removed after (on a
  background thread, off the node's time; every one is gone before :meth:`LocalExecutor.run` returns);
* only the environment the template declares (``value``; ``valueFrom.secretKeyRef`` /
  ``configMapKeyRef`` and ``envFrom`` resolved from the ``secrets`` / ``configmaps`` mappings the
  caller passes), plus a minimal base: ``PATH``, ``PYTHONPATH`` (the project), ``LANG`` and what
  the caller passes in ``env`` (e.g. ``AWS_*``);
* Secret/ConfigMap/emptyDir ``volumeMounts`` materialised inside its temp dir. We cannot write
  to ``/etc``, so every container path under a mount path (and under ``/tmp``, ``/argo``) is
  rewritten to ``<tmp>/mounts/<path>``; env values and ``valueFrom.path`` that name such a path
  are rewritten the same way (``hera__outputs_directory`` too; it defaults to
  ``/tmp/hera-outputs`` so a step never writes to the real ``/tmp``).

Supported: ``steps`` and ``dag`` (``dependencies``; ``depends`` as ``a && b`` /
``a.Succeeded``) templates, ``script`` templates, ``suspend`` templates with a ``duration`` (the run
waits that long; ``0`` is a node without a pod), ``templateRef`` to a template of another rendered
WorkflowTemplate (given in ``workflow_templates``, or rendered next to the template; see below),
``parallelism`` on a steps/dag template (at most that many of its steps, tasks or items run at
once), ``withParam`` / ``withItems`` with ``{{item}}`` / ``{{item.field}}``, ``when`` (``==``,
``!=``, ``&&``, ``||``, ``true``/``false``), input parameters (``value``/``default``), output
parameters (``valueFrom.path`` for scripts, ``valueFrom.parameter`` for steps/dag,
``valueFrom.default`` when missing or skipped), ``outputs.result`` (stdout),
``{{workflow.name}}``, ``{{workflow.parameters.*}}``, ``{{inputs.parameters.*}}``,
``{{steps.*.outputs.parameters.*}}``, ``{{tasks.*.outputs.parameters.*}}``,
``synchronization.mutexes`` / ``mutex`` (one registry of named locks per process, so they hold
across concurrently running workflows), ``retryStrategy`` (``limit``, ``retryPolicy``,
``backoff.duration/factor/maxDuration``, ``expression`` comparing ``lastRetry.exitCode`` /
``lastRetry.status``), ``activeDeadlineSeconds`` (template and workflow: the process group is
killed) and ``spec.arguments.parameters``.

A ``CronWorkflow`` runs its ``workflowSpec`` once per :meth:`LocalExecutor.run`: scheduling is the
caller's (``imagebump run --local --reconcile-every``), so ``schedules``, ``timezone``,
``concurrencyPolicy``, ``startingDeadlineSeconds``, the history limits, ``suspend`` and
``workflowMetadata`` are ignored; ``stopStrategy`` and ``when`` are refused.

``templateRef`` (``{name, template}``) runs a template of another WorkflowTemplate the way Argo
does: the template and the templates it names run in that WorkflowTemplate's scope, under the
running workflow (its parameters, its ``spec.volumes``; the other WorkflowTemplate's own
``spec`` does not apply), and its mutexes are the same process-wide locks, so a run of the
referenced WorkflowTemplate and a run that references it serialise on the same overlay. Refused:
a name that is not one of those WorkflowTemplates, a template it does not hold, ``clusterScope``,
and a step with both ``template`` and ``templateRef``.

Ignored (they shape pods, not results): metrics, podGC, ttlStrategy, securityContext, resources,
serviceAccountName, automountServiceAccountToken, podSpecPatch, archiveLocation, metadata
(labels, annotations), podMetadata, workflowMetadata, image, imagePullPolicy, imagePullSecrets,
nodeSelector, tolerations, affinity, priorityClassName, workingDir, volumeClaimGC, descriptions.

Anything else (``container``/``resource``/``http`` templates, a ``suspend`` without a duration
(it waits for a manual resume), artifacts, ``onExit``, hooks, semaphores, ``{{=expressions}}``,
unknown ``{{variables}}``, ``when``/retry expressions it cannot evaluate, …) is refused when the
executor is constructed, with an :class:`UnsupportedFeatureError` whose message starts
``not supported by the local executor: `` and names the field.

Logs are JSON-line records passed to ``log``, in the format steps write on a cluster
(:mod:`steps.runtime.harness`), so one ``jq`` filter reads both: ``ts``, ``level``, ``component``
(``executor``), ``event`` (what happened: ``workflow-started``, ``node-finished``, …), ``workflow``,
``event_id``, ``node``, ``template``, ``step`` (the script template), ``phase``, ``duration``,
``attempt``, ``exit_code``, ``message``; a failed step adds its stderr tail. Each step process's
own records (its stderr, JSON lines with ``component: step``) are forwarded as they are, with
``workflow``, ``node`` and ``attempt`` added; other stderr lines become ``step-stderr`` records.
Every secret value the executor was given is redacted from all of them.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from steps.domain.errors import ConfigError
from steps.runtime.harness import utc_timestamp
from workflows.local import forkserver_client
from workflows.local.documents import WorkflowDocument
from workflows.local.errors import NOT_SUPPORTED, UnsupportedFeatureError
from workflows.local.forkserver_client import ForkServerClient, ForkServerError
from workflows.local.interpreter import Run
from workflows.local.launchers import ForkServerLauncher, FreshProcessLauncher, Launcher
from workflows.local.logs import Log, Redactor, json_logger
from workflows.local.mutexes import PROCESS_MUTEXES, MutexRegistry
from workflows.local.results import WorkflowResult
from workflows.local.sandbox import Sandbox
from workflows.local.validation import validate


class LocalExecutor:
    """Runs one WorkflowTemplate (from its rendered YAML) without Kubernetes.

    Args:
        template_yaml: path to the YAML file, or the YAML text itself.
        project_root: put on the steps' ``PYTHONPATH`` so ``-e steps.x:run`` imports.
        secrets: ``{secret name: {key: value}}`` — what ``secretKeyRef``, ``envFrom.secretRef``
            and Secret volumes resolve against. Every value is redacted from logs and messages.
        configmaps: ``{configmap name: {key: value}}`` likewise.
        env: extra environment every step gets (the caller's explicit passthrough, e.g.
            ``AWS_*``); the template's own env wins over it.
        python: the interpreter that replaces ``python`` in a template's command.
        log: receives one dict per record (see :func:`json_logger`); default: JSON to stderr.
        work_root: where step temp dirs are created (default: the system temp dir).
        backoff_scale: multiplies every retry backoff (tests and the demo use e.g. 0.01 so a
            template's ``10s`` backoff does not make them wait minutes); 1.0 is Argo's timing.
        prefork: start ``python -m MODULE`` step processes by forking a warm interpreter that has
            already imported the step entry and the steps' modules (the fork server,
            :mod:`.forkserver_client`), not from scratch; each is still its own process with its own
            session, directory and environment. Default: on, unless ``IMAGEBUMP_LOCAL_PREFORK=0``.
        workflow_templates: rendered WorkflowTemplates (paths or YAML text) that ``templateRef``
            may name, by ``metadata.name``. Default (None): when ``template_yaml`` is a file, the
            WorkflowTemplates rendered in the same directory — as a cluster finds them by name in
            the namespace they were installed into (``manifests/workflows/``); otherwise none.
        mutexes: the named locks of ``synchronization.mutexes``; default: the process's registry,
            shared with every other executor (so two templates that lock one overlay serialise).

    Raises:
        UnsupportedFeatureError: the template uses something not implemented here.
        ConfigError: the YAML is not a WorkflowTemplate, or a non-optional Secret/ConfigMap it
            references was not given.
    """

    def __init__(
        self,
        template_yaml: str | Path,
        *,
        project_root: str | Path,
        secrets: Mapping[str, Mapping[str, str]] | None = None,
        configmaps: Mapping[str, Mapping[str, str]] | None = None,
        env: Mapping[str, str] | None = None,
        python: str = sys.executable,
        log: Log | None = None,
        work_root: str | Path | None = None,
        backoff_scale: float = 1.0,
        prefork: bool | None = None,
        workflow_templates: Sequence[str | Path] | None = None,
        mutexes: MutexRegistry | None = None,
    ) -> None:
        self.document = WorkflowDocument.read(template_yaml, workflow_templates)
        self.source, self.doc, self.kind, self.name = (
            self.document.source,
            self.document.doc,
            self.document.kind,
            self.document.name,
        )
        self.spec = self.document.spec
        self.templates = self.document.templates
        self.referenced = self.document.referenced
        self.project_root = str(Path(project_root).resolve())
        self.secrets = {k: dict(v) for k, v in (secrets or {}).items()}
        self.configmaps = {k: dict(v) for k, v in (configmaps or {}).items()}
        self.env = dict(env or {})
        self.python = python
        self.log = log or json_logger()
        self.work_root = str(work_root) if work_root else None
        self.backoff_scale = backoff_scale
        self.mutexes = mutexes or PROCESS_MUTEXES
        self.redact = Redactor(self.secrets)
        self.workflow = validate(self.document, self.secrets, self.configmaps)
        self.workflow_parameters = self.workflow.workflow_parameters
        self.prefork = forkserver_client.enabled_by_default() if prefork is None else bool(prefork)
        self.sandbox = Sandbox(
            python=self.python,
            project_root=self.project_root,
            env=self.env,
            secrets=self.secrets,
            configmaps=self.configmaps,
            spec_volumes=self.spec.get("volumes") or [],
            work_root=self.work_root,
            redact=self.redact,
            launcher=self.launcher,
        )

    # -- how steps start ----------------------------------------------------------------------

    @functools.cached_property
    def _preload(self) -> tuple[str, ...]:
        """Each ``python -m`` module and each ``-e module:function`` entrypoint of the templates."""
        modules: list[str] = []
        for tpl in self.document.every_template():
            args = [str(a) for a in ((tpl.get("script") or {}).get("args") or [])]
            for flag, value in zip(args, args[1:], strict=False):
                if flag == "-m":
                    modules.append(value)
                elif flag in ("-e", "--entrypoint") and ":" in value:
                    modules.append(value.split(":", 1)[0])
        return tuple(dict.fromkeys(m for m in modules if "{{" not in m))

    def preload_modules(self) -> list[str]:
        """What the fork server imports (derived once from the templates)."""
        return list(self._preload)

    def fork_server(self) -> ForkServerClient | None:
        """The shared warm interpreter step processes are forked from, or None when prefork is off."""
        if not self.prefork:
            return None
        return forkserver_client.shared(self.python, self.project_root, self._preload)

    def launcher(self) -> Launcher:
        """How the next step process starts: forked from the fork server, or a fresh process."""
        client = self.fork_server()
        return FreshProcessLauncher() if client is None else ForkServerLauncher(client)

    def warm(self) -> None:
        """Start the warm interpreter now (1–2 s of imports), so the first event does not wait for it.

        Long-running callers (``imagebump run --local``, the demo) call this before taking work; a
        fork server that cannot start is logged and steps start as new processes instead.
        """
        client = self.fork_server()
        if client is None:
            return
        try:
            client.ensure_started()
        except ForkServerError as exc:
            self.log(
                {
                    "ts": utc_timestamp(),
                    "level": "warning",
                    "component": "executor",
                    "event": "zygote-unavailable",
                    "message": str(exc),
                }
            )

    # -- running ------------------------------------------------------------------------------

    def run(
        self,
        parameters: Mapping[str, str] | None = None,
        workflow_name: str | None = None,
        *,
        event_id: str | None = None,
    ) -> WorkflowResult:
        """Run the entrypoint to completion and return what happened (never raises for a failing step).

        Returns when the last step's process has ended, as a Workflow's phase is final when its last
        pod is: the steps' private temp dirs are deleted on a background thread meanwhile and after,
        as pods are garbage-collected (:func:`workflows.local.sandbox.wait_deleted` waits for them;
        the interpreter does at exit).

        Args:
            parameters: workflow parameters (``spec.arguments.parameters``); unknown names refused.
            workflow_name: the Workflow's name (``{{workflow.name}}``, node names, mutex logs).
            event_id: carried into every log record.

        Raises:
            ConfigError: an unknown parameter, or a parameter without value or default.
        """
        params = dict(self.workflow_parameters)
        for key, value in (parameters or {}).items():
            if key not in params:
                raise ConfigError(
                    f"workflow parameter {key!r} is not declared by {self.name!r} "
                    f"(declared: {', '.join(params) or 'none'})"
                )
            params[key] = str(value)
        missing = [k for k, v in params.items() if v is None]
        if missing:
            raise ConfigError(f"workflow parameters without a value: {', '.join(missing)}")
        wf_name = workflow_name or f"{self.name}-local-{int(time.time())}"
        run = Run(
            self.workflow,
            name=wf_name,
            params=params,
            event_id=event_id,
            sandbox=self.sandbox,
            mutexes=self.mutexes,
            log=self.log,
            redact=self.redact,
            backoff_scale=self.backoff_scale,
        )
        return run.execute()


__all__ = ["NOT_SUPPORTED", "LocalExecutor", "UnsupportedFeatureError"]

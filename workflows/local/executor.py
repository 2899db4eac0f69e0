"""``LocalExecutor``: run a rendered WorkflowTemplate or CronWorkflow on this machine, with no Kubernetes.

Reads the YAML a cluster gets (``manifests/workflows/*.yaml``) and runs it as Argo would: each
script template's step in its own process, private temporary directory and declared environment
(:mod:`.sandbox`, :mod:`.launchers`), mutexes, retries and deadlines honoured; anything it does not
support is refused at construction (:class:`UnsupportedFeatureError`). Writes JSON-line log records
to ``log``, in the steps' own format. What it supports and refuses: docs/local-executor.md.
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

"""Run a rendered WorkflowTemplate on this machine, with no Kubernetes: the local executor.

Reads the WorkflowTemplate YAML a cluster gets (``manifests/workflows/image-update.yaml``) and
runs it the way Argo would, for development, the demo and small installs. It is not a second
Argo: no scheduler, no persistence, no API.

What each script template gets, mirroring its pod:

* its own process running the template's own command (``python -m hera.workflows.runner -e
  steps.x:run <script>``; ``python`` is this interpreter) — forked from a warm interpreter that has
  imported Hera's runner and the steps already (:mod:`workflows.prefork`; ``prefork=False`` or
  ``IMAGEBUMP_LOCAL_PREFORK=0`` starts a new interpreter instead) — the rendered ``source`` (Hera's
  ``{{inputs.parameters}}``: the JSON list of ALL declared inputs, defaults included) written to
  ``<tmp>/mounts/argo/staging/script`` and appended to the arguments as Argo does;
* its own fresh ``tempfile.TemporaryDirectory()`` as cwd, ``HOME`` and ``TMPDIR``, removed after;
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
WorkflowTemplate (given in ``workflow_templates``, or rendered next to the template; see below), ``parallelism`` on a steps/dag
template (at most that many of its steps, tasks or items run at once), ``withParam`` / ``withItems`` with ``{{item}}`` /
``{{item.field}}``, ``when`` (``==``, ``!=``, ``&&``, ``||``, ``true``/``false``), input parameters
(``value``/``default``), output parameters (``valueFrom.path`` for scripts, ``valueFrom.parameter``
for steps/dag, ``valueFrom.default`` when missing or skipped), ``outputs.result`` (stdout),
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
a name that is not one of those WorkflowTemplates, a template it does not hold, ``clusterScope``, and a
step with both ``template`` and ``templateRef``.

Ignored (they shape pods, not results): metrics, podGC, ttlStrategy, securityContext, resources,
serviceAccountName, automountServiceAccountToken, podSpecPatch, archiveLocation, metadata
(labels, annotations), podMetadata, workflowMetadata, image, imagePullPolicy, imagePullSecrets,
nodeSelector, tolerations, affinity, priorityClassName, workingDir, volumeClaimGC, descriptions.

Anything else (``container``/``resource``/``http`` templates, a ``suspend`` without a duration
(it waits for a manual resume), artifacts, ``onExit``,
hooks, semaphores, ``{{=expressions}}``, unknown ``{{variables}}``, ``when``/retry expressions it
cannot evaluate, …) is refused when the executor is constructed, with an
:class:`UnsupportedFeatureError` whose message starts ``not supported by the local executor: ``
and names the field.

Logs are JSON-line records passed to ``log``, in the format steps write on a cluster
(:mod:`steps._runtime`), so one ``jq`` filter reads both: ``ts``, ``level``, ``component``
(``executor``), ``event`` (what happened: ``workflow-started``, ``node-finished``, …), ``workflow``,
``event_id``, ``node``, ``template``, ``step`` (the script template), ``phase``, ``duration``,
``attempt``, ``exit_code``, ``message``; a failed step adds its stderr tail. Each step process's
own records (its stderr, JSON lines with ``component: step``) are forwarded as they are, with
``workflow``, ``node`` and ``attempt`` added; other stderr lines become ``step-stderr`` records.
Every secret value the executor was given is redacted from all of them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from steps._runtime import utc_timestamp
from steps.errors import ConfigError
from workflows.prefork import Zygote, ZygoteError, enabled_by_default
from workflows.prefork import shared as shared_zygote

NOT_SUPPORTED = "not supported by the local executor: "

#: Where Argo's executor puts a script template's source; rewritten into the step's temp dir.
STAGING_SCRIPT = "/argo/staging/script"
DEFAULT_OUTPUTS_DIRECTORY = "/tmp/hera-outputs"
#: Container paths that are always private to a step (besides its volume mounts).
IMPLICIT_MOUNTS = ("/tmp", "/argo")
STDERR_TAIL_CHARS = 2000
REDACTED = "***"

SUCCEEDED, FAILED, ERROR, SKIPPED = "Succeeded", "Failed", "Error", "Skipped"

Log = Callable[[dict[str, Any]], None]


class UnsupportedFeatureError(ConfigError, ValueError):
    """The template uses something the local executor does not implement."""

    def __init__(self, field_path: str, detail: str = "") -> None:
        super().__init__(
            f"{NOT_SUPPORTED}{field_path}{': ' + detail if detail else ''} "
            "(the local executor runs only what imagebump's templates use; run this template on Argo)"
        )
        self.field = field_path


class _NodeError(Exception):
    """Something the executor itself could not do for one node (phase ``Error``)."""


# ---------------------------------------------------------------------------------------------
# Results and logging
# ---------------------------------------------------------------------------------------------


@dataclass
class NodeResult:
    """One executed (or skipped) node: a script attempt series, a steps/dag group or a step."""

    name: str
    template: str
    phase: str
    exit_code: int | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    duration: float = 0.0
    attempts: int = 0
    message: str = ""
    item: Any = None
    result: str | None = None


@dataclass
class WorkflowResult:
    """What :meth:`LocalExecutor.run` returns. ``phase`` is Succeeded, Failed or Error."""

    name: str
    phase: str
    nodes: list[NodeResult]
    message: str = ""
    duration: float = 0.0
    outputs: dict[str, str] = field(default_factory=dict)

    def node(self, suffix: str) -> NodeResult:
        """The first node whose name ends with ``suffix`` (e.g. ``".resolve-image"``)."""
        for node in self.nodes:
            if node.name.endswith(suffix):
                return node
        raise KeyError(suffix)

    def nodes_for(self, template: str) -> list[NodeResult]:
        """All nodes that ran (or skipped) ``template``, in completion order."""
        return [n for n in self.nodes if n.template == template]


def json_logger(stream: Any = None) -> Log:
    """A ``log`` callable writing one JSON object per line to ``stream`` (default stderr).

    Non-ASCII text is escaped (``\\uXXXX``), so any stream can take any record.
    """
    lock = threading.Lock()

    def log(record: dict[str, Any]) -> None:
        line = json.dumps(record, default=str, sort_keys=False)
        with lock:
            out = stream if stream is not None else sys.stderr
            out.write(line + "\n")
            out.flush()

    return log


# ---------------------------------------------------------------------------------------------
# Mutex registry: named locks shared by every workflow run in this process
# ---------------------------------------------------------------------------------------------

_MUTEXES: dict[str, threading.Lock] = {}
_MUTEXES_LOCK = threading.Lock()


def _mutex(name: str) -> threading.Lock:
    with _MUTEXES_LOCK:
        return _MUTEXES.setdefault(name, threading.Lock())


# ---------------------------------------------------------------------------------------------
# Small pure helpers: durations, templates, conditions
# ---------------------------------------------------------------------------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any, where: str) -> float:
    """Argo duration (``"10s"``, ``"1m30s"``, ``"100ms"``, ``"5"`` or an int) → seconds."""
    text = str(value).strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise UnsupportedFeatureError(where, f"duration {text!r} is not a Go duration like '10s'")
    return sum(float(n) * _UNITS[u] for n, u in parts)


_VAR = re.compile(r"\{\{\s*(.*?)\s*\}\}")


def _variables(text: str) -> list[str]:
    return _VAR.findall(text)


def _substitute(text: str, lookup: Callable[[str], str]) -> str:
    return _VAR.sub(lambda m: lookup(m.group(1)), text)


_TOKEN = re.compile(r"""\s*('(?:[^']*)'|"(?:[^"]*)"|==|!=|<=|>=|<|>|&&|\|\||[^\s'"=!<>&|]+)""")


def _tokens(text: str) -> list[str]:
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot read {text!r} at {pos}")
        out.append(m.group(1))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


def _literal(token: str) -> Any:
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"":
        return token[1:-1]
    try:
        return int(token)
    except ValueError:
        pass
    try:
        return float(token)
    except ValueError:
        return token


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _compare(a: Any, op: str, b: Any) -> bool:
    if isinstance(a, (int, float)) != isinstance(b, (int, float)):
        a, b = str(a), str(b)
    return _OPS[op](a, b)


def evaluate_condition(text: str, resolve: Callable[[str], Any] = _literal) -> bool:
    """Evaluate a ``when``/retry condition of the shape our templates use.

    Grammar: ``clause (('&&'|'||') clause)*`` (``&&`` binds tighter), ``clause`` is ``true``,
    ``false`` or ``operand OP operand`` with OP one of ``== != < <= > >=``; an operand is a quoted
    string, a number or a bare word (``resolve`` may map names such as ``lastRetry.exitCode``).
    Raises ValueError for anything else.
    """
    tokens = _tokens(text)
    if not tokens:
        raise ValueError("empty condition")
    disjuncts: list[list[list[str]]] = [[[]]]
    for tok in tokens:
        if tok == "||":
            disjuncts.append([[]])
        elif tok == "&&":
            disjuncts[-1].append([])
        else:
            disjuncts[-1][-1].append(tok)

    def clause(parts: list[str]) -> bool:
        if len(parts) == 1 and parts[0].lower() in ("true", "false"):
            return parts[0].lower() == "true"
        if len(parts) == 3 and parts[1] in _OPS:
            return _compare(resolve(parts[0]), parts[1], resolve(parts[2]))
        raise ValueError(f"cannot evaluate {' '.join(parts)!r}")

    return any(all(clause(c) for c in conj) for conj in disjuncts)


def _retry_operand(token: str, exit_code: int | None, status: str) -> Any:
    m = re.fullmatch(r"(?:asInt\()?lastRetry\.(exitCode|status)\)?", token)
    if m:
        if m.group(1) == "exitCode":
            return exit_code if exit_code is not None else -1
        return status
    if token.startswith("lastRetry."):
        raise ValueError(f"unknown {token}")
    return _literal(token)


def _tail(text: str, lines: int = 20) -> str:
    """The last ``lines`` lines of ``text``, at most STDERR_TAIL_CHARS characters."""
    tail = "\n".join(text.rstrip("\n").splitlines()[-lines:])
    return tail[-STDERR_TAIL_CHARS:]


def _json_record(line: str) -> dict[str, Any] | None:
    """A step's JSON log line as a dict; None for anything else."""
    if not line.startswith("{"):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


_WARN_EVENTS = {"attempt-failed", "retry-scheduled", "zygote-lost", "zygote-unavailable"}


def _level_of(record: dict[str, Any]) -> str:
    """The ``level`` of an executor record: failures are errors, retries warnings, the rest info."""
    if record.get("phase") in (FAILED, ERROR) and record.get("event") in (
        "node-finished",
        "workflow-finished",
    ):
        return "error"
    return "warning" if record.get("event") in _WARN_EVENTS else "info"


def _ancestors(graph: dict[str, set[str]], name: str) -> set[str]:
    """Tasks ``name`` depends on, directly or not; a cycle is a ConfigError."""
    seen: set[str] = set()
    stack = list(graph[name])
    while stack:
        dep = stack.pop()
        if dep == name:
            raise ConfigError(f"dag task {name!r} depends on itself (a dependency cycle)")
        if dep not in seen:
            seen.add(dep)
            stack.extend(graph[dep])
    return seen


def _go_json(value: Any) -> str:
    """JSON as Argo (Go's encoding/json) writes it into ``{{item}}``: compact."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _container_path(path: str) -> PurePosixPath:
    return PurePosixPath("/" + path.strip("/"))


def _under(path: PurePosixPath, root: PurePosixPath) -> bool:
    return path == root or root in path.parents


def _load(template_yaml: str | Path) -> tuple[str, dict[str, Any]]:
    """(source, document) of a rendered Workflow, WorkflowTemplate or CronWorkflow: a path or YAML text."""
    if isinstance(template_yaml, Path) or (
        isinstance(template_yaml, str)
        and "\n" not in template_yaml
        and template_yaml.endswith((".yaml", ".yml"))
    ):
        source = str(template_yaml)
        try:
            text = Path(template_yaml).read_text()
        except OSError as exc:
            raise ConfigError(
                f"{source}: cannot read it ({exc.strerror}); render it with `imagebump render`"
            ) from None
    else:
        source, text = "<string>", str(template_yaml)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") not in _KINDS:
        raise ConfigError(
            f"{source}: expected a WorkflowTemplate (kind: WorkflowTemplate, or a CronWorkflow)"
        )
    return source, doc


def _siblings(source: str) -> list[tuple[str, dict[str, Any]]]:
    """The rendered WorkflowTemplates in the directory of the file ``source`` (none for YAML text)."""
    if source == "<string>":
        return []
    found = []
    for path in sorted(Path(source).resolve().parent.glob("*.y*ml")):
        if path.resolve() == Path(source).resolve() or path.suffix not in (".yaml", ".yml"):
            continue
        try:
            doc = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            continue  # not ours to judge: only a WorkflowTemplate a step names is used, and checked
        if isinstance(doc, dict) and doc.get("kind") == "WorkflowTemplate":
            found.append((str(path), doc))
    return found


# ---------------------------------------------------------------------------------------------
# The executor
# ---------------------------------------------------------------------------------------------

_IGNORED_SPEC = {
    "metrics",
    "podGC",
    "ttlStrategy",
    "securityContext",
    "serviceAccountName",
    "podSpecPatch",
    "archiveLocation",
    "podMetadata",
    "workflowMetadata",
    "automountServiceAccountToken",
    "imagePullSecrets",
    "nodeSelector",
    "tolerations",
    "affinity",
    "priorityClassName",
    "volumeClaimGC",
    "podDisruptionBudget",
    "executor",
    "artifactGC",
    "schedulerName",
    "hostNetwork",
    "dnsPolicy",
    "dnsConfig",
    "podPriorityClassName",
    "workflowTemplateRef",
}
_SUPPORTED_SPEC = {"entrypoint", "arguments", "templates", "activeDeadlineSeconds", "volumes"}

_IGNORED_TEMPLATE = {
    "metrics",
    "securityContext",
    "serviceAccountName",
    "podSpecPatch",
    "archiveLocation",
    "metadata",
    "automountServiceAccountToken",
    "nodeSelector",
    "tolerations",
    "affinity",
    "priorityClassName",
    "schedulerName",
    "executor",
    "failFast",
    "hostAliases",
}
_SUPPORTED_TEMPLATE = {
    "name",
    "inputs",
    "outputs",
    "steps",
    "dag",
    "script",
    "synchronization",
    "retryStrategy",
    "activeDeadlineSeconds",
    "volumes",
    "suspend",
    "parallelism",
}
_IGNORED_SCRIPT = {
    "image",
    "imagePullPolicy",
    "resources",
    "securityContext",
    "name",
    "workingDir",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "resizePolicy",
}
_SUPPORTED_SCRIPT = {"command", "args", "source", "env", "envFrom", "volumeMounts"}
_SUPPORTED_STEP = {
    "name",
    "template",
    "templateRef",
    "arguments",
    "withParam",
    "withItems",
    "when",
    "dependencies",
    "depends",
    "description",
}
#: CronWorkflow fields that only schedule runs (the caller schedules locally): ignored.
_IGNORED_CRON = {
    "schedules",
    "schedule",
    "timezone",
    "concurrencyPolicy",
    "startingDeadlineSeconds",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
    "suspend",
    "workflowMetadata",
}
_KINDS = ("WorkflowTemplate", "Workflow", "CronWorkflow")


@dataclass
class _Mount:
    container_path: PurePosixPath
    volume: dict[str, Any]
    sub_path: str | None = None


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
            already imported Hera's runner and the steps' modules (:mod:`workflows.prefork`), not
            from scratch; each is still its own process with its own session, directory and
            environment. Default: on, unless ``IMAGEBUMP_LOCAL_PREFORK=0``.
        workflow_templates: rendered WorkflowTemplates (paths or YAML text) that ``templateRef``
            may name, by ``metadata.name``. Default (None): when ``template_yaml`` is a file, the
            WorkflowTemplates rendered in the same directory — as a cluster finds them by name in
            the namespace they were installed into (``manifests/workflows/``); otherwise none.

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
    ) -> None:
        self.source, doc = _load(template_yaml)
        self.doc = doc
        self.kind: str = doc["kind"]
        self.name = (doc.get("metadata") or {}).get("name") or (doc.get("metadata") or {}).get(
            "generateName", ""
        )
        spec: dict[str, Any] = doc.get("spec") or {}
        if self.kind == "CronWorkflow":
            for key in spec:
                if key != "workflowSpec" and key not in _IGNORED_CRON:
                    raise UnsupportedFeatureError(
                        f"spec.{key}", "the local executor runs a CronWorkflow once per call"
                    )
            spec = spec.get("workflowSpec") or {}
        self.spec: dict[str, Any] = spec
        self.templates: dict[str, dict[str, Any]] = {t["name"]: t for t in self.spec.get("templates") or []}
        # templateRef: the other WorkflowTemplates by name, and which scope each template belongs to
        self.referenced: dict[str, dict[str, dict[str, Any]]] = {}
        if workflow_templates is None:
            others = _siblings(self.source)
        else:
            others = [_load(item) for item in workflow_templates]
        self._ambiguous: dict[str, list[str]] = {}
        sources: dict[str, str] = {}
        for source, other in others:
            name = (other.get("metadata") or {}).get("name")
            if other["kind"] != "WorkflowTemplate" or not name:
                raise ConfigError(
                    f"{source}: workflow_templates takes named WorkflowTemplates, got {other['kind']}"
                )
            if name in sources:
                self._ambiguous.setdefault(name, [sources[name]]).append(source)
            sources[name] = source
            self.referenced[name] = {t["name"]: t for t in (other.get("spec") or {}).get("templates") or []}
        self._scope_of: dict[int, str] = {id(tpl): "" for tpl in self.templates.values()}
        for name, templates in self.referenced.items():
            self._scope_of.update({id(tpl): name for tpl in templates.values()})
        self._validated: set[int] = set()
        self.project_root = str(Path(project_root).resolve())
        self.secrets = {k: dict(v) for k, v in (secrets or {}).items()}
        self.configmaps = {k: dict(v) for k, v in (configmaps or {}).items()}
        self.env = dict(env or {})
        self.python = python
        self.log = log or json_logger()
        self.work_root = str(work_root) if work_root else None
        self.backoff_scale = backoff_scale
        self._secret_values = sorted(
            {v for s in self.secrets.values() for v in s.values() if v and len(v) >= 4}, key=len, reverse=True
        )
        self._validate()
        self.prefork = enabled_by_default() if prefork is None else bool(prefork)

    @functools.cached_property
    def _preload(self) -> tuple[str, ...]:
        """Each ``python -m`` module and each ``-e module:function`` entrypoint of the templates."""
        modules: list[str] = []
        every = list(self.templates.values()) + [t for ts in self.referenced.values() for t in ts.values()]
        for tpl in every:
            args = [str(a) for a in ((tpl.get("script") or {}).get("args") or [])]
            for flag, value in zip(args, args[1:]):
                if flag == "-m":
                    modules.append(value)
                elif flag in ("-e", "--entrypoint") and ":" in value:
                    modules.append(value.split(":", 1)[0])
        return tuple(dict.fromkeys(m for m in modules if "{{" not in m))

    def preload_modules(self) -> list[str]:
        """What the zygote imports (see :attr:`_preload`, derived once from the templates)."""
        return list(self._preload)

    def zygote(self) -> Zygote | None:
        """The shared warm interpreter step processes are forked from, or None when prefork is off."""
        if not self.prefork:
            return None
        return shared_zygote(self.python, self.project_root, self._preload)

    def warm(self) -> None:
        """Start the warm interpreter now (1–2 s of imports), so the first event does not wait for it.

        Long-running callers (``imagebump run --local``, the demo) call this before taking work; a
        zygote that cannot start is logged and steps start as new processes instead.
        """
        zygote = self.zygote()
        if zygote is None:
            return
        try:
            zygote.ensure_started()
        except ZygoteError as exc:
            self.log(
                {
                    "ts": utc_timestamp(),
                    "level": "warning",
                    "component": "executor",
                    "event": "zygote-unavailable",
                    "message": str(exc),
                }
            )

    # -- validation (everything refused here, before any run) ---------------------------------

    def _validate(self) -> None:
        spec = self.spec
        for key in spec:
            if key not in _SUPPORTED_SPEC and key not in _IGNORED_SPEC:
                raise UnsupportedFeatureError(f"spec.{key}")
        if not spec.get("entrypoint") or spec["entrypoint"] not in self.templates:
            raise ConfigError(f"{self.source}: spec.entrypoint {spec.get('entrypoint')!r} is not a template")
        if spec.get("activeDeadlineSeconds") is not None:
            self._int(spec["activeDeadlineSeconds"], "spec.activeDeadlineSeconds")
        args = spec.get("arguments") or {}
        for key in args:
            if key != "parameters":
                raise UnsupportedFeatureError(f"spec.arguments.{key}")
        self.workflow_parameters: dict[str, str | None] = {}
        for i, p in enumerate(args.get("parameters") or []):
            self._check_keys(
                p, {"name", "value", "default", "description", "enum"}, f"spec.arguments.parameters[{i}]"
            )
            value = p.get("value", p.get("default"))
            self.workflow_parameters[p["name"]] = None if value is None else str(value)
        self._check_volumes(spec.get("volumes") or [], "spec.volumes")
        for name, tpl in self.templates.items():
            self._validate_template(name, tpl)

    @staticmethod
    def _check_keys(
        obj: Mapping[str, Any], allowed: set[str], where: str, ignored: set[str] = frozenset()
    ) -> None:
        for key in obj:
            if key not in allowed and key not in ignored:
                raise UnsupportedFeatureError(f"{where}.{key}")

    @staticmethod
    def _int(value: Any, where: str) -> int:
        try:
            return int(str(value))
        except ValueError:
            raise UnsupportedFeatureError(where, f"{value!r} is not an integer") from None

    def _check_volumes(self, volumes: list[dict[str, Any]], where: str) -> None:
        for i, vol in enumerate(volumes):
            kinds = set(vol) - {"name"}
            if kinds - {"secret", "configMap", "emptyDir"} or len(kinds) != 1:
                raise UnsupportedFeatureError(
                    f"{where}[{i}]", f"volume kinds {sorted(kinds)} (only secret, configMap, emptyDir)"
                )
            if "secret" in vol:
                src = vol["secret"]
                self._check_keys(
                    src, {"secretName", "items", "optional", "defaultMode"}, f"{where}[{i}].secret"
                )
                self._require("secret", src.get("secretName"), None, src.get("optional"), where)
            if "configMap" in vol:
                src = vol["configMap"]
                self._check_keys(src, {"name", "items", "optional", "defaultMode"}, f"{where}[{i}].configMap")
                self._require("configmap", src.get("name"), None, src.get("optional"), where)

    def _require(self, kind: str, name: str | None, key: str | None, optional: Any, where: str) -> None:
        store = self.secrets if kind == "secret" else self.configmaps
        if optional:
            return
        if name not in store:
            arg = "secrets" if kind == "secret" else "configmaps"
            raise ConfigError(
                f"{where}: {kind} {name!r} is referenced by the template but was not given to the local "
                f"executor; pass it in {arg}={{{name!r}: {{...}}}}"
            )
        if key is not None and key not in store[name]:
            raise ConfigError(
                f"{where}: {kind} {name!r} has no key {key!r} (has: {', '.join(sorted(store[name])) or 'none'})"
            )

    def _validate_template(self, name: str, tpl: dict[str, Any]) -> None:
        self._validated.add(id(tpl))
        scope = self._scope_of.get(id(tpl), "")
        where = f"templates[{name}]" if not scope else f"workflowtemplates[{scope}].templates[{name}]"
        kinds = [k for k in ("steps", "dag", "script", "suspend") if k in tpl]
        for key in tpl:
            if key not in _SUPPORTED_TEMPLATE and key not in _IGNORED_TEMPLATE:
                raise UnsupportedFeatureError(f"{where}.{key}")
        if len(kinds) != 1:
            raise UnsupportedFeatureError(
                where, "a template must be exactly one of steps, dag, script, suspend"
            )
        if tpl.get("parallelism") is not None:
            if kinds[0] not in ("steps", "dag"):
                raise UnsupportedFeatureError(f"{where}.parallelism", "only on steps and dag templates")
            if self._int(tpl["parallelism"], f"{where}.parallelism") < 1:
                raise UnsupportedFeatureError(f"{where}.parallelism", "must be at least 1")
        if "suspend" in tpl:
            suspend = tpl["suspend"] or {}
            self._check_keys(suspend, {"duration"}, f"{where}.suspend")
            if suspend.get("duration") in (None, ""):
                raise UnsupportedFeatureError(
                    f"{where}.suspend", "no duration: it would wait for a manual resume"
                )
            parse_duration(suspend["duration"], f"{where}.suspend.duration")
            if tpl.get("outputs"):
                raise UnsupportedFeatureError(f"{where}.outputs", "outputs of a suspend template")
        inputs = tpl.get("inputs") or {}
        self._check_keys(inputs, {"parameters"}, f"{where}.inputs")
        input_names = set()
        for i, p in enumerate(inputs.get("parameters") or []):
            self._check_keys(
                p, {"name", "value", "default", "description", "enum"}, f"{where}.inputs.parameters[{i}]"
            )
            input_names.add(p["name"])
        if tpl.get("activeDeadlineSeconds") is not None:
            self._int(tpl["activeDeadlineSeconds"], f"{where}.activeDeadlineSeconds")
        sync = tpl.get("synchronization")
        if sync is not None:
            self._check_keys(sync, {"mutexes", "mutex"}, f"{where}.synchronization")
            mutexes = list(sync.get("mutexes") or []) + ([sync["mutex"]] if sync.get("mutex") else [])
            for j, m in enumerate(mutexes):
                self._check_keys(m, {"name", "namespace"}, f"{where}.synchronization.mutexes[{j}]")
                if m.get("namespace"):
                    raise UnsupportedFeatureError(f"{where}.synchronization.mutexes[{j}].namespace")
                self._check_vars(
                    str(m.get("name", "")), f"{where}.synchronization", input_names, set(), False
                )
        if tpl.get("retryStrategy") is not None:
            self._validate_retry(tpl["retryStrategy"], f"{where}.retryStrategy")
        self._check_volumes(tpl.get("volumes") or [], f"{where}.volumes")
        step_outputs: set[str] = set()
        if "script" in tpl:
            self._validate_script(tpl, where, input_names)
        elif "suspend" not in tpl:
            step_outputs = self._validate_group(tpl, where, input_names)
        outputs = tpl.get("outputs") or {}
        self._check_keys(outputs, {"parameters"}, f"{where}.outputs")
        for i, p in enumerate(outputs.get("parameters") or []):
            pw = f"{where}.outputs.parameters[{i}]"
            self._check_keys(p, {"name", "valueFrom", "description", "globalName"}, pw)
            if p.get("globalName"):
                raise UnsupportedFeatureError(f"{pw}.globalName")
            vf = p.get("valueFrom") or {}
            if "script" in tpl:
                self._check_keys(vf, {"path", "default"}, f"{pw}.valueFrom")
                if "path" not in vf:
                    raise UnsupportedFeatureError(f"{pw}.valueFrom", "script outputs need valueFrom.path")
                self._rewrite_check(vf["path"], tpl, f"{pw}.valueFrom.path")
            else:
                self._check_keys(vf, {"parameter", "default"}, f"{pw}.valueFrom")
                if "parameter" not in vf:
                    raise UnsupportedFeatureError(
                        f"{pw}.valueFrom", "steps/dag outputs need valueFrom.parameter"
                    )
                self._check_vars(
                    str(vf["parameter"]),
                    f"{pw}.valueFrom.parameter",
                    input_names,
                    step_outputs,
                    False,
                    prefix="steps" if "steps" in tpl else "tasks",
                )

    def _validate_retry(self, retry: dict[str, Any], where: str) -> None:
        self._check_keys(retry, {"limit", "retryPolicy", "backoff", "expression"}, where)
        if retry.get("limit") is not None:
            self._int(retry["limit"], f"{where}.limit")
        if retry.get("retryPolicy") not in (None, "Always", "OnFailure", "OnError", "OnTransientError"):
            raise UnsupportedFeatureError(f"{where}.retryPolicy", str(retry["retryPolicy"]))
        backoff = retry.get("backoff") or {}
        self._check_keys(backoff, {"duration", "factor", "maxDuration", "cap"}, f"{where}.backoff")
        for key in ("duration", "maxDuration", "cap"):
            if backoff.get(key) is not None:
                parse_duration(backoff[key], f"{where}.backoff.{key}")
        if backoff.get("factor") is not None:
            try:
                float(str(backoff["factor"]))
            except ValueError:
                raise UnsupportedFeatureError(f"{where}.backoff.factor", str(backoff["factor"])) from None
        if retry.get("expression"):
            try:
                for code, status in ((0, "Failed"), (2, "Failed"), (75, "Error")):
                    evaluate_condition(
                        retry["expression"], lambda t, c=code, s=status: _retry_operand(t, c, s)
                    )
            except (ValueError, TypeError) as exc:
                raise UnsupportedFeatureError(
                    f"{where}.expression", f"{retry['expression']!r} ({exc})"
                ) from None

    def _validate_script(self, tpl: dict[str, Any], where: str, input_names: set[str]) -> None:
        script = tpl["script"]
        sw = f"{where}.script"
        for key in script:
            if key not in _SUPPORTED_SCRIPT and key not in _IGNORED_SCRIPT:
                raise UnsupportedFeatureError(f"{sw}.{key}")
        command = list(script.get("command") or [])
        if command[:1] not in (["python"], ["python3"]) or len(command) != 1:
            raise UnsupportedFeatureError(f"{sw}.command", f"{command!r} (only [python])")
        self._check_vars(
            str(script.get("source", "")), f"{sw}.source", input_names, set(), False, allow_all_inputs=True
        )
        for a in script.get("args") or []:
            self._check_vars(str(a), f"{sw}.args", input_names, set(), False)
        volume_names = {v["name"] for v in (tpl.get("volumes") or []) + (self.spec.get("volumes") or [])}
        for i, m in enumerate(script.get("volumeMounts") or []):
            mw = f"{sw}.volumeMounts[{i}]"
            self._check_keys(m, {"name", "mountPath", "readOnly", "subPath"}, mw)
            if m.get("name") not in volume_names:
                raise ConfigError(f"{mw}: volume {m.get('name')!r} is not declared in the template's volumes")
        for i, e in enumerate(script.get("env") or []):
            ew = f"{sw}.env[{i}]"
            self._check_keys(e, {"name", "value", "valueFrom"}, ew)
            if "value" in e:
                self._check_vars(str(e["value"]), f"{ew}.value", input_names, set(), False)
            vf = e.get("valueFrom")
            if vf is not None:
                self._check_keys(vf, {"secretKeyRef", "configMapKeyRef"}, f"{ew}.valueFrom")
                for kind, ref in (
                    ("secret", vf.get("secretKeyRef")),
                    ("configmap", vf.get("configMapKeyRef")),
                ):
                    if ref is not None:
                        self._check_keys(ref, {"name", "key", "optional"}, ew)
                        self._require(kind, ref.get("name"), ref.get("key"), ref.get("optional"), ew)
        for i, e in enumerate(script.get("envFrom") or []):
            ew = f"{sw}.envFrom[{i}]"
            self._check_keys(e, {"secretRef", "configMapRef", "prefix"}, ew)
            for kind, ref in (("secret", e.get("secretRef")), ("configmap", e.get("configMapRef"))):
                if ref is not None:
                    self._check_keys(ref, {"name", "optional"}, ew)
                    self._require(kind, ref.get("name"), None, ref.get("optional"), ew)

    def _rewrite_check(self, path: str, tpl: dict[str, Any], where: str) -> None:
        if _variables(path):
            raise UnsupportedFeatureError(where, "variables in output paths")
        mounts = [str(_container_path(m["mountPath"])) for m in tpl["script"].get("volumeMounts") or []]
        p = _container_path(path)
        if not any(_under(p, PurePosixPath(r)) for r in list(IMPLICIT_MOUNTS) + mounts):
            raise UnsupportedFeatureError(where, f"{path!r} is outside /tmp and the template's volume mounts")

    def _validate_group(self, tpl: dict[str, Any], where: str, input_names: set[str]) -> set[str]:
        """Validate a steps/dag template; return the names of its steps/tasks."""
        if "steps" in tpl:
            groups = tpl["steps"] or []
            prefix = "steps"
            items = []
            seen: set[str] = set()
            for gi, group in enumerate(groups):
                if not isinstance(group, list):
                    raise UnsupportedFeatureError(f"{where}.steps[{gi}]", "expected a list of parallel steps")
                names_before = set(seen)
                for si, step in enumerate(group):
                    items.append((f"{where}.steps[{gi}][{si}]", step, names_before))
                    seen.add(step["name"])
        else:
            dag = tpl["dag"] or {}
            self._check_keys(dag, {"tasks"}, f"{where}.dag", {"failFast"})
            prefix = "tasks"
            tasks = dag.get("tasks") or []
            seen = {t["name"] for t in tasks}
            items = []
            graph: dict[str, set[str]] = {}
            for ti, task in enumerate(tasks):
                deps = self._task_dependencies(task, f"{where}.dag.tasks[{ti}]")
                for dep in deps:
                    if dep not in seen:
                        raise ConfigError(f"{where}.dag.tasks[{ti}]: depends on unknown task {dep!r}")
                graph[task["name"]] = set(deps)
            for ti, task in enumerate(tasks):
                items.append((f"{where}.dag.tasks[{ti}]", task, _ancestors(graph, task["name"])))
        scope = self._scope_of.get(id(tpl), "")
        for sw, step, visible in items:
            self._check_keys(step, _SUPPORTED_STEP, sw)
            if "steps" in tpl and ("dependencies" in step or "depends" in step):
                raise UnsupportedFeatureError(f"{sw}.dependencies")
            callee = self._check_callee(step, scope, sw)
            has_items = "withParam" in step or "withItems" in step
            args = step.get("arguments") or {}
            self._check_keys(args, {"parameters"}, f"{sw}.arguments")
            callee_name = callee["name"]
            callee_inputs = {p["name"] for p in (callee.get("inputs") or {}).get("parameters") or []}
            for i, p in enumerate(args.get("parameters") or []):
                self._check_keys(p, {"name", "value", "description"}, f"{sw}.arguments.parameters[{i}]")
                if p["name"] not in callee_inputs:
                    raise ConfigError(
                        f"{sw}: argument {p['name']!r} is not an input of template {callee_name!r}"
                    )
                self._check_vars(
                    str(p.get("value", "")),
                    f"{sw}.arguments.parameters[{i}].value",
                    input_names,
                    visible,
                    has_items,
                    prefix=prefix,
                )
            if "withParam" in step:
                self._check_vars(
                    str(step["withParam"]), f"{sw}.withParam", input_names, visible, False, prefix=prefix
                )
            if "withItems" in step and not isinstance(step["withItems"], list):
                raise UnsupportedFeatureError(f"{sw}.withItems", "expected a list")
            if "when" in step:
                when = str(step["when"])
                self._check_vars(when, f"{sw}.when", input_names, visible, has_items, prefix=prefix)
                try:
                    evaluate_condition(_VAR.sub("x", when))
                except ValueError as exc:
                    raise UnsupportedFeatureError(f"{sw}.when", f"{when!r} ({exc})") from None
        return {s["name"] for _, s, _ in items}

    # -- templateRef --------------------------------------------------------------------------

    def callee(self, step: dict[str, Any], scope: str) -> dict[str, Any]:
        """The template a step (or task) runs: ``template`` looked up in the caller's scope (its
        WorkflowTemplate), or ``templateRef`` in the WorkflowTemplate it names. Validated already."""
        ref = step.get("templateRef")
        if ref is not None:
            return self.referenced[ref["name"]][ref["template"]]
        return (self.referenced[scope] if scope else self.templates)[step["template"]]

    def _check_callee(self, step: dict[str, Any], scope: str, where: str) -> dict[str, Any]:
        """Validate what a step names and return that template (validating a referenced one once)."""
        if "inline" in step:
            raise UnsupportedFeatureError(f"{where}.inline")
        ref = step.get("templateRef")
        if ref is None:
            own = self.referenced[scope] if scope else self.templates
            if step.get("template") not in own:
                raise ConfigError(f"{where}: template {step.get('template')!r} is not defined")
            callee = own[step["template"]]
            if id(callee) not in self._validated:  # a template of a referenced WorkflowTemplate
                self._validate_template(step["template"], callee)
            return callee
        rw = f"{where}.templateRef"
        if "template" in step:
            raise UnsupportedFeatureError(rw, "a step has either template or templateRef, not both")
        if not isinstance(ref, dict):
            raise UnsupportedFeatureError(rw, "expected {name, template}")
        self._check_keys(ref, {"name", "template", "clusterScope"}, rw)
        if ref.get("clusterScope"):
            raise UnsupportedFeatureError(f"{rw}.clusterScope", "ClusterWorkflowTemplates")
        name, template = ref.get("name"), ref.get("template")
        if name not in self.referenced:
            given = ", ".join(sorted(self.referenced)) or "none"
            raise UnsupportedFeatureError(
                f"{rw}.name",
                f"{name!r} is not a WorkflowTemplate given to the local executor (given: {given}); "
                "render it next to this template, or pass its rendered YAML in workflow_templates",
            )
        if name in self._ambiguous:
            raise ConfigError(
                f"{rw}.name: {name!r} names several WorkflowTemplates "
                f"({', '.join(self._ambiguous[name])}); give the executor one"
            )
        if template not in self.referenced[name]:
            held = ", ".join(sorted(self.referenced[name]))
            raise UnsupportedFeatureError(
                f"{rw}.template", f"WorkflowTemplate {name!r} has no template {template!r} (it has: {held})"
            )
        callee = self.referenced[name][template]
        if id(callee) not in self._validated:
            self._validate_template(template, callee)
        return callee

    def _task_dependencies(self, task: dict[str, Any], where: str) -> list[str]:
        deps = list(task.get("dependencies") or [])
        depends = task.get("depends")
        if depends:
            for part in re.split(r"\s*&&\s*", str(depends).strip()):
                m = re.fullmatch(r"([A-Za-z0-9_-]+)(?:\.Succeeded)?", part)
                if not m:
                    raise UnsupportedFeatureError(
                        f"{where}.depends", f"{depends!r} (only 'a && b.Succeeded')"
                    )
                deps.append(m.group(1))
        return deps

    def _check_vars(
        self,
        text: str,
        where: str,
        input_names: set[str],
        visible_steps: set[str],
        has_item: bool,
        *,
        prefix: str = "steps",
        allow_all_inputs: bool = False,
    ) -> None:
        if text.count("{{") != len(_variables(text)):
            raise UnsupportedFeatureError(where, f"unbalanced '{{{{' in {text!r}")
        for var in _variables(text):
            if var.startswith("="):
                raise UnsupportedFeatureError(where, f"expression {{{{{var}}}}}")
            parts = var.split(".")
            if var == "workflow.name":
                continue
            if len(parts) == 3 and parts[:2] == ["workflow", "parameters"]:
                if parts[2] not in self.workflow_parameters:
                    raise ConfigError(f"{where}: {{{{{var}}}}} names no spec.arguments parameter")
                continue
            if len(parts) == 3 and parts[:2] == ["inputs", "parameters"]:
                if parts[2] not in input_names:
                    raise ConfigError(f"{where}: {{{{{var}}}}} names no input of this template")
                continue
            if var == "inputs.parameters" and allow_all_inputs:
                continue
            if parts[0] == "item" and has_item and len(parts) <= 2:
                continue
            if (
                parts[0] in ("steps", "tasks")
                and parts[0] == prefix
                and len(parts) >= 4
                and parts[2] == "outputs"
            ):
                if parts[1] not in visible_steps:
                    raise ConfigError(f"{where}: {{{{{var}}}}} names no earlier step/task")
                if (len(parts) == 5 and parts[3] == "parameters") or (
                    len(parts) == 4 and parts[3] == "result"
                ):
                    continue
            raise UnsupportedFeatureError(where, f"variable {{{{{var}}}}}")

    # -- running --------------------------------------------------------------------------------

    def run(
        self,
        parameters: Mapping[str, str] | None = None,
        workflow_name: str | None = None,
        *,
        event_id: str | None = None,
    ) -> WorkflowResult:
        """Run the entrypoint to completion and return what happened (never raises for a failing step).

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
        run = _Run(self, wf_name, params, event_id)
        return run.execute()


class _Gate:
    """``parallelism``: at most ``limit`` units of work at once (a context manager per unit)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._slots = threading.BoundedSemaphore(limit)

    def __enter__(self) -> _Gate:
        self._slots.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._slots.release()


@dataclass
class _Scope:
    inputs: dict[str, str]
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {"parameters":{}, "result":..}
    item: Any = None
    has_item: bool = False
    where: str = ""  # the WorkflowTemplate whose templates `template:` names ('' = the one being run)


class _Run:
    """The state of one workflow run (one call of :meth:`LocalExecutor.run`)."""

    def __init__(self, ex: LocalExecutor, name: str, params: dict[str, Any], event_id: str | None) -> None:
        self.ex = ex
        self.name = name
        self.params = params
        self.event_id = event_id
        self.nodes: list[NodeResult] = []
        self.nodes_lock = threading.Lock()
        ads = ex.spec.get("activeDeadlineSeconds")
        self.started = time.monotonic()
        self.deadline = self.started + int(ads) if ads is not None else None

    # logging
    def log(self, **record: Any) -> None:
        level = record.pop("level", None) or _level_of(record)
        base = {"ts": utc_timestamp(), "level": level, "component": "executor", "workflow": self.name}
        if self.event_id:
            base["event_id"] = self.event_id
        base.update({k: v for k, v in record.items() if v is not None})
        self.emit(base)

    def emit(self, record: dict[str, Any]) -> None:
        try:
            self.ex.log(record)
        except Exception:  # noqa: BLE001 - a broken log sink must not break a run
            pass

    def forward_step_log(self, stderr: str, tpl: dict[str, Any], node_name: str, attempt: int) -> None:
        """Pass a step process's stderr on: its JSON records as they are, other lines grouped."""
        extra = {"workflow": self.name, "node": node_name, "attempt": attempt}
        loose: list[str] = []

        def flush_loose() -> None:
            if loose:
                self.emit(
                    {
                        "ts": utc_timestamp(),
                        "level": "info",
                        "component": "step",
                        "step": tpl["name"],
                        **({"event_id": self.event_id} if self.event_id else {}),
                        "event": "step-stderr",
                        "message": "\n".join(loose)[-STDERR_TAIL_CHARS:],
                        **extra,
                    }
                )
                loose.clear()

        for line in self.redact(stderr).splitlines():
            record = _json_record(line)
            if record is None:
                if line.strip():
                    loose.append(line)
                continue
            flush_loose()
            record.setdefault("component", "step")
            record.setdefault("step", tpl["name"])
            if self.event_id:
                record.setdefault("event_id", self.event_id)
            self.emit({**record, **extra})
        flush_loose()

    def redact(self, text: str) -> str:
        for value in self.ex._secret_values:
            text = text.replace(value, REDACTED)
        return text

    def add(self, node: NodeResult) -> NodeResult:
        with self.nodes_lock:
            self.nodes.append(node)
        return node

    def execute(self) -> WorkflowResult:
        self.log(event="workflow-started", phase="Running", template=self.ex.spec["entrypoint"])
        entry = self.ex.templates[self.ex.spec["entrypoint"]]
        try:
            inputs = self.bind_inputs(entry, {}, "spec.entrypoint")
            node = self.run_template(entry, inputs, self.name, self.deadline)
            phase, message, outputs = node.phase, node.message, node.outputs
        except _NodeError as exc:
            phase, message, outputs = ERROR, self.redact(str(exc)), {}
        duration = time.monotonic() - self.started
        self.log(event="workflow-finished", phase=phase, duration=round(duration, 3), message=message or None)
        return WorkflowResult(self.name, phase, list(self.nodes), message, duration, outputs)

    # variables
    def lookup(self, scope: _Scope, var: str) -> str:
        parts = var.split(".")
        if var == "workflow.name":
            return self.name
        if parts[:2] == ["workflow", "parameters"]:
            return str(self.params[parts[2]])
        if var == "inputs.parameters":
            return json.dumps([{"name": k, "value": v} for k, v in scope.inputs.items()])
        if parts[:2] == ["inputs", "parameters"]:
            return scope.inputs[parts[2]]
        if parts[0] == "item":
            if not scope.has_item:
                raise _NodeError(f"{{{{{var}}}}} used outside withParam/withItems")
            item = scope.item
            if len(parts) == 1:
                return item if isinstance(item, str) else _go_json(item)
            if not isinstance(item, dict) or parts[1] not in item:
                raise _NodeError(f"{{{{{var}}}}}: the item has no field {parts[1]!r}")
            value = item[parts[1]]
            return value if isinstance(value, str) else _go_json(value)
        if parts[0] in ("steps", "tasks"):
            outs = scope.steps.get(parts[1])
            if outs is None:
                raise _NodeError(f"{{{{{var}}}}}: step {parts[1]!r} has not run")
            if parts[3] == "result":
                if outs.get("result") is None:
                    raise _NodeError(f"{{{{{var}}}}}: step {parts[1]!r} has no result")
                return outs["result"]
            value = outs["parameters"].get(parts[4])
            if value is None:
                raise _NodeError(
                    f"{{{{{var}}}}}: step {parts[1]!r} has no output {parts[4]!r} (and no default)"
                )
            return value
        raise _NodeError(f"{NOT_SUPPORTED}variable {{{{{var}}}}}")

    def render(self, text: Any, scope: _Scope) -> str:
        return _substitute(str(text), lambda v: self.lookup(scope, v))

    def bind_inputs(self, tpl: dict[str, Any], given: dict[str, str], where: str) -> dict[str, str]:
        inputs: dict[str, str] = {}
        for p in (tpl.get("inputs") or {}).get("parameters") or []:
            if p["name"] in given:
                inputs[p["name"]] = given[p["name"]]
            elif "value" in p:
                inputs[p["name"]] = str(p["value"])
            elif "default" in p:
                inputs[p["name"]] = str(p["default"])
            else:
                raise _NodeError(
                    f"{where}: input parameter {p['name']!r} of template {tpl['name']!r} has no value"
                )
            if p.get("enum") and inputs[p["name"]] not in [str(e) for e in p["enum"]]:
                raise _NodeError(
                    f"{where}: input {p['name']!r}={inputs[p['name']]!r} not in enum {p['enum']}"
                )
        return inputs

    # templates
    def run_template(
        self, tpl: dict[str, Any], inputs: dict[str, str], node_name: str, deadline: float | None
    ) -> NodeResult:
        if tpl.get("activeDeadlineSeconds") is not None:
            own = time.monotonic() + int(str(tpl["activeDeadlineSeconds"]))
            deadline = own if deadline is None else min(deadline, own)
        scope = _Scope(inputs=inputs, where=self.ex._scope_of.get(id(tpl), ""))
        locks: list[tuple[str, threading.Lock]] = []
        sync = tpl.get("synchronization") or {}
        names = [
            self.render(m["name"], scope)
            for m in list(sync.get("mutexes") or []) + ([sync["mutex"]] if sync.get("mutex") else [])
        ]
        for mutex_name in sorted(set(names)):  # sorted: two templates never deadlock on order
            lock = _mutex(mutex_name)
            if not lock.acquire(blocking=False):
                self.log(event="mutex-waiting", node=node_name, template=tpl["name"], mutex=mutex_name)
                lock.acquire()
            locks.append((mutex_name, lock))
            self.log(event="mutex-acquired", node=node_name, template=tpl["name"], mutex=mutex_name)
        try:
            if "script" in tpl:
                return self.run_script(tpl, scope, node_name, deadline)
            if "suspend" in tpl:
                return self.run_suspend(tpl, node_name, deadline)
            return self.run_group(tpl, scope, node_name, deadline)
        finally:
            for mutex_name, lock in reversed(locks):
                lock.release()
                self.log(event="mutex-released", node=node_name, template=tpl["name"], mutex=mutex_name)

    def run_suspend(self, tpl: dict[str, Any], node_name: str, deadline: float | None) -> NodeResult:
        """A suspend with a duration: wait that long (never past the deadline); no process."""
        started = time.monotonic()
        seconds = parse_duration(tpl["suspend"]["duration"], "suspend.duration")
        phase, message = SUCCEEDED, ""
        if deadline is not None and started + seconds > deadline:
            seconds = max(0.0, deadline - started)
            phase, message = FAILED, "activeDeadlineSeconds exceeded while suspended"
        if seconds > 0:
            time.sleep(seconds)
        node = self.add(
            NodeResult(node_name, tpl["name"], phase, None, {}, time.monotonic() - started, 1, message)
        )
        self.log(
            event="node-finished",
            node=node_name,
            template=tpl["name"],
            phase=phase,
            duration=round(node.duration, 3),
            message=message or None,
        )
        return node

    def run_group(
        self, tpl: dict[str, Any], scope: _Scope, node_name: str, deadline: float | None
    ) -> NodeResult:
        started = time.monotonic()
        phase, message = SUCCEEDED, ""
        # parallelism: at most N of this template's steps, tasks or items at once (a slot per leaf
        # unit of work, never held by a step while its own items wait for slots)
        gate = _Gate(int(tpl["parallelism"])) if tpl.get("parallelism") else None
        try:
            if "steps" in tpl:
                for group in tpl["steps"] or []:
                    results = self.run_parallel(
                        [(step, scope, f"{node_name}.{step['name']}", deadline) for step in group], gate
                    )
                    bad = [(s, r) for s, r in zip(group, results) if r[0] not in (SUCCEEDED, SKIPPED)]
                    for step, (_, outs) in zip(group, results):
                        scope.steps[step["name"]] = outs
                    if bad:
                        step, (phase, _) = bad[0]
                        message = f"child {step['name']!r} {phase.lower()}"
                        break
            else:
                phase, message = self.run_dag(tpl, scope, node_name, deadline, gate)
            outputs: dict[str, str] = {}
            if phase == SUCCEEDED:
                for p in (tpl.get("outputs") or {}).get("parameters") or []:
                    vf = p["valueFrom"]
                    try:
                        outputs[p["name"]] = self.render(vf["parameter"], scope)
                    except _NodeError:
                        if "default" not in vf:
                            raise
                        outputs[p["name"]] = str(vf["default"])
        except _NodeError as exc:
            phase, message, outputs = ERROR, self.redact(str(exc)), {}
        node = self.add(
            NodeResult(node_name, tpl["name"], phase, None, outputs, time.monotonic() - started, 1, message)
        )
        self.log(
            event="node-finished",
            node=node_name,
            template=tpl["name"],
            phase=phase,
            duration=round(node.duration, 3),
            message=message or None,
        )
        return node

    def run_dag(
        self,
        tpl: dict[str, Any],
        scope: _Scope,
        node_name: str,
        deadline: float | None,
        gate: _Gate | None = None,
    ) -> tuple[str, str]:
        tasks = {t["name"]: t for t in (tpl["dag"] or {}).get("tasks") or []}
        deps = {n: set(self.ex._task_dependencies(t, n)) for n, t in tasks.items()}
        done: dict[str, str] = {}
        phase, message = SUCCEEDED, ""
        while len(done) < len(tasks):
            ready = [n for n in tasks if n not in done and deps[n] <= set(done)]
            blocked = [n for n in ready if any(done[d] not in (SUCCEEDED, SKIPPED) for d in deps[n])]
            for n in blocked:
                done[n] = "Omitted"
                scope.steps[n] = {"parameters": {}, "result": None}
            ready = [n for n in ready if n not in blocked]
            if not ready:
                if not blocked:  # validation refuses cycles; never spin
                    raise _NodeError(f"{node_name}: dag tasks {sorted(set(tasks) - set(done))} can never run")
                continue
            results = self.run_parallel(
                [(tasks[n], scope, f"{node_name}.{n}", deadline) for n in ready], gate
            )
            for n, (p, outs) in zip(ready, results):
                done[n] = p
                scope.steps[n] = outs
                if p not in (SUCCEEDED, SKIPPED) and phase == SUCCEEDED:
                    phase, message = p, f"child {n!r} {p.lower()}"
        return phase, message

    def run_parallel(
        self, calls: list[tuple[dict[str, Any], _Scope, str, float | None]], gate: _Gate | None = None
    ) -> list[tuple[str, dict]]:
        if len(calls) == 1:
            return [self.run_step(*calls[0], gate)]
        with ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="step") as pool:
            return list(pool.map(lambda c: self.run_step(*c, gate), calls))

    def run_step(
        self,
        step: dict[str, Any],
        scope: _Scope,
        node_name: str,
        deadline: float | None,
        gate: _Gate | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """Run one step/task (expanding withParam/withItems); return (phase, outputs for lookups)."""
        callee = self.ex.callee(step, scope.where)
        try:
            if "withParam" in step or "withItems" in step:
                if "withItems" in step:
                    items = step["withItems"]
                else:
                    raw = self.render(step["withParam"], scope)
                    try:
                        items = json.loads(raw)
                    except json.JSONDecodeError:
                        raise _NodeError(
                            f"{node_name}: withParam is not a JSON list: {raw[:200]!r}"
                        ) from None
                    if not isinstance(items, list):
                        raise _NodeError(f"{node_name}: withParam is not a JSON list: {raw[:200]!r}")
                children = [
                    (
                        step,
                        _Scope(scope.inputs, scope.steps, item, True, scope.where),
                        f"{node_name}({i})",
                        deadline,
                    )
                    for i, item in enumerate(items)
                ]
                if not children:
                    self.add(NodeResult(node_name, callee["name"], SKIPPED, message="withParam is empty"))
                    return SKIPPED, {"parameters": self.skipped_outputs(callee), "result": None}
                results = self._run_items(children, gate)
                phase = SUCCEEDED
                for p, _ in results:
                    if p not in (SUCCEEDED, SKIPPED):
                        phase = p
                        break
                names = {p["name"] for p in (callee.get("outputs") or {}).get("parameters") or []}
                aggregated = {n: json.dumps([o["parameters"].get(n) for _, o in results]) for n in names}
                return phase, {
                    "parameters": aggregated,
                    "result": json.dumps([o.get("result") for _, o in results]),
                }
            with gate if gate is not None else contextlib.nullcontext():
                return self._run_one(step, scope, node_name, deadline)
        except _NodeError as exc:
            message = self.redact(str(exc))
            self.add(NodeResult(node_name, callee["name"], ERROR, message=message))
            self.log(
                event="node-finished",
                node=node_name,
                template=callee["name"],
                phase=ERROR,
                duration=0.0,
                message=message,
            )
            return ERROR, {"parameters": {}, "result": None}

    def _run_items(
        self, children: list[tuple[dict, _Scope, str, float | None]], gate: _Gate | None = None
    ) -> list[tuple[str, dict]]:
        if len(children) == 1:
            return [self._run_one_safe(*children[0], gate)]
        workers = len(children) if gate is None else min(len(children), gate.limit)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="item") as pool:
            return list(pool.map(lambda c: self._run_one_safe(*c, gate), children))

    def _run_one_safe(
        self, step: dict, scope: _Scope, node_name: str, deadline: float | None, gate: _Gate | None = None
    ) -> tuple[str, dict]:
        try:
            with gate if gate is not None else contextlib.nullcontext():
                return self._run_one(step, scope, node_name, deadline)
        except _NodeError as exc:
            message = self.redact(str(exc))
            name = self.ex.callee(step, scope.where)["name"]
            self.add(NodeResult(node_name, name, ERROR, message=message, item=scope.item))
            self.log(
                event="node-finished",
                node=node_name,
                template=name,
                phase=ERROR,
                duration=0.0,
                message=message,
            )
            return ERROR, {"parameters": {}, "result": None}

    def _run_one(self, step: dict, scope: _Scope, node_name: str, deadline: float | None) -> tuple[str, dict]:
        callee = self.ex.callee(step, scope.where)
        if "when" in step:
            when = self.render(step["when"], scope)
            try:
                go = evaluate_condition(when)
            except ValueError as exc:
                raise _NodeError(f"{node_name}: cannot evaluate when {when!r}: {exc}") from None
            if not go:
                node = self.add(
                    NodeResult(
                        node_name,
                        callee["name"],
                        SKIPPED,
                        message=f"when {when!r} evaluated false",
                        item=scope.item if scope.has_item else None,
                        outputs=self.skipped_outputs(callee),
                    )
                )
                self.log(
                    event="node-finished",
                    node=node_name,
                    template=callee["name"],
                    phase=SKIPPED,
                    duration=0.0,
                    message=node.message,
                )
                return SKIPPED, {"parameters": dict(node.outputs), "result": None}
        given = {
            p["name"]: self.render(p.get("value", ""), scope)
            for p in (step.get("arguments") or {}).get("parameters") or []
        }
        inputs = self.bind_inputs(callee, given, node_name)
        node = self.run_template(callee, inputs, node_name, deadline)
        if scope.has_item:
            node.item = scope.item
        return node.phase, {"parameters": dict(node.outputs), "result": node.result}

    @staticmethod
    def skipped_outputs(tpl: dict[str, Any]) -> dict[str, str]:
        outs = {}
        for p in (tpl.get("outputs") or {}).get("parameters") or []:
            vf = p.get("valueFrom") or {}
            if "default" in vf:
                outs[p["name"]] = str(vf["default"])
        return outs

    # scripts
    def run_script(
        self, tpl: dict[str, Any], scope: _Scope, node_name: str, deadline: float | None
    ) -> NodeResult:
        retry = tpl.get("retryStrategy") or {}
        limit = int(str(retry.get("limit", 0))) if retry else 0
        backoff = retry.get("backoff") or {}
        delay = parse_duration(backoff["duration"], "backoff.duration") if backoff.get("duration") else 0.0
        factor = float(str(backoff.get("factor", 1) or 1))
        max_duration = (
            parse_duration(backoff["maxDuration"], "backoff.maxDuration")
            if backoff.get("maxDuration")
            else None
        )
        cap = parse_duration(backoff["cap"], "backoff.cap") if backoff.get("cap") else None
        started = time.monotonic()
        attempt = 0
        waited = nominal_waited = 0.0
        while True:
            attempt += 1
            a_start = time.monotonic()
            outcome = self.attempt(tpl, scope, f"{node_name}", deadline, attempt)
            phase, exit_code, outputs, result, message, tail = outcome
            if phase != SUCCEEDED:
                self.log(
                    event="attempt-failed",
                    node=node_name,
                    template=tpl["name"],
                    step=tpl["name"],
                    phase=phase,
                    attempt=attempt,
                    exit_code=exit_code,
                    duration=round(time.monotonic() - a_start, 3),
                    message=message or None,
                    stderr_tail=tail or None,
                )
            if phase == SUCCEEDED or attempt > limit:
                break
            if phase == ERROR and retry.get("retryPolicy") == "OnFailure":
                break
            if phase == FAILED and retry.get("retryPolicy") == "OnError":
                break
            if retry.get("expression"):
                status = phase
                if not evaluate_condition(
                    retry["expression"], lambda t, c=exit_code, s=status: _retry_operand(t, c, s)
                ):
                    message += f" (not retried: retryStrategy.expression {retry['expression']!r} is false)"
                    break
            nominal = delay * (factor ** (attempt - 1))
            if cap is not None:
                nominal = min(nominal, cap)
            wait = nominal * self.ex.backoff_scale
            # maxDuration counts time since the first attempt as if the backoffs had been unscaled
            elapsed = time.monotonic() - started - waited + nominal_waited
            if max_duration is not None and elapsed + nominal > max_duration:
                message += f" (not retried: backoff.maxDuration {backoff['maxDuration']} reached)"
                break
            if deadline is not None and time.monotonic() + wait >= deadline:
                break
            self.log(
                event="retry-scheduled",
                node=node_name,
                template=tpl["name"],
                step=tpl["name"],
                attempt=attempt + 1,
                delay=round(wait, 3),
            )
            time.sleep(wait)
            waited += wait
            nominal_waited += nominal
        node = NodeResult(
            node_name,
            tpl["name"],
            phase,
            exit_code,
            outputs,
            time.monotonic() - started,
            attempt,
            message,
            result=result,
        )
        self.add(node)
        self.log(
            event="node-finished",
            node=node_name,
            template=tpl["name"],
            step=tpl["name"],
            phase=phase,
            exit_code=exit_code,
            attempts=attempt,
            duration=round(node.duration, 3),
            message=message or None,
            stderr_tail=tail if phase != SUCCEEDED and tail else None,
        )
        return node

    def attempt(
        self, tpl: dict[str, Any], scope: _Scope, node_name: str, deadline: float | None, attempt: int
    ) -> tuple[str, int | None, dict[str, str], str | None, str, str]:
        """One process run of a script template: (phase, exit code, outputs, result, message, stderr tail)."""
        script = tpl["script"]
        with tempfile.TemporaryDirectory(prefix="imagebump-step-", dir=self.ex.work_root) as tmp:
            root = Path(tmp)
            try:
                mounts = self.materialise(tpl, root)
                env = self.environment(tpl, scope, root, mounts)
                script_path = self.map_path(STAGING_SCRIPT, root, mounts)
                script_path.parent.mkdir(parents=True, exist_ok=True)
                script_path.write_text(self.render(script.get("source", ""), scope))
                argv = (
                    [self.ex.python]
                    + [self.render(a, scope) for a in script.get("args") or []]
                    + [str(script_path)]
                )
            except _NodeError as exc:
                return ERROR, None, {}, None, self.redact(str(exc)), ""
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            if timeout is not None and timeout <= 0:
                return FAILED, None, {}, None, "activeDeadlineSeconds exceeded before start", ""
            returncode, out, err, killed = self.spawn(argv, tmp, env, timeout, node_name, attempt)
            stdout = out.decode(errors="replace")
            stderr = err.decode(errors="replace")
            if returncode is not None:
                self.forward_step_log(stderr, tpl, node_name, attempt)
            tail = _tail(self.redact(stderr))
            if returncode is None:
                return ERROR, None, {}, None, self.redact(stderr), ""
            if killed:
                return (
                    FAILED,
                    returncode,
                    {},
                    None,
                    f"activeDeadlineSeconds exceeded: process killed after {timeout:.1f}s",
                    tail,
                )
            if returncode != 0:
                last = tail.strip().splitlines()[-1] if tail.strip() else ""
                record = _json_record(last)  # a step's last word is its error record
                if record is not None and isinstance(record.get("message"), str):
                    last = record["message"]
                return FAILED, returncode, {}, None, f"exit code {returncode}: {last}".strip(), tail
            outputs = {}
            for p in (tpl.get("outputs") or {}).get("parameters") or []:
                vf = p["valueFrom"]
                path = self.map_path(vf["path"], root, mounts)
                if path.is_file():
                    outputs[p["name"]] = path.read_text()
                elif "default" in vf:
                    outputs[p["name"]] = str(vf["default"])
                else:
                    return (
                        ERROR,
                        0,
                        {},
                        None,
                        f"output parameter {p['name']!r}: {vf['path']} was not written and has no default",
                        tail,
                    )
            return SUCCEEDED, 0, outputs, stdout.rstrip("\n"), "", tail

    def spawn(
        self,
        argv: list[str],
        cwd: str,
        env: dict[str, str],
        timeout: float | None,
        node_name: str,
        attempt: int,
    ) -> tuple[int | None, bytes, bytes, bool]:
        """Run ``argv`` as the step's process: (return code or None if unknown, stdout, stderr, killed).

        A ``python -m MODULE`` command is forked from the warm zygote when prefork is on (see
        :mod:`workflows.prefork`); anything else, or when the zygote cannot start, is a new process.
        """
        zygote = self.ex.zygote()
        if zygote is not None and zygote.eligible(argv, env):
            try:
                outcome = zygote.run(argv, cwd=cwd, env=env, timeout=timeout)
            except ZygoteError as exc:
                if exc.started:
                    self.log(event="zygote-lost", node=node_name, attempt=attempt, message=str(exc))
                    return None, b"", f"the step's process was lost: {exc}".encode(), False
                self.log(event="zygote-unavailable", node=node_name, attempt=attempt, message=str(exc))
            else:
                return outcome.returncode, outcome.stdout, outcome.stderr, outcome.timed_out
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        killed = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            killed = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
        return proc.returncode, out, err, killed

    def mount_points(self, tpl: dict[str, Any]) -> list[PurePosixPath]:
        points = [_container_path(m["mountPath"]) for m in tpl["script"].get("volumeMounts") or []]
        return sorted(
            points + [PurePosixPath(p) for p in IMPLICIT_MOUNTS], key=lambda p: len(p.parts), reverse=True
        )

    def map_path(self, container_path: str, root: Path, mounts: list[PurePosixPath]) -> Path:
        p = _container_path(container_path)
        for m in mounts:
            if _under(p, m):
                return root / "mounts" / str(p).lstrip("/")
        raise _NodeError(f"path {container_path!r} is outside /tmp and the template's volume mounts")

    def rewrite_value(self, value: str, root: Path, mounts: list[PurePosixPath]) -> str:
        """Rewrite an env value that names a container path under a mount into the temp dir."""
        if not value.startswith("/"):
            return value
        p = _container_path(value)
        for m in mounts:
            if _under(p, m):
                return str(root / "mounts" / str(p).lstrip("/")) + (
                    "/" if value.endswith("/") and len(value) > 1 else ""
                )
        return value

    def materialise(self, tpl: dict[str, Any], root: Path) -> list[PurePosixPath]:
        volumes = {v["name"]: v for v in (self.ex.spec.get("volumes") or []) + (tpl.get("volumes") or [])}
        mounts = self.mount_points(tpl)
        for point in IMPLICIT_MOUNTS:
            (root / "mounts" / point.lstrip("/")).mkdir(parents=True, exist_ok=True)
        for m in tpl["script"].get("volumeMounts") or []:
            vol = volumes[m["name"]]
            target = root / "mounts" / str(_container_path(m["mountPath"])).lstrip("/")
            files: dict[str, str] = {}
            if "secret" in vol or "configMap" in vol:
                src = vol.get("secret") or vol.get("configMap")
                name = src.get("secretName") or src.get("name")
                store = self.ex.secrets if "secret" in vol else self.ex.configmaps
                data = store.get(name)
                if data is None:
                    if not src.get("optional"):
                        raise _NodeError(
                            f"volume {m['name']!r}: {'secret' if 'secret' in vol else 'configmap'} "
                            f"{name!r} was not given to the local executor"
                        )
                    data = {}
                if src.get("items"):
                    for it in src["items"]:
                        if it["key"] in data:
                            files[it.get("path", it["key"])] = data[it["key"]]
                        elif not src.get("optional"):
                            raise _NodeError(f"volume {m['name']!r}: {name!r} has no key {it['key']!r}")
                else:
                    files = dict(data)
            if m.get("subPath"):
                content = files.get(m["subPath"])
                if content is None:
                    raise _NodeError(f"volume {m['name']!r}: no key {m['subPath']!r} for subPath")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content)
                continue
            target.mkdir(parents=True, exist_ok=True)
            for rel, content in files.items():
                path = target / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)
                if "secret" in vol:
                    path.chmod(0o600)
        return mounts

    def environment(
        self, tpl: dict[str, Any], scope: _Scope, root: Path, mounts: list[PurePosixPath]
    ) -> dict[str, str]:
        base = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "PYTHONPATH": self.ex.project_root,
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "HOME": str(root),
            "TMPDIR": str(root),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env = dict(base)
        env.update(self.ex.env)
        # Only what the template declares names container paths; the caller's env is host paths.
        declared: dict[str, str] = {
            "hera__outputs_directory": self.rewrite_value(DEFAULT_OUTPUTS_DIRECTORY, root, mounts)
        }
        script = tpl["script"]
        for e in script.get("envFrom") or []:
            ref = e.get("secretRef") or e.get("configMapRef")
            store = self.ex.secrets if "secretRef" in e else self.ex.configmaps
            for k, v in (store.get(ref["name"]) or {}).items():
                declared[e.get("prefix", "") + k] = v
        for e in script.get("env") or []:
            if "value" in e:
                declared[e["name"]] = self.rewrite_value(self.render(e["value"], scope), root, mounts)
            elif e.get("valueFrom"):
                vf = e["valueFrom"]
                ref = vf.get("secretKeyRef") or vf.get("configMapKeyRef")
                store = self.ex.secrets if "secretKeyRef" in vf else self.ex.configmaps
                value = (store.get(ref["name"]) or {}).get(ref["key"])
                if value is None:
                    if ref.get("optional"):
                        continue
                    raise _NodeError(
                        f"env {e['name']}: {ref['name']!r}/{ref['key']!r} was not given to the local executor"
                    )
                declared[e["name"]] = value
            else:
                declared[e["name"]] = ""
        env.update(declared)
        return env


def clear_mutexes() -> None:
    """Forget all named locks (tests only; never while a workflow runs)."""
    with _MUTEXES_LOCK:
        _MUTEXES.clear()


__all__ = [
    "NOT_SUPPORTED",
    "LocalExecutor",
    "NodeResult",
    "UnsupportedFeatureError",
    "WorkflowResult",
    "evaluate_condition",
    "json_logger",
    "parse_duration",
]

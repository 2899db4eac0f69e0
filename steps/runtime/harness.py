"""What every step needs from its runtime, without importing Hera.

A step runs as ``python -m steps.runtime.launcher -e steps.<module>:run ARGS.json`` (what Hera's runner
accepts, without importing Hera: :mod:`steps.runtime.launcher`). The entry prints the return value (our
output contract, as JSON, as Hera's runner does) as the template's ``result``; named output
parameters are files under ``$hera__outputs_directory/parameters/<name>`` that the template
declares with ``valueFrom.path`` (and a ``default`` for skipped steps). :func:`emit_outputs`
writes those files from the output model, one per field, in kebab-case.

:func:`step_entry` wraps a step's ``run``: it configures logging once (:func:`configure_logging`),
and turns known errors into one log record and the exit code Argo's retryStrategy keys on (see
:mod:`steps.domain.errors`); anything else is logged with its traceback and exits 3.

Logging: every record is one JSON object on one line of stderr (the pod log, or the local
executor's log, which forwards it), with these keys:

=============  =====================================================================================
``ts``         UTC time, RFC 3339 with milliseconds (``2026-12-02T10:00:00.123Z``)
``level``      ``debug`` / ``info`` / ``warning`` / ``error``
``component``  ``step`` (the local sensor and executor write ``sensor`` / ``executor``; the ``imagebump``
               command ``cli``, with ``command``: :func:`configure_cli_logging`)
``step``       the step: ``resolve-image``, ``edit-kustomize``, ``commit-pr``, ``backup-export``
``event_id``   the EventBridge event id the step works for (absent for a manual run)
``target``     ``<repo_url>/<path>`` of the overlay (edit-kustomize, commit-pr)
``logger``     the Python logger (``steps.commit_pr.step``, ``botocore.credentials``, …)
``message``    the text, every secret redacted
``error``,     on failure: the exception's class and the process's exit code; ``traceback`` for an
``exit_code``  unexpected one
=============  =====================================================================================

Secrets are redacted from every record: the tokens in ``IMAGEBUMP_GIT_TOKEN`` /
``IMAGEBUMP_GIT_READ_TOKEN`` (or their ``_FILE``), every token a :class:`steps.git.auth.GitAuth` holds with its HTTP Basic forms,
``Authorization`` values, passwords in URLs, ``access_token=``-style query values, GitHub token
shapes and PEM private keys — all through :mod:`steps.runtime.redact`, the one redaction.

:func:`imagebump_version` is the package version every step reports (never imported from the CLI).
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from steps.domain.errors import ImagebumpError
from steps.runtime import timing
from steps.runtime.redact import redact
from steps.runtime.settings import register_secrets_from_environment

if TYPE_CHECKING:
    from steps.domain.contract import Contract

DEFAULT_OUTPUTS_DIRECTORY = "/tmp/hera-outputs"
#: Exit code of an unexpected error (the CLI's too: one table for every entry point).
EXIT_UNEXPECTED = 3

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger(__name__)


def outputs_directory() -> Path:
    """The directory Hera's runner (and Argo's executor) reads output parameters from."""
    return Path(os.environ.get("hera__outputs_directory", DEFAULT_OUTPUTS_DIRECTORY))


def kebab(name: str) -> str:
    """``pr_url`` -> ``pr-url``: Python names are snake_case, Argo names kebab-case."""
    return name.replace("_", "-")


def _is_model(value: Any) -> bool:
    """``value`` is a contract (:class:`steps.domain.contract.Contract`, a msgspec struct) or a
    pydantic model (backup-export's output). Asked without importing either: a
    step process that never imported them (the exit handler with nothing configured, issue 33)
    holds no model."""
    return any(
        module is not None and isinstance(value, getattr(module, name))
        for module, name in (
            (sys.modules.get("msgspec"), "Struct"),
            (sys.modules.get("pydantic.main"), "BaseModel"),
        )
    )


def _printed_by_hera(result: Any) -> bool:
    """Is ``result`` a contract that Hera's runner will print? This process is ``python -m
    hera.workflows.runner`` (an older manifest, or one's own Hera definition): it prints the return
    value with ``json.dumps``, which knows pydantic models and not msgspec structs, so the step
    returns the contract's wire form (the same JSON :mod:`steps.runtime.launcher` prints)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == "hera.workflows.runner" and hasattr(result, "__struct_fields__")


def field_names(model: type) -> tuple[str, ...]:
    """An output model's fields in declaration order (a contract's, or a pydantic model's): the
    step's output parameters, kebab-cased."""
    names = getattr(model, "__struct_fields__", None)
    return tuple(names) if names is not None else tuple(model.model_fields)


def output_value(value: Any) -> str:
    """How a field is written as an Argo parameter: strings as is, everything else as JSON."""
    if isinstance(value, str):
        return value
    if _is_model(value):
        return value.model_dump_json()
    if isinstance(value, list) and value and _is_model(value[0]):
        return "[" + ",".join(v.model_dump_json() for v in value) + "]"
    return json.dumps(value, default=str)


def _has_outputs(result: Any) -> bool:
    """A step's result its outputs are written from: its output model, or a ``dict`` (a step whose
    output is a ``TypedDict``, as notify's counts: answered without importing pydantic)."""
    return _is_model(result) or isinstance(result, dict)


def emit_outputs(output: Contract | Mapping[str, Any]) -> Contract | Mapping[str, Any]:
    """Write each field of ``output`` (a model's fields, a mapping's keys) to
    ``<outputs dir>/parameters/<kebab-name>``; return it."""
    directory = outputs_directory() / "parameters"
    directory.mkdir(parents=True, exist_ok=True)
    fields = (
        output.items()
        if isinstance(output, Mapping)
        else ((n, getattr(output, n)) for n in field_names(type(output)))
    )
    for name, value in fields:
        (directory / kebab(name)).write_text(output_value(value))
    return output


# --- secrets: redaction lives in steps.runtime.redact, reading in steps.runtime.settings -------------------------------

_TOKEN_VARIABLES = ("IMAGEBUMP_GIT_TOKEN", "IMAGEBUMP_GIT_READ_TOKEN")


def imagebump_version() -> str:
    """imagebump's version: ``steps.__version__``, which ``pyproject.toml`` gives the distribution
    (package metadata would cost a cold step ~20 ms of ``importlib.metadata``)."""
    from steps import __version__

    return __version__


# --- JSON-line logging -----------------------------------------------------------------------------

_CONTEXT: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "imagebump_step", default=None
)
_PROCESS_CONTEXT: dict[str, str] = {}  # a step process runs one step: threads it starts see it too


def utc_timestamp(seconds: float | None = None) -> str:
    """``2026-12-02T10:00:00.123Z``: the ``ts`` of every record (steps, executor, sensor)."""
    seconds = time.time() if seconds is None else seconds
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1000):03d}Z"


class JsonLineFormatter(logging.Formatter):
    """One JSON object per record (keys in this module's docstring), secrets redacted.

    ``component`` is ``step`` in a step; the ``imagebump`` command logs as ``cli`` with a
    ``command`` key (:func:`configure_cli_logging`)."""

    def __init__(self, component: str = "step", context: dict[str, str] | None = None) -> None:
        super().__init__()
        self.component = component
        self.context = dict(context or {})

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": utc_timestamp(record.created),
            "level": record.levelname.lower(),
            "component": self.component,
            **self.context,
        }
        data.update(_CONTEXT.get() or _PROCESS_CONTEXT)
        data["logger"] = record.name
        data["message"] = redact(record.getMessage())
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            data.update({k: redact(v) if isinstance(v, str) else v for k, v in fields.items()})
        if record.exc_info:
            data["traceback"] = redact("".join(traceback.format_exception(*record.exc_info)))
        return json.dumps(data, default=str)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (pytest swaps it per test)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonLineFormatter())

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:  # StreamHandler.__init__ assigns it
        pass

    def emit(self, record: logging.LogRecord) -> None:
        with timing.timed("log"):  # formatting, redacting and writing a record: the step's time too
            super().emit(record)


class TextLineFormatter(logging.Formatter):
    """One human-readable line per record, secrets redacted, what others wrote escaped
    (:func:`steps.domain.terminal.for_terminal`): ``imagebump backup: warning: …``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def format(self, record: logging.LogRecord) -> str:
        # here, not at the top: a step logs JSON, and the third-party ``regex`` this imports costs a
        # step's cold start ~0.006 s (bench/README.md "Cold start")
        from steps.domain.terminal import for_terminal

        message = for_terminal(redact(record.getMessage()), 4000)  # one line per record
        text = f"{self.prefix}: {record.levelname.lower()}: {message}"
        if record.exc_info:
            trace = redact("".join(traceback.format_exception(*record.exc_info))).rstrip()
            text += "\n" + for_terminal(trace, None, newlines=True)
        return text


#: The values of ``imagebump --log-format``.
LOG_FORMATS = ("text", "json")


def configure_cli_logging(command: str, log_format: str = "text") -> Callable[[], None]:
    """Log every record at ``IMAGEBUMP_LOG_LEVEL`` (default INFO; chatty libraries at WARNING) to
    stderr for the command ``imagebump COMMAND``: JSON lines as the steps write them
    (``component: cli``, ``command``) with ``log_format`` ``json``, else human-readable lines;
    secrets redacted either way. Returns what undoes it (a command run in-process, as tests do,
    leaves logging as it found it)."""
    register_secrets_from_environment(_TOKEN_VARIABLES)
    handler = _StderrHandler()
    handler.setFormatter(
        JsonLineFormatter("cli", {"command": command})
        if log_format == "json"
        else TextLineFormatter(f"imagebump {command}")
    )
    handler.setLevel(_level())
    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in ("", *_QUIET)}
    root.addHandler(handler)
    root.setLevel(_level())
    for name in _QUIET:
        logging.getLogger(name).setLevel(max(logging.WARNING, _level()))

    def undo() -> None:
        root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)

    return undo


_HANDLER = _StderrHandler()
#: Third-party loggers that are chatty at INFO (one line per HTTP request, credential lookups).
_QUIET = ("botocore", "boto3", "urllib3", "httpx", "httpcore", "kubernetes", "hishel")


def _level() -> int:
    name = os.environ.get("IMAGEBUMP_LOG_LEVEL", "INFO").strip().upper()
    return getattr(logging, name) if name in ("DEBUG", "INFO", "WARNING", "ERROR") else logging.INFO


_configured_process = False


def _nothing() -> None:
    pass


def configure_logging() -> Callable[[], None]:
    """Send log records to stderr as JSON lines; returns what undoes it.

    In a step process (nothing configured logging yet) it is done once, for the process: the root
    logger at ``IMAGEBUMP_LOG_LEVEL`` (default INFO; chatty libraries at WARNING) and Python
    warnings captured; nothing to undo. Where logging is configured already (a step called
    in-process, as tests do) only the handler is added, and the returned callable removes it.
    """
    global _configured_process
    register_secrets_from_environment(_TOKEN_VARIABLES)
    root = logging.getLogger()
    if _HANDLER in root.handlers:
        return _nothing
    embedded = bool(root.handlers)
    _HANDLER.setLevel(_level())
    root.addHandler(_HANDLER)
    if embedded:
        return functools.partial(root.removeHandler, _HANDLER)
    _configured_process = True
    root.setLevel(_level())
    for name in _QUIET:
        logging.getLogger(name).setLevel(max(logging.WARNING, _level()))
    logging.captureWarnings(True)
    return _nothing


def _step_name(fn: Callable[..., Any]) -> str:
    """The step's name in its log records: its module's ``STEP_NAME`` (a step package's ``step``
    module), else the module's own name in kebab case (``steps.notify.verifying`` → verifying)."""
    name = getattr(sys.modules.get(fn.__module__), "STEP_NAME", None)
    return name if isinstance(name, str) else kebab(fn.__module__.rsplit(".", 1)[-1])


def _context(step: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, str]:
    """``step``, ``event_id`` and ``target`` from the step's inputs (a Target, or a raw event)."""
    context = {"step": step}
    for value in (*args, *kwargs.values()):
        event_id = getattr(value, "event_id", None)
        if isinstance(event_id, str) and event_id:
            context.setdefault("event_id", event_id)
        key = getattr(value, "key", None)
        if isinstance(key, str) and getattr(value, "repo_url", None):
            context.setdefault("target", redact(key))
    event = kwargs.get("event")
    if "event_id" not in context and isinstance(event, str) and event.strip() and len(event) <= 262144:
        try:
            parsed = json.loads(event)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("id"), str):
            context["event_id"] = parsed["id"][:200]
    return context


def _log_timings(step: str, started: float, failed: bool = False) -> None:
    """The ``step-timings`` record (:mod:`steps.runtime.timing`), in a step process only (not when a step
    runs inside another program, as in tests); for a failed step only when it got as far as doing
    something (a step refused by its input logs its one error record alone)."""
    phases = timing.take()
    if not _configured_process or (failed and not phases):
        return
    seconds = time.perf_counter() - started
    shown = ", ".join(f"{name} {value:.3f}" for name, value in sorted(phases.items(), key=lambda kv: -kv[1]))
    log.info(
        "%s took %.3fs%s",
        step,
        seconds,
        f": {shown}" if shown else "",
        extra={"fields": {"event": "step-timings", "seconds": round(seconds, 4), "phases": phases}},
    )


#: Where Kubernetes reads a container's termination message (a Pod's default
#: ``terminationMessagePath``; kubelet mounts the file). Argo appends it to the failed node's
#: message, ``main: Error (exit code 2): <it>`` (argo-workflows ``workflow/controller/operator.go``,
#: the pod's failure reason), which the Argo UI shows and the exit handler's ``failed`` message quotes.
TERMINATION_LOG = Path("/dev/termination-log")
#: Kubernetes keeps at most 4096 bytes of it.
TERMINATION_LOG_BYTES = 4096


def _termination_message(text: str) -> None:
    """Say why the step failed where Kubernetes reads it, only where that file exists (a pod)."""
    try:
        if TERMINATION_LOG.is_file():
            data = redact(text).encode("utf-8", "replace")[: TERMINATION_LOG_BYTES - 1]
            TERMINATION_LOG.write_bytes(data.decode("utf-8", "ignore").encode())
    except OSError:  # a read-only or missing file: the log record says it all the same
        pass


def step_entry(fn: F) -> F:
    """Wrap a step's ``run``: configure logging, write its outputs, map errors to exit codes.

    Known errors (:class:`~steps.domain.errors.ImagebumpError`) become one ``error`` record and their exit
    code (2 bad input, 75 transient); anything else an ``error`` record with the traceback and exit
    3. ``functools.wraps`` keeps the signature, which the entry (or Hera's runner) reads to parse the inputs.
    """
    step = _step_name(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        undo = configure_logging()
        context = _context(step, args, kwargs)
        token = _CONTEXT.set(context)
        if _configured_process and not _PROCESS_CONTEXT:
            _PROCESS_CONTEXT.update(context)  # threads the step starts log with it too
        timing.take()  # phases of this step only
        started = time.perf_counter()
        try:
            try:
                result = fn(*args, **kwargs)
            except ImagebumpError as exc:
                _log_timings(step, started, failed=True)  # before it: a step's last word is its error record
                log.error(
                    "%s: %s",
                    type(exc).__name__,
                    exc,
                    extra={"fields": {"error": type(exc).__name__, "exit_code": exc.exit_code}},
                )
                _termination_message(f"{type(exc).__name__}: {exc}")
                raise SystemExit(exc.exit_code) from None
            except Exception as exc:
                _log_timings(step, started, failed=True)
                log.error(
                    "unexpected error: %s: %s",
                    type(exc).__name__,
                    exc,
                    exc_info=True,
                    extra={"fields": {"error": type(exc).__name__, "exit_code": EXIT_UNEXPECTED}},
                )
                _termination_message(f"unexpected error: {type(exc).__name__}: {exc}")
                raise SystemExit(EXIT_UNEXPECTED) from None
            if _has_outputs(result):
                with timing.timed("outputs"):
                    emit_outputs(result)
            _log_timings(step, started)
            return result.model_dump(mode="json") if _printed_by_hera(result) else result
        finally:
            _CONTEXT.reset(token)
            for handler in logging.getLogger().handlers:
                handler.flush()
            undo()

    return wrapper  # type: ignore[return-value]

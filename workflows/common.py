"""Wiring shared by every Hera definition: image, pod hardening, retries, volumes, outputs.

Nothing here runs in a pod. The constants are the contract between the rendered manifests
(`manifests/`), the RBAC and AWS side, and the step code's environment variables.
Import this module before building any step template: it sets ``global_config.image``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hera.shared import global_config
from hera.workflows import (
    ConfigMapEnvFrom,
    EmptyDirVolume,
    Env,
    Parameter,
    Resources,
    RetryStrategy,
    RunnerScriptConstructor,
    Script,
    SecretVolume,
    Suspend,
)
from hera.workflows import models as m

from steps.domain.errors import EXIT_CONFIG
from steps.runtime.harness import field_names, kebab
from workflows import names as n
from workflows import pod_security

# Every step template renders `image: IMAGE` even when a definition forgets to pass it.
IMAGE = n.IMAGE
global_config.image = IMAGE

# The names live in workflows/names.py (no Hera there, so sensors and the local runtime can read
# them); they are re-exported here for the definitions that spell them ``c.NAME``.
OUTPUTS_DIR = n.OUTPUTS_DIR

POD_SECURITY_CONTEXT = m.PodSecurityContext.model_validate(pod_security.pod_security_context())
CONTAINER_SECURITY_CONTEXT = m.SecurityContext.model_validate(pod_security.container_security_context())


#: The module a step pod runs (``python -m STEP_ENTRY -e steps.<x>:run <inputs file>``).
STEP_ENTRY = "steps.runtime.launcher"


@dataclass(kw_only=True)
class StepRunner(RunnerScriptConstructor):
    """Hera's runner constructor with our entry point as the module the pod runs.

    Everything else is Hera's: the template's inputs from the function's signature,
    ``source: '{{inputs.parameters}}'``, the outputs handling that ``isinstance(...,
    RunnerScriptConstructor)`` selects. Only the rendered ``args`` change, from ``[-m,
    hera.workflows.runner, -e, steps.x:run]`` to ``[-m, steps.runtime.launcher, -e, steps.x:run]``:
    :mod:`steps.runtime.launcher` accepts exactly what Hera's runner accepts (the inputs JSON, Hera's
    ``hera__outputs_directory``, its exit codes) without importing ``hera.workflows`` (0.6–1.4 s of
    a step's cold start; tests/steps/runtime/test_entry.py runs every step through both and compares). Hera
    documents ``Script.constructor`` as the place for one's own ``ScriptConstructor``
    (hera/workflows/script.py, hera 7.1).
    """

    def transform_values(self, script: Script) -> None:
        super().transform_values(script)
        args = list(script.args or [])
        if args[:2] == ["-m", "hera.workflows.runner"]:
            script.args = ["-m", STEP_ENTRY, *args[2:]]


def step_runner() -> StepRunner:
    """The ``constructor=`` of every step template."""
    return StepRunner()


def housekeeping(*, seconds_after_success: int = 86400) -> dict[str, Any]:
    """What every Workflow of ours sets around its pods: the pod security context, pod GC (a
    succeeded pod goes after 10 min), how long the Workflow object stays (failed ones 7 days, so a
    later duplicate of the same push does not run again) and the labels on every pod."""
    return {
        "security_context": POD_SECURITY_CONTEXT,
        "pod_gc": m.PodGC(strategy="OnPodSuccess", delete_delay_duration="10m"),
        "ttl_strategy": m.TTLStrategy(
            seconds_after_success=seconds_after_success, seconds_after_failure=7 * 86400
        ),
        "pod_metadata": m.Metadata(labels=dict(n.LABELS)),
    }


def target_inputs() -> list[Parameter]:
    """The inputs of a per-target steps template (``update-target``, ``sweep-target``)."""
    return [
        Parameter(name="target", description="one steps.domain.models.Target, as JSON"),
        Parameter(name="repo-url"),
        Parameter(name="path"),
        Parameter(name="env", default=""),
    ]


def tmp_volume() -> EmptyDirVolume:
    """Private scratch space: the root filesystem is read-only; /tmp is the pod's own emptyDir."""
    return EmptyDirVolume(name="tmp", mount_path="/tmp", size_limit="1Gi")


def base_env() -> list[Env]:
    """Environment every step gets: where outputs go, a writable HOME, no bytecode writes.

    ``PYDANTIC_DISABLE_PLUGINS=1``: pydantic scans every installed distribution's entry points
    for plugins of group ``pydantic`` on the first schema it builds (pydantic 2.x
    ``pydantic/plugin/_loader.py``), 15–60 ms of each step's cold start here. Plugins are
    observability hooks (logfire and the like); the image installs none, so the setting changes
    nothing but the scan (tests/steps/runtime/test_entry.py fails if a dependency starts to declare one).
    """
    return [
        Env(name="hera__outputs_directory", value=n.OUTPUTS_DIR),
        Env(name="HOME", value="/tmp"),
        Env(name="PYTHONDONTWRITEBYTECODE", value="1"),
        Env(name="PYDANTIC_DISABLE_PLUGINS", value="1"),
    ]


def read_token_env() -> Env:
    """Where a reading step finds the optional Git read token (:func:`read_token_volume`)."""
    return Env(name="IMAGEBUMP_GIT_READ_TOKEN_FILE", value=f"{n.GIT_READ_DIR}/token")


def read_token_volume() -> SecretVolume:
    """The optional Git read token (Secret ``imagebump-git-read``): absent, an empty directory, and
    the step reads anonymously (or as the GitHub App)."""
    return SecretVolume(
        name="git-read",
        secret_name=n.GIT_READ_SECRET,
        mount_path=n.GIT_READ_DIR,
        read_only=True,
        optional=True,
        default_mode=0o440,
    )


def base_env_from() -> list[ConfigMapEnvFrom]:
    """Optional non-secret settings (AWS_REGION, IMAGEBUMP_GITHUB_API_URL, GitHub App id, ...)."""
    return [ConfigMapEnvFrom(name=n.ENV_CONFIGMAP, optional=True)]


def resources(cpu: str = "100m", memory: str = "128Mi", memory_limit: str = "512Mi") -> Resources:
    return Resources(cpu_request=cpu, memory_request=memory, cpu_limit="1", memory_limit=memory_limit)


#: How long after a step's first attempt started another may still start (the retry window).
RETRY_WINDOW_SECONDS = 300


def retry_transient(limit: int = 4, *, deadline: int) -> RetryStrategy:
    """Retry with exponential backoff unless the step said "bad input" (exit 2, steps.domain.errors).

    `retryPolicy: Always` also retries pod errors (eviction, node loss); the expression refuses
    only the terminal exit code. 75 (transient) and any other failure are retried.

    ``deadline``: the template's ``activeDeadlineSeconds``. Argo also ends every attempt after the
    first at the first attempt's start + ``backoff.maxDuration`` (argo-workflows
    ``workflow/controller/operator.go`` ``processNodeRetries``: ``opts.executionDeadline =
    maxDurationDeadline``), so ``maxDuration`` is the retry window plus one attempt's whole deadline:
    an attempt that starts within the window may run its deadline out, and no attempt of the step
    ends later than that.
    """
    return RetryStrategy(
        limit=limit,
        retry_policy="Always",
        expression=f"asInt(lastRetry.exitCode) != {EXIT_CONFIG}",
        backoff=m.Backoff(duration="10s", factor=2, max_duration=f"{RETRY_WINDOW_SECONDS + deadline}s"),
    )


def outputs_of(model: type, defaults: dict[str, str] | None = None) -> list[Parameter]:
    """One output parameter per field of a step's output model (kebab-case, as emit_outputs writes).

    ``defaults`` maps kebab names to the value used when the file is absent (default ``""``).
    """
    defaults = defaults or {}
    return [output(kebab(name), defaults.get(kebab(name), "")) for name in field_names(model)]


def output(name: str, default: str = "") -> Parameter:
    """An output parameter the step writes itself (steps.runtime.harness.emit_outputs).

    ``default`` is used when the step wrote no file (it failed) and, from Argo 3.7.16 / 4.0.7 on,
    for references to the outputs of a skipped step (nothing here reads those).
    """
    return Parameter(
        name=name,
        value_from=m.ValueFrom(path=f"{n.OUTPUTS_DIR}/parameters/{name}", default=default),
    )


def target_fan_out() -> dict[str, str]:
    """The arguments of a per-target step fanned out over a list of targets (``with_param``): each
    ``{{item}}`` is one target, and its ``repo_id`` the one spelling of its repository (one mutex
    per overlay)."""
    return {
        "target": "{{item}}",
        "repo-url": "{{item.repo_id}}",  # the one spelling: one mutex per overlay
        "path": "{{item.path}}",
        "env": "{{item.env}}",
    }


def target_passed_on() -> dict[str, str]:
    """The arguments that hand a per-target template's own inputs (:func:`target_inputs`) on."""
    return {name: f"{{{{inputs.parameters.{name}}}}}" for name in ("target", "repo-url", "path", "env")}


def counter(name: str, help: str, when: str | None, labels: dict[str, str]) -> m.Metrics:
    """One Prometheus counter, 1 added each time ``when`` holds (None: each time the node ends),
    with ``labels`` (key → value)."""
    return m.Metrics(
        prometheus=[
            m.Prometheus(
                name=name,
                help=help,
                labels=[m.MetricLabel(key=key, value=value) for key, value in labels.items()],
                when=when,
                counter=m.Counter(value="1"),
            )
        ]
    )


class MeteredSuspend(Suspend):
    """A Suspend template that keeps its metrics: Hera 7.1's ``Suspend._build_template`` drops them.
    With ``duration: "0"`` it is a pod-less node that only emits its metrics."""

    def _build_template(self):
        template = super()._build_template()
        template.metrics = self._build_metrics()
        return template

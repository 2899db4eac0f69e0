"""``imagebump run --local``: the whole intake on one machine — SQS → local sensor → local executor.

Reads ECR push events from an SQS queue (real AWS, or ``--endpoint-url`` such as moto's server),
applies the cluster Sensor's filters (:mod:`sensors.definition`) and runs the rendered
``image-update`` WorkflowTemplate with :class:`workflows.local.executor.LocalExecutor`. Reads
``--rules FILE`` and the Git tokens from the environment, never a flag (:func:`local_secrets` makes
them the Secrets the template mounts); writes JSON-line logs on stderr and one progress line per
event on stdout. Runs until SIGTERM/SIGINT or ``--max-events``; without ``--local`` it refuses.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from imagebump.commands.run_queue import EMULATOR_DEFAULT_REGION, check_queue, resolve_region, sqs_endpoint
from imagebump.local.outcome import printable, progress_line
from steps.domain.errors import ConfigError
from workflows import names

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TEMPLATE = names.rendered_file(names.IMAGE_UPDATE, PROJECT_ROOT)
#: Variables that are secrets: they reach steps only as the template's Secret mounts.
_SECRET_VARIABLES = {
    "IMAGEBUMP_GIT_TOKEN",
    "IMAGEBUMP_GIT_TOKEN_FILE",
    "IMAGEBUMP_GIT_READ_TOKEN",
    "IMAGEBUMP_GIT_READ_TOKEN_FILE",
    "IMAGEBUMP_ARGOCD_TOKEN",
    "IMAGEBUMP_ARGOCD_TOKEN_FILE",
    # notify's destinations: in the imagebump-notify Secret (imagebump.local.notify_outcomes.executor_secrets)
    *(
        f"IMAGEBUMP_NOTIFY_{k}{f}"
        for k in ("SLACK_URL", "TEAMS_URL", "WEBHOOK_URL", "WEBHOOK_SECRET")
        for f in ("", "_FILE")
    ),
}
_PASSTHROUGH_PREFIXES = ("AWS_", "IMAGEBUMP_")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "run",
        help="run the intake on this machine: SQS → local executor (no cluster)",
        description=(
            "Long-poll an SQS queue of ECR push events and run the image-update WorkflowTemplate "
            "locally, each step in its own process and temporary directory. The Git token is read "
            "from IMAGEBUMP_GIT_TOKEN (or IMAGEBUMP_GIT_TOKEN_FILE), never from a flag; one user on one "
            "machine, it also reads the repositories (edit-kustomize's clone) unless "
            "IMAGEBUMP_GIT_READ_TOKEN (or IMAGEBUMP_GIT_READ_TOKEN_FILE) gives a separate read token. "
            "AWS credentials come from the usual AWS settings; the region is the queue URL's unless "
            "--region or AWS_REGION says otherwise. --endpoint-url or AWS_ENDPOINT_URL points at another "
            "SQS/ECR endpoint (e.g. moto's server). The queue is checked once at start: a queue that is "
            "not there, or that the credentials may not read, exits 2. "
            "On a cluster the intake is the Argo Events Sensor instead (see docs/install.md)."
        ),
    )
    parser.add_argument("--local", action="store_true", help="run locally (the only mode of this command)")
    parser.add_argument("--queue-url", help="SQS queue URL that EventBridge delivers ECR push events to")
    parser.add_argument(
        "--endpoint-url", help="AWS endpoint (e.g. moto's server); also AWS_ENDPOINT_URL for steps"
    )
    parser.add_argument("--rules", type=Path, help="rules file, mounted as the imagebump-rules ConfigMap")
    parser.add_argument("--concurrency", type=int, default=4, help="workflows at once (default 4)")
    parser.add_argument(
        "--template",
        type=Path,
        default=DEFAULT_TEMPLATE,
        help="rendered WorkflowTemplate (default manifests/workflows/image-update.yaml)",
    )
    parser.add_argument(
        "--region",
        help="the queue's AWS region (default: AWS_REGION or AWS_DEFAULT_REGION, else the queue URL's, "
        f"else the AWS profile's, else for an emulator's queue URL {EMULATOR_DEFAULT_REGION})",
    )
    parser.add_argument("--wait-seconds", type=int, default=20, help="SQS long-poll wait (default 20)")
    parser.add_argument(
        "--visibility-timeout",
        type=int,
        default=300,
        help="seconds a message stays invisible; extended while its workflow runs (default 300)",
    )
    parser.add_argument("--max-events", type=int, help="exit after this many events were handled")
    parser.add_argument(
        "--reconcile-every",
        default="10m",
        metavar="DURATION",
        help="also reconcile every DURATION (10m, 30s, 1h; 0 turns it off): overlays behind their "
        "newest allowed image are updated, so a push whose event was lost is reflected "
        "within one interval (default 10m; see `imagebump reconcile`)",
    )
    add_live_arguments(parser, timeout=True)
    parser.set_defaults(func=run)
    return parser


def add_live_arguments(parser: argparse.ArgumentParser, *, timeout: bool) -> None:
    """``--argocd-context`` (and ``--live-timeout``): push → live against Argo CD, off by default."""
    parser.add_argument(
        "--argocd-context",
        metavar="CTX",
        help="kubeconfig context of the cluster running Argo CD: after each commit, watch its "
        "Applications until the new image runs (verify-live), and report live states in reconcile runs "
        "(default: off; README, 'Push → live')",
    )
    if timeout:
        parser.add_argument(
            "--live-timeout",
            metavar="DURATION",
            help=f"how long verify-live waits for Argo CD (default {LIVE_TIMEOUT}; needs --argocd-context)",
        )


LIVE_TIMEOUT = "15m"


def _git_token(name: str, environ: Mapping[str, str]) -> str | None:
    from steps.runtime.settings import read_secret

    return read_secret(
        name, environ, label="the token file", empty_file_is_error=True, fix="point it at the token file"
    )


def local_secrets(
    environ: Mapping[str, str] | None = None,
    *,
    require_write: bool = True,
    why: str = "`imagebump run --local`",
) -> dict[str, dict[str, str]]:
    """The Secrets the templates' steps mount, from this process's environment.

    ``imagebump-git`` (commit-pr) holds ``IMAGEBUMP_GIT_TOKEN[_FILE]`` (required unless
    ``require_write`` is false: a dry-run reconcile never runs commit-pr, so its Secret is then empty;
    or unless the GitHub App's three settings are given: then every step reads and writes with the
    App's installation token, which it mints itself — :func:`steps.forge.github.read_auth`).
    ``imagebump-git-read`` (edit-kustomize, reconcile) holds ``IMAGEBUMP_GIT_READ_TOKEN[_FILE]`` when
    given, else the same write token: one user on one machine, whose token may read what it may push.
    ``imagebump-argocd`` (verify-live) holds ``IMAGEBUMP_ARGOCD_TOKEN[_FILE]`` when given: the Argo CD
    account token for ``IMAGEBUMP_ARGOCD_REFRESH=api``.
    (On a cluster the read Secret is separate and optional; absent, the clone is anonymous.)
    """
    environ = os.environ if environ is None else environ
    from steps.runtime.settings import github_app_configured

    token = _git_token("IMAGEBUMP_GIT_TOKEN", environ)
    if require_write and not token and not github_app_configured(environ):
        raise ConfigError(
            f"IMAGEBUMP_GIT_TOKEN is not set: export the Git write token (or IMAGEBUMP_GIT_TOKEN_FILE), "
            "or a GitHub App's IMAGEBUMP_GITHUB_APP_ID, IMAGEBUMP_GITHUB_APP_PRIVATE_KEY_FILE and "
            f"IMAGEBUMP_GITHUB_APP_INSTALLATION_ID, before {why}; a token is never taken from a flag"
        )
    read_token = _git_token("IMAGEBUMP_GIT_READ_TOKEN", environ) or token
    secrets: dict[str, dict[str, str]] = {names.GIT_SECRET: {"token": token} if token else {}}
    if read_token:
        secrets[names.GIT_READ_SECRET] = {"token": read_token}
    argocd_token = _git_token("IMAGEBUMP_ARGOCD_TOKEN", environ)  # verify-live's refresh (optional)
    if argocd_token:
        secrets[names.ARGOCD_SECRET] = {"token": argocd_token}
    return secrets


def step_environment(environ: dict[str, str], endpoint_url: str | None, region: str | None) -> dict[str, str]:
    """What every step gets from this process: ``AWS_*`` and non-secret ``IMAGEBUMP_*``."""
    env = {
        k: v for k, v in environ.items() if k.startswith(_PASSTHROUGH_PREFIXES) and k not in _SECRET_VARIABLES
    }
    if endpoint_url:
        env["AWS_ENDPOINT_URL"] = endpoint_url
    if region:
        env.setdefault("AWS_REGION", region)
        env.setdefault("AWS_DEFAULT_REGION", region)
    return env


def run(args: argparse.Namespace) -> int:
    if not args.local:
        raise ConfigError(
            "cluster mode is the Argo Events Sensor, not this command: install it with "
            "`kubectl apply -k manifests/` (docs/install.md); "
            "to run on this machine use `imagebump run --local --queue-url URL --rules FILE`"
        )
    if not args.queue_url:
        raise ConfigError("--queue-url is required: the SQS queue EventBridge delivers ECR push events to")
    if not args.rules:
        raise ConfigError("--rules is required: the rules file that maps images to overlays")
    if args.concurrency < 1:
        raise ConfigError(f"--concurrency {args.concurrency}: must be at least 1")
    from imagebump.local import gate as local_gate
    from imagebump.local.reconciler import Reconciler, build_executor, parse_every

    reconcile_every = parse_every(args.reconcile_every)
    from imagebump.local import notify_outcomes
    from imagebump.local.live import apply_live, live_environment, live_parameters

    live = live_parameters(args.argocd_context, args.live_timeout)
    live_env = live_environment(args.argocd_context)
    try:
        rules_text = args.rules.read_text()
    except OSError as exc:
        raise ConfigError(f"--rules {args.rules}: cannot read it ({exc.strerror})") from None
    _check_rules(rules_text, str(args.rules))
    if not args.template.is_file():
        raise ConfigError(f"--template {args.template}: no such file; render it with `imagebump render`")
    secrets = local_secrets(os.environ)
    secrets.update(notify_outcomes.executor_secrets(os.environ))  # issue 36: the exit handler's destinations
    region, region_from = resolve_region(args.region, args.queue_url, args.endpoint_url, os.environ)

    import boto3

    from sensors.local import LocalSensor
    from workflows.local.executor import LocalExecutor
    from workflows.local.logs import json_logger

    sqs = boto3.client("sqs", endpoint_url=args.endpoint_url, region_name=region)
    check_queue(sqs, args.queue_url, region, region_from, sqs_endpoint(args.endpoint_url, os.environ))
    log = json_logger(sys.stderr)
    executor = LocalExecutor(
        args.template,
        project_root=PROJECT_ROOT,
        secrets=secrets,
        configmaps={names.RULES_CONFIGMAP: {names.RULES_KEY: rules_text}},
        env={
            **step_environment(dict(os.environ), args.endpoint_url, region),
            **live_env,
            **notify_outcomes.ledger_environment(os.environ),
        },
        log=log,
    )
    apply_live(executor, live)
    executor.warm()  # the steps' warm interpreter, before the first message
    reconciler = None
    if reconcile_every > 0:  # the rendered image-reconcile CronWorkflow, on this process's schedule
        try:
            reconcile_executor = build_executor(
                secrets=secrets,
                configmaps={names.RULES_CONFIGMAP: {names.RULES_KEY: rules_text}},
                env={
                    **step_environment(dict(os.environ), args.endpoint_url, region),
                    **live_env,
                    **notify_outcomes.ledger_environment(os.environ),  # the gate's messages, once each
                },
                log=log,
            )
            apply_live(reconcile_executor, live)
        except ConfigError as exc:
            raise ConfigError(
                f"cannot reconcile every {args.reconcile_every}: {exc} "
                "(or turn reconcile off with --reconcile-every 0)"
            ) from None
        reconciler = Reconciler(reconcile_executor, reconcile_every, log=log)
    gater = local_gate.gate_reconciler(  # issue 35: promoteAfter, evaluated every IMAGEBUMP_GATE_INTERVAL
        rules_text,
        lambda: apply_live(
            build_executor(
                secrets=secrets,
                configmaps={names.RULES_CONFIGMAP: {names.RULES_KEY: rules_text}},
                env={
                    **step_environment(dict(os.environ), args.endpoint_url, region),
                    **live_env,
                    **notify_outcomes.ledger_environment(os.environ),  # the gate's messages, once each
                },
                log=log,
            ),
            live,
        ),
        log=log,
    )
    sensor = LocalSensor(
        args.queue_url,
        executor,
        sqs_client=sqs,
        concurrency=args.concurrency,
        wait_seconds=args.wait_seconds,
        visibility_timeout=args.visibility_timeout,
        log=log,
        # the messages: the template's exit handler (onExit), as on a cluster (issue 36)
        on_result=lambda event, result: print(printable(progress_line(event, result)), flush=True),
    )
    if reconciler is not None:
        reconciler.start()
    if gater is not None:
        gater.start()
    try:
        with _stop_on_signals(sensor):
            stats = sensor.run(max_events=args.max_events)
    finally:
        if reconciler is not None:
            reconciler.stop()  # a reconcile run that is running finishes
        if gater is not None:
            gater.stop()
    # stdout: the human-readable lines; stderr stays JSON lines only (the sensor logged sensor-stopped)
    print(
        f"stopped: {stats.received} received, {stats.succeeded} succeeded, {stats.failed} failed, "
        f"{stats.skipped} skipped, {stats.duplicates} duplicates, {stats.invalid} invalid",
        flush=True,
    )
    return 0


#: SQS error codes (the JSON protocol's and the query protocol's) of a queue that is not there.
def _check_rules(text: str, source: str) -> None:
    """Refuse a bad rules file now rather than in every workflow (when the rules module exists)."""
    try:
        from steps.rules import load_rules
    except ImportError:  # pragma: no cover - the rules module is another area's
        return
    load_rules(text, source)


class _stop_on_signals:
    """SIGTERM/SIGINT → ``sensor.stop()`` (only in the main thread; elsewhere a no-op)."""

    def __init__(self, sensor: Any) -> None:
        self.sensor = sensor
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> None:
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.previous[sig] = signal.signal(sig, lambda signum, frame: self.sensor.stop())

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

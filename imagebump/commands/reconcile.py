"""``imagebump reconcile``: which overlays are behind their newest allowed image — and, with
``--apply``, bring them up to date.

Runs the rendered CronWorkflow ``manifests/workflows/image-reconcile.yaml`` once through the local
executor (:mod:`imagebump.local.reconciler` builds and runs it): the very templates a cluster runs every
10 minutes. Reads ``--rules FILE`` and the Git tokens from the environment (never a flag; see
docs/reference/settings.md); writes a table on stderr and one JSON object on stdout. Its JSON and
exit codes: docs/operations.md, "Nothing lost".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from imagebump.commands.run import local_secrets
from imagebump.local.reconciler import (
    DEFAULT_TEMPLATE,
    DEFAULT_UPDATE_TEMPLATE,
    build_executor,
    run_reconcile,
)
from steps.domain.errors import ConfigError


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "reconcile",
        help="which overlays are behind their newest allowed image (--apply: update them)",
        description=(
            "Compare every overlay the rules map an ECR repository to with the newest image ECR holds that "
            "the rule allows, and report each as behind, current, ahead, proposed, unknown, held, pinned or branch-taken. With --apply, "
            "the overlays behind are updated by the same update-target steps an ECR push runs. Runs the "
            "rendered image-reconcile CronWorkflow once through the local executor. Git tokens come from "
            "IMAGEBUMP_GIT_TOKEN / IMAGEBUMP_GIT_READ_TOKEN (or *_FILE), never a flag."
        ),
    )
    parser.add_argument("--rules", type=Path, help="rules file (the imagebump-rules ConfigMap's rules.yaml)")
    parser.add_argument(
        "--endpoint-url", help="AWS endpoint (e.g. moto's server); also AWS_ENDPOINT_URL for steps"
    )
    parser.add_argument(
        "--apply", action="store_true", help="update the overlays that are behind (default: report)"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="ECR calls and Git repositories worked on at once (default 8)",
    )
    parser.add_argument("--region", help="AWS region (default: AWS_REGION, else each rule's own)")
    parser.add_argument(
        "--template",
        type=Path,
        default=DEFAULT_TEMPLATE,
        help="rendered CronWorkflow (default manifests/workflows/image-reconcile.yaml)",
    )
    parser.add_argument(
        "--update-template",
        type=Path,
        default=DEFAULT_UPDATE_TEMPLATE,
        help="rendered WorkflowTemplate it references (default manifests/workflows/image-update.yaml)",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="also print the executor's JSON log lines on stderr"
    )
    from imagebump.commands.run import add_live_arguments

    add_live_arguments(parser, timeout=True)
    parser.set_defaults(func=run)
    return parser


# ---------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------


def _stderr(log_format: str) -> Callable[[str], None]:
    """How the table and summary reach stderr: as they are, or with ``--log-format json`` one
    record per line (every stderr line is then JSON, as the executor's records are)."""
    if log_format != "json":
        return lambda text: print(text, file=sys.stderr) if text else None
    import logging

    logger = logging.getLogger("imagebump.reconcile")

    def say(text: str) -> None:
        for line in text.splitlines():
            logger.info("%s", line)

    return say


def _quiet(log: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """Only what went wrong: failed attempts and nodes (the table says the rest)."""

    def sink(record: dict[str, Any]) -> None:
        if record.get("phase") in ("Failed", "Error") or str(record.get("event", "")).startswith("zygote"):
            log(record)

    return sink


def check_endpoint_url(url: str) -> None:
    """``--endpoint-url`` must be an ``http(s)://host[:port]`` URL (botocore's own check is a traceback)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"--endpoint-url {url!r}: not a URL; expected http://HOST[:PORT] or https://HOST[:PORT] "
            "(e.g. http://127.0.0.1:5000 for moto's server)"
        )


def run(args: argparse.Namespace) -> int:
    from imagebump.cli import log_format
    from imagebump.commands.run import step_environment
    from steps.reconcile import step as reconcile
    from steps.rules import load_rules
    from workflows import names
    from workflows.local.logs import json_logger

    say = _stderr(log_format(args))

    if not args.rules:
        raise ConfigError("--rules is required: the rules file that maps ECR repositories to overlays")
    concurrency = args.concurrency if args.concurrency is not None else reconcile.DEFAULT_CONCURRENCY
    if not 1 <= concurrency <= reconcile.MAX_CONCURRENCY:
        raise ConfigError(f"--concurrency {concurrency}: must be between 1 and {reconcile.MAX_CONCURRENCY}")
    if args.endpoint_url is not None:
        check_endpoint_url(args.endpoint_url)
    try:
        rules_text = args.rules.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        raise ConfigError(f"--rules {args.rules}: cannot read it ({why})") from None
    load_rules(rules_text, str(args.rules))  # a bad file is refused here, naming the rule and field
    secrets = local_secrets(require_write=args.apply, why="`imagebump reconcile --apply` (it pushes)")
    from imagebump.local.live import apply_live, live_environment, live_parameters

    live = live_parameters(args.argocd_context, args.live_timeout)
    log = json_logger(sys.stderr)
    region = args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    executor = build_executor(
        secrets=secrets,
        configmaps={names.RULES_CONFIGMAP: {names.RULES_KEY: rules_text}},
        env={
            **step_environment(dict(os.environ), args.endpoint_url, region),
            **live_environment(args.argocd_context),
        },
        log=log if args.verbose else _quiet(log),
        template=args.template,
        update_template=args.update_template,
    )
    apply_live(executor, live)
    reconciled = run_reconcile(executor, apply=args.apply, concurrency=concurrency)
    if reconciled.message and not reconciled.report:
        say(f"imagebump reconcile: {reconciled.message}")
        return reconciled.exit_code
    from steps.domain.terminal import for_terminal
    from steps.reconcile.step import TargetState, render_table

    say(render_table([TargetState(**t) for t in reconciled.report]).rstrip("\n"))
    if reconciled.live:
        from steps.live_states.decide import LiveState
        from steps.live_states.step import render_live_table

        say(render_live_table([LiveState(**s) for s in reconciled.live]).rstrip("\n"))
    tail = (
        f"{reconciled.calls.get('ecr_calls', 0)} ECR call(s), {reconciled.calls.get('git_clones', 0)} clone(s), "
        f"{reconciled.calls.get('git_calls', 0)} Git call(s) in {reconciled.seconds:.1f}s"
    )
    if args.apply:
        done = sum(1 for u in reconciled.updates if u["ok"])
        say(f"applied: {reconciled.submitted} target(s) behind submitted, {done} brought up to date; {tail}")
        for update in reconciled.updates:
            where = for_terminal(f"{update['env'] or '-'} {update['repo_url']}/{update['path']}")
            say(f"  {where}: {for_terminal(update['outcome'])}")
    else:
        say(f"dry run ({tail}); --apply updates the targets behind")
    if reconciled.message:
        say(f"imagebump reconcile: {for_terminal(reconciled.message, 4000)}")
    print(json.dumps(reconciled.summary(), indent=2))
    return reconciled.exit_code

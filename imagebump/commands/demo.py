"""``imagebump demo [--keep] [--json] [--verbose] [--lost-push]``: one ECR push becomes a commit and a PR branch.

Starts everything on 127.0.0.1 (moto's AWS emulator with the CloudFormation stack, a ``git
http-backend`` manifests repository, the local sensor and executor, a simulated Argo CD) through
:mod:`imagebump.local.demo`, pushes one image and prints what imagebump did with it; everything it
started is stopped and its temporary directory removed (``--keep`` keeps it). Needs the ``demo``
extra (``pip install 'imagebump[demo]'``; without it: exit 2). Exit codes: docs/operations.md.
"""

from __future__ import annotations

import argparse
import json
import sys

from imagebump.local.demo_gate import GATES


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "demo",
        help="run the local demo: an ECR push (moto) becomes a staging commit and a production PR branch",
        description="Start moto, a git http-backend remote and the local sensor/executor on 127.0.0.1, "
        "push one image, and show what imagebump did with it. Cleans up after itself.",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary directory (bare repository, rules) and print its path",
    )
    parser.add_argument("--json", action="store_true", help="print a machine-readable summary instead")
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="stream the sensor's and executor's JSON-line log to stderr",
    )
    parser.add_argument("--tag", default="1.4.2", help="the tag of the image pushed (default 1.4.2)")
    parser.add_argument(
        "--lost-push",
        action="store_true",
        help="then push one more image with the sensor stopped, lose its event (queue "
        "purged) and reconcile once: nothing lost",
    )
    parser.add_argument(
        "--wrong-manifest",
        action="store_true",
        help="the simulated Argo CD runs another image than the commit holds: see verify-live's alarm",
    )
    parser.add_argument(
        "--gate",
        nargs="?",
        const="wait",
        choices=GATES,
        default=None,
        help="gate production on staging (promoteAfter, a short soak): staging live, then the production "
        "PR (wait, the default); check: the PR at once, its commit status going from pending to success",
    )
    parser.set_defaults(func=run)
    return parser


#: The extra that brings what the demo runs on (pyproject.toml, [project.optional-dependencies]).
DEMO_EXTRA = "imagebump[demo]"


def _require_demo_extra() -> None:
    """Refuse with the fix when moto's server (the demo extra) cannot be imported."""
    import importlib

    from steps.domain.errors import ConfigError

    try:
        importlib.import_module("moto.server")
    except ImportError as exc:
        missing = getattr(exc, "name", None) or "moto"
        raise ConfigError(
            f"the demo needs moto's AWS emulator, which is not installed ({missing!r} is missing): "
            f"pip install '{DEMO_EXTRA}' (in a checkout, ./dev demo installs it into .venv)"
        ) from None


def run(args: argparse.Namespace) -> int:
    _require_demo_extra()
    from imagebump.local.demo import render_report, run_demo
    from workflows.local.logs import json_logger

    def progress(message: str) -> None:
        print(f"imagebump demo: {message}", file=sys.stderr, flush=True)

    report = run_demo(
        keep=args.keep,
        tag=args.tag,
        log_sink=json_logger(sys.stderr) if args.verbose else None,
        progress=None if args.json else progress,
        lost_push=args.lost_push,
        wrong_manifest=args.wrong_manifest,
        gate=args.gate,
    )
    if args.json:
        print(json.dumps(report.summary(), indent=2, default=str))
    else:
        sys.stdout.write(render_report(report))
    sys.stdout.flush()
    if not report.ok:
        print(
            f"imagebump demo: error: {report.error.splitlines()[0] if report.error else 'failed'}",
            file=sys.stderr,
        )
        return 1
    return 0

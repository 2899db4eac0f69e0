"""``imagebump render [--check] [--output DIR]``: write (or check) the generated manifests.

Exit codes: 0 written / already current, 1 ``--check`` found stale files (the unified diff is
printed), 2 bad usage, 3 an internal error while rendering (the table every imagebump command uses).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "render",
        help="render WorkflowTemplate, CronWorkflow, Argo Events objects and RBAC into manifests/",
        description="Render every cluster-side manifest into manifests/ (or check them with --check).",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and print a unified diff when the committed files are stale",
    )
    parser.add_argument("--output", type=Path, default=None, metavar="DIR", help="default: manifests/")
    parser.set_defaults(func=_render)
    return parser


def _render(args: argparse.Namespace) -> int:
    from workflows.render import run

    return run(check_only=args.check, output=args.output)

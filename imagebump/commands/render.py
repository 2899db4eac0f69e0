"""``imagebump render [--check] [--output DIR]``: write (or check) the generated manifests.

Exit codes: 0 written / already current, 1 ``--check`` found stale files (the unified diff is
printed), 2 bad usage (also: an ``--output`` directory that cannot be created or written), 3 an
internal error while rendering (the table every imagebump command uses).
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
    from render.manifests import run

    if args.output is not None and not args.check:
        _check_writable(args.output)
    return run(check_only=args.check, output=args.output)


def _check_writable(directory: Path) -> None:
    """Create ``directory`` if needed and prove a file can be written in it, before rendering.

    Raises:
        ConfigError: it cannot be created or written (names the path and why).
    """
    import tempfile

    from steps.domain.errors import ConfigError

    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise ConfigError(
            f"--output {directory}: cannot write there ({exc.strerror or exc}); "
            "pick a directory you can write, or leave --output out to render into manifests/"
        ) from None

"""The ``imagebump`` command: a thin ``main(argv) -> int`` over the subcommands.

Each subcommand lives in ``imagebump/commands/<name>.py`` and exposes
``add_parser(subparsers) -> argparse.ArgumentParser`` which sets ``func`` (``(args) -> int``).
Command modules import their heavy dependencies inside ``func`` so ``imagebump --help`` is fast.

Exit codes: 0 success; 1 the command's own "no" (e.g. image not in file); 2 bad input (argparse
and :class:`steps.domain.errors.ConfigError`); 3 an unexpected error (message, no traceback unless
``IMAGEBUMP_DEBUG=1``); 75 a transient failure worth retrying; 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from imagebump import __version__

#: Subcommand modules, in the order ``--help`` lists them.
COMMANDS = ("demo", "run", "reconcile", "explain", "set_image", "render", "backup", "restore")

EXIT_UNEXPECTED = 3
EXIT_INTERRUPTED = 130

#: Commands whose log records (and errors) follow ``--log-format``: human-readable lines on stderr,
#: or with ``json`` the steps' JSON lines (:func:`steps.runtime.harness.configure_cli_logging`).
LOGGING_COMMANDS = ("backup", "restore", "reconcile", "set-image")
LOG_FORMATS = ("text", "json")
LOG_FORMAT_HELP = (
    "how backup, restore, reconcile and set-image log on stderr: text (human-readable lines) or json "
    "(one JSON object per line, as the workflow steps log; default: $IMAGEBUMP_LOG_FORMAT, else text)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="imagebump",
        description="Turn an ECR image push into a Git change (commit or pull request).",
    )
    parser.add_argument("--version", action="version", version=f"imagebump {__version__}")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default=None, help=LOG_FORMAT_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"imagebump.commands.{name}")
        except ModuleNotFoundError as exc:  # a command not built yet must not break the others
            if exc.name == f"imagebump.commands.{name}":
                continue
            raise
        command = module.add_parser(sub)
        if command is not None and command.prog.rsplit(" ", 1)[-1] in LOGGING_COMMANDS:
            # also after the command (`imagebump backup --log-format json`); SUPPRESS keeps a value
            # given before the command
            command.add_argument(
                "--log-format", choices=LOG_FORMATS, default=argparse.SUPPRESS, help=LOG_FORMAT_HELP
            )
    return parser


def log_format(args: argparse.Namespace) -> str:
    """``--log-format`` (before or after the command), else ``$IMAGEBUMP_LOG_FORMAT``, else text."""
    chosen = getattr(args, "log_format", None) or os.environ.get("IMAGEBUMP_LOG_FORMAT", "").strip().lower()
    return chosen if chosen in LOG_FORMATS else "text"


def main(argv: Sequence[str] | None = None) -> int:
    from steps.domain.errors import ImagebumpError
    from steps.domain.terminal import for_terminal

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    undo = None
    fmt = log_format(args)
    if args.command in LOGGING_COMMANDS:
        from steps.runtime.harness import configure_cli_logging

        undo = configure_cli_logging(args.command, fmt)
    try:
        return int(args.func(args) or 0)
    except ImagebumpError as exc:
        if undo is not None and fmt == "json":  # every stderr line a JSON record, the error too
            logging.getLogger("imagebump.cli").error(
                "%s", exc, extra={"fields": {"error": type(exc).__name__, "exit_code": exc.exit_code}}
            )
        else:
            print(
                f"imagebump {args.command}: error: {for_terminal(exc, 4000, newlines=True)}", file=sys.stderr
            )
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"imagebump {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if os.environ.get("IMAGEBUMP_DEBUG"):
            raise
        print(
            f"imagebump {args.command}: unexpected error: {type(exc).__name__}: "
            f"{for_terminal(exc, 4000, newlines=True)}\n"
            "This is a bug or an environment problem; rerun with IMAGEBUMP_DEBUG=1 for a traceback "
            "and report it.",
            file=sys.stderr,
        )
        return EXIT_UNEXPECTED
    finally:
        if undo is not None:
            undo()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``imagebump explain --rules FILE (IMAGE | --event FILE)``: which overlays would an image update?

Prints one JSON object ``{"image": …, "targets": [...], "skipped": [{"rule": i, "reason": …}]}``
(plus ``"reason"`` when the event is not a push or nothing matches). It reads only the rules
file and the event file: no AWS access, so the digest is the one given (or null) and the push
time is the event's. Exit 0 also when nothing matches; 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "explain",
        help="show which overlays an image push would update (no AWS access)",
        description="Match an image reference or an ECR push event against a rules file and print the "
        "targets as JSON, with the reason each other rule does not apply.",
    )
    parser.add_argument("--rules", required=True, metavar="FILE", help="the rules file (YAML)")
    parser.add_argument(
        "image",
        nargs="?",
        metavar="IMAGE",
        help="ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:TAG][@sha256:DIGEST]",
    )
    parser.add_argument("--event", metavar="FILE", help="an EventBridge ECR event (JSON), '-' for stdin")
    parser.set_defaults(func=explain)
    return parser


def _read_event(path: str) -> bytes:
    from steps.domain.errors import ConfigError
    from steps.domain.events import MAX_BODY_BYTES

    if path == "-":
        return sys.stdin.buffer.read(MAX_BODY_BYTES + 1)
    try:
        with open(path, "rb") as f:
            return f.read(MAX_BODY_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read event file {path!r}: {exc.strerror or exc}") from None


def explain(args: argparse.Namespace) -> int:
    from steps.domain.errors import ConfigError
    from steps.domain.events import Skip, parse_event, parse_image_reference
    from steps.rules import load_rules_file

    if bool(args.image) == bool(args.event):
        raise ConfigError("give exactly one of IMAGE and --event FILE")
    rules = load_rules_file(args.rules)
    parsed = parse_image_reference(args.image) if args.image else parse_event(_read_event(args.event))
    out: dict[str, Any]
    if isinstance(parsed, Skip):
        out = {"image": None, "targets": [], "skipped": [], "reason": parsed.reason}
    else:
        match = rules.match(parsed, all_reasons=True)
        image = parsed.model_dump(mode="json")
        if parsed.account:
            image["uri"] = parsed.uri
            image["reference"] = parsed.reference
        out = {
            "image": image,
            "targets": [t.model_dump(mode="json") for t in match.targets],
            "skipped": [s.model_dump(mode="json") for s in match.skipped],
        }
        if not match.targets:
            out["reason"] = (
                f"no rule yields a target for {parsed.reference if parsed.account else parsed.repository}"
            )
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0

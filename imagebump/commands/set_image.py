"""``imagebump set-image PATH SPEC [--add]``: set one image of a kustomization in place.

Reads the kustomization at PATH (the file, or the directory holding it), applies the pure edit of
:func:`steps.kustomize.set_image` and writes the file back only if it changed — atomically (a
temporary file in the same directory, then ``os.replace``) and with its mode kept. SPEC is
kustomize's own ``NAME[=NEWNAME][:TAG][@DIGEST]``.

Exit codes: 0 changed or already current; 1 the image is not in the file (the message lists the
ones that are; nothing written) unless ``--add``; 2 bad input (invalid YAML, tag or digest, no
kustomization found; nothing written).
"""

from __future__ import annotations

import argparse
import sys

EXAMPLE = """\
examples:
  imagebump set-image overlays/prod api:1.4.2
  imagebump set-image overlays/prod/kustomization.yaml api=123456789012.dkr.ecr.us-west-2.amazonaws.com/api:1.4.2
  imagebump set-image overlays/prod api@sha256:<64 hex>
  imagebump set-image overlays/prod worker:2.0 --add
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "set-image",
        help="set an image's tag/digest/newName in a kustomization, changing only the lines that must change",
        description="Set newName/newTag/digest of one images entry of a kustomization, in place. "
        "A tag alone removes an existing digest; a digest alone removes newTag.",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help="a kustomization file, or the directory that holds it")
    parser.add_argument("spec", metavar="SPEC", help="NAME[=NEWNAME][:TAG][@DIGEST] (kustomize's syntax)")
    parser.add_argument("--add", action="store_true", help="append the image to images: if it is not there")
    parser.set_defaults(func=run)
    return parser


def _describe(entry) -> str:
    if entry is None:
        return "(absent)"
    ref = entry.newName or ""
    if entry.newTag:
        ref += f":{entry.newTag}" if ref else entry.newTag
    if entry.digest:
        ref += f"@{entry.digest[:19]}…"
    return ref or "(unset)"


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from steps.errors import ConfigError, ImageNotFoundError
    from steps.kustomize import find_kustomization, get_image, parse_image_spec, set_image

    spec = parse_image_spec(args.spec)
    given = Path(args.path)
    if given.is_dir():
        path = find_kustomization(given)
    elif given.is_file():
        path = given
    else:
        raise ConfigError(f"{given}: no such file or directory; pass a kustomization file or its directory")
    shown = str(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{shown}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read: {exc.strerror}") from None

    old = get_image(text, spec.name, source=shown)
    try:
        new_text = set_image(
            text, spec.name, new_name=spec.new_name, tag=spec.tag, digest=spec.digest, add=args.add, source=shown
        )
    except ImageNotFoundError as exc:
        print(f"imagebump set-image: {exc} or pass --add", file=sys.stderr)
        return 1
    if new_text is text or new_text == text:
        print(f"{shown}: {spec.name} already current ({_describe(old)})")
        return 0
    _write_atomically(path, new_text.encode("utf-8"))
    new = get_image(new_text, spec.name, source=shown)
    if old is None:
        print(f"{shown}: {spec.name} added ({_describe(new)})")
    else:
        print(f"{shown}: {spec.name} {_describe(old)} → {_describe(new)}")
    return 0


def _write_atomically(path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one rename, keeping its permission bits."""
    import os
    import stat
    import tempfile

    from steps.errors import ConfigError

    mode = stat.S_IMODE(path.stat().st_mode)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise ConfigError(f"{path}: cannot write: {exc.strerror}") from None

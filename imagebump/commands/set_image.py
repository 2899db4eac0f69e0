"""``imagebump set-image PATH SPEC [--add]``: set one image of a kustomization in place.

Reads the kustomization at PATH (the file, or the directory holding it), applies the pure edit of
:func:`steps.kustomize.edit_image` (SPEC is kustomize's own ``NAME[=NEWNAME][:TAG][@DIGEST]``) and
writes the file back only if it changed, atomically and with its mode kept. A symbolic link is
followed only while it stays inside the repository. A person acting: it changes a held entry and
says which hold it lifted, and keeps a ``# imagebump:hold`` marker. Exit codes: 0 changed or
current, 1 the image is not in the file (unless ``--add``), 2 bad input; nothing written unless 0.
Helm values files: ``--values`` names PATH a Helm values file (or any YAML a chart reads); SPEC is
then ``REPOSITORY[:TAG][@DIGEST]`` and every place the file holds that repository (the shapes
:mod:`steps.kustomize.values` finds, or the fields ``--values-key ROLE=PATH`` names) is set, only
those scalars rewritten; each is printed.
"""

from __future__ import annotations

import argparse
import sys

EXAMPLE = """\
examples:
  imagebump set-image overlays/prod api:1.4.2
  imagebump set-image overlays/prod/kustomization.yaml api=123456789012.dkr.ecr.us-west-2.amazonaws.com/api:1.4.2
  imagebump set-image overlays/prod api@sha256:<64 hex>
  imagebump set-image overlays/prod 'api=*:1.4.3'     # keep newName, set the tag
  imagebump set-image overlays/prod worker:2.0 --add
  imagebump set-image --values charts/api/values-prod.yaml 123456789012.dkr.ecr.us-west-2.amazonaws.com/api:1.4.2
  imagebump set-image --values values.yaml docker.elastic.co/elasticsearch/elasticsearch:8.6.0 \
      --values-key repository=image --values-key tag=imageTag
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "set-image",
        help="set an image's tag/digest/newName in a kustomization, changing only the lines that must change",
        description="Set newName/newTag/digest of one images entry of a kustomization, in place. "
        "The entry is found by name, as kustomize does. A tag alone removes an existing digest; a "
        "digest alone removes newTag; '*' keeps a part as the file has it. A symbolic link is edited "
        "through while it stays inside the repository (or the directory given), refused otherwise.",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help="a kustomization file, or the directory that holds it")
    parser.add_argument(
        "spec", metavar="SPEC", help="NAME[=NEWNAME][:TAG][@DIGEST] (kustomize's syntax; '*' keeps a part)"
    )
    parser.add_argument("--add", action="store_true", help="append the image to images: if it is not there")
    parser.add_argument(
        "--values",
        "--values-file",
        dest="values",
        action="store_true",
        help="PATH is a Helm values file: set the image REPOSITORY[:TAG][@DIGEST] wherever the file holds it",
    )
    parser.add_argument(
        "--values-key",
        action="append",
        default=[],
        metavar="ROLE=PATH",
        help="with --values: the dotted path of the image's repository, tag, registry or digest "
        "(for a chart whose keys follow none of the known shapes)",
    )
    parser.set_defaults(func=run)
    return parser


def _describe(entry) -> str:
    from steps.domain.models import image_ref

    if entry is None:
        return "(absent)"
    return image_ref(
        entry.newTag, entry.digest, name=entry.newName or "", short=True, mark="…", none="(unset)"
    )


def _boundary(given, path):
    """The directory an edit must stay inside: the git work tree holding ``path``, else the directory given.

    Found lexically (no link followed on the way up): a ``.git`` directory or file (worktrees and
    submodules have a file) marks the top of a work tree.
    """
    import os
    from pathlib import Path

    start = Path(os.path.abspath(path)).parent
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory, True
    return Path(os.path.abspath(given if given.is_dir() else given.parent)), False


def _real_target(given, path):
    """The file to write: ``path`` with every link resolved, refused if it leaves the boundary.

    Raises:
        ConfigError: the kustomization (or a directory on its way) is a link out of the boundary,
            or into ``.git``.
    """
    from steps.domain.errors import ConfigError

    boundary, in_git = _boundary(given, path)
    root = boundary.resolve()
    real = path.resolve(strict=True)
    where = (
        f"the repository {boundary}" if in_git else f"the directory given, {boundary} (not a git work tree)"
    )
    if not real.is_relative_to(root):
        raise ConfigError(
            f"{path} leaves {where} through a symbolic link (to {real}); refusing to edit a file outside it. "
            "Edit that file where it lives, or replace the link by a copy"
        )
    if in_git and real.is_relative_to(root / ".git"):
        raise ConfigError(f"{path} points into .git through a symbolic link; refusing")
    return real


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from steps.domain.errors import ConfigError, ImageNotFoundError
    from steps.domain.terminal import for_terminal
    from steps.kustomize import edit_image, find_kustomization, parse_image_spec

    if getattr(args, "values", False):
        return _run_values(args)
    spec = parse_image_spec(args.spec)
    given = Path(args.path)
    if given.is_dir():
        path = find_kustomization(given)
    elif given.is_file():
        path = given
    else:
        raise ConfigError(f"{given}: no such file or directory; pass a kustomization file or its directory")
    shown = str(path)
    target = _real_target(given, path)
    try:
        text = target.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{shown}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read: {exc.strerror}") from None

    try:
        edit = edit_image(
            text,
            spec.name,
            new_name=spec.new_name,
            tag=spec.tag,
            digest=spec.digest,
            add=args.add,
            by_new_name=False,
            source=shown,
        )
    except ImageNotFoundError as exc:
        print(f"imagebump set-image: {for_terminal(exc, 4000)} or pass --add", file=sys.stderr)
        return 1
    # what the file and its history say is others' text: shown through for_terminal
    name = for_terminal(edit.new.name)  # the entry that was (or will be) changed: one parse told all of it
    where = for_terminal(shown)
    if not edit.changed:
        print(f"{where}: {name} already current ({for_terminal(_describe(edit.old))})")
        return 0
    _write_atomically(target, edit.text.encode("utf-8"), shown)
    if edit.old is None:
        print(f"{where}: {name} added ({for_terminal(_describe(edit.new))})")
    else:
        print(f"{where}: {name} {for_terminal(_describe(edit.old))} → {for_terminal(_describe(edit.new))}")
        for note in _holds(given, target, text, edit.new.name, edit.new):
            print(f"{where}: {name} {for_terminal(note, None)}")
    return 0


def _run_values(args: argparse.Namespace) -> int:
    """``--values``: the values-file writer (:mod:`steps.kustomize.values`) on PATH."""
    from pathlib import Path

    from steps.domain.errors import ConfigError, ImageNotFoundError
    from steps.domain.models import image_ref
    from steps.kustomize import parse_image_spec
    from steps.kustomize.values import VALUES_KEYS, edit_values

    spec = parse_image_spec(args.spec)
    if spec.new_name is not None or "*" in (spec.tag, spec.digest) or args.add:
        raise ConfigError("--values takes REPOSITORY[:TAG][@DIGEST] (no '=NEWNAME', no '*', no --add)")
    if spec.tag is None and spec.digest is None:
        raise ConfigError(f"nothing to set for {spec.name}: give :TAG and/or @DIGEST")
    keys = None
    if args.values_key:
        keys = {}
        for item in args.values_key:
            role, eq, path = item.partition("=")
            if not eq or role not in VALUES_KEYS or not path.strip():
                raise ConfigError(
                    f"--values-key {item!r}: expected ROLE=PATH, ROLE one of {', '.join(VALUES_KEYS)}"
                )
            keys[role] = path.strip()
        if "repository" not in keys or "tag" not in keys:
            raise ConfigError("--values-key needs repository=PATH and tag=PATH")
    given = Path(args.path)
    if not given.is_file():
        raise ConfigError(f"{given}: no such file; pass the values file")
    shown = str(given)
    target = _real_target(given, given)
    try:
        text = target.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{shown}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read: {exc.strerror}") from None
    try:
        edit = edit_values(text, spec.name, tag=spec.tag, digest=spec.digest, source=shown, keys=keys)
    except ImageNotFoundError as exc:
        print(f"imagebump set-image: {exc}", file=sys.stderr)
        return 1

    def version(entry) -> str:
        return image_ref(entry.newTag, entry.digest, short=True, mark="…", none="(unset)")

    if not edit.changed:
        print(f"{shown}: {spec.name} already current ({version(edit.old)})")
        return 0
    _write_atomically(target, edit.text.encode("utf-8"), shown)
    print(f"{shown}: {spec.name} {version(edit.old)} → {version(edit.new)} ({', '.join(edit.edited)})")
    for note in edit.notes:
        print(f"{shown}: {note}")
    return 0


def _holds(given, target, text: str, name: str, new) -> list[str]:
    """What set-image (a person acting) did to the entry's holds, in words: the hold of a rollback
    it lifts (the last commit that changed the entry in the local history, not imagebump's, moved
    it back; the new image is not older), and a ``# imagebump:hold`` marker, which it changed the
    entry through and which stays until removed. Reads the local repository only (no request)."""
    from steps.domain.errors import ImagebumpError
    from steps.domain.intent import HOLD_MARKER, rollback
    from steps.domain.models import entry_ref
    from steps.domain.terminal import for_terminal
    from steps.domain.version_order import compare_semver, parse_semver
    from steps.entry_history import last_image_change
    from steps.git import ClonedRepo
    from steps.kustomize import hold_marker

    notes = []
    marker = hold_marker(text, name, by_new_name=False)
    if marker is not None:
        notes.append(
            f"is held by '# {HOLD_MARKER}{' ' + for_terminal(marker, 200) if marker else ''}': changed as you "
            "asked; the "
            "marker stays, and imagebump leaves the entry alone until you remove it"
        )
    root, in_git = _boundary(given, target)
    if not in_git:
        return notes
    try:
        file = target.relative_to(root.resolve()).as_posix()
        change = last_image_change(ClonedRepo(root, "HEAD"), "HEAD", file, name, fetch=False)
    except (ImagebumpError, ValueError, OSError):
        return notes  # no readable history: nothing to say about it
    if change is None:
        return notes
    versions = [parse_semver(e.newTag) for e in (change.before, change.after, new)]
    order = "semver" if all(versions) else "none"
    found = rollback(change, order, lambda _entry: None)
    if found is None:
        return notes
    if order == "semver" and compare_semver(versions[2], versions[1]) <= 0:  # type: ignore[arg-type]
        return notes  # not forward: once committed, this is the rollback that holds
    unless = f", unless {entry_ref(new)} is older than {entry_ref(found.after)} by the rule's order"
    notes.append(f"lifts the hold of {found.describe()} once committed{'' if order == 'semver' else unless}")
    return notes


def _write_atomically(path, data: bytes, shown: str) -> None:
    """Replace the file ``path`` (links already resolved) with ``data`` in one rename, keeping its mode.

    Raises:
        ConfigError: the directory or file cannot be written (nothing changed).
    """
    import os
    import stat
    import tempfile

    from steps.domain.errors import ConfigError

    tmp = None
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        reason = exc.strerror or str(exc)
        raise ConfigError(
            f"{shown}: cannot write {path.parent if tmp is None else path}: {reason}; nothing was changed "
            "(set-image writes a temporary file beside the kustomization, then renames it over)"
        ) from None

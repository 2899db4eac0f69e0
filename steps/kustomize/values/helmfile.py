"""A helmfile release's values in an environment: the files (and inline maps) to look in for the image.

helmfile renders ``helmfile.yaml`` (or ``helmfile.yaml.gotmpl``) as a Go template before reading
it; imagebump does not run templates. It reads the file as YAML with the lines that are only
template actions (``{{- if … }}``) set aside (:func:`~steps.kustomize.values.tree.neutralise`),
finds the release by name, and lists, in helmfile's order of precedence (later wins):

1. ``environments.<env>.values`` entries;
2. the release's ``values`` entries — a path (relative to the helmfile's directory, as helmfile
   resolves it, with ``{{ .Environment.Name }}`` replaced by the rule's environment) or an inline
   mapping in the helmfile itself.

Anything else a path holds (``{{ .Values.x }}``, ``{{ requiredEnv … }}``) cannot be resolved
without running helmfile: a clear error names it. Parse only what is needed. Pure.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass

from steps.domain.errors import ImageNotFoundError
from steps.kustomize.values.tree import ValuesError, VMap, VScalar, VSeq, compose

_ENV_NAME = re.compile(r"\{\{-?\s*\.Environment\.Name\s*-?\}\}")


@dataclass(frozen=True)
class ValuesSource:
    """One place a release's values come from: a file (repository-relative), or an inline mapping
    of the helmfile (``scope``: its path, document index first)."""

    file: str
    scope: tuple | None = None

    def __str__(self) -> str:
        if self.scope is None:
            return self.file
        return f"{self.file} (inline values at {'.'.join(str(p) for p in self.scope[1:])})"


def release_sources(text: str, helmfile: str, release: str, environment: str) -> list[ValuesSource]:
    """Where release ``release`` of the helmfile at repository path ``helmfile`` takes its values in
    ``environment`` (``""``: helmfile's ``default``), lowest precedence first.

    Raises:
        ValuesError: the helmfile cannot be read, has no (or several) such release, or a values
            path needs more than ``{{ .Environment.Name }}`` to resolve.
    """
    environment = environment or "default"  # helmfile's own default without --environment
    roots = compose(text, helmfile)
    base = posixpath.dirname(helmfile)
    found: list[ValuesSource] = []
    releases: list[tuple[int, int, VMap]] = []
    names: list[str] = []
    for d, root in enumerate(roots):
        if not isinstance(root, VMap):
            continue
        envs = root.get("environments")
        if isinstance(envs, VMap):
            env = envs.get(environment)
            values = env.get("values") if isinstance(env, VMap) else None
            found += _entries(values, (d, "environments", environment, "values"), base, helmfile, environment)
        seq = root.get("releases")
        if isinstance(seq, VSeq):
            for i, item in enumerate(seq.items):
                if isinstance(item, VMap):
                    name = item.get("name")
                    if isinstance(name, VScalar):
                        names.append(name.value)
                        if name.value == release:
                            releases.append((d, i, item))
    if not releases:
        listed = ", ".join(names) if names else "none"
        raise ValuesError(
            f"{helmfile}: no release named {release!r} (releases: {listed}); fix the rule's helmfile.release"
        )
    if len(releases) > 1:
        raise ValuesError(
            f"{helmfile}: {len(releases)} releases are named {release!r}; imagebump cannot tell which one the rule means"
        )
    d, i, item = releases[0]
    found += _entries(item.get("values"), (d, "releases", i, "values"), base, helmfile, environment)
    return found


def _entries(values, path: tuple, base: str, helmfile: str, environment: str) -> list[ValuesSource]:
    if values is None or (isinstance(values, VScalar) and values.null):
        return []
    if not isinstance(values, VSeq):
        raise ValuesError(f"{helmfile}: {'.'.join(str(p) for p in path[1:])} is not a list")
    out = []
    for j, entry in enumerate(values.items):
        if isinstance(entry, VMap):
            out.append(ValuesSource(helmfile, (*path, j)))
        elif isinstance(entry, VScalar) and not entry.null:
            out.append(ValuesSource(_resolve_path(entry.value, base, helmfile, environment)))
    return out


def _resolve_path(raw: str, base: str, helmfile: str, environment: str) -> str:
    value = _ENV_NAME.sub(environment, raw)
    if "{{" in value or "}}" in value:
        raise ValuesError(
            f"{helmfile}: the values path {raw!r} needs helmfile to render it (imagebump resolves only "
            "{{ .Environment.Name }}, from the rule's helmfile.environment); name the values file with "
            "valuesFile instead"
        )
    if value.startswith("/") or "://" in value:
        raise ValuesError(f"{helmfile}: the values path {raw!r} is not inside the repository")
    joined = posixpath.normpath(posixpath.join(base, value))
    if joined == ".." or joined.startswith("../"):
        raise ValuesError(f"{helmfile}: the values path {raw!r} leaves the repository")
    return joined


def locate_image(
    read: Callable[[str], str | None],
    helmfile: str,
    release: str,
    environment: str,
    repository: str,
    keys: dict[str, str] | None = None,
) -> tuple[str, str, tuple | None]:
    """(file, its text, scope) of the release's values that hold ``repository``: its sources
    (:func:`release_sources`) searched highest precedence first; ``read`` gives a repository
    file's text (None: absent — a conditional file helmfile skips too).

    Raises:
        ImageNotFoundError: no source holds the image (the message lists those searched).
        ValuesError: the helmfile cannot be read or resolved.
    """
    from steps.kustomize.values.edit import find_pushed

    text = read(helmfile)
    if text is None:
        raise ValuesError(f"helmfile {helmfile} is not in the repository; fix helmfile.file in the rule")
    searched = []
    for source in reversed(release_sources(text, helmfile, release, environment)):
        body = text if source.file == helmfile else read(source.file)
        if body is None:
            searched.append(f"{source} (absent)")
            continue
        searched.append(str(source))
        try:
            _, _, matches = find_pushed(body, repository, source=source.file, keys=keys, scope=source.scope)
        except ValuesError:
            if keys is None:
                raise
            continue  # valuesKeys name fields of another of the release's files
        if matches:
            return source.file, body, source.scope
    raise ImageNotFoundError(
        f"image {repository!r} is in none of the values of release {release!r} (environment "
        f"{environment or '(none)'}) of {helmfile}: searched {', '.join(searched) or 'nothing'}",
        found=[],
    )

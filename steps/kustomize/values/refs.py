"""Image references as the container runtime reads them: split ``repo[:tag][@digest]``, normalise names.

Normalising follows distribution/reference (``ParseNormalizedNamed``, used by Docker and
containerd): the first path segment is a registry host when it holds a ``.`` or a ``:``, is
``localhost``, or has an upper-case letter; otherwise the image is on ``docker.io``, and a
one-segment name there is under ``library/``. ``index.docker.io`` is ``docker.io``. Pure.
"""

from __future__ import annotations

from steps.kustomize.spec import split_reference

__all__ = ["DOCKER_HUB", "join_registry", "normalise", "same_repository", "spellings", "split_reference"]

DOCKER_HUB = "docker.io"


def join_registry(registry: str | None, repository: str) -> str:
    """``registry/repository`` (the registry's trailing ``/`` dropped), or the repository alone."""
    registry = (registry or "").strip().rstrip("/")
    return f"{registry}/{repository}" if registry else repository


def normalise(name: str) -> str:
    """The repository name the container runtime pulls: ``nginx`` → ``docker.io/library/nginx``."""
    name = name.strip()
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost" or first.lower() != first):
        host = first.lower()
        if host == "index.docker.io":
            host = DOCKER_HUB
        path = rest
    else:
        host, path = DOCKER_HUB, name
    if host == DOCKER_HUB and "/" not in path:
        path = "library/" + path
    return f"{host}/{path}"


def same_repository(a: str, b: str) -> bool:
    """Do two repository names (no tag) name the same repository once normalised?"""
    return normalise(a) == normalise(b)


def spellings(name: str) -> tuple[str, ...]:
    """The ways a values file may write the repository ``name``: as given, normalised, and Docker
    Hub's short forms (``docker.io/library/nginx``, ``library/nginx``, ``nginx``)."""
    full = normalise(name)
    found = {name.strip(), full}
    if full.startswith(DOCKER_HUB + "/"):
        path = full[len(DOCKER_HUB) + 1 :]
        found.add(path)
        if path.startswith("library/"):
            found.add(path[len("library/") :])
    return tuple(sorted(found, key=len, reverse=True))

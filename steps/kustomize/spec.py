"""Image specs: kustomize's ``NAME[=NEWNAME][:TAG][@DIGEST]`` (``edit set image``), parsed and checked.

Pure. Tags and digests are checked by the one check in :mod:`steps.domain.events` (as a
:class:`~steps.domain.errors.ConfigError` here: the spec is the user's argument).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from steps.domain.errors import ConfigError
from steps.domain.events import validate_digest, validate_tag
from steps.domain.models import image_ref

#: An image name as kustomize and container runtimes take it: ``[host[:port]/]path``.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?::[0-9]+)?(?:/[A-Za-z0-9._-]+)*")
#: kustomize's "keep this part" in ``NAME=*:TAG``, ``NAME=NEWNAME:*``, ``NAME:TAG@*`` (setimage.go).
KEEP = "*"


# --------------------------------------------------------------------------------------------
# Image specs (kustomize's `edit set image` syntax)


@dataclass(frozen=True)
class ImageSpec:
    """One ``NAME[=NEWNAME][:TAG][@DIGEST]`` as ``kustomize edit set image`` takes it (``*``: keep)."""

    name: str
    new_name: str | None = None
    tag: str | None = None
    digest: str | None = None

    def __str__(self) -> str:
        return image_ref(
            self.tag, self.digest, name=f"{self.name}={self.new_name}" if self.new_name else self.name
        )


def split_reference(ref: str) -> tuple[str, str | None, str | None]:
    """``name[:tag][@digest]`` → parts; a ``:`` before the last ``/`` is a registry port."""
    digest = None
    if "@" in ref:
        ref, digest = ref.split("@", 1)
    tag = None
    colon = ref.rfind(":")
    if colon > ref.rfind("/"):
        ref, tag = ref[:colon], ref[colon + 1 :]
    return ref, tag, digest


def validate_image_name(name: str, what: str = "image name") -> str:
    """Return ``name`` if it is a plausible ``[host[:port]/]path`` image name, else raise."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ConfigError(
            f"invalid {what} {name!r}: expected [HOST[:PORT]/]PATH of letters, digits, '.', '_', '-'",
            reason="invalid-name",
            field=what,
        )
    return name


def parse_image_spec(spec: str) -> ImageSpec:
    """Parse kustomize's ``NAME[=NEWNAME][:TAG][@DIGEST]``.

    ``host:5000/app:1.0`` is name ``host:5000/app`` with tag ``1.0``. With ``=``, the tag and
    digest belong to the new name's side (``api=reg/api:1.2``), as in kustomize. ``*`` as the new
    name, the tag or the digest (``api=*:1.2``, ``api=reg/api:*``, ``api:1.2@*``) keeps what the
    file has there: "Passing * (asterisk) either as the new name, the new tag, or the digest will
    preserve the appropriate values from the kustomization file" (``kustomize edit set image
    --help``; kubernetes-sigs/kustomize ``kustomize/commands/edit/set/setimage.go``).

    Raises:
        ConfigError: an empty part, or an invalid name, tag or digest.
    """
    spec = (spec or "").strip()
    if not spec:
        raise ConfigError("empty image spec: expected NAME[=NEWNAME][:TAG][@DIGEST]", reason="invalid-spec")
    new_name = None
    if "=" in spec:
        name, rest = spec.split("=", 1)
        new_name, tag, digest = split_reference(rest)
        if not new_name:
            raise ConfigError(
                f"image spec {spec!r}: nothing after '='; expected NAME=NEWNAME[:TAG][@DIGEST]",
                reason="invalid-spec",
            )
        if new_name != KEEP:
            validate_image_name(new_name, "new name")
    else:
        name, tag, digest = split_reference(spec)
    if not name:
        raise ConfigError(
            f"image spec {spec!r} has no NAME; expected NAME[=NEWNAME][:TAG][@DIGEST]", reason="invalid-spec"
        )
    if name == KEEP:
        raise ConfigError(
            f"image spec {spec!r}: NAME cannot be '*' ('*' keeps the new name, tag or digest the file has)",
            reason="invalid-spec",
        )
    validate_image_name(name)
    if tag is not None and tag != KEEP:
        validate_tag(tag, error=ConfigError)
    if digest is not None and digest != KEEP:
        validate_digest(digest, error=ConfigError)
    return ImageSpec(name=name, new_name=new_name, tag=tag, digest=digest)

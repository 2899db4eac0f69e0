"""Read and edit the ``images:`` of a kustomization without disturbing anything else (the package).

Pure functions over text (no I/O except :func:`find_kustomization`, which only looks at names in a
directory): :func:`read_images` / :func:`get_image` read the entries, :func:`set_image` changes only
the lines that must change (nothing is re-dumped) and proves the result says exactly what was meant,
else raises :class:`~steps.domain.errors.KustomizationError`; hostile texts are refused before they cost
anything. Modules, each importing only those before it: ``yaml_nodes`` (libyaml events with
positions, the guards), ``spec`` (``NAME[=NEWNAME][:TAG][@DIGEST]``), ``files`` (finding the kustomization
file), ``reader`` (the one parse), ``splice`` (the line editor's tools), ``verify`` (proving an
edit), ``holds`` (the ``# imagebump:hold`` marker of an entry, or of any node of any YAML file: ``hold_at``), ``values`` (the
Helm values-file writer, a sub-package), ``seam`` (the one way the steps read and write an image,
either writer), ``flow`` (adding ``images:`` to a
kustomization written as one flow mapping), ``edit`` (:func:`set_image`; :func:`edit_image`, the same edit also returning the entry
before and after it). Who it may import: docs/development.md (checked by tests/test_layering.py).
"""

from steps.kustomize.edit import ImageEdit, edit_image, set_image
from steps.kustomize.files import KUSTOMIZATION_FILES, find_kustomization
from steps.kustomize.holds import HOLD_MARKER_RE, hold_at, hold_marker
from steps.kustomize.reader import MAX_ALIAS_EXPANSION, get_image, read_images
from steps.kustomize.seam import (
    edit_entry,
    entry_hold,
    read_entry,
    require_entry,
    values_misread,
    write_entry,
)
from steps.kustomize.spec import KEEP, ImageSpec, parse_image_spec, validate_image_name
from steps.kustomize.values.tree import MAX_VALUES_BYTES, oversize_values
from steps.kustomize.yaml_nodes import MAX_KUSTOMIZATION_BYTES, oversize

__all__ = [
    "HOLD_MARKER_RE",
    "KEEP",
    "KUSTOMIZATION_FILES",
    "MAX_ALIAS_EXPANSION",
    "MAX_KUSTOMIZATION_BYTES",
    "MAX_VALUES_BYTES",
    "ImageEdit",
    "ImageSpec",
    "edit_entry",
    "edit_image",
    "entry_hold",
    "find_kustomization",
    "get_image",
    "hold_at",
    "hold_marker",
    "parse_image_spec",
    "read_entry",
    "read_images",
    "read_limit",
    "require_entry",
    "set_image",
    "validate_image_name",
    "values_misread",
    "write_entry",
]


def read_limit(source: str, *, values: bool) -> dict:
    """``max_bytes`` and ``too_large`` for :meth:`steps.git.ClonedRepo.read` / ``show`` of ``source``, a
    kustomization (1 MiB) or a values file or helmfile (``values``, 4 MiB): a larger file is refused
    by its size, before it is read, with the error its parser would raise."""
    if values:
        return {"max_bytes": MAX_VALUES_BYTES, "too_large": lambda size: oversize_values(size, source)}
    return {"max_bytes": MAX_KUSTOMIZATION_BYTES, "too_large": lambda size: oversize(size, source)}

"""The one seam the steps use to read and write an image, whichever writer the file needs.

Two writers, each a pure core that finds → plans → splices → re-reads: the kustomization's
``images:`` (:mod:`steps.kustomize.edit`) and a Helm values file's fields
(:mod:`steps.kustomize.values`). A plan (:class:`~steps.domain.models.Plan`) with ``values`` set
names a values file; without, a kustomization. Both read the image as an ``images``-style
:class:`~steps.domain.models.ImagesEntry`, so never-downgrade, pins, holds, rollbacks, proposals
and reconcile decide the same way for both. Pure.
"""

from __future__ import annotations

from steps.domain.models import ImagesEntry, ValuesRef
from steps.kustomize import values as _values_writer
from steps.kustomize.edit import set_image
from steps.kustomize.holds import hold_marker
from steps.kustomize.reader import get_image, read_images


def _where(ref: ValuesRef) -> dict:
    """Where the image is in the file, as :func:`~steps.kustomize.values.find_pushed` takes it."""
    return {"keys": ref.keys, "scope": tuple(ref.scope) if ref.scope else None, "inherited": ref.repository}


def read_entry(
    text: str, name: str, *, source: str, values: ValuesRef | None = None, by_new_name: bool = True
) -> ImagesEntry | None:
    """The image ``name`` of the file (None: not there). For a values file ``name`` is the pushed
    repository; an ambiguous match raises."""
    if values is None:
        return get_image(text, name, by_new_name=by_new_name, source=source)
    _, _, matches = _values_writer.find_pushed(text, name, source=source, **_where(values))
    return _values_writer.values_entry(matches, name, source)


def require_entry(text: str, name: str, *, source: str, values: ValuesRef | None = None) -> ImagesEntry:
    """:func:`read_entry`, or :class:`~steps.domain.errors.ImageNotFoundError` naming what the file holds."""
    from steps.domain.errors import ImageNotFoundError

    if values is not None:
        roots, found, matches = _values_writer.find_pushed(text, name, source=source, **_where(values))
        entry = _values_writer.values_entry(matches, name, source)
        if entry is None:
            raise _values_writer.not_found(found, name, source, roots)
        return entry
    entry = get_image(text, name, source=source)
    if entry is None:
        found = [e.name for e in read_images(text, source=source)]
        listed = f"found: {', '.join(found)}" if found else "it has no images entries"
        raise ImageNotFoundError(
            f"image {name!r} not in {source} ({listed}); add it under images:", found=found
        )
    return entry


def write_entry(
    text: str,
    name: str,
    *,
    source: str,
    tag: str | None,
    digest: str | None,
    new_name: str | None = None,
    values: ValuesRef | None = None,
) -> str:
    """The file with image ``name`` set to ``tag`` / ``digest`` (``text`` itself when nothing changes)."""
    if values is None:
        return set_image(text, name, new_name=new_name, tag=tag, digest=digest, source=source)
    return _values_writer.edit_values(
        text,
        name,
        tag=tag,
        digest=digest,
        source=source,
        **_where(values),
        add_digest=values.add_digest,
    ).text


def edit_entry(text: str, name: str, *, source: str, tag: str | None, digest: str | None, values: ValuesRef):
    """A values file's edit with what it did (:class:`~steps.kustomize.values.ValuesEdit`)."""
    return _values_writer.edit_values(
        text,
        name,
        tag=tag,
        digest=digest,
        source=source,
        **_where(values),
        add_digest=values.add_digest,
    )


def values_misread(text: str, name: str, *, source: str, values: ValuesRef) -> list[str]:
    """The pushed image's tags in a values file that Helm reads as another value (``tag: 1.10`` is the
    number 1.1): :func:`steps.kustomize.values.misread_tags`."""
    _, _, matches = _values_writer.find_pushed(text, name, source=source, **_where(values))
    return _values_writer.misread_tags(matches)


def entry_hold(
    text: str, name: str, *, source: str, values: ValuesRef | None = None, by_new_name: bool = True
) -> str | None:
    """The reason of a ``# imagebump:hold`` marker on the image (None: none). For a kustomization,
    :func:`steps.kustomize.holds.hold_marker`; for a values file, a marker on any line of the image's mapping."""
    if values is None:
        return hold_marker(text, name, by_new_name=by_new_name, source=source)
    if "imagebump:hold" not in text:
        return None
    _, _, matches = _values_writer.find_pushed(text, name, source=source, **_where(values))
    return _values_writer.hold_reason(text, matches)

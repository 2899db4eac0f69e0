"""Read and edit the ``images:`` of a kustomization without disturbing anything else (the package).

Modules (each imports only those before it): ``_yaml`` (libyaml events with positions, the
guards), ``spec`` (``NAME[=NEWNAME][:TAG][@DIGEST]``), ``files`` (finding the kustomization file),
``reader`` (the one parse, :func:`read_images`, :func:`get_image`), ``splice`` (the line editor's
tools), ``verify`` (proving an edit), ``edit`` (:func:`set_image`; :func:`edit_image`, the same
edit returning also the entry before and after it). May import ``steps.errors``,
``steps.events`` and ``steps.models``; nothing else of the project.

Pure functions over text (no I/O except :func:`find_kustomization`, which only looks at names in
a directory). :func:`set_image` changes only the lines that must change: it parses the document
with libyaml (PyYAML's C binding, one pass over its events) for *positions* — where the ``images``
entry, its keys and values start and end — and splices the original text at those places: a
value's span is replaced, a new key line is inserted after the entry's last key line with the
entry's own key indentation, a removed key's line(s) are deleted. Comments, blank lines,
indentation style, key order, quoting, ``---`` markers, a BOM and CRLF endings are never
rewritten, and long digests are never wrapped, because nothing is re-dumped. The result is then
parsed again and compared with what was meant (:func:`_verify`); if it differs,
:class:`KustomizationError` is raised rather than returning a wrong file. When nothing must
change, the input string itself is returned. Everything is linear in the size of the file:
``python -m bench.hostile`` times a 1 MiB kustomization.

Hostile input: every entry point (:func:`read_images`, :func:`get_image`, :func:`set_image`)
parses through one function, which refuses a text over :data:`MAX_KUSTOMIZATION_BYTES` (1 MiB)
before parsing it, and — counting while it reads, without expanding anything — aliases that refer
to themselves or add more than :data:`MAX_ALIAS_EXPANSION` nodes once expanded (a "billion laughs"
document), collections nested deeper than 64, and duplicate keys. :func:`set_image` also refuses
a tag YAML does not define (``!Ref``, ``!!python/…``): kustomize ignores such tags, so what the
file means to it is not what it says.

Semantics. kustomize's image transformer (``api/filters/imagetag``) matches each ``images``
entry's ``name`` against the image references in the resources — the name, then an optional
``:tag`` and ``@digest`` (``api/internal/image/image.go``, ``IsImageMatched``) — and never looks
at ``newName`` to find an entry; ``kustomize edit set image`` (``kustomize/commands/edit/set/
setimage.go``) likewise finds the entry to change by ``name``. :func:`set_image` and
:func:`get_image` match ``name``, and — ``by_new_name``, the default, for the pipeline, whose rule
default ``imageName`` is "the entry whose name or newName is the pushed repository" — else
``newName``; ``imagebump set-image`` matches ``name`` only, as kustomize does. Setting a tag
alone removes ``digest`` (a digest overrides the tag); setting a digest alone removes ``newTag``;
both may be set together; ``*`` (:data:`KEEP`) keeps a part as the file has it, as in kustomize's
``NAME=*:TAG``. A scalar YAML 1.1 or 1.2 would read as something other than a string (``1.10``,
``1e3``, ``true``, ``yes``, ``null``, ``0x1F``, ``010``, ``~``) is quoted.
"""

from steps.kustomize._yaml import MAX_KUSTOMIZATION_BYTES
from steps.kustomize.edit import ImageEdit, edit_image, set_image
from steps.kustomize.files import KUSTOMIZATION_FILES, find_kustomization
from steps.kustomize.reader import MAX_ALIAS_EXPANSION, get_image, read_images
from steps.kustomize.spec import KEEP, ImageSpec, parse_image_spec, validate_image_name

__all__ = [
    "KEEP",
    "KUSTOMIZATION_FILES",
    "MAX_ALIAS_EXPANSION",
    "MAX_KUSTOMIZATION_BYTES",
    "ImageEdit",
    "ImageSpec",
    "edit_image",
    "find_kustomization",
    "get_image",
    "parse_image_spec",
    "read_images",
    "set_image",
    "validate_image_name",
]

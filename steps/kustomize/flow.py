"""Adding an ``images`` entry to a kustomization written as one flow mapping (``{…}``).

kyaml writes an empty kustomization as ``{}``; ``kustomize edit set image`` and
argocd-image-updater add the entry to it. So does :func:`steps.kustomize.edit.set_image` with
``add``, through :func:`add_to_flow_mapping`: ``images: [{…}]`` is spliced inside the braces and
nothing else is rewritten (the edit is proved by re-parsing, as every edit is).
"""

from __future__ import annotations

from yaml import events as _ev

from steps.domain.errors import KustomizationError
from steps.kustomize.reader import ParsedDoc
from steps.kustomize.splice import Splicer, colon_after
from steps.kustomize.verify import SEQ_END, SEQ_START, Change
from steps.kustomize.yaml_nodes import refuse_anchor


def add_to_flow_mapping(sp: Splicer, doc: ParsedDoc, entry: tuple, images: str) -> Change:
    """``{…}`` (how kyaml writes an empty kustomization): ``images: [{…}]`` goes inside the braces,
    after the last pair (or in place of a null ``images`` value); nothing else is rewritten."""
    text, root = doc.text, doc.root
    assert root is not None
    if doc.images_key is not None:  # `{images: }` or `{images: null}`
        null = doc.images_null  # libyaml gives every key a value event: an empty one is a null scalar
        assert null is not None and doc.scalar_index is not None
        colon = colon_after(text, doc.images_key)
        if null.end_mark.index > null.start_mark.index:
            refuse_anchor(null, "images:", doc.source)
            sp.replace(null.start_mark.index, null.end_mark.index, images)
        else:
            sp.insert(colon, " " + images)
        return Change(doc.scalar_index[id(null.event)], 1, [SEQ_START, entry, SEQ_END])
    close = root.end_mark.index - 1
    if text[close] != "}":  # pragma: no cover - libyaml marks the end after '}'
        raise KustomizationError(f"{doc.source}: cannot find the end of the kustomization's {{...}}")
    pair = "images: " + images
    if root.value:
        sp.insert(root.value[-1][1].end_mark.index, ", " + pair)
    else:
        sp.insert(close, pair)
    head = ("event", _ev.ScalarEvent(None, None, (True, False), "images"))
    return Change(root.last, 0, [head, SEQ_START, entry, SEQ_END])

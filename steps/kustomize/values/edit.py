"""Editing a values file: find the pushed image → plan the scalars to change → splice → re-read.

:func:`edit_values` is the writer: only the scalars that change are rewritten, in place, by the
same line editor the kustomization writer uses (:class:`~steps.kustomize.splice.Splicer`,
:func:`~steps.kustomize.splice.format_scalar`); comments (a trailing one on the edited line too),
blank lines, quoting, indentation, anchors and aliases, CRLF and the other documents are the
original bytes. A file's documents are read merged, as Helm 4 reads them (the later winning,
:mod:`~steps.kustomize.values.merge`): only the scalars that win are edited. A tag YAML would read as something else (``1.20``, ``1e3``, ``yes``, ``null``,
``0x1F``) is written quoted. The result is read again: every document must parse to the original
data except the edited fields, and every matched image must compose the pushed reference —
else :class:`~steps.kustomize.values.tree.ValuesError` and nothing is written.

Refused (nothing written): a SOPS / helm-secrets file (a top-level ``sops:`` key), an image whose
lines (or the lines next to them) hold Go template actions ``{{ … }}``, a field written as a block
scalar, the pushed repository named inside a block scalar, an ambiguous match (the same
repository under different tags), a value shared through an anchor, an alias or a merge key
(``<<``) with a place that is not the pushed image (Helm writes each alias out as that place's own
value: the edit would change another image), and a stale digest inherited through a merge key. :func:`values_entry` reads the image as an ``images``-style
entry (``name`` the pushed repository, ``newName`` what the file composes, ``newTag``,
``digest``) so that every decision made for kustomizations is made for values files. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from yaml.events import AliasEvent

from steps.domain.errors import ImageNotFoundError
from steps.domain.models import ImagesEntry
from steps.kustomize.holds import HOLD_MARKER_RE
from steps.kustomize.splice import (
    Splicer,
    colon_after,
    end_of_line,
    end_of_line_content,
    format_scalar,
    line_ending,
    start_of_line,
)
from steps.kustomize.values.find import (
    Found,
    block_scalar_mentions,
    effective_values,
    find_images,
    images_at,
    matching,
    show_path,
    version,
)
from steps.kustomize.values.merge import merged_roots
from steps.kustomize.values.refs import normalise, split_reference
from steps.kustomize.values.tree import Documents, ValuesError, VMap, VScalar, compose, reread
from steps.kustomize.yaml_nodes import STR_TAG, position_of, resolve_tag


@dataclass(frozen=True)
class ValuesEdit:
    """What :func:`edit_values` did."""

    text: str  # the new text; the input itself when nothing changed
    changed: bool
    found: list[Found]  # the matched images, before the edit
    edited: list[str] = field(default_factory=list)  # the fields rewritten (dotted paths)
    notes: list[str] = field(default_factory=list)  # anchors shared with other keys, etc.
    old: ImagesEntry | None = None
    new: ImagesEntry | None = None


def read_documents(text: str, source: str) -> Documents:
    """The file's documents (:func:`~steps.kustomize.values.tree.compose`); a SOPS file is refused."""
    roots = compose(text, source)
    for root in roots:
        if isinstance(root, VMap) and root.key_node("sops") is not None:
            raise ValuesError(
                f"{source}: a SOPS / helm-secrets encrypted file (top-level 'sops:'); imagebump never edits "
                "an encrypted file (its MAC would break and the values are ciphertext): keep the image in a "
                "plain values file",
                reason="encrypted",
            )
    return roots


def find_pushed(
    text: str,
    repository: str,
    *,
    source: str = "values.yaml",
    keys: dict[str, str] | None = None,
    scope: tuple | None = None,
    inherited: str | None = None,
) -> tuple[list, list[Found], list[Found]]:
    """(documents, every image found, the images that are ``repository``). With ``keys`` (a
    rule's ``valuesKeys``) the one image they name is returned whatever its repository (a pin).

    A step asks this of the same text several times (the entry, its hold, the edit): the
    documents and images of the last text read are given again when the very same ``str`` object
    comes back with the same question, so a step parses its file once (a text read anew is parsed
    anew). Callers read them, never change them.
    """
    question = (source, tuple(sorted(keys.items())) if keys is not None else None, scope, inherited)
    last = _last_read[0]
    if last is not None and last[0] is text and last[1] == question:
        roots, found = last[2]
    else:
        _last_read[0] = None  # a text that fails to read leaves nothing behind
        roots = read_documents(text, source)
        # Helm 4 merges a file's documents, the later winning: find the images in that merged view,
        # so only the scalars that decide what is deployed are read and edited
        found = find_images(
            merged_roots(roots) if scope is None else roots,
            keys=keys,
            scope=scope,
            source=source,
            inherited=inherited,
        )
        _last_read[0] = (text, question, (roots, found))
    matches = found if keys is not None else matching(found, repository)
    if len(matches) > MAX_VALUES_MATCHES:
        raise ValuesError(
            f"{source}: holds the image {repository} {len(matches)} times, more than the "
            f"{MAX_VALUES_MATCHES} places imagebump edits in one file; nothing was read further. "
            "Set the image once (a chart's global or an anchor) and refer to it",
            reason="too-many-matches",
        )
    return roots, found, matches


#: The most places in one file that may hold the pushed image: a chart repeats an image a few
#: times (a sidecar, a job, an init container); tens of thousands are a file written to be slow.
MAX_VALUES_MATCHES = 1_000

#: The last text :func:`find_pushed` read: (text, (source, keys, scope), (documents, images)).
_last_read: list = [None]


def _one_version(matches: list[Found], source: str) -> tuple[str | None, str | None]:
    tags = {f.tag or None for f in matches}
    if len(tags) > 1:
        listed = "; ".join(f"{f.where} ({f.reference}, line {_line(f)})" for f in matches)
        raise ValuesError(
            f"{source}: ambiguous: {matches[0].repository} appears under {len(tags)} different tags: "
            f"{listed}; imagebump does not guess which to update — name the fields with valuesKeys, "
            "or make the tags agree",
            reason="ambiguous-entry",
        )
    digests = [f.digest for f in matches if f.digest]
    return next(iter(tags)), (digests[0] if digests else None)


def _line(f: Found) -> int:
    node = f.parent_key or f.mapping
    return (node.line if node is not None else 0) + 1


def values_entry(matches: list[Found], image: str, source: str) -> ImagesEntry | None:
    """The matched image as an ``images`` entry (None: no match); an ambiguous match raises."""
    if not matches:
        return None
    tag, digest = _one_version(matches, source)
    composed = matches[0].repository
    new_name = image if normalise(composed) == normalise(image) else composed
    return ImagesEntry(name=image, newName=new_name, newTag=tag, digest=digest)


def not_found(found: list[Found], repository: str, source: str, roots: list | None = None) -> Exception:
    """Why the file holds no image of ``repository``: a block scalar that names it (refused, not
    skipped), else :class:`ImageNotFoundError` listing the images it holds."""
    node = block_scalar_mentions(roots, repository) if roots else None
    if node is not None:
        return _in_block_scalar(repository, node, source)
    names = sorted({f.repository for f in found})
    listed = f"found: {', '.join(names)}" if names else "it holds no image in a known shape"
    chroot = normalise(repository + "-chroot")
    for f in found:
        if f.shape == "image" and normalise(f.repository) == chroot:  # ingress-nginx's chroot: true
            return ImageNotFoundError(
                f"image {repository!r} not in {source} ({listed}): {f.where} sets chroot, so the chart "
                f"deploys {f.repository} (with digestChroot), not {repository}; push {f.repository}, or set "
                "chroot: false to deploy this image",
                found=names,
            )
    return ImageNotFoundError(
        f"image {repository!r} not in {source} ({listed}); write it as repository + tag, or name its "
        "fields with valuesKeys",
        found=names,
    )


def hold_reason(text: str, matches: list[Found]) -> str | None:
    """The reason of a ``# imagebump:hold [reason]`` comment on any line of a matched image's
    mapping ("" without a reason), or None. A ``#`` inside a value is no comment."""
    if "imagebump:hold" not in text:
        return None
    for f in (part for match in matches for part in match.parts()):
        first, stop = f.lines(text)
        spans = []
        if f.mapping is not None:
            spans = [(v.start, v.end) for _, v in f.mapping.pairs if isinstance(v, VScalar)]
        for m in HOLD_MARKER_RE.finditer(text, first, stop):
            if not any(a <= m.start() < b for a, b in spans):
                return m["reason"].strip()
    return None


def _refuse_unsafe(text: str, roots: list, matches: list[Found], repository: str, source: str) -> None:
    for f in matches:
        for node in f.nodes():
            if node.style in ("|", ">"):
                raise ValuesError(
                    f"{source}: {f.where} at {position_of(node.start_mark)} is a block scalar (| or >); "
                    "write the tag on one line (tag: 1.2.3) to let imagebump edit it",
                    reason="block-scalar",
                )
        spans = [part.lines(text) for part in f.parts()]
        lines = [
            text[start_of_line(text, max(first - 1, 0)) : end_of_line_content(text, end_of_line(text, stop))]
            for first, stop in spans
        ]
        if any("{{" in chunk or "}}" in chunk for chunk in lines):
            raise ValuesError(
                f"{source}: the image at {f.where} (line {_line(f)}) is inside or next to Go template actions "
                "({{ … }}); imagebump cannot know what the template renders, so it edits no such line: keep "
                "the image's lines plain YAML (template actions elsewhere in the file are fine)",
                reason="template",
            )
    node = block_scalar_mentions(roots, repository)
    if node is not None:
        raise _in_block_scalar(repository, node, source)


def _in_block_scalar(repository: str, node: VScalar, source: str) -> ValuesError:
    return ValuesError(
        f"{source}: {repository} is named inside a block scalar (| or >) at {position_of(node.start_mark)}; "
        "text inside a block scalar is not YAML imagebump can edit (Flux skips it silently): move the "
        "image to its own fields",
        reason="block-scalar",
    )


def _value_span(text: str, node: VScalar) -> tuple[int, int]:
    """The span of a scalar's value, after its anchor (``&a``) and tag (``!!str``) if any."""
    start, end = node.start, node.end
    if node.anchor is not None or node.explicit_tag is not None:
        i = start
        while i < end and text[i] in "&!":
            while i < end and text[i] not in " \t\r\n":
                i += 1
            while i < end and text[i] in " \t\r\n":
                i += 1
        start = i
    return start, end


@dataclass
class _Plan:
    replace: dict[int, tuple[VScalar, str, bool]] = field(default_factory=dict)  # id -> node, value, flow
    insert: dict[int, tuple[VScalar, str, str, VMap]] = field(default_factory=dict)  # id(map) -> after, k, v
    expect: list[tuple[Found, str | None, str | None]] = field(default_factory=list)

    def set(self, node: VScalar, value: str, flow: bool, source: str) -> None:
        had = self.replace.get(id(node))
        if had is not None and had[1] != value:
            raise ValuesError(
                f"{source}: the scalar at {position_of(node.start_mark)} is shared (an anchor) by images that "
                f"would need different values ({had[1]!r}, {value!r}); write them out separately",
                reason="anchor",
            )
        current = None if node.null else node.value
        if current != value or misread(node):  # the same text Helm reads as a number: quoted
            self.replace[id(node)] = (node, value, flow)


def misread(node: VScalar) -> bool:
    """Whether Helm reads the scalar ``node`` as something other than its text: a plain scalar YAML
    resolves to a number, a boolean or a time (Helm reads values with sigs.k8s.io/yaml into float64,
    bool and time: ``tag: 1.10`` renders ``1.1``, ``tag: 20240101`` renders ``2.0240101e+07``)."""
    if node.style is not None or node.explicit_tag is not None or node.null:
        return False
    value = node.value
    # YAML 1.1, which go-yaml v2 under sigs.k8s.io/yaml mostly follows; where they differ this
    # errs towards quoting (a sexagesimal 1:30 is text to go-yaml v2, quoted all the same)
    return resolve_tag(value, 0) != STR_TAG or _go_yaml_v2_number(value)


#: What go-yaml v2 (gopkg.in/yaml.v2 resolve.go, v2.4; sigs.k8s.io/yaml's fork) also reads as a number
#: or a time beyond YAML 1.1: after dropping every ``_``, ``strconv.ParseInt(s, 0, 64)``'s Go syntax
#: (``0o17``, ``0O17``, and the upper-case prefixes YAML 1.1 does not know: ``0X1F``, ``0B101``, in
#: int64 or, through ``ParseUint``, uint64) and its float gate ``yamlStyleFloat`` (``08``, ``0815``:
#: not octal, so a float, 815), and ``parseTimestamp``'s ``2006-1-2`` (a month or a day of one digit).
_GO_V2_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_GO_V2_OCTAL = re.compile(r"[-+]?0[oO][0-7]+")
_GO_V2_PREFIXED = re.compile(r"([-+]?)0([xXbB])([0-9a-fA-F]+)")
_GO_V2_BASES = {"x": 16, "X": 16, "b": 2, "B": 2}
_GO_V2_DATE = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})")


def _go_yaml_v2_number(value: str) -> bool:
    if value[:1] not in "+-0123456789":
        return False
    date = _GO_V2_DATE.fullmatch(value)
    if date:
        from datetime import date as calendar

        try:
            calendar(*(int(g) for g in date.groups()))
        except ValueError:  # time.Parse refuses it (2024-2-30): text
            return False
        return True
    bare = value.replace("_", "")
    prefixed = _GO_V2_PREFIXED.fullmatch(bare)
    if prefixed:
        sign, base, digits = prefixed.groups()
        try:
            number = int(digits, _GO_V2_BASES[base])
        except ValueError:  # 0B12: not binary, and no float either: text
            return False
        return -(2**63) <= (-number if sign == "-" else number) < 2**64  # ParseInt, else ParseUint
    return bool(_GO_V2_FLOAT.fullmatch(bare) or _GO_V2_OCTAL.fullmatch(bare))


def _helm_scalar(value: str, style: str | None, flow: bool) -> str:
    """``value`` as :func:`~steps.kustomize.splice.format_scalar` writes it (plain only where YAML
    1.1 and 1.2 read it back as this text), double-quoted also where go-yaml v2 alone reads a number
    (``0X1F``): Helm must read the very string the file says."""
    if style is None and _go_yaml_v2_number(value):
        style = '"'
    return format_scalar(value, style, flow)


def misread_tags(matches: list[Found]) -> list[str]:
    """The tags of ``matches`` written so that Helm reads another value (:func:`misread`): the file
    says the pushed tag as text, but the chart deploys something else until it is quoted."""
    return [
        f.tag_slot.value.value
        for f in matches
        if f.tag_slot is not None and isinstance(f.tag_slot.value, VScalar) and misread(f.tag_slot.value)
    ]


def _plan_one(p: _Plan, f: Found, tag: str | None, digest: str | None, add_digest: bool, source: str) -> None:
    if f.string_slot is not None:
        node = f.string_slot.value
        repo_text, old_tag, old_digest = split_reference(node.value.strip())
        t = tag
        d = digest if digest and (old_digest or add_digest or not t) else None
        if not t and not d:
            raise ValuesError(f"{source}: nothing to write at {f.where}")
        p.set(
            node,
            repo_text + (f":{t}" if t else "") + (f"@{d}" if d else ""),
            f.string_slot.mapping.flow,
            source,
        )
        p.expect.append((f, t, d))
        return
    ts, ds = f.tag_slot, f.digest_slot
    flow = ts.mapping.flow if ts is not None and ts.mapping is not None else False
    for key in f.inherited:  # a stale inherited digest would pin the old image; a tag is added
        node = f.mapping.get(key)
        empty = isinstance(node, VScalar) and (node.null or not node.value.strip())
        if (key != "tag" and not empty) or (key == "tag" and ts is None):
            raise ValuesError(
                f"{source}: {f.where} inherits its {key} through a merge key (<<) and sets no {key} of its own, "
                f"so there is no {key} of its own to write: add a {key} key to the image's own mapping "
                f"({f.where}.{key}), then imagebump edits that one",
                reason="merge-key",
            )
    has_digest_slot = ds is not None and ds.key is not None
    raw_tag = ts.value.value if ts is not None and ts.value is not None and not ts.value.null else None
    tag_at = raw_tag is not None and "@" in raw_tag and not has_digest_slot
    new_tag, new_digest = f.tag, None
    if tag is not None:
        new_tag = tag
        value = f"{tag}@{digest}" if (tag_at and digest) else tag
        new_digest = digest if tag_at else None
        if ts is None:
            raise ValuesError(f"{source}: {f.where} has no tag field to write (valuesKeys names none)")
        inherited = f.mapping.get("tag") if "tag" in f.inherited else None
        planned = p.replace.get(id(inherited)) if inherited is not None else None
        if planned is not None and planned[1] == value:
            pass  # inherited (<<) from a tag this edit sets to the same value: nothing to add
        elif ts.key is None:  # `repository:` without `tag:` (the chart defaults to appVersion): add it
            if ts.mapping is None or ts.after is None:
                raise ValuesError(f"{source}: {f.where} has no tag key")
            p.insert[id(ts.mapping)] = (ts.after, "tag", value, ts.mapping)
        elif ts.value is None:
            raise ValuesError(f"{source}: the tag at {f.where} is not a single value")
        else:
            p.set(ts.value, value, flow, source)
    elif has_digest_slot:
        pass  # a digest-only push: the digest field says it, the tag stays
    elif tag_at and digest:
        p.set(ts.value, f"{raw_tag.partition('@')[0]}@{digest}", flow, source)
        new_digest = digest
    else:
        raise ValuesError(
            f"{source}: a digest-only push, but {f.where} has no digest field to write it to; push with a tag, "
            "or add a digest key next to the tag"
        )
    if has_digest_slot:
        flow = ds.mapping.flow if ds.mapping is not None else flow
        if ds.value is None:
            raise ValuesError(f"{source}: the digest at {f.where} is not a single value")
        old = "" if ds.value.null else ds.value.value
        if digest:
            hexonly = ds.name == "sha" and not old.startswith("sha256:")
            value = digest.partition(":")[2] if hexonly else digest
            new_digest = digest
        else:
            value = ""  # a tag-only push: a digest left behind would pin the old image
        if value != old:
            p.set(ds.value, value, flow, source)
    p.expect.append((f, new_tag, new_digest))


def edit_values(
    text: str,
    repository: str,
    *,
    tag: str | None,
    digest: str | None,
    source: str = "values.yaml",
    keys: dict[str, str] | None = None,
    scope: tuple | None = None,
    inherited: str | None = None,
    add_digest: bool = False,
) -> ValuesEdit:
    """Set the pushed image ``repository`` to ``tag`` / ``digest`` wherever the file holds it.

    ``add_digest`` (a rule's ``writeDigest``) also appends the digest to a string ``image:
    repo:tag`` that has none; a digest key next to the tag always gets the pushed digest.

    Raises:
        ImageNotFoundError: the file holds no image of ``repository``.
        ValuesError: the file or the image cannot be edited safely (see the module).
    """
    if not tag and not digest:
        raise ValuesError(f"nothing to set for {repository}: give a tag or a digest", reason="nothing-to-set")
    roots, found, matches = find_pushed(
        text, repository, source=source, keys=keys, scope=scope, inherited=inherited
    )
    if not matches:
        raise not_found(found, repository, source, roots)
    old = values_entry(matches, repository, source)
    if keys is not None and normalise(matches[0].repository) != normalise(repository):
        raise ValuesError(
            f"{source}: the fields valuesKeys names compose {matches[0].repository}, not {repository}: that "
            "image is pinned to another repository; nothing was written",
            reason="pinned",
        )
    _refuse_unsafe(text, roots, matches, repository, source)
    plan = _Plan()
    for f in sorted(matches, key=lambda f: bool(f.inherited)):  # an inherited tag is planned last
        _plan_one(plan, f, tag, digest, add_digest, source)
    t, d = plan.expect[0][1], next((e[2] for e in plan.expect if e[2]), None)
    new = ImagesEntry(name=repository, newName=old.newName, newTag=t, digest=d)
    notes = [
        f"{f.where} is shared with {', '.join(f.shared)} (an anchor: edited once)"
        for f in matches
        if f.shared
    ]
    if not plan.replace and not plan.insert:
        return ValuesEdit(text, False, matches, [], notes, old, new)
    sp = Splicer(text)
    slots = _slots_of(matches)
    for node, value, flow in plan.replace.values():
        start, end = _value_span(text, node)
        if start == end:  # `tag:` with nothing after it
            key = slots[id(node)][1].key
            at = colon_after(text, key) if key is not None else start
            sp.insert(at, " " + _helm_scalar(value, None, flow))
        else:
            style = node.style if node.style in ("'", '"') else None
            sp.replace(start, end, _helm_scalar(value, style, flow))
    for after, key, value, mapping in plan.insert.values():
        value_node = mapping.get(after.value)
        if mapping.flow:
            sp.insert(value_node.end, f", {key}: {_helm_scalar(value, None, True)}")
        else:
            at = end_of_line_content(text, value_node.end)
            indent = " " * after.column
            sp.insert(at, f"{line_ending(text, at)}{indent}{key}: {_helm_scalar(value, None, False)}")
    result = sp.apply()
    _verify(result, roots, plan, repository, source, keys)
    _refuse_other_images_changed(roots, result, matches, repository, source)
    edited = sorted({_where_of(slots, node) for node, _, _ in plan.replace.values()})
    edited += [
        show_path(f.path + ("tag",))
        for f in matches
        if f.tag_slot is not None and id(f.tag_slot.mapping) in plan.insert
    ]
    return ValuesEdit(result, True, matches, edited, notes, old, new)


def _refuse_other_images_changed(
    docs: Documents, result: str, matches: list[Found], repository: str, source: str
) -> None:
    """Refuse an edit that changes a value Helm reads anywhere but in the pushed image.

    Helm reads values through sigs.k8s.io/yaml, which writes every alias out as an independent
    value and resolves merge keys, so a scalar edited at its anchor (``tag: &v 1.0``) changes every
    ``*v``, and a key edited in a merged mapping (``<<: *base``) changes every mapping that inherits
    it. Every value is compared as Helm reads it before and after the edit: a changed one must be a
    field of an image of the pushed repository (the same image: edited rightly), or the anchor's
    own place outside any image (``versions.api: &api 1.4``); a field of another image, or an
    alias or inherited key outside any image, is refused (nothing written). Files without aliases
    share no values and are not read again.
    """
    if not any(event.__class__ is AliasEvent for event in docs.events):
        return
    after_docs = compose(result, source)
    before, after = effective_values(docs), effective_values(after_docs)
    want = normalise(repository)
    for path, (node, through) in after.items():
        was = before.get(path)
        if was is not None and (node.__class__ is not VScalar or _reads_same(was[0], node)):
            continue
        owners = images_at(docs, before, path)
        others = [f for f in owners if normalise(f.repository) != want]
        if not others and (owners or not through):
            continue  # the pushed image's own field, or the anchor's place outside any image
        edited = matches[0].where
        how = _shared_how(docs, before, path)
        if others:
            other = others[0]
            what = f"{show_path(path)}, a field of another image ({other.repository} at {other.where})"
        else:
            what = f"{show_path(path)}, which is not a field of {repository}"
        raise ValuesError(
            f"{source}: editing {repository} at {edited} would also change {what}: {how}, and Helm writes "
            "each alias and inherited key out as that entry's own value; nothing was written. Give "
            f"{show_path(path)} its own value (write it out instead of the alias, or set the key in that "
            "mapping itself), then the edit changes only the pushed image",
            reason="anchor",
        )


def _reads_same(a, b) -> bool:
    return a.__class__ is b.__class__ and (
        a.__class__ is not VScalar or (a.value == b.value and a.tag == b.tag and a.null == b.null)
    )


def _shared_how(docs: Documents, values: dict, path: tuple) -> str:
    """How the value at ``path`` is shared: the anchor it is an alias of, or the merge key it is inherited through."""
    here = values.get(path)
    if here is not None and here[0].anchor is not None:
        return f"the value is the anchor &{here[0].anchor} ({position_of(here[0].start_mark)})"
    for cut in range(len(path) - 1, 0, -1):
        node = values.get(path[:cut])
        if node is None or node[0].__class__ is not VMap:
            continue
        if node[0].anchor is not None and node[1]:
            return f"{show_path(path[:cut])} is an alias of the anchor &{node[0].anchor}"
        merge = node[0].index.get("<<")
        if merge is not None and path[cut] not in node[0].index:
            return f"{show_path(path[:cut])} inherits it through its merge key (<<, {position_of(merge[0].start_mark)})"
    return "the value is shared through an anchor"


def _slots_of(matches: list[Found]) -> dict[int, tuple[Found, object]]:
    """``id(value node)`` → (the first match, its slot) holding it: built once, so an edit of n
    entries looks each node up instead of scanning every match for it (n² with n in the tens of
    thousands was minutes)."""
    slots: dict[int, tuple[Found, object]] = {}
    for f in matches:
        for slot in (f.tag_slot, f.digest_slot, f.string_slot):
            if slot is not None and slot.value is not None:
                slots.setdefault(id(slot.value), (f, slot))
    return slots


def _where_of(slots: dict[int, tuple[Found, object]], node: VScalar) -> str:
    f, slot = slots[id(node)]
    return f.where if slot is f.string_slot else show_path(f.path + (slot.key.value,))


def _verify(result: str, docs: Documents, plan: _Plan, repository: str, source: str, keys) -> None:
    """Read ``result`` again (:func:`~steps.kustomize.values.tree.reread`): the same documents but
    the planned fields, and every match composing the pushed reference from what it reads now;
    else raise (the file is not written)."""
    replaced = {id(node.event): value for node, value, _ in plan.replace.values()}
    inserted = [(after, key, value) for after, key, value, _ in plan.insert.values()]
    read = reread(docs, result, source, replaced, inserted)

    def now(slot) -> str | None:
        """A field's value as ``result`` reads (a field not replaced reads as it did: proven)."""
        if slot is None:
            return None
        if slot.key is None:  # the key inserted after ``slot.after``, else inherited (``<<``) as it was
            event = read.get(id(slot.after)) if slot.after is not None else None
            if event is not None:
                value = event.value
            else:
                inherited = slot.mapping.get(slot.name) if slot.mapping is not None else None
                if isinstance(inherited, VScalar):
                    event = read.get(id(inherited.event))
                    value = event.value if event is not None else None if inherited.null else inherited.value
                else:
                    value = None
        else:
            event = read.get(id(slot.value.event)) if slot.value is not None else None
            if event is not None:
                value = event.value
            else:
                value = None if slot.value is None or slot.value.null else slot.value.value
        return value if value and value.strip() else None

    for f, tag, digest in plan.expect:
        if f.string_slot is not None:
            composed, *version_now = split_reference((now(f.string_slot) or "").strip())
        elif any(id(n.event) in replaced for n in f.sources):
            composed, version_now = "", []  # a field the repository is composed from changed: never planned
        else:
            composed = f.repository  # its fields read as they did
            name = f.digest_slot.name if f.digest_slot is not None else None
            version_now = version(now(f.tag_slot), now(f.digest_slot), name)
        wanted = repository if keys is None else f.repository
        if not composed or normalise(composed) != normalise(wanted) or tuple(version_now) != (tag, digest):
            raise ValuesError(
                f"{source}: after the edit the image at {f.where} does not compose the pushed reference; "
                "nothing was written. This is a bug, please report it with the file",
                reason="edit-mismatch",
            )

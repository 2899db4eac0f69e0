"""Finding images in a values file without markers, by the shapes real charts use.

Shapes (each a mapping, at any depth, in any document, in list items too):

- ``repository`` (+ ``tag`` and/or ``digest`` or ``sha``, optionally ``registry``): Bitnami, Grafana,
  Prometheus, cert-manager, Argo. A mapping with a ``registry`` key takes ``global.imageRegistry``
  (of its document) instead when that is set, as Bitnami's ``common.images.image`` does.
- ``image`` (a repository without tag) + ``tag`` and/or ``digest`` (+ ``registry``): ingress-nginx;
  without ``registry`` the document's ``global.image.registry`` when set. With ``chroot`` set (true,
  or the document's ``global.image.chroot`` when the mapping has no ``chroot`` key) the chart
  deploys ``<registry>/<image>-chroot:<tag>@<digestChroot>`` (ingress-nginx's ``_helpers.tpl``,
  ``ingress-nginx.image`` and ``ingress-nginx.imageDigest``): that is the image, and
  ``digestChroot`` its digest field.
- ``name`` + ``tag`` (+ ``registry``).
- a string ``image: repo:tag`` / ``repo:tag@sha256:…`` / ``repo@sha256:…`` (a key ``image`` or
  ending in ``Image``); a string without tag or digest names no version and is not an image here.
- ``valuesKeys``: dotted paths (``a.b[0].c``) for ``repository`` and ``tag`` (and optionally
  ``registry``, ``digest``) name the fields of a chart that follows none of these.

Fields are read as Helm reads them: a key a mapping inherits through a merge key (``<<: *base``)
is its value too. An image matches the pushed repository when the two name the same repository
once normalised (:func:`~steps.kustomize.values.refs.normalise`). :func:`effective_values` lists
every value as Helm sees it (aliases expanded, merge keys resolved) and :func:`images_at` which
image a value belongs to, so that an edit can prove it changed no other image. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from steps.kustomize.splice import end_of_line, end_of_line_content, start_of_line
from steps.kustomize.values.merge import MergedMap, home
from steps.kustomize.values.refs import join_registry, normalise, spellings, split_reference
from steps.kustomize.values.tree import Documents, ValuesError, VMap, VScalar, VSeq
from steps.kustomize.yaml_nodes import resolve_tag

#: The roles :data:`VALUES_KEYS` may name (``valuesKeys`` of a rule).
VALUES_KEYS = ("repository", "tag", "registry", "digest")
_PATH_RE = re.compile(r"[^.\[\]]+|\[\d+\]")


@dataclass
class Slot:
    """One field of an image: its key and value nodes (value None: the key is absent, to insert)."""

    key: VScalar | None
    value: VScalar | None
    #: For an absent key: the key node after which to insert it, and the mapping holding it.
    after: VScalar | None = None
    mapping: VMap | None = None
    name: str = ""


@dataclass
class Found:
    """One image in the file."""

    path: tuple
    shape: str  # repository | image | name | string | valuesKeys
    repository: str  # as the file composes it: registry/repository
    tag: str | None
    digest: str | None
    mapping: VMap | None  # the mapping that holds the fields
    parent_key: VScalar | None  # the key that introduces the mapping (or holds the string)
    tag_slot: Slot | None = None
    digest_slot: Slot | None = None  # a `digest` key; name `sha`: hex only (the chart adds sha256:)
    string_slot: Slot | None = None  # the string shape's scalar
    #: The scalars the repository is composed from (registry, repository, a global registry); for
    #: the string shape, its one scalar.
    sources: tuple = ()
    #: Other paths where the image's mapping or an edited scalar also is (anchors, aliases, merges).
    shared: list[str] = field(default_factory=list)
    #: The keys of its mapping the image is read from (own or inherited through ``<<``).
    keys: tuple = ()
    #: The version keys (tag, digest) it inherits through a merge key ``<<`` and does not set itself.
    inherited: tuple = ()

    @property
    def where(self) -> str:
        return show_path(self.path)

    @property
    def reference(self) -> str:
        ref = self.repository + (f":{self.tag}" if self.tag else "")
        return ref + (f"@{self.digest}" if self.digest else "")

    def parts(self) -> list[Found]:
        """The image as each real mapping merged into it holds it (:mod:`~steps.kustomize.values.merge`):
        itself, unless several sources' mappings were merged into one."""
        if not isinstance(self.mapping, MergedMap) or self.shape == "string":
            return [self]
        return [replace(self, mapping=part, parent_key=key) for key, part in self.mapping.parts]

    def nodes(self) -> list[VScalar]:
        return [s.value for s in (self.tag_slot, self.digest_slot, self.string_slot) if s and s.value]

    def lines(self, text: str) -> tuple[int, int]:
        """The character span of the image's lines: the key that introduces it to its last value's
        line, and the comment lines right after it indented at least as deep as its keys."""
        start_node = self.parent_key or self.mapping or self.string_slot.value
        first = start_of_line(text, start_node.start)
        while first > 0:  # comment lines right above, at the key's column, belong to it
            above = start_of_line(text, first - 1)
            line = text[above:first].rstrip("\r\n")
            stripped = line.lstrip(" \t")
            if not stripped.startswith("#") or len(line) - len(stripped) != start_node.column:
                break
            first = above
        if self.mapping is not None and self.shape != "string":
            last = _last_end(self.mapping)
            column = self.mapping.column
        else:
            last = self.string_slot.value.end
            column = start_node.column + 1
        stop = end_of_line_content(text, last)
        while stop < len(text):
            nxt = end_of_line_content(text, end_of_line(text, stop))
            line = text[end_of_line(text, stop) : nxt]
            stripped = line.lstrip(" \t")
            if not stripped.startswith("#") or len(line) - len(stripped) < column:
                break
            stop = nxt
        return first, stop


def _last_end(node) -> int:
    while True:
        if isinstance(node, VScalar):
            return node.end
        if node.flow:
            return node.end
        children = [v for _, v in node.pairs] if isinstance(node, VMap) else node.items
        if not children:
            return node.start
        node = children[-1]


def show_path(path: tuple) -> str:
    """``image.tag``, ``containers[0].image``; ``document 2: …`` beyond the first document."""
    doc, rest = path[0], path[1:]
    text = ""
    for part in rest:
        text += f"[{part}]" if isinstance(part, int) else (("." if text else "") + str(part))
    text = text or "(top level)"
    return f"document {doc + 1}: {text}" if doc else text


def _str(node) -> str | None:
    if isinstance(node, VScalar) and not node.null and node.value.strip():
        return node.value
    return None


def _slot(m: VMap, key: str, after: VScalar | None) -> Slot | None:
    k = m.key_node(key)
    if k is None:
        return Slot(None, None, after, _owner(m, after.value), key) if after is not None else None
    v = m.get(key)
    return Slot(k, v if isinstance(v, VScalar) else None, None, _owner(m, key), key)


def _owner(m: VMap, key: str) -> VMap:
    """The mapping whose text holds ``key``: ``m``, or for a merged view the source that won."""
    return home(m, key) if isinstance(m, MergedMap) else m


@dataclass
class _Context:
    image_registry: VScalar | None  # global.imageRegistry, when set
    global_image_registry: VScalar | None  # global.image.registry, when set
    global_chroot: object = None  # global.image.chroot, when there


def _set(node) -> VScalar | None:
    return node if _str(node) is not None else None


def _context(root) -> _Context:
    g = root.get("global") if isinstance(root, VMap) else None
    if not isinstance(g, VMap):
        return _Context(None, None)
    gi = g.get("image")
    if not isinstance(gi, VMap):
        return _Context(_set(g.get("imageRegistry")), None)
    return _Context(_set(g.get("imageRegistry")), _set(gi.get("registry")), gi.get("chroot"))


_FALSE_11 = frozenset(("false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"))


def truthy(node) -> bool:
    """Whether a Go template ``{{ if . }}`` takes ``node`` as true, Helm reading the file (YAML 1.1,
    as sigs.k8s.io/yaml does): null, false, 0 and "" are false; a quoted ``"false"`` is a non-empty
    string, true."""
    if node is None:
        return False
    if not isinstance(node, VScalar):
        return bool(node.pairs if isinstance(node, VMap) else node.items)
    if node.null:
        return False
    value = node.value
    if node.style is not None or node.explicit_tag is not None:  # quoted or tagged: a string
        return value != ""
    tag = resolve_tag(value, 0)
    if tag.endswith(":bool"):
        return value not in _FALSE_11
    if tag.endswith((":int", ":float")):
        number = value.replace("_", "")
        for read in (lambda t: int(t, 0), float):
            try:
                return read(number) != 0
            except ValueError:
                continue
        return True  # 1:20 (sexagesimal), 0b1: not zero
    return value != ""


def _chroot(m: VMap, ctx: _Context) -> bool:
    """ingress-nginx's ``chroot``: the mapping's own, else ``global.image.chroot`` (the chart
    merges ``global.image`` into the image with sprig's ``merge``: a key the image lacks comes
    from there)."""
    own = m.get("chroot")
    return truthy(own) if own is not None or m.key_node("chroot") is not None else truthy(ctx.global_chroot)


def version(tag: str | None, digest: str | None, digest_name: str | None) -> tuple[str | None, str | None]:
    """(tag, digest) an image's fields say: ``tag: 1.2@sha256:…`` (a tag@digest setter) is both
    when no digest field is set; a ``sha`` field holds the hex alone (the chart adds ``sha256:``)."""
    if tag and "@" in tag and digest is None:
        tag, _, digest = tag.partition("@")
    if digest and digest_name == "sha" and not digest.startswith("sha256:"):
        digest = "sha256:" + digest
    return tag, digest


def _shapes(m: VMap, path: tuple, parent_key: VScalar | None, ctx: _Context) -> list[Found]:
    found: list[Found] = []
    index = m.index
    if "<<" in index or "repository" in index or "image" in index or "name" in index:
        repo_node, image_node, name_node = (
            _set(m.get("repository")),
            _set(m.get("image")),
            _set(m.get("name")),
        )
    else:  # the common case: a mapping of settings, no image's fields
        repo_node = image_node = name_node = None
    repo, image, name = (n.value if n is not None else None for n in (repo_node, image_node, name_node))
    registry_node = _set(m.get("registry"))
    merged = "<<" in index  # keys read through m.get may be inherited: m.get, not the index

    def has(key: str) -> bool:
        return key in index if not merged else m.get(key) is not None or m.key_node(key) is not None

    has_registry = has("registry")
    digest_key = "digest" if has("digest") else "sha" if has("sha") else None

    def mapping_image(
        shape: str,
        repository_key: str,
        repository: VScalar,
        reg: VScalar | None,
        digest_key: str | None = digest_key,
        chroot: bool = False,
    ) -> Found:
        tag_slot = _slot(m, "tag", m.key_node(repository_key))
        digest_slot = _slot(m, digest_key, None) if digest_key else None

        def read(key: str | None, slot: Slot | None) -> str | None:
            if merged:  # as Helm reads it: an inherited key too
                return _str(m.get(key)) if key else None
            return _str(slot.value) if slot else None

        tag, digest = version(read("tag", tag_slot), read(digest_key, digest_slot), digest_key)
        repository_name = repository.value + ("-chroot" if chroot else "")
        composed = join_registry(reg.value if reg is not None else None, repository_name)
        sources = (repository,) if reg is None else (reg, repository)
        keys = (repository_key, "registry", "tag", *((digest_key,) if digest_key else ()))
        inherited = ()
        if merged:
            inherited = tuple(k for k in ("tag", digest_key) if k and m.key_node(k) is None and has(k))
        return Found(
            path,
            shape,
            composed,
            tag,
            digest,
            m,
            parent_key,
            tag_slot,
            digest_slot,
            sources=sources,
            keys=(*keys, "chroot") if shape == "image" else keys,
            inherited=inherited,
        )

    if repo and "://" not in repo and "@" not in repo and split_reference(repo)[1] is None:
        reg = (ctx.image_registry or registry_node) if has_registry else None
        chroot = has("digestChroot") and _chroot(m, ctx)  # the chart's digest helper reads digestChroot
        found.append(
            mapping_image(
                "repository", "repository", repo_node, reg, "digestChroot" if chroot else digest_key
            )
        )
    elif image and split_reference(image)[1:] == (None, None) and (has("tag") or digest_key or has_registry):
        # ingress-nginx: with chroot the chart deploys <image>-chroot@<digestChroot>
        chroot = _chroot(m, ctx)
        found.append(
            mapping_image(
                "image",
                "image",
                image_node,
                registry_node or ctx.global_image_registry,
                ("digestChroot" if has("digestChroot") else None) if chroot else digest_key,
                chroot,
            )
        )
    elif name and has("tag") and split_reference(name)[1:] == (None, None):
        reg = (ctx.image_registry or registry_node) if has_registry else None
        found.append(mapping_image("name", "name", name_node, reg))
    for k, v in m.pairs:
        if k.__class__ is not VScalar or v.__class__ is not VScalar:
            continue
        key = k.event.value
        if not (key == "image" or key.endswith(("Image", "_image"))) or not _str(v):
            continue
        repository, tag, digest = split_reference(v.value.strip())
        if (tag is None and digest is None) or not repository or " " in repository:
            continue
        found.append(
            Found(
                path + (k.value,),
                "string",
                repository,
                tag,
                digest,
                m,
                k,
                string_slot=Slot(k, v, None, _owner(m, k.value), k.value),
                sources=(v,),
            )
        )
    return found


def parse_keys_path(path: str) -> list[str | int]:
    """``a.b[0].c`` (or ``a.b.0.c``) → ``["a", "b", 0, "c"]``."""
    parts: list[str | int] = []
    for m in _PATH_RE.finditer(path):
        token = m[0]
        parts.append(int(token[1:-1]) if token.startswith("[") else token)
    if not parts or "".join(str(p) for p in parts).strip() == "":
        raise ValuesError(f"valuesKeys path {path!r} is empty")
    return parts


def _resolve(root, parts: list[str | int]):
    """(parent mapping, key node, value node) at ``parts`` from ``root``, or None."""
    node, parent, key = root, None, None
    for part in parts:
        if isinstance(node, VSeq):
            index = part if isinstance(part, int) else int(part) if str(part).isdigit() else None
            if index is None or index >= len(node.items):
                return None
            parent, key, node = None, None, node.items[index]
        elif isinstance(node, VMap):
            k = node.key_node(str(part))
            if k is None:
                return None
            parent, key, node = node, k, node.get(str(part))
        else:
            return None
    return parent, key, node


def _by_keys(root, doc: int, keys: dict[str, str], source: str, inherited: str | None = None) -> Found | None:
    got = {role: _resolve(root, parse_keys_path(p)) for role, p in keys.items()}
    if "repository" in keys:
        if got.get("repository") is None:
            return None
    elif inherited is None or got.get("tag") is None:
        return None  # keys for a file that overrides only the tag: a document without it has none
    for role, hit in got.items():
        if hit is None and role in ("tag",):
            raise ValuesError(
                f"{source}: valuesKeys.{role} {keys[role]!r} is not in the file (valuesKeys.repository "
                f"{keys['repository']!r} is); fix the rule's valuesKeys"
            )
        if hit is not None and not isinstance(hit[2], VScalar):
            raise ValuesError(f"{source}: valuesKeys.{role} {keys[role]!r} is not a single value")
    if "repository" in keys:
        repo = _str(got["repository"][2]) or ""
        registry = _str(got["registry"][2]) if got.get("registry") else None
        composed = join_registry(registry, repo)
        sources = tuple(got[role][2] for role in ("registry", "repository") if got.get(role))
        anchor = "repository"
    else:  # the repository is what the sources before this file compose (a helmfile release)
        composed, sources, anchor = inherited, (), "tag"
    tag_hit, digest_hit = got.get("tag"), got.get("digest")
    tag_slot = _hit_slot(tag_hit, "tag")
    digest_slot = _hit_slot(digest_hit, "digest")
    mapping = tag_hit[0] if tag_hit else got["repository"][0]
    path = (doc, *parse_keys_path(keys[anchor]))[:-1]
    tag, digest = version(
        _str(tag_slot.value) if tag_slot else None, _str(digest_slot.value) if digest_slot else None, None
    )
    return Found(
        path, "valuesKeys", composed, tag, digest, mapping, None, tag_slot, digest_slot, sources=sources
    )


def _hit_slot(hit, name: str) -> Slot | None:
    if hit is None:
        return None
    parent, key, value = hit
    owner = _owner(parent, key.value) if isinstance(parent, VMap) and key is not None else parent
    return Slot(key, value, None, owner, name)


def find_images(
    roots: list,
    *,
    keys: dict[str, str] | None = None,
    scope: tuple | None = None,
    source: str = "values.yaml",
    inherited: str | None = None,
) -> list[Found]:
    """Every image the file holds (whatever its repository), in file order; ``scope``: only under
    that path (a helmfile release's inline values); ``keys``: only the one ``valuesKeys`` names —
    without a ``repository`` key, the tag (and digest) ``keys`` names of an image whose repository
    ``inherited`` is (a file that overrides only the tag of an image other files name)."""
    starts: list[tuple[object, tuple]] = []
    for i, root in enumerate(roots):
        if root is None:
            continue
        starts.append((root, (i,)))
    if scope is not None:
        node = roots[scope[0]] if scope[0] < len(roots) else None
        hit = _resolve(node, list(scope[1:])) if node is not None else None
        starts = [(hit[2], tuple(scope))] if hit else []
    if keys is not None:
        out = []
        for root, path in starts:
            f = _by_keys(root, path[0], keys, source, inherited)
            if f is not None:
                out.append(f)
        if not out and "repository" not in keys:
            return out
        if not out:
            raise ValuesError(
                f"{source}: valuesKeys.repository {keys.get('repository')!r} is not in the file; fix the "
                "rule's valuesKeys"
            )
        return out
    found: list[Found] = []
    # id(node) → every path it is at, for collections and anchored scalars: only those can be at
    # several (through aliases); any other scalar is only where its mapping or sequence is
    occurrences: dict[int, list[tuple]] = {}
    for root, base in starts:
        ctx = _context(root)
        stack: list[tuple[object, tuple, VScalar | None]] = [(root, base, None)]
        while stack:
            node, path, parent_key = stack.pop()
            paths = occurrences.get(id(node))
            if paths is not None:  # an alias of a collection already walked
                paths.append(path)
                continue
            occurrences[id(node)] = [path]
            if node.__class__ is VMap or node.__class__ is MergedMap:
                found.extend(_shapes(node, path, parent_key, ctx))
                for k, v in reversed(node.pairs):
                    if k.__class__ is not VScalar:
                        continue
                    if k.event.value == "<<":  # a mapping merged here is reused here too
                        for merged in v.items if v.__class__ is VSeq else [v]:
                            if id(merged) in occurrences:
                                occurrences[id(merged)].append(path)
                        continue
                    if v.__class__ is VScalar:  # nothing to walk
                        if v.event.anchor is not None:
                            occurrences.setdefault(id(v), []).append(path + (k.event.value,))
                    else:
                        stack.append((v, path + (k.event.value,), k))
            elif node.__class__ is VSeq:
                items = node.items
                for i in range(len(items) - 1, -1, -1):
                    item = items[i]
                    if item.__class__ is VScalar:
                        if item.event.anchor is not None:
                            occurrences.setdefault(id(item), []).append(path + (i,))
                    else:
                        stack.append((item, path + (i,), None))
    for f in found:
        shared = set()
        own = {f.path}
        for slot in (f.tag_slot, f.digest_slot, f.string_slot):
            if slot is not None and slot.key is not None:
                own.add(f.path + (slot.key.value,) if slot is not f.string_slot else f.path)
        for n in [f.mapping, *f.nodes()] if f.shape != "string" else f.nodes():
            for p in occurrences.get(id(n), []) if n is not None else []:
                if p not in own and not any(p[: len(o)] == o for o in own):
                    shared.add(show_path(p))
        f.shared = sorted(shared)
    return found


def _effective_pairs(m: VMap, emitted: set | None = None):
    """(key, value node, merged) of ``m`` as Helm reads it, in file order: its own keys, and at its
    merge key ``<<`` the keys of the mappings merged there that it does not set itself (the first
    merged mapping that has a key wins, as :meth:`VMap.get` reads). Non-scalar keys are left out."""
    own = {k.event.value for k, _ in m.pairs if k.__class__ is VScalar and k.event.value != "<<"}
    emitted = set() if emitted is None else emitted
    merge = m.index.get("<<")
    for k, v in m.pairs:
        if k.__class__ is not VScalar:
            continue
        key = k.event.value
        if key != "<<":
            yield key, v, False
        elif merge is not None and merge[0] is k:  # the first merge key only, as VMap.get reads
            for merged in v.items if v.__class__ is VSeq else [v]:
                if merged.__class__ is not VMap:
                    continue
                for mk, mv, _ in _effective_pairs(merged):
                    if mk not in own and mk not in emitted:
                        emitted.add(mk)
                        yield mk, mv, True


def effective_values(roots: list) -> dict[tuple, tuple[object, bool]]:
    """Every node of the documents at every path Helm sees it (aliases expanded, merge keys
    resolved: sigs.k8s.io/yaml writes each alias out as an independent value): path → (node,
    through), ``through`` True where the node is reached through an alias or a merge key rather
    than where its text is. Bounded: :func:`~steps.kustomize.values.tree.compose` refuses
    documents whose aliases expand too far."""
    out: dict[tuple, tuple[object, bool]] = {}
    seen: set[int] = set()
    for i, root in enumerate(roots):
        if root is None:
            continue
        stack: list[tuple[object, tuple, bool]] = [(root, (i,), False)]
        while stack:
            node, path, through = stack.pop()
            through = through or id(node) in seen
            seen.add(id(node))
            out[path] = (node, through)
            if node.__class__ is VMap:
                children = [(v, path + (k,), through or m) for k, v, m in _effective_pairs(node)]
            elif node.__class__ is VSeq:
                children = [(v, path + (j,), through) for j, v in enumerate(node.items)]
            else:
                continue
            stack.extend(reversed(children))
    return out


def images_at(roots: list, values: dict[tuple, tuple[object, bool]], path: tuple) -> list[Found]:
    """The images (as :func:`find_images` reads them) the value at ``path`` of
    :func:`effective_values` is a field of: a key of an image's mapping, or a string image."""
    if len(path) < 2:
        return []
    parent = values.get(path[:-1])
    if parent is None or parent[0].__class__ is not VMap:
        return []
    root = roots[path[0]]
    key = path[-1]
    return [
        f
        for f in _shapes(parent[0], path[:-1], None, _context(root))
        if (f.path == path if f.shape == "string" else key in f.keys)
    ]


def matching(found: list[Found], repository: str) -> list[Found]:
    """The images of ``found`` that are the pushed ``repository`` (normalised names equal)."""
    want = normalise(repository)
    return [f for f in found if f.repository and normalise(f.repository) == want]


def block_scalar_mentions(docs: Documents, repository: str) -> VScalar | None:
    """A block scalar (``|``/``>``) whose text names ``repository`` with a tag or digest, if any:
    an image there cannot be edited as YAML (flux2 #5307 skipped it silently; imagebump refuses)."""
    if not docs.blocks:
        return None
    names = spellings(repository)
    pattern = re.compile(r"(?<![\w./-])(?:" + "|".join(re.escape(n) for n in names) + r")(?=[:@])")
    return next((node for node in docs.blocks if pattern.search(node.value)), None)

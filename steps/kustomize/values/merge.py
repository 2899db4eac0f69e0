"""Values sources merged as Helm merges them: the later source wins, mappings merge key by key.

Helm reads each ``--values`` file (helmfile passes a release's ``values:`` entries in order) and
merges it over the ones before (``pkg/cli/values/options.go``, ``MergeMaps``): a key whose value
is a mapping in both merges recursively; any other value (a scalar, a list, null) of the later
source replaces the earlier one whole. Helm 4 (which Argo CD ships) merges the documents of one
multi-document values file the same way, the later document winning.

:func:`merged` builds that merged view without copying anything: a mapping that only one source
sets is that source's node; a mapping several sources set is a :class:`MergedMap` whose values
are the winning nodes (``homes`` says which real mapping holds each key, ``parts`` which mappings
were merged). So the images found in the merged view (:mod:`steps.kustomize.values.find`) point at
the very scalars that decide what is deployed, and only those are ever edited. :func:`winner`
answers the same question for one key path. Pure.
"""

from __future__ import annotations

from steps.kustomize.values.tree import VMap, VScalar, VSeq


class MergedMap(VMap):
    """A mapping several sources set, merged (later wins): ``pairs``/``index`` hold the winning
    key and value nodes; ``homes``: key → the real mapping that holds the winning pair;
    ``parts``: (the key introducing it or None, the real mapping) of each source merged, in order."""

    __slots__ = ("homes", "parts")

    def __init__(self, parts: list[tuple[VScalar | None, VMap]]) -> None:
        last = parts[-1][1]
        super().__init__(last.event, last.offset)
        self.end = last.end
        self.flow = last.flow
        self.parts = parts
        self.homes: dict[str, VMap] = {}


def effective_pairs(m: VMap) -> dict[str, tuple[VScalar, object]]:
    """A mapping's scalar keys → (key node, value node), merge keys (``<<``) followed; file order."""
    out: dict[str, tuple[VScalar, object]] = {}
    for k, v in m.pairs:
        if isinstance(k, VScalar) and k.value != "<<":
            out.setdefault(k.value, (k, v))
    merge = m.index.get("<<")
    if merge is not None:
        v = merge[1]
        for src in v.items if isinstance(v, VSeq) else [v]:
            if isinstance(src, VMap):
                for key, pair in effective_pairs(src).items():
                    out.setdefault(key, pair)
    return out


def _home(m: VMap, key: str) -> VMap:
    """The real mapping that holds ``key`` of ``m`` (``m`` itself, or the one a merge key names)."""
    if isinstance(m, MergedMap):
        return m.homes.get(key, m)
    if key in m.index:
        return m
    merge = m.index.get("<<")
    if merge is not None:
        v = merge[1]
        for src in v.items if isinstance(v, VSeq) else [v]:
            if isinstance(src, VMap) and src.get(key) is not None:
                return _home(src, key)
    return m


def home(m: VMap, key: str) -> VMap:
    """The real mapping that holds ``key`` of ``m`` (a :class:`MergedMap` or a merge key's source)."""
    return _home(m, key)


def merged(nodes: list[tuple[VScalar | None, object]]):
    """The value Helm's merge gives from ``nodes`` (key node or None, value), lowest precedence
    first: a later non-mapping replaces everything before it; a run of mappings merges."""
    run: list[tuple[VScalar | None, VMap]] = []
    for key, node in nodes:
        if isinstance(node, VMap) and run and isinstance(run[-1][1], VMap):
            run.append((key, node))
        else:
            run = [(key, node)]
    if not run:
        return None
    if len(run) == 1:
        return run[0][1]
    out = MergedMap(run)
    keys: dict[str, list[tuple[VScalar, object, VMap]]] = {}
    for _, m in run:
        for name, (k, v) in effective_pairs(m).items():
            keys.setdefault(name, []).append((k, v, _home(m, name)))
    for name, found in keys.items():
        value = merged([(k, v) for k, v, _ in found])
        key = found[-1][0]
        # the key node of the source whose value won (a non-mapping value: the last one)
        for k, v, h in reversed(found):
            if v is value or isinstance(value, MergedMap) and any(p is v for _, p in value.parts):
                key, out.homes[name] = k, h
                break
        out.pairs.append((key, value))
        out.index[name] = (key, value)
    return out


def merged_roots(roots: list) -> list:
    """A file's documents for finding images, as Helm 4 reads them: the mapping documents merged
    (later wins) into the place of the first; other documents (a top-level list) as they are."""
    maps = [i for i, r in enumerate(roots) if isinstance(r, VMap)]
    if len(maps) < 2:
        return list(roots)
    out = [None if i in maps[1:] else r for i, r in enumerate(roots)]
    out[maps[0]] = merged([(None, roots[i]) for i in maps])
    return out


def _child(node, part):
    if isinstance(node, VMap) and isinstance(part, str):
        return node.get(part)
    if isinstance(node, VSeq) and isinstance(part, int):
        return node.items[part] if 0 <= part < len(node.items) else None
    return None


def winner(roots: list, path: tuple):
    """(index into ``roots``, node) of the value at ``path`` once ``roots`` (lowest precedence
    first, each a source's mapping) are merged as Helm merges them; None when the merge has none."""
    cands = [(i, r) for i, r in reversed(list(enumerate(roots))) if isinstance(r, VMap)]
    for part in path:
        nxt: list = []
        for i, n in cands:
            child = _child(n, part)
            if child is None:
                continue
            if isinstance(child, VMap) and (not nxt or isinstance(nxt[0][1], VMap)):
                nxt.append((i, child))
                continue
            if not nxt:
                nxt = [(i, child)]
            break  # a non-mapping below the winners is replaced by them, and replaces all below it
        cands = nxt
        if not cands:
            return None
        if not isinstance(cands[0][1], VMap):
            cands = cands[:1]
    return cands[0] if cands else None

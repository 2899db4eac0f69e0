"""A helmfile release's values in an environment: which file (or inline map) decides its image.

helmfile renders ``helmfile.yaml`` (or ``helmfile.yaml.gotmpl``) as a Go template before reading
it; imagebump does not run templates. It reads the file as YAML with the lines that are only
template actions (``{{- if … }}``) set aside (:func:`~steps.kustomize.values.tree.neutralise`) and
decides those actions itself where it can do so exactly (:func:`_guards`): an entry inside
``{{ if eq .Environment.Name "x" }}`` (``ne``, ``not``, ``and``, ``or``, ``isFile``, ``printf`` with
``%s``) is used when the condition holds in the rule's environment; an entry inside a block it
cannot decide (``{{ if .Values.x }}``, ``range``, ``with``) is refused, never guessed.

Only the release's ``values:`` then ``secrets:`` entries become ``helm --values`` (helmfile
``pkg/state/state.go``): ``environments.<env>.values`` only feed the helmfile's own templates and
are no chart values. Helm merges the ``--values`` files in order, the later winning key by key,
and the documents of one file the same way (:mod:`~steps.kustomize.values.merge`); a release's
``set:`` / ``setString:`` come after every file. So :func:`locate_image` decides on the merged view:
the pushed image is what the merge composes; the file to edit is the one whose scalars win; a
``set`` naming a key of the image, a release with ``installed: false``, an image whose winning
fields are in two files are refused. Paths are relative to the helmfile's directory, with
``{{ .Environment.Name }}`` replaced by the rule's environment. Parse only what is needed. Pure
but for ``read`` (:func:`locate_image`).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass

from steps.domain.errors import ImageNotFoundError, UndecidableCondition
from steps.kustomize.values.find import Found, find_images, matching
from steps.kustomize.values.merge import merged, merged_roots
from steps.kustomize.values.refs import normalise
from steps.kustomize.values.tree import ValuesError, VMap, VScalar, VSeq, compose, template_lines

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


@dataclass(frozen=True)
class Release:
    """What a helmfile release gives Helm in an environment: its ``--values`` sources, lowest
    precedence first; its ``set``/``setString`` names (field, name); whether it is installed."""

    name: str
    sources: list[ValuesSource]
    sets: list[tuple[str, str]]
    installed: bool = True


@dataclass(frozen=True)
class Located:
    """The file (or inline values) to edit for a release's image, and how to find it there:
    ``keys`` and ``repository`` when the file overrides only the tag (and digest) of an image
    an earlier file names (:class:`~steps.domain.models.ValuesRef`)."""

    file: str
    text: str
    scope: tuple | None = None
    keys: dict[str, str] | None = None
    repository: str | None = None


# --- template conditions ----------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|(`[^`]*`)|(\()|(\))|([^\s()"`]+))')


def _parse(expr: str) -> list:
    """A template pipeline's tokens, parenthesised groups nested: ``('s', text)`` for a string."""
    stack: list[list] = [[]]
    at = 0
    expr = expr.strip()
    while at < len(expr):
        m = _TOKEN.match(expr, at)
        if m is None or m.end() == at:
            raise UndecidableCondition(expr)
        at = m.end()
        quoted, raw, open_, close, word = m.groups()
        if quoted is not None:
            stack[-1].append(("s", json.loads(quoted)))
        elif raw is not None:
            stack[-1].append(("s", raw[1:-1]))
        elif open_:
            stack.append([])
        elif close:
            if len(stack) < 2:
                raise UndecidableCondition(expr)
            group = stack.pop()
            stack[-1].append(group)
        elif word:
            stack[-1].append(word)
    if len(stack) != 1 or not stack[0]:
        raise UndecidableCondition(expr)
    return stack[0]


def _truthy(value) -> bool:
    return bool(value)


def _printf(fmt: str, args: list) -> str:
    out, parts = [], iter(args)
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        verb = fmt[i + 1 : i + 2]
        if verb == "%":
            out.append("%")
        elif verb in ("s", "v"):
            try:
                out.append(str(next(parts)))
            except StopIteration:
                raise UndecidableCondition(fmt) from None
        else:
            raise UndecidableCondition(fmt)
        i += 2
    return "".join(out)


class _Evaluator:
    """Evaluates the few template conditions whose value the rule's environment decides."""

    def __init__(self, environment: str, base: str, exists: Callable[[str], bool] | None) -> None:
        self.environment, self.base, self.exists = environment, base, exists

    def condition(self, expr: str) -> bool:
        return _truthy(self._command(_parse(expr)))

    def _term(self, term):
        if isinstance(term, list):
            return self._command(term)
        if isinstance(term, tuple):
            return term[1]
        if term == ".Environment.Name":
            return self.environment
        if term in ("true", "false"):
            return term == "true"
        raise UndecidableCondition(term)

    def _command(self, terms: list):
        if len(terms) == 1:
            return self._term(terms[0])
        head, args = terms[0], terms[1:]
        if not isinstance(head, str) or "|" in terms:
            raise UndecidableCondition(str(head))
        if head in ("and", "or"):
            for arg in args:  # Go's and/or stop at the first value that decides them
                value = self._term(arg)
                if _truthy(value) != (head == "and"):
                    return value
            return value
        values = [self._term(a) for a in args]
        if head == "eq" and len(values) >= 2:
            return any(values[0] == v for v in values[1:])
        if head == "ne" and len(values) == 2:
            return values[0] != values[1]
        if head == "not" and len(values) == 1:
            return not _truthy(values[0])
        if head == "printf" and values and isinstance(values[0], str):
            return _printf(values[0], values[1:])
        if head == "isFile" and len(values) == 1 and isinstance(values[0], str) and self.exists is not None:
            path = values[0]
            if path.startswith("/") or "://" in path:
                raise UndecidableCondition(path)
            joined = posixpath.normpath(posixpath.join(self.base, path))
            if joined == ".." or joined.startswith("../"):
                raise UndecidableCondition(path)
            return self.exists(joined)
        raise UndecidableCondition(head)


@dataclass(frozen=True)
class _Guard:
    """One enclosing template block: ``if`` (this branch holds when every earlier condition of its
    chain is false and ``cond`` is true; ``cond`` None: a plain ``else``), or a block imagebump
    never decides (``range``, ``with``, ``define``, ``block``)."""

    kind: str
    line: int
    priors: tuple[str, ...] = ()
    cond: str | None = None

    def describe(self) -> str:
        if self.kind != "if":
            return f"a {{{{ {self.kind} }}}} block (line {self.line + 1})"
        what = f"{{{{ if {self.cond} }}}}" if self.cond is not None else "an {{ else }}"
        return f"{what} (line {self.line + 1})"


def _guards(text: str) -> list[tuple[_Guard, ...]]:
    """The template blocks around each line of ``text`` (outermost first), indexed by line number."""
    lines = template_lines(text)
    count = text.count("\n") + text.count("\r") + 2
    out: list[tuple[_Guard, ...]] = []
    stack: list[_Guard] = []
    current: tuple[_Guard, ...] = ()
    at = 0
    for number, actions in lines:
        out.extend([current] * (number - at))
        at = number
        for action in actions:
            word, _, rest = action.partition(" ")
            rest = rest.strip()
            if word == "if":
                stack.append(_Guard("if", number, (), rest))
            elif word in ("range", "with", "define", "block"):
                stack.append(_Guard(word, number))
            elif word == "else" and stack:
                top = stack.pop()
                if top.kind != "if" or rest.startswith("with"):
                    stack.append(_Guard(top.kind if top.kind != "if" else "with", number))
                    continue
                priors = (*top.priors, top.cond) if top.cond is not None else top.priors
                cond = rest[3:].strip() if rest.startswith("if ") else None
                stack.append(_Guard("if", number, priors, cond))
            elif word == "end" and stack:
                stack.pop()
        current = tuple(stack)
    out.extend([current] * (count - at))
    return out


def _active(guards: tuple[_Guard, ...], evaluate: _Evaluator) -> bool | _Guard:
    """Whether the lines ``guards`` enclose are rendered: True/False, or the first guard that
    cannot be decided."""
    for guard in guards:
        if guard.kind != "if":
            return guard
        try:
            holds = not any(evaluate.condition(p) for p in guard.priors) and (
                guard.cond is None or evaluate.condition(guard.cond)
            )
        except UndecidableCondition:
            return guard
        if not holds:
            return False
    return True


# --- the release ------------------------------------------------------------------------------------


def read_release(
    text: str,
    helmfile: str,
    release: str,
    environment: str,
    exists: Callable[[str], bool] | None = None,
) -> Release:
    """Release ``release`` of the helmfile at repository path ``helmfile`` in ``environment``
    (``""``: helmfile's ``default``): its ``values`` then ``secrets`` sources (what Helm gets as
    ``--values``, lowest precedence first), its ``set``/``setString`` names, ``installed``.
    ``exists`` says whether a repository file exists (``{{ if isFile … }}``; None: undecidable).

    Raises:
        ValuesError: the helmfile cannot be read, has no (or several) such release, an entry is
            inside a template block imagebump cannot decide, or a values path needs more than
            ``{{ .Environment.Name }}`` to resolve.
    """
    environment = environment or "default"  # helmfile's own default without --environment
    roots = compose(text, helmfile)
    base = posixpath.dirname(helmfile)
    guards = _guards(text)
    evaluate = _Evaluator(environment, base, exists)
    releases: list[tuple[int, int, VMap]] = []
    undecided: list[tuple[int, VMap, _Guard]] = []
    names: list[str] = []
    for d, root in enumerate(roots):
        if not isinstance(root, VMap):
            continue
        seq = root.get("releases")
        if not isinstance(seq, VSeq):
            continue
        for i, item in enumerate(seq.items):
            if not isinstance(item, VMap):
                continue
            name = item.get("name")
            if not isinstance(name, VScalar):
                continue
            names.append(name.value)
            if name.value != release:
                continue
            active = _active(guards[item.line], evaluate)
            if active is True:
                releases.append((d, i, item))
            elif active is not False:
                undecided.append((i, item, active))
    if undecided:
        _, item, guard = undecided[0]
        raise ValuesError(
            f"{helmfile}: release {release!r} (line {item.line + 1}) is inside {guard.describe()}, which "
            "imagebump cannot evaluate without running helmfile; it decides only conditions on "
            ".Environment.Name (eq/ne/not/and/or) and isFile: write the condition that way, or name the "
            "values file with a valuesFile rule",
            reason="template",
        )
    if not releases:
        listed = ", ".join(dict.fromkeys(names)) if names else "none"
        if release in names:
            raise ImageNotFoundError(
                f"{helmfile}: release {release!r} is not rendered in environment {environment!r} (its "
                "template condition is false there); nothing to edit",
                found=[],
            )
        raise ValuesError(
            f"{helmfile}: no release named {release!r} (releases: {listed}); fix the rule's helmfile.release"
        )
    if len(releases) > 1:
        raise ValuesError(
            f"{helmfile}: {len(releases)} releases are named {release!r}; imagebump cannot tell which one the rule means"
        )
    d, i, item = releases[0]
    found: list[ValuesSource] = []
    for field in ("values", "secrets"):
        found += _entries(
            item.get(field), (d, "releases", i, field), base, helmfile, environment, release, guards, evaluate
        )
    sets: list[tuple[str, str]] = []
    for field in ("set", "setString"):
        value = item.get(field)
        if not isinstance(value, VSeq):
            continue
        for entry in value.items:
            name = entry.get("name") if isinstance(entry, VMap) else None
            if (
                isinstance(name, VScalar)
                and not name.null
                and _active(guards[entry.line], evaluate) is not False
            ):
                sets.append((field, name.value))
    installed = item.get("installed")
    off = isinstance(installed, VScalar) and installed.value.strip() in ("false", "False", "FALSE")
    return Release(release, found, sets, installed=not off)


def release_sources(
    text: str, helmfile: str, release: str, environment: str, exists: Callable[[str], bool] | None = None
) -> list[ValuesSource]:
    """Where release ``release`` takes its chart values in ``environment``, lowest precedence
    first (:func:`read_release`)."""
    return read_release(text, helmfile, release, environment, exists).sources


def _entries(
    values, path: tuple, base: str, helmfile: str, environment: str, release: str, guards, evaluate
) -> list[ValuesSource]:
    if values is None or (isinstance(values, VScalar) and values.null):
        return []
    if not isinstance(values, VSeq):
        raise ValuesError(f"{helmfile}: {'.'.join(str(p) for p in path[1:])} is not a list")
    out = []
    for j, entry in enumerate(values.items):
        if isinstance(entry, VScalar) and entry.null:
            continue
        active = _active(guards[entry.line], evaluate)
        if active is False:
            continue
        shown = entry.value if isinstance(entry, VScalar) else f"the inline values at line {entry.line + 1}"
        if active is not True:
            raise ValuesError(
                f"{helmfile}: release {release!r}: the {path[-1]} entry {shown!r} (line {entry.line + 1}) is "
                f"inside {active.describe()}, which imagebump cannot evaluate without running helmfile, so it "
                "cannot know whether Helm gets that file; it decides only conditions on .Environment.Name "
                "(eq/ne/not/and/or) and isFile. Put {{ .Environment.Name }} in the path instead "
                "(values/{{ .Environment.Name }}.yaml), or name the values file with a valuesFile rule",
                reason="template",
            )
        if isinstance(entry, VMap):
            out.append(ValuesSource(helmfile, (*path, j)))
        elif isinstance(entry, VScalar):
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


# --- the decision on the merged values ------------------------------------------------------------


@dataclass(frozen=True)
class Layer:
    """One ``--values`` source as Helm merges it: a document of a file, or a helmfile's inline
    mapping. ``root`` is the mapping; ``at`` how the source's file reaches it (document index, or
    the inline scope)."""

    source: ValuesSource
    root: object


def _set_path(name: str) -> tuple:
    """A ``--set`` name as Helm's strvals reads it: ``a.b[0].c`` (``\\.`` a literal dot)."""
    parts: list = []
    for piece in re.split(r"(?<!\\)\.", name):
        m = re.fullmatch(r"(.*?)((?:\[\d+\])*)", piece.replace("\\.", "."))
        parts.append(m[1])
        parts += [int(i) for i in re.findall(r"\[(\d+)\]", m[2])]
    return tuple(parts)


def _fields(f: Found) -> list[tuple]:
    """The key paths (from the values' root) that make up image ``f`` in the merged view."""
    rel = tuple(f.path[1:])
    if f.shape == "string":
        return [rel]
    names = ("registry", "repository", "image", "name", "tag", "digest", "sha")
    out = [rel + (n,) for n in names]
    for slot in (f.tag_slot, f.digest_slot):
        if slot is not None and slot.key is not None:
            out.append(rel + (slot.key.value,))
    return out + [("global", "imageRegistry"), ("global", "image", "registry")]


def _overlaps(a: tuple, b: tuple) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _keys_path(parts: tuple) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif "." in part or "[" in part or not part:
            raise ValuesError(f"the key {part!r} cannot be named as a path (it holds '.' or '[')")
        else:
            text += ("." if text else "") + part
    return text


def _owners(layers: list[Layer]) -> dict[int, int]:
    """id(node) → index of the layer that holds it (every key and value node)."""
    owner: dict[int, int] = {}
    for i, layer in enumerate(layers):
        stack = [layer.root]
        while stack:
            node = stack.pop()
            if id(node) in owner:
                continue
            owner[id(node)] = i
            if isinstance(node, VMap):
                for k, v in node.pairs:
                    owner.setdefault(id(k), i)
                    stack.append(v)
            elif isinstance(node, VSeq):
                stack.extend(node.items)
    return owner


def _written(f: Found) -> list:
    """The nodes an edit of image ``f`` writes (or, for a tag key to add, the key it follows)."""
    out = []
    ts, ds = f.tag_slot, f.digest_slot
    if f.string_slot is not None:
        out.append(f.string_slot.value)
    if ts is not None:
        out.append(ts.value if ts.key is not None and ts.value is not None else ts.key or ts.after)
    if ds is not None and ds.key is not None:
        out.append(ds.value if ds.value is not None else ds.key)
    return [n for n in out if n is not None]


def decide(
    layers: list[Layer], release: Release, repository: str, keys: dict[str, str] | None, helmfile: str
) -> tuple[ValuesSource, dict[str, str] | None, str | None]:
    """The source to edit for ``repository`` in ``release``'s merged values (``layers``, lowest
    precedence first), and — when that source overrides only the tag (and digest) of an image an
    earlier one names — the ``keys`` naming the tag there and the repository the merge composes.

    Raises:
        ImageNotFoundError: the merged values hold no such image (a later source overriding its
            repository says so).
        ValuesError: a ``set`` names a key of the image, the image's winning fields are in two
            sources, or the fields cannot be named.
    """
    where = f"release {release.name!r} of {helmfile}"
    view = merged([(None, layer.root) for layer in layers if isinstance(layer.root, VMap)])
    found = find_images([view], keys=keys, source=where) if view is not None else []
    matches = found if keys is not None else matching(found, repository)
    if not matches:
        want = normalise(repository)
        held = [
            f"{layer.source} ({f.where})"
            for layer in layers
            for f in find_images([layer.root], source=str(layer.source))
            if f.repository and normalise(f.repository) == want
        ]
        if held:
            names = sorted({f.repository for f in found})
            raise ImageNotFoundError(
                f"{where}: {', '.join(held)} names {repository}, but a later values source overrides it "
                f"(Helm merges --values files in order, the later winning; the release deploys "
                f"{', '.join(names) or 'another image'}): the release does not run this image, nothing to edit",
                found=names,
            )
        raise ImageNotFoundError(
            f"image {repository!r} is in none of the values of {where}: searched "
            f"{', '.join(str(source) for source in release.sources) or 'nothing'}",
            found=sorted({f.repository for f in found}),
        )
    for field, name in release.sets:
        path = _set_path(name)
        for f in matches:
            if any(_overlaps(path, p) for p in _fields(f)):
                raise ValuesError(
                    f"{where}: its {field} entry {name!r} sets a key of the image at {f.where}; helmfile passes "
                    "it as --set, which overrides every values file, so an edit there would change nothing "
                    f"deployed: remove {name!r} from {field} (keep the image in a values file) or edit it by hand",
                    reason="set-override",
                )
    owner = _owners(layers)
    sources = {}
    for f in matches:
        for node in _written(f):
            layer = layers[owner[id(node)]]
            sources.setdefault(layer.source, []).append(f"{f.where} ({layer.source})")
    if len(sources) != 1:
        listed = "; ".join(", ".join(v) for v in sources.values())
        raise ValuesError(
            f"{where}: the fields that decide {repository} are in {len(sources)} values sources ({listed}); "
            "imagebump edits one file per update: keep the image's tag and digest in one values file",
            reason="split-override",
        )
    (source,) = sources
    inherited = any(layers[owner[id(n)]].source != source for f in matches for n in f.sources)
    if not inherited:
        _same_edit(layers, source, matches, repository, keys, None, where)
        return source, keys, None
    if len(matches) != 1 or matches[0].tag_slot is None or matches[0].tag_slot.key is None:
        raise ValuesError(
            f"{where}: {source} overrides only part of {repository} (its repository comes from an earlier "
            "values file) in a way imagebump cannot edit alone: keep the image's fields in one values file",
            reason="split-override",
        )
    f = matches[0]
    rel = tuple(f.path[1:]) if f.shape != "valuesKeys" else None
    tag_path = keys["tag"] if keys is not None else _keys_path((*rel, f.tag_slot.key.value))
    out = {"tag": tag_path}
    if f.digest_slot is not None and f.digest_slot.key is not None:
        out["digest"] = keys["digest"] if keys is not None else _keys_path((*rel, f.digest_slot.key.value))
    _same_edit(layers, source, matches, repository, out, f.repository, where)
    return source, out, f.repository


def _same_edit(
    layers: list[Layer],
    source: ValuesSource,
    matches: list[Found],
    repository: str,
    keys: dict[str, str] | None,
    inherited: str | None,
    where: str,
) -> None:
    """Refuse unless the file's own reading (what the edit step finds in ``source`` alone, as
    :func:`~steps.kustomize.values.find_pushed` does) writes exactly the nodes that win the merge:
    never a scalar a later source overrides."""
    own = [layer.root for layer in layers if layer.source == source]
    roots = own if source.scope is not None else merged_roots(own)
    local = find_images(roots, keys=keys, source=str(source), inherited=inherited)
    if keys is None:
        local = matching(local, repository)
    want = {id(n) for f in matches for n in _written(f)}
    extra = [f for f in local if any(id(n) not in want for n in _written(f))]
    if extra or {id(n) for f in local for n in _written(f)} != want:
        shown = ", ".join(f.where for f in extra) or "its fields"
        raise ValuesError(
            f"{where}: {source} also holds {repository} at {shown}, which a later values source overrides "
            "(Helm merges --values files in order, the later winning): an edit of that file would change "
            "what the later source decides; keep the image in one place per release",
            reason="split-override",
        )


def locate_image(
    read: Callable[[str], str | None],
    helmfile: str,
    release: str,
    environment: str,
    repository: str,
    keys: dict[str, str] | None = None,
) -> Located:
    """The file (or inline values) to edit for ``repository`` in the release: its sources
    (:func:`read_release`) read with ``read`` (a repository file's text, None: absent — skipped, as
    helmfile's ``isFile`` guards do) and decided on as Helm merges them (:func:`decide`).

    Raises:
        ImageNotFoundError: the release's merged values hold no such image, or it is not installed.
        ValuesError: the helmfile cannot be read or resolved, or the edit would not be what
            Helm deploys (see :func:`decide`).
    """
    text = read(helmfile)
    if text is None:
        raise ValuesError(f"helmfile {helmfile} is not in the repository; fix helmfile.file in the rule")
    cache: dict[str, str | None] = {helmfile: text}

    def body(path: str) -> str | None:
        if path not in cache:
            cache[path] = read(path)
        return cache[path]

    info = read_release(text, helmfile, release, environment, lambda path: body(path) is not None)
    if not info.installed:
        raise ImageNotFoundError(
            f"release {release!r} of {helmfile} has installed: false (helmfile uninstalls it): nothing to edit; "
            "remove the rule, or set installed: true",
            found=[],
        )
    layers: list[Layer] = []
    for source in info.sources:
        content = body(source.file)
        if content is None:
            continue
        roots = compose(content, source.file)
        if source.scope is not None:
            node = roots[source.scope[0]]
            for part in source.scope[1:]:
                node = node.get(part) if isinstance(node, VMap) else node.items[part]
            layers.append(Layer(source, node))
        else:
            layers += [Layer(source, root) for root in roots if root is not None]
    chosen, found_keys, inherited = decide(layers, info, repository, keys, helmfile)
    return Located(chosen.file, body(chosen.file), chosen.scope, found_keys, inherited)

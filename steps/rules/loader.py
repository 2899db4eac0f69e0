"""Loading: a rules file's YAML, read safely, compiled whole into a :class:`~steps.rules.matcher.RuleSet`.

PyYAML's safe loader composes the document first; before anything is constructed, aliases that
would expand the file beyond :data:`MAX_ALIAS_EXPANSION` extra nodes (a "billion laughs" file) or
refer to themselves are refused, and so is a key written twice in one mapping (``<<`` merge keys
stay the standard override). Each rule then goes through the schema and compiles
(:func:`~steps.rules.rule.compile_rule`); a bad file is rejected whole with
``SOURCE: rule N: FIELD: problem``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from steps.domain.errors import RuleFieldError, RulesError
from steps.rules.matcher import RuleSet
from steps.rules.rule import compile_rule
from steps.rules.show import excerpt as _excerpt
from steps.rules.show import kind as _kind

#: How many nodes YAML aliases may add to a rules file once expanded, beyond the nodes written
#: (or as many as are written, for a very large file). A 'billion laughs' file adds 10⁹.
MAX_ALIAS_EXPANSION = 100_000


def _yaml_error(exc: Exception) -> str:
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def _loader() -> type:
    """PyYAML's safe loader (the C one when built: ~10x faster on 10,000 rules)."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return node.value
    return []


def _check_duplicate_keys(root: Any, loader: Any) -> None:
    """Refuse a mapping that repeats a key, among the keys written in it (merged keys may be overridden).

    Runs on the composed nodes, before ``<<`` merge keys are applied, so ``- <<: *base`` followed by
    one key of ``base`` is the standard override it is, while ``env: a`` twice is refused.
    """
    import yaml

    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        stack.extend(_children(node))
        if not isinstance(node, yaml.MappingNode):
            continue
        keys: set[Any] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            key = loader.construct_object(key_node)
            try:
                duplicate = key in keys
                keys.add(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "found an unhashable key", key_node.start_mark
                ) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"found duplicate key {_excerpt(key)}", key_node.start_mark
                )


def _expanded_sizes(root: Any, source: str) -> dict[int, int]:
    """Each node's size with every alias written out, by node identity — without expanding anything.

    One pass over the composed nodes (aliases share nodes; sizes are memoised), so a 'billion
    laughs' file costs a few hundred steps. A node that contains an alias to itself is refused.
    """
    cap = 1 << 62
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            sizes[key] = min(cap, 1 + sum(sizes[id(child)] for child in _children(node)))
            continue
        if key in sizes:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                mark = child.start_mark
                raise RulesError(
                    f"{source}: the YAML node at line {mark.line + 1} column {mark.column + 1} contains an "
                    "alias to itself (a recursive document); write the values out",
                    reason="recursive-alias",
                )
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes


def _check_aliases(root: Any, source: str, rules_node: Any) -> None:
    """Refuse aliases that add more than MAX_ALIAS_EXPANSION nodes (or the written count, if larger).

    The message names the rule and the field that hold the largest expansion, and never the value.
    """
    import yaml

    sizes = _expanded_sizes(root, source)
    written = len(sizes)
    added = sizes[id(root)] - written
    limit = max(MAX_ALIAS_EXPANSION, written)
    if added <= limit:
        return
    total = sizes[id(root)]
    where, index, name = "", None, ""
    if isinstance(rules_node, yaml.SequenceNode) and rules_node.value:
        index, item = max(enumerate(rules_node.value), key=lambda p: sizes[id(p[1])])
        where = f"rule {index}: "
        if isinstance(item, yaml.MappingNode) and item.value:
            key_node, _ = max(item.value, key=lambda pair: sizes[id(pair[1])])
            name = key_node.value if isinstance(key_node, yaml.ScalarNode) else "(key)"
            name = name if len(name) <= 60 else _excerpt(name)
            where += f"{name}: "
    raise RulesError(
        f"{source}: {where}YAML aliases expand this file to "
        f"{total if total < (1 << 62) else 'astronomically many'} nodes from {written} written (more than "
        f"{limit} added: a 'billion laughs' file); write the values out without anchors and aliases",
        reason="alias-bomb",
        rule=index,
        field=name,
    )


def _top_level(root: Any, source: str) -> Any:
    """The node holding the list of rules (the root, or the value of ``rules:``); shape errors raised."""
    import yaml

    if isinstance(root, yaml.MappingNode):
        keys = [k.value if isinstance(k, yaml.ScalarNode) else _excerpt(k.tag) for k, _ in root.value]
        extra = sorted(_excerpt(k) if len(k) > 60 else k for k in keys if k != "rules")
        if extra or "rules" not in keys:
            raise RulesError(
                f"{source}: a mapping at the top must hold only 'rules:' (a list of rules); "
                f"found {', '.join(extra) or 'no rules key'}",
                reason="top-level-keys",
            )
        return next(v for k, v in root.value if isinstance(k, yaml.ScalarNode) and k.value == "rules")
    return root


def _load_yaml(text: str, source: str) -> Any:
    """Compose ``text``, check duplicate keys (before merges) and alias expansion, then construct."""

    loader = _loader()(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        rules_node = _top_level(root, source)
        _check_aliases(root, source, rules_node)
        _check_duplicate_keys(root, loader)
        return loader.construct_document(root)
    finally:
        loader.dispose()


def load_rules(text: str, source: str = "rules.yaml") -> RuleSet:
    """Parse and compile a whole rules file. A bad file is rejected whole.

    YAML merge keys (``- <<: *base``) are standard and work; a key written twice in one mapping is
    refused. Aliases may not expand the file beyond :data:`MAX_ALIAS_EXPANSION` extra nodes.

    Raises:
        RulesError: ``SOURCE: rule N: FIELD: problem`` (or ``SOURCE: problem`` for the file).
    """
    import yaml

    try:
        data = _load_yaml(text, source)
    except yaml.YAMLError as exc:
        raise RulesError(f"{source}: not valid YAML: {_yaml_error(exc)}", reason="invalid-yaml") from None
    except RecursionError:
        raise RulesError(
            f"{source}: the YAML is nested too deeply to read; a rules file is a few levels deep",
            reason="too-deep",
        ) from None
    if isinstance(data, dict):
        data = data["rules"]  # _top_level checked it holds only that
    if data is None:
        raise RulesError(
            f"{source}: no rules: expected a list of rules (or 'rules:' holding one)", reason="no-rules"
        )
    if not isinstance(data, list):
        raise RulesError(
            f"{source}: expected a list of rules (or 'rules:' holding one), got {_kind(data)}",
            reason="not-a-list",
        )
    cache: dict[tuple[str, bool], Any] = {}
    rules = []
    for index, raw in enumerate(data):
        try:
            rules.append(compile_rule(index, raw, cache))
        except RuleFieldError as problem:
            raise RulesError(
                f"{source}: rule {index}: {problem.field}: {problem.message}", rule=index, field=problem.field
            ) from None
    _check_promote_after(rules, source)
    return RuleSet(rules, source)


def _check_promote_after(rules: list[Any], source: str) -> None:
    """Every ``promoteAfter.env`` names the ``env`` of some rule of the file (issue 35)."""
    envs = sorted({r.env for r in rules if r.env})
    for rule in rules:
        after = rule.settings.promote_after
        if after is not None and after.env not in envs:
            raise RulesError(
                f"{source}: rule {rule.index}: promoteAfter.env: unknown env {_excerpt(after.env)}; "
                f"the rules name: {', '.join(envs) or 'no env (give the rules before it an env)'}",
                rule=rule.index,
                field="promoteAfter.env",
            )


def load_rules_file(path: str | Path) -> RuleSet:
    """Read and compile the rules file at ``path`` (see :func:`load_rules`).

    Raises:
        RulesError: the file cannot be read, or is invalid.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise RulesError(
            f"rules file {str(p)!r} does not exist: mount it there or set IMAGEBUMP_RULES_FILE",
            reason="no-file",
            field="IMAGEBUMP_RULES_FILE",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RulesError(f"rules file {str(p)!r} cannot be read: {exc}", reason="unreadable") from None
    return load_rules(text, source=str(p))

"""Which namespaces Argo CD manages Applications and ApplicationSets in — its own rule, pure.

``argocd-cmd-params-cm`` names them in ``application.namespaces`` and
``applicationsetcontroller.namespaces``: comma-separated plain names, globs, or ``/regex/``.
:func:`namespace_enabled` is Argo CD's matching (util/security/application_namespaces.go), with a
regular expression given a time limit and a glob matched by RE2 (linear in the name), so a pattern
cannot hang a step; a glob over :data:`MAX_GLOB_LENGTH` characters or nested deeper than
:data:`MAX_GLOB_DEPTH` is refused (:class:`~steps.domain.errors.ConfigError` naming the setting). Used by
:mod:`steps.argocd_backup.live_objects` (what a backup lists) and :mod:`steps.argocd_backup.restore`. Imports :mod:`steps.domain.errors` only.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

import re2
import regex

from steps.domain.errors import ConfigError

log = logging.getLogger(__name__)

CMD_PARAMS_CONFIG_MAP = "argocd-cmd-params-cm"
#: Keys of argocd-cmd-params-cm naming the other namespaces (comma-separated globs or /regex/)
#: whose Applications / ApplicationSets Argo CD manages (admin.go getAdditionalNamespaces).
APPLICATION_NAMESPACES_KEY = "application.namespaces"
APPLICATIONSET_NAMESPACES_KEY = "applicationsetcontroller.namespaces"
_NAMESPACE_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
#: A /regex/ namespace pattern gets this long to decide on one namespace name (≤ 63 characters);
#: longer means catastrophic backtracking, refused rather than left to hang the step.
_REGEX_TIMEOUT = 1.0
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.never_capture = True


def namespace_patterns(cmd_params: dict[str, Any] | None, setting: str) -> list[str]:
    """The comma-separated patterns of ``setting`` in argocd-cmd-params-cm (blanks dropped)."""
    data = (cmd_params or {}).get("data") or {}
    return [p.strip() for p in str(data.get(setting) or "").split(",") if p.strip()]


def is_literal(pattern: str) -> bool:
    """A plain namespace name (no glob syntax, not a /regex/): RBAC can grant exactly it."""
    return bool(_NAMESPACE_RE.fullmatch(pattern))


def namespace_enabled(
    namespace: str, argocd_namespace: str, patterns: list[str], *, setting: str = ""
) -> bool:
    """Argo CD's rule (util/security/application_namespaces.go IsNamespaceEnabled).

    Argo CD's own namespace always; else a pattern matches: ``/RE/`` is a regular expression
    searched anywhere in the name (util/glob/list.go MatchStringInList, util/regex: regexp2's
    MatchString), anything else a glob over the whole name (gobwas/glob, no separators). A pattern
    that does not compile matches nothing, as upstream (which logs and returns false).
    """
    if namespace == argocd_namespace:
        return True
    for pattern in patterns:
        if len(pattern) > 1 and pattern.startswith("/") and pattern.endswith("/"):
            if _regex_search(pattern, namespace, setting):
                return True
            continue
        compiled = _glob(pattern, setting)
        if compiled is not None and compiled.fullmatch(namespace):
            return True
    return False


def _regex_search(pattern: str, namespace: str, setting: str) -> bool:
    try:
        compiled = regex.compile(pattern[1:-1])
    except (regex.error, ValueError, OverflowError):
        log.warning("%s pattern %s is not a valid regular expression; it matches nothing", setting, pattern)
        return False
    try:
        return compiled.search(namespace, timeout=_REGEX_TIMEOUT) is not None
    except TimeoutError:
        raise ConfigError(
            f"{setting or 'namespace'} pattern {pattern} in {CMD_PARAMS_CONFIG_MAP} takes over "
            f"{_REGEX_TIMEOUT:g} s on namespace {namespace!r} (catastrophic backtracking); simplify it"
        ) from None


#: The longest glob pattern read, in characters, and the deepest ``{...}`` nesting: a namespace name
#: has at most 63 characters, so a longer pattern is a mistake (or an attack), refused by name.
MAX_GLOB_LENGTH = 1000
MAX_GLOB_DEPTH = 32


def _literal(c: str) -> str:
    """One character as RE2 reads it literally (inside a class too)."""
    return c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}"


def _glob(pattern: str, setting: str = "") -> Any:
    """gobwas/glob syntax without separators: ``*``, ``?``, ``[abc]``, ``[!a-z]``, ``{a,b}``, ``\\x``.

    Translated to RE2 (google-re2, as the rules' patterns), whose matching time is linear in the
    name by construction: ``*a*a*a*a*b`` costs what ``*`` costs. None when the pattern is malformed
    (upstream matches nothing then); a pattern longer than :data:`MAX_GLOB_LENGTH` or with ``{``
    nested deeper than :data:`MAX_GLOB_DEPTH` raises :class:`ConfigError` naming the setting.
    """
    where = f"{setting or 'namespace'} pattern in {CMD_PARAMS_CONFIG_MAP}"
    if len(pattern) > MAX_GLOB_LENGTH:
        raise ConfigError(
            f"{where} is {len(pattern)} characters long ({pattern[:40]!r}…), over the {MAX_GLOB_LENGTH} "
            "a glob may have (a namespace name has at most 63); shorten it"
        )
    return _compiled_glob(pattern, where)


@functools.lru_cache(maxsize=256)
def _compiled_glob(pattern: str, where: str) -> Any:
    out: list[str] = []
    depth = 0
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                return None
            out.append(_literal(pattern[i + 1]))
            i += 2
            continue
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1 or end == i + 1:
                return None
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            if not body:
                return None
            parts = []
            j = 0
            while j < len(body):
                if j + 2 < len(body) and body[j + 1] == "-":
                    if body[j] > body[j + 2]:
                        return None
                    parts.append(f"{_literal(body[j])}-{_literal(body[j + 2])}")
                    j += 3
                else:
                    parts.append(_literal(body[j]))
                    j += 1
            out.append(f"[{'^' if negate else ''}{''.join(parts)}]")
            i = end + 1
            continue
        elif c == "{":
            depth += 1
            if depth > MAX_GLOB_DEPTH:
                raise ConfigError(
                    f"{where} {pattern[:40]!r}… nests '{{' more than {MAX_GLOB_DEPTH} deep; "
                    "write the alternatives out flat ({a,b,c})"
                )
            out.append("(?:")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(_literal(c))
        i += 1
    if depth:
        return None
    try:
        return re2.compile("(?s)" + "".join(out), _RE2_OPTIONS)
    except re2.error:
        return None

"""Issue 31 item 6: ``application.namespaces`` globs are matched in linear time (RE2), bounded.

Argo CD's globs (gobwas/glob, util/glob/list.go) were translated to Python's backtracking ``re``:
``*a*a*a*a*a*a*a*a*b`` took about a minute per Application and a deeply nested ``{`` raised
RecursionError. Now RE2 matches them, and a pattern too long or nested too deep is refused by name.
"""

from __future__ import annotations

import re
import secrets

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steps.domain.errors import ConfigError
from steps.kube import argocd_namespaces as ns

SETTING = ns.APPLICATION_NAMESPACES_KEY


def test_a_backtracking_glob_is_matched_by_re2_never_by_a_backtracking_engine(monkeypatch) -> None:
    """``*a*a*a*a*a*a*a*a*b`` on 63 ``a``: every split is tried by a backtracking matcher (Python's
    ``re`` took over a minute per Application). The glob is compiled by RE2, whose matching is
    linear in the name by construction; neither backtracking engine ever sees it. Nothing is timed
    (the engine is what is proven, as for the rules: tests/steps/rules/test_rules.py)."""
    import re2
    import regex

    compiled: list[str] = []
    real = re2.compile

    def spy(pattern, *args, **kwargs):
        compiled.append(pattern)
        return real(pattern, *args, **kwargs)

    def backtracking(*_args, **_kwargs):
        raise AssertionError("a glob reached a backtracking regular expression engine")

    monkeypatch.setattr(re2, "compile", spy)
    for module, name in (
        (re, "compile"),
        (re, "fullmatch"),
        (re, "match"),
        (re, "search"),
        (regex, "compile"),
    ):
        monkeypatch.setattr(module, name, backtracking)
    glob = f"*a*a*a*a*a*a*a*a*b{secrets.token_hex(4)}"  # its own: never an earlier test's cached glob
    name = "a" * 63  # the longest namespace name, no b
    for _ in range(20):  # as it runs per Application
        assert ns.namespace_enabled(name, "argocd", [glob], setting=SETTING) is False
    monkeypatch.undo()
    assert len(compiled) == 1  # compiled once, by RE2


@pytest.mark.parametrize(
    "pattern",
    [
        pytest.param("{" * 5000 + "a" + "}" * 5000, id="recursion-deep"),
        pytest.param("{" * 40 + "a" + "}" * 40, id="deeper-than-the-bound"),
        pytest.param("team-" + "x" * 2000, id="too-long"),
    ],
)
def test_a_glob_nested_too_deep_or_too_long_is_a_clear_error(pattern: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ns.namespace_enabled("team-a", "argocd", [pattern], setting=SETTING)
    assert SETTING in str(caught.value) and len(str(caught.value)) < 400


def test_nesting_within_the_bound_still_matches() -> None:
    pattern = "{" * ns.MAX_GLOB_DEPTH + "team-a" + "}" * ns.MAX_GLOB_DEPTH
    assert ns.namespace_enabled("team-a", "argocd", [pattern]) is True


def _reference(glob: str) -> re.Pattern[str] | None:
    """gobwas/glob over a name without separators, for the small alphabet drawn below (no classes)."""
    out, depth = [], 0
    for c in glob:
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
    return None if depth else re.compile("".join(out), re.DOTALL)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab-*?{},", max_size=10), st.text(alphabet="ab-", min_size=1, max_size=8))
def test_re2_matches_what_the_glob_means(glob: str, name: str) -> None:
    reference = _reference(glob)
    expected = bool(reference and reference.fullmatch(name))
    assert ns.namespace_enabled(name, "argocd", [glob]) is expected

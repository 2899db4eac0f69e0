"""Issue 31 item 7: what others wrote reaches a terminal escaped and bounded.

A git author name, a marker reason, a running image or a server's message can carry terminal
escapes (ESC, the C1 CSI), bidi overrides or a megabyte of text. Every printer shows them through
:func:`steps.domain.terminal.for_terminal`; JSON output is left to JSON's own escaping.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imagebump.cli import main
from imagebump.local.outcome import printable
from steps.domain.terminal import MAX_SHOWN, for_terminal
from steps.live_states.decide import LiveState
from steps.live_states.step import render_live_table
from steps.reconcile.step import TargetState, render_table

HOSTILE = "Ann\x1b]0;owned\x07\x1b[2J\x9b31m\u202eevil\u2066\r\n\x00\x7f\u2028"
_UNSAFE = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]} | set("\u202e\u2066\u2028\u200f\ufeff")


def _clean(text: str, *, newlines: bool = False) -> bool:
    allowed = {"\n"} if newlines else set()
    return not any(c in _UNSAFE and c not in allowed for c in text)


def test_for_terminal_escapes_controls_and_says_what_it_cut() -> None:
    shown = for_terminal(HOSTILE)
    assert _clean(shown)
    assert shown.startswith("Ann\\e]0;owned\\x07\\e[2J\\x9b31m\\u202eevil\\u2066\\r\\n\\x00\\x7f\\u2028")
    long = for_terminal("x" * (1 << 20))
    assert len(long) < MAX_SHOWN + 50 and long.endswith(f"[{(1 << 20) - MAX_SHOWN} more characters]")
    assert for_terminal("line one\nline\x1b two", newlines=True) == "line one\nline\\e two"
    assert (
        for_terminal("team/api:1.4.1 → 1.5.0 — ok") == "team/api:1.4.1 → 1.5.0 — ok"
    )  # printable text stays
    assert for_terminal("lone \ud800 surrogate") == "lone \ufffd surrogate"  # any UTF-8 stream takes it


@given(st.text(max_size=200))
def test_nothing_unsafe_ever_gets_through(text: str) -> None:
    assert _clean(for_terminal(text))
    assert _clean(for_terminal(text, newlines=True), newlines=True)
    assert _clean(printable(text))


def test_the_reconcile_table_escapes_every_cell() -> None:
    row = TargetState(
        repo_url="https://github.com/org/gitops",
        path="apps/\x1b[31mapi",
        env="prod\u202e",
        current="1.4.1",
        newest="1.5.0",
        state="held",
        reason=f"rollback abc1234 by {HOSTILE} " + "x" * (1 << 20),
    )
    table = render_table([row])
    assert _clean(table, newlines=True)
    assert len(table) < 2 * MAX_SHOWN + 500
    live = render_live_table(
        [
            LiveState(
                repo_url="https://github.com/org/gitops", path="p", state="mismatch", reason=f"runs {HOSTILE}"
            )
        ]
    )
    assert _clean(live, newlines=True)


def test_set_image_escapes_and_cuts_a_marker_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    # YAML refuses C0/C1 controls even in comments; a bidi override it takes
    reason = "\u202eevil\u2066" + "y" * 1_000_000  # a 1 MB reason (the file stays under 1 MiB)
    (overlay / "kustomization.yaml").write_text(
        f"images:\n- name: api\n  newTag: 1.4.1  # imagebump:hold {reason}\n"
    )
    assert main(["set-image", str(overlay), "api:1.5.0"]) == 0
    out = capsys.readouterr().out
    assert "is held by" in out and _clean(out, newlines=True)
    assert len(out) < 5000  # the megabyte reason is cut, visibly
    assert "more characters]" in out


def test_an_error_naming_others_text_is_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["set-image", str(tmp_path / "no\x1b[2Jsuch"), "api:1.5.0"]) == 2
    err = capsys.readouterr().err
    assert "no\\e[2Jsuch" in err and _clean(err, newlines=True)


def test_the_progress_line_is_escaped() -> None:
    line = printable(f"event 13cde686 team/api:1.4.2 → 1 target: prod edit-kustomize failed: {HOSTILE}")
    assert _clean(line) and line.startswith("event 13cde686 team/api:1.4.2 → 1 target")


def test_a_control_character_in_the_yaml_is_named_not_taken_for_a_tab(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "kustomization.yaml").write_text("images:\n- name: api  # \x1b[2J\n")
    assert main(["set-image", str(tmp_path), "api:1.5.0"]) == 2
    err = capsys.readouterr().err
    assert "control character" in err and "tabs" not in err and _clean(err, newlines=True)


def test_text_log_lines_are_escaped_json_lines_are_left_to_json() -> None:
    import json
    import logging

    from steps.runtime.harness import JsonLineFormatter, TextLineFormatter

    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "author %s", (HOSTILE,), None)
    assert _clean(TextLineFormatter("imagebump reconcile").format(record))
    line = JsonLineFormatter("cli", {"command": "reconcile"}).format(record)
    assert HOSTILE in json.loads(line)["message"]  # the JSON logs stay as they are

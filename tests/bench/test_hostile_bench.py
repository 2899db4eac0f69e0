"""Smoke test of ``python -m bench.hostile``: it runs at small sizes and prints what it measures.

Shapes only, never times (the numbers are the benchmark's output, not assertions).
"""

from __future__ import annotations

import json
from pathlib import Path

from bench import hostile


def test_patterns_are_all_re2_and_each_matches_its_matching_tag() -> None:
    rows = hostile.run_patterns(reps=1)
    assert len(rows) == len(hostile.PATTERN_CASES) >= 10
    for row in rows:
        assert row["engines"] == ["re2"], row
        assert row["re2_instructions"] > 0 and row["worst_match_ms"] >= row["first_match_ms"] >= 0


def test_kustomization_sizes_and_main_prints_and_writes_json(tmp_path: Path, capsys) -> None:
    (row,) = hostile.run_kustomizations((30,), reps=1)
    assert row["entries"] == 30 and {"bytes", "read_s", "edit_s", "add_s", "ruamel_one_parse_s"} <= set(row)
    assert len(hostile.kustomization(27_000).encode()) <= 1 << 20  # the size, under the 1 MiB limit
    out = tmp_path / "hostile.json"
    assert hostile.main(["--quick", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "worst of all:" in printed and "2700 entries" in printed
    assert set(json.loads(out.read_text())) == {"patterns", "kustomizations"}

"""docs/benchmarks.md is half hand-written: a benchmark run rewrites only its generated part."""

from __future__ import annotations

from pathlib import Path

from bench import report


def test_a_run_keeps_the_hand_written_part_and_replaces_the_generated_one(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text(
        "# Benchmarks\n\n## How fast\n\nwritten by hand\n\n"
        f"{report.GENERATED_BEGIN}\nold numbers\n{report.GENERATED_END}\n\nafter, by hand\n"
    )
    page.write_text(report.splice(page.read_text(), "## The last run\n\nnew numbers\n"))
    text = page.read_text()
    assert "written by hand" in text and "after, by hand" in text
    assert "new numbers" in text and "old numbers" not in text
    # a second run replaces its own output again, nothing accumulates
    again = report.splice(text, "## The last run\n\nnewer numbers\n")
    assert again.count(report.GENERATED_BEGIN) == 1 and "new numbers" not in again


def test_a_page_without_a_generated_part_gets_one_appended(tmp_path: Path) -> None:
    assert report.splice("", "## The last run\n").startswith("# Benchmarks\n")
    kept = report.splice("# Benchmarks\n\nprose\n", "## The last run\n")
    assert kept.startswith("# Benchmarks\n\nprose\n") and kept.rstrip().endswith(report.GENERATED_END)


def test_the_checked_in_page_has_both_parts() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
    text = page.read_text()
    assert report.GENERATED_BEGIN in text and report.GENERATED_END in text
    assert text.index("## How fast") < text.index(report.GENERATED_BEGIN)

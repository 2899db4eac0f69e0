"""``imagebump render --output DIR``: a directory it cannot write is bad input (exit 2), not a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagebump.cli import main


def _under_a_file(tmp: Path) -> Path:
    (tmp / "file").write_text("")
    return tmp / "file" / "sub"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        pytest.param(lambda tmp: Path("/proc/nonexist/x"), "No such file or directory", id="cannot-create"),
        pytest.param(_under_a_file, "Not a directory", id="under-a-file"),
    ],
)
def test_an_output_directory_that_cannot_be_written_exits_2_naming_it(
    tmp_path: Path, capsys, make, reason
) -> None:
    """Before: ``internal error: FileNotFoundError`` and exit 3."""
    output = make(tmp_path)
    assert main(["render", "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert f"--output {output}: cannot write there ({reason})" in err
    assert "internal error" not in err and "Traceback" not in err

"""Golden tests: each file in invalid/ states the error it must produce on its first line.

``# CHECK: LINE:COL: KIND: MESSAGE`` -- the first line printed on stderr must be the
file name followed by this text (MESSAGE may be a prefix of the full message).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dtg.codegen.driver import main

INVALID = sorted((Path(__file__).parent / "invalid").glob("*.lair"))


def expected_error(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# CHECK: "), f"{path} lacks its CHECK line"
    return f"{path}:{first.removeprefix('# CHECK: ')}"


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_program_reports_position_and_message(path: Path, cli) -> None:
    result = cli(main, path, "--emit=isl")
    assert result.status == 1
    assert result.out == ""
    assert "Traceback" not in result.err
    assert result.err.splitlines()[0].startswith(expected_error(path))


def test_every_error_class_of_the_issue_has_a_golden_file() -> None:
    names = {p.stem for p in INVALID}
    required = {
        "syntax_missing_paren", "unknown_tensor", "unknown_iterator", "unknown_type",
        "duplicate_iterator", "rank_mismatch", "nonaffine_product", "nonaffine_division",
        "nonaffine_modulo", "out_of_bounds", "defined_twice", "two_index_expressions",
        "reduction_target_read", "unspecialized",
    }
    assert required <= names

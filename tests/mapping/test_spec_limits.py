"""Mappings beyond the budget, files that are not mappings, and unbounded sets.

The golden files ``invalid/rectangle_*``, ``placement_*``, ``stream_*`` and ``isl_*``
cover the messages; these tests cover files that are not mappings at all (whose content
must not be echoed), and the guards of the polyhedral primitives.
"""

from __future__ import annotations

from pathlib import Path

import islpy as isl
import pytest
from conftest import EXAMPLES

from dtg.codegen.driver import main
from dtg.errors import LimitError, SourceLoc
from dtg.mapping import poly
from dtg.mapping.spec import parse_mapping

GEMV = EXAMPLES / "gemv" / "gemv.lair"
SECRET = "hunter2secret"


def not_mappings(tmp: Path) -> list[Path]:
    binary = tmp / "binary.map"
    binary.write_bytes(bytes(range(256)) * 4)
    program = tmp / "program.map"
    program.write_text(f"# {SECRET}\nlet {SECRET} = 3\n" + GEMV.read_text())
    module = tmp / "module.map"
    module.write_text(f"module {SECRET} mesh PE[4, 4]\n")
    word = tmp / "word.map"
    word.write_text(SECRET * 1000 + "\n")
    return [binary, program, module, word, GEMV,
            EXAMPLES / "handwritten" / "gemv_checkerboard" / "gemv_checkerboard.pe"]


def test_files_that_are_not_mappings_are_refused_without_their_content(
        cli, tmp_path: Path) -> None:
    for path in not_mappings(tmp_path):
        result = cli(main, GEMV, "-m", path)
        assert result.status == 1, path
        assert result.err.startswith(f"{path}:"), result.err
        assert len(result.err.splitlines()) == 1
        assert SECRET not in result.err
        assert "lair gemv" not in result.err and "let M" not in result.err
        assert "Traceback" not in result.err and "internal error" not in result.err


def test_a_lair_program_given_as_mapping_is_named_as_such(cli) -> None:
    result = cli(main, GEMV, "-m", GEMV)
    assert result.err == (
        f"{GEMV}:4:1: error: this is a LAIR program, not a mapping spec; give it as the "
        "program and its mapping with -m FILE.map\n")


def test_long_tokens_are_abbreviated_in_syntax_errors(cli, tmp_path: Path) -> None:
    path = tmp_path / "long.map"
    path.write_text("rectangle { PE[4, 4] }\n" + "y" * 100_000 + "\n")
    result = cli(main, GEMV, "-m", path)
    assert result.status == 1
    assert "yyyy... (100000 characters)" in result.err
    assert len(result.err) < 400


@pytest.mark.parametrize("text", [
    "{ [i] : i >= 0 }",
    "[n] -> { [i, j] : 0 <= i <= n and j >= i }",
    "{ PE[x, y] : 0 <= x <= 3 }",
])
def test_primitives_refuse_unbounded_sets_with_a_user_error(text: str) -> None:
    s = isl.Set(text)
    with pytest.raises(poly.UnboundedSetError, match="needs a bounded set"):
        poly.rectangularity(s)
    if s.dim(isl.dim_type.param) == 0:
        with pytest.raises(poly.UnboundedSetError, match="needs a bounded set"):
            poly.points(s)


def test_primitives_still_take_parametric_bounded_sets() -> None:
    rect = poly.rectangularity(isl.Set("[n] -> { [i] : 0 <= i <= n }"), index=())
    assert rect.dense
    assert poly.points(isl.Set("{ [i] : 0 <= i <= 2 }")) == [(0,), (1,), (2,)]


def test_a_huge_literal_inside_multiline_isl_text_is_located_at_the_literal() -> None:
    text = ("rectangle { PE[4, 4] }\nplacement {\n  gemv[i, j] -> PE[j//4, i//8] :\n"
            "    i < 1" + "0" * 30 + " }\n")
    with pytest.raises(LimitError) as err:
        parse_mapping(text, "m.map")
    assert err.value.loc == SourceLoc("m.map", 4, 9)
    assert "integer literal 100000... (a number of 31 digits) is larger" in err.value.message

"""Parametric mappings: the program's sizes and the mapping's own parameters in a .map."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES

from dtg.codegen.driver import compile_file, main
from dtg.errors import SourceLoc, SpecializationError
from dtg.lair.parser import parse_file
from dtg.mapping.binding import bound_mapping
from dtg.mapping.spec import IslText, MapParam, _substitute, parse_mapping, parse_mapping_file

GEMV = EXAMPLES / "gemv" / "gemv.lair"
TILED = EXAMPLES / "gemv" / "gemv.tiled.map"


def _same_mapping(a: Path, b: Path, params: dict[str, int | str]) -> None:
    """``a`` with ``params`` validates to the same mapping as ``b``."""
    ca = compile_file(GEMV, a, dict(params), stop="mapping")
    cb = compile_file(GEMV, b, stop="mapping")
    ma, mb = ca.mapping, cb.mapping
    assert (ma.width, ma.height) == (mb.width, mb.height)
    for (sa, pa), (sb, pb) in zip(ma.placement, mb.placement, strict=True):
        assert sa == sb and pa.is_equal(pb)
    for sa, sb in zip(ma.streams, mb.streams, strict=True):
        assert (sa.tensor, sa.kind) == (sb.tensor, sb.kind)
        assert sa.relation.is_equal(sb.relation)


def test_defaults_give_the_hand_written_mapping() -> None:
    _same_mapping(TILED, EXAMPLES / "gemv" / "gemv.map", {})


def test_parameters_bound_on_the_command_line(tmp_path: Path) -> None:
    written = tmp_path / "gemv16x8.map"
    written.write_text(
        "rectangle { PE[2, 2] }\n"
        "placement { gemv[i, j] -> PE[j//8, i//16] }\n"
        "input  x dense { x[j = 0:15] -> [PE[j//8, -1] -> index[j mod 8]] }\n"
        "input  W resident\n"
        "output y dense { y[i = 0:31] -> [PE[2, i//16] -> index[i mod 16]] }\n")
    _same_mapping(TILED, written, {"TI": 16, "TJ": 8})


def test_program_sizes_reach_the_mapping() -> None:
    c = compile_file(GEMV, TILED, {"M": 64, "TI": 16}, stop="mapping")
    assert (c.mapping.width, c.mapping.height) == (4, 4)
    assert c.program.graph.tensor("y").shape == (64,)


def test_emit_mapping_shows_the_values(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli(main, GEMV, "-m", TILED, "--param", "TJ=8", "--emit=mapping")
    assert result.status == 0, result.err
    assert result.out.startswith("rectangle 2 x 4 (columns x rows)")


def test_unknown_parameter_names_both_lists(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli(main, GEMV, "-m", TILED, "--param", "TK=2")
    assert result.status == 1
    assert ("unknown parameter 'TK' (given by --param or params=): neither the program nor "
            "the mapping declares it (program: M, N, T; mapping: TI, TJ)") in result.err


def test_type_for_a_mapping_parameter_is_an_error() -> None:
    with pytest.raises(SpecializationError) as info:
        compile_file(GEMV, TILED, {"TI": "float16"})
    assert info.value.message == ("parameter 'TI' (given by --param or params=) is float16, "
                                  "but the mapping's parameter 'TI' takes an integer")


def test_mapping_parameter_may_not_shadow_the_programs() -> None:
    spec = parse_mapping("let M = 3\nrectangle { PE[1, 1] }\n"
                         "placement { gemv[i, j] -> PE[0, 0] }\n")
    with pytest.raises(SpecializationError, match="'M', which is also a parameter of the program"):
        bound_mapping(parse_file(GEMV), spec, {})


def test_duplicate_parameter_is_located() -> None:
    with pytest.raises(Exception, match=r"parameter 'TI' is declared twice \(first at <m>:1:5\)"):
        parse_mapping("let TI = 8, TI = 4\n", "<m>")


def test_tuple_names_and_longer_names_are_left_alone() -> None:
    text = IslText("{ N[i] -> PE[i//N, NN + N] : 0 <= i < N }")
    got = _substitute(text, {"N": 4})
    assert got.text == "{ N[i] -> PE[i//4, NN + 4] : 0 <= i < 4 }"


def test_short_values_keep_columns_and_negative_values_are_parenthesized() -> None:
    assert _substitute(IslText("{ [TILE + i] }"), {"TILE": 8}).text == "{ [8    + i] }"
    assert _substitute(IslText("{ [i - T] }"), {"T": -2}).text == "{ [i - (-2)] }"


def test_the_parameters_print_and_parse_again() -> None:
    spec = parse_mapping_file(TILED)
    assert spec.params == (MapParam("TI", 8), MapParam("TJ", 4))
    from dtg.mapping.spec import format_spec

    assert parse_mapping(format_spec(spec)) == spec


@pytest.mark.parametrize(("text", "column"), [
    ("{ ff[TI, j] -> PE[j//8, 0] }", 6),         # a tuple element declares a variable
    ("{ x[TI = 0:3] -> [PE[0, -1] -> index[TI]] }", 5),  # the left of a range
    ("{ [i] : exists (TI : i = 2TI) }", 17),     # an exists list
    ("{ [PE[0, TI] -> index[i]] -> x[i] }", 10),  # in a nested domain
])
def test_a_parameter_where_isl_declares_a_variable_is_an_error(text: str, column: int) -> None:
    with pytest.raises(Exception, match="'TI' is a parameter, but isl would read it here as a "
                                        "variable") as err:
        _substitute(IslText(text, SourceLoc("m.map", 3, 1)), {"TI": 8})
    assert str(err.value).startswith(f"m.map:3:{column}:")


def test_a_lone_name_outside_a_domain_is_its_value() -> None:
    assert _substitute(IslText("{ ff[i, j] -> PE[j, TI] }"), {"TI": 8}).text == \
        "{ ff[i, j] -> PE[j, 8 ] }"
    assert _substitute(IslText("{ PE[N, K] }"), {"N": 4, "K": 2}).text == "{ PE[4, 2] }"


def test_products_are_written_out_and_words_left_alone() -> None:
    values = {"TI": 8, "N": 16}
    assert _substitute(IslText("{ [i] -> [2TI + 2 TI + TI i] }"), values).text == \
        "{ [i] -> [2*8 + 2 *8 + 8* i] }"
    assert _substitute(IslText("{ [i] -> [(TI)] : i mod TI < N and N > 0 }"), values).text == \
        "{ [i] -> [(8 )] : i mod 8  < 16 and 16 > 0 }"


def test_a_divisor_must_be_positive() -> None:
    with pytest.raises(Exception, match="'TJ' = 0 divides here; a divisor must be positive"):
        _substitute(IslText("{ [i] -> [i//TJ] }"), {"TJ": 0})


def test_isl_words_are_not_parameter_names() -> None:
    with pytest.raises(Exception, match="'mod' is a word of isl's syntax"):
        parse_mapping("let mod = 4\n")


def test_the_clash_is_located_at_the_clashing_name() -> None:
    spec = parse_mapping("let TI = 8, TJ = 4, N = 16\nrectangle { PE[1, 1] }\n"
                         "placement { gemv[i, j] -> PE[0, 0] }\n", "c.map")
    with pytest.raises(SpecializationError) as err:
        bound_mapping(parse_file(GEMV), spec, {})
    assert str(err.value).startswith("c.map:1:21: error: the mapping declares 'N'")

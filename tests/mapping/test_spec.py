"""The mapping spec: parsing, printing, validation (golden error files) and its isl view."""

from __future__ import annotations

from pathlib import Path

import islpy as isl
import pytest
from conftest import EXAMPLE_PROGRAMS, EXAMPLES, ROOT

from dtg.codegen.driver import default_mapping_path, main
from dtg.lair.frontend import load_program
from dtg.lair.parser import parse_file
from dtg.mapping.binding import bound_mapping
from dtg.mapping.spec import format_spec, parse_mapping, parse_mapping_file
from dtg.mapping.validate import validate_mapping

INVALID = sorted((Path(__file__).parent / "invalid").glob("*.map"))


def _header(path: Path, key: str) -> str:
    for line in path.read_text().splitlines():
        if line.startswith(f"# {key}: "):
            return line.removeprefix(f"# {key}: ")
    raise AssertionError(f"{path} has no {key} line")


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_mapping_reports_position_and_message(path: Path, cli) -> None:
    program = ROOT / _header(path, "PROGRAM")
    result = cli(main, program, "-m", path)
    assert result.status == 1
    assert "Traceback" not in result.err
    assert result.err.splitlines()[0].startswith(f"{path}:{_header(path, 'CHECK')}")


@pytest.mark.parametrize("program", EXAMPLE_PROGRAMS, ids=lambda p: p.stem)
def test_example_mappings_validate_and_round_trip(program: Path) -> None:
    path = default_mapping_path(program)
    spec = parse_mapping_file(path)
    printed = format_spec(spec)
    assert parse_mapping(printed) == spec
    assert format_spec(parse_mapping(printed)) == printed
    # (a parametric mapping with its defaults, as dtg-codegen binds it)
    validate_mapping(bound_mapping(parse_file(program), spec, {}), load_program(program).model)


def test_ff_mapping_isl_view() -> None:
    program = load_program(EXAMPLES / "fc" / "ff.lair")
    mapping = validate_mapping(parse_mapping_file(EXAMPLES / "fc" / "ff.map"), program.model)
    assert (mapping.width, mapping.height) == (4, 5)
    assert mapping.rectangle().is_equal(isl.Set("{ PE[0:3, 0:4] }"))
    assert mapping.placement_of("ff").is_equal(
        isl.Map("{ ff[i = 0:31, j = 0:15] -> PE[j//4, 1 + i//8] }"))
    x = mapping.stream("x")
    assert x is not None and x.kind == "sparse" and x.index_dims == 1
    assert x.order.is_equal(isl.Map("{ x[i = 0:15] -> index[i] }"))
    assert x.external_pes.range().is_equal(isl.Set("{ PE[0, -1] }"))
    y = mapping.stream("y")
    assert y is not None and y.kind == "dense" and y.direction == "output"
    assert y.order.is_equal(isl.Map("{ y[i = 0:31] -> index[i mod 8] }"))
    assert mapping.is_resident("W")


def test_degenerate_convolution_order_is_paper_31() -> None:
    program = load_program(EXAMPLES / "conv2d_degenerate" / "conv2d_degenerate.lair")
    spec = parse_mapping_file(EXAMPLES / "conv2d_degenerate" / "conv2d_degenerate.map")
    x = validate_mapping(spec, program.model).stream("x")
    assert x is not None and x.index_dims == 3
    assert x.order.is_equal(isl.Map(
        "{ x[h = 0:7, w = 0:7, c = 0:3] -> index[h mod 4, w, c mod 2] }"))


def test_every_validation_rule_of_the_issue_has_a_golden_file() -> None:
    names = {p.stem for p in INVALID}
    assert {"not_everywhere", "not_function", "outside", "source_inside", "source_far",
            "not_injective", "uncovered", "missing_spec"} <= names

"""Placement by direction only (paper §4.1.2): dtg chooses tiles and offsets."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES

import dtg
from dtg.codegen.driver import compile_file, main
from dtg.lair.diagnostics import DtgError
from dtg.lair.frontend import load_program
from dtg.lair.parser import parse_file
from dtg.mapping.binding import bound_mapping
from dtg.mapping.direction import Tiling, _tiles, candidates
from dtg.mapping.spec import parse_mapping, parse_mapping_file

TRAIN = EXAMPLES / "fc" / "train.lair"
DIRECTION = EXAMPLES / "fc" / "train.direction.map"


def test_listing_2_by_direction_compiles_verifies_and_matches_the_paper() -> None:
    chosen = dtg.compile(TRAIN, DIRECTION)
    written = dtg.compile(TRAIN, EXAMPLES / "fc" / "train.map")
    for (name, a), (_, b) in zip(chosen.mapping.placement, written.mapping.placement,
                                 strict=True):
        assert a.is_equal(b), name  # the paper's 4 x 8 tiles under a free top row
    r = dtg.simulate(chosen)
    assert r.verified and r.exact
    assert r.cycles == dtg.simulate(written).cycles


def test_candidates_put_even_tiles_first_then_the_bound() -> None:
    program = load_program(TRAIN)
    spec = bound_mapping(parse_file(TRAIN), parse_mapping_file(DIRECTION), {})
    found = candidates(spec, program.model, lambda m: len(m.placement))  # (one bound for all)
    assert found[0].even and not found[-1].even
    assert {c.tiling for c in found} >= {Tiling(4, 8, 0, 1), Tiling(4, 8, 0, 0),
                                          Tiling(4, 7, 0, 0)}
    ranks = [c.rank for c in found]
    assert ranks == sorted(ranks)


@pytest.mark.parametrize(("extent", "lines", "tiles"), [
    (16, 4, [4, 8]), (32, 5, [7, 8]), (32, 4, [8, 16]), (12, 8, [2, 3]), (10, 1, [10]),
    (5, 0, [])])
def test_tile_sizes(extent: int, lines: int, tiles: list[int]) -> None:
    assert _tiles(extent, lines) == tiles


def test_emit_mapping_shows_the_chosen_placement(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli(main, TRAIN, "-m", DIRECTION, "--emit=mapping")
    assert result.status == 0, result.err
    assert "placement ff: { ff[i, j] -> PE[o0, o1]" in result.out


@pytest.mark.parametrize(("text", "message"), [
    ("placement direction { nope[i, j] -> [j, i] }", "names unknown statement 'nope'"),
    ("placement direction { ff[i, j] -> [j] }", "must be a pair [x, y]"),
    ("placement direction { ff[i, j] -> [j, i] }\nlet TX = 4", "'TX' names the tiling"),
    ("placement direction { ff[i] -> [i, 0] }", "gives 'ff' 1 dimension"),
    ("placement direction { ff[i, j] -> [k, i] }", "direction of 'ff' is unbounded"),
])
def test_bad_directions_are_located(tmp_path: Path, text: str, message: str) -> None:
    ff = EXAMPLES / "fc" / "ff.lair"
    path = tmp_path / "ff.map"
    path.write_text("rectangle { PE[4, 5] }\n" + text + "\ninput x sparse { x[i = 0:15] -> "
                    "[PE[0, -1] -> index[i]] }\ninput W resident\noutput y resident\n")
    with pytest.raises(DtgError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
        compile_file(ff, path)
    assert str(err.value).startswith(f"{path}:")


def test_no_tiling_fits() -> None:
    spec = parse_mapping("rectangle { PE[4, 5] }\nplacement direction { ff[i, j] -> [j, i] }\n"
                         "input x sparse { x[i = 0:15] -> [PE[9, 9] -> index[i]] }\n"
                         "input W resident\noutput y resident\n", "m.map")
    program = load_program(EXAMPLES / "fc" / "ff.lair")
    with pytest.raises(DtgError, match="no tiling of the placement direction fits"):
        candidates(spec, program.model, lambda m: 1)


def test_dtg_codegen_says_what_it_chose(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli(main, TRAIN, "-m", DIRECTION)
    assert result.status == 0, result.err
    notes = [line for line in result.err.splitlines() if line.startswith("note: placement")]
    assert len(notes) == 4 and "note: placement direction: ff placed as { ff[i, j] -> PE[" \
        in notes[0]

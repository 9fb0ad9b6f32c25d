"""Placement by direction only (paper §4.1.2): dtg chooses tiles and offsets."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES

import dtg
from dtg.codegen.driver import compile_file, main
from dtg.errors import DtgError
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


GEMV = EXAMPLES / "gemv" / "gemv.lair"


def test_the_tiling_does_not_grow_with_the_coefficients(tmp_path: Path) -> None:
    assert _tiles(31 * 10**10 + 1, 4) == [775 * 10**8 + 1]  # (no loop up to the extent)
    path = tmp_path / "gemv.map"
    path.write_text("rectangle { PE[4, 4] }\n"
                    "placement direction { gemv[i, j] -> [10000000000 i, j] }\n"
                    "input  x dense { x[j = 0:15] -> [PE[j//4, -1] -> index[j mod 4]] }\n"
                    "input  W resident\noutput y resident\n")
    assert dtg.simulate(dtg.compile(GEMV, path)).verified


def test_ties_too_large_to_simulate_are_located_and_say_what_works(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a machine whose memory (here: 1 GiB) holds no simulation of a million PEs."""
    monkeypatch.setenv("DTG_MEMORY_LIMIT", str(1 << 30))
    path = tmp_path / "gemv.map"
    path.write_text("rectangle { PE[1000, 1000] }\nplacement direction { gemv[i, j] -> [i, j] }"
                    "\ninput x resident\ninput W resident\noutput y resident\n")
    with pytest.raises(DtgError) as err:
        compile_file(GEMV, path)
    text = str(err.value)
    assert text.startswith(f"{path}:2:") and "tie on the bound" in text
    assert "memory" in text and "note: write the placement with its tiles instead, e.g. " \
        "the first of them: placement { gemv[i, j] -> PE[" in text


def test_the_written_mapping_is_the_one_validated() -> None:
    """What ``dtg search -o`` writes (a person's placement and streams) validates to the
    very relations of the tiling chosen."""
    import itertools

    from dtg.mapping.space import candidates as space
    from dtg.mapping.validate import validate_mapping

    for program, width, height in ((GEMV, 4, 4), (TRAIN, 4, 9),
                                   (EXAMPLES / "polybench" / "3mm.lair", 4, 4)):
        model = load_program(program).model
        for cand in itertools.islice(space(model, width, height), 0, 200, 23):
            try:
                choices = candidates(parse_mapping(cand.text, "<c>"), model, lambda m: 1)
            except DtgError:
                continue
            for choice in choices[:4]:
                text = cand.written(model, choice.tiling, choice.origin)
                assert "TX" not in text and "+ 0" not in text and "(0)" not in text
                again = validate_mapping(parse_mapping(text, "<w>"), model)
                for (name, a), (_, b) in zip(again.placement, choice.mapping.placement,
                                             strict=True):
                    assert a.is_equal(b), (name, text)
                assert len(again.streams) == len(choice.mapping.streams)
                for s, t in zip(again.streams, choice.mapping.streams, strict=True):
                    assert s.relation.is_equal(t.relation), (s.tensor, text)

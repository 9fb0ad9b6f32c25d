"""Partial results combined towards where they are wanted (issue 27): chains flow west or
north as well as east or south, and of the plans that realize a reduction the compiler
takes one leaving the totals on the PE an output leaves from (or where they are read),
else in its exit line, else as close as it can, where every chain once ran east and
south and the totals came back by an exchange.

An independently written 2 x 2 max-pool split over a 2 x 2 group of PEs, whose output
leaves the west PE of each pair to the south, went 4,731 -> 3,391 cycles on an 8 x 2 mesh
(one 1,024-element exchange fewer). Each case verified exactly on both engines, with
and without SIMD."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import alike_on_both_engines, write_pair

import dtg

POOL = """
    lair pool(): float32 X[4][32][32] -> float32 Y[4][16][16]
    { all (c, h, w, p, q) in (4, 16, 16, 2, 2) Y[c][h][w] max= X[c][2*h + p][2*w + q] }
    """


def pool_mapping(output: str) -> str:
    """The pool's window column ``q`` on the PE column's parity, its row ``p`` on the
    PE row's, on 4 x 4 PEs, and ``output`` as Y's stream."""
    return f"""
    rectangle {{ PE[4, 4] }}
    placement {{ pool[c, h, w, p, q] -> PE[2*(w//8) + q, 2*(h//8) + p] }}
    input X resident
    output Y dense {{ {output} }}
    """


PAIRS = {
    # the output leaves the even columns' row 3 PEs: westwards, then southwards (the
    # totals in those columns, row 3 holding those of rows 2-3)
    "south_from_even_columns": (POOL, pool_mapping(
        "Y[c = 0:3, h = 0:15, w = 0:15] -> [PE[2*(w//8), 4] -> index[c, h, w mod 8]]")),
    # leaving north: the totals in the even columns, row 0 holding those of rows 0-1
    "north_from_even_columns": (POOL, pool_mapping(
        "Y[c = 0:3, h = 0:15, w = 0:15] -> [PE[2*(w//8), -1] -> index[c, h, w mod 8]]")),
    # leaving west from the even rows: northwards, then westwards
    "west_from_even_rows": (POOL, pool_mapping(
        "Y[c = 0:3, h = 0:15, w = 0:15] -> [PE[-1, 2*(h//8)] -> index[c, h mod 8, w]]")),
}


def chain_sides(path: Path) -> list[str]:
    compiled = dtg.compile(path)
    assert compiled.tasks is not None
    return [red.side for red in compiled.tasks.combines]


@pytest.mark.parametrize(("name", "sides"), [
    ("south_from_even_columns", ["W", "S"]),
    ("north_from_even_columns", ["W", "N"]),
    ("west_from_even_rows", ["W", "N"]),
])
def test_chains_end_where_the_totals_are_wanted(tmp_path: Path, name: str,
                                                sides: list[str]) -> None:
    path = write_pair(tmp_path, *PAIRS[name])
    assert chain_sides(path) == sides


def test_resident_totals_still_flow_east_and_south(tmp_path: Path) -> None:
    """Nothing reads a resident output's totals on a PE: the first plan, eastwards and
    southwards, as before."""
    path = write_pair(tmp_path, POOL, """
        rectangle { PE[4, 4] }
        placement { pool[c, h, w, p, q] -> PE[2*(w//8) + q, 2*(h//8) + p] }
        input X resident
        output Y resident
        """)
    compiled = dtg.compile(path)
    assert compiled.tasks is not None
    assert [red.side for red in compiled.tasks.reductions] == ["E", "S"]


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("simd", [True, False])
def test_chains_of_every_direction_verify_on_both_engines(tmp_path: Path, name: str,
                                                          simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *PAIRS[name]), simd=simd)

"""A stream that runs along a line of PEs ends at the farthest PE that needs one of its
elements: the PEs beyond it neither receive nor forward it. An input whose upper half
enters from the north and lower half from the south then reaches each half of the PEs
once, where both halves passed every PE before (a 2 x 2 sum pooling: 3,102 cycles before,
2,141 after, on the helpers' kernel of 8 x 4 PEs). Both engines, SIMD and scalar, against
the reference interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_pair
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dtg
from dtg.mapping.mesh import pe_box
from dtg.pesim.run import run_program

POOL = ("""
    lair pool(): float32 x[2][16][16] -> float32 y[2][8][8]
    { all (c, i, j, a, b) in (2, 8, 8, 2, 2) y[c][i][j] += x[c][2 * i + a][2 * j + b] }
    """, """
    rectangle { PE[4, 4] }
    placement { pool[c, i, j, a, b] -> PE[j//2, i//2] }
    input  x sparse {
      x[c = 0:1, r = 0:15, q = 0:15] -> [PE[q//4, -1] -> index[c, r, q mod 4]] : r < 8;
      x[c = 0:1, r = 0:15, q = 0:15] -> [PE[q//4, 4] -> index[c, r, q mod 4]] : r >= 8 }
    output y dense { y[c = 0:1, i = 0:7, j = 0:7] -> [PE[4, i//2] -> index[c, i mod 2, j]] }
    """)


def test_each_half_reaches_its_rows(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *POOL))
    assert compiled.tasks is not None
    lines = {f.side: f.lines for f in compiled.tasks.input_flows("x")}
    assert lines.keys() == {"N", "S"}
    assert lines["N"].is_equal(pe_box(0, 3, 0, 1))
    assert lines["S"].is_equal(pe_box(0, 3, 2, 3))


@pytest.mark.parametrize("engine", ["simpy", "fast"])
@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
def test_two_halves_verify(tmp_path: Path, simd: bool, engine: str) -> None:
    path = write_pair(tmp_path, *POOL)
    for seed in (0, 1):
        outcome = run_program(path, simd=simd, seed=seed, engine=engine)
        assert outcome.comparison.verified, outcome.comparison.mismatch


@st.composite
def split_columns(draw: st.DrawFn) -> tuple[str, str, int, int]:
    """``y = 2 x`` on a column of PEs, each holding ``block`` rows, the rows before
    ``split`` entering from the north and the rest from the south (dense or sparse);
    also the PE rows each part must reach."""
    pes = draw(st.integers(2, 6))
    block = draw(st.integers(1, 5))
    n = pes * block
    split = draw(st.integers(1, n - 1))
    kind = draw(st.sampled_from(["dense", "sparse"]))
    lair = (f"lair col(): float16 x[{n}] -> float16 y[{n}]\n"
            f"{{ all (i) in ({n}) y[i] = 2 * x[i] }}\n")
    mapping = (f"rectangle {{ PE[1, {pes}] }}\n"
               f"placement {{ col[i] -> PE[0, i//{block}] }}\n"
               f"input  x {kind} {{ x[i = 0:{n - 1}] -> [PE[0, -1] -> index[i]] : i < {split};\n"
               f"                   x[i = 0:{n - 1}] -> [PE[0, {pes}] -> index[i - {split}]]"
               f" : i >= {split} }}\n"
               f"output y resident\n")
    return lair, mapping, (split - 1) // block, split // block


@pytest.mark.long
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=split_columns())
def test_random_split_columns(tmp_path: Path, case: tuple[str, str, int, int]) -> None:
    lair, mapping, last_north, first_south = case
    path = write_pair(tmp_path, lair, mapping)
    compiled = dtg.compile(path)
    assert compiled.tasks is not None
    lines = {f.side: f.lines for f in compiled.tasks.input_flows("x")}
    height = compiled.tasks.compute.height
    assert lines["N"].is_equal(pe_box(0, 0, 0, last_north))
    assert lines["S"].is_equal(pe_box(0, 0, first_south, height - 1))
    for engine in ("fast", "simpy"):
        outcome = run_program(path, engine=engine)
        assert outcome.comparison.verified, (engine, outcome.comparison.mismatch)

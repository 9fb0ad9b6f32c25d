"""Three placements from independently written kernels that ran hundreds of times their
bound (issue 27):

- blocks within blocks, ``PE[(j//16) mod 4, i//16 + 4 ((j//64) mod 2)]``: ``j`` read
  through two floors is lifted twice (:mod:`mapping.lifting`), so a PE's instances are
  one dense box for SIMD, and its local arrays the box of the elements written by
  blocks (16 rows, where isl's existential form gave 64): 2,096x -> 2.4x, and the same
  placement at 512 columns, once refused for memory, fits;
- a rotated 3-D GEMM, ``PE[(j//16 + k//16) mod 4, (i//16 + k//16) mod 4]``: each C
  block's partial sums lie on a wrapped diagonal of PEs. Each is kept where its sum
  starts (the PE of its first ``k``), one block per PE, and the others send theirs as
  whole blocks, one color per displacement: 558x -> 2.4x, where every partial went as
  a (value, index) pair to the least writer;
- blocks of two coordinates meeting in one mod, ``PE[(i//8 + j//8) mod 4, j//32]``:
  isl writes the floor of both, ``floor((8 floor(j/8) + i) / 32)``, and the analysis
  gave up; ``i``'s blocks, which that floor reads whole, are lifted too
  (``mapping.lifting._fine_blocks``), first where the analysis gives up: 497x -> 3.6x.

Each verified exactly on both engines, with and without SIMD."""

from __future__ import annotations

from pathlib import Path

import islpy as isl
import pytest
from conftest import alike_on_both_engines, write_pair

import dtg
from dtg.mapping import poly
from dtg.pesim.run import run_program

NESTED = ("""
    lair gemv(): float32 W[64][512], float32 x[512] -> float32 y[64]
    { all (i, j) in (64, 512) y[i] += W[i][j] * x[j] }
    """, """
    rectangle { PE[4, 8] }
    placement { gemv[i, j] -> PE[(j//16) mod 4, i//16 + 4*((j//64) mod 2)] }
    input x resident
    input W resident
    output y dense { y[i = 0:63] -> [PE[4, 4 + i//16] -> index[i mod 16]] }
    """)

ROTATED = ("""
    lair gemm(): float32 A[32][32], float32 B[32][32] -> float32 C[32][32]
    { all (i, j, k) in (32, 32, 32) C[i][j] += A[i][k] * B[k][j] }
    """, """
    rectangle { PE[4, 4] }
    placement { gemm[i, j, k] -> PE[(j//8 + k//8) mod 4, (i//8 + k//8) mod 4] }
    input A resident
    input B resident
    output C resident
    """)

MIXED = ("""
    lair mm(): float32 W[64][64], float32 x[64] -> float32 y[64]
    { all (i, j) in (64, 64) y[i] += W[i][j] * x[j] }
    """, """
    rectangle { PE[4, 2] }
    placement { mm[i, j] -> PE[(i//8 + j//8) mod 4, j//32] }
    input x resident
    input W resident
    output y dense { y[i = 0:63] -> [PE[4, 0] -> index[i]] }
    """)

PAIRS = {"nested": NESTED, "rotated": ROTATED, "mixed": MIXED}


def test_blocks_within_blocks_get_arrays_of_their_rows_only(tmp_path: Path) -> None:
    path = write_pair(tmp_path, *NESTED)
    compiled = dtg.compile(path)
    assert compiled.module is not None
    (program,) = compiled.module.programs
    shapes = {a.name: a.shape for a in program.arrays}
    assert shapes["W_local"] == (16, 400)  # (a 16-row block; 400 columns: 4 of 128 apart)
    simd = run_program(path, seed=1)
    assert simd.comparison.verified and simd.comparison.exact
    assert simd.bound is not None and simd.result.cycles <= 4 * simd.bound.cycles


def test_rotated_partial_blocks_go_to_the_pe_of_their_first_k(tmp_path: Path) -> None:
    path = write_pair(tmp_path, *ROTATED)
    compiled = dtg.compile(path)
    assert compiled.tasks is not None
    (summed,) = [ex for ex in compiled.tasks.exchanges if ex.reduce]
    # (each PE keeps one 8 x 8 block: the one whose sum starts there, k in 0..7)
    for x in range(4):
        for y in range(4):
            here = poly.pe_set(isl.Set(f"[PE_X, PE_Y] -> {{ : PE_X = {x} and PE_Y = {y} }}"))
            block = summed.needed.intersect_domain(here).range()
            assert block.is_equal(isl.Set(
                f"{{ C[i, j] : {8 * y} <= i < {8 * y + 8} and {8 * x} <= j < {8 * x + 8} }}"))
    outcome = run_program(path, seed=1)
    assert outcome.comparison.verified and outcome.comparison.exact
    assert outcome.bound is not None and outcome.result.cycles <= 4 * outcome.bound.cycles


def test_blocks_of_two_coordinates_meeting_in_one_mod_run_by_simd(tmp_path: Path) -> None:
    """``PE[(i//8 + j//8) mod 4, j//32]``: as isl writes it, the analysis gives up (too
    many cases); with the blocks lifted first, each PE runs 8 x 8 blocks by SIMD, where
    a scalar loop once tested every point of its box (497x the bound)."""
    path = write_pair(tmp_path, *MIXED)
    compiled = dtg.compile(path)
    assert compiled.decisions is not None
    (decision,) = compiled.decisions.values()
    assert decision.used and decision.sizes is not None and decision.sizes[-2:] == (8, 8)
    simd = run_program(path, seed=1)
    assert simd.comparison.verified and simd.comparison.exact
    scalar = run_program(path, seed=1, simd=False)
    assert 4 * simd.result.cycles < scalar.result.cycles


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("simd", [True, False])
def test_nested_and_rotated_verify_on_both_engines(tmp_path: Path, name: str,
                                                   simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *PAIRS[name]), simd=simd)


def test_short_of_colors_the_partial_blocks_go_by_turns(tmp_path: Path) -> None:
    """The rotated GEMM's partial blocks take a color per displacement: with 8 colors
    they do not fit, and the compiler emits again with the exchange by turns (slower,
    and still the program)."""
    from dtg.pe.fabric import FabricConfig

    path = write_pair(tmp_path, *ROTATED)
    wide = dtg.module_text(dtg.compile(path))
    fabric = FabricConfig(colors=8)
    narrow = dtg.module_text(dtg.compile(path, fabric=fabric))
    assert "got_C_sum ==" not in wide and "got_C_sum ==" in narrow
    outcome = run_program(path, seed=2, config=fabric, engine="fast")
    assert outcome.comparison.verified and outcome.comparison.exact

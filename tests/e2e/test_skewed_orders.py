"""Streams in a Cannon skew's order (issue 27): each row of A arrives rotated,
``index[i mod 8, (k - 8 (i // 8)) mod 32]``, so an element's position in its group is not
affine on a PE (it wraps), which batches need; it went one task per wavelet. The stream
is taken apart into its two runs, ``k >= 8 (i // 8)`` and the rest
(:func:`mapping.inputs._wrapped_runs`), each affine on a PE, on colors of their own, and
each is batched (an independently written Cannon GEMM: 7.5x -> 4.3x its bound). Verified
exactly on both engines, with and without SIMD."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import alike_on_both_engines, write_pair

import dtg
from dtg.pesim.run import run_program

CANNON = ("""
    lair cannon(): float32 A[32][32], float32 B[32][32] -> float32 C[32][32]
    { all (i, j, k) in (32, 32, 32) C[i][j] += A[i][k] * B[k][j] }
    """, """
    rectangle { PE[4, 4] }
    placement { cannon[i, j, k] -> PE[j//8, i//8] }
    input A dense { A[i = 0:31, k = 0:31] ->
                    [PE[-1, i//8] -> index[i mod 8, (k - 8*(i//8)) mod 32]] }
    input B dense { B[k = 0:31, j = 0:31] ->
                    [PE[j//8, -1] -> index[(k - 8*(j//8)) mod 32, j mod 8]] }
    output C resident
    """)


def test_a_rotated_row_order_goes_in_two_batched_runs(tmp_path: Path) -> None:
    path = write_pair(tmp_path, *CANNON)
    compiled = dtg.compile(path)
    assert compiled.tasks is not None and compiled.arrivals is not None
    runs = compiled.tasks.input_flows("A")
    assert len(runs) == 2 and all(f.position_affine() for f in runs)
    batched = {b.flow for b in compiled.arrivals.batches}
    assert {f.name for f in runs} <= batched
    outcome = run_program(path, seed=2)
    assert outcome.comparison.verified and outcome.comparison.exact


@pytest.mark.parametrize("simd", [True, False])
def test_rotated_runs_verify_on_both_engines(tmp_path: Path, simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *CANNON), simd=simd)

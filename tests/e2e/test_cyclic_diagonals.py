"""Cyclic diagonal placements (``PE[(i + j) mod 4, i // 32]``): each PE's elements are,
in every row, a run of 32 at stride 4 starting where the diagonal crosses the row. The
compression's basis steps along the anti-diagonal (8 elements per instruction, 128
instructions); skewed by the lattice's step (`codegen.simd._skews`), each row is one run,
and with the rows' residues lifted (`mapping.poly.residues_lifted`) the rows of one
residue are one 2-D instruction. An independently written elementwise product: 14.4x its
bound -> 1.44x. Each case verified exactly on both engines, with and without SIMD."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import alike_on_both_engines, exact_against_reference, write_pair
from hypothesis import given, settings
from hypothesis import strategies as st

import dtg


def diagonal(n: int, m: int, u: int, v: int, rows: int, *, body: str = "product"
             ) -> tuple[str, str]:
    """An ``n`` x ``n`` elementwise statement (or a GEMV, ``body="gemv"``) on
    ``PE[(u i + v j) mod m, i // rows]``."""
    place = f"PE[({u}*i + {v}*j) mod {m}, i//{rows}]"
    mesh = f"rectangle {{ PE[{m}, {n // rows}] }}\n"
    if body == "gemv":
        return (f"lair g(): float32 W[{n}][{n}], float32 x[{n}] -> float32 y[{n}]\n"
                f"{{ all (i, j) in ({n}, {n}) y[i] += W[i][j] * x[j] }}\n",
                mesh + f"placement {{ g[i, j] -> {place} }}\n"
                "input W resident\ninput x resident\noutput y resident\n")
    return (f"lair e(): float32 a[{n}][{n}], float32 b[{n}][{n}] -> float32 z[{n}][{n}]\n"
            f"{{ all (i, j) in ({n}, {n}) z[i][j] = a[i][j] * b[i][j] + a[i][j] }}\n",
            mesh + f"placement {{ e[i, j] -> {place} }}\n"
            "input a resident\ninput b resident\noutput z resident\n")


PAIRS = {
    "sum_mod4": diagonal(64, 4, 1, 1, 32),
    "difference_mod8": diagonal(64, 8, 1, -1, 64),
    "twice_mod4": diagonal(64, 4, 2, 1, 32),
    "gemv_mod4": diagonal(64, 4, 1, 1, 32, body="gemv"),
}


def test_each_residue_of_rows_is_one_instruction(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *diagonal(128, 4, 1, 1, 32)))
    assert compiled.decisions is not None
    decision = next(d for d in compiled.decisions.values() if d.used)
    # (the rows of one residue: 8 rows of 32, one invocation per residue)
    assert decision.sizes is not None and sorted(decision.sizes) == [8, 32]
    assert len(decision.outer_names) == 1


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("simd", [True, False])
def test_cyclic_diagonals_verify_on_both_engines(tmp_path: Path, name: str,
                                                 simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *PAIRS[name]), simd=simd)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from([2, 3, 4]), st.sampled_from([(1, 1), (1, -1), (2, 1), (1, 2), (3, 1)]),
       st.sampled_from(["product", "gemv"]), st.integers(0, 3))
def test_random_cyclic_diagonals_compute_the_program(m: int, uv: tuple[int, int], body: str,
                                                     seed: int) -> None:
    """Random moduli and diagonals, elementwise and reducing: exact against the
    reference."""
    lair, mapping = diagonal(24, m, *uv, 12, body=body)
    exact_against_reference(lair, mapping, seed=seed)

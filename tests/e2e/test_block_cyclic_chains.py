"""Partial sums of a block-cyclic placement combined along their chains by SIMD
(issue 27): a GEMV on ``PE[(j//8) mod 4, (i//8) mod 2 + 2 ((i//32) mod 2)]`` holds on
each PE four blocks of 8 rows of ``y``, which isl writes with nested floors; the chain's
scalar loop scanned the 88-row box hull testing four ``%`` conditions per row. Lifted in
order (`mapping.lifting.lift_in_order`, `codegen.gathering._lifted_box`), the blocks are
one ``[2, 2, 8]`` box in the same order on every PE of a chain, sent and added by one
SIMD instruction. An independently written kernel: 10.3x its bound -> 1.5x. Each case
verified exactly on both engines, with and without SIMD."""

from __future__ import annotations

from math import prod
from pathlib import Path

import pytest
from conftest import alike_on_both_engines, exact_against_reference, write_pair
from hypothesis import given, settings
from hypothesis import strategies as st

import dtg


def gemv(n: int, block: int, rows: tuple[int, int], columns: int,
         stream: bool = False, spread: int = 2) -> tuple[str, str]:
    """``y = W x`` (``n`` square) with ``y``'s blocks of ``block`` rows dealt over
    ``rows[0]`` PE rows, and blocks of ``spread`` times as many of those dealt over
    ``rows[1]`` (blocks within blocks), ``x``'s over ``columns``."""
    inner, outer = rows
    place = (f"PE[(j//{block}) mod {columns}, (i//{block}) mod {inner} + "
             f"{inner}*((i//{block * inner * spread}) mod {outer})]")
    x = (f"input x dense {{ x[j = 0:{n - 1}] -> [PE[(j//{block}) mod {columns}, -1] -> "
         f"index[j//{block * columns}, j mod {block}]] }}\n" if stream
         else "input x resident\n")
    return (f"lair g(): float16 W[{n}][{n}], float16 x[{n}] -> float16 y[{n}]\n"
            f"{{ all (i, j) in ({n}, {n}) y[i] += W[i][j] * x[j] }}\n",
            f"rectangle {{ PE[{columns}, {inner * outer}] }}\n"
            f"placement {{ g[i, j] -> {place} }}\n" + x +
            "input W resident\noutput y resident\n")


PAIRS = {
    "two_levels_streamed": gemv(128, 8, (2, 2), 4, stream=True),
    "two_levels": gemv(64, 4, (2, 2), 4),
    "one_level": gemv(64, 8, (4, 1), 2),
}


def test_the_chain_sends_the_blocks_by_one_instruction(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *PAIRS["two_levels_streamed"]))
    assert compiled.module is not None
    combines = [c for c in compiled.module.programs[0].configs
                if c.name.startswith("combine_y")]
    # (each PE's 32 rows of y, in blocks: one box of their lifted coordinates)
    assert combines and all(len(c.variants) == 1 and len(c.variants[0]) > 1 and
                            prod(c.variants[0]) == 32 for c in combines), combines
    assert "recv(" not in dtg.module_text(compiled)


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("simd", [True, False])
def test_block_cyclic_chains_verify_on_both_engines(tmp_path: Path, name: str,
                                                    simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *PAIRS[name]), simd=simd)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from([2, 4]), st.sampled_from([(2, 2), (2, 1), (1, 2), (3, 1)]),
       st.sampled_from([1, 2, 3]), st.booleans(), st.sampled_from([1, 2, 3]),
       st.integers(0, 3))
def test_random_block_cyclic_chains_compute_the_program(
        block: int, rows: tuple[int, int], columns: int, stream: bool, spread: int,
        seed: int) -> None:
    """Random blocks, levels and meshes: exact against the reference."""
    lair, mapping = gemv(48, block, rows, columns, stream=stream, spread=spread)
    exact_against_reference(lair, mapping, seed=seed)

"""Partial sums on a wrapped diagonal combined by a chain through it (issue 27): a GEMV
on ``PE[j//32, (i//32 + j//32) mod 8]`` leaves the 8 partial blocks of each block of
``y`` one per column, on a diagonal that wraps around the mesh. No row or column holds
two of them, so no chain along a line applies, and a reducing exchange sent every block
to its keeper by displacement (14 of them, more than an exchange may take), then as
(value, index) pairs by turns over the region: 75x and 221x their bound on 8 x 8 and
32 x 32 PEs. Each PE now passes its block to the holder in the column before it, along
its row and then that column, on the chain's two colors by parity
(`mapping.reductions._path_chain`; isl checks that the wavelets of one color never mix,
`mapping.mesh.direct_entries`): 1.5x. Each case verified exactly on both engines, with
and without SIMD; the data-flow check follows the chain's steps."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import alike_on_both_engines, exact_against_reference, write_pair
from hypothesis import given, settings
from hypothesis import strategies as st

import dtg
from dtg.codegen.dataflow import DataFlowError
from dtg.mapping import reductions
from dtg.mapping.mesh import same_line, translate


def _gemv(rows: int, columns: int, dtype: str) -> str:
    return (f"lair sk<T={dtype}>(): T W[{rows}][{columns}], T x[{columns}] -> T y[{rows}]\n"
            f"{{ all (i, j) in ({rows}, {columns}) y[i] += W[i][j] * x[j] }}\n")


def skewed_gemv(pes: int, block: int, *, sign: int = 1, output: str = "resident",
                dtype: str = "float16", transposed: bool = False) -> tuple[str, str]:
    """``y = W x`` on ``PE[j//block, (i//block + sign * j//block) mod pes]`` (``pes``
    square), ``x`` streamed from the north; ``y`` resident, or leaving ``output``; or,
    ``transposed``, ``y`` of ``pes // 2`` blocks on ``PE[(...) mod (pes // 2), j//block]``
    with ``x`` from the west (the holders of a block one to a row, two to a column)."""
    n = pes * block
    term = f"i//{block} + j//{block}" if sign > 0 else f"i//{block} - j//{block}"
    x = "PE[-1, j//{b}]" if transposed else "PE[j//{b}, -1]"
    stream = (f"input x dense {{ x[j = 0:{n - 1}] -> [{x.format(b=block)} -> "
              f"index[j mod {block}]] }}\ninput W resident\n")
    if transposed:  # (y in blocks over half the rows: 2 holders to a column, 1 to a row)
        half = max(pes // 2, 1)
        return (_gemv(half * block, n, dtype),
                f"rectangle {{ PE[{half}, {pes}] }}\n"
                f"placement {{ sk[i, j] -> PE[({term}) mod {half}, j//{block}] }}\n"
                + stream + "output y resident\n")
    out = {"resident": "output y resident\n",
           "E": f"output y dense {{ y[i = 0:{n - 1}] -> [PE[{pes}, i//{block}] -> "
                f"index[i mod {block}]] }}\n",
           "W": f"output y dense {{ y[i = 0:{n - 1}] -> [PE[-1, i//{block}] -> "
                f"index[i mod {block}]] }}\n"}[output]
    return (_gemv(n, n, dtype),
            f"rectangle {{ PE[{pes}, {pes}] }}\n"
            f"placement {{ sk[i, j] -> PE[j//{block}, ({term}) mod {pes}] }}\n"
            + stream + out)


PAIRS = {
    "resident": skewed_gemv(8, 16),
    "leaving_east": skewed_gemv(8, 8, output="E"),
    "leaving_west": skewed_gemv(4, 8, output="W"),
    "anti_diagonal": skewed_gemv(4, 8, sign=-1, dtype="float32"),
    # (two holders to a column: line chains, columns then rows, take it, not a path)
    "two_to_a_column": skewed_gemv(8, 4, transposed=True),
}


def test_holders_two_to_a_column_keep_their_line_chains(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *PAIRS["two_to_a_column"]))
    assert compiled.tasks is not None
    assert compiled.tasks.reductions and all(
        chain.step is None for chain in compiled.tasks.reductions)


def test_partial_blocks_on_a_wrapped_diagonal_take_a_chain(tmp_path: Path) -> None:
    compiled = dtg.compile(write_pair(tmp_path, *PAIRS["resident"]))
    assert compiled.tasks is not None
    (chain,) = compiled.tasks.reductions
    assert chain.step is not None
    assert not any(ex.reduce for ex in compiled.tasks.exchanges)
    assert "send(" not in dtg.module_text(compiled)  # (no (value, index) pairs)


def test_the_chain_ends_where_the_totals_leave(tmp_path: Path) -> None:
    """Leaving west, the chain flows west: the totals end in the column they leave
    from."""
    compiled = dtg.compile(write_pair(tmp_path, *PAIRS["leaving_west"]))
    assert compiled.tasks is not None
    (chain,) = compiled.tasks.combines  # (an output's partial results)
    assert chain.step is not None and chain.side == "W"


def test_the_check_catches_a_chain_off_its_diagonal(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A chain whose steps go to the PE beside (in the next column, but holding another
    block) would add partial sums of different elements: the data-flow check refuses
    the code."""
    real = reductions._path_chain

    def beside(writers, wanted):  # type: ignore[no-untyped-def]
        chain = real(writers, wanted)
        if chain is None or chain.step is None:
            return chain
        along_row = chain.step.intersect(same_line("E").align_params(chain.step.get_space()))
        return replace(chain, step=chain.step.domain().identity().apply_range(
            translate(-1 if chain.side == "W" else 1, 0)).intersect_domain(
            chain.step.domain())) if along_row.is_empty() else chain

    monkeypatch.setattr(reductions, "_path_chain", beside)
    with pytest.raises(DataFlowError, match="does not hold"):
        dtg.compile(write_pair(tmp_path, *PAIRS["resident"]))


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("simd", [True, False])
def test_path_chains_verify_on_both_engines(tmp_path: Path, name: str, simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *PAIRS[name]), simd=simd)


@settings(max_examples=10, deadline=None)
@given(st.integers(2, 6), st.sampled_from([2, 4, 8]), st.sampled_from([1, -1]),
       st.sampled_from(["resident", "E", "W", "transposed"]), st.integers(0, 3))
def test_random_wrapped_diagonals_compute_the_program(pes: int, block: int, sign: int,
                                                      output: str, seed: int) -> None:
    """Random meshes, blocks, diagonals and exits: exact against the reference."""
    lair, mapping = skewed_gemv(pes, block, sign=sign, dtype="float32",
                                output="resident" if output == "transposed" else output,
                                transposed=output == "transposed")
    exact_against_reference(lair, mapping, seed=seed)

"""The planning of path chains (:func:`mapping.reductions._path_chain`): through the
holders of each block, one per column (or per row), each step to the next column (row)."""

from __future__ import annotations

import islpy as isl

from dtg.mapping import reductions


def _writers(transposed: bool) -> isl.Map:
    """``y[e] -> PE``: block ``e // 8`` of ``y`` on ``PE[(b + c) mod 4, c]`` for rows
    ``c`` 0 to 7 (two holders to a column), or its transpose."""
    pe = "PE[c, d]" if transposed else "PE[d, c]"
    return isl.Map(f"{{ y[e] -> {pe} : 0 <= e < 32 and 0 <= c < 8 and "
                   "d = (floor(e / 8) + c) mod 4 }")


def test_holders_one_to_a_row_chain_down_the_rows() -> None:
    chain = reductions._path_chain(_writers(False), [])
    assert chain is not None and chain.step is not None
    assert chain.side in ("N", "S")
    # (each step to the next row, holding the same block)
    deltas = chain.step.deltas()
    assert deltas.is_subset(isl.Set("{ PE[x, y] : y = -1 }") if chain.side == "N"
                            else isl.Set("{ PE[x, y] : y = 1 }"))


def test_holders_one_to_a_column_chain_along_the_columns() -> None:
    chain = reductions._path_chain(_writers(True), [])
    assert chain is not None and chain.step is not None
    assert chain.side == "W"
    assert chain.step.deltas().is_subset(isl.Set("{ PE[x, y] : x = -1 }"))


def test_holders_two_to_a_line_both_ways_take_no_path() -> None:
    """Two holders in one column and in one row: no path chain."""
    writers = isl.Map("{ y[e] -> PE[x, c] : 0 <= e < 8 and 0 <= x < 2 and 0 <= c < 2 }")
    assert reductions._path_chain(writers, []) is None

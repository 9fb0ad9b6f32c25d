"""An output computed away from its exit lines: where its totals lie in them, a chain along
each passes them on; otherwise it is gathered on the PE where each exit line
crosses the line of the PEs that hold its elements (a transpose whose blocks for the
east exit row ``r`` are computed down column ``r`` gather on the diagonal), along
columns, not over the whole region."""

from __future__ import annotations

from pathlib import Path

import islpy as isl
from conftest import write_pair

import dtg

TRANSPOSE = """
    lair tr(): float16 A[32][32] -> float16 B[32][32]
    { all (i, j) in (32, 32) B[j][i] = A[i][j] }
    """
MAPPING = """
    rectangle {{ PE[4, 4] }}
    placement {{ tr[i, j] -> PE[i//8, j//8] }}
    input  A resident
    output B dense {{ B[j = 0:31, i = 0:31] -> [PE[{exit}] -> index[{order}]] }}
    """


def _graph(tmp_path: Path, exit_pe: str, order: str):  # type: ignore[no-untyped-def]
    mapping = MAPPING.format(exit=exit_pe, order=order)
    compiled = dtg.compile(write_pair(tmp_path, TRANSPOSE, mapping))
    assert compiled.tasks is not None
    return compiled.tasks


def test_a_transposed_output_gathers_on_the_crossing_pes_along_columns(
        tmp_path: Path) -> None:
    tg = _graph(tmp_path, "4, i//8", "j, i mod 8")
    (out,) = tg.outputs
    diagonal = isl.Set("{ PE[x, y] : 0 <= x <= 3 and y = x }")
    senders, diagonal = out.senders, diagonal.align_params(out.senders.get_space())
    assert senders.is_equal(diagonal)
    (ex,) = tg.exchanges
    assert ex.axis == "column"


def test_leaving_south_it_gathers_on_the_diagonal_along_rows(tmp_path: Path) -> None:
    # (B[j][i] leaves south at column j//8, whose elements PE[i//8, j//8] computes
    # along row j//8: the crossing is PE[j//8, j//8] again)
    tg = _graph(tmp_path, "j//8, 4", "j mod 8, i")
    (out,) = tg.outputs
    diagonal = isl.Set("{ PE[x, y] : 0 <= x <= 3 and y = x }")
    assert out.senders.is_equal(diagonal.align_params(out.senders.get_space()))
    (ex,) = tg.exchanges
    assert ex.axis == "row"


GEMV = """
    lair g(): float16 W[32][32], float16 x[32] -> float16 y[32]
    { all (i, j) in (32, 32) y[i] += W[i][j] * x[j] }
    """


def test_totals_in_the_exit_line_leave_by_a_chain_along_it(tmp_path: Path) -> None:
    # (rows' partial sums end in column 3, the column of the one exit PE north of it:
    # a chain up that column, not an exchange gathering them next to the side)
    mapping = """
        rectangle { PE[4, 4] }
        placement { g[i, j] -> PE[j//8, i//8] }
        input  x dense { x[j = 0:31] -> [PE[j//8, -1] -> index[j mod 8]] }
        input  W resident
        output y dense { y[i = 0:31] -> [PE[3, -1] -> index[i]] }
        """
    compiled = dtg.compile(write_pair(tmp_path, GEMV, mapping))
    assert compiled.tasks is not None
    (out,) = compiled.tasks.outputs
    assert out.chain and not compiled.tasks.exchanges
    column = isl.Set("{ PE[x, y] : x = 3 and 0 <= y <= 3 }")
    assert out.senders.is_equal(column.align_params(out.senders.get_space()))

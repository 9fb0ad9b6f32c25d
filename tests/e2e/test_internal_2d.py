"""Internal tensors moved across rows and columns (issue 10): a two-layer MLP whose
hidden vector is produced down one column and read across a row, partial results
combined and then sent to readers anywhere, an all-gather over a grid; compiled and
verified exactly, with and without SIMD."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import verify_pair

from dtg.lair.frontend import program_from_text
from dtg.mapping.spec import parse_mapping
from dtg.mapping.tasks import build_task_graph
from dtg.mapping.validate import validate_mapping

MLP = """
lair l1<T=float16>(): T W1[8][8], T x[8] -> T h[8]
{ all (i, j) in (8, 8) h[i] += W1[i][j] * x[j] }
lair act<T=float16>(): T h[8] -> T a[8]
{ all (i) in (8) a[i] = max(h[i], 0) }
lair l2<T=float16>(): T W2[8][8], T a[8] -> T y[8]
{ all (k, i) in (8, 8) y[k] += W2[k][i] * a[i] }
"""
FC_BIAS_RELU = """
lair fc<T=float16>(): T W[8][8], T x[8] -> T z[8]
{ all (i, j) in (8, 8) z[i] += W[i][j] * x[j] }
lair bias<T=float16>(): T z[8], T b[8] -> T r[8]
{ all (i) in (8) r[i] = max(z[i] + b[i], 0) }
"""
SCORES = """
        lair att<T=float16>(): T Q[8][4], T K[8][4] -> T S[8][8]
        { all (i, j, k) in (8, 8, 4) S[i][j] += Q[i][k] * K[j][k] }
        """
CASES = {
    # Layer 1 down column 0 (h[i] on row i//2), ReLU there, layer 2 across row 0 (a[i]
    # needed on PE[i//2, 0]): a crosses from the column to the row.
    "mlp_column_to_row": (MLP, """
        rectangle { PE[4, 4] }
        placement { l1[i, j] -> PE[0, i//2]; act[i] -> PE[0, i//2];
                    l2[k, i] -> PE[i//2, 0] }
        input W1 resident
        input x resident
        input W2 resident
        output y resident
        """),
    # z split along rows and columns; the bias + ReLU runs on the north-west PE of each
    # row, away from the segment ends where the totals are kept.
    "fc_partials_read_elsewhere": (FC_BIAS_RELU, """
        rectangle { PE[2, 2] }
        placement { fc[i, j] -> PE[j//4, i//4]; bias[i] -> PE[0, 1 - i//4] }
        input W resident
        input x resident
        input b resident
        output r resident
        """),
    # Every PE computes two elements of h and reads all of them: an all-gather.
    "all_gather_grid": ("""
        lair sq<T=float16>(): T u[8] -> T h[8]
        { all (i) in (8) h[i] = u[i] * u[i] }
        lair use<T=float16>(): T h[8] -> T s[4][8]
        { all (p, i) in (4, 8) s[p][i] = 2 * h[i] - 1 }
        """, """
        rectangle { PE[2, 2] }
        placement { sq[i] -> PE[(i//2) mod 2, i//4]; use[p, i] -> PE[p mod 2, p//2] }
        input u resident
        output s resident
        """),
    # A transpose of an internal tensor over a 2 x 2 grid: T[j][i] lives on the PE across
    # the diagonal, in another row and column.
    "transpose_across_the_grid": ("""
        lair t(): float16 A[4][4], float16 B[4][4] -> float16 E[4][4], float16 T[4][4]
        {
          ab: all (i, j) in (4, 4) T[i][j] = A[i][j] * B[i][j]
          tr: all (i, j) in (4, 4) E[i][j] = T[j][i]
        }
        """, """
        rectangle { PE[2, 2] }
        placement { ab[i, j] -> PE[j//2, i//2]; tr[i, j] -> PE[j//2, i//2] }
        input A resident
        input B resident
        output E resident
        """),
    # Outputs computed away from the line of their external PE: gathered next to the
    # side first (an exchange), then streamed out.
    "gemv_output_gathered_across_rows": ("""
        lair gemv<T=float16>(): T W[8][8], T x[8] -> T y[8]
        { all (i, j) in (8, 8) y[i] += W[i][j] * x[j] }
        """, """
        rectangle { PE[2, 2] }
        placement { gemv[i, j] -> PE[i//4, j//4] }
        input  x resident
        input  W resident
        output y dense { y[i = 0:7] -> [PE[2, 0] -> index[i]] }
        """),
    "scores_out_north_from_a_grid": (SCORES, """
        rectangle { PE[2, 2] }
        placement { att[i, j, k] -> PE[j//4, i//4] }
        input  Q resident
        input  K resident
        output S sparse { S[i = 0:7, j = 0:7] -> [PE[0, -1] -> index[i, j]] }
        """),
    # A two-dimensional sparse index along an output chain (end mark per row of S).
    "scores_sparse_2d_east_chain": (SCORES, """
        rectangle { PE[2, 2] }
        placement { att[i, j, k] -> PE[j//4, i//4] }
        input  Q resident
        input  K resident
        output S sparse { S[i = 0:7, j = 0:7] -> [PE[2, i//4] -> index[i mod 4, j]] }
        """),
    # Partial sums of y[i] on PEs (i + j)//2: overlapping runs, not segments holding the
    # same elements; every writer but the least sends its partial sums to the least.
    "resident_partials_anywhere": ("""
        lair n(): float16 W[4][4], float16 x[4] -> float16 y[4]
        { all (i, j) in (4, 4) y[i] += W[i][j] * x[j] }
        """, """
        rectangle { PE[4, 1] }
        placement { n[i, j] -> PE[(i + j)//2, 0] }
        input x resident
        input W resident
        output y resident
        """),
    # A max over partial results spread over rows and columns, then streamed out east.
    "streamed_max_partials_anywhere": ("""
        lair n(): float16 W[4][4], float16 x[4] -> float16 y[4]
        { all (i, j) in (4, 4) y[i] max= W[i][j] * x[j] }
        """, """
        rectangle { PE[3, 2] }
        placement { n[i, j] -> PE[(i + j)//3, j mod 2] }
        input x resident
        input W resident
        output y dense { y[i = 0:3] -> [PE[3, 0] -> index[i]] }
        """),
}



@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_verifies(tmp_path: Path, name: str, simd: bool) -> None:
    verify_pair(tmp_path, *CASES[name], simd=simd)


def test_the_mlp_shares_its_hidden_vector_over_the_region() -> None:
    lair, mapping = CASES["mlp_column_to_row"]
    model = program_from_text(textwrap.dedent(lair)).model
    tg = build_task_graph(model, validate_mapping(parse_mapping(textwrap.dedent(mapping)),
                                                  model))
    assert [(ex.tensor, ex.axis) for ex in tg.exchanges] == [("a", "region")]

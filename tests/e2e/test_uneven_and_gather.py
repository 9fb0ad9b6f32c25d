"""Data movement beyond one line (issue 10): uneven tiles (the last tile smaller),
finished outputs gathered along a line, kernels inside a larger rectangle, and sums over
a 2-D grid of tiles (rows first, then the column of row totals); compiled and verified
exactly, with and without SIMD."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import verify_pair

GEMV_30x18 = """
lair gemv<T=float16>(): T W[30][18], T x[18] -> T y[30]
{ all (i, j) in (30, 18) y[i] += W[i][j] * x[j] }
"""
GRID_SUM = """
lair total<T=float16>(): T A[8][8], T B[8][8] -> T s[2]
{ all (k, i, j) in (2, 8, 8) s[k] += A[i][j] * B[i][j] }
"""
GRID_MAP = """
rectangle {{ PE[{n}, {n}] }}
placement {{ total[k, i, j] -> PE[j//{t}, i//{t}] }}
input  A resident
input  B resident
output s resident
"""
CASES = {
    # 30 rows in tiles of 8 (the last has 6), 18 columns in tiles of 5 (the last has 3).
    "gemv_uneven_dense": (GEMV_30x18, """
        rectangle { PE[4, 4] }
        placement { gemv[i, j] -> PE[j//5, i//8] }
        input  x dense { x[j = 0:17] -> [PE[j//5, -1] -> index[j mod 5]] }
        input  W resident
        output y dense { y[i = 0:29] -> [PE[4, i//8] -> index[i mod 8]] }
        """),
    "gemv_uneven_sparse": (GEMV_30x18, """
        rectangle { PE[4, 4] }
        placement { gemv[i, j] -> PE[j//5, i//8] }
        input  x sparse { x[j = 0:17] -> [PE[j//5, -1] -> index[j mod 5]] }
        input  W resident
        output y sparse { y[i = 0:29] -> [PE[4, i//8] -> index[i mod 8]] }
        """),
    "gemv_uneven_resident": (GEMV_30x18, """
        rectangle { PE[4, 4] }
        placement { gemv[i, j] -> PE[j//5, i//8] }
        input  x dense { x[j = 0:17] -> [PE[j//5, -1] -> index[j mod 5]] }
        input  W resident
        output y resident
        """),
    # Attention scores on a 2 x 2 grid, each S[i][j] finished on one PE, streamed east:
    # the row's PEs pass on what they receive and add their own elements.
    "scores_gathered_east": ("""
        lair att<T=float16>(): T Q[8][4], T K[8][4] -> T S[8][8]
        { all (i, j, k) in (8, 8, 4) S[i][j] += Q[i][k] * K[j][k] }
        """, """
        rectangle { PE[2, 2] }
        placement { att[i, j, k] -> PE[j//4, i//4] }
        input  Q resident
        input  K resident
        output S dense { S[i = 0:7, j = 0:7] -> [PE[2, i//4] -> index[i mod 4, j]] }
        """),
    # The uneven GEMV inside a larger rectangle: x flows down through row 0, which runs
    # nothing, and y leaves east through the idle column 4.
    "gemv_inside_larger_rectangle": (GEMV_30x18, """
        rectangle { PE[5, 5] }
        placement { gemv[i, j] -> PE[1 + j//5, 1 + i//8] }
        input  x dense { x[j = 0:17] -> [PE[1 + j//5, -1] -> index[j mod 5]] }
        input  W resident
        output y dense { y[i = 0:29] -> [PE[5, 1 + i//8] -> index[i mod 8]] }
        """),
    # Two dot products over 8 x 8 matrices tiled 2 x 2 and 3 x 3 (uneven): every PE holds
    # a partial sum of both; rows combine eastwards, then the east column southwards.
    "grid_sum_2x2": (GRID_SUM, GRID_MAP.format(n=2, t=4)),
    "grid_sum_3x3_uneven": (GRID_SUM, GRID_MAP.format(n=3, t=3)),
    # The same sums read by a ReLU on the PE that keeps the totals.
    "grid_sum_then_relu": (GRID_SUM + """
        lair relu<T=float16>(): T s[2] -> T r[2]
        { all (k) in (2) r[k] = max(s[k], 0) }
        """, """
        rectangle { PE[2, 2] }
        placement { total[k, i, j] -> PE[j//4, i//4]; relu[k] -> PE[1, 1] }
        input  A resident
        input  B resident
        output r resident
        """),
    # x enters at one PE in a permuted order and adapters spread it to the columns.
    "permuted_order_through_adapters": ("""
        lair gemv<T=float16>(): T W[16][16], T x[16] -> T y[16]
        { all (i, j) in (16, 16) y[i] += W[i][j] * x[j] }
        """, """
        rectangle { PE[4, 5] }
        placement { gemv[i, j] -> PE[j//4, 1 + i//4] }
        input  x sparse { x[j = 0:15] -> [PE[0, -1] -> index[(j mod 4) * 4 + j // 4]] }
        input  W resident
        output y dense { y[i = 0:15] -> [PE[4, 1 + i//4] -> index[i mod 4]] }
        """),
    # A vector computed down a column, streamed out north.
    "vector_gathered_north": ("""
        lair v<T=float16>(): T a[12] -> T b[12]
        { all (i) in (12) b[i] = 3 * a[i] - 1 }
        """, """
        rectangle { PE[1, 3] }
        placement { v[i] -> PE[0, i//4] }
        input  a resident
        output b dense { b[i = 0:11] -> [PE[0, -1] -> index[i]] }
        """),
}


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_verifies(tmp_path: Path, name: str, simd: bool) -> None:
    verify_pair(tmp_path, *CASES[name], simd=simd)

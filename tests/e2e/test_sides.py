"""Every side of the rectangle: streams entering from the south, west and east (with an
adapter column on the east), outputs leaving west and north."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES

from dtg.pesim.run import run_program

MAPPINGS = {
    "x_from_south_y_to_west": """
        rectangle { PE[4, 4] }
        placement { gemv[i, j] -> PE[j//4, i//8] }
        input  x dense { x[j = 0:15] -> [PE[j//4, 4] -> index[j mod 4]] }
        input  W resident
        output y dense { y[i = 0:31] -> [PE[-1, i//8] -> index[i mod 8]] }
    """,
    "x_from_west_y_to_south": """
        rectangle { PE[4, 4] }
        placement { gemv[i, j] -> PE[i//8, j//4] }
        input  x sparse { x[j = 0:15] -> [PE[-1, j//4] -> index[j mod 4]] }
        input  W resident
        output y dense { y[i = 0:31] -> [PE[i//8, 4] -> index[i mod 8]] }
    """,
    "x_spread_to_every_column": """
        rectangle { PE[4, 5] }
        placement { gemv[i, j] -> PE[i//8, 1 + j//4] }
        input  x sparse { x[j = 0:15] -> [PE[0, -1] -> index[j]] }
        input  W resident
        output y dense { y[i = 0:31] -> [PE[i//8, 5] -> index[i mod 8]] }
    """,
    "x_from_east_through_adapters_y_to_north": """
        rectangle { PE[5, 4] }
        placement { gemv[i, j] -> PE[i//8, j//4] }
        input  x sparse { x[j = 0:15] -> [PE[5, 3] -> index[j]] }
        input  W resident
        output y dense { y[i = 0:31] -> [PE[i//8, -1] -> index[i mod 8]] }
    """,
}


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("name", sorted(MAPPINGS))
def test_gemv_on_every_side(tmp_path: Path, name: str, simd: bool) -> None:
    (tmp_path / "gemv.lair").write_text((EXAMPLES / "gemv" / "gemv.lair").read_text())
    (tmp_path / "gemv.map").write_text(MAPPINGS[name])
    result = run_program(tmp_path / "gemv.lair", simd=simd, seed=2)
    assert result.comparison.verified and result.comparison.exact, result.comparison.mismatch


DENSE_2D_LAIR = """
lair g(): float32 A[6][8], float32 B[8][5] -> float32 y[6][5]
{ all (i, k, j) in (6, 5, 8) y[i][k] += A[i][j] * B[j][k] }
"""
DENSE_2D_MAP = """
rectangle { PE[1, 2] }
placement { g[i, k, j] -> PE[0, i//3] }
input A dense { A[i = 0:5, j = 0:7] -> [PE[-1, i//3] -> index[i mod 3, j]] }
input B resident
output y resident
"""


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
def test_dense_stream_with_outer_index_values(tmp_path: Path, simd: bool) -> None:
    (tmp_path / "g.lair").write_text(DENSE_2D_LAIR)
    (tmp_path / "g.map").write_text(DENSE_2D_MAP)
    result = run_program(tmp_path / "g.lair", simd=simd, seed=5)
    assert result.comparison.verified and result.comparison.exact, result.comparison.mismatch
    if simd:
        assert sum(p.simd_ops for p in result.result.pes.values()) > 0

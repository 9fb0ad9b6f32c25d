"""Compile time of GEMV as the PE rectangle grows with the same per-PE tile (8 x 4).

The compiler works on isl objects parametric in PE_X/PE_Y, so its time should not grow
with the number of PEs. Prints one line per size: best of several runs, per stage.
"""

from __future__ import annotations

import statistics
import time

from rich.console import Console
from rich.table import Table

from codegen.pipeline import compile_mapping
from lair.frontend import program_from_text
from mapping.spec import parse_mapping
from mapping.validate import validate_mapping

GEMV = """
lair gemv<T=float16>(M, N):
  T W[M][N], T x[N] -> T y[M]
{
  all (i, j) in (M, N)
    y[i] += W[i][j] * x[j]
}
"""


def gemv_mapping(px: int, py: int) -> str:
    m, n = 8 * py, 4 * px
    return f"""
rectangle {{ PE[{px}, {py}] }}
placement {{ gemv[i, j] -> PE[j//4, i//8] }}
input  x dense {{ x[j = 0:{n - 1}] -> [PE[j//4, -1] -> index[j mod 4]] }}
input  W resident
output y dense {{ y[i = 0:{m - 1}] -> [PE[{px}, i//8] -> index[i mod 8]] }}
"""


def measure(px: int, py: int, repeats: int = 5) -> dict[str, float]:
    best: dict[str, float] = {}
    for _ in range(repeats):
        t0 = time.perf_counter()
        program = program_from_text(GEMV, {"M": 8 * py, "N": 4 * px})
        t1 = time.perf_counter()
        mapping = validate_mapping(parse_mapping(gemv_mapping(px, py)), program.model)
        t2 = time.perf_counter()
        compile_mapping(program, mapping, name="gemv")
        t3 = time.perf_counter()
        for key, value in (("front end", t1 - t0), ("mapping", t2 - t1), ("back end", t3 - t2),
                           ("total", t3 - t0)):
            best[key] = min(best.get(key, value), value)
    return best


def main() -> None:
    table = Table(title="dtg-codegen compile time, GEMV with an 8 x 4 tile per PE (ms, best of 5)")
    for column in ("PEs", "M x N", "front end", "mapping", "back end", "total"):
        table.add_column(column, justify="right")
    totals = []
    for p in (4, 16, 64):
        best = measure(p, p)
        totals.append(best["total"])
        table.add_row(f"{p} x {p}", f"{8 * p} x {4 * p}",
                      *(f"{best[k] * 1000:.1f}" for k in ("front end", "mapping", "back end",
                                                        "total")))
    console = Console()
    console.print(table)
    console.print(f"64 x 64 / 4 x 4 total: {totals[-1] / totals[0]:.2f}x "
                  f"(median of the three sizes {statistics.median(totals) * 1000:.1f} ms)")


if __name__ == "__main__":
    main()

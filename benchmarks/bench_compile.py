"""Compile time as the PE rectangle grows with the same per-PE tile, per data-movement
pattern: GEMV (columns multicast, a reduction chain per row), a sum over a 2-D grid of
tiles (rows, then the column of row totals), attention scores gathered east along rows,
and GEMV whose x enters at one PE (multicast trees along the border row).

The compiler works on isl objects parametric in PE_X/PE_Y, so its time should not grow
with the number of PEs. Prints the best of several runs per size and the ratio of the
largest to the smallest rectangle, measured in one run.

Run: ``.venv/bin/python benchmarks/bench_compile.py [--sizes 4 16 64] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from dtg.codegen.pipeline import compile_mapping
from dtg.lair.frontend import program_from_text
from dtg.mapping.spec import parse_mapping
from dtg.mapping.validate import validate_mapping

GEMV = """
lair gemv<T=float16>(M, N): T W[M][N], T x[N] -> T y[M]
{ all (i, j) in (M, N) y[i] += W[i][j] * x[j] }
"""
GRID_SUM = """
lair total<T=float16>(N): T A[N][N], T B[N][N] -> T s[2]
{ all (k, i, j) in (2, N, N) s[k] += A[i][j] * B[i][j] }
"""
SCORES = """
lair att<T=float16>(M): T Q[M][4], T K[M][4] -> T S[M][M]
{ all (i, j, k) in (M, M, 4) S[i][j] += Q[i][k] * K[j][k] }
"""

# name -> (program, sizes for p x p PEs, mapping for p x p PEs)
Pattern = tuple[str, Callable[[int], dict[str, int]], Callable[[int], str]]
PATTERNS: dict[str, Pattern] = {
    "gemv": (GEMV, lambda p: {"M": 8 * p, "N": 4 * p}, lambda p: f"""
        rectangle {{ PE[{p}, {p}] }}
        placement {{ gemv[i, j] -> PE[j//4, i//8] }}
        input  x dense {{ x[j = 0:{4 * p - 1}] -> [PE[j//4, -1] -> index[j mod 4]] }}
        input  W resident
        output y dense {{ y[i = 0:{8 * p - 1}] -> [PE[{p}, i//8] -> index[i mod 8]] }}
        """),
    "2-D reduction": (GRID_SUM, lambda p: {"N": 4 * p}, lambda p: f"""
        rectangle {{ PE[{p}, {p}] }}
        placement {{ total[k, i, j] -> PE[j//4, i//4] }}
        input  A resident
        input  B resident
        output s resident
        """),
    "gather": (SCORES, lambda p: {"M": 4 * p}, lambda p: f"""
        rectangle {{ PE[{p}, {p}] }}
        placement {{ att[i, j, k] -> PE[j//4, i//4] }}
        input  Q resident
        input  K resident
        output S dense {{ S[i = 0:{4 * p - 1}, j = 0:{4 * p - 1}] -> [PE[{p}, i//4] ->
                          index[i mod 4, j]] }}
        """),
    "multicast tree": (GEMV, lambda p: {"M": 8 * p, "N": 4 * p}, lambda p: f"""
        rectangle {{ PE[{p}, {p}] }}
        placement {{ gemv[i, j] -> PE[j//4, i//8] }}
        input  x sparse {{ x[j = 0:{4 * p - 1}] -> [PE[0, -1] -> index[j]] }}
        input  W resident
        output y resident
        """),
}


def measure(pattern: Pattern, p: int, repeats: int) -> float:
    """Best wall time of front end + mapping + back end, in seconds."""
    lair, sizes, mapping_text = pattern
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        program = program_from_text(lair, dict(sizes(p)))  # type: ignore[arg-type]
        mapping = validate_mapping(parse_mapping(mapping_text(p)), program.model)
        compile_mapping(program, mapping, name="bench")
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 16, 64])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    table = Table(title=f"dtg-codegen compile time (ms, best of {args.repeat}), "
                        "same tile per PE")
    table.add_column("pattern")
    for p in args.sizes:
        table.add_column(f"{p} x {p}", justify="right")
    table.add_column(f"{args.sizes[-1]}² / {args.sizes[0]}²", justify="right")
    for name, pattern in PATTERNS.items():
        times = [measure(pattern, p, args.repeat) for p in args.sizes]
        table.add_row(name, *(f"{t * 1000:.0f}" for t in times), f"{times[-1] / times[0]:.2f}")
    Console().print(table)


if __name__ == "__main__":
    main()

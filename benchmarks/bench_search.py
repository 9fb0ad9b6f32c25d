"""dtg search against the hand-written mappings.

Run: ``.venv/bin/python benchmarks/bench_search.py [--budget 60] [--only NAME ...]``.
For every example with a hand-written mapping (GEMV, ff, conv1d, conv2d, the PolyBench
kernels at both sizes), search the same rectangle. The search keeps each tensor resident
or streamed as the hand-written mapping has it (``--like``). It prints the hand-written
cycles, the best verified cycles found, the search's seconds and counts, and the rank
correlation of bound and simulated cycles.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import dtg  # noqa: E402
from dtg.mapping.spec import parse_mapping_file  # noqa: E402
from dtg.mapping.validate import rectangle_size  # noqa: E402
from dtg.mapsearch import search  # noqa: E402

NAMES = ["gemv", "fc/ff", "conv1d", "conv2d"] + [
    f"polybench/{k}{size}" for k in ("gemm", "2mm", "3mm", "atax", "bicg", "mvt", "gemver",
                                     "gesummv", "doitgen") for size in ("", ".large")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--top", type=int, default=None,
                        help="simulate at most K per search (default: as the budget allows)")
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    table = Table(title=f"dtg search vs hand-written mappings (budget {args.budget:g} s)")
    for name in ("example", "rectangle", "hand-written", "found", "found / hand", "search s",
                 "considered", "simulated", "rank corr."):
        table.add_column(name, justify="left" if name == "example" else "right")
    worse = 0
    for name in args.only or NAMES:
        e = dtg.example(name)
        assert e.program is not None and e.mapping is not None
        width, height = rectangle_size(parse_mapping_file(e.mapping).rectangle)
        hand = e.simulate().cycles
        t0 = time.perf_counter()
        result = search(e.program, width, height, params=e.params, budget=args.budget,
                        top=args.top, like=e.mapping)
        seconds = time.perf_counter() - t0
        best = result.best
        found = best.cycles if best is not None and best.cycles is not None else None
        worse += found is None or found > hand
        table.add_row(name, f"PE[{width}, {height}]", str(hand),
                      "none" if found is None else str(found),
                      "-" if found is None else f"{found / hand:.2f}", f"{seconds:.1f}",
                      str(result.considered), str(result.simulated),
                      str(result.rank_correlation) if result.rank_correlation is not None
                      else "n/a")
        Console(stderr=True).print(f"{name}: hand {hand}, found {found}, {seconds:.1f} s",
                                   highlight=False)
    Console(width=160).print(table)
    print(f"{worse} of {len(args.only or NAMES)} examples: no verified mapping at most as slow "
          "as the hand-written one")
    return 0


if __name__ == "__main__":
    sys.exit(main())

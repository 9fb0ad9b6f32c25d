"""Cycles over the mapping's bound on the kernels of ``benchmarks/kernels/``.

The kernels there were written by a helper acting as a new user, from the README and
the language and mapping documentation only (not from dtg's examples or sources): a
stand-in for the kernels researchers write. Each is compiled, simulated, checked
against the reference interpreter and compared with its bound; the script prints one
row per kernel, the median of cycles / bound over the verified ones, how many with a
bound of 64 cycles or more run above 4x it (issue 27's check), and the worst ten.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from rich.console import Console
from rich.table import Table

from dtg.errors import DtgError
from dtg.pesim.run import run_program

KERNELS = Path(__file__).resolve().parent / "kernels"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="kernels to run (default: all)")
    parser.add_argument("--arrival", default="batched", choices=("batched", "per-wavelet"))
    args = parser.parse_args(argv)
    files = sorted(KERNELS.glob("*.lair"))
    if args.names:
        files = [f for f in files if f.stem in args.names]
    table = Table("kernel", "PEs", "cycles", "bound", "cycles / bound", "verified")
    ratios: list[float] = []
    rows: list[tuple[float, str, int]] = []  # (cycles / bound, kernel, bound)
    for f in files:
        try:
            outcome = run_program(f, arrival=args.arrival)
        except DtgError as err:
            table.add_row(f.stem, "", "", "", "", f"error: {str(err).splitlines()[0]}")
            continue
        cycles, verified = outcome.result.cycles, outcome.comparison.verified
        bound = outcome.bound.cycles if outcome.bound is not None else None
        ratio = cycles / bound if bound else None
        if verified and ratio is not None and bound is not None:
            ratios.append(ratio)
            rows.append((ratio, f.stem, bound))
        dominant = f" ({outcome.bound.dominant.name})" if outcome.bound is not None else ""
        table.add_row(f.stem, str(len(outcome.result.pes)), str(cycles),
                      f"{bound}{dominant}", f"{ratio:.2f}" if ratio is not None else "",
                      "yes" if verified else "NO")
    console = Console(width=120)
    console.print(table)
    if ratios:
        console.print(f"median cycles / bound over {len(ratios)} verified kernels: "
                      f"{statistics.median(ratios):.2f} (from {min(ratios):.2f} to "
                      f"{max(ratios):.2f})")
        heavy = [r for r in rows if r[2] >= 64]
        console.print(f"bound of 64 cycles or more: {len(heavy)} kernels, "
                      f"{sum(r[0] > 4 for r in heavy)} above 4x their bound")
        worst = Table("kernel", "bound", "cycles / bound", title="the worst ten")
        for ratio, name, bound in sorted(rows, reverse=True)[:10]:
            worst.add_row(name, str(bound), f"{ratio:.2f}")
        console.print(worst)
    failed = len(files) - len(ratios)
    if failed:
        console.print(f"{failed} of {len(files)} kernels not verified or without a bound")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Simulated cycles of every runnable example, with and without SIMD.

Prints the table the README shows: cycles each way, the speed-up, the SIMD case of each
compute task, and the share of the floating-point work done by SIMD instructions; then
the compiled GEMV beside the hand-written checkerboard baseline. ``--markdown`` prints
the table as Markdown for the README.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from codegen.driver import compile_file
from lair.diagnostics import DtgError
from pesim.run import run_file, run_program

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def row(program: Path) -> list[str]:
    compiled = compile_file(program, stop="simd")
    cases = sorted({d.case or "?" for d in (compiled.decisions or {}).values() if d.used})
    fast = run_program(program, simd=True)
    slow = run_program(program, simd=False)
    for outcome in (fast, slow):
        if not outcome.comparison.verified:
            raise SystemExit(f"{program}: outputs differ: {outcome.comparison.mismatch}")
    stats = fast.result.pes.values()
    simd = sum(s.simd_flops for s in stats)
    total = simd + sum(s.scalar_flops for s in stats)
    return [
        str(program.relative_to(EXAMPLES)),
        str(fast.result.cycles),
        str(slow.result.cycles),
        f"{slow.result.cycles / fast.result.cycles:.2f}x",
        ", ".join(cases) or "none",
        f"{simd / total:.0%}" if total else "-",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    header = ["example", "cycles (SIMD)", "cycles (scalar)", "speed-up", "SIMD case",
              "flops by SIMD"]
    rows, skipped = [], []
    for program in sorted(EXAMPLES.glob("*/*.lair")):
        try:
            rows.append(row(program))
        except DtgError as err:
            skipped.append(f"{program.relative_to(EXAMPLES)}: {err.message}")
    handwritten = run_file(EXAMPLES / "handwritten" / "gemv_checkerboard" /
                           "gemv_checkerboard.pe").result.cycles
    compiled = run_program(EXAMPLES / "gemv" / "gemv.lair").result.cycles
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        table = Table(title="Simulated cycles (pesim defaults, random integer inputs, seed 0)")
        for h in header:
            table.add_column(h, justify="right" if h != "example" else "left")
        for r in rows:
            table.add_row(*r)
        Console().print(table)
    print(f"\nGEMV 32 x 16 on 4 x 4 PEs: compiled {compiled} cycles, hand-written checkerboard "
          f"{handwritten} cycles ({(compiled / handwritten - 1) * 100:+.1f}%)")
    for line in skipped:
        print(f"not runnable yet: {line}")


if __name__ == "__main__":
    main()

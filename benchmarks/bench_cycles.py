"""Simulated cycles of every runnable example, with and without SIMD.

Prints the table the README shows: cycles each way, the speed-up, the SIMD case of each
compute task, the share of the floating-point work done by SIMD instructions, and the
mapping's lower bound (codegen.bound) with the ratio of the SIMD cycles to it; then
the compiled GEMV beside the hand-written checkerboard baseline. ``--markdown`` prints
the table as Markdown for the README.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from rich.console import Console
from rich.table import Table

from codegen.driver import compile_file
from lair.diagnostics import DtgError
from pesim.run import run_file, run_program

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def large_params(mapping: Path) -> dict[str, int]:
    """The sizes a ``*.large.map`` is written for, from its ``--param K=V`` comment."""
    return {k: int(v) for k, v in re.findall(r"--param (\w+)=(\d+)", mapping.read_text())}


def row(program: Path, mapping: Path | None = None) -> list[str]:
    params = large_params(mapping) if mapping else {}
    where = str(mapping) if mapping else None
    compiled = compile_file(program, where, dict(params), stop="simd")
    cases = sorted({d.case or "?" for d in (compiled.decisions or {}).values() if d.used})
    fast = run_program(program, mapping_path=where, params=params, simd=True)
    slow = run_program(program, mapping_path=where, params=params, simd=False)
    for outcome in (fast, slow):
        if not outcome.comparison.verified:
            raise SystemExit(f"{program}: outputs differ: {outcome.comparison.mismatch}")
    stats = fast.result.pes.values()
    simd = sum(s.simd_flops for s in stats)
    total = simd + sum(s.scalar_flops for s in stats)
    label = str(program.relative_to(EXAMPLES))
    if params:
        label += " (" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")"
    assert fast.bound is not None
    bound = fast.bound
    return [
        label,
        str(fast.result.cycles),
        str(slow.result.cycles),
        f"{slow.result.cycles / fast.result.cycles:.2f}x",
        ", ".join(cases) or "none",
        f"{simd / total:.0%}" if total else "-",
        f"{bound.cycles} ({bound.dominant.name})",
        f"{fast.result.cycles / bound.cycles:.2f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    header = ["example", "cycles (SIMD)", "cycles (scalar)", "speed-up", "SIMD case",
              "flops by SIMD", "bound", "cycles / bound"]
    rows, skipped = [], []
    for program in sorted(EXAMPLES.glob("*/*.lair")):
        large = program.with_suffix(".large.map")
        for mapping in [None, large] if large.exists() else [None]:
            try:
                rows.append(row(program, mapping))
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

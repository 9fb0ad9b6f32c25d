"""Simulated cycles of every runnable example, with and without SIMD.

Prints the table the README shows: cycles with SIMD (batched arrivals where the cost
model chooses them), with one task per wavelet (the paper's code) and without SIMD, the
speed-up, the SIMD case of each compute task, the share of the floating-point work done
by SIMD instructions, and the mapping's lower bound (codegen.bound) with the ratio of
the SIMD cycles to it, for every example, PolyBench at both sizes and GEMV 1024 x 1024
on 32 x 32 PEs; then the median ratio and the compiled GEMV beside the hand-written
checkerboard baseline. ``--markdown`` prints the table as Markdown for the README.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from dtg.codegen.driver import compile_file
from dtg.errors import DtgError
from dtg.pesim.run import run_file, run_program

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_pesim import compiled_gemv  # noqa: E402


def large_params(mapping: Path) -> dict[str, int]:
    """The sizes a ``*.large.map`` is written for, from its ``--param K=V`` comment."""
    return {k: int(v) for k, v in re.findall(r"--param (\w+)=(\d+)", mapping.read_text())}


def row(program: Path, mapping: Path | None = None, params: dict[str, int] | None = None,
        label: str | None = None) -> list[str]:
    params = params if params is not None else large_params(mapping) if mapping else {}
    where = str(mapping) if mapping else None
    compiled = compile_file(program, where, dict(params), stop="code")
    batched = {b.flow for b in (compiled.arrivals.batches if compiled.arrivals else ())}
    decisions = dict(compiled.decisions or {})
    for b in (compiled.arrivals.batches if compiled.arrivals else ()):
        decisions.update(dict(b.decisions))
    cases = sorted({d.case or "?" for d in decisions.values() if d.used})
    fast = run_program(program, mapping_path=where, params=params, simd=True)
    per_wavelet = run_program(program, mapping_path=where, params=params, simd=True,
                              arrival="per-wavelet")
    slow = run_program(program, mapping_path=where, params=params, simd=False)
    for outcome in (fast, per_wavelet, slow):
        if not outcome.comparison.verified:
            raise SystemExit(f"{program}: outputs differ: {outcome.comparison.mismatch}")
    stats = fast.result.pes.values()
    simd = sum(s.simd_flops for s in stats)
    total = simd + sum(s.scalar_flops for s in stats)
    if label is None:
        label = str(program.relative_to(EXAMPLES))
        if params:
            label += " (" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")"
    assert fast.bound is not None
    bound = fast.bound
    return [
        label,
        str(fast.result.cycles) + (" (batched)" if batched else ""),
        str(per_wavelet.result.cycles),
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
    header = ["example", "cycles (SIMD)", "per wavelet", "cycles (scalar)", "speed-up",
              "SIMD case", "flops by SIMD", "bound", "cycles / bound"]
    rows, skipped = [], []
    for program in sorted(p for p in EXAMPLES.glob("*/*.lair") if p.with_suffix(".map").exists()):
        large = program.with_suffix(".large.map")
        for mapping in [None, large] if large.exists() else [None]:
            try:
                rows.append(row(program, mapping))
            except DtgError as err:
                skipped.append(f"{program.relative_to(EXAMPLES)}: {err.message}")
    with tempfile.TemporaryDirectory() as tmp:
        gemv = compiled_gemv(1024, 1024, 32, 32, Path(tmp))
        rows.append(row(gemv, gemv.with_suffix(".map"), {"M": 1024, "N": 1024},
                        "gemv 1024 x 1024 on 32 x 32 PEs (benchmarks/bench_pesim.py)"))
    ratios = [float(r[-1]) for r in rows]
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
    print(f"\nmedian cycles / bound over the {len(ratios)} rows: {statistics.median(ratios):.2f} "
          f"(from {min(ratios):.2f} to {max(ratios):.2f})")
    print(f"GEMV 32 x 16 on 4 x 4 PEs: compiled {compiled} cycles, hand-written checkerboard "
          f"{handwritten} cycles ({(compiled / handwritten - 1) * 100:+.1f}%)")
    for line in skipped:
        print(f"not runnable yet: {line}")


if __name__ == "__main__":
    main()

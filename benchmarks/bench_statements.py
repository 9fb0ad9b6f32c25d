"""Compile time and memory as the number of statements grows: a chain of elementwise
statements ``t_k = t_{k-1} + 1`` on one PE, with and without SIMD.

Each statement needs a SIMD configuration and a PE holds 8, so the compiler gives SIMD
up for most of them; that must not make it re-emit the module once per statement. The
figures should grow about linearly (the 200/100 ratio near 2).
"""

from __future__ import annotations

import argparse
import resource
import time

from rich.console import Console
from rich.table import Table

from dtg.codegen.pipeline import compile_mapping
from dtg.lair.frontend import program_from_text
from dtg.mapping.spec import parse_mapping
from dtg.mapping.validate import validate_mapping


def chain(n: int) -> tuple[str, str]:
    """The LAIR program and the mapping of a chain of ``n`` statements."""
    nodes = []
    for k in range(n):
        src = "x" if k == 0 else f"t{k - 1}"
        dst = "y" if k == n - 1 else f"t{k}"
        nodes.append(f"lair s{k}(): float16 {src}[16] -> float16 {dst}[16]\n"
                     f"{{ all (i) in (16) {dst}[i] = {src}[i] + 1 }}\n")
    placement = "; ".join(f"s{k}[i] -> PE[0, 0]" for k in range(n))
    mapping = (f"rectangle {{ PE[1, 1] }}\nplacement {{ {placement} }}\n"
               "input x resident\noutput y resident\n")
    return "".join(nodes), mapping


def seconds(n: int, *, simd: bool) -> float:
    lair, mapping = chain(n)
    start = time.perf_counter()
    program = program_from_text(lair)
    compile_mapping(program, validate_mapping(parse_mapping(mapping), program.model),
                    simd=simd)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[25, 50, 100, 200])
    args = parser.parse_args(argv)
    table = Table(title="dtg-codegen on a chain of statements on one PE (s)")
    for column in ("statements", "SIMD", "no SIMD", "SIMD / no SIMD"):
        table.add_column(column, justify="right")
    timings = {}
    for n in args.sizes:
        with_simd, without = seconds(n, simd=True), seconds(n, simd=False)
        timings[n] = with_simd
        table.add_row(str(n), f"{with_simd:.2f}", f"{without:.2f}", f"{with_simd / without:.2f}")
    console = Console()
    console.print(table)
    first, last = args.sizes[0], args.sizes[-1]
    console.print(f"{last} / {first} statements (SIMD): {timings[last] / timings[first]:.1f}x "
                  f"for {last / first:.0f}x the statements; peak memory "
                  f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()

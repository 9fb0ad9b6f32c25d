"""Time the polyhedral primitives of mapping.poly on the paper's examples.

Run: ``.venv/bin/python benchmarks/bench_poly.py [--repeat N]``.  Every figure is
the minimum over N runs (default 7) of one call, in milliseconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import islpy as isl
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dtg.mapping import poly

TARGET_MS = 50.0


def fully_connected() -> dict[str, object]:
    domain = isl.Set("{ ff[i, j] : 0 <= i < 32 and 0 <= j < 16 }")
    placement = isl.Map("{ ff[i, j] -> PE[j//4, i//8] }")
    order = isl.Map("{ x[i = 0:15] -> index[i] }")
    access = isl.Map("{ ff[i, j] -> x[j] }")
    return {
        "domain": domain,
        "placement": placement,
        "order": order,
        "access": access,
        "write": isl.Map("{ ff[i, j] -> y[i] }"),
    }


def conv1d() -> dict[str, object]:
    return {
        "domain": isl.Set("{ C[k, w, rw] : 0 <= k < 2 and 0 <= w < 14 and 0 <= rw < 3 }"),
        "placement": isl.Map("{ C[k, w, rw] -> PE[0, k] }"),
        "order": isl.Map("{ x[w = 0:15] -> index[w] }"),
        "access": isl.Map("{ C[k, w, rw] -> x[w + rw] }"),
        "write": isl.Map("{ C[k, w, rw] -> y[k, w] }"),
    }


def conv2d() -> dict[str, object]:
    return {
        "domain": isl.Set(
            "{ C[k, w, h, rw, rh] : 0 <= k < 2 and 0 <= w < 14 and 0 <= h < 14 "
            "and 0 <= rw < 3 and 0 <= rh < 3 }"
        ),
        "placement": isl.Map("{ C[k, w, h, rw, rh] -> PE[0, k] }"),
        "order": isl.Map("{ x[w = 0:15, h = 0:15] -> index[w, h] }"),
        "access": isl.Map("{ C[k, w, h, rw, rh] -> x[w + rw, h + rh] }"),
        "write": isl.Map("{ C[k, w, h, rw, rh] -> y[k, w, h] }"),
    }


def degenerate() -> dict[str, object]:
    return {
        "domain": isl.Set(
            "{ C[k, h, w, c] : 0 <= k < 4 and 0 <= h < 8 and 0 <= w < 8 and 0 <= c < 4 }"
        ),
        "placement": isl.Map("{ C[k, h, w, c] -> PE[k//2 + 2*(w//4), 2*(h//4) + c//2] }"),
        "order": isl.Map("{ x[h = 0:7, w = 0:7, c = 0:3] -> index[h mod 4, w, c mod 2] }"),
        "access": isl.Map("{ C[k, h, w, c] -> x[h, w, c] }"),
        "write": isl.Map("{ C[k, h, w, c] -> y[h, w, k] }"),
    }


EXAMPLES: dict[str, Callable[[], dict[str, object]]] = {
    "fully connected (10)-(21)": fully_connected,
    "1-D conv (17)-(26), (35)-(43)": conv1d,
    "2-D conv (27)-(29)": conv2d,
    "degenerate (30)-(34)": degenerate,
}


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    fn()  # warm up caches of the isl context
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def measure(example: dict[str, object], repeat: int) -> dict[str, float]:
    domain = example["domain"]
    placement = example["placement"]
    order = example["order"]
    access = example["access"]
    write = example["write"]
    assert isinstance(domain, isl.Set) and isinstance(placement, isl.Map)
    assert isinstance(order, isl.Map) and isinstance(access, isl.Map)
    assert isinstance(write, isl.Map)

    instances = poly.task_instances(domain, placement, order, access)
    per_pe = poly.elements_per_pe(placement, write, domain)
    comp = poly.compress(instances)
    rect = poly.rectangularity(comp.compressed)
    approx = poly.approximate_by_box(comp.compressed)
    rewritten = poly.rewrite_access(write, comp)

    figures = {
        "task_instances": best_of(
            repeat, lambda: poly.task_instances(domain, placement, order, access)
        ),
        "elements_per_pe": best_of(repeat, lambda: poly.elements_per_pe(placement, write, domain)),
        "local_array": best_of(repeat, lambda: poly.local_array(per_pe, "local")),
        "compress": best_of(repeat, lambda: poly.compress(instances)),
        "rewrite_access": best_of(repeat, lambda: poly.rewrite_access(write, comp)),
        "rectangularity": best_of(repeat, lambda: poly.rectangularity(comp.compressed)),
        "set_box_hull": best_of(repeat, lambda: poly.set_box_hull(comp.compressed)),
        "approximate_by_box": best_of(repeat, lambda: poly.approximate_by_box(comp.compressed)),
        "enumerate_sizes": best_of(repeat, lambda: poly.enumerate_sizes(rect.sizes)),
    }
    if approx is not None:
        figures["check_extra_writes"] = best_of(
            repeat, lambda: poly.check_extra_writes(comp.compressed, approx.extra, rewritten)
        )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    results = {name: measure(build(), args.repeat) for name, build in EXAMPLES.items()}
    primitives = list(dict.fromkeys(key for figures in results.values() for key in figures))

    table = Table(title=f"mapping.poly on the paper's examples (ms, min of {args.repeat})")
    table.add_column("primitive")
    for name in results:
        table.add_column(name, justify="right")
    worst = 0.0
    for primitive in primitives:
        cells = []
        for figures in results.values():
            value = figures.get(primitive)
            if value is None:
                cells.append("-")
                continue
            worst = max(worst, value)
            cells.append(f"{value:.2f}")
        table.add_row(primitive, *cells)
    console = Console()
    console.print(table)
    verdict = "within" if worst < TARGET_MS else "OVER"
    console.print(f"slowest call: {worst:.2f} ms ({verdict} the {TARGET_MS:.0f} ms target)")
    return 0 if worst < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())

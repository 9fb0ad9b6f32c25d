"""Simulation speed of pesim on a large GEMV: y = W x, 1024 x 1024, on 32 x 32 PEs.

Run: ``.venv/bin/python benchmarks/bench_pesim.py [--m M --n N --px PX --py PY]``.
The module is the hand-written checkerboard GEMV of
``examples/handwritten/gemv_checkerboard`` generalized to any size by
:func:`checkerboard_gemv`; its reference is ``examples/gemv/gemv.lair`` with ``M`` and
``N`` given on the ``reference`` line. Prints simulated cycles, wall time, events per
second and simulated PE-cycles per second (PEs x cycles / wall seconds).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pesim.run import run_file  # noqa: E402

REFERENCE = ROOT / "examples" / "gemv" / "gemv.lair"


def checkerboard_gemv(m: int, n: int, px: int, py: int, reference: str | Path = REFERENCE
                      ) -> str:
    """The PE module of a GEMV ``y = W x`` (``W`` m x n) on px x py PEs: W resident in
    (m/py) x (n/px) tiles, x dense from the north and broadcast down the columns, one SIMD
    multiply-add per element, partial sums chained eastwards on alternating colors."""
    if m % py or n % px:
        raise ValueError(f"{m} x {n} does not tile evenly onto {px} x {py} PEs")
    tm, tn = m // py, n // px
    out_color = 1 if (px - 1) % 2 == 0 else 2
    return f"""\
# GEMV y = W x ({m} x {n}) on {px} x {py} PEs, checkerboard reduction chain
module gemv_{m}x{n}_{px}x{py}
mesh PE[{px}, {py}]
reference "{reference}" M={m} N={n}
input x dense color 0 {{ x[j = 0:{n - 1}] -> [PE[j//{tn}, -1] -> index[j mod {tn}]] }}
output y dense color {out_color} {{ y[i = 0:{m - 1}] -> [PE[{px}, i//{tm}] -> index[i mod {tm}]] }}

program gemv origin PE[0, 0] pes {{ PE[x, y] : 0 <= x < {px} and 0 <= y < {py} }}
{{
  array float16 W_local[{tm}][{tn}] offset [{tm} * PE_Y, {tn} * PE_X] load W;
  array float16 y_local[{tm}];
  int n = 0;
  route 0: N -> RAMP, S if (PE_Y < {py - 1});
  route 0: N -> RAMP if (PE_Y == {py - 1});
  route 1: RAMP -> E if (PE_X % 2 == 0);
  route 2: W -> RAMP if (PE_X % 2 == 0 && PE_X > 0);
  route 2: RAMP -> E if (PE_X % 2 == 1);
  route 1: W -> RAMP if (PE_X % 2 == 1);
  simd zero [{tm}]: y_local[i0] = scalar;
  simd mac [{tm}]: y_local[i0] += W_local[{tn}*i0] * scalar;
  simd first [{tm}]: out(1) = y_local[i0];
  simd even [{tm}]: out(1) = y_local[i0] + in(2);
  simd odd [{tm}]: out(2) = y_local[i0] + in(1);
  task main {{
    run zero {{y_local: 0}} (0.0);
  }}
  task on_x data color 0 {{
    run mac {{y_local: 0, W_local: n}} (value);
    n += 1;
  }}
  task x_done control color 0 {{
    if (PE_X == 0) {{
      run first {{y_local: 0}};
    }} else {{
      if (PE_X % 2 == 0) {{
        run even {{y_local: 0}};
      }} else {{
        run odd {{y_local: 0}};
      }}
    }}
  }}
}}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=1024)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--px", type=int, default=32)
    parser.add_argument("--py", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gemv.pe"
        path.write_text(checkerboard_gemv(args.m, args.n, args.px, args.py))
        t0 = time.perf_counter()
        outcome = run_file(path)
        total = time.perf_counter() - t0
    r = outcome.result
    pes = len(r.pes)
    table = Table(title=f"pesim: GEMV {args.m} x {args.n} on {args.px} x {args.py} PEs")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("verified (exact)", str(outcome.comparison.verified))
    table.add_row("simulated cycles", f"{r.cycles}")
    table.add_row("simulation wall time (s)", f"{r.wall_seconds:.2f}")
    table.add_row("end-to-end wall time (s)", f"{total:.2f}")
    table.add_row("events", f"{r.events}")
    table.add_row("events / s", f"{r.events / r.wall_seconds:,.0f}")
    table.add_row("PE-cycles / s", f"{pes * r.cycles / r.wall_seconds:,.0f}")
    Console().print(table)
    return 0 if outcome.comparison.verified else 1


if __name__ == "__main__":
    sys.exit(main())

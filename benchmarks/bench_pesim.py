"""Simulation speed of pesim on GEMV y = W x.

Run: ``.venv/bin/python benchmarks/bench_pesim.py [--m M --n N --px PX --py PY]`` for
one size (default 1024 x 1024 on 32 x 32 PEs), two modules side by side: the one
dtg-codegen compiles from ``examples/gemv/gemv.lair`` with a mapping of the same shape,
and the hand-written checkerboard GEMV of ``examples/handwritten/gemv_checkerboard``
generalized to any size by :func:`checkerboard_gemv` (its reference is
``examples/gemv/gemv.lair`` with ``M`` and ``N`` on the ``reference`` line).

``--scaling`` prints how pesim scales with the mesh on both engines: the checkerboard
GEMV with a 32 x 32 tile per PE on 8 x 8 to 128 x 128 PEs on the simpy engine and to
256 x 256 on the compiled one (``--huge`` adds 632 x 632, the CS-1's size, on the
compiled engine), each in its own process so that its peak memory is its own: simulated
cycles, events, set-up, JIT and event-loop seconds, events/s, PE-cycles/s, max RSS, and
the ratio of the two engines' whole simulations.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import simpy
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dtg.pesim.run import RunOutcome, run_file, run_program  # noqa: E402

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


def compiled_gemv(m: int, n: int, px: int, py: int, directory: Path) -> Path:
    """A LAIR GEMV and its mapping (x dense from the north, one chunk per column; y dense
    to the east, one chunk per row) for ``dtg-codegen``."""
    tm, tn = m // py, n // px
    (directory / "gemv.lair").write_text(REFERENCE.read_text())
    (directory / "gemv.map").write_text(
        f"rectangle {{ PE[{px}, {py}] }}\n"
        f"placement {{ gemv[i, j] -> PE[j//{tn}, i//{tm}] }}\n"
        f"input  x dense {{ x[j = 0:{n - 1}] -> [PE[j//{tn}, -1] -> index[j mod {tn}]] }}\n"
        "input  W resident\n"
        f"output y dense {{ y[i = 0:{m - 1}] -> [PE[{px}, i//{tm}] -> index[i mod {tm}]] }}\n")
    return directory / "gemv.lair"


def measure(label: str, run: Callable[[], RunOutcome]) -> tuple[str, RunOutcome, float]:
    t0 = time.perf_counter()
    outcome = run()
    return label, outcome, time.perf_counter() - t0


def bare_simpy_rate(events: int = 200_000) -> float:
    """Events per second of a simpy loop that does nothing but schedule the next event:
    what the clock itself costs on this machine, now."""
    env = simpy.Environment()
    left = [events]

    def tick(_event: object) -> None:
        left[0] -= 1
        if left[0] > 0:
            env.timeout(1).callbacks.append(tick)

    env.timeout(1).callbacks.append(tick)
    t0 = time.perf_counter()
    env.run()
    return events / (time.perf_counter() - t0)


def one_size(pes: int, engine: str, tile: int = 32) -> dict[str, float]:
    """Simulate the checkerboard GEMV with a ``tile`` x ``tile`` block per PE on
    ``pes`` x ``pes`` PEs in this process on ``engine``; its figures as a dict."""
    from dtg.pesim import sim
    from dtg.pesim.fast import engine as fast

    jit = 0.0
    if engine == "fast":  # compiled, or loaded from the cache, on a small run first
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "small.pe"
            path.write_text(checkerboard_gemv(64, 64, 2, 2))
            t0 = time.perf_counter()
            run_file(path, engine="fast")
            jit = time.perf_counter() - t0
    size = pes * tile
    phases: dict[str, float] = {}
    loops = {"simpy": (sim._Run, "run"), "fast": (fast, "_drive")}
    owner, name = loops[engine]
    run_loop = getattr(owner, name)

    def timed_loop(*args: object, **kwargs: object) -> object:
        t0 = time.perf_counter()
        try:
            return run_loop(*args, **kwargs)
        finally:
            phases["loop"] = time.perf_counter() - t0

    setattr(owner, name, timed_loop)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gemv.pe"
        path.write_text(checkerboard_gemv(size, size, pes, pes))
        t0 = time.perf_counter()
        outcome = run_file(path, engine=engine)
        total = time.perf_counter() - t0
    r = outcome.result
    assert r.engine == engine, r.engine_note
    loop = phases["loop"]
    return {
        "pes": pes, "verified": float(outcome.comparison.verified), "cycles": r.cycles,
        "events": r.events, "setup": r.wall_seconds - loop, "jit": jit, "loop": loop,
        "simulation": r.wall_seconds, "total": total,
        "events_per_s": r.events / loop, "pe_cycles_per_s": pes * pes * r.cycles / loop,
        "hops_per_s": sum(r.links.values()) / loop, "bare_simpy": bare_simpy_rate(),
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


SIMPY_SIZES = [8, 32, 64, 128]
FAST_SIZES = [8, 32, 64, 128, 256]


def scaling(huge: bool) -> int:
    """Both engines on every size (the simpy engine to 128 x 128, the fast one to
    256 x 256, and 632 x 632 with ``huge``), each run in a process of its own."""
    table = Table(title="pesim scaling: checkerboard GEMV, 32 x 32 tile per PE")
    for name in ("PEs", "engine", "verified", "cycles", "events", "set-up s", "JIT s",
                 "event loop s", "events/s", "PE-cycles/s", "max RSS", "simpy / fast"):
        table.add_column(name, justify="right")
    ok = True
    whole: dict[tuple[int, str], float] = {}
    runs = [(pes, "simpy") for pes in SIMPY_SIZES] + [(pes, "fast") for pes in FAST_SIZES]
    runs += [(632, "fast")] if huge else []
    runs.sort(key=lambda r: (r[0], r[1] != "simpy"))  # each size's simpy run first
    for pes, engine in runs:
        proc = subprocess.run([sys.executable, __file__, "--child", str(pes), "--engine",
                               engine], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            table.add_row(f"{pes} x {pes}", engine, "failed", proc.stderr.strip()[-60:])
            ok = False
            continue
        f = json.loads(proc.stdout)
        ok &= bool(f["verified"])
        whole[pes, engine] = f["simulation"]
        ratio = (f"{whole[pes, 'simpy'] / f['simulation']:.1f}x"
                 if engine == "fast" and (pes, "simpy") in whole else "")
        table.add_row(f"{pes} x {pes}", engine, str(bool(f["verified"])), f"{f['cycles']:.0f}",
                      f"{f['events']:,.0f}", f"{f['setup']:.2f}",
                      f"{f['jit']:.2f}" if engine == "fast" else "",
                      f"{f['loop']:.2f}", f"{f['events_per_s']:,.0f}",
                      f"{f['pe_cycles_per_s'] / 1e6:.2f} M", f"{f['max_rss_mb']:,.0f} MB", ratio)
    Console(width=170).print(table)
    rates = {pes: whole.get((pes, "fast")) for pes in FAST_SIZES}
    print("simpy / fast is the ratio of the whole simulation (set-up, loop and results; "
          "the JIT before it not counted), in one run")
    return 0 if ok and all(rates.values()) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=1024)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--px", type=int, default=32)
    parser.add_argument("--py", type=int, default=32)
    parser.add_argument("--scaling", action="store_true",
                        help="the scaling table of both engines, 8 x 8 to 256 x 256 PEs")
    parser.add_argument("--huge", action="store_true",
                        help="with --scaling: add 632 x 632 PEs on the fast engine (minutes, "
                             "gigabytes)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--engine", default="simpy", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_size(args.child, args.engine)))
        return 0
    if args.scaling:
        return scaling(args.huge)
    params = {"M": args.m, "N": args.n}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gemv.pe"
        path.write_text(checkerboard_gemv(args.m, args.n, args.px, args.py))
        program = compiled_gemv(args.m, args.n, args.px, args.py, Path(tmp))
        runs = [
            measure("hand-written checkerboard", lambda: run_file(path)),
            measure("compiled by dtg-codegen",
                    lambda: run_program(program, params=params)),
        ]
    table = Table(title=f"pesim: GEMV {args.m} x {args.n} on {args.px} x {args.py} PEs")
    table.add_column("measure")
    for label, _, _ in runs:
        table.add_column(label, justify="right")

    def add(name: str, value: Callable[[RunOutcome, float], str]) -> None:
        table.add_row(name, *(value(o, t) for _, o, t in runs))

    add("verified (exact)", lambda o, t: str(o.comparison.verified and o.comparison.exact))
    add("simulated cycles", lambda o, t: f"{o.result.cycles}")
    add("simulation wall time (s)", lambda o, t: f"{o.result.wall_seconds:.2f}")
    add("end-to-end wall time (s)", lambda o, t: f"{t:.2f}")
    add("events", lambda o, t: f"{o.result.events}")
    add("events / s", lambda o, t: f"{o.result.events / o.result.wall_seconds:,.0f}")
    add("PE-cycles / s",
        lambda o, t: f"{len(o.result.pes) * o.result.cycles / o.result.wall_seconds:,.0f}")
    Console().print(table)
    return 0 if all(o.comparison.verified for _, o, _ in runs) else 1


if __name__ == "__main__":
    sys.exit(main())

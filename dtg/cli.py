"""``dtg``: one command for the whole workflow.

    dtg compile ...    the same as dtg-codegen ...
    dtg simulate ...   the same as pesim ...
    dtg sweep PROG.lair [--map A.map ...] [--param K=V1,V2 ...] [-o rows.jsonl]
    dtg plot rows.jsonl -o sweep.png
    dtg search PROG.lair --rectangle PE[W, H] [--budget 60s] [-o best.map]
    dtg examples       the examples shipped in the package
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dtg.lair.cli import ArgumentParser, UsageError, run_guarded
from dtg.lair.diagnostics import Interrupted
from dtg.lair.files import check_new_file, write_atomically
from dtg.lair.specialize import Binding, parse_param
from dtg.pesim.fabric import PRESETS

COMMANDS = ("compile", "simulate", "sweep", "plot", "search", "examples")


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="dtg", description="Compile, simulate and sweep LAIR programs "
                                                    "with their mappings.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    sub.add_parser("compile", help="compile (the options of dtg-codegen)", add_help=False)
    sub.add_parser("simulate", help="simulate and verify (the options of pesim)", add_help=False)
    sweep = sub.add_parser("sweep", help="compile and simulate a cross product of mappings, "
                                         "parameter values and fabrics on Dask")
    sweep.add_argument("program", help="the .lair file, or the name of a shipped example "
                                       "(dtg examples)")
    sweep.add_argument("--map", action="append", default=[], metavar="MAP",
                       help="a mapping to sweep, a .map file or an example's name "
                            "(repeatable; default: the .map beside the program)")
    sweep.add_argument("--param", action="append", default=[], metavar="K=V1,V2,...",
                       help="values of a parameter of the program or the mappings "
                            "(repeatable)")
    sweep.add_argument("--fabric", action="append", choices=tuple(PRESETS), metavar="PRESET",
                       help=f"a fabric preset to sweep ({', '.join(PRESETS)}; repeatable; "
                            "default paper)")
    sweep.add_argument("--simd", choices=("on", "off", "both"), default="on",
                       help="compile with SIMD, without, or both (default on)")
    sweep.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    sweep.add_argument("-o", "--output", metavar="ROWS.jsonl",
                       help="write one JSON line per point (.csv: a CSV table)")
    sweep.add_argument("--scheduler", metavar="ADDRESS",
                       help="a running Dask scheduler (default: a local cluster)")
    sweep.add_argument("--workers", type=int, default=None, metavar="N",
                       help="processes of the local cluster (default: one per core; 0 runs "
                            "the points in this process)")
    sweep.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    plot = sub.add_parser("plot", help="draw a sweep's cycles and bounds (PNG)")
    plot.add_argument("rows", help="the rows of dtg sweep -o (JSON lines)")
    plot.add_argument("-o", "--output", required=True, metavar="PICTURE.png")
    plot.add_argument("--title")
    found = sub.add_parser("search", help="search mappings onto a rectangle: ranked by the "
                                          "bound, the best simulated and verified")
    found.add_argument("program", help="the .lair file, or a shipped example's name")
    found.add_argument("--rectangle", required=True, metavar="PE[W, H]", nargs="+",
                       help="the rectangle of PEs, e.g. 'PE[4, 4]' (quoted or not) or 4x4")
    found.add_argument("--param", action="append", default=[], metavar="K=V",
                       help="bind a size or type parameter of the program")
    found.add_argument("--budget", type=_seconds, default=60.0, metavar="SECONDS",
                       help="time for the whole search, e.g. 60s (default 60s)")
    found.add_argument("--top", type=int, default=5, metavar="K",
                       help="candidates to simulate (default 5)")
    found.add_argument("--fabric", choices=tuple(PRESETS), default="paper")
    found.add_argument("--like", metavar="MAP",
                       help="keep each tensor resident or streamed as this mapping has it "
                            "(to compare with it on the same terms)")
    found.add_argument("-o", "--output", metavar="BEST.map",
                       help="write the best verified mapping")
    found.add_argument("--scheduler", metavar="ADDRESS",
                       help="simulate on a running Dask scheduler")
    found.add_argument("--workers", type=int, default=0, metavar="N",
                       help="simulate on a local Dask cluster of N processes (default 0: here)")
    found.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    sub.add_parser("examples", help="list the examples shipped in the package")
    return parser


def _rectangle(text: str) -> tuple[int, int]:
    import re

    m = re.fullmatch(r"\s*(?:PE\s*\[)?\s*(\d+)\s*[,x]\s*(\d+)\s*\]?\s*", text)
    if m is None or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise argparse.ArgumentTypeError(f"expected PE[W, H] or WxH with positive sizes, got "
                                         f"{text!r}")
    return int(m.group(1)), int(m.group(2))


def _seconds(text: str) -> float:
    try:
        value = float(text.removesuffix("s"))
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError(f"expected a number of seconds such as 60s, got "
                                         f"{text!r}")
    return value


def search(args: argparse.Namespace) -> None:
    from dtg.lair.diagnostics import SimulationError
    from dtg.mapsearch import search as run_search

    if args.output:
        check_new_file(args.output, "the best mapping")
    program, _ = _shipped(args.program, [])
    try:
        width, height = _rectangle(" ".join(args.rectangle))
    except argparse.ArgumentTypeError as err:
        raise UsageError(f"--rectangle: {err}") from None
    params = dict(parse_param(p) for p in args.param)
    show = not args.quiet and sys.stderr.isatty()
    progress = Progress(TextColumn("search: {task.fields[phase]}"), BarColumn(),
                        TextColumn("{task.completed} done"), TimeElapsedColumn(),
                        console=Console(stderr=True), disable=not show)
    with progress:
        task = progress.add_task("search", total=None, phase="enumerating")
        result = run_search(program, width, height, params=params, budget=args.budget,
                            top=args.top, fabric=args.fabric, scheduler=args.scheduler,
                            workers=args.workers, like=args.like,
                            progress=lambda phase, done, total: progress.update(
                                task, completed=done, phase=phase))
    table = Table(title=f"dtg search: {Path(program).name} on PE[{width}, {height}]")
    for name in ("rank", "cycles", "bound", "verified", "mapping"):
        table.add_column(name, justify="left" if name == "mapping" else "right")
    for k, f in enumerate(result.ranked, 1):
        table.add_row(str(k), str(f.cycles), str(f.bound), str(f.verified), f.label)
    Console().print(table)
    cut = f"; out of time in {', '.join(result.out_of_time)}" if result.out_of_time else ""
    print(f"considered {result.considered} candidate mappings ({result.tilings} tilings), "
          f"pruned {result.pruned}, compiled {result.compiled}, simulated {result.simulated} "
          f"in {result.seconds} s{cut}; rank correlation of bound and simulated cycles: "
          f"{result.rank_correlation if result.rank_correlation is not None else 'n/a'}")
    best = result.best
    if best is None:
        raise SimulationError("no candidate mapping was compiled, simulated and verified; "
                              "try a larger --budget or another rectangle")
    if args.output:
        write_atomically(args.output, f"# dtg search: {best.label}\n# {best.cycles} "
                         f"simulated cycles (verified), bound {best.bound}\n{best.text}",
                         "the best mapping")
        print(f"wrote {args.output}")


def _values(text: str) -> tuple[str, list[Binding]]:
    name, sep, rest = text.partition("=")
    if not sep or not rest:
        raise UsageError(f"malformed --param {text!r}; expected NAME=V1,V2,..., e.g. "
                         "--param TI=4,8,16")
    return name.strip(), [parse_param(f"{name}={v}")[1] for v in rest.split(",")]


def sweep(args: argparse.Namespace) -> None:
    from dtg.sweep import points, run_sweep, write_rows

    if args.output:
        check_new_file(args.output, "the sweep's rows")
    program, maps = _shipped(args.program, args.map)
    values = dict(_values(p) for p in args.param)
    simd = {"on": (True,), "off": (False,), "both": (True, False)}[args.simd]
    todo = points(program, maps, values, simd=simd,
                  fabrics=args.fabric or ["paper"], seed=args.seed)
    show = not args.quiet and sys.stderr.isatty()
    progress = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("{task.fields[last]}"),
                        console=Console(stderr=True), disable=not show)
    with progress:
        task = progress.add_task("sweep", total=len(todo), last="")
        try:
            rows = run_sweep(todo, scheduler=args.scheduler, workers=args.workers,
                             on_row=lambda r: progress.update(
                                 task, advance=1, last=f"{r['status']} {r['cycles'] or ''}"))
        except KeyboardInterrupt as stop:
            rows = getattr(stop, "rows", [])
            if args.output:
                write_atomically(args.output, write_rows(args.output, rows), "the sweep's rows")
            raise Interrupted(f"stopped by Ctrl-C after {len(rows)} of {len(todo)} points"
                              + (f" (written to {args.output})" if args.output else "")
                              ) from None
    if args.output:
        write_atomically(args.output, write_rows(args.output, rows), "the sweep's rows")
    _print_rows(rows)


def _shipped(program: str, maps: list[str]) -> tuple[str, list[str | None]]:
    """Program and mappings, where each may also name a shipped example
    (``dtg sweep gemv/gemv.tiled --map gemv``): files first, then examples."""
    from dtg.catalog import example

    def resolve(name: str, part: str) -> str:
        if Path(name).is_file() or Path(name).suffix in (".lair", ".map"):
            return name  # (a missing file is reported as such later)
        found = getattr(example(name), part)
        if found is None:
            raise UsageError(f"example {name} has no {part}")
        return str(found)

    resolved = resolve(program, "program")
    chosen: list[str | None] = [resolve(m, "mapping") for m in maps]
    if not maps and not Path(program).is_file():
        chosen = [resolve(program, "mapping")]
    return resolved, chosen or [None]


def _print_rows(rows: list[dict[str, object]]) -> None:
    from dtg.plot import label

    table = Table(title=f"dtg sweep: {len(rows)} points")
    for name in ("point", "status", "cycles", "bound", "cycles / bound", "compile ms",
                 "sim s"):
        table.add_column(name, justify="left" if name in ("point", "status") else "right")
    for r in sorted(rows, key=lambda r: (r["cycles"] is None, r["cycles"] or 0)):
        table.add_row(label(r), str(r["status"]), *(
            "-" if r[k] is None else str(r[k])
            for k in ("cycles", "bound", "ratio", "compile_ms", "sim_seconds")))
    Console().print(table)
    for r in rows:
        if r["error"]:
            print(f"{label(r)}: {str(r['error']).splitlines()[0]}")


def examples() -> None:
    from dtg.catalog import examples as listed

    table = Table(title="dtg examples (dtg.example(NAME))")
    table.add_column("name")
    table.add_column("what")
    for e in listed():
        table.add_row(e.name, e.about)
    Console().print(table)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in ("compile", "simulate"):
        if args_list[0] == "compile":
            from dtg.codegen.driver import main as codegen_main

            return codegen_main(args_list[1:])
        from dtg.pesim.cli import main as pesim_main

        return pesim_main(args_list[1:])

    def body() -> None:
        args = build_parser().parse_args(args_list)
        if args.command is None:
            raise UsageError(f"expected a command: {', '.join(COMMANDS)}\n"
                             f"{build_parser().format_usage().rstrip()}")
        if args.command == "sweep":
            sweep(args)
        elif args.command == "search":
            search(args)
        elif args.command == "plot":
            from dtg.plot import plot_sweep
            from dtg.sweep import read_rows

            check_new_file(args.output, "the picture")
            plot_sweep(read_rows(args.rows), args.output, title=args.title)
            print(f"wrote {args.output}")
        else:
            examples()

    return run_guarded(body)


if __name__ == "__main__":
    sys.exit(main())


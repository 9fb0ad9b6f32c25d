"""``dtg``: one command for the whole workflow.

    dtg compile ...    the same as dtg-codegen ...
    dtg simulate ...   the same as pesim ...
    dtg sweep PROG.lair [--map A.map ...] [--param K=V1,V2 ...] [-o rows.jsonl]
    dtg plot rows.jsonl -o sweep.png
    dtg search PROG.lair --rectangle PE[W, H] [--budget 60s] [-o best.map]
    dtg import MODEL.onnx -o DIR   the model as a LAIR program and its weights (.npz)
    dtg examples       the examples shipped in the package
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dtg.errors import Interrupted
from dtg.lair.cli import ArgumentParser, UsageError, run_guarded
from dtg.lair.files import check_distinct, check_new_file, write_atomically
from dtg.lair.limits import MAX_INT, MAX_PES, abbreviate, counted, literal_value, number_text
from dtg.lair.specialize import Binding, parse_param
from dtg.pe.fabric import PRESETS
from dtg.pesim.cli import seed_arg

if TYPE_CHECKING:
    from dtg.mapsearch import SearchResult

COMMANDS = ("compile", "simulate", "sweep", "plot", "search", "import", "place", "run",
            "examples")


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="dtg", description="Compile, simulate and sweep LAIR programs "
                                                    "with their mappings.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    sub.add_parser("compile", help="compile (the options of dtg-codegen)", add_help=False)
    sub.add_parser("simulate", help="simulate and verify (the options of pesim)", add_help=False)
    sweep = sub.add_parser(
        "sweep", help="compile and simulate a cross product of mappings, parameter values "
                      "and fabrics on Dask",
        description="Compile, simulate and verify every point of a cross product of mappings, "
                    "parameter values, SIMD and fabrics, on a local Dask cluster or a running "
                    "one, and print a table of cycles and bounds. Exit status 1 when any "
                    "point failed; -o writes one row per point for dtg plot.")
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
    sweep.add_argument("--seed", type=seed_arg, default=0, metavar="N",
                       help=f"seed of the random inputs, 0 to {MAX_INT} (default 0)")
    sweep.add_argument("-o", "--output", metavar="ROWS.jsonl",
                       help="write one JSON line per point (.csv: a CSV table)")
    _dask_options(sweep, None, "processes of the local cluster (default: one per core; 0 "
                               "runs the points one after another without Dask)")
    sweep.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    plot = sub.add_parser(
        "plot", help="draw a sweep's cycles and bounds (PNG)",
        description="Draw the rows of dtg sweep -o as a PNG: a bar of simulated cycles per "
                    "point, fastest first, the mapping's bound as a tick, failed points "
                    "listed; a logarithmic axis when the values span more than a factor of "
                    "20.")
    plot.add_argument("rows", help="the rows of dtg sweep -o (JSON lines, or a .csv table)")
    plot.add_argument("-o", "--output", required=True, metavar="PICTURE.png")
    plot.add_argument("--title", help="the picture's title (shown as written)")
    found = sub.add_parser(
        "search", help="search mappings onto a rectangle: ranked by the bound, the best "
                       "simulated and verified",
        description="Enumerate mappings of a program onto a rectangle of PEs, rank them by "
                    "their bound on cycles, compile them in that order and simulate the best "
                    "that compile in rounds, as many as --budget allows or --top "
                    "(docs/search.md).")
    found.add_argument("program", help="the .lair file, or a shipped example's name")
    found.add_argument("--rectangle", required=True, metavar="PE[W, H]", type=_rectangle,
                       help="the rectangle of PEs, e.g. 'PE[4, 4]' (quoted or not) or 4x4")
    found.add_argument("--param", action="append", default=[], metavar="K=V",
                       help="bind a size or type parameter of the program")
    found.add_argument("--budget", type=_seconds, default=60.0, metavar="TIME",
                       help="time for the whole search, e.g. 60s, 90, 1m, 1.5m or 2m30s "
                            "(default 60s)")
    found.add_argument("--top", type=_count("--top", 1, MAX_TOP), default=None, metavar="K",
                       help="simulate at most the K best candidates that compile (default: "
                            "as many as the budget allows, in rounds of 5 in rank order)")
    found.add_argument("--limit", type=_count("--limit", 1, MAX_INT), metavar="N",
                       help="consider at most N candidate mappings (default: as many as "
                            "the budget allows; the same N gives the same search on any "
                            "machine)")
    found.add_argument("--fabric", choices=tuple(PRESETS), default="paper")
    found.add_argument("--like", metavar="MAP",
                       help="keep each tensor resident or streamed as this mapping has it "
                            "(to compare with it on the same terms)")
    found.add_argument("-o", "--output", metavar="BEST.map",
                       help="write the best verified mapping")
    _dask_options(found, 0, "simulate on a local Dask cluster of N processes (default 0: "
                            "without Dask)")
    found.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    imp = sub.add_parser("import", help="an ONNX model as a LAIR program (one node per "
                                        "ONNX node) and its initializers as an .npz")
    imp.add_argument("model", metavar="MODEL.onnx")
    imp.add_argument("-o", "--output", metavar="DIR", required=True,
                     help="the directory for NAME.lair and NAME.npz (made if missing)")
    imp.add_argument("--name", help="the files' name (default: the model file's)")
    from dtg.netcmd import add_parser as add_place
    from dtg.netcmd import add_run_parser

    add_place(sub, _rectangle)
    add_run_parser(sub)
    sub.add_parser("examples", help="list the examples shipped in the package")
    return parser


MAX_TOP = 1000
MAX_WORKERS = 256
"""Most processes of a local cluster: more only adds start-up time and memory."""


def _dask_options(parser: argparse.ArgumentParser, default: int | None, what: str) -> None:
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="a running Dask scheduler, tcp://HOST:PORT (default: a local "
                             "cluster)")
    parser.add_argument("--workers", type=_count("--workers", 0, MAX_WORKERS),
                        default=default, metavar="N", help=what)


def _count(option: str, low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = literal_value(text) if text.isascii() and text.isdigit() else None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}, "
                                             f"got {abbreviate(text)}")
        return value

    return parse


def _rectangle(text: str) -> tuple[int, int]:
    import re

    m = re.fullmatch(r"\s*(?:PE\s*\[)?\s*(\d+)\s*[,x]\s*(\d+)\s*\]?\s*", text)
    width, height = (literal_value(m.group(1)), literal_value(m.group(2))) if m else (0, 0)
    if m is None or width == 0 or height == 0:
        raise argparse.ArgumentTypeError(f"expected PE[W, H] or WxH with positive sizes, got "
                                         f"{abbreviate(text, 40)}")
    if width is None or height is None or width * height > MAX_PES:
        raise argparse.ArgumentTypeError(f"PE[{number_text(m.group(1))}, "
                                         f"{number_text(m.group(2))}] has more than {MAX_PES} "
                                         "PEs (dtg's limit, docs/limits.md); choose a smaller "
                                         "rectangle")
    return width, height


def _rejoin_rectangle(argv: list[str]) -> list[str]:
    """``--rectangle PE[4, 4]`` unquoted is two words: join them back into one."""
    out: list[str] = []
    k = 0
    while k < len(argv):
        word = argv[k]
        out.append(word)
        k += 1
        value_next = word in ("--rectangle", "--wafer")
        if not value_next and not word.startswith(("--rectangle=", "--wafer=")):
            continue
        if value_next and k < len(argv):
            out.append(argv[k])
            k += 1
        while "[" in out[-1] and "]" not in out[-1] and k < len(argv):
            out[-1] += " " + argv[k]
            k += 1
    return out


def _seconds(text: str) -> float:
    """60, 60s, 1m, 1.5m, 2m30s, 1h: a positive time of at most a day, in seconds."""
    import re

    number = r"(\d{1,9}(?:\.\d{0,9})?|\.\d{1,9})"
    m = re.fullmatch(rf"\s*(?:{number}h)?\s*(?:{number}m)?\s*(?:{number}s?)?\s*", text)
    value = -1.0
    if m is not None and any(m.groups()):
        hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
        value = 3600 * hours + 60 * minutes + seconds
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"expected a positive time of at most a day, such "
                                         f"as 60s, 90, 1m, 1.5m or 2m30s, got "
                                         f"{abbreviate(text)}")
    return value


class _CtrlC:
    """Ctrl-C noted rather than raised, for commands that stop cleanly with what they
    have (a KeyboardInterrupt inside isl's callbacks would be an isl error); a second
    Ctrl-C raises at once, and whatever error it caused on its way is the interruption."""

    def __init__(self) -> None:
        self.pressed = False
        self.again = False
        self._previous: Any = None

    def __call__(self) -> bool:
        return self.pressed

    def _noted(self, signum: int, frame: Any) -> None:
        if self.pressed:
            self.again = True
            raise KeyboardInterrupt
        self.pressed = True

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._noted)
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        if self.again and kind is not None and issubclass(kind, Exception):
            raise Interrupted("stopped by Ctrl-C") from None


def search(args: argparse.Namespace) -> None:
    from dtg.errors import SimulationError
    from dtg.mapsearch import search as run_search

    program, _ = _shipped(args.program, [])
    check_distinct([(args.output, "the best mapping")],
                   [(program, "the program"), (args.like, "the --like mapping")])
    if args.output:
        check_new_file(args.output, "the best mapping")
    width, height = args.rectangle
    params = dict(parse_param(p) for p in args.param)
    show = not args.quiet and sys.stderr.isatty()
    progress = Progress(TextColumn("search: {task.fields[phase]}"), BarColumn(),
                        TextColumn("{task.completed} done"), TimeElapsedColumn(),
                        console=Console(stderr=True), disable=not show)
    with progress, _CtrlC() as ctrl_c:
        task = progress.add_task("search", total=None, phase="enumerating")
        result = run_search(program, width, height, params=params, budget=args.budget,
                            top=args.top, fabric=args.fabric, scheduler=args.scheduler,
                            workers=args.workers, like=args.like, cancelled=ctrl_c,
                            limit=args.limit,
                            progress=lambda phase, done, total: progress.update(
                                task, completed=done, phase=phase))
    if result.ranked:
        table = Table(title=f"dtg search: {Path(program).name} on PE[{width}, {height}]")
        for name in ("rank", "cycles", "bound", "verified", "mapping"):
            table.add_column(name, justify="left" if name == "mapping" else "right")
        for k, f in enumerate(result.ranked, 1):
            table.add_row(str(k), str(f.cycles), str(f.bound), str(f.verified), f.label)
        Console().print(table)
    print(result.summary())
    best = result.best
    if result.interrupted:
        raise Interrupted("stopped by Ctrl-C; " + ("nothing was written" if args.output
                                                   else "the table has what was simulated"))
    if best is None:
        raise SimulationError(_nothing_found(result, args.budget))
    if args.output:
        write_atomically(args.output, f"# dtg search: {best.label}\n# {best.cycles} "
                         f"simulated cycles (verified), bound {best.bound}\n{best.text}",
                         "the best mapping")
        print(f"wrote {args.output}")


def _nothing_found(result: SearchResult, budget: float) -> str:
    """Why a search has no best mapping, and what to try."""
    if "simulation" in result.out_of_time and result.simulated == 0:
        return (f"none of the {counted(result.compiled, 'candidate')} compiled finished its "
                "simulation "
                f"within the budget of {budget:g} s; try a larger --budget (e.g. "
                f"{_longer(budget)}) or a smaller rectangle")
    if result.compiled == 0:
        return ("no candidate mapping compiled" + (" before the budget ran out; try a larger "
                                                   "--budget" if result.out_of_time else
                                                   "; try another rectangle"))
    return (f"none of the {counted(result.compiled, 'candidate')} compiled was simulated and "
            "verified; "
            "try a larger --top or --budget")


def _longer(budget: float) -> str:
    return f"{math.ceil(budget * 4 / 60)}m" if budget * 4 >= 60 else f"{math.ceil(budget * 4)}s"


def _values(text: str) -> tuple[str, list[Binding]]:
    name, sep, rest = text.partition("=")
    if not sep or not rest:
        raise UsageError(f"malformed --param {text!r}; expected NAME=V1,V2,..., e.g. "
                         "--param TI=4,8,16")
    return name.strip(), [parse_param(f"{name}={v}")[1] for v in rest.split(",")]


def sweep(args: argparse.Namespace) -> None:
    from dtg.errors import SimulationError
    from dtg.sweep import Stopped, points, run_sweep, write_rows

    program, maps = _shipped(args.program, args.map)
    check_distinct([(args.output, "the sweep's rows")],
                   [(program, "the program"), *((m, "a mapping") for m in maps)])
    if args.output:
        check_new_file(args.output, "the sweep's rows")
    values = dict(_values(p) for p in args.param)
    simd = {"on": (True,), "off": (False,), "both": (True, False)}[args.simd]
    todo = points(program, maps, values, simd=simd,
                  fabrics=args.fabric or ["paper"], seed=args.seed)
    show = not args.quiet and sys.stderr.isatty()
    progress = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("{task.fields[last]}"),
                        console=Console(stderr=True), disable=not show)
    with progress, _CtrlC() as ctrl_c:
        task = progress.add_task("sweep", total=len(todo), last="")
        try:
            rows = run_sweep(todo, scheduler=args.scheduler, workers=args.workers,
                             cancelled=ctrl_c,
                             on_row=lambda r: progress.update(
                                 task, advance=1, last=f"{r['status']} {r['cycles'] or ''}"))
        except Stopped as stop:
            rows = stop.rows
            kept = "nothing was written"
            if args.output and rows:
                write_atomically(args.output, write_rows(args.output, rows), "the sweep's rows")
                kept = f"their rows were written to {args.output}"
            elif not args.output:
                kept = "no -o, so nothing was written"
            raise Interrupted(f"stopped by Ctrl-C after {len(rows)} of "
                              f"{counted(len(todo), 'point')}; "
                              f"{kept}") from None
    if args.output:
        write_atomically(args.output, write_rows(args.output, rows), "the sweep's rows")
    _print_rows(rows)
    if args.output:
        print(f"wrote {args.output} ({counted(len(rows), 'row')})")
    failed = [r for r in rows if r["status"] != "verified"]
    if failed:
        raise SimulationError(f"{len(failed)} of {counted(len(rows), 'point')} failed "
                              "(listed above)")


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


def import_model(args: argparse.Namespace) -> None:
    """``dtg import``: both files are written only once the whole model is imported."""
    import io

    import numpy as np

    from dtg.lair.onnx_import import _identifier, import_onnx

    name = _identifier(args.name or Path(args.model).stem)
    imported = import_onnx(args.model, name=name)
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise UsageError(f"-o {out}: not a directory")
    lair, npz = out / f"{name}.lair", out / f"{name}.npz"
    check_distinct([(lair, "the program"), (npz, "the weights")],
                   [(Path(args.model), "the model")])
    buffer = io.BytesIO()
    arrays: dict[str, Any] = dict(imported.initializers)
    np.savez(buffer, **arrays)
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"-o {out}: cannot make the directory ({exc.strerror})") from None
    had_lair = lair.exists()
    try:
        write_atomically(lair, imported.lair, "the program")
        write_atomically(npz, buffer.getvalue(), "the weights")
    except BaseException:  # (the pair is written whole or not at all)
        if not had_lair:
            lair.unlink(missing_ok=True)
        if made and not any(out.iterdir()):
            out.rmdir()
        raise
    print(f"wrote {lair}")
    print(f"wrote {npz} ({counted(len(imported.initializers), 'initializer')}; the model's "
          f"input{'s' if len(imported.model_inputs) > 1 else ''} "
          f"{', '.join(imported.model_inputs)} not included)")


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in ("compile", "simulate"):
        if args_list[0] == "compile":
            from dtg.codegen.driver import main as codegen_main

            return codegen_main(args_list[1:], prog="dtg compile")
        from dtg.pesim.cli import main as pesim_main

        return pesim_main(args_list[1:], prog="dtg simulate")

    def body() -> None:
        args = build_parser().parse_args(_rejoin_rectangle(args_list))
        if args.command is None:
            raise UsageError(f"expected a command: {', '.join(COMMANDS)}\n"
                             f"{build_parser().format_usage().rstrip()}")
        if args.command == "sweep":
            sweep(args)
        elif args.command == "search":
            search(args)
        elif args.command == "import":
            import_model(args)
        elif args.command == "place":
            from dtg.netcmd import place_network

            place_network(args)
        elif args.command == "run":
            from dtg.netcmd import run_network

            run_network(args)
        elif args.command == "plot":
            from dtg.plot import plot_sweep
            from dtg.sweep import read_rows

            check_distinct([(args.output, "the picture")], [(args.rows, "the sweep's rows")])
            check_new_file(args.output, "the picture")
            plot_sweep(read_rows(args.rows), args.output, title=args.title)
            print(f"wrote {args.output}")
        else:
            examples()

    return run_guarded(body)


if __name__ == "__main__":
    sys.exit(main())


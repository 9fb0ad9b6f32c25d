"""``pesim``: simulate a PE module on the mesh and check it against its reference program.

    pesim MODULE.pe | OUTDIR | - | PROG.lair [-m MAP] [--param K=V] [--no-simd]
          [--arrival A] [--reference PROG.lair] [--inputs IN.npz] [--outputs OUT.npz]
          [--seed N] [--fabric paper|wse2|wse3] [--config FABRIC.toml] [--report FILE.json]
          [--trace TRACE.json [--trace-cycles FROM:TO] [--trace-pes X0:X1,Y0:Y1]]
          [--heatmap PICTURE.png] [-I DIR] [--max-seconds S] [--engine auto|fast|simpy]
          [--quiet]

Exit status 0 only when every output matches the reference; 1 with a message for every
error (malformed PE code, missing files, wrong inputs, deadlock, cycle limit, mismatch,
an output that would replace an input); 130 when Ctrl-C stopped the simulation (the
report then says so and holds what was measured up to that cycle).
"""

from __future__ import annotations

import argparse
import math
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from rich.console import Console

from dtg.errors import DtgError, Interrupted, SimulationError
from dtg.lair.cli import ArgumentParser, UsageError, run_guarded
from dtg.lair.files import check_distinct, check_new_file, output_path, write_atomically
from dtg.lair.limits import MAX_INT, MAX_SECONDS, abbreviate, literal_value, number_text
from dtg.lair.specialize import parse_param
from dtg.pe.fabric import add_fabric_arguments, chosen_fabric
from dtg.pesim.engines import AUTO_FAST_PES, ENGINES
from dtg.pesim.heatmap import draw_heatmap
from dtg.pesim.progress import ProgressBar, Watcher
from dtg.pesim.report import (
    build_report,
    failure_report,
    print_summary,
    run_header,
    write_report,
)
from dtg.pesim.run import RunOutcome, run_file, run_program
from dtg.pesim.sources import STDIN, Claim
from dtg.pesim.trace import Window


def build_parser(prog: str = "pesim") -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog=prog,
        description="Simulate a PE module (the text dtg-codegen emits) on a PE mesh, check "
                    "its outputs against the reference LAIR program and report cycles.")
    parser.add_argument("module", metavar="MODULE.pe|OUTDIR|-|PROG.lair",
                        help="a .pe module, a directory holding exactly one, - to read one "
                             "from standard input, or a LAIR program to compile first")
    parser.add_argument("-m", "--mapping", metavar="MAP",
                        help="with PROG.lair: the mapping (default: the .map file beside it); "
                             "with a module: the mapping its bound comes from (default: the "
                             "one its 'mapping' line names)")
    parser.add_argument("--reference", metavar="PROG.lair",
                        help="with a module: its reference program (default: the one its "
                             "'reference' line names; a module compiled from standard input "
                             "names none)")
    parser.add_argument("--param", action="append", default=[], metavar="K=V",
                        help="with PROG.lair: bind a size or type parameter")
    parser.add_argument("--no-simd", action="store_true",
                        help="with PROG.lair: compile without SIMD instructions")
    parser.add_argument("--arrival", choices=("batched", "per-wavelet"),
                        help="with PROG.lair: take input streams in batches where predicted "
                             "cheaper (batched, the default) or one task per wavelet "
                             "(per-wavelet, as in the paper)")
    parser.add_argument("-I", "--reference-dir", action="append", default=[], metavar="DIR",
                        help="with a module: look for its reference program and mapping in DIR "
                             "too, when they are not where the module says (the module was "
                             "moved); repeatable, searched before $DTG_PATH")
    parser.add_argument("--inputs", metavar="IN.npz",
                        help="input tensors by name (default: random integers from --seed)")
    parser.add_argument("--seed", type=seed_arg, default=None, metavar="N",
                        help="seed of the random integer-valued inputs (default 0)")
    parser.add_argument("--outputs", metavar="OUT.npz", help="write the simulated outputs")
    parser.add_argument("--report", metavar="FILE.json",
                        help="write the JSON report (cycles, the mapping's bound, per-PE "
                             "statistics with a per-task profile, per-link statistics)")
    parser.add_argument("--trace", metavar="TRACE.json",
                        help="write every PE's timeline (tasks, SIMD runs, waits, stalls) and "
                             "the wavelet hops per cycle as a Chrome/Perfetto trace")
    parser.add_argument("--trace-cycles", type=range_arg, metavar="FROM:TO",
                        help="with --trace: keep only the slices that overlap cycles FROM to "
                             "TO (TO excluded) and the hops of those cycles")
    parser.add_argument("--trace-pes", type=pes_arg, metavar="X0:X1,Y0:Y1",
                        help="with --trace: keep only the timelines of PEs with X0 <= x < X1 "
                             "and Y0 <= y < Y1 (a large mesh's trace is large)")
    parser.add_argument("--heatmap", metavar="PICTURE.png",
                        help="draw busy cycles per PE and wavelets per link over the mesh")
    parser.add_argument("--max-seconds", type=seconds_arg, default=MAX_SECONDS, metavar="S",
                        help="stop a simulation that runs longer than S seconds of wall time "
                             "(default %(default)g)")
    parser.add_argument("--engine", choices=ENGINES, default="auto",
                        help="the simulator: 'fast' (compiled with numba; the first run after "
                             "install compiles it, about half a minute), 'simpy' (the "
                             "reference) or 'auto' (default: fast on meshes of "
                             f"{AUTO_FAST_PES} PEs and more). Both give the same figures")
    add_fabric_arguments(parser)
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar (shown on a terminal for runs longer than a "
                             "second; Ctrl-C stops a run and reports what it measured)")
    return parser


def seed_arg(text: str) -> int:
    """A seed for numpy's generator: a decimal integer in 0..2**63-1."""
    value = literal_value(text) if text.isascii() and text.isdigit() else None
    if value is None:
        shown = number_text(text) if text.lstrip("-").isdigit() else abbreviate(text)
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to {MAX_INT}, got "
                                         f"{shown}")
    return value


def range_arg(text: str) -> tuple[int, int]:
    """``FROM:TO``, two integers with FROM < TO (either may be left out: 0, no end)."""
    first, colon, past = text.partition(":")
    try:
        lo = int(first) if first.strip() else 0
        hi = int(past) if past.strip() else MAX_INT
    except ValueError:
        lo = hi = -1
    if not colon or lo < 0 or hi <= lo:
        raise argparse.ArgumentTypeError(f"expected FROM:TO with 0 <= FROM < TO (e.g. "
                                         f"1000:2000), got {abbreviate(text)!r}")
    return lo, hi


def pes_arg(text: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """``X0:X1,Y0:Y1``: a box of PEs, each range as in :func:`range_arg`."""
    x, comma, y = text.partition(",")
    try:
        if not comma:
            raise argparse.ArgumentTypeError("")
        return range_arg(x), range_arg(y)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected X0:X1,Y0:Y1 (e.g. 0:8,0:8 for PE[0..7, "
                                         f"0..7]), got {abbreviate(text)!r}") from None


def trace_arg(args: argparse.Namespace) -> bool | Window:
    """What ``--trace`` and its window ask to record."""
    if not args.trace:
        return False
    if args.trace_cycles is None and args.trace_pes is None:
        return True
    x, y = args.trace_pes or (None, None)
    return Window(args.trace_cycles, x, y)


def seconds_arg(text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got "
                                         f"{abbreviate(text)!r}")
    return value


def write_npz(handle: IO[bytes], arrays: dict[str, np.ndarray]) -> None:
    """An ``.npz`` archive as :func:`numpy.savez` writes it (one ``NAME.npy`` member per
    array), built here because ``np.savez(f, **arrays)`` takes the names ``file`` and
    ``allow_pickle`` for its own parameters."""
    with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def write_outputs(path: str | Path, outputs: dict[str, np.ndarray]) -> None:
    write_atomically(path, lambda handle: write_npz(handle, outputs), "the outputs")


def internal_error_text(exc: BaseException) -> str:
    return f"internal error: {type(exc).__name__}: {exc}"


class Distinct:
    """The files a run writes, kept apart from every file it reads: those named on the
    command line at once, those a module names as soon as they are known."""

    def __init__(self, outputs: list[tuple[str | None, str]],
                 inputs: list[tuple[str | Path | None, str]]):
        self.outputs = [(output_path(p), what) for p, what in outputs if p]
        self.inputs = inputs
        self.collided = False
        self._check()

    def _check(self) -> None:
        try:
            check_distinct(self.outputs, self.inputs)
        except DtgError:
            self.collided = True
            raise

    def claim(self, path: Path, what: str) -> None:
        self.inputs.append((path, what))
        self._check()


def is_lair(args: argparse.Namespace) -> bool:
    return args.module != STDIN and Path(args.module).suffix == ".lair"


def read_inputs_of(args: argparse.Namespace) -> list[tuple[str | Path | None, str]]:
    """The files the command line names for reading (a module's own come later)."""
    lair = is_lair(args)
    mapping = args.mapping
    if lair and mapping is None:
        beside = Path(args.module).with_suffix(".map")
        mapping = beside if beside.exists() else None
    module = args.module if Path(args.module).is_file() else None
    return [(module, "the program" if lair else "the module"), (mapping, "the mapping"),
            (args.reference, "the reference program"), (args.inputs, "the inputs"),
            (args.config, "the fabric configuration")]


def simulate_args(args: argparse.Namespace, watch: Watcher | None = None,
                  claim: Claim | None = None) -> RunOutcome:
    """Load, simulate and compare as the arguments say."""
    config = chosen_fabric(args.fabric, args.config)

    def notice(text: str) -> None:
        if not args.quiet:
            print(f"pesim: {text}", file=sys.stderr, flush=True)

    if is_lair(args):
        params = dict(parse_param(p) for p in args.param)
        return run_program(args.module, mapping_path=args.mapping, params=params,
                           simd=not args.no_simd, arrival=args.arrival or "batched",
                           inputs_path=args.inputs,
                           seed=args.seed or 0, config=config, max_seconds=args.max_seconds,
                           watch=watch, trace=trace_arg(args), engine=args.engine,
                           notice=notice)
    return run_file(args.module, inputs_path=args.inputs, seed=args.seed or 0, config=config,
                    max_seconds=args.max_seconds, watch=watch, search=args.reference_dir,
                    trace=trace_arg(args), reference=args.reference, mapping=args.mapping,
                    claim=claim, engine=args.engine, notice=notice)


def check_usage(args: argparse.Namespace) -> None:
    if (args.trace_cycles or args.trace_pes) and not args.trace:
        raise UsageError("--trace-cycles and --trace-pes choose what --trace TRACE.json "
                         "keeps; add --trace")
    if args.inputs is not None and args.seed is not None:
        raise UsageError("--inputs and --seed exclude each other: the seed only makes "
                         "random inputs")
    if is_lair(args) and args.reference:
        raise UsageError("--reference names the reference program of a PE module; a .lair "
                         "program is its own reference")
    if not is_lair(args) and (args.param or args.no_simd or args.arrival):
        raise UsageError("--param, --no-simd and --arrival apply to a .lair program only (a "
                         "module's parameters are on its 'reference' and 'mapping' lines)")


def main(argv: Sequence[str] | None = None, *, prog: str = "pesim") -> int:
    def body() -> None:
        args = build_parser(prog).parse_args(argv)
        check_usage(args)
        outputs = [(args.report, "the report"), (args.outputs, "the outputs"),
                   (args.trace, "the trace"), (args.heatmap, "the heatmap")]
        for path, what in outputs:
            if path:
                check_new_file(path, what)
        distinct = Distinct(outputs, read_inputs_of(args))
        show = not args.quiet and sys.stderr.isatty()
        header = run_header(
            params=dict(parse_param(p) for p in args.param),
            seed=None if args.inputs else (args.seed or 0), inputs=args.inputs,
            fabric_preset=args.fabric, fabric_config=args.config,
            mapping=(args.mapping or str(Path(args.module).with_suffix(".map")))
            if is_lair(args) else args.mapping)
        try:
            with ProgressBar() as bar:
                outcome = simulate_args(args, bar.update if show else None, distinct.claim)
        except (Exception, KeyboardInterrupt) as exc:
            if not distinct.collided:
                write_failure(args, exc, header)
            raise
        if not is_lair(args) and outcome.mapping_path is not None:  # as its header names it
            header["mapping"] = str(outcome.mapping_path)
        report = build_report(outcome, header)
        wrote: list[str] = []
        if args.report:
            write_report(args.report, report)
            wrote.append(args.report)
        if args.outputs and outcome.result.complete:
            write_outputs(args.outputs, outcome.result.outputs)
            wrote.append(args.outputs)
        if args.trace and outcome.result.trace is not None:
            write_atomically(args.trace, outcome.result.trace.json(outcome.result.module,
                                                                   outcome.result.cycles),
                             "the trace")
            wrote.append(args.trace)
        if args.heatmap:
            draw_heatmap(outcome.result, args.heatmap, outcome.module)
            wrote.append(args.heatmap)
        print_summary(report, Console(file=sys.stdout))
        for path in wrote:
            print(f"wrote {path}")
        if not outcome.result.complete:
            written = " (the report is partial)" if args.report else ""
            unwritten = " and --outputs was not written" if args.outputs else ""
            raise Interrupted(f"stopped by Ctrl-C at cycle {outcome.result.end}; outputs "
                              f"were not compared{unwritten}{written}")
        if not outcome.comparison.verified:
            raise SimulationError(f"the outputs differ from the reference: "
                                  f"{outcome.comparison.mismatch}")

    return run_guarded(body)


def write_failure(args: argparse.Namespace, exc: BaseException, header: dict[str, Any]
                  ) -> None:
    """What a failed or interrupted run still writes: its trace up to the error, and
    its report, so that no older one survives (Ctrl-C in the event loop ends the run
    with a partial report instead)."""
    partial = getattr(exc, "partial_trace", None)
    if args.trace and partial is not None and partial[0] is not None:
        try:
            text = partial[0].json("stdin" if args.module == STDIN else Path(args.module).stem,
                                   partial[1])
            write_atomically(args.trace, text, "the trace")
            note = f"the trace up to cycle {partial[1]} was written to {args.trace}"
        except DtgError as failed:
            note = f"the trace was not written: {failed.message}"
        if isinstance(exc, DtgError):
            exc.notes = (*exc.notes, note)
    if not args.report:
        return
    text = (exc.format() if isinstance(exc, DtgError) else
            "interrupted by Ctrl-C before the simulation ended"
            if isinstance(exc, KeyboardInterrupt) else internal_error_text(exc))
    try:
        write_report(args.report, failure_report(args.module, text, header))
        print(f"wrote {args.report}")
    except DtgError as failed:
        if isinstance(exc, DtgError):
            exc.notes = (*exc.notes, f"the report was not written: {failed.message}")


if __name__ == "__main__":
    sys.exit(main())

"""``pesim``: simulate a PE module on the mesh and check it against its reference program.

    pesim MODULE.pe | OUTDIR | PROG.lair [-m MAP] [--param K=V] [--no-simd] [--arrival A]
          [--inputs IN.npz] [--outputs OUT.npz] [--seed N]
          [--fabric paper|wse2|wse3] [--config FABRIC.toml] [--report FILE.json]
          [--trace TRACE.json] [--heatmap PICTURE.png] [-I DIR] [--max-seconds S] [--quiet]

Exit status 0 only when every output matches the reference; 1 with a message for every
error (malformed PE code, missing files, wrong inputs, deadlock, cycle limit, mismatch);
130 when Ctrl-C stopped the simulation (the report then says so and holds what was
measured up to that cycle).
"""

from __future__ import annotations

import argparse
import math
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import numpy as np
from rich.console import Console

from dtg.lair.cli import ArgumentParser, UsageError, report_header, run_guarded
from dtg.lair.diagnostics import DtgError, Interrupted, SimulationError
from dtg.lair.files import check_new_file, write_atomically
from dtg.lair.limits import MAX_INT, MAX_SECONDS, abbreviate, literal_value, number_text
from dtg.lair.specialize import parse_param
from dtg.pesim.fabric import add_fabric_arguments, chosen_fabric
from dtg.pesim.heatmap import draw_heatmap
from dtg.pesim.progress import ProgressBar, Watcher
from dtg.pesim.report import build_report, failure_report, print_summary, write_report
from dtg.pesim.run import RunOutcome, run_file, run_program


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="pesim",
        description="Simulate a PE module (the text dtg-codegen emits) on a PE mesh, check "
                    "its outputs against the reference LAIR program and report cycles.")
    parser.add_argument("module", metavar="MODULE.pe|OUTDIR|PROG.lair",
                        help="a .pe module, a directory holding exactly one, or a LAIR "
                             "program to compile first")
    parser.add_argument("-m", "--mapping", metavar="MAP",
                        help="with PROG.lair: the mapping (default: the .map file beside it)")
    parser.add_argument("--param", action="append", default=[], metavar="K=V",
                        help="with PROG.lair: bind a size or type parameter")
    parser.add_argument("--no-simd", action="store_true",
                        help="with PROG.lair: compile without SIMD instructions")
    parser.add_argument("--arrival", choices=("batched", "per-wavelet"),
                        help="with PROG.lair: take input streams in batches where predicted "
                             "cheaper (batched, the default) or one task per wavelet "
                             "(per-wavelet, as in the paper)")
    parser.add_argument("-I", "--reference-dir", action="append", default=[], metavar="DIR",
                        help="with MODULE.pe: look for its reference program in DIR too, when "
                             "it is not where the module says (the module was moved); "
                             "repeatable, searched before $DTG_PATH")
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
    parser.add_argument("--heatmap", metavar="PICTURE.png",
                        help="draw busy cycles per PE and wavelets per link over the mesh")
    parser.add_argument("--max-seconds", type=seconds_arg, default=MAX_SECONDS, metavar="S",
                        help="stop a simulation that runs longer than S seconds of wall time "
                             "(default %(default)g)")
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


def simulate_args(args: argparse.Namespace, watch: Watcher | None = None) -> RunOutcome:
    """Load, simulate and compare as the arguments say."""
    config = chosen_fabric(args.fabric, args.config)
    if Path(args.module).suffix == ".lair":
        params = dict(parse_param(p) for p in args.param)
        return run_program(args.module, mapping_path=args.mapping, params=params,
                           simd=not args.no_simd, arrival=args.arrival or "batched",
                           inputs_path=args.inputs,
                           seed=args.seed or 0, config=config, max_seconds=args.max_seconds,
                           watch=watch, trace=bool(args.trace))
    if args.mapping or args.param or args.no_simd or args.arrival:
        raise UsageError("-m, --param, --no-simd and --arrival apply to a .lair program only")
    return run_file(args.module, inputs_path=args.inputs, seed=args.seed or 0, config=config,
                    max_seconds=args.max_seconds, watch=watch, search=args.reference_dir,
                    trace=bool(args.trace))


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> None:
        args = build_parser().parse_args(argv)
        if args.inputs is not None and args.seed is not None:
            raise UsageError("--inputs and --seed exclude each other: the seed only makes "
                             "random inputs")
        if args.report:
            check_new_file(args.report, "the report")
        for path, what in ((args.outputs, "the outputs"), (args.trace, "the trace"),
                           (args.heatmap, "the heatmap")):
            if path:
                check_new_file(path, what)
        show = not args.quiet and sys.stderr.isatty()
        lair = Path(args.module).suffix == ".lair"
        header = report_header(
            "pesim", params=dict(parse_param(p) for p in args.param),
            seed=None if args.inputs else (args.seed or 0), inputs=args.inputs,
            fabric_preset=args.fabric, fabric_config=args.config,
            mapping=(args.mapping or str(Path(args.module).with_suffix(".map"))) if lair
            else None)
        try:
            with ProgressBar() as bar:
                outcome = simulate_args(args, bar.update if show else None)
        except (Exception, KeyboardInterrupt) as exc:
            # a failed or interrupted run still writes its report, so no older one survives
            # (Ctrl-C in the event loop ends it with a partial report instead, below)
            partial = getattr(exc, "partial_trace", None)
            if args.trace and partial is not None and partial[0] is not None:
                try:
                    text = partial[0].json(Path(args.module).stem, partial[1])
                    write_atomically(args.trace, text, "the trace")
                    exc.notes = (*exc.notes, f"the trace up to cycle {partial[1]} was "  # type: ignore[union-attr]
                                 f"written to {args.trace}")
                except DtgError as failed:
                    exc.notes = (*exc.notes, f"the trace was not written: {failed.message}")  # type: ignore[union-attr]
            if args.report:
                text = (exc.format() if isinstance(exc, DtgError) else
                        "interrupted by Ctrl-C before the simulation ended"
                        if isinstance(exc, KeyboardInterrupt) else internal_error_text(exc))
                try:
                    write_report(args.report, failure_report(args.module, text, header))
                except DtgError as failed:
                    if isinstance(exc, DtgError):
                        exc.notes = (*exc.notes, f"the report was not written: {failed.message}")
            raise
        report = build_report(outcome, header)
        if args.report:
            write_report(args.report, report)
        if args.outputs and outcome.result.complete:
            write_outputs(args.outputs, outcome.result.outputs)
        if args.trace and outcome.result.trace is not None:
            write_atomically(args.trace, outcome.result.trace.json(outcome.result.module,
                                                                   outcome.result.cycles),
                             "the trace")
        if args.heatmap:
            draw_heatmap(outcome.result, args.heatmap)
        print_summary(report, Console(file=sys.stdout))
        if not outcome.result.complete:
            written = " (the report is partial)" if args.report else ""
            raise Interrupted(f"stopped by Ctrl-C at cycle {outcome.result.end}; outputs "
                              f"were not compared{written}")
        if not outcome.comparison.verified:
            raise SimulationError(f"the outputs differ from the reference: "
                                  f"{outcome.comparison.mismatch}")

    return run_guarded(body)


if __name__ == "__main__":
    sys.exit(main())

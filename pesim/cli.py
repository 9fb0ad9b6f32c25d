"""``pesim``: simulate a PE module on the mesh and check it against its reference program.

    pesim MODULE.pe | OUTDIR | PROG.lair [-m MAP] [--param K=V] [--no-simd]
          [--inputs IN.npz] [--outputs OUT.npz] [--seed N] [--config FABRIC.toml]
          [--report FILE.json]

Exit status 0 only when every output matches the reference; 1 with a message for every
error (malformed PE code, missing files, wrong inputs, deadlock, cycle limit, mismatch).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from lair.cli import ArgumentParser, UsageError, run_guarded
from lair.diagnostics import InputError, SimulationError
from lair.specialize import parse_param
from pesim.fabric import FabricConfig, load_config
from pesim.report import build_report, print_summary, write_report
from pesim.run import run_file, run_program


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
    parser.add_argument("--inputs", metavar="IN.npz",
                        help="input tensors by name (default: random integers from --seed)")
    parser.add_argument("--seed", type=int, default=None, metavar="N",
                        help="seed of the random integer-valued inputs (default 0)")
    parser.add_argument("--outputs", metavar="OUT.npz", help="write the simulated outputs")
    parser.add_argument("--config", metavar="FABRIC.toml",
                        help="override fabric settings (costs, sizes, cycle limit)")
    parser.add_argument("--report", metavar="FILE.json", help="write the JSON report")
    return parser


def write_outputs(path: str | Path, outputs: dict[str, np.ndarray]) -> None:
    savez: Any = np.savez  # numpy's stubs mistake tensor names for its keyword options
    try:
        with open(path, "wb") as f:
            savez(f, **outputs)
    except OSError as exc:
        raise InputError(f"cannot write the outputs {path}: {exc.strerror}") from None


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> None:
        args = build_parser().parse_args(argv)
        if args.inputs is not None and args.seed is not None:
            raise UsageError("--inputs and --seed exclude each other: the seed only makes "
                             "random inputs")
        config = load_config(args.config) if args.config else FabricConfig()
        if Path(args.module).suffix == ".lair":
            params = dict(parse_param(p) for p in args.param)
            outcome = run_program(args.module, mapping_path=args.mapping, params=params,
                                  simd=not args.no_simd, inputs_path=args.inputs,
                                  seed=args.seed or 0, config=config)
        else:
            if args.mapping or args.param or args.no_simd:
                raise UsageError("-m, --param and --no-simd apply to a .lair program only")
            outcome = run_file(args.module, inputs_path=args.inputs, seed=args.seed or 0,
                               config=config)
        report = build_report(outcome)
        if args.report:
            write_report(args.report, report)
        if args.outputs:
            write_outputs(args.outputs, outcome.result.outputs)
        print_summary(report, Console(file=sys.stdout, width=100))
        if not outcome.comparison.verified:
            raise SimulationError(f"the outputs differ from the reference: "
                                  f"{outcome.comparison.mismatch}")

    return run_guarded(body)


if __name__ == "__main__":
    sys.exit(main())

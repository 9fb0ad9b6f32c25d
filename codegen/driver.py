"""``dtg-codegen``: the compiler driver. Each stage is named; ``--emit`` stops there.

Stages so far: ``ast`` (the specialized LAIR program), ``isl`` (instance sets and
access relations), ``mapping`` (the validated mapping). Later stages (tasks, memory,
simd, code) are not implemented yet and are not offered.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from lair.diagnostics import DtgError, InputError
from lair.frontend import Program, load_program
from lair.printer import format_module
from lair.specialize import Binding, parse_param
from mapping.spec import parse_mapping_file
from mapping.validate import Mapping, validate_mapping

STAGES = ("ast", "isl", "mapping")
NEEDS_MAPPING = {"mapping"}


class UsageError(DtgError):
    """Bad command-line arguments."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}\n{self.format_usage().rstrip()}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dtg-codegen",
        description="Compile a LAIR program and a mapping into per-PE code (stages so far: "
                    + ", ".join(STAGES) + ").",
    )
    parser.add_argument("program", help="the .lair file")
    parser.add_argument("-m", "--mapping", metavar="MAP",
                        help="the mapping spec (default: the .map file beside the program)")
    parser.add_argument("--param", action="append", default=[], metavar="K=V",
                        help="bind a size or type parameter, e.g. --param M=32 (repeatable)")
    parser.add_argument("--emit", choices=STAGES, default=STAGES[-1],
                        help="stop after this stage and print its result (default: %(default)s)")
    return parser


def default_mapping_path(program: str | Path) -> Path:
    return Path(program).with_suffix(".map")


def load_mapping(program: Program, program_path: str | Path, mapping_path: str | None
                 ) -> Mapping:
    path = Path(mapping_path) if mapping_path else default_mapping_path(program_path)
    if mapping_path is None and not path.exists():
        raise InputError(f"no mapping for {program_path}: expected {path} beside it, "
                         "or name one with -m FILE")
    return validate_mapping(parse_mapping_file(path), program.model)


def compile_to(stage: str, program_path: str, mapping_path: str | None,
               params: dict[str, Binding]) -> str:
    """Run the pipeline up to ``stage`` and return that stage's printed form."""
    program = load_program(program_path, params)
    if stage == "ast":
        return format_module(program.specialized)
    if stage == "isl":
        return program.model.format()
    mapping = load_mapping(program, program_path, mapping_path)
    return mapping.format()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        params = dict(parse_param(p) for p in args.param)
        output = compile_to(args.emit, args.program, args.mapping, params)
    except DtgError as err:
        print(err.format(), file=sys.stderr)
        return 1
    sys.stdout.write(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())

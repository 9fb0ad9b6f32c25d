"""``dtg-codegen``: the compiler driver. Each stage is named; ``--emit`` stops there.

Stages: ``ast`` (the specialized LAIR program), ``isl`` (instance sets and access
relations), ``mapping`` (the validated mapping), ``tasks`` (the task graph of §4.2),
``memory`` (local arrays, §4.3), ``simd`` (the SIMD decision of every task, §5) and
``code`` (the PE module, the default).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from codegen import peprint
from codegen.batching import ARRIVAL_MODES
from codegen.pipeline import STAGES, Compilation, compile_mapping
from codegen.report import compile_report
from lair.cli import ArgumentParser, run_guarded
from lair.diagnostics import InputError
from lair.files import check_writable_target, write_atomically
from lair.frontend import Program, load_program
from lair.printer import format_module
from lair.specialize import Binding, parse_param
from mapping.spec import parse_mapping_file
from mapping.validate import Mapping, validate_mapping
from pesim.fabric import FabricConfig, add_fabric_arguments, chosen_fabric


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="dtg-codegen",
        description="Compile a LAIR program and a mapping into per-PE code.",
    )
    parser.add_argument("program", help="the .lair file")
    parser.add_argument("-m", "--mapping", metavar="MAP",
                        help="the mapping spec (default: the .map file beside the program)")
    parser.add_argument("--param", action="append", default=[], metavar="K=V",
                        help="bind a size or type parameter, e.g. --param M=32 (repeatable)")
    parser.add_argument("--emit", choices=STAGES, default=STAGES[-1],
                        help="stop after this stage and print its result (default: %(default)s)")
    parser.add_argument("-o", "--output", metavar="OUTDIR",
                        help="write the PE module to OUTDIR/<program>.pe instead of printing it")
    parser.add_argument("--no-simd", action="store_true",
                        help="generate scalar loops only (no SIMD instructions)")
    parser.add_argument("--arrival", choices=ARRIVAL_MODES, default=ARRIVAL_MODES[0],
                        help="batched: take input streams in batches of wavelets where the "
                             "cost model predicts a gain; per-wavelet: one task per arriving "
                             "wavelet, as in the paper (default: %(default)s)")
    parser.add_argument("--report", metavar="FILE.json",
                        help="write the compile report (data flows, tasks, SIMD decisions, memory, "
                             "the mapping's lower bound on cycles) as JSON")
    add_fabric_arguments(parser)
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


def compile_file(program_path: str | Path, mapping_path: str | None = None,
                 params: dict[str, Binding] | None = None, *, stop: str = "code",
                 simd: bool = True, outdir: str | Path | None = None,
                 arrival: str = ARRIVAL_MODES[0], fabric: FabricConfig | None = None
                 ) -> Compilation:
    """Front end and back end of one program, as ``dtg-codegen`` runs them, choosing by
    the costs of ``fabric`` (default: the paper preset)."""
    params = params or {}
    program = load_program(program_path, params)
    mapping = load_mapping(program, program_path, mapping_path)
    here = Path(outdir) if outdir is not None else Path(program_path).parent
    reference = os.path.relpath(Path(program_path).resolve(), here.resolve())
    stem = Path(program_path).stem
    name = stem if stem.isidentifier() else "m_" + re.sub(r"\W", "_", stem)
    return compile_mapping(program, mapping, stop=stop, simd=simd, name=name,
                           reference=reference, params=tuple(params.items()), arrival=arrival,
                           fabric=fabric)


def _stage_text(stage: str, c: Compilation) -> str:
    if stage == "mapping":
        return c.mapping.format()
    if stage == "tasks":
        assert c.tasks is not None
        return c.tasks.format()
    if stage == "memory":
        assert c.memory is not None
        return c.memory.format()
    if stage == "simd":
        lines = []
        for task, d in (c.decisions or {}).items():
            head = f"{task}: {'SIMD' if d.used else 'scalar'} ({d.reason})"
            if d.used:
                head += f", case {d.case}, {d.op} {list(d.sizes or ())}"
            lines.append(head)
            if d.compression is not None:
                lines.append(f"  compression: {d.compression}")
        for flow, candidates in (c.arrivals.candidates if c.arrivals else ()):
            batch = c.arrivals.of(flow) if c.arrivals else None
            chosen = f"batches of {batch.size}" if batch else "one task per wavelet"
            lines.append(f"arrivals of {flow}: {chosen}")
            for cand in candidates:
                size = "per wavelet" if cand.size is None else f"batch {cand.size}"
                cycles = "-" if cand.cycles is None else f"{cand.cycles} cycles"
                lines.append(f"  {size}: {cycles} ({cand.note})")
            for task, d in (batch.decisions if batch else ()):
                lines.append(f"  {task} per batch: {'SIMD' if d.used else 'scalar'} ({d.reason})"
                             f", case {d.case}, {d.op} {list(d.sizes or ())}")
        return "\n".join(lines) + "\n"
    assert c.module is not None
    return peprint.module(c.module)


def check_output_dir(path: str) -> Path:
    """The directory of ``-o``, checked before compiling: missing (it will be created) or
    a directory; anything else there is an error."""
    target = Path(path)
    if (target.exists() or target.is_symlink()) and not target.is_dir():
        raise InputError(f"-o {path}: not a directory; -o names the directory to write the "
                         "PE module into")
    return target


def make_output_dir(target: Path) -> Path:
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"-o {target}: cannot create the directory: {exc.strerror}") from None
    return target


def run(args: argparse.Namespace) -> str:
    params = dict(parse_param(p) for p in args.param)
    program = load_program(args.program, params)
    if args.emit == "ast":
        return format_module(program.specialized)
    if args.emit == "isl":
        return program.model.format()
    if args.output:
        check_output_dir(args.output)
    fabric = chosen_fabric(args.fabric, args.config)
    c = compile_file(args.program, args.mapping, params, stop=args.emit, simd=not args.no_simd,
                     outdir=args.output, arrival=args.arrival, fabric=fabric)
    text = _stage_text(args.emit, c)
    # everything is computed before anything is written; each file is written whole
    target = None
    if args.output and args.emit == "code":
        target = make_output_dir(check_output_dir(args.output)) / f"{Path(args.program).stem}.pe"
        check_writable_target(target, "the PE module")
    if args.report:
        check_writable_target(args.report, "the report")
    if args.report and c.tasks is not None:
        write_atomically(args.report, json.dumps(compile_report(c), indent=2) + "\n",
                         "the report")
    if target is not None:
        write_atomically(target, text, "the PE module")
        return f"wrote {target} ({c.seconds * 1000:.1f} ms)\n"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> None:
        sys.stdout.write(run(build_parser().parse_args(argv)))

    return run_guarded(body)


if __name__ == "__main__":
    sys.exit(main())

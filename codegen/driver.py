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
from dataclasses import replace
from pathlib import Path
from typing import Any

from dtg.codegen.batching import ARRIVAL_MODES
from dtg.codegen.bound import mapping_bound
from dtg.codegen.pipeline import STAGES, Compilation, compile_mapping
from dtg.codegen.report import compile_report, program_report
from dtg.errors import CompilerBug, DtgError, InputError, LimitError, MappingError
from dtg.lair import ast
from dtg.lair.cli import ArgumentParser, report_header, run_guarded
from dtg.lair.files import (
    check_distinct,
    check_new_file,
    check_writable_target,
    output_path,
    write_atomically,
)
from dtg.lair.frontend import Program, from_source
from dtg.lair.limits import MAX_INPUT_BYTES
from dtg.lair.parser import parse, parse_file
from dtg.lair.printer import format_module
from dtg.lair.specialize import Binding, parse_param
from dtg.mapping.binding import bound_mapping, program_parameters, split_params
from dtg.mapping.direction import Tiling, candidates
from dtg.mapping.spec import MappingSpec, parse_mapping_file
from dtg.mapping.validate import Mapping, validate_mapping
from dtg.pe import printer as peprint
from dtg.pe.fabric import FabricConfig, add_fabric_arguments, chosen_fabric


def build_parser(prog: str = "dtg-codegen") -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog=prog,
        description="Compile a LAIR program and a mapping into per-PE code.",
    )
    parser.add_argument("program", help="the .lair file, or - to read it from standard input "
                                            "(then -m is needed)")
    parser.add_argument("-m", "--mapping", metavar="MAP",
                        help="the mapping spec (default: the .map file beside the program)")
    parser.add_argument("--param", action="append", default=[], metavar="K=V",
                        help="bind a size or type parameter of the program or a parameter of the "
                             "mapping, e.g. --param M=32 (repeatable)")
    parser.add_argument("--emit", choices=STAGES, default=STAGES[-1],
                        help="stop after this stage and print its result (default: %(default)s)")
    parser.add_argument("-o", "--output", metavar="FILE|DIR|-",
                        help="write the output to FILE or into DIR as DIR/<program>.pe "
                             "instead of printing it (- prints it): an existing directory, "
                             "also one reached through a symbolic link, or a name ending in "
                             "/ is a directory; an existing file or a name with a suffix "
                             "(k14.v2 too) is a file, but never a symbolic link or one of "
                             "the command's inputs; any other name is a directory to make")
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


def mapping_file(program_path: str | Path, mapping_path: str | Path | None) -> Path:
    path = Path(mapping_path) if mapping_path else default_mapping_path(program_path)
    if mapping_path is None and not path.exists():
        raise InputError(f"no mapping for {program_path}: expected {path} beside it, "
                         "or name one with -m FILE")
    return path


def load_both(source: ast.Module, spec: MappingSpec | None, params: dict[str, Binding],
              fabric: FabricConfig | None = None) -> tuple[Program, Mapping | None]:
    """The program and its validated mapping, each given the parameters it declares
    (a name neither declares is an error); without a spec, all go to the program. A
    direction-only placement gets its best-ranked tiling (by ``fabric``'s costs)."""
    program, choices = load_choices(source, spec, params, fabric)
    return program, choices[0][0][0] if choices else None


Group = list[tuple[Mapping, Tiling | None]]
"""Candidates that rank the same: simulation decides between them."""


def load_choices(source: ast.Module, spec: MappingSpec | None, params: dict[str, Binding],
                 fabric: FabricConfig | None = None) -> tuple[Program, list[Group]]:
    """As :func:`load_both`, with every tiling of a direction-only placement that
    validates, in groups of equal rank, best first (one mapping otherwise)."""
    if spec is None:
        return from_source(source, params), []
    for_program, _ = split_params(source, spec, params)
    program = from_source(source, for_program)
    bound = bound_mapping(source, spec, params)
    if not bound.direction:
        return program, [[(validate_mapping(bound, program.model), None)]]
    model = program.model
    ranked = candidates(bound, model,
                        lambda m: mapping_bound(model, m, fabric or FabricConfig()).cycles)
    groups: list[Group] = []
    for k, choice in enumerate(ranked):
        if k and choice.rank == ranked[k - 1].rank:
            groups[-1].append((choice.mapping, choice.tiling))
        else:
            groups.append([(choice.mapping, choice.tiling)])
    return program, groups


def compile_choices(program: Program, groups: list[Group], *, mapping_file: str | None = None,
                    mapping_params: Sequence[tuple[str, int]] = (), **options: Any
                    ) -> Compilation:
    """Compile with the best mapping the back end can realize: a written mapping as it
    is; for a direction-only placement, the group of best rank of which any compiles,
    and in it the tiling that simulates fastest (random integer inputs, seed 0). The
    first error when nothing compiles. The module names ``mapping_file`` (relative to
    where it goes) with ``mapping_params`` and the tiling chosen, so that pesim can
    derive its bound."""
    compiled, tiling = _best_choice(program, groups, **options)
    if compiled.module is None or mapping_file is None:
        return compiled
    chosen = tuple(tiling.values().items()) if tiling is not None and tiling.per is None else ()
    return replace(compiled, module=replace(compiled.module, mapping=mapping_file,
                                            mapping_params=(*mapping_params, *chosen)))


def _best_choice(program: Program, groups: list[Group], **options: Any
                 ) -> tuple[Compilation, Tiling | None]:
    first: DtgError | None = None
    for group in groups:
        compiled: list[tuple[Compilation, Tiling | None]] = []
        for mapping, tiling in group:
            try:
                compiled.append((compile_mapping(program, mapping, **options), tiling))
            except DtgError as err:
                if len(groups) == 1 and len(group) == 1:
                    raise
                first = first or err
        if len(compiled) == 1 or (compiled and options.get("stop", "code") != "code"):
            return compiled[0]
        if compiled:
            try:
                return min(compiled, key=lambda ct: _simulated_cycles(ct[0]))
            except DtgError as err:  # (a mesh too large to simulate, say)
                chosen = compiled[0][0].mapping
                raise MappingError(
                    f"{len(compiled)} tilings of the placement direction tie on the bound, and "
                    f"choosing one means simulating them, which failed: {err.message}",
                    chosen.loc_of("placement"), notes=(
                        "write the placement with its tiles instead, e.g. the first of them: "
                        "placement { " + "; ".join(str(m).strip("{} ") for _, m in
                                                   chosen.placement) + " }",)) from None
    assert first is not None
    raise first


def _simulated_cycles(c: Compilation) -> int:
    """Cycles of a compiled module on random integer inputs (to choose a tiling)."""
    from dtg.pesim.run import make_inputs, run_module

    assert c.module is not None
    outcome = run_module(c.module, c.program, make_inputs(c.program), config=c.fabric)
    if not outcome.comparison.verified:  # (never: the compiler computes the program)
        raise CompilerBug(f"a candidate tiling computes something else: "
                                    f"{outcome.comparison.mismatch}")
    return outcome.result.cycles
STDIN = "-"
"""The program argument that reads the program from standard input."""


def read_program(program: str | Path) -> ast.Module:
    """The parsed program of a file, or of standard input for ``-``."""
    if str(program) != STDIN:
        return parse_file(program)
    text = sys.stdin.read(MAX_INPUT_BYTES + 1)
    if len(text) > MAX_INPUT_BYTES:
        raise LimitError(f"the program on standard input has more than {MAX_INPUT_BYTES} "
                         "characters, the limit")
    return parse(text, "<stdin>")


def compile_file(program_path: str | Path, mapping_path: str | Path | None = None,
                 params: dict[str, Binding] | None = None, *, stop: str = "code",
                 simd: bool = True, outdir: str | Path | None = None,
                 arrival: str = ARRIVAL_MODES[0], fabric: FabricConfig | None = None,
                 source: ast.Module | None = None) -> Compilation:
    """Front end and back end of one program, as ``dtg-codegen`` runs them, choosing by
    the costs of ``fabric`` (default: the paper preset). ``params`` binds the sizes of
    the program and the parameters of the mapping; ``source`` is the program when it
    was parsed already (read from standard input: then the module names no reference
    program). The module names its program and mapping relative to ``outdir`` (default:
    beside the program; the working directory for standard input)."""
    params = params or {}
    if str(program_path) == STDIN and mapping_path is None:
        raise InputError("a program read from standard input needs its mapping: -m FILE.map")
    if source is None:
        source = read_program(program_path)
    map_path = mapping_file(program_path, mapping_path)
    spec = parse_mapping_file(map_path)
    program, groups = load_choices(source, spec, params, fabric)
    for_program, for_mapping = split_params(source, spec, params)
    stdin = str(program_path) == STDIN
    here = (Path(outdir) if outdir is not None else Path.cwd() if stdin
            else Path(program_path).parent)
    reference = None if stdin else relative_to(program_path, here)
    stem = "stdin" if stdin else Path(program_path).stem
    name = stem if stem.isidentifier() else "m_" + re.sub(r"\W", "_", stem)
    return compile_choices(program, groups, stop=stop, simd=simd, name=name,
                           reference=reference, params=tuple(for_program.items()),
                           arrival=arrival, fabric=fabric,
                           mapping_file=relative_to(map_path, here),
                           mapping_params=tuple(for_mapping.items()))


def relative_to(path: str | Path, here: str | Path) -> str:
    """``path`` as the module at ``here`` names it: relative to that directory."""
    return os.path.relpath(Path(path).resolve(), Path(here).resolve())


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
            chosen = batch.describe() if batch else "one task per wavelet"
            lines.append(f"arrivals of {flow}: {chosen}")
            for cand in candidates:
                size = "per wavelet" if cand.size is None else f"batch {cand.size}" + (
                    f" x {cand.groups} groups" if cand.groups is not None else "")
                cycles = "-" if cand.cycles is None else f"{cand.cycles} cycles"
                lines.append(f"  {size}: {cycles} ({cand.note})")
            for task, d in (batch.decisions if batch else ()):
                lines.append(f"  {task} per batch: {'SIMD' if d.used else 'scalar'} ({d.reason})"
                             f", case {d.case}, {d.op} {list(d.sizes or ())}")
        return "\n".join(lines) + "\n"
    assert c.module is not None
    return peprint.module(c.module)


def output_target(path: str, program: str, stage: str = "code") -> Path | None:
    """Where ``-o`` writes, checked before compiling: nothing for ``-`` (standard
    output); into a directory where ``path`` is one (through a link too) or ends in a
    separator; the file itself where it exists or has a suffix; otherwise into a
    directory made for it: ``<program>.pe`` (``<program>.<stage>.txt`` for the other
    stages)."""
    if path == "-":
        return None
    target = Path(path)
    what = f"the output of --emit={stage}"
    if not (path.endswith(os.sep) or target.is_dir()) and (
            target.suffix or target.is_symlink() or target.exists()):
        return check_writable_target(target, what)  # a file, made or replaced
    stem = "stdin" if program == STDIN else Path(program).stem
    return check_writable_target(
        target / (f"{stem}.pe" if stage == "code" else f"{stem}.{stage}.txt"), what)


def make_parent(target: Path) -> Path:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"-o {target.parent}: cannot create the directory: {exc.strerror}"
                         ) from None
    return target


def run(args: argparse.Namespace) -> str:
    params = dict(parse_param(p) for p in args.param)
    if args.program == STDIN and not args.mapping:
        raise InputError("a program read from standard input needs its mapping: -m FILE.map")
    path = Path(args.mapping) if args.mapping else default_mapping_path(args.program)
    target = output_target(args.output, args.program, args.emit) if args.output else None
    check_distinct([(output_path(target), f"the output of --emit={args.emit}"),
                    (output_path(args.report), "the report")],
                   [(args.program, "the program"),
                    (path if args.mapping or path.exists() else None, "the mapping"),
                    (args.config, "the fabric configuration")])
    source = read_program(args.program)
    # the mapping may bind parameters too; the stages before it read it only for that
    early = args.emit in ("ast", "isl") and set(params) <= program_parameters(source)
    spec = (parse_mapping_file(path) if (args.mapping or path.exists()) and not early
            else None)
    for_program = params if spec is None else split_params(source, spec, params)[0]
    program = from_source(source, for_program)
    if args.report:  # (it may go into the directory -o makes)
        made = target is not None and Path(args.report).parent.resolve() == \
            target.parent.resolve()
        (check_writable_target if made else check_new_file)(args.report, "the report")
    header = report_header("dtg-codegen", stage=args.emit, params=params,
                           mapping=str(path) if args.mapping or path.exists() else None,
                           fabric_preset=args.fabric, fabric_config=args.config,
                           simd=not args.no_simd, arrival=args.arrival)
    if args.emit in ("ast", "isl"):
        text = (format_module(program.specialized) if args.emit == "ast"
                else program.model.format())
        return _write(args, target, text, {**header, **program_report(program)}, None)
    fabric = chosen_fabric(args.fabric, args.config)
    c = compile_file(args.program, args.mapping, params, stop=args.emit, simd=not args.no_simd,
                     outdir=target.parent if target is not None else Path.cwd(),
                     arrival=args.arrival, fabric=fabric, source=source)
    if spec is not None and spec.direction:  # say what was chosen (--emit=mapping shows it)
        for name, rel in c.mapping.placement:
            print(f"note: placement direction: {name} placed as {rel}", file=sys.stderr)
    return _write(args, target, _stage_text(args.emit, c), compile_report(c, header), c)


def _write(args: argparse.Namespace, target: Path | None, text: str, report: dict[str, Any],
           c: Compilation | None) -> str:
    """Write the report and the stage's text (to ``target``, or return it for standard
    output); everything was computed before, and each file is written whole."""
    if target is not None:
        make_parent(target)  # (the report may go into the same new directory)
    if args.report:
        write_atomically(args.report, json.dumps(report, indent=2) + "\n", "the report")
    if target is None:
        return text
    write_atomically(target, text, f"the output of --emit={args.emit}")
    took = f" ({c.seconds * 1000:.1f} ms)" if c is not None else ""
    return f"wrote {target}{took}\n"


def main(argv: Sequence[str] | None = None, *, prog: str = "dtg-codegen") -> int:
    def body() -> None:
        sys.stdout.write(run(build_parser(prog).parse_args(argv)))

    return run_guarded(body)


if __name__ == "__main__":
    sys.exit(main())

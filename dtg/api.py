"""The Python API: compile a LAIR program with a mapping, simulate what was compiled.

Both functions do what the command-line tools do (``dtg-codegen``, ``pesim``), with
the same checks and the same errors: every problem raises a subclass of
:class:`dtg.DtgError` whose text names the file, line and column.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dtg.codegen.bound import Bound, mapping_bound
from dtg.codegen.driver import compile_choices, load_choices
from dtg.codegen.pipeline import Compilation
from dtg.errors import InputError
from dtg.lair.files import write_atomically
from dtg.lair.frontend import Program, load_program, program_from_text
from dtg.lair.interp import check_inputs
from dtg.lair.limits import MAX_SECONDS
from dtg.lair.parser import parse, parse_file
from dtg.mapping.binding import split_params
from dtg.mapping.direction import TILE_PARAMETERS
from dtg.mapping.spec import MappingSpec, parse_mapping, parse_mapping_file
from dtg.pe.fabric import PRESETS, FabricConfig, preset
from dtg.pe.ir import PeModule
from dtg.pe.parser import parse_module_text
from dtg.pe.printer import module as print_module
from dtg.pesim.engines import check_budget, check_engine, prepare
from dtg.pesim.heatmap import draw_heatmap
from dtg.pesim.report import build_report, run_header
from dtg.pesim.run import RunOutcome, make_inputs, run_file, run_module
from dtg.pesim.sim import PeStats
from dtg.pesim.trace import Trace, Window
from dtg.pesim.verify import verify_module

if TYPE_CHECKING:
    from dtg.mapping.network import NetworkPlan

Source = str | os.PathLike[str]
Params = Mapping[str, int | str]


def _is_text(source: Source) -> bool:
    """A string with a line break is source text; anything else names a file."""
    return isinstance(source, str) and "\n" in source


def _fabric(fabric: str | FabricConfig | None) -> FabricConfig:
    if fabric is None:
        return FabricConfig()
    return fabric if isinstance(fabric, FabricConfig) else preset(fabric)


def load(program: Source, params: Params | None = None) -> Program:
    """A LAIR program from a file or from text, specialized with ``params`` (the front
    end only: no mapping)."""
    bound = dict(params or {})
    if _is_text(program):
        return program_from_text(str(program), bound, "<program>")
    return load_program(Path(program), bound)


def _mapping_spec(program: Source, mapping: Source | None) -> tuple[MappingSpec, Path | None]:
    """The mapping's spec, and its file (None for text)."""
    if mapping is None:
        if _is_text(program):
            raise InputError("a program given as text needs its mapping: "
                             "dtg.compile(text, mapping=...)")
        beside = Path(program).with_suffix(".map")
        if not beside.exists():
            raise InputError(f"no mapping for {program}: expected {beside} beside it, or pass "
                             "mapping=...")
        return parse_mapping_file(beside), beside
    if _is_text(mapping):
        return parse_mapping(str(mapping), "<mapping>"), None
    return parse_mapping_file(Path(mapping)), Path(mapping)


def compile(program: Source, mapping: Source | None = None, *, params: Params | None = None,
            simd: bool = True, arrival: str = "batched",
            fabric: str | FabricConfig | None = None) -> Compilation:
    """Compile ``program`` (a ``.lair`` path or LAIR text) with ``mapping`` (a ``.map``
    path or text; default: the ``.map`` beside the program) into a PE module.

    ``fabric`` is a preset name (``"paper"``, ``"wse2"``, ``"wse3"``) or a
    :class:`FabricConfig`: its costs, memory, SIMD configurations and colors are what the
    compiler plans with. The result's ``module`` is the PE module; :func:`module_text`
    prints it. The module names the program and the mapping files by absolute path
    (a text names none), with the parameters each was given.
    """
    bound = dict(params or {})
    source = (parse(str(program), "<program>") if _is_text(program)
              else parse_file(Path(program)))
    chosen = _fabric(fabric)
    spec, spec_file = _mapping_spec(program, mapping)
    loaded, groups = load_choices(source, spec, bound, chosen)
    for_program, for_mapping = split_params(source, spec, bound)
    reference = None if _is_text(program) else str(Path(program).resolve())
    stem = "program" if _is_text(program) else Path(program).stem
    name = stem if stem.isidentifier() else "m_" + re.sub(r"\W", "_", stem)
    return compile_choices(loaded, groups, simd=simd, name=name, reference=reference,
                           params=tuple(for_program.items()), arrival=arrival, fabric=chosen,
                           mapping_file=None if spec_file is None else str(spec_file.resolve()),
                           mapping_params=tuple(for_mapping.items()))


def module_text(compilation: Compilation) -> str:
    """The PE module of a compilation as ``dtg-codegen`` prints it."""
    if compilation.module is None:
        raise InputError("this compilation stopped before code was generated")
    return print_module(compilation.module)


@dataclass(frozen=True)
class Result:
    """One simulated and verified run.

    ``cycles`` is the span from the first PE's start to the last output; ``bound`` the
    mapping's lower bound on cycles (when a program was compiled, else None);
    ``verified`` whether every output equals the reference interpreter's (``exact``: bit
    for bit, as integer-valued inputs allow). ``pes`` and ``links`` are the per-PE
    statistics and the wavelets carried by each directed link.
    """

    outcome: RunOutcome
    header: dict[str, Any] = field(default_factory=dict)  # how the run was asked for

    @property
    def cycles(self) -> int:
        return self.outcome.result.cycles

    @property
    def bound(self) -> Bound | None:
        return self.outcome.bound

    @property
    def ratio(self) -> float | None:
        """Cycles over the mapping's bound: how close the code runs to what the mapping
        allows (1.0 is the bound)."""
        b = self.outcome.bound
        return None if b is None or not b.cycles else self.cycles / b.cycles

    @property
    def verified(self) -> bool:
        return self.outcome.comparison.verified

    @property
    def exact(self) -> bool:
        return self.outcome.comparison.exact

    @property
    def mismatch(self) -> str | None:
        return self.outcome.comparison.mismatch

    @property
    def outputs(self) -> dict[str, np.ndarray]:
        return self.outcome.result.outputs

    @property
    def expected(self) -> dict[str, np.ndarray]:
        return self.outcome.expected

    @property
    def inputs(self) -> dict[str, np.ndarray]:
        return self.outcome.inputs

    @property
    def pes(self) -> dict[tuple[int, int], PeStats]:
        return self.outcome.result.pes

    @property
    def links(self) -> dict[tuple[tuple[int, int], tuple[int, int]], int]:
        return self.outcome.result.links

    @property
    def trace(self) -> Trace | None:
        """The timeline, when simulated with ``trace=True``."""
        return self.outcome.result.trace

    def report(self) -> dict[str, Any]:
        """The JSON report ``pesim --report`` writes, as a dict (the same fields)."""
        return build_report(self.outcome, self.header)

    def write_trace(self, path: str | os.PathLike[str]) -> None:
        """The timeline as a Chrome/Perfetto trace (JSON; open it in ui.perfetto.dev)."""
        if self.trace is None:
            raise InputError("this run was not traced: simulate(..., trace=True)")
        write_atomically(path, self.trace.json(self.outcome.result.module, self.cycles),
                         "the trace")

    def write_heatmap(self, path: str | os.PathLike[str]) -> None:
        """A picture of busy cycles per PE and wavelets per link (PNG)."""
        draw_heatmap(self.outcome.result, path, self.outcome.module)


def simulate(what: Compilation | Source, *, inputs: Mapping[str, np.ndarray] | None = None,
             seed: int = 0, trace: bool | Window = False, fabric: str | FabricConfig | None = None,
             max_seconds: float = MAX_SECONDS, engine: str = "auto") -> Result:
    """Simulate a compilation (or a ``.pe`` module file) and check every output against
    the reference interpreter.

    ``inputs`` maps input tensor names to arrays (default: random integers from
    ``seed``, which make the comparison exact). ``trace`` records every PE's timeline
    (``Result.trace``, written by ``Result.write_trace``). ``fabric`` defaults to the one
    the compilation was planned for. ``engine``: ``"fast"`` (compiled with numba),
    ``"simpy"`` (the reference) or ``"auto"`` (fast where it can); the figures are the
    same, ``Result.report()["engine"]`` says which ran and ``"engine_note"`` why not the
    one asked for.
    """
    check_engine(engine)
    given = None if inputs is None else "<arrays>"
    if isinstance(what, Compilation):
        outcome = _simulate_compilation(what, inputs, seed, fabric, max_seconds, trace, engine)
        mapping: str | None = what.mapping.file
    else:
        config = None if fabric is None else _fabric(fabric)
        outcome = run_file(Path(what), inputs=inputs, seed=seed, config=config,
                           max_seconds=max_seconds, trace=trace, engine=engine)
        mapping = None if outcome.mapping_path is None else str(outcome.mapping_path)
    module = outcome.module
    params = {**dict(module.params), **{k: v for k, v in module.mapping_params
                                        if k not in TILE_PARAMETERS}}
    header = run_header(params=params, seed=seed if inputs is None else None, inputs=given,
                        fabric_preset=_preset_name(fabric, outcome.result.config),
                        fabric_config=None, mapping=mapping)
    return Result(outcome, header)


def _preset_name(fabric: str | FabricConfig | None, config: FabricConfig) -> str | None:
    """The name of the preset the run's fabric is (None for one of the caller's own)."""
    if isinstance(fabric, str):
        return fabric
    return next((name for name, preset_config in PRESETS.items() if preset_config == config),
                None)


def _inputs(program: Program, inputs: Mapping[str, np.ndarray] | None, seed: int
            ) -> dict[str, np.ndarray]:
    if inputs is None:
        return make_inputs(program, seed=seed)
    return check_inputs(program.graph, {k: np.asarray(v) for k, v in inputs.items()})


def _simulate_compilation(c: Compilation, inputs: Mapping[str, np.ndarray] | None, seed: int,
                          fabric: str | FabricConfig | None, max_seconds: float,
                          trace: bool | Window = False, engine: str = "auto") -> RunOutcome:
    config = c.fabric if fabric is None else _fabric(fabric)
    # simulate exactly the text dtg-codegen prints, parsed again as a file would be
    module: PeModule
    module, locations = parse_module_text(module_text(c), f"<{c.module.name}.pe>"
                                          if c.module else "<module>")
    check_budget(module, locations, engine=engine)
    prepare(module, engine)
    verify_module(module, config, locations=locations)
    data = _inputs(c.program, inputs, seed)
    outcome = run_module(module, c.program, data, config=config, max_seconds=max_seconds,
                         trace=trace, engine=engine)
    bound = mapping_bound(c.program.model, c.mapping, config,
                          data={**outcome.inputs, **outcome.expected})
    written = None if c.mapping.file.startswith("<") else Path(c.mapping.file).resolve()
    return RunOutcome(outcome.module, None, None, outcome.inputs, outcome.expected,
                      outcome.result, outcome.comparison, bound, written)


def place(program: Source, wafer: tuple[int, int], *, streams: Sequence[str],
          params: Params | None = None) -> NetworkPlan:
    """A network plan for ``program``'s layers on ``wafer`` (columns, rows), as ``dtg
    place`` chooses it; ``streams`` names the inputs that stream in (docs/networks.md)."""
    from dtg.errors import InputError
    from dtg.lair.limits import MAX_PES
    from dtg.mapping.netplace import place as place_layers

    if isinstance(streams, str) or not all(isinstance(n, str) for n in streams):
        raise InputError(f"streams must be a list of tensor names, not {streams!r}")
    if not (isinstance(wafer, tuple | list) and len(wafer) == 2 and
            all(isinstance(n, int) and n > 0 for n in wafer) and wafer[0] * wafer[1] <= MAX_PES):
        raise InputError(f"wafer must be (columns, rows), positive, at most {MAX_PES} PEs in "
                         f"all, not {wafer!r}")
    return place_layers(load(program, params).graph, (wafer[0], wafer[1]), tuple(streams))


def link(program: Source, plan: NetworkPlan | Source, *, params: Params | None = None) -> str:
    """The mapping text that puts every layer of ``program`` on its region of ``plan``
    (a plan, or a ``.net`` file or text), checked against the program: give it to
    :func:`compile` to build the whole network as one module."""
    from dtg.mapping.netplace import network_mapping
    from dtg.mapping.network import NetworkPlan, parse_plan, parse_plan_file

    if not isinstance(plan, NetworkPlan):
        plan = parse_plan(str(plan), "<plan>") if _is_text(plan) else parse_plan_file(
            Path(plan))
    return network_mapping(load(program, params).graph, plan)

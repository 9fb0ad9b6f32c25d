"""The compiled engine's set-up in arrays (:mod:`pesim.fast.build`) makes the very state
the simpy engine's set-up gives (:func:`pesim.fast.setup.from_run`), array by array, and
a run set up that way reports what the simpy engine reports, errors included."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES

import dtg
from dtg.api import module_text
from dtg.errors import SimulationError
from dtg.lair.frontend import load_program
from dtg.lair.interp import check_inputs
from dtg.pe.fabric import FabricConfig
from dtg.pe.parser import parse_module_text
from dtg.pesim import sim
from dtg.pesim.fast import build, engine, lower, setup
from dtg.pesim.routers import Deadline
from dtg.pesim.run import make_inputs
from dtg.pesim.sim import TensorInfo

sys.path.insert(0, str(EXAMPLES.parent / "benchmarks"))
from bench_pesim import checkerboard_gemv

GEMV = EXAMPLES / "gemv" / "gemv.lair"
PROGRAMS = sorted({*(p for p in EXAMPLES.glob("*/*.lair") if p.with_suffix(".map").exists()),
                   *(EXAMPLES / "polybench").glob("*.lair")})


def gemv_case(text: str) -> tuple:
    module, _ = parse_module_text(text, "<module>")
    program = load_program(GEMV, dict(module.params))
    data = check_inputs(program.graph, make_inputs(program, seed=0))
    outputs = {t.name: TensorInfo(t.shape, t.dtype) for t in program.graph.outputs}
    return module, data, outputs, FabricConfig()


def same_state(module, data, outputs, config) -> None:  # type: ignore[no-untyped-def]
    tables = lower.lower_module(module, config)
    run = sim._Run(module, data, outputs, config, Deadline(1e9), None)
    want, _ = setup.from_run(run, module, tables, config)
    got, _, _ = build.build(module, data, outputs, tables, config)
    for field in want._fields:
        a, b = getattr(want, field), getattr(got, field)
        assert a.shape == b.shape and np.array_equal(a, b), field


CHECKERBOARDS = [(64, 64, 4, 4), (256, 256, 8, 8), (96, 64, 2, 3)]


@pytest.mark.parametrize("size", CHECKERBOARDS, ids=str)
def test_the_checkerboard_gemv_state_is_the_same(size: tuple[int, int, int, int]) -> None:
    same_state(*gemv_case(checkerboard_gemv(*size)))


def test_the_hand_written_gemv_state_is_the_same() -> None:
    path = EXAMPLES / "handwritten" / "gemv_checkerboard" / "gemv_checkerboard.pe"
    same_state(*gemv_case(path.read_text()))


@pytest.mark.long
@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_example_built_in_arrays_has_the_same_state(program: Path, simd: bool) -> None:
    c = dtg.compile(program, simd=simd)
    module, _ = parse_module_text(module_text(c), "<module>")
    if build.unsupported(module) is not None:
        pytest.skip(build.unsupported(module))
    data = check_inputs(c.program.graph, make_inputs(c.program, seed=0))
    outputs = {t.name: TensorInfo(t.shape, t.dtype) for t in c.program.graph.outputs}
    same_state(module, data, outputs, c.fabric)


def test_what_arrays_do_not_build_is_named() -> None:
    c = dtg.compile(EXAMPLES / "movement" / "grid_sum.lair")
    module, _ = parse_module_text(module_text(c), "<module>")
    assert "has a store set" in (build.unsupported(module) or "")


def test_an_error_in_a_run_built_in_arrays_reads_as_the_simpy_engines() -> None:
    """A route that leaves the mesh where no stream waits: the run built in arrays hands
    over to the simpy engine's set-up, whose message is the simpy engine's."""
    text = checkerboard_gemv(64, 64, 2, 2).replace("route 1: RAMP -> E if (PE_X % 2 == 0);",
                                                    "route 1: RAMP -> S if (PE_X % 2 == 0);")
    module, data, outputs, config = gemv_case(text)
    assert build.unsupported(module) is None
    with pytest.raises(SimulationError) as simpy_error:
        sim.simulate(module, data, outputs, config=config)
    with pytest.raises(SimulationError) as fast_error:
        engine.simulate(module, data, outputs, config=config)
    assert str(fast_error.value) == str(simpy_error.value)


def test_a_checkerboard_gemv_built_in_arrays_runs_as_on_simpy() -> None:
    from test_engines import assert_same_run

    module, data, outputs, config = gemv_case(checkerboard_gemv(512, 512, 16, 16))
    assert_same_run(sim.simulate(module, data, outputs, config=config),
                    engine.simulate(module, data, outputs, config=config))

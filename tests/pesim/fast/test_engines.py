"""The compiled engine against the simpy engine: the same module and inputs give the
same run, figure for figure (cycles and span, events, every PE's statistics with its
per-task profile in order, every link's load, every output's bytes).

Marked long: the compiled engine's first compile takes about half a minute on a new
machine (later runs load it from numba's cache)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

import dtg
from dtg.api import module_text
from dtg.errors import SimulationError
from dtg.lair.interp import check_inputs
from dtg.pe.parser import parse_module_text
from dtg.pesim import sim
from dtg.pesim.fast import engine
from dtg.pesim.run import make_inputs
from dtg.pesim.sim import SimResult, TensorInfo

ROOT = Path(__file__).resolve().parents[3]
PROGRAMS = sorted({*(p for p in (ROOT / "examples").glob("*/*.lair")
                     if p.with_suffix(".map").exists()),
                   *(ROOT / "examples" / "polybench").glob("*.lair")})

pytestmark = pytest.mark.long

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pesim_support import build, groups  # noqa: E402  (the pesim tests' module texts)
from test_pesim_batches import RINGS, SPARSE, marks_module, ring_module  # noqa: E402


def both_engines(program: Path, *, simd: bool, seed: int = 0, arrival: str = "batched",
                 fabric: str = "paper") -> tuple[SimResult, SimResult]:
    c = dtg.compile(program, simd=simd, arrival=arrival, fabric=fabric)
    module, _ = parse_module_text(module_text(c), "<module>")
    graph = c.program.graph
    data = check_inputs(graph, make_inputs(c.program, seed=seed))
    outputs = {t.name: TensorInfo(t.shape, t.dtype) for t in graph.outputs}
    reference = sim.simulate(module, data, outputs, config=c.fabric)
    fast = engine.simulate(module, data, outputs, config=c.fabric)
    return reference, fast


def assert_same_run(a: SimResult, b: SimResult) -> None:
    assert (a.start, a.end, a.events, a.complete) == (b.start, b.end, b.events, b.complete)
    assert a.links == b.links
    assert list(a.pes) == list(b.pes)
    for pe, stats in a.pes.items():
        other = b.pes[pe]
        assert dataclasses.asdict(stats) == dataclasses.asdict(other), pe
        assert list(stats.tasks) == list(other.tasks), pe  # first runs in the same order
    assert sorted(a.outputs) == sorted(b.outputs)
    assert sorted(a.output_cycles) == sorted(b.output_cycles)
    for name, cycles in a.output_cycles.items():
        assert np.array_equal(cycles, b.output_cycles[name]), name
    for name, array in a.outputs.items():
        assert array.dtype == b.outputs[name].dtype
        assert array.tobytes() == b.outputs[name].tobytes(), name


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_example_runs_the_same_on_both_engines(program: Path, simd: bool) -> None:
    assert_same_run(*both_engines(program, simd=simd))


@pytest.mark.parametrize("fabric", ["wse2", "wse3"])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_other_fabrics_and_the_papers_arrivals_run_the_same(program: Path, fabric: str) -> None:
    """Other costs (wse2: two cycles a hop) and one task per wavelet (the paper's code)."""
    assert_same_run(*both_engines(program, simd=True, fabric=fabric))
    if fabric == "wse2":
        assert_same_run(*both_engines(program, simd=True, arrival="per-wavelet"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sparse_inputs_with_zeros_run_the_same(seed: int) -> None:
    """Other random inputs: sparse streams leave their zeros out, so the wavelets, and
    with them the events, differ from seed to seed."""
    for name in ("conv1d", "conv2d", "fc"):
        for program in (ROOT / "examples" / name).glob("*.lair"):
            if program.with_suffix(".map").exists():
                assert_same_run(*both_engines(program, simd=True, seed=seed))


def test_simultaneous_events_in_another_order_change_figures() -> None:
    """simpy's order of simultaneous events decides contended cycles; run in the
    opposite order, some example's figures change, so the comparison of the engines
    would see an engine that took events in another order."""
    changed = []
    for program in PROGRAMS:
        c = dtg.compile(program)
        module, _ = parse_module_text(module_text(c), "<module>")
        graph = c.program.graph
        data = check_inputs(graph, make_inputs(c.program, seed=0))
        outputs = {t.name: TensorInfo(t.shape, t.dtype) for t in graph.outputs}
        a = engine.simulate(module, data, outputs, config=c.fabric)
        b = engine.simulate(module, data, outputs, config=c.fabric, last_first=True)
        try:
            assert_same_run(a, b)
        except AssertionError:
            changed.append(program.stem)
    assert changed


def test_a_run_that_differs_is_told_apart() -> None:
    """The comparison can fail: one output element changed is found."""
    a, b = both_engines(ROOT / "examples" / "gemv" / "gemv.lair", simd=True)
    changed = {k: v.copy() for k, v in b.outputs.items()}
    first = next(iter(changed))
    changed[first].flat[0] += np.ones(1, dtype=changed[first].dtype)[0]
    with pytest.raises(AssertionError):
        assert_same_run(a, dataclasses.replace(b, outputs=changed))


@pytest.mark.parametrize("kind, g, once", [("dense", 1, False), ("dense", 2, False),
                                           ("sparse", 2, False), ("sparse", 4, True)])
def test_batches_of_whole_groups_run_the_same(kind: str, g: int, once: bool) -> None:
    module = build(groups(kind, g, once=once))
    a = np.array([[1, 0, 2], [0, 0, 0], [3, 4, 5], [0, -6, 0]], np.float32)
    outputs = {"B": TensorInfo((4, 3), "float32"), "S": TensorInfo((4,), "float32")}
    assert_same_run(sim.simulate(module, {"A": a}, outputs),
                    engine.simulate(module, {"A": a}, outputs))


@pytest.mark.parametrize("text, message", [
    ("once", "declared 'once', but a second batch opens"),
    ("slot", "groups of up to 2 wavelets"),
])
def test_batches_of_whole_groups_fail_alike(text: str, message: str) -> None:
    source = groups("sparse", 2, once=True) if text == "once" else \
        groups("dense", 2).replace("batch 4", "batch 2")
    module = build(source)
    a = np.array([[1, 0, 2], [0, 0, 0], [3, 4, 5], [0, -6, 0]], np.float32) + 1
    outputs = {"B": TensorInfo((4, 3), "float32"), "S": TensorInfo((4,), "float32")}
    errors = []
    for run in (sim.simulate, engine.simulate):
        with pytest.raises(SimulationError, match=message) as found:
            run(module, {"A": a}, outputs)
        errors.append(str(found.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("kind, g, ring, once", RINGS)
def test_batches_of_groups_in_a_ring_run_the_same(kind: str, g: int, ring: int,
                                                  once: bool) -> None:
    module = build(groups(kind, g, ring=ring, once=once))
    a = np.array([[1, 0, 2], [0, 0, 0], [3, 4, 5], [0, -6, 0]], np.float32)
    outputs = {"B": TensorInfo((4, 3), "float32"), "S": TensorInfo((4,), "float32")}
    assert_same_run(sim.simulate(module, {"A": a}, outputs),
                    engine.simulate(module, {"A": a}, outputs))


@pytest.mark.parametrize("ring", [1, 2, 3])
def test_dense_and_sparse_windows_in_a_ring_run_the_same(ring: int) -> None:
    x = np.arange(1, 41, dtype=np.float32)
    module = build(ring_module(40, ring))
    outputs = {"y": TensorInfo((40,), "float32")}
    assert_same_run(sim.simulate(module, {"x": x}, outputs),
                    engine.simulate(module, {"x": x}, outputs))
    a = np.array([[1, 0, 2, 0, 0, 0, 5], [0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 3, 0, -4, 0]],
                 np.float32)
    text = SPARSE.replace("array float32 land[3];", f"array float32 land[{3 * ring}];")\
        .replace("batch 3 land land", f"batch 3 land land ring {ring}")\
        .replace("land[k]", "land[slot + k]")
    module = build(text)
    outputs = {"B": TensorInfo((3, 7), "float32")}
    assert_same_run(sim.simulate(module, {"A": a}, outputs),
                    engine.simulate(module, {"A": a}, outputs))


def test_a_once_ring_fails_alike() -> None:
    module = build(groups("sparse", 1, ring=2, once=True))
    a = np.array([[1, 0, 2], [0, 0, 0], [3, 4, 5], [0, -6, 0]], np.float32) + 1
    outputs = {"B": TensorInfo((4, 3), "float32"), "S": TensorInfo((4,), "float32")}
    errors = []
    for run in (sim.simulate, engine.simulate):
        with pytest.raises(SimulationError, match="with a ring of 2, but batch 3 opens") as found:
            run(module, {"A": a}, outputs)
        errors.append(str(found.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("kind", ["dense", "sparse"])
@pytest.mark.parametrize("ring", [2, 8])
def test_end_marks_landed_ahead_run_the_same(kind: str, ring: int) -> None:
    """Rings land up to N end marks ahead of their control tasks: on a sparse stream
    with many empty groups too (the compiled engine's trigger heap holds them)."""
    a = np.zeros((32, 4), np.float32)
    a[0] = [1, 2, 3, 4]
    if kind == "dense":
        a = np.arange(1, 129, dtype=np.float32).reshape(32, 4)
    module = build(marks_module(kind, 32, ring))
    outputs = {"B": TensorInfo((32, 4), "float32")}
    assert_same_run(sim.simulate(module, {"A": a}, outputs),
                    engine.simulate(module, {"A": a}, outputs))


def test_runs_binding_other_arrays_run_the_same() -> None:
    from test_pesim_simd import BOUND, BOUND_OUTPUTS, bound_inputs
    outputs = {k: TensorInfo(*v) for k, v in BOUND_OUTPUTS.items()}
    assert_same_run(sim.simulate(build(BOUND), bound_inputs(), outputs),
                    engine.simulate(build(BOUND), bound_inputs(), outputs))
    text = BOUND.replace("{c -> d: 4,", "{c -> d: 6,")
    messages = []
    for run in (sim.simulate, engine.simulate):
        with pytest.raises(SimulationError) as err:
            run(build(text), bound_inputs(), outputs)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "accesses d at flat index 8" in messages[0]


def test_a_runs_variant_and_length_errors_read_alike() -> None:
    """A variant out of range, one the PE did not set up, and a length out of range: the
    compiled engine reports each as the simpy engine does."""
    from test_pesim_failures import one_pe
    from test_pesim_simd import _guarded

    cases = [
        (one_pe("run f variant(2) {a: 0} (1.0);", "simd f [8] | [4]: a[i0] = scalar;"),
         "run f selects variant 2; simd f has variants 0..1"),
        (_guarded(LATE="run left {a: 0} (0.0);"), "which this PE did not set up"),
        (one_pe("run f length(9) {a: 0} (1.0);", "simd f [8]: a[i0] = scalar;"),
         "run f sets length 9; simd f [8] takes a length from 1 to 8"),
    ]
    for text, wanted in cases:
        module = build(text)
        stores = {a.store for p in module.programs for a in p.arrays if a.store}
        outputs = {name: TensorInfo((8,), "float32") for name in stores if name}
        messages = []
        for run in (sim.simulate, engine.simulate):
            with pytest.raises(SimulationError) as err:
                run(module, {}, outputs)
            messages.append(str(err.value))
        assert messages[0] == messages[1] and wanted in messages[0], text

"""Landing rings (``batch K land A ring N``): a stream's next batches land while the core
runs one, every batch in a slot of its own where they are few (a sparse stream's then
never cleared). The code computes what the program does, on both engines, with sparse
inputs whose groups are empty or all zero, and runs no slower than the same code with one
slot."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from dtg.codegen import batching
from dtg.codegen.driver import compile_file
from dtg.pe.ir import Task
from dtg.pesim.run import make_inputs, run_module

KERNELS = ROOT / "benchmarks" / "kernels"
POLYBENCH = ROOT / "examples" / "polybench"
# (program, the stream's task as emitted: sparse, groups, ring, once)
CASES = [
    (KERNELS / "band_mv.lair", (False, None, 3, False)),  # dense windows, long tasks
    (KERNELS / "conv1d_channels.lair", (False, None, 3, False)),  # an end mark per batch
    (POLYBENCH / "gemm.lair", (True, None, 5, True)),  # sparse, a control task per group
    (POLYBENCH / "doitgen.lair", (True, 8, 5, True)),  # batches of whole groups
]


def _batched(path: Path) -> list[Task]:
    c = compile_file(path)
    assert c.module is not None
    (program,) = [p for p in c.module.programs if p.name == "compute"]
    return [t for t in program.tasks if t.batch is not None]


def _run(path: Path, engine: str, zeros: float, *, one_slot: bool = False,
         slots: int | None = None) -> int:
    """Cycles of a verified run, with ``zeros`` of every input's elements 0; with
    ``one_slot``, of the same code with one landing slot per stream (each window then
    cleared as it opens: 'once' holds for one window only); with ``slots``, that many
    slots of a dense stream's ring."""
    c = compile_file(path)
    module = c.module
    assert module is not None
    if one_slot:
        module = replace(module, programs=tuple(
            replace(p, tasks=tuple(replace(t, ring=1, once=t.once and t.ring == 1)
                                   for t in p.tasks)) for p in module.programs))
    if slots is not None:
        module = replace(module, programs=tuple(
            replace(p, tasks=tuple(replace(t, ring=slots) if t.ring > 1 else t
                                   for t in p.tasks)) for p in module.programs))
    data = make_inputs(c.program)
    rng = np.random.default_rng(7)
    for values in data.values():
        values[rng.random(values.shape) < zeros] = 0
    run = run_module(module, c.program, data, engine=engine)
    assert run.comparison.verified and run.comparison.exact
    return run.result.cycles


@pytest.mark.parametrize("sparse, runs, room, ring", [
    (True, 1, 100, (1, True)),  # the only batch: the image's zeros, never cleared
    (False, 1, 100, (1, False)),
    (True, 5, 50, (5, True)),  # a slot each
    (True, 9, 1000, (2, False)),  # more than a ring holds: two, cleared as they open
    (False, 3, 1000, (2, False)),  # dense batches clear nothing: two slots suffice
    (True, 5, 30, (2, False)),  # room for two slots only
    (False, 4, 19, (1, False)),  # no room for a second
])
def test_the_ring_is_a_slot_per_batch_where_few_else_two(
        sparse: bool, runs: int, room: int, ring: tuple[int, bool]) -> None:
    assert batching.landing_ring(sparse, runs, 10, room) == ring


@pytest.mark.parametrize(("path", "head"), CASES, ids=[p.stem for p, _ in CASES])
def test_the_streams_take_their_batches_in_a_ring(path: Path,
                                                  head: tuple[bool, int | None, int, bool]
                                                  ) -> None:
    (task,) = _batched(path)
    assert (task.sparse, task.groups, task.ring, task.once) == head


@pytest.mark.parametrize("engine", ["simpy", "fast"])
@pytest.mark.parametrize("zeros", [0.0, 0.5, 1.0])
@pytest.mark.parametrize(("path", "head"), CASES, ids=[p.stem for p, _ in CASES])
def test_rings_compute_the_program_and_are_no_slower_than_one_slot(
        path: Path, head: object, engine: str, zeros: float) -> None:
    assert _run(path, engine, zeros) <= _run(path, engine, zeros, one_slot=True)


def test_without_rings_the_streams_batch_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """One slot each (the code before rings): the slot is 0 and reads stay where they were."""
    monkeypatch.setattr(batching, "landing_ring",
                        lambda sparse, runs, slot_bytes, room: (1, sparse and runs <= 1))
    for path, _ in CASES:
        assert all(t.ring == 1 for t in _batched(path))
        assert _run(path, "simpy", 0.5) > 0


@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_a_long_task_gets_the_slots_that_land_while_it_runs(engine: str) -> None:
    """band_mv's batch task is predicted longer than a batch takes to land: three slots,
    so that no PE of the multicast line holds up the stream; two are slower."""
    path = KERNELS / "band_mv.lair"
    assert _run(path, engine, 0.0) < _run(path, engine, 0.0, slots=2)


@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_a_share_of_the_batches_gets_the_slots_that_pile_up_over_it(engine: str) -> None:
    """Each PE of a column takes its own 32 consecutive batches of the column's stream,
    each task four times as long as a batch takes to land: slots for the 24 that pile up
    over its share, so that the stream goes on to the PEs after it (with 5, each PE's
    share held up the stream in turn)."""
    path = Path(__file__).parent / "affine_column_stream.lair"
    (task,) = _batched(path)
    assert task.ring > 8, task.ring
    assert _run(path, engine, 0.0) < _run(path, engine, 0.0, slots=5)


def test_a_group_of_up_to_256_wavelets_lands_whole() -> None:
    """stencil1d's sparse stream of 66 elements: one window of the whole stream, landed
    once (never cleared), where windows of 64 took two batches (in a ring of 5 slots)."""
    (task,) = _batched(KERNELS / "stencil1d.lair")
    assert (task.sparse, task.batch, task.groups, task.ring, task.once) == (
        True, 66, None, 1, True)

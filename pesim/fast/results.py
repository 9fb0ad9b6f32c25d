"""What a run on the compiled engine reports, read from its arrays: per-PE statistics
with per-task profiles, link loads, the span, and the outputs its sinks received (the
simpy engine's :class:`~pesim.routers.Sink` objects, one per external PE, collect them
as they do for the simpy engine)."""

from __future__ import annotations

import numpy as np

from dtg.pe.ir import Array, PeModule
from dtg.pesim.code import NUMPY
from dtg.pesim.fast.build import Grid, NotInArrays
from dtg.pesim.fast.layout import (
    ARRAYS,
    B_LEN,
    BUSY,
    END,
    FLOPS,
    NONE,
    PROFILE,
    PROGRAM,
    Q_LEN,
    SCALAR,
    SENT,
    SIMD_FLOPS,
    SIMD_OPS,
    SIMD_RUNS,
    SK_COUNT,
    SK_DONE,
    SK_GROUP,
    SK_ORDER,
    SK_SIZE,
    STALL,
    START,
    TASKS_RUN,
    WAIT,
    WAITING,
    State,
)
from dtg.pesim.fast.lower import Tables
from dtg.pesim.sim import PeStats, _Run
from dtg.pesim.vector import box_elements


def write_sinks(state: State, sinks: list) -> None:
    """What each sink received, into its :class:`~pesim.routers.Sink` object."""
    for k, sink in enumerate(sinks):
        order = int(state.sink[k, SK_ORDER])
        size = int(state.sink[k, SK_SIZE])
        got = state.sink_got[order:order + size]
        sink.values = {sink.order[i]: float(state.sink_value[order + i])
                       for i in np.flatnonzero(got)}
        sink.times = {sink.order[i]: int(state.sink_time[order + i])
                      for i in np.flatnonzero(got)}
        sink.count = int(state.sink[k, SK_COUNT])
        sink.group = int(state.sink[k, SK_GROUP])
        done = int(state.sink[k, SK_DONE])
        sink.done = None if done == NONE else done


def check_finished(state: State, run: _Run) -> None:
    """Nothing may be left when no event is: a core waiting, a wavelet in a router, a
    queue or at a source, an output stream short of values. Where something is, the
    simpy engine's set-up reports it (:class:`NotInArrays`: the run is made again
    that way, which gives the same run and the simpy engine's words for it)."""
    if (np.any(state.core[:, WAITING]) or np.any(state.buffer[:, B_LEN])
            or np.any(state.queue[:, Q_LEN])
            or any(s.missing() is not None for s in run.sinks)):
        raise NotInArrays("the run did not finish cleanly")


def span(state: State, run: _Run) -> tuple[int, int]:
    starts = state.core[:, START]
    ends = state.core[:, END]
    first = [int(starts[starts != NONE].min())] if np.any(starts != NONE) else []
    last = [int(ends[ends != NONE].max())] if np.any(ends != NONE) else []
    first += run.source_starts
    last += [s.done for s in run.sinks if s.done is not None]
    if not first or not last:
        return 0, 0
    return min(first), max(last)


def pe_stats(state: State, grid: Grid, tables: Tables, names: list[str]
             ) -> dict[tuple[int, int], PeStats]:
    """Each PE's statistics, its tasks' profiles in the order they first ran."""
    core = state.core
    columns = [core[:, f].tolist() for f in (BUSY, SIMD_OPS, SIMD_RUNS, SCALAR, SENT, STALL,
                                             WAIT, TASKS_RUN, FLOPS, SIMD_FLOPS)]
    xs, ys = grid.core_x.tolist(), grid.core_y.tolist()
    programs = core[:, PROGRAM].tolist()
    profiles = core[:, PROFILE].tolist()
    tasks = [info.tasks for info in tables.info]
    # (as lists: reading a Python list is many times faster than a numpy scalar)
    first, runs, busy = (state.prof_first.tolist(), state.prof_runs.tolist(),
                         state.prof_busy.tolist())
    stats = {}
    for c, prog in enumerate(programs):
        base = profiles[c]
        names_of = tasks[prog]
        ran = sorted((first[base + k], k) for k in range(len(names_of))
                     if first[base + k] >= 0)
        per_task = {names_of[k]: (runs[base + k], busy[base + k]) for _, k in ran}
        stats[(xs[c], ys[c])] = PeStats(
            names[prog], columns[0][c], columns[1][c], columns[2][c], columns[3][c],
            columns[4][c], columns[5][c], columns[6][c], columns[7][c], columns[8][c],
            columns[9][c], per_task)
    return stats


def links(state: State, grid: Grid) -> dict[tuple[tuple[int, int], tuple[int, int]], int]:
    reported = grid.link_from.shape[0]
    used = np.flatnonzero(state.link_count[:reported])
    return {((int(grid.link_from[k, 0]), int(grid.link_from[k, 1])),
             (int(grid.link_to[k, 0]), int(grid.link_to[k, 1]))): int(state.link_count[k])
            for k in used}




def collect(state: State, grid: Grid, run: _Run, module: PeModule, tables: Tables
            ) -> dict[str, np.ndarray]:
    """The output tensors, from the sinks and the arrays stored to outputs (each element
    exactly once: anything else is left to the simpy engine's set-up to report, by
    :class:`NotInArrays`)."""
    outputs = run.outputs
    result = {name: np.zeros(info.shape, dtype=NUMPY[info.dtype])
              for name, info in outputs.items()}
    claims = {name: np.zeros(int(np.prod(info.shape, dtype=np.int64)), dtype=np.int32)
              for name, info in outputs.items()}
    produced: set[str] = set()
    for sink in run.sinks:
        if sink.tensor not in result:
            raise NotInArrays(f"a stream of {sink.tensor}, which is no output")
        flat = result[sink.tensor].reshape(-1)
        shape = result[sink.tensor].shape
        for element in sink.order:
            at = int(np.ravel_multi_index(element, shape))
            claims[sink.tensor][at] += 1
            flat[at] = sink.values.get(element, 0.0)
        produced.add(sink.tensor)
    first = 0
    for prog, program in enumerate(module.programs):
        count = int(np.count_nonzero(grid.core_program == prog))
        rows = np.arange(first, first + count)
        first += count
        if not count:
            continue
        ox, oy = program.origin
        env = {"PE_X": grid.core_x[rows] - ox, "PE_Y": grid.core_y[rows] - oy}
        slots = tables.info[prog].arrays
        for a in program.arrays:
            if a.store is None:
                continue
            slot = slots.index(a.name)
            if a.store not in result or len(outputs[a.store].shape) != len(a.shape):
                raise NotInArrays(f"array {a.name} stores {a.store}, no output of its rank")
            _store(state, a, rows, slot, env, result[a.store], claims[a.store])
            produced.add(a.store)
    if produced != set(outputs):
        raise NotInArrays("an output nobody produces")
    for name in produced:
        if claims[name].size and (claims[name].min() != 1 or claims[name].max() != 1):
            raise NotInArrays(f"elements of {name} produced twice or never")
    return result


def _store(state: State, a: Array, rows: np.ndarray, slot: int, env: dict[str, np.ndarray],
           out: np.ndarray, claims: np.ndarray) -> None:
    """Array ``a`` of the cores ``rows`` into ``out``: each PE's box, clipped to it."""
    assert a.store is not None
    found = box_elements(a, a.store, a.store_set, out.shape, env, rows.size)
    if found is None:
        raise NotInArrays(f"array {a.name} has a store set beyond affine constraints")
    valid, where = found
    rank = len(a.shape)
    picked = np.nonzero(valid)  # (PE, local index...) of every element inside the tensor
    glob = np.ravel_multi_index(tuple(np.broadcast_to(w, valid.shape)[picked]
                                      for w in where), out.shape)
    local = np.ravel_multi_index(picked[1:], a.shape) if rank else np.zeros_like(picked[0])
    at = state.arr_offset[state.core[rows, ARRAYS] + slot][picked[0]] + local
    values = (state.mem16[at].view(np.float16) if NUMPY[a.dtype] == np.float16
              else state.mem32[at])
    claims += np.bincount(glob, minlength=claims.size).astype(np.int32)
    out.reshape(-1)[glob] = values


__all__ = ["check_finished", "collect", "links", "pe_stats", "span", "write_sinks"]

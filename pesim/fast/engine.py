"""``simulate`` on the compiled engine: the same arguments and the same
:class:`pesim.sim.SimResult` as the simpy engine's, figure for figure.

The run is set up by the simpy engine's own set-up (:mod:`pesim.fast.setup`), driven
by the compiled kernel in slices of events, and its results are written back into the
set-up's objects, so that outputs, spans, statistics, deadlock reports and error
messages come from the same code as the simpy engine's. What the compiled engine does
not run yet raises :class:`Unsupported` before anything is simulated.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from dtg.errors import SimulationError
from dtg.lair.limits import MAX_SECONDS
from dtg.pe.fabric import FabricConfig
from dtg.pe.ir import PeModule, cut_dimension
from dtg.pesim.code import END, CycleLimitError
from dtg.pesim.core import once_twice
from dtg.pesim.fast import errors as E
from dtg.pesim.fast.build import NotInArrays, build, unsupported
from dtg.pesim.fast.kernel import DONE, PAST_LIMIT, run_slice
from dtg.pesim.fast.layout import (
    ARRAYS,
    B_HEAD,
    B_LEN,
    B_SOURCE,
    B_START,
    BUSY,
    F_LAST_FIRST,
    FLOPS,
    G_EVENTS,
    G_FAILED,
    G_NOW,
    NO_INDEX,
    NONE,
    PROFILE,
    PROGRAM,
    Q_COLOR,
    Q_CORE,
    Q_LEN,
    SCALAR,
    SENT,
    SIMD_FLOPS,
    SIMD_OPS,
    SIMD_RUNS,
    STALL,
    START,
    TASK,
    TASKS_RUN,
    WAIT,
    WAITING_SINCE,
    State,
)
from dtg.pesim.fast.layout import (
    END as CORE_END,
)
from dtg.pesim.fast.lower import Tables, Unsupported, lower_module
from dtg.pesim.fast.results import check_finished, collect, links, pe_stats, span, write_sinks
from dtg.pesim.fast.setup import Layout, from_run, program_table
from dtg.pesim.fast.timeline import RECORDS, Timeline, TraceOverflow, waiting_text
from dtg.pesim.progress import Progress, Watcher
from dtg.pesim.routers import Deadline, TimeLimitError
from dtg.pesim.sim import SimResult, TensorInfo, _Run, core_stats, output_cycles
from dtg.pesim.trace import Window

SLICE_SECONDS = 0.2  # wall time of a slice of events, between looks at the clock
FIRST_SLICE = 1 << 14


def simulate(module: PeModule, inputs: Mapping[str, np.ndarray],
             outputs: Mapping[str, TensorInfo], *, config: FabricConfig | None = None,
             max_seconds: float = MAX_SECONDS, watch: Watcher | None = None,
             trace: bool | Window = False, last_first: bool = False) -> SimResult:
    """:func:`pesim.sim.simulate` on the compiled engine. ``last_first`` runs
    simultaneous events in the opposite order of simpy's (for tests: a run whose figures
    then stay the same has no contended cycle)."""
    config = config or FabricConfig()
    tables = lower_module(module, config)
    records = RECORDS if trace else 0
    window = trace if isinstance(trace, Window) else None
    while True:
        try:
            return _simulate(module, inputs, outputs, config, tables,
                             _Options(max_seconds, watch, last_first, records, window))
        except TraceOverflow as full:  # (one event recorded more than half the records)
            records = 4 * full.needed


class _Options(NamedTuple):
    max_seconds: float
    watch: Watcher | None
    last_first: bool
    records: int  # trace records (0: not traced)
    window: Window | None  # what the trace keeps


def _simulate(module: PeModule, inputs: Mapping[str, np.ndarray],
              outputs: Mapping[str, TensorInfo], config: FabricConfig, tables: Tables,
              options: _Options) -> SimResult:
    wall = time.perf_counter()
    with np.errstate(all="ignore"):
        if unsupported(module) is None:
            try:
                return _in_arrays(module, dict(inputs), dict(outputs), config, tables,
                                  options, wall)
            except NotInArrays:
                pass  # set up by the simpy engine's objects: the same run, its messages
        return _through_objects(module, inputs, outputs, config, tables, options, wall)


def _in_arrays(module: PeModule, inputs: dict[str, np.ndarray],
               outputs: dict[str, TensorInfo], config: FabricConfig, tables: Tables,
               options: _Options, wall: float) -> SimResult:
    """A run set up in arrays (:mod:`pesim.fast.build`); :class:`NotInArrays` where it
    ends in an error or with work left over, which the simpy engine's set-up then
    reports in its words."""
    state, grid, run = build(module, inputs, outputs, tables, config)
    state.settings[F_LAST_FIRST] = int(options.last_first)
    timeline = None
    if options.records:
        pes = list(zip(grid.core_x.tolist(), grid.core_y.tolist(), strict=True))
        timeline = Timeline.of(module, tables, pes, options.window)
        state = timeline.start(state, options.records)

    def explain(kind: str) -> Exception:
        if kind == "time limit":
            return _time_limit(options.max_seconds, state, ())
        return NotInArrays(kind)

    complete = _drive(state, tables, options, explain, timeline)
    write_sinks(state, run.sinks)
    if complete:
        check_finished(state, run)
    result_outputs = collect(state, grid, run, module, tables) if complete else {}
    start, end = span(state, run)
    if not complete:
        end = max(end, int(state.g[G_NOW]))
    names = [p.name for p in module.programs]
    return SimResult(module.name, result_outputs, start, end, int(state.g[G_EVENTS]),
                     time.perf_counter() - wall, pe_stats(state, grid, tables, names),
                     links(state, grid), config, complete,
                     None if timeline is None else timeline.trace, engine="fast",
                     output_cycles=output_cycles(run.sinks, outputs))


def _through_objects(module: PeModule, inputs: Mapping[str, np.ndarray],
                     outputs: Mapping[str, TensorInfo], config: FabricConfig, tables: Tables,
                     options: _Options, wall: float) -> SimResult:
    """A run set up by the simpy engine's objects, its results written back into them."""
    with np.errstate(all="ignore"):
        run = _Run(module, inputs, outputs, config, Deadline(options.max_seconds), None)
        state, layout = from_run(run, module, tables, config)
        state.settings[F_LAST_FIRST] = int(options.last_first)
        timeline = None
        if options.records:
            timeline = Timeline.of(module, tables, [core.pe for core in layout.cores],
                                   options.window)
            state = timeline.start(state, options.records)

        def explain(kind: str) -> Exception:
            if kind == "error":
                return _error(state, tables, layout, run)
            _write_back(state, tables, layout, run)
            notes = tuple(run.activity())
            if kind == "time limit":
                return _time_limit(options.max_seconds, state, notes)
            return CycleLimitError(
                f"cycle limit of {run.config.cycle_limit} cycles reached and the run is "
                "still going; raise cycle_limit in --config FABRIC.toml if it is meant to "
                "be this long", notes=notes)

        complete = _drive(state, tables, options, explain, timeline)
        _write_back(state, tables, layout, run)
        if complete:
            try:
                run.check_finished()
            except SimulationError as err:
                if timeline is not None:
                    err.partial_trace = timeline.ended(state)  # type: ignore[attr-defined]
                raise
        else:
            run.complete = False
        result_outputs = run.collect() if complete else {}
    start, end = run.span()
    if not complete:
        end = max(end, int(state.g[G_NOW]))
    pes = {pe: core_stats(core) for pe, core in run.fabric.cores.items()}
    loads = {key: int(state.link_count[k]) for k, key in enumerate(layout.links)
             if state.link_count[k]}
    return SimResult(module.name, result_outputs, start, end, int(state.g[G_EVENTS]),
                     time.perf_counter() - wall, pes, loads, config, complete,
                     None if timeline is None else timeline.trace, engine="fast",
                     output_cycles=output_cycles(run.sinks, outputs))


def _time_limit(max_seconds: float, state: State, notes: tuple[str, ...]) -> TimeLimitError:
    return TimeLimitError(
        f"the simulation ran longer than {max_seconds:g} s of wall time (at cycle "
        f"{int(state.g[G_NOW])}) and is still going; it may never end (a route or task that "
        "keeps itself busy), or raise --max-seconds if it is meant to be this long",
        notes=notes)


def _drive(state: State, tables: Tables, options: _Options,
           explain: Callable[[str], Exception], timeline: Timeline | None = None) -> bool:
    """Run slices until no event is left; False when Ctrl-C stopped the run. What ends a
    run otherwise ("error", "cycle limit", "time limit") is raised as ``explain`` says,
    a simulation error with the trace up to it (``partial_trace``, as the simpy engine
    gives it)."""
    program = program_table(tables)
    longest = int(tables.int_at[:, 1].max()) if len(tables.int_at) else 1
    istack = np.zeros(longest + 8, dtype=np.int64)
    longest = int(tables.float_at[:, 1].max()) if len(tables.float_at) else 1
    fstack = np.zeros(longest + 8)
    started = time.perf_counter()
    deadline = time.monotonic() + options.max_seconds
    sources = np.flatnonzero(state.buffer[:, B_SOURCE])
    total = int(state.buffer[sources, B_LEN].sum())
    events = FIRST_SLICE

    def ended(kind: str) -> Exception:
        err = explain(kind)
        if timeline is not None and isinstance(err, SimulationError):
            err.partial_trace = timeline.ended(state)  # type: ignore[attr-defined]
        return err

    try:
        while True:
            before, done = time.perf_counter(), int(state.g[G_EVENTS])
            try:
                status = run_slice(program, state, events, istack, fstack)
            except E.FastError:
                if timeline is not None:
                    timeline.take(state)
                raise ended("error") from None
            took = time.perf_counter() - before
            if timeline is not None:
                timeline.take(state)
            if status == DONE:
                if timeline is not None:
                    timeline.finish(state)
                return True
            if status == PAST_LIMIT:
                raise ended("cycle limit")
            if time.monotonic() > deadline:
                raise ended("time limit")
            if options.watch is not None:
                left = int(state.buffer[sources, B_LEN].sum())
                options.watch(Progress(int(state.g[G_NOW]), int(state.g[G_EVENTS]),
                                       time.perf_counter() - started, total - left, total))
            # slices of about SLICE_SECONDS of work
            ran = max(int(state.g[G_EVENTS]) - done, 1)
            rate = ran / took if took > 0 else events * 16
            events = int(min(max(rate * SLICE_SECONDS, 1 << 10), 1 << 24))
    except KeyboardInterrupt:
        if timeline is not None:
            timeline.finish(state)
        return False


# --------------------------------------------------------------------- results


def _task_name(tables: Tables, state: State, c: int) -> str | None:
    task = int(state.core[c, TASK])
    if task == NONE:
        return None
    prog = int(state.core[c, PROGRAM])
    return tables.info[prog].tasks[task - int(tables.programs[prog, 0])]


def _wavelet(value: float, index: int, end: int) -> tuple[float, int | None] | None:
    if end:
        return END
    return (float(value), None if index == NO_INDEX else int(index))


def _write_back(state: State, tables: Tables, layout: Layout, run: _Run) -> None:
    """Put the kernel's state into the set-up's objects, whose code then reports it."""
    run.env._now = int(state.g[G_NOW])
    configs = [c.name for p in run.module.programs for c in p.configs]
    cap = run.config.buffer_wavelets
    for c, core in enumerate(layout.cores):
        row = state.core[c]
        core.busy, core.scalar = int(row[BUSY]), int(row[SCALAR])
        core.simd_ops, core.simd_runs = int(row[SIMD_OPS]), int(row[SIMD_RUNS])
        core.flops, core.simd_flops = int(row[FLOPS]), int(row[SIMD_FLOPS])
        core.sent, core.stall, core.wait = int(row[SENT]), int(row[STALL]), int(row[WAIT])
        core.tasks_run = int(row[TASKS_RUN])
        core.start = None if row[START] == NONE else int(row[START])
        core.end = None if row[CORE_END] == NONE else int(row[CORE_END])
        core.task = _task_name(tables, state, c)
        core.waiting = waiting_text(state, c, configs)
        core.waiting_since = int(row[WAITING_SINCE])
        prog = int(row[PROGRAM])
        info = tables.info[prog]
        base = int(row[PROFILE])
        ran = [(int(state.prof_first[base + k]), name, k) for k, name in enumerate(info.tasks)
               if state.prof_first[base + k] >= 0]
        core.per_task = {name: [int(state.prof_runs[base + k]), int(state.prof_busy[base + k])]
                         for _, name, k in sorted(ran)}
        first = int(row[ARRAYS])
        for k, name in enumerate(info.arrays):
            array = core.arrays[name]
            offset = int(state.arr_offset[first + k])
            flat = array.reshape(-1)
            if array.dtype == np.float16:
                flat.view(np.uint16)[:] = state.mem16[offset:offset + array.size]
            else:
                flat[:] = state.mem32[offset:offset + array.size]
        core.fifo.clear()
    for q in range(len(state.queue)):
        n = int(state.queue[q, Q_LEN])
        if n:
            core = layout.cores[int(state.queue[q, Q_CORE])]
            base = q * cap
            core.fifo[int(state.queue[q, Q_COLOR])] = deque(
                _wavelet(state.fifo_value[k], state.fifo_index[k], state.fifo_end[k])
                for k in range(base, base + n))
    for b, buf in enumerate(layout.buffers):
        n = int(state.buffer[b, B_LEN])
        start, head = int(state.buffer[b, B_START]), int(state.buffer[b, B_HEAD])
        if buf.source is not None:
            ks = list(range(start + head, start + head + n))
        else:
            ks = [start + (head + i) % cap for i in range(n)]
        items = [(int(state.q_ready[k]), _wavelet(state.q_value[k], state.q_index[k],
                                                 state.q_end[k])) for k in ks]
        buf.q = deque(items) if buf.source is not None else items
    write_sinks(state, layout.sinks)


def _error(state: State, tables: Tables, layout: Layout, run: _Run) -> SimulationError:
    """The simpy engine's error for what the kernel reported."""
    _write_back(state, tables, layout, run)
    err = state.error
    code = int(err[0])
    fabric = run.fabric
    if code in (E.E_NO_ROUTE_ENTRY, E.E_LEAVES_MESH, E.E_NO_ROUTE_DOWN):
        buf = layout.buffers[int(err[1])]
        buf.targets = None
        try:
            fabric.resolve(buf)
        except SimulationError as found:
            return found
    if code == E.E_CYCLE_ROUTE:
        return fabric.cycle_error(layout.buffers[int(err[1])])
    if code in range(E.E_SINK_DENSE_INDEX, E.E_SINK_UNKNOWN_INDEX + 1):
        return _sink_error(code, layout.sinks[int(err[1])], err)
    if code == E.E_INTERNAL:
        return SimulationError(f"internal error of the compiled engine (case {int(err[1])})")
    c = int(err[1]) if code != E.E_NONE else int(state.g[G_FAILED])
    core = layout.cores[c]
    configs = [cfg for p in run.module.programs for cfg in p.configs]
    if code == E.E_CYCLE_LIMIT:
        limit = run.config.cycle_limit
        return CycleLimitError(
            f"cycle limit of {limit} cycles reached at {core.name()} (task {core.task}); raise "
            "cycle_limit in --config FABRIC.toml if the run is meant to be this long",
            notes=tuple(run.activity()))
    if code == E.E_OUT_OF_BOUNDS:
        row, rank = int(err[2]), int(err[3])
        prog = int(state.core[c, PROGRAM])
        name = tables.info[prog].arrays[row - int(tables.programs[prog, 2])]
        shape = [int(x) for x in tables.arrays[row, 3:3 + rank]]
        at = "".join(f"[{int(i)}]" for i in err[4:4 + rank])
        dims = "".join(f"[{n}]" for n in shape)
        return core.error(f"access {name}{at} is outside the array {name}{dims}")
    if code == E.E_NO_RAMP:
        color = int(err[2])
        return core.error(f"sends on color {color}, but {core.name()} has no route for color "
                          f"{color} from RAMP: a wavelet without a route")
    if code in (E.E_VARIANT_RANGE, E.E_VARIANT_UNSET):
        cfg, v = configs[int(err[2])], int(err[3])
        if code == E.E_VARIANT_RANGE:
            return core.error(f"run {cfg.name} selects variant {v}; simd {cfg.name} has "
                              f"variants 0..{len(cfg.variants) - 1}")
        return core.error(f"run {cfg.name} selects variant {v}, which this PE did not set up "
                          "(its guard does not hold here)")
    if code == E.E_LENGTH_RANGE:
        cfg = configs[int(err[2])]
        sizes = list(cfg.variants[int(err[3]) - int(tables.configs[int(err[2]), 4])])
        return core.error(f"run {cfg.name} sets length {int(err[4])}; simd {cfg.name} {sizes} "
                          f"takes a length from 1 to {sizes[cut_dimension(tuple(sizes))]}")
    if code == E.E_SIMD_BOUNDS:
        cfg = configs[int(err[2])]
        sizes = list(cfg.variants[int(err[3]) - int(tables.configs[int(err[2]), 4])])
        if int(err[7]) > 0:  # (cut to a length)
            sizes[cut_dimension(tuple(sizes))] = int(err[7])
        row = int(err[5])
        prog = int(state.core[c, PROGRAM])
        name = tables.info[prog].arrays[row - int(tables.programs[prog, 2])]
        dims = "".join(f"[{n}]" for n in core.arrays[name].shape)
        size = core.arrays[name].size
        return core.error(f"simd {cfg.name} {sizes} with base {int(err[4])} accesses {name} at "
                          f"flat index {int(err[6])}, outside the array {name}{dims} ({size} "
                          "elements)")
    task = _global_task_name(tables, int(err[2]))
    color = int(err[3])
    if code in (E.E_DATA_NO_INDEX, E.E_SPARSE_NO_INDEX):
        return core.error(f"sparse data task {task} received a wavelet without an index on "
                          f"color {color}")
    if code == E.E_GROUP_SLOT:
        size = int(tables.tasks[int(err[2]), 4])
        k = int(err[4])
        what = f"index {k}" if int(tables.tasks[int(err[2]), 3]) else f"wavelet {k + 1} of a group"
        return core.error(f"batched task {task} takes groups of up to {size} wavelets (indices "
                          f"0..{size - 1}), but {what} arrived on color {color}")
    if code == E.E_ONCE_TWICE:
        row = tables.tasks[int(err[2])]
        windows = not int(row[9])
        return core.error(once_twice(task, int(row[10]), windows, color,
                                     int(err[4]) if windows else None))
    if code == E.E_SPARSE_ORDER:
        return core.error(f"sparse data task {task}: index {int(err[4])} arrived after a larger "
                          f"one in the same group on color {color}")
    return SimulationError(f"internal error of the compiled engine (code {code})")


def _global_task_name(tables: Tables, row: int) -> str:
    for prog, info in enumerate(tables.info):
        first = int(tables.programs[prog, 0])
        if first <= row < first + len(info.tasks):
            return info.tasks[row - first]
    return "?"


def _sink_error(code: int, sink: Any, err: np.ndarray) -> SimulationError:
    where = sink.where()
    arg = int(err[2])
    if code == E.E_SINK_DENSE_INDEX:
        return SimulationError(f"{where} is dense but received a (value, index) wavelet "
                               f"(?, {arg})")
    if code == E.E_SINK_TOO_MANY:
        return SimulationError(f"{where} received more than its {len(sink.order)} values")
    if code == E.E_SINK_MARKS:
        return SimulationError(f"{where} received more end marks than its {len(sink.groups)} "
                               "groups")
    if code == E.E_SINK_NO_INDEX:
        return SimulationError(f"{where} is sparse but received a value without an index")
    if code == E.E_SINK_AFTER_LAST:
        return SimulationError(f"{where} received a value after the end mark of its last group")
    return SimulationError(f"{where} received index {arg} in group {int(err[3])}, which names "
                           f"no element of {sink.tensor}")


__all__ = ["Unsupported", "simulate"]

"""The cycle-level, event-driven simulation of a PE mesh (simpy): one run.

Time is in cycles. The mesh is :mod:`pesim.routers` (router buffers, links, sources and
sinks, driven by callbacks) and :mod:`pesim.core` (one simpy process per PE, running
its tasks; SIMD in :mod:`pesim.simd_unit`). This module builds them for a module and
its inputs, drives the event loop, and collects outputs and statistics.

When no event is left, anything still waiting (a core in ``recv``, ``in(c)`` or
``send``, a wavelet in a buffer, an incomplete output stream) is a deadlock and is
reported with the PEs and colors involved.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import islpy as isl
import numpy as np
import simpy

from dtg.errors import LimitError, SimulationError
from dtg.lair.limits import (
    MAX_SECONDS,
    SIM_BYTES_PER_PE,
    SIM_BYTES_PER_ROUTE,
    counted,
    memory_limit,
)
from dtg.mapping.poly import points
from dtg.pe.fabric import FabricConfig
from dtg.pe.ir import Array, PeModule, PeProgram, StreamIO
from dtg.pe.parser import Locations
from dtg.pesim.code import END, NUMPY, CycleLimitError, ProgramCode
from dtg.pesim.core import Core
from dtg.pesim.expr import compile_cond, compile_iexpr
from dtg.pesim.isltext import Halfspaces, box, check_array_set, check_stream, fix_pe, outside
from dtg.pesim.progress import Progress, Watcher
from dtg.pesim.routers import (
    MAX_LISTED,
    Buffer,
    Deadline,
    Fabric,
    Pe,
    Sink,
    TimeLimitError,
)
from dtg.pesim.trace import Trace, Window, tracing
from dtg.pesim.verify import adjacent, pe_name, placed_pes, program_pes


class DeadlockError(SimulationError):
    """The run cannot go on: cores or wavelets wait for something that never comes."""



@dataclass(frozen=True)
class TensorInfo:
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class PeStats:
    program: str
    busy: int  # cycles charged by the cost table (dispatch, scalar code, SIMD)
    simd_ops: int  # SIMD element operations
    simd_instructions: int
    scalar_ops: int  # cycles of scalar code
    wavelets_sent: int
    stall_cycles: int  # sends and out(c) waiting for buffer space
    wait_cycles: int  # recv and in(c) waiting for wavelets
    tasks_run: int  # dispatched tasks (main not counted)
    scalar_flops: int = 0  # floating-point operations done by scalar code
    simd_flops: int = 0  # floating-point operations done by SIMD (fmac counts 2, copies 0)
    # per task: (runs, busy cycles including dispatch); main's cycles include the SIMD
    # configuration
    tasks: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class SimResult:
    module: str
    outputs: dict[str, np.ndarray]
    start: int
    end: int
    events: int
    wall_seconds: float
    pes: dict[Pe, PeStats]
    links: dict[tuple[Pe, Pe], int]  # wavelets per directed link (external PEs included)
    config: FabricConfig
    complete: bool = True  # False: interrupted (Ctrl-C) at ``end``; no outputs collected
    trace: Trace | None = None  # what a traced run recorded (``simulate(trace=True)``)
    engine: str = "simpy"  # the engine that ran (pesim.engines)
    engine_note: str | None = None  # why not the one asked for
    # streamed outputs: the cycle each element reached its sink (-1: none was sent)
    output_cycles: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def cycles(self) -> int:
        return self.end - self.start


# ---------------------------------------------------------------------- simulation


def simulate(module: PeModule, inputs: Mapping[str, np.ndarray],
             outputs: Mapping[str, TensorInfo], *, config: FabricConfig | None = None,
             max_seconds: float = MAX_SECONDS, watch: Watcher | None = None,
             trace: bool | Window = False) -> SimResult:
    """Run ``module`` on ``inputs``; return the outputs, cycles and statistics (and
    with ``trace`` the timeline of every PE, :mod:`pesim.trace`).

    ``outputs`` gives the shape and type of every output tensor the module produces
    (by ``store`` or output streams). The module must have passed
    :func:`pesim.verify.verify_module`. ``watch`` is called with the progress every few
    thousand events. Ctrl-C (KeyboardInterrupt) during the event loop ends the run with
    a partial result (``complete`` False, statistics up to that cycle, no outputs).
    """
    config = config or FabricConfig()
    wall = time.perf_counter()
    with np.errstate(all="ignore"):
        run = _Run(module, inputs, outputs, config, Deadline(max_seconds),
                   tracing(trace))
        try:
            events = run.run(watch)
        except SimulationError as err:  # a traced run keeps its trace up to the error
            now = int(run.env.now)
            if run.fabric.trace is not None:  # with the waits and stalls it ended in
                for core in run.fabric.cores.values():
                    if core.waiting is not None:
                        run.fabric.trace.span(core.pe, f"{core.waiting} (unfinished)",
                                              "wait", core.waiting_since, now)
            err.partial_trace = (run.fabric.trace, now)  # type: ignore[attr-defined]
            raise
        result_outputs = run.collect() if run.complete else {}
    start, end = run.span()
    if not run.complete:
        end = max(end, int(run.env.now))
    pes = {pe: core_stats(core) for pe, core in run.fabric.cores.items()}
    links = {key: link.count for key, link in run.fabric.links.items() if link.count}
    return SimResult(module.name, result_outputs, start, end, events,
                     time.perf_counter() - wall, pes, links, config, run.complete,
                     run.fabric.trace, output_cycles=output_cycles(run.sinks, outputs))


def output_cycles(sinks: Sequence[Sink], outputs: Mapping[str, TensorInfo]
                  ) -> dict[str, np.ndarray]:
    """When each element of each streamed output reached its sink (-1: never sent)."""
    result: dict[str, np.ndarray] = {}
    for sink in sinks:
        if sink.tensor not in outputs:
            continue
        cycles = result.setdefault(sink.tensor, np.full(outputs[sink.tensor].shape, -1,
                                                        dtype=np.int64))
        for element, t in sink.times.items():
            cycles[element] = t
    return result


def simulation_bytes(module: PeModule, locations: Locations | None = None, *,
                     per_pe: int = SIM_BYTES_PER_PE, per_route: int = SIM_BYTES_PER_ROUTE
                     ) -> tuple[int, int]:
    """The PEs that run a program and the estimated memory of simulating ``module``:
    their local arrays and bookkeeping, ``per_pe`` and ``per_route`` bytes on the engine
    that runs it (``docs/limits.md``). PEs are counted by isl, not listed, so this is
    quick on any mesh."""
    pes = total = 0
    if module.width < 1 or module.height < 1:
        return 0, 0  # an empty mesh: verify_module says so
    for program in module.programs:
        loc = (locations or {}).get(("pes", program.name))
        count = placed_pes(program, module.width, module.height, loc).count_val().to_python()
        arrays = sum(math.prod(a.shape) * (2 if a.dtype == "float16" else 4)
                     for a in program.arrays)
        pes += count
        total += count * (per_pe + arrays + per_route * len(program.routes))
    return pes, total


def check_budget(module: PeModule, locations: Locations | None = None, *,
                 engine: str = "simpy", per_pe: int = SIM_BYTES_PER_PE,
                 per_route: int = SIM_BYTES_PER_ROUTE) -> None:
    """Refuse, before anything is allocated, a simulation whose estimated memory on
    ``engine`` (``per_pe`` and ``per_route`` bytes of bookkeeping) exceeds the limit
    (:func:`lair.limits.memory_limit`)."""
    pes, total = simulation_bytes(module, locations, per_pe=per_pe, per_route=per_route)
    limit = memory_limit()
    if total > limit:
        raise LimitError(f"simulating module {module.name} ({pes} PEs running programs) on "
                         f"the {engine} engine needs about {total} bytes of memory for local "
                         f"arrays and bookkeeping, more than the limit of {limit} (3/4 of "
                         "this machine's memory, or $DTG_MEMORY_LIMIT); simulate a smaller "
                         "mesh", (locations or {}).get(("module",)))


def core_stats(core: Core) -> PeStats:
    return PeStats(core.code.program.name, core.busy, core.simd_ops, core.simd_runs,
                   core.scalar, core.sent, core.stall, core.wait, core.tasks_run, core.flops,
                   core.simd_flops, {t: (n, c) for t, (n, c) in core.per_task.items()})


class _Run:
    """Builds the fabric for one run, drives the event loop and collects the results."""

    WATCH_EVERY = 1 << 12  # events between calls of the progress watcher (a power of 2)

    def __init__(self, module: PeModule, inputs: Mapping[str, np.ndarray],
                 outputs: Mapping[str, TensorInfo], config: FabricConfig, deadline: Deadline,
                 trace: Trace | None = None):
        self.module, self.inputs, self.outputs, self.config = module, inputs, outputs, config
        self.deadline = deadline
        self.env = simpy.Environment()
        self.fabric = Fabric(self.env, config, module.width, module.height, deadline)
        self.fabric.trace = trace
        self.sinks: list[Sink] = []
        self.source_starts: list[int] = []
        self.sets: dict[tuple[str, str, int], isl.Set] = {}
        self.halfspaces: dict[tuple[str, str, int], Halfspaces | None] = {}
        self.complete = True
        check_budget(module)
        for program in module.programs:
            self.program(program, program_pes(program, module.width, module.height))
        for k, stream in enumerate(module.streams):
            self.stream(stream, k)
        self.fabric.mark_cycles()

    # --------------------------------------------------------------------- setup

    def program(self, program: PeProgram, pes: list[Pe]) -> None:
        code = ProgramCode(program, self.config)
        guards = [compile_cond(r.guard) if r.guard is not None else None for r in program.routes]
        offsets = {a.name: [compile_iexpr(e) for e in a.offset] for a in program.arrays}
        ox, oy = program.origin
        for pe in pes:
            env = {"PE_X": pe[0] - ox, "PE_Y": pe[1] - oy}
            arrays = {a.name: self.array(program, a, env, offsets[a.name])
                      for a in program.arrays}
            state = dict(env)
            state.update({v.name: v.init for v in program.ints})
            core = Core(self.fabric, pe, code, state, arrays)
            self.fabric.cores[pe] = core
            for route, guard in zip(program.routes, guards, strict=True):
                if guard is None or guard(env):
                    self.fabric.add_buffer(Buffer(pe, route.color, route.source,
                                                  self.config.buffer_wavelets, route.targets))
            self.env.process(core.process())

    def tensor(self, name: str, role: str, user: str) -> np.ndarray | TensorInfo:
        if role == "input":
            if name not in self.inputs:
                known = ", ".join(sorted(self.inputs)) or "none"
                raise SimulationError(f"{user} reads tensor {name}, which is not an input "
                                      f"of the reference program (inputs: {known})")
            return self.inputs[name]
        if name not in self.outputs:
            known = ", ".join(sorted(self.outputs)) or "none"
            raise SimulationError(f"{user} writes tensor {name}, which is not an output of the "
                                  f"reference program (outputs: {known})")
        return self.outputs[name]

    def array(self, program: PeProgram, a: Array, env: dict[str, int],
              offset_fns: list[Callable[[dict[str, int]], int]]) -> np.ndarray:
        local = np.zeros(a.shape, dtype=NUMPY[a.dtype]) if a.init is None else np.full(
            a.shape, a.init, dtype=NUMPY[a.dtype])
        if a.load is None:
            return local
        user = f"array {a.name} of program {program.name}"
        data = self.tensor(a.load, "input", user)
        assert isinstance(data, np.ndarray)
        if data.ndim != len(a.shape):
            raise SimulationError(f"{user} has rank {len(a.shape)} but loads {a.load}, which "
                                  f"has rank {data.ndim}")
        offset = [f(env) for f in offset_fns] or [0] * len(a.shape)
        for local_idx, global_idx in self.elements(a, a.load, a.load_set, offset, data.shape,
                                                   env, "load"):
            local[local_idx] = data[global_idx]
        return local

    def elements(self, a: Array, tensor: str, text: str | None, offset: list[int],
                 shape: tuple[int, ...], env: dict[str, int], what: str
                 ) -> list[tuple[Any, Any]]:
        """(local index, global index) pairs of what an array loads or stores: its box
        clipped to the tensor, filtered by the load/store set when there is one (slices
        when the whole clipped box is chosen, index arrays otherwise)."""
        lo = [max(0, o) for o in offset]
        hi = [min(n, o + m) for o, n, m in zip(offset, shape, a.shape, strict=True)]
        if any(h <= low for low, h in zip(lo, hi, strict=True)):
            return []
        whole = (tuple(slice(low - o, h - o) for low, h, o in zip(lo, hi, offset, strict=True)),
                 tuple(slice(low, h) for low, h in zip(lo, hi, strict=True)))
        if text is None:
            return [whole]
        key = (text, tensor, len(a.shape))
        s = self.sets.get(key)
        if s is None:
            s = self.sets[key] = check_array_set(text, tensor, len(a.shape),
                                                 f"{what} set of array {a.name}", None)
            self.halfspaces[key] = Halfspaces.of(s)
        test = self.halfspaces[key]
        if test is not None and test.contains_box((env["PE_X"], env["PE_Y"]), lo,
                                                  [h - 1 for h in hi]):
            return [whole]  # (found without isl: most PEs of a program)
        dims = [f"i{d}" for d in range(len(lo))]
        box = isl.Set(f"{{ {tensor}[{', '.join(dims)}] : " + " and ".join(
            f"{low} <= {d} < {h}" for d, low, h in zip(dims, lo, hi, strict=True)) + " }")
        chosen = fix_pe(s, env["PE_X"], env["PE_Y"]).intersect(box)
        if chosen.is_equal(box):
            return [whole]
        pts = points(chosen)
        if not pts:
            return []
        coords = np.array(pts, dtype=np.int64)
        glob_idx = tuple(coords[:, d] for d in range(coords.shape[1]))
        local_idx = tuple(coords[:, d] - offset[d] for d in range(coords.shape[1]))
        return [(local_idx, glob_idx)]

    def stream(self, stream: StreamIO, k: int) -> None:
        rel = check_stream(stream.relation, stream.tensor, None)
        user = f"{stream.direction} stream {stream.tensor}"
        info = self.tensor(stream.tensor, stream.direction, user)
        shape = info.shape
        rank = len(shape)
        if rel.dim(isl.dim_type.in_) != rank:
            raise SimulationError(f"the relation of {user} has {rel.dim(isl.dim_type.in_)} "
                                  f"dimensions; {stream.tensor} has rank {rank}")
        stray = outside(rel.domain(), box(stream.tensor, shape))  # before listing them
        if stray is not None:
            raise SimulationError(f"the relation of {user} names {stream.tensor}"
                                  f"[{', '.join(map(str, stray))}], outside its shape "
                                  f"{list(shape)}")
        per_pe: dict[Pe, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}
        for p in points(rel.wrap()):
            element, ext, index = p[:rank], (p[rank], p[rank + 1]), p[rank + 2:]
            per_pe.setdefault(ext, []).append((element, index))
        for ext, entries in per_pe.items():
            if stream.direction == "output":
                sink = Sink(stream.tensor, stream.kind, ext, stream.color, entries)
                self.fabric.sinks[(ext, stream.color)] = sink
                self.sinks.append(sink)
                continue
            assert isinstance(info, np.ndarray)
            self.source(stream, ext, entries, info)

    def source(self, stream: StreamIO, ext: Pe,
               entries: list[tuple[tuple[int, ...], tuple[int, ...]]], data: np.ndarray) -> None:
        near = adjacent(ext, self.module.width, self.module.height)
        assert near is not None, "verify_module checks adjacency"
        mesh_pe, port = near
        buf = Buffer(ext, stream.color, "OUT", 1 << 62, (port,), source=stream.tensor,
                     entry=mesh_pe)
        entries.sort(key=lambda e: e[1])
        group: tuple[int, ...] | None = None
        for element, index in entries:
            if group is not None and index[:-1] != group:
                buf.q.append((0, END))
            group = index[:-1]
            value = float(data[element])
            if stream.kind == "sparse":
                if value != 0.0:
                    buf.q.append((0, (value, index[-1])))
            else:
                buf.q.append((0, (value, None)))
        if entries:
            buf.q.append((0, END))
        self.fabric.add_buffer(buf)
        if buf.q:
            self.source_starts.append(0)
            self.fabric.schedule(buf, 0)

    # ----------------------------------------------------------------------- run

    def run(self, watch: Watcher | None = None) -> int:
        """Step through every event; on Ctrl-C stop where the run is (``complete``
        False) rather than raise, so that what was measured can still be reported."""
        env, limit = self.env, self.config.cycle_limit
        step, peek = env.step, env.peek
        events = 0
        started = time.perf_counter()
        total = sum(len(b.q) for b in self.fabric.sources)
        # the set-up's objects (cores, buffers, arrays) live as long as the run: keep the
        # collector from scanning them again and again (with the collector off, a 64 x 64
        # GEMV ran 12 % faster; this recovers about half of that)
        gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(100_000, 50, 1000)
        try:
            while True:
                t = peek()
                if t == float("inf"):
                    break
                if t > limit:
                    raise CycleLimitError(
                        f"cycle limit of {limit} cycles reached and the run is still going; "
                        "raise cycle_limit in --config FABRIC.toml if it is meant to be this "
                        "long", notes=tuple(self.activity()))
                try:
                    self.deadline.tick(self.cycle_text)
                    step()
                except (TimeLimitError, CycleLimitError) as err:
                    if not err.notes:
                        err.notes = tuple(self.activity())
                    raise
                events += 1
                if watch is not None and not events & (self.WATCH_EVERY - 1):
                    left = sum(len(b.q) for b in self.fabric.sources)
                    watch(Progress(int(env.now), events, time.perf_counter() - started,
                                   total - left, total))
        except KeyboardInterrupt:
            self.complete = False
            return events
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()
        self.check_finished()
        return events

    def cycle_text(self) -> str:
        return f"at cycle {int(self.env.now)}"

    def activity(self) -> list[str]:
        """What is still going on, a few items of each kind: waiting cores, incomplete
        output streams, wavelets left at sources, in routers and in core queues."""
        cores = self.fabric.cores.values()
        kinds = [
            [f"{c.name()} task {c.task} {c.waiting}" for c in cores if c.waiting is not None],
            [m for m in (s.missing() for s in self.sinks) if m is not None],
            [f"{b.describe()} still has {counted(len(b.q), 'wavelet')} to send"
             for b in self.fabric.sources if b.q],
            [f"{counted(len(b.q), 'wavelet')} waiting in the router of {b.describe()}"
             for b in self.fabric.buffers.values() if b.q],
            [f"{c.name()} leaves {counted(len(q), 'wavelet')} on color {color} unread"
             for c in cores for color, q in sorted(c.fifo.items()) if q],
        ]
        items: list[str] = []
        for found in kinds:
            items += found[:MAX_LISTED]
            if len(found) > MAX_LISTED:
                items.append(f"... and {len(found) - MAX_LISTED} more like this")
        return items

    def check_finished(self) -> None:
        items = self.activity()
        if not items:
            return
        waiting = [c for c in self.fabric.cores.values() if c.waiting is not None]
        if waiting:
            first = waiting[0]
            raise DeadlockError(f"deadlock at cycle {int(self.env.now)}: no event can happen any "
                                f"more, but {first.name()} {first.waiting}"
                                + (f" (and {len(waiting) - 1} more PEs wait)"
                                   if len(waiting) > 1 else ""), notes=tuple(items))
        raise DeadlockError(f"the run stopped at cycle {int(self.env.now)} with work left over: "
                            f"{items[0]}", notes=tuple(items))

    # ------------------------------------------------------------------- results

    def span(self) -> tuple[int, int]:
        starts = [c.start for c in self.fabric.cores.values() if c.start is not None]
        starts += self.source_starts
        ends = [c.end for c in self.fabric.cores.values() if c.end is not None]
        ends += [s.done for s in self.sinks if s.done is not None]
        if not starts or not ends:
            return 0, 0
        return min(starts), max(ends)

    def collect(self) -> dict[str, np.ndarray]:
        """Output tensors from the sinks and the stored arrays; every element exactly once."""
        result = {name: np.zeros(info.shape, dtype=NUMPY[info.dtype])
                  for name, info in self.outputs.items()}
        owner: dict[str, np.ndarray] = {name: np.full(info.shape, -1, dtype=np.int64)
                                         for name, info in self.outputs.items()}
        producers: list[str] = []
        produced: set[str] = set()

        def claim(tensor: str, where: Any, who: str) -> None:
            taken = owner[tensor][where]
            if np.any(taken >= 0):
                first = producers[int(np.asarray(taken)[np.asarray(taken) >= 0].ravel()[0])]
                raise SimulationError(f"output {tensor} gets elements from both {first} and "
                                      f"{who}; each element must come from one producer")
            owner[tensor][where] = len(producers)
            producers.append(who)
            produced.add(tensor)

        for sink in self.sinks:
            who = sink.where()
            for element in sink.order:
                claim(sink.tensor, element, who)
                result[sink.tensor][element] = sink.values.get(element, 0.0)
        for pe, core in self.fabric.cores.items():
            program = core.code.program
            ox, oy = program.origin
            env = {"PE_X": pe[0] - ox, "PE_Y": pe[1] - oy}
            for a in program.arrays:
                if a.store is None:
                    continue
                user = f"array {a.name} of program {program.name}"
                info = self.tensor(a.store, "output", user)
                assert isinstance(info, TensorInfo)
                if len(info.shape) != len(a.shape):
                    raise SimulationError(f"{user} has rank {len(a.shape)} but stores "
                                          f"{a.store}, which has rank {len(info.shape)}")
                offset = [compile_iexpr(e)(env) for e in a.offset] or [0] * len(a.shape)
                for local_idx, global_idx in self.elements(a, a.store, a.store_set, offset,
                                                           info.shape, env, "store"):
                    claim(a.store, global_idx, f"{user} on {pe_name(*pe)}")
                    result[a.store][global_idx] = core.arrays[a.name][local_idx]
        for name in self.outputs:
            missing = np.argwhere(owner[name] < 0)
            if name in produced and missing.size:
                first = ", ".join(map(str, missing[0]))
                raise SimulationError(f"output {name}: element {name}[{first}] is neither "
                                      f"stored nor streamed out by any PE ({len(missing)} "
                                      "elements missing)")
        absent = sorted(set(self.outputs) - produced)
        if absent:
            raise SimulationError(f"the module produces no element of output "
                                  f"{', '.join(absent)} (no store and no output stream)")
        return result

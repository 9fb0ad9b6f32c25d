"""The cycle-level, event-driven simulation of a PE mesh (simpy).

Time is in cycles. Routers are not processes: a router input buffer (per PE, color and
input port, ``buffer_wavelets`` deep) forwards its head wavelet in a callback when every
target can take it (multicast is atomic: all targets in the same cycle), each link
carrying one wavelet per cycle and delaying it ``hop_cycles``. A full target registers
the buffer as a waiter and wakes it when space frees (backpressure). Each core is one
simpy process that runs ``main`` and then its triggered tasks one at a time; scalar code
advances the core's own clock without events (see :mod:`pesim.code`) and synchronizes
with simulated time only at fabric interactions and task ends. External sources are
buffers that hold their whole stream; sinks are targets that record what arrives.

When no event is left, anything still waiting (a core in ``recv``, ``in(c)`` or
``send``, a wavelet in a buffer, an incomplete output stream) is a deadlock and is
reported with the PEs and colors involved.
"""

from __future__ import annotations

import gc
import heapq
import math
import time
from collections import defaultdict, deque
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

import islpy as isl
import numpy as np
import simpy

from codegen.peir import Array, PeModule, PeProgram, StreamIO, Task
from lair.diagnostics import LimitError, SimulationError
from lair.limits import MAX_SECONDS, MAX_SIM_BYTES, SIM_BYTES_PER_PE, SIM_BYTES_PER_ROUTE
from mapping.poly import points
from pesim.clock import Clock, Wake
from pesim.code import END, NUMPY, CycleLimitError, ProgramCode, SimdInfo, Variant, elementwise
from pesim.expr import compile_cond, compile_iexpr
from pesim.fabric import FabricConfig
from pesim.isltext import box, check_array_set, check_stream, fix_pe, outside
from pesim.parser import Locations
from pesim.progress import Progress, Watcher
from pesim.verify import adjacent, pe_name, placed_pes, program_pes

Gen = Generator[Any, Any, Any]
Pe = tuple[int, int]
BufferKey = tuple[Pe, int, str]  # a router input buffer: (PE, color, input port)
Wavelet = tuple[float, int | None] | None  # (value, index or None) or END (None)
STEP = {"N": (0, -1), "S": (0, 1), "E": (1, 0), "W": (-1, 0)}
OPPOSITE = {"N": "S", "S": "N", "E": "W", "W": "E"}
MAX_SIMD_ELEMENTS = 1 << 24
MAX_LISTED = 4  # items of each kind listed in an error
NO_COLORS: frozenset[int] = frozenset()


# Floating-point operations per element of each SIMD operation.
FLOPS = {"fmac": 2, "fmul": 1, "fadd": 1, "fsub": 1, "fmax": 1, "copy": 0, "fill": 0}


class DeadlockError(SimulationError):
    """The run cannot go on: cores or wavelets wait for something that never comes."""


class RouteCycleError(SimulationError):
    """A wavelet entered a cycle of routes: a copy of it would circulate forever."""


class TimeLimitError(SimulationError):
    """The simulation ran past its wall-time limit (``--max-seconds``)."""


class Deadline:
    """The wall-time budget of a run. ``tick`` is called at every event, loop iteration
    and fabric interaction; it reads the clock only every :data:`CHECK_EVERY` calls, so
    scalar code that runs without events (a loop of 2**62 iterations, a task that
    activates itself at zero cost) is stopped too, at almost no cost."""

    CHECK_EVERY = 1 << 12
    __slots__ = ("count", "end", "seconds")

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.count = 0

    def tick(self, now: Callable[[], str]) -> None:
        self.count += 1
        if self.count % self.CHECK_EVERY == 0 and time.monotonic() > self.end:
            raise TimeLimitError(
                f"the simulation ran longer than {self.seconds:g} s of wall time ({now()}) and "
                "is still going; it may never end (a route or task that keeps itself busy), "
                "or raise --max-seconds if it is meant to be this long")


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

    @property
    def cycles(self) -> int:
        return self.end - self.start


# ------------------------------------------------------------------------ the fabric


class Link:
    __slots__ = ("count", "free")

    def __init__(self) -> None:
        self.free = 0  # first cycle the link can carry the next wavelet
        self.count = 0


class Buffer:
    """A router input buffer, or the stream of an external source (``source`` set)."""

    __slots__ = ("cap", "color", "entry", "fabric", "on_cycle", "pe", "port", "q", "route",
                 "scheduled", "source", "targets", "waiters")

    def __init__(self, pe: Pe, color: int, port: str, cap: int, route: tuple[str, ...], *,
                 source: str | None = None, entry: Pe | None = None):
        self.pe, self.color, self.port, self.cap, self.route = pe, color, port, cap, route
        self.source = source  # the input tensor, for the stream of an external source
        self.entry = entry  # the mesh PE a source feeds (through port ``route[0]``)
        # a router buffer holds a few wavelets (a list is a tenth of a deque's size); a
        # source holds its whole stream
        self.q: list[tuple[int, Wavelet]] | deque[tuple[int, Wavelet]] = (
            list() if source is None else deque())
        self.targets: list[Target] | None = None
        self.scheduled = False
        self.on_cycle = False  # a wavelet here would come back here (Fabric.mark_cycles)
        self.waiters: list[Any] = []  # buffers and events waiting for space here
        self.fabric: Fabric | None = None

    def fire(self, _event: object) -> None:
        """The simpy callback: try to forward the head wavelet."""
        assert self.fabric is not None
        self.fabric.forward(self)

    def describe(self) -> str:
        if self.source is not None:
            return f"input stream {self.source} at {pe_name(*self.pe)}"
        return f"{pe_name(*self.pe)} color {self.color} from {self.port}"


class Target:
    __slots__ = ("link",)

    def __init__(self, link: Link):
        self.link = link

    def has_space(self, w: Wavelet) -> bool:
        raise NotImplementedError

    def waiters(self) -> list[Any]:
        raise NotImplementedError

    def accept(self, w: Wavelet, now: int) -> None:
        raise NotImplementedError


class ToBuffer(Target):
    __slots__ = ("buf", "fabric")

    def __init__(self, link: Link, buf: Buffer, fabric: Fabric):
        super().__init__(link)
        self.buf, self.fabric = buf, fabric

    def has_space(self, w: Wavelet) -> bool:
        return len(self.buf.q) < self.buf.cap

    def waiters(self) -> list[Any]:
        return self.buf.waiters

    def accept(self, w: Wavelet, now: int) -> None:
        buf = self.buf
        if buf.on_cycle:
            raise self.fabric.cycle_error(buf)
        hop = self.fabric.hop
        buf.q.append((now + hop, w))
        if len(buf.q) == 1 and not buf.scheduled:
            self.fabric.schedule(buf, hop)


class ToCore(Target):
    __slots__ = ("color", "core")

    def __init__(self, link: Link, core: Core, color: int):
        super().__init__(link)
        self.core, self.color = core, color

    def has_space(self, w: Wavelet) -> bool:
        return self.core.can_accept(self.color, w)

    def waiters(self) -> list[Any]:
        return self.core.fifo_waiters[self.color]

    def accept(self, w: Wavelet, now: int) -> None:
        self.core.deliver(self.color, w, now)


class ToSink(Target):
    __slots__ = ("hop", "sink")

    def __init__(self, link: Link, sink: Sink, hop: int):
        super().__init__(link)
        self.sink, self.hop = sink, hop

    def has_space(self, w: Wavelet) -> bool:
        return True

    def waiters(self) -> list[Any]:
        return []

    def accept(self, w: Wavelet, now: int) -> None:
        self.sink.receive(w, now + self.hop)


class Fabric:
    """Routers, links, sources and sinks, driven by callbacks on the simpy clock."""

    def __init__(self, env: simpy.Environment, config: FabricConfig, width: int, height: int,
                 deadline: Deadline):
        self.env, self.config, self.width, self.height = env, config, width, height
        self.deadline = deadline
        self.hop = config.hop_cycles
        self.clock = Clock(env)
        self.buffers: dict[tuple[Pe, int, str], Buffer] = {}
        self.links: dict[tuple[Pe, Pe], Link] = {}
        self.ramps: dict[Pe, Link] = {}
        self.cores: dict[Pe, Core] = {}
        self.sinks: dict[tuple[Pe, int], Sink] = {}
        self.sources: list[Buffer] = []

    def now(self) -> int:
        return int(self.env._now)

    def inside(self, pe: Pe) -> bool:
        return 0 <= pe[0] < self.width and 0 <= pe[1] < self.height

    def link(self, a: Pe, b: Pe) -> Link:
        found = self.links.get((a, b))
        if found is None:
            found = self.links[(a, b)] = Link()
        return found

    def add_buffer(self, buf: Buffer) -> Buffer:
        buf.fabric = self
        if buf.source is None:
            self.buffers[(buf.pe, buf.color, buf.port)] = buf
        else:
            self.sources.append(buf)
        return buf

    def schedule(self, buf: Buffer, delay: int) -> None:
        buf.scheduled = True
        self.clock.call_after(delay, buf.fire)

    def release(self, waiters: list[Any]) -> None:
        """Space freed: wake every buffer and process that waited for it."""
        pending = waiters[:]
        waiters.clear()
        for w in pending:
            if isinstance(w, Buffer):
                if not w.scheduled:
                    self.schedule(w, 0)
            elif not w.triggered:
                w.succeed()

    def forward(self, buf: Buffer) -> None:
        """Move the head wavelet of ``buf`` to all its targets if they can all take it."""
        buf.scheduled = False
        q = buf.q
        if not q:
            return
        ready, w = q[0]
        now = int(self.env._now)
        if ready > now:
            self.schedule(buf, ready - now)
            return
        targets = buf.targets if buf.targets is not None else self.resolve(buf)
        free = 0
        for t in targets:
            if not t.has_space(w):
                t.waiters().append(buf)
                return
            if t.link.free > free:
                free = t.link.free
        if free > now:
            self.schedule(buf, free - now)
            return
        del q[0]
        for t in targets:
            t.link.free = now + 1
            t.link.count += 1
            t.accept(w, now)
        if buf.waiters:
            self.release(buf.waiters)
        if q:
            self.schedule(buf, max(1, q[0][0] - now))

    def successors(self, key: BufferKey) -> list[BufferKey]:
        """The router buffers a wavelet in buffer ``key`` goes to next (not cores, sinks)."""
        pe, color, _ = key
        found = []
        for port in self.buffers[key].route:
            if port != "RAMP":
                dx, dy = STEP[port]
                nxt = ((pe[0] + dx, pe[1] + dy), color, OPPOSITE[port])
                if nxt in self.buffers:
                    found.append(nxt)
        return found

    def mark_cycles(self) -> None:
        """Mark the buffers that lie on a cycle of routes (a strongly connected component
        of the buffer graph, found by Tarjan's algorithm, iteratively). Routes are static
        and each buffer forwards a copy to every target, so a wavelet entering such a
        buffer has a copy that comes back to it forever: the first one is an error."""
        succ = {key: self.successors(key) for key in self.buffers}
        index: dict[BufferKey, int] = {}
        low: dict[BufferKey, int] = {}
        stack: list[BufferKey] = []
        on_stack: set[BufferKey] = set()
        for root in succ:
            if root in index:
                continue
            index[root] = low[root] = len(index)
            stack.append(root)
            on_stack.add(root)
            work = [(root, 0)]
            while work:
                node, i = work[-1]
                if i < len(succ[node]):
                    work[-1] = (node, i + 1)
                    child = succ[node][i]
                    if child not in index:
                        index[child] = low[child] = len(index)
                        stack.append(child)
                        on_stack.add(child)
                        work.append((child, 0))
                    elif child in on_stack:
                        low[node] = min(low[node], index[child])
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        for member in component:
                            self.buffers[member].on_cycle = True

    def cycle_error(self, buf: Buffer) -> RouteCycleError:
        """The shortest cycle of routes through ``buf``, as an error."""
        start = (buf.pe, buf.color, buf.port)
        parent: dict[BufferKey, BufferKey] = {}
        frontier = [start]
        last = None
        while frontier and last is None:
            nxt_frontier = []
            for key in frontier:
                for child in self.successors(key):
                    if child == start:
                        last = key
                        break
                    if child not in parent:
                        parent[child] = key
                        nxt_frontier.append(child)
                if last is not None:
                    break
            frontier = nxt_frontier
        path = [start]
        node = last
        while node is not None and node != start:
            path.insert(1, node)
            node = parent.get(node)
        hops = [f"{pe_name(*pe)} from {port}" for pe, _, port in path]
        shown = hops if len(hops) <= 2 * MAX_LISTED else [*hops[:MAX_LISTED], "...",
                                                          *hops[-MAX_LISTED:]]
        return RouteCycleError(
            f"a wavelet on color {buf.color} enters a cycle of routes at {pe_name(*buf.pe)} at "
            f"cycle {self.now()}: {' -> '.join(shown)} -> {pe_name(*buf.pe)} again "
            f"({len(path)} routers); it would circulate forever",
            notes=("routes are static and each router forwards a copy to every target, so "
                   "a wavelet on this cycle never leaves it",))

    def resolve(self, buf: Buffer) -> list[Target]:
        """The targets of a buffer's route; an error when a wavelet would go nowhere."""
        targets: list[Target] = []
        if buf.source is not None:
            assert buf.entry is not None
            entry, port = buf.entry, buf.route[0]
            target = self.buffers.get((entry, buf.color, port))
            if target is None:
                raise SimulationError(
                    f"input stream {buf.source} enters {pe_name(*entry)} from "
                    f"{pe_name(*buf.pe)} through its {port} port on color {buf.color}, but "
                    f"{pe_name(*entry)} has no route for color {buf.color} from {port}")
            targets.append(ToBuffer(self.link(buf.pe, entry), target, self))
            buf.targets = targets
            return targets
        for port in buf.route:
            if port == "RAMP":
                ramp = self.ramps.setdefault(buf.pe, Link())
                targets.append(ToCore(ramp, self.cores[buf.pe], buf.color))
                continue
            dx, dy = STEP[port]
            nxt = (buf.pe[0] + dx, buf.pe[1] + dy)
            link = self.link(buf.pe, nxt)
            if not self.inside(nxt):
                sink = self.sinks.get((nxt, buf.color))
                if sink is None:
                    raise SimulationError(
                        f"a wavelet on color {buf.color} leaves the mesh at {pe_name(*buf.pe)} "
                        f"towards {pe_name(*nxt)} (route from {buf.port} to {port}), but no "
                        f"output stream collects color {buf.color} there")
                targets.append(ToSink(link, sink, self.hop))
                continue
            down = self.buffers.get((nxt, buf.color, OPPOSITE[port]))
            if down is None:
                runs = "runs no program" if nxt not in self.cores else (
                    f"has no route for color {buf.color} from {OPPOSITE[port]}")
                raise SimulationError(
                    f"a wavelet on color {buf.color} goes from {pe_name(*buf.pe)} to "
                    f"{pe_name(*nxt)} (route from {buf.port} to {port}), but {pe_name(*nxt)} "
                    f"{runs}: a wavelet without a route")
            targets.append(ToBuffer(link, down, self))
        buf.targets = targets
        return targets


# --------------------------------------------------------------------------- sinks


class Sink:
    """An external PE collecting an output stream on one color."""

    def __init__(self, tensor: str, kind: str, ext: Pe, color: int,
                 entries: list[tuple[tuple[int, ...], tuple[int, ...]]]):
        self.tensor, self.kind, self.ext, self.color = tensor, kind, ext, color
        entries = sorted(entries, key=lambda e: e[1])  # (element, index) by index
        self.order = [element for element, _ in entries]
        groups: dict[tuple[int, ...], dict[int, tuple[int, ...]]] = {}
        for element, index in entries:
            groups.setdefault(index[:-1], {})[index[-1]] = element
        self.groups = list(groups.values())
        self.values: dict[tuple[int, ...], float] = {}
        self.count = 0  # dense: values received
        self.group = 0  # sparse: end marks received
        self.done: int | None = None  # cycle the stream became complete

    def where(self) -> str:
        return f"output stream {self.tensor} at {pe_name(*self.ext)} (color {self.color})"

    def receive(self, w: Wavelet, t: int) -> None:
        if self.kind == "dense":
            if w is END:
                return
            if w[1] is not None:
                raise SimulationError(f"{self.where()} is dense but received a (value, index) "
                                      f"wavelet ({w[0]}, {w[1]})")
            if self.count >= len(self.order):
                raise SimulationError(f"{self.where()} received more than its "
                                      f"{len(self.order)} values")
            self.values[self.order[self.count]] = w[0]
            self.count += 1
            if self.count == len(self.order):
                self.done = t
            return
        if w is END:
            self.group += 1
            if self.group > len(self.groups):
                raise SimulationError(f"{self.where()} received more end marks than its "
                                      f"{len(self.groups)} groups")
            if self.group == len(self.groups):
                self.done = t
            return
        if w[1] is None:
            raise SimulationError(f"{self.where()} is sparse but received a value without an "
                                  "index")
        if self.group >= len(self.groups):
            raise SimulationError(f"{self.where()} received a value after the end mark of its "
                                  "last group")
        element = self.groups[self.group].get(w[1])
        if element is None:
            raise SimulationError(f"{self.where()} received index {w[1]} in group "
                                  f"{self.group}, which names no element of {self.tensor}")
        self.values[element] = w[0]

    def missing(self) -> str | None:
        if self.done is not None:
            return None
        if self.kind == "dense":
            return f"{self.where()} received {self.count} of {len(self.order)} values"
        return f"{self.where()} received {self.group} of {len(self.groups)} end marks"


# --------------------------------------------------------------------------- cores


class Core:
    """A PE's core: its state, its statistics and its simpy process."""

    __slots__ = ("arrays", "arrival", "base", "busy", "clock", "closed", "code", "config",
                 "configured", "end", "end_waiting", "env", "fabric", "fifo", "fifo_waiters",
                 "fill", "flat", "flops", "idle", "limit", "pe", "per_task", "scalar", "sent",
                 "seq", "setup_cycles", "sim", "simd_flops", "simd_ops", "simd_runs", "stall",
                 "start", "task", "tasks_run", "timer", "triggers", "value", "wait",
                 "waiting", "windows_opened")

    def __init__(self, fabric: Fabric, pe: Pe, code: ProgramCode, env: dict[str, int],
                 arrays: dict[str, np.ndarray]):
        self.fabric, self.pe, self.code, self.env, self.arrays = fabric, pe, code, env, arrays
        configured = code.setup.variants(env)
        self.setup_cycles = fabric.config.simd_config * len(configured)
        # None: every variant is set up (no guards), so runs need no check
        self.configured = configured if code.setup.guarded else None
        self.flat = {name: a.reshape(-1) for name, a in arrays.items()}
        self.sim = fabric.env
        self.timer = fabric.clock
        self.config = fabric.config
        self.limit = fabric.config.cycle_limit
        # per color, made on first use: most cores use few of the colors
        self.fifo: defaultdict[int, deque[Wavelet]] = defaultdict(deque)
        self.fifo_waiters: defaultdict[int, list[Any]] = defaultdict(list)
        self.arrival: dict[int, Wake] = {}
        self.triggers: list[tuple[int, int, str, int | None]] = []
        # batched colors: wavelets landed so far, colors whose batch awaits its task,
        # colors whose end mark awaits its control task
        self.fill: defaultdict[int, int] = defaultdict(int)
        self.base: dict[int, int] = {}  # sparse batches: the first index of the window
        # (made only where a program has batches: most PEs need none of these)
        batches = bool(code.batched)
        self.closed: set[int] = set() if batches else NO_COLORS  # type: ignore[assignment]
        # colors of 'once' batches that had a window
        self.windows_opened: set[int] = set() if batches else NO_COLORS  # type: ignore[assignment]
        self.end_waiting: set[int] = set() if batches else NO_COLORS  # type: ignore[assignment]
        self.seq = 0
        self.idle: Wake | None = None
        self.clock = 0
        self.value = 0.0
        self.task: str | None = None
        self.waiting: str | None = None
        self.start: int | None = None
        self.end: int | None = None
        self.busy = self.scalar = self.simd_ops = self.simd_runs = self.flops = 0
        self.simd_flops = 0
        self.sent = self.stall = self.wait = self.tasks_run = 0
        self.per_task: dict[str, list[int]] = {}  # task -> [runs, busy cycles]

    # ------------------------------------------------------------------ helpers

    def name(self) -> str:
        return pe_name(*self.pe)

    def now(self) -> int:
        return int(self.sim._now)

    def where(self) -> str:
        return f"at {self.name()} task {self.task}, cycle {self.clock}"

    def error(self, message: str) -> SimulationError:
        where = f" task {self.task}" if self.task else ""
        return SimulationError(f"{self.name()}{where}: {message}")

    def out_of_bounds(self, array: str, index: tuple[int, ...], shape: tuple[int, ...]
                      ) -> SimulationError:
        dims = "".join(f"[{n}]" for n in shape)
        at = "".join(f"[{i}]" for i in index)
        return self.error(f"access {array}{at} is outside the array {array}{dims}")

    def charge(self, cycles: int) -> None:
        self.clock += cycles
        self.busy += cycles
        self.scalar += cycles

    def check_limit(self) -> None:
        self.fabric.deadline.tick(self.where)
        if self.clock > self.limit:
            raise CycleLimitError(
                f"cycle limit of {self.limit} cycles reached at {self.name()} (task "
                f"{self.task}); raise cycle_limit in --config FABRIC.toml if the run is meant "
                "to be this long")

    def sync(self) -> Gen:
        """Let simulated time catch up with the core's clock."""
        self.check_limit()
        delay = self.clock - self.now()
        if delay > 0:
            yield self.timer.timeout(delay)
        else:
            self.clock = self.now()

    # --------------------------------------------------------------- the process

    def process(self) -> Gen:
        code = self.code
        if code.main is not None or self.setup_cycles:
            self.start = 0
            self.clock = self.setup_cycles
            self.busy += self.setup_cycles
            if code.main is not None:
                yield from self.execute(code.main)
                self.per_task["main"] = [1, self.busy]
            yield from self.sync()
            self.end = self.now()
        while True:
            if not self.triggers:
                self.task = None
                self.idle = self.timer.signal()
                yield self.idle
                self.idle = None
                continue
            _, _, name, color = heapq.heappop(self.triggers)
            task = code.by_name[name]
            self.clock = max(self.clock, self.now())
            if self.start is None:
                self.start = self.clock
            self.task = name
            busy_before = self.busy
            if task.batch is not None:
                assert color is not None
                if task.sparse:
                    self.env["index"] = self.base[color]
                    self.env["count"] = task.batch
                    if not task.once:  # the core clears the landing array for the next window
                        assert task.land is not None
                        land = self.code.arrays[task.land]
                        width = self.config.simd_width(land.dtype, "fill")
                        self.clock += self.config.simd_startup + -(-task.batch // width)
                        self.busy += self.config.simd_startup + -(-task.batch // width)
                else:
                    self.env["count"] = self.fill[color]
            elif task.kind == "data":
                assert color is not None
                w = self.take(color, mark=False)
                assert w is not None
                self.value = w[0]
                if task.sparse:
                    if w[1] is None:
                        raise self.error(f"sparse data task {name} received a wavelet without "
                                         f"an index on color {color}")
                    self.env["index"] = w[1]
            elif task.kind == "control":
                assert color is not None
                self.take(color, mark=True)
                if color in self.code.batched:
                    self.end_waiting.discard(color)
                    self.pump(color, self.clock)
            self.clock += self.config.task_dispatch
            self.busy += self.config.task_dispatch
            self.tasks_run += 1
            yield from self.execute(task)
            profile = self.per_task.setdefault(name, [0, 0])
            profile[0] += 1
            profile[1] += self.busy - busy_before
            yield from self.sync()
            self.end = self.now()
            if task.batch is not None:
                assert color is not None
                self.fill[color] = 0
                self.base.pop(color, None)
                self.closed.discard(color)
                self.pump(color, self.now())

    def execute(self, task: Task) -> Gen:
        self.task = task.name
        body = self.code.tasks[task.name]
        if body.gen is not None:
            yield from body.gen(self)
        else:
            body.plain(self)  # type: ignore[misc]

    # ---------------------------------------------------------------- triggers

    def push_trigger(self, t: int, task: str, color: int | None) -> None:
        heapq.heappush(self.triggers, (t, self.seq, task, color))
        self.seq += 1
        if self.idle is not None and not self.idle.triggered:
            self.idle.succeed()

    def activate(self, task: str) -> None:
        self.push_trigger(self.clock, task, None)

    def can_accept(self, color: int, w: Wavelet) -> bool:
        if w is END and color not in self.code.control and color not in self.code.batched:
            return True  # discarded on arrival
        return len(self.fifo[color]) < self.config.buffer_wavelets

    def deliver(self, color: int, w: Wavelet, now: int) -> None:
        code = self.code
        if color in code.batched:
            self.fifo[color].append(w)
            self.pump(color, now)
            return
        if w is END:
            control = code.control.get(color)
            if control is not None:
                self.fifo[color].append(w)
                self.push_trigger(now, control.name, color)
            return  # an end mark with no control task is dropped
        self.fifo[color].append(w)
        data = code.data.get(color)
        if data is not None:
            self.push_trigger(now, data.name, color)
            return
        ev = self.arrival.pop(color, None)
        if ev is not None:
            ev.succeed()

    def pump(self, color: int, now: int) -> None:
        """Land the queued wavelets of a batched color in its array, in order, until the
        batch is full or an end mark ends it; then trigger its task (the end mark's control
        task once that batch is done)."""
        if color in self.closed:
            return
        task = self.code.batched[color]
        assert task.batch is not None and task.land is not None
        fifo, land = self.fifo[color], self.flat[task.land]
        while fifo:
            w = fifo[0]
            if w is END:
                if self.fill[color]:
                    break
                if color in self.end_waiting:
                    return
                control = self.code.control.get(color)
                if control is not None:
                    self.end_waiting.add(color)
                    self.push_trigger(now, control.name, color)
                    return
            elif task.sparse and not self.window(task, color, w, land):
                break  # beyond the window: it waits for the next one
            fifo.popleft()
            if self.fifo_waiters[color]:
                self.fabric.release(self.fifo_waiters[color])
            if w is END:
                continue
            slot = w[1] - self.base[color] if task.sparse else self.fill[color]  # type: ignore[operator]
            land[slot] = w[0]
            self.fill[color] += 1
            if not task.sparse and self.fill[color] == task.batch:
                break
        full = not task.sparse and self.fill[color] == task.batch
        if self.fill[color] and (full or (fifo and (fifo[0] is END or task.sparse))):
            self.closed.add(color)
            self.push_trigger(now, task.name, color)

    def window(self, task: Task, color: int, w: Wavelet, land: np.ndarray) -> bool:
        """Whether the sparse wavelet ``w`` lands in the current window of ``batch``
        indices (aligned to multiples of it), opening one if there is none."""
        assert task.batch is not None and w is not END
        index = w[1]
        if index is None:
            raise self.error(f"sparse data task {task.name} received a wavelet without an "
                             f"index on color {color}")
        base = self.base.get(color)
        if base is None:
            if task.once:
                if color in self.windows_opened:
                    raise self.error(f"sparse batched task {task.name} is declared 'once', "
                                     f"but a second window opens on color {color} (index "
                                     f"{index})")
                self.windows_opened.add(color)
            else:
                land[:task.batch] = 0
            self.base[color] = task.batch * (index // task.batch)
            return True
        if index < base:
            raise self.error(f"sparse data task {task.name}: index {index} arrived after a "
                             f"larger one in the same group on color {color}")
        return index < base + task.batch

    def take(self, color: int, *, mark: bool) -> Wavelet:
        """Remove the first value (or end mark) of a color's queue and free its slot."""
        fifo = self.fifo[color]
        for k, w in enumerate(fifo):
            if (w is END) == mark:
                del fifo[k]
                if self.fifo_waiters[color]:
                    self.fabric.release(self.fifo_waiters[color])
                return w
        raise AssertionError("take() without a matching wavelet")  # pragma: no cover

    def has_value(self, color: int) -> bool:
        fifo = self.fifo[color]
        return bool(fifo) and (fifo[0] is not END or any(w is not END for w in fifo))

    # ------------------------------------------------------------------- fabric

    def ramp(self, color: int) -> Buffer:
        buf = self.fabric.buffers.get((self.pe, color, "RAMP"))
        if buf is None:
            raise self.error(f"sends on color {color}, but {self.name()} has no route for "
                             f"color {color} from RAMP: a wavelet without a route")
        return buf

    def push(self, buf: Buffer, w: Wavelet, what: str) -> Gen:
        """Put a wavelet into the router's RAMP buffer, stalling while it is full."""
        if len(buf.q) >= buf.cap:
            t0 = self.now()
            self.waiting = f"waits to send on color {buf.color} ({what}); the router is full"
            while len(buf.q) >= buf.cap:
                ev = self.timer.signal()
                buf.waiters.append(ev)
                yield ev
            self.waiting = None
            self.stall += self.now() - t0
        buf.q.append((self.now(), w))
        self.sent += 1
        if len(buf.q) == 1 and not buf.scheduled:
            self.fabric.forward(buf)

    def send(self, color: int, w: Wavelet) -> Gen:
        buf = self.ramp(color)
        yield from self.sync()
        yield from self.push(buf, w, "send_end" if w is END else "send")
        self.clock = self.now()
        self.charge(self.config.scalar_op)

    def await_value(self, color: int, what: str) -> Gen:
        if self.has_value(color):
            return
        t0 = self.now()
        self.waiting = f"waits to receive on color {color} ({what})"
        while not self.has_value(color):
            ev = self.timer.signal()
            self.arrival[color] = ev
            yield ev
        self.waiting = None
        self.wait += self.now() - t0

    def recv(self, color: int) -> Gen:
        yield from self.sync()
        yield from self.await_value(color, "recv")
        w = self.take(color, mark=False)
        assert w is not None
        self.clock = self.now()
        self.charge(self.config.scalar_op)
        return w[0]

    # --------------------------------------------------------------------- SIMD

    def simd_check(self, info: SimdInfo, v: int, bases: Mapping[str, int]
                   ) -> tuple[Variant, int]:
        """The variant and cost of an instruction, its operands checked to lie within their
        arrays (and the cycle limit not to be passed)."""
        var = info.variant(v, MAX_SIMD_ELEMENTS)
        cost = self.config.simd_startup + -(-var.ops // info.width)
        if self.clock + cost > self.limit:
            self.clock += cost
            self.check_limit()
        for k, o in enumerate(info.operands):
            if o.kind != "array":
                continue
            assert o.array is not None
            base = bases[o.array]
            size = self.flat[o.array].size
            if base + var.low[k] < 0 or base + var.high[k] >= size:
                idx = var.offsets[k] + base
                bad = int(idx[(idx < 0) | (idx >= size)][0])
                shape = "".join(f"[{n}]" for n in self.arrays[o.array].shape)
                raise self.error(f"simd {info.config.name} {list(var.sizes)} with base {base} "
                                 f"accesses {o.array} at flat index {bad}, outside the array "
                                 f"{o.array}{shape} ({size} elements)")
        return var, cost

    @staticmethod
    def simd_index(info: SimdInfo, var: Variant, bases: Mapping[str, int]
                   ) -> dict[int, np.ndarray]:
        """The flat element indices of every array operand, in domain order."""
        return {k: var.offsets[k] + bases[o.array]  # type: ignore[index]
                for k, o in enumerate(info.operands) if o.kind == "array"}

    def simd(self, info: SimdInfo, v: int, bases: Mapping[str, int], scalar: Any) -> None:
        """A SIMD instruction on local memory: one step of the clock, numpy for the work
        (operands as strided views where their elements are evenly spaced)."""
        var, cost = self.simd_check(info, v, bases)
        self.clock += cost
        self.busy += cost
        self.simd_ops += var.ops
        self.simd_flops += var.ops * FLOPS[info.config.op]
        self.simd_runs += 1
        config = info.config
        dtype = NUMPY[info.dtype]
        dst = self.flat[config.dst.array]  # type: ignore[index]
        if not var.dst_unique or info.reads_its_destination:
            index = self.simd_index(info, var, bases)
            if not var.dst_unique and config.op == "fmac" and not info.reads_its_destination:
                self.simd_accumulate(info, index, scalar)
                return
            if not var.dst_unique or self.hazard(info, index):
                self.simd_sequential(info, var, index, scalar)
                return
        steps = var.steps

        def where(k: int) -> Any:
            o = info.operands[k]
            base = bases[o.array]  # type: ignore[index]
            return var.span(k, base) if k in steps else var.offsets[k] + base

        def operand(k: int) -> Any:
            o = info.operands[k]
            if o.kind == "array":
                x = self.flat[o.array][where(k)]  # type: ignore[index]
                return x if x.dtype == dtype else x.astype(dtype)
            return dtype(scalar)

        at = where(0)
        if config.op == "fill":
            dst[at] = dtype(scalar)
            return
        a = operand(1)
        b: Any = operand(2) if len(info.operands) > 2 else None
        match config.op:
            case "fmac":
                d = dst[at]
                d = d if d.dtype == dtype else d.astype(dtype)
                result = d + a * b
            case "fmul":
                result = a * b
            case "fadd":
                result = a + b
            case "fsub":
                result = a - b
            case "fmax":
                result = np.maximum(a, b)
            case _:
                result = a
        dst[at] = result

    def simd_accumulate(self, info: SimdInfo, index: dict[int, np.ndarray], scalar: Any
                        ) -> None:
        """A multiply-add into repeated destinations (a reduction) whose sources are
        other arrays: the products at once, then the additions in domain order, each
        rounded to the compute type (``np.add.at`` adds unbuffered, in index order), which
        is what element by element computes."""
        dtype = NUMPY[info.dtype]
        vals = []
        for k in (1, 2):
            o = info.operands[k]
            if o.kind == "array":
                x = self.flat[o.array][index[k]]  # type: ignore[index]
                vals.append(x if x.dtype == dtype else x.astype(dtype))
            else:
                vals.append(dtype(scalar))
        products = np.multiply(vals[0], vals[1], dtype=dtype)
        dst = self.flat[info.config.dst.array]  # type: ignore[index]
        assert dst.dtype == dtype  # the compute type is the destination's
        np.add.at(dst, index[0], np.broadcast_to(products, index[0].shape))

    def hazard(self, info: SimdInfo, index: dict[int, np.ndarray]) -> bool:
        """Does some element read what an earlier element of the same instruction wrote?"""
        dst_name = info.config.dst.array
        dst = index[0]
        for k, o in enumerate(info.operands[1:], start=1):
            if o.kind != "array" or o.array != dst_name:
                continue
            src = index[k]
            if np.array_equal(src, dst):
                continue
            order = np.argsort(dst, kind="stable")
            sorted_dst = dst[order]
            pos = np.clip(np.searchsorted(sorted_dst, src), 0, dst.size - 1)
            hit = sorted_dst[pos] == src
            writer = order[pos]
            if np.any(hit & (writer < np.arange(src.size))):
                return True
        return False

    def simd_sequential(self, info: SimdInfo, var: Variant, index: dict[int, np.ndarray],
                        scalar: Any) -> None:
        """Element by element in domain order, for instructions that read their own writes."""
        dtype = NUMPY[info.dtype]
        fn = elementwise(info.config.op)
        operands = info.operands
        dst = self.flat[info.config.dst.array]  # type: ignore[index]
        for e in range(var.ops):
            vals = []
            for k in range(1, len(operands)):
                o = operands[k]
                vals.append(dtype(self.flat[o.array][index[k][e]]) if o.kind == "array"  # type: ignore[index]
                            else dtype(scalar))
            if info.config.op == "fill":
                vals = [dtype(scalar)]
            a = vals[0]
            b = vals[1] if len(vals) > 1 else None
            d = dtype(dst[index[0][e]]) if info.config.op == "fmac" else None
            dst[index[0][e]] = fn(d, a, b)

    def simd_fabric(self, info: SimdInfo, v: int, bases: Mapping[str, int], scalar: Any
                    ) -> Gen:
        """A SIMD instruction with fabric operands: element ``k`` is computed in cycle
        ``start + startup + k // width`` at the earliest, and not before its ``in(c)``
        wavelets arrived; ``out(c)`` results enter the router in that cycle. An
        ``out(c, index)`` result carries its innermost coordinate as the index; with
        ``end``, an end mark follows each innermost row, taking the next cycle's slot."""
        var, cost = self.simd_check(info, v, bases)
        index = self.simd_index(info, var, bases)
        config = info.config
        out = self.ramp(config.dst.color) if config.dst.kind == "out" else None  # type: ignore[arg-type]
        yield from self.sync()
        dtype = NUMPY[info.dtype]
        fn = elementwise(config.op)
        operands = info.operands
        dst = self.flat[config.dst.array] if config.dst.kind == "array" else None  # type: ignore[index]
        indexed = config.dst.kind == "out" and config.dst.indexed
        ends = config.dst.kind == "out" and config.dst.ends
        row = var.sizes[-1] if var.sizes else 1
        self.busy += cost + (var.ops // row if ends else 0)  # (end marks take a slot)
        self.simd_ops += var.ops
        self.simd_flops += var.ops * FLOPS[config.op]
        self.simd_runs += 1
        first = self.now() + self.config.simd_startup
        last = first
        width = info.width
        marks = 0
        env = self.sim
        waits = [(k, o.color, f"in({o.color}) of simd {config.name}") for k, o in ins_ops(info)]
        what = f"out of simd {config.name}"
        scalar_value = dtype(scalar) if scalar is not None else None
        # per source: the array and its indices, or None for an in(c) or the scalar
        plan = [(self.flat[o.array], index[k]) if o.kind == "array" else None  # type: ignore[index]
                for k, o in enumerate(operands) if k > 0]
        fill, fmac = config.op == "fill", config.op == "fmac"
        dst_index = index.get(0)
        for e in range(var.ops):
            cycle = max(last, first + e // width + marks)
            now = int(env._now)
            if cycle > now:
                yield self.timer.timeout(cycle - now)
            got: dict[int, Any] = {}
            for k, color, waiting in waits:
                assert color is not None
                if not self.has_value(color):
                    yield from self.await_value(color, waiting)
                w = self.take(color, mark=False)
                assert w is not None
                got[k] = dtype(w[0])
            vals = [dtype(src[0][src[1][e]]) if src is not None else
                    got.get(k, scalar_value)
                    for k, src in enumerate(plan, start=1)]
            if fill:
                vals = [scalar_value]
            d = dtype(dst[dst_index[e]]) if fmac and dst is not None else None  # type: ignore[index]
            result = fn(d, vals[0], vals[1] if len(vals) > 1 else None)
            if dst is not None:
                dst[dst_index[e]] = result  # type: ignore[index]
            elif indexed:
                assert out is not None
                yield from self.push(out, (float(result), e % row), what)
                if ends and (e + 1) % row == 0:
                    marks += 1
                    yield from self.push(out, END, what)
            else:
                assert out is not None
                yield from self.push(out, (float(result), None), what)
            last = int(env._now)
            self.check_limit_at(last)
        self.clock = last + 1

    def check_limit_at(self, t: int) -> None:
        if t > self.limit:
            self.clock = t
            self.check_limit()


# ---------------------------------------------------------------------- simulation


def ins_ops(info: SimdInfo) -> list[tuple[int, Any]]:
    """The ``in(c)`` operands of an instruction with their positions."""
    return [(k, o) for k, o in enumerate(info.operands) if o.kind == "in"]


def simulate(module: PeModule, inputs: Mapping[str, np.ndarray],
             outputs: Mapping[str, TensorInfo], *, config: FabricConfig | None = None,
             max_seconds: float = MAX_SECONDS, watch: Watcher | None = None) -> SimResult:
    """Run ``module`` on ``inputs``; return the outputs, cycles and statistics.

    ``outputs`` gives the shape and type of every output tensor the module produces
    (by ``store`` or output streams). The module must have passed
    :func:`pesim.verify.verify_module`. ``watch`` is called with the progress every few
    thousand events. Ctrl-C (KeyboardInterrupt) during the event loop ends the run with
    a partial result (``complete`` False, statistics up to that cycle, no outputs).
    """
    config = config or FabricConfig()
    wall = time.perf_counter()
    with np.errstate(all="ignore"):
        run = _Run(module, inputs, outputs, config, Deadline(max_seconds))
        events = run.run(watch)
        result_outputs = run.collect() if run.complete else {}
    start, end = run.span()
    if not run.complete:
        end = max(end, int(run.env.now))
    pes = {pe: core_stats(core) for pe, core in run.fabric.cores.items()}
    links = {key: link.count for key, link in run.fabric.links.items() if link.count}
    return SimResult(module.name, result_outputs, start, end, events,
                     time.perf_counter() - wall, pes, links, config, run.complete)


def simulation_bytes(module: PeModule, locations: Locations | None = None) -> tuple[int, int]:
    """The PEs that run a program and the estimated memory of simulating ``module``:
    their local arrays and bookkeeping (``docs/limits.md``). PEs are counted by isl, not
    listed, so this is quick on any mesh."""
    pes = total = 0
    if module.width < 1 or module.height < 1:
        return 0, 0  # an empty mesh: verify_module says so
    for program in module.programs:
        loc = (locations or {}).get(("pes", program.name))
        count = placed_pes(program, module.width, module.height, loc).count_val().to_python()
        arrays = sum(math.prod(a.shape) * (2 if a.dtype == "float16" else 4)
                     for a in program.arrays)
        pes += count
        total += count * (SIM_BYTES_PER_PE + arrays + SIM_BYTES_PER_ROUTE * len(program.routes))
    return pes, total


def check_budget(module: PeModule, locations: Locations | None = None) -> None:
    """Refuse, before anything is allocated, a simulation whose estimated memory exceeds
    :data:`MAX_SIM_BYTES`."""
    pes, total = simulation_bytes(module, locations)
    if total > MAX_SIM_BYTES:
        raise LimitError(f"simulating module {module.name} ({pes} PEs running programs) needs "
                         f"about {total} bytes of memory for local arrays and bookkeeping, "
                         f"more than the limit of {MAX_SIM_BYTES}; simulate a smaller mesh",
                         (locations or {}).get(("module",)))


def core_stats(core: Core) -> PeStats:
    return PeStats(core.code.program.name, core.busy, core.simd_ops, core.simd_runs,
                   core.scalar, core.sent, core.stall, core.wait, core.tasks_run, core.flops,
                   core.simd_flops, {t: (n, c) for t, (n, c) in core.per_task.items()})


class _Run:
    """Builds the fabric for one run, drives the event loop and collects the results."""

    WATCH_EVERY = 1 << 12  # events between calls of the progress watcher (a power of 2)

    def __init__(self, module: PeModule, inputs: Mapping[str, np.ndarray],
                 outputs: Mapping[str, TensorInfo], config: FabricConfig, deadline: Deadline):
        self.module, self.inputs, self.outputs, self.config = module, inputs, outputs, config
        self.deadline = deadline
        self.env = simpy.Environment()
        self.fabric = Fabric(self.env, config, module.width, module.height, deadline)
        self.sinks: list[Sink] = []
        self.source_starts: list[int] = []
        self.sets: dict[tuple[str, str, int], isl.Set] = {}
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
        # collector from scanning them again and again (12 % of a 64 x 64 GEMV's time)
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
            [f"{b.describe()} still has {len(b.q)} wavelets to send"
             for b in self.fabric.sources if b.q],
            [f"{len(b.q)} wavelets wait in the router of {b.describe()}"
             for b in self.fabric.buffers.values() if b.q],
            [f"{c.name()} leaves {len(q)} wavelets on color {color} unread"
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

"""Routers, links, external sources and sinks of the simulated mesh.

Routers are not processes: a router input buffer (per PE, color and input port,
``buffer_wavelets`` deep) forwards its head wavelet in a callback when every target can
take it (multicast is atomic: all targets in the same cycle), each link carrying one
wavelet per cycle and delaying it ``hop_cycles``. A full target registers the buffer as
a waiter and wakes it when space frees (backpressure). External sources are buffers
that hold their whole stream; sinks are targets that record what arrives.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import simpy

from dtg.errors import SimulationError
from dtg.lair.limits import counted
from dtg.pe.fabric import FabricConfig
from dtg.pesim.clock import Clock
from dtg.pesim.code import END
from dtg.pesim.trace import Trace
from dtg.pesim.verify import pe_name

if TYPE_CHECKING:
    from dtg.pesim.core import Core

Gen = Generator[Any, Any, Any]
Pe = tuple[int, int]
BufferKey = tuple[Pe, int, str]  # a router input buffer: (PE, color, input port)
Wavelet = tuple[float, int | None] | None  # (value, index or None) or END (None)
STEP = {"N": (0, -1), "S": (0, 1), "E": (1, 0), "W": (-1, 0)}
OPPOSITE = {"N": "S", "S": "N", "E": "W", "W": "E"}
MAX_LISTED = 4  # items of each kind listed in an error


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
        self.trace: Trace | None = None  # set before the cores are made, to trace a run

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
        if self.trace is not None:  # wavelets over links (not down a ramp into a core)
            self.trace.hop(now, sum(1 for t in targets if type(t) is not ToCore))
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
        self.times: dict[tuple[int, ...], int] = {}  # the cycle each value arrived
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
                                      f"{counted(len(self.order), 'value')}")
            self.values[self.order[self.count]] = w[0]
            self.times[self.order[self.count]] = t
            self.count += 1
            if self.count == len(self.order):
                self.done = t
            return
        if w is END:
            self.group += 1
            if self.group > len(self.groups):
                raise SimulationError(f"{self.where()} received more end marks than its "
                                      f"{counted(len(self.groups), 'group')}")
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
        self.times[element] = t

    def missing(self) -> str | None:
        if self.done is not None:
            return None
        if self.kind == "dense":
            return f"{self.where()} received {self.count} of {counted(len(self.order), 'value')}"
        return f"{self.where()} received {self.group} of {counted(len(self.groups), 'end mark')}"

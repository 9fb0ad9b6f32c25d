"""A PE's core: its state, its statistics and its simpy process.

Each core is one simpy process that runs ``main`` and then its triggered tasks one at a
time; scalar code advances the core's own clock without events (see :mod:`pesim.code`)
and synchronizes with simulated time only at fabric interactions and task ends.
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from dtg.errors import SimulationError
from dtg.pe.ir import Task
from dtg.pesim.clock import Wake
from dtg.pesim.code import END, CycleLimitError, ProgramCode, SimdInfo
from dtg.pesim.routers import Buffer, Fabric, Gen, Pe, Wavelet
from dtg.pesim.simd_unit import run_simd, run_simd_fabric
from dtg.pesim.verify import pe_name

NO_COLORS: frozenset[int] = frozenset()


def once_twice(task: str, ring: int, windows: bool, color: int, index: int | None) -> str:
    """The error of a 'once' batch opening more batches than its ring has slots (both
    engines)."""
    what = "window" if windows else "batch"
    at = f" (index {index})" if index is not None else ""
    if ring == 1:
        return (f"sparse batched task {task} is declared 'once', but a second {what} "
                f"opens on color {color}{at}")
    return (f"sparse batched task {task} is declared 'once' with a ring of {ring}, but "
            f"{what} {ring + 1} opens on color {color}{at}")


class Core:
    """A PE's core: its state, its statistics and its simpy process."""

    __slots__ = ("arrays", "arrival", "base", "busy", "clock", "closed_batches", "code", "config",
                 "configured", "end", "end_waiting", "env", "fabric", "fifo", "fifo_waiters",
                 "fill", "flat", "flops", "idle", "limit", "marks", "marks_ahead", "opened", "pe",
                 "pending",
                 "per_task", "pos",
                 "scalar", "sent",
                 "seq", "setup_cycles", "sim", "simd_flops", "simd_ops", "simd_runs", "stall",
                 "start", "task", "tasks_run", "timer", "trace", "triggers", "value",
                 "wait", "waiting", "waiting_since")

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
        # batched colors: wavelets landed in the open batch so far
        self.fill: defaultdict[int, int] = defaultdict(int)
        self.base: dict[int, int] = {}  # sparse batches: the first index of the window
        # batches of whole groups: end marks landed in the open batch, position in its group
        self.marks: dict[int, int] = {}
        self.pos: dict[int, int] = {}
        # closed batches whose task has not ended (count, index, slot), oldest first;
        # batches closed so far; batches opened so far ('once')
        self.pending: defaultdict[int, deque[tuple[int, int, int]]] = defaultdict(deque)
        self.closed_batches: defaultdict[int, int] = defaultdict(int)
        self.opened: defaultdict[int, int] = defaultdict(int)
        # on a ring: end marks landed whose control task has not run (at most N)
        self.marks_ahead: defaultdict[int, int] = defaultdict(int)
        # colors whose end mark awaits its control task (made only where a program has
        # batches: most PEs need none)
        self.end_waiting: set[int] = set() if code.batched else NO_COLORS  # type: ignore[assignment]
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
        self.trace = fabric.trace  # (None unless the run is traced)
        self.waiting_since = 0  # the cycle the current wait or stall began

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
                if self.trace is not None:
                    self.trace.span(self.pe, "main", "task", 0, self.clock)
            yield from self.sync()
            self.end = self.now()
        tasks, sim, timer = code.tasks, self.sim, self.timer
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
            began = self.clock
            if task.batch is not None:
                assert color is not None
                count, index, slot = self.pending[color][0]
                self.env["count"] = count
                self.env["slot"] = slot
                if task.sparse:
                    if task.groups is None:
                        self.env["index"] = index
                    if not task.once:  # the core clears the landing array for the next window
                        assert task.land is not None
                        land = self.code.arrays[task.land]
                        width = self.config.simd_width(land.dtype, "fill")
                        slots = task.slot_size
                        self.clock += self.config.simd_startup + -(-slots // width)
                        self.busy += self.config.simd_startup + -(-slots // width)
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
                batched = self.code.batched.get(color)
                if batched is not None and self.marks_ahead[color]:
                    # (a mark a ring took on landing: their tasks come first, in order)
                    self.marks_ahead[color] -= 1
                else:
                    self.take(color, mark=True)
                    if batched is not None:
                        self.end_waiting.discard(color)
                if batched is not None:
                    self.pump(color, self.clock)
            self.clock += self.config.task_dispatch
            self.busy += self.config.task_dispatch
            self.tasks_run += 1
            body = tasks[name]
            if body.gen is None:
                body.plain(self)  # type: ignore[misc]  # (most tasks: no generator made)
            else:
                yield from body.gen(self)
            profile = self.per_task.setdefault(name, [0, 0])
            profile[0] += 1
            profile[1] += self.busy - busy_before
            if self.trace is not None:
                self.trace.span(self.pe, name, "task", began, self.clock,
                                {"color": color} if color is not None else None)
            self.check_limit()
            delay = self.clock - int(sim._now)
            if delay > 0:
                yield timer.timeout(delay)
            else:
                self.clock = int(sim._now)
            self.end = int(sim._now)
            if task.batch is not None:
                assert color is not None
                self.pending[color].popleft()
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
        """Land the queued wavelets of a batched color in its array, in order, while a
        slot of its ring is free; a batch is closed when full, or when an end mark or (on
        a sparse color) a wavelet beyond its window follows it, and triggers its task
        (an end mark's control task runs after the batch it closes)."""
        task = self.code.batched[color]
        assert task.batch is not None and task.land is not None
        pending = self.pending[color]
        if len(pending) >= task.ring:
            return
        fifo, land = self.fifo[color], self.flat[task.land]
        if task.groups is not None:
            self.pump_groups(task, color, now, fifo, land)
            return
        while fifo and len(pending) < task.ring:
            w = fifo[0]
            if w is END:
                if self.fill[color]:
                    self.close(task, color, now)
                    continue
                if color in self.end_waiting:
                    return
                control = self.code.control.get(color)
                if control is not None:
                    if task.ring == 1 or self.marks_ahead[color] == task.ring:
                        # (its wavelets wait for the control task)
                        self.end_waiting.add(color)
                        self.push_trigger(now, control.name, color)
                        return
                    self.marks_ahead[color] += 1  # (on a ring, up to N marks land ahead)
                    self.push_trigger(now, control.name, color)
            elif task.sparse and not self.window(task, color, w, land):
                self.close(task, color, now)  # beyond the window: it waits for the next one
                continue
            fifo.popleft()
            if self.fifo_waiters[color]:
                self.fabric.release(self.fifo_waiters[color])
            if w is END:
                continue
            at = w[1] - self.base[color] if task.sparse else self.fill[color]  # type: ignore[operator]
            land[self.open_slot(task, color) + at] = w[0]
            self.fill[color] += 1
            if not task.sparse and self.fill[color] == task.batch:
                self.close(task, color, now)

    def open_slot(self, task: Task, color: int) -> int:
        """Where the open batch lands in its color's landing array."""
        return self.closed_batches[color] % task.ring * task.slot_size

    def close(self, task: Task, color: int, now: int) -> None:
        """Close the open batch of ``color`` and trigger its task."""
        assert task.batch is not None
        count = task.batch if task.sparse and task.groups is None else self.fill[color]
        self.pending[color].append((count, self.base.pop(color, 0),
                                    self.open_slot(task, color)))
        self.closed_batches[color] += 1
        self.fill[color] = 0
        self.marks.pop(color, None)
        self.push_trigger(now, task.name, color)

    def open_batch(self, task: Task, color: int, land: np.ndarray, index: int | None) -> None:
        """Open a batch: a sparse batch's slot is cleared, or (``once``) checked to be
        opened for the first time."""
        if not task.sparse:
            return
        if task.once:
            if self.opened[color] >= task.ring:
                raise self.error(once_twice(task.name, task.ring, task.groups is None, color,
                                                 index))
            self.opened[color] += 1
            return
        at = self.open_slot(task, color)
        land[at:at + task.slot_size] = 0

    def pump_groups(self, task: Task, color: int, now: int, fifo: deque[Wavelet],
                    land: np.ndarray) -> None:
        """Land batches of whole groups: the k-th wavelet (sparse: the one with index k)
        of the batch's j-th group at ``land[slot + j * batch + k]``; its G-th end mark
        closes it."""
        assert task.batch is not None and task.groups is not None
        size = task.batch
        pending = self.pending[color]
        while fifo and len(pending) < task.ring:
            w = fifo.popleft()
            if self.fifo_waiters[color]:
                self.fabric.release(self.fifo_waiters[color])
            marks = self.marks.get(color)
            if marks is None:  # the first wavelet or mark of a batch opens it
                self.open_batch(task, color, land, None)
                marks = self.marks[color] = 0
                self.pos[color] = 0
            if w is END:
                self.marks[color] = marks + 1
                self.pos[color] = 0
                if marks + 1 == task.groups:
                    self.close(task, color, now)
                continue
            if task.sparse:
                k = w[1]
                if k is None:
                    raise self.error(f"sparse data task {task.name} received a wavelet "
                                     f"without an index on color {color}")
            else:
                k = self.pos[color]
            if not 0 <= k < size:
                what = f"index {k}" if task.sparse else f"wavelet {k + 1} of a group"
                raise self.error(f"batched task {task.name} takes groups of up to {size} "
                                 f"wavelets (indices 0..{size - 1}), but {what} arrived on "
                                 f"color {color}")
            land[self.open_slot(task, color) + marks * size + k] = w[0]
            self.pos[color] += 1
            self.fill[color] += 1

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
            self.open_batch(task, color, land, index)
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
            t0 = self.waiting_since = self.now()
            self.waiting = f"waits to send on color {buf.color} ({what}); the router is full"
            while len(buf.q) >= buf.cap:
                ev = self.timer.signal()
                buf.waiters.append(ev)
                yield ev
            self.waiting = None
            self.stall += self.now() - t0
            if self.trace is not None:
                self.trace.span(self.pe, f"stall color {buf.color}", "stall", t0, self.now())
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
        t0 = self.waiting_since = self.now()
        self.waiting = f"waits to receive on color {color} ({what})"
        while not self.has_value(color):
            ev = self.timer.signal()
            self.arrival[color] = ev
            yield ev
        self.waiting = None
        self.wait += self.now() - t0
        if self.trace is not None:
            self.trace.span(self.pe, f"wait color {color}", "wait", t0, self.now())

    def recv(self, color: int) -> Gen:
        yield from self.sync()
        yield from self.await_value(color, "recv")
        w = self.take(color, mark=False)
        assert w is not None
        self.clock = self.now()
        self.charge(self.config.scalar_op)
        return w[0]

    # --------------------------------------------------------------------- SIMD

    def simd(self, info: SimdInfo, v: int, bases: Mapping[str, int], scalar: Any,
             length: int | None = None) -> None:
        run_simd(self, info, v, bases, scalar, length)

    def simd_fabric(self, info: SimdInfo, v: int, bases: Mapping[str, int], scalar: Any,
                    length: int | None = None) -> Gen:
        yield from run_simd_fabric(self, info, v, bases, scalar, length)

"""A traced run on the compiled engine: the kernel's records (:mod:`pesim.fast.record`)
taken between slices into a :class:`pesim.trace.Trace`, named as the simpy engine
names them, so that both engines write the same trace file.

The records live in a fixed array that the kernel hands back when it is half full. One
event that records more than the other half holds (a task issuing that many SIMD
instructions without waiting) cannot be split, so the records it lost are counted and
the run is made again with room for them (:class:`TraceOverflow`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dtg.pe.ir import PeModule
from dtg.pesim.fast.layout import (
    G_HOP_COUNT,
    G_HOP_CYCLE,
    G_NOW,
    G_TRACE_LOST,
    G_TRACE_N,
    G_TRACING,
    NONE,
    R_HOP,
    R_MAIN,
    R_SIMD,
    R_STALL,
    R_TASK,
    TRACE_FIELDS,
    W_RECV,
    W_SEND,
    W_SEND_END,
    W_SIMD_IN,
    W_SIMD_OUT,
    WAIT_COLOR,
    WAIT_WHAT,
    WAITING,
    WAITING_SINCE,
    State,
)
from dtg.pesim.fast.lower import Tables
from dtg.pesim.trace import Trace, Window

RECORDS = 1 << 16  # records in a traced run's array (6 int64 each: 3 MiB)


class TraceOverflow(Exception):
    """One event recorded more than the records hold; ``needed`` would have held them."""

    def __init__(self, needed: int) -> None:
        super().__init__(f"{needed} trace records in one event")
        self.needed = needed


def waiting_text(state: State, c: int, configs: list[str]) -> str | None:
    """What core ``c`` waits for, in the simpy engine's words (``Core.waiting``)."""
    what, color = int(state.core[c, WAITING]), int(state.core[c, WAIT_COLOR])
    detail = int(state.core[c, WAIT_WHAT])
    if what == W_SEND:
        return f"waits to send on color {color} (send); the router is full"
    if what == W_SEND_END:
        return f"waits to send on color {color} (send_end); the router is full"
    if what == W_SIMD_OUT:
        return (f"waits to send on color {color} (out of simd {configs[detail]}); the "
                "router is full")
    if what == W_RECV:
        return f"waits to receive on color {color} (recv)"
    if what == W_SIMD_IN:
        return f"waits to receive on color {color} (in({color}) of simd {configs[detail]})"
    return None


@dataclass
class Timeline:
    """The trace of one run, and the names its records refer to by number."""

    trace: Trace
    pes: list[tuple[int, int]]  # per core
    tasks: list[str]  # per task row of the lowered tables
    configs: list[str]  # per SIMD configuration row

    @classmethod
    def of(cls, module: PeModule, tables: Tables, pes: list[tuple[int, int]],
           window: Window | None = None) -> Timeline:
        tasks = [""] * int(sum(len(info.tasks) for info in tables.info))
        for prog, info in enumerate(tables.info):
            first = int(tables.programs[prog, 0])
            tasks[first:first + len(info.tasks)] = info.tasks
        configs = [c.name for p in module.programs for c in p.configs]
        return cls(Trace(window), pes, tasks, configs)

    def start(self, state: State, records: int) -> State:
        """``state`` recording into an array of ``records`` records."""
        state.g[G_TRACING] = 1
        state.g[G_TRACE_N] = state.g[G_TRACE_LOST] = 0
        state.g[G_HOP_CYCLE] = NONE
        return state._replace(trace=np.zeros((records, TRACE_FIELDS), dtype=np.int64))

    def take(self, state: State) -> None:
        """Move the records into the trace and empty the array."""
        n, lost = int(state.g[G_TRACE_N]), int(state.g[G_TRACE_LOST])
        if lost:
            raise TraceOverflow(n + lost)
        trace, pes, tasks, configs = self.trace, self.pes, self.tasks, self.configs
        rows = state.trace[:n]
        if trace.window is not None:  # (what the window drops is not made into slices)
            rows = rows[self._kept(rows, trace.window)]
        for kind, c, what, start, end, arg in rows.tolist():
            if kind == R_HOP:
                trace.hop(start, arg)
            elif kind == R_MAIN:
                trace.span(pes[c], "main", "task", start, end)
            elif kind == R_TASK:
                trace.span(pes[c], tasks[what], "task", start, end,
                           {"color": arg} if arg != NONE else None)
            elif kind == R_SIMD:
                trace.span(pes[c], f"simd {configs[what]}", "simd", start, end, {"ops": arg})
            elif kind == R_STALL:
                trace.span(pes[c], f"stall color {what}", "stall", start, end)
            else:
                trace.span(pes[c], f"wait color {what}", "wait", start, end)
        state.g[G_TRACE_N] = 0

    def _kept(self, rows: np.ndarray, window: Window) -> np.ndarray:
        kind, start, end = rows[:, 0], rows[:, 3], rows[:, 4]
        hop = kind == R_HOP
        keep = np.ones(len(rows), dtype=bool)
        if window.cycles is not None:
            first, past = window.cycles
            keep &= np.where(hop, (first <= start) & (start < past),
                             (start < past) & (np.maximum(end, start + 1) > first))
        if window.x is not None or window.y is not None:
            where = np.array(self.pes, dtype=np.int64).reshape(-1, 2)[
                np.where(hop, 0, rows[:, 1])]
            for axis, bounds in enumerate((window.x, window.y)):
                if bounds is not None:
                    keep &= hop | ((bounds[0] <= where[:, axis]) & (where[:, axis] < bounds[1]))
        return keep

    def finish(self, state: State) -> None:
        """The last records, and the wavelet hops of the last cycle that had any."""
        self.take(state)
        if state.g[G_HOP_CYCLE] >= 0:
            self.trace.hop(int(state.g[G_HOP_CYCLE]), int(state.g[G_HOP_COUNT]))
            state.g[G_HOP_CYCLE] = NONE

    def ended(self, state: State) -> tuple[Trace, int]:
        """The trace of a run that ended in an error, with the waits it ended in (as the
        simpy engine records them), and the cycle it ended at."""
        self.finish(state)
        now = int(state.g[G_NOW])
        for c in np.flatnonzero(state.core[:, WAITING]).tolist():
            text = waiting_text(state, c, self.configs)
            self.trace.span(self.pes[c], f"{text} (unfinished)", "wait",
                            int(state.core[c, WAITING_SINCE]), now)
        return self.trace, now


__all__ = ["RECORDS", "Timeline", "TraceOverflow", "waiting_text"]

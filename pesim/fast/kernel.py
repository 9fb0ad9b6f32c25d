"""The compiled engine's event loop: events in (time, priority, sequence) order, run
in slices so that Python can show progress, keep the wall-time limit and take Ctrl-C
between them."""

from __future__ import annotations

import numpy as np

from dtg.pesim.fast.calendar import next_time, pop_event, schedule_event
from dtg.pesim.fast.errors import FastError
from dtg.pesim.fast.events import forward
from dtg.pesim.fast.interp import run_core
from dtg.pesim.fast.jit import compiled, internal
from dtg.pesim.fast.layout import (
    DEAD,
    EV_CORE,
    EV_FAIL,
    EV_FIRE,
    F_LIMIT,
    G_EVENTS,
    G_FAILED,
    G_NOW,
    G_PENDING,
    G_TRACE_N,
    G_TRACING,
    Program,
    ProgramRef,
    State,
    StateRef,
    borrowed,
)
from dtg.pesim.fast.view import view

DONE, SLICE_ENDED, PAST_LIMIT = range(3)


@internal
def _fail(s: State, c: int) -> None:
    """A core's code raised: as a simpy process that fails, the core runs no more and
    its error is raised when its failure event comes, after the events already
    scheduled for this cycle."""
    s.core[c, DEAD] = 1
    if s.deferred[0] == 0:
        s.deferred[:] = s.error
        s.g[G_FAILED] = c
    s.error[:] = 0
    schedule_event(s, s.g[G_NOW], EV_FAIL, c)


@compiled
def run_slice(p: Program, s: State, events: int, istack: np.ndarray,
              fstack: np.ndarray) -> int:
    """Run up to ``events`` events; DONE when none is left, PAST_LIMIT when the next one
    lies beyond the cycle limit, SLICE_ENDED otherwise (also early, when a traced run's
    records are half full). Errors raise FastError."""
    return _run(ProgramRef(*borrowed(p)), StateRef(*borrowed(s)), events, istack, fstack)  # type: ignore[arg-type]


@internal
def _run(program: Program, state: State, events: int, istack: np.ndarray,
         fstack: np.ndarray) -> int:
    p, s = view(program), view(state)
    limit = s.settings[F_LIMIT]
    for _ in range(events):
        if s.g[G_PENDING] == 0:
            return DONE
        t = next_time(s)
        if t > limit:
            return PAST_LIMIT
        what = pop_event(s, t)
        kind, obj = what & 3, what >> 2
        s.g[G_EVENTS] += 1
        if kind == EV_FIRE:
            forward(s, p, obj)
        elif kind == EV_CORE:
            try:
                run_core(p, s, obj, istack, fstack)
            except Exception:
                _fail(s, obj)
        else:  # EV_FAIL: the failed core's error, now
            s.error[:] = s.deferred
            raise FastError()
        if s.g[G_TRACING] and 2 * s.g[G_TRACE_N] >= s.trace.shape[0]:
            return SLICE_ENDED  # (for Python to take the records)
    return SLICE_ENDED


@compiled
def start(s: State, times: np.ndarray, kinds: np.ndarray, objs: np.ndarray) -> None:
    """Schedule the run's first events, in the order given."""
    _start(StateRef(*borrowed(s)), times, kinds, objs)  # type: ignore[arg-type]


@internal
def _start(state: State, times: np.ndarray, kinds: np.ndarray, objs: np.ndarray) -> None:
    s = view(state)
    for i in range(times.size):
        schedule_event(s, times[i], kinds[i], objs[i])


__all__ = ["DONE", "EV_CORE", "EV_FIRE", "PAST_LIMIT", "SLICE_ENDED", "run_slice", "start"]

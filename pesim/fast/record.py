"""What a traced run records in the compiled loop: the slices and wavelet hops of
:mod:`pesim.trace`, as rows of ``State.trace`` that Python turns into a
:class:`pesim.trace.Trace` between slices (:mod:`pesim.fast.timeline`).

Each call site stands where the simpy engine calls ``Trace.span`` or ``Trace.hop``, so
the records come in the simpy engine's order. An untraced run pays one test of
``G_TRACING`` per site.
"""

from __future__ import annotations

from dtg.pesim.fast.jit import internal
from dtg.pesim.fast.layout import (
    G_HOP_COUNT,
    G_HOP_CYCLE,
    G_TRACE_LOST,
    G_TRACE_N,
    R_HOP,
    State,
)


@internal
def record(s: State, kind: int, c: int, what: int, start: int, end: int, arg: int) -> None:
    """One record; counted as lost when the records are full (the run is then made
    again with room for more, :mod:`pesim.fast.timeline`)."""
    n = s.g[G_TRACE_N]
    if n >= s.trace.shape[0]:
        s.g[G_TRACE_LOST] += 1
        return
    s.trace[n, 0] = kind
    s.trace[n, 1] = c
    s.trace[n, 2] = what
    s.trace[n, 3] = start
    s.trace[n, 4] = end
    s.trace[n, 5] = arg
    s.g[G_TRACE_N] = n + 1


@internal
def hops(s: State, now: int, wavelets: int) -> None:
    """``Trace.hop``: wavelets moved over links in cycle ``now`` (forwards come in time
    order, so a cycle's count is summed here and recorded once)."""
    if s.g[G_HOP_CYCLE] == now:
        s.g[G_HOP_COUNT] += wavelets
        return
    if s.g[G_HOP_CYCLE] >= 0:
        record(s, R_HOP, -1, 0, s.g[G_HOP_CYCLE], 0, s.g[G_HOP_COUNT])
    s.g[G_HOP_CYCLE] = now
    s.g[G_HOP_COUNT] = wavelets


__all__ = ["hops", "record"]

"""The compiled engine's event calendar: events in (time, sequence) order, as simpy's
heap runs them, in constant time per event.

Every event of a run after its first instant has simpy's NORMAL priority, and sequence
numbers grow as events are scheduled, so the events of one cycle run in the order they
were scheduled: a first-in first-out list per cycle gives the heap's order without
comparing keys. The lists of the next ``WHEEL`` cycles are the slots of a timing wheel
(slot ``time % WHEEL``, a bitmap of the slots in use to find the next one); an event
further ahead waits in a small binary heap ordered by (time, sequence) and moves to its
slot when the time reaches ``time - WHEEL``, before any event of that time can be
scheduled directly, so that its earlier sequence number keeps it first.

``F_LAST_FIRST`` (for the tests) puts an event scheduled during the run before the
events already waiting for its cycle: the opposite of simpy's order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros as _trailing_zeros

from dtg.pesim.fast.errors import E_INTERNAL, FastError
from dtg.pesim.fast.jit import compiled, internal
from dtg.pesim.fast.layout import (
    F_LAST_FIRST,
    G_EID,
    G_FREE,
    G_LATE,
    G_NOW,
    G_PENDING,
    NONE,
    WHEEL,
    State,
)

trailing_zeros = cast(Callable[[Any], int], _trailing_zeros)
_MASK = WHEEL - 1
_WORDS = WHEEL // 64
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


def empty(capacity: int) -> dict[str, np.ndarray]:
    """The calendar's arrays for at most ``capacity`` pending events (every node free)."""
    following = np.arange(1, capacity + 1, dtype=np.int64)
    following[-1] = NONE
    return {
        "slot_head": np.full(WHEEL, NONE, dtype=np.int64),
        "slot_tail": np.full(WHEEL, NONE, dtype=np.int64),
        "slot_bits": np.zeros(_WORDS, dtype=np.uint64),
        "ev_next": following,
        "ev_what": np.zeros(capacity, dtype=np.int64),
        "late_time": np.zeros(capacity, dtype=np.int64),
        "late_seq": np.zeros(capacity, dtype=np.int64),
        "late_what": np.zeros(capacity, dtype=np.int64),
    }


@internal
def _full(s: State) -> None:
    s.error[0] = E_INTERNAL
    s.error[1] = 1
    raise FastError()


@internal
def _into_slot(s: State, time: int, what: int, first: bool) -> None:
    """Append (or, ``first``, prepend) an event to the list of its cycle."""
    e = s.g[G_FREE]
    if e == NONE:
        _full(s)
    s.g[G_FREE] = s.ev_next[e]
    s.ev_what[e] = what
    slot = time & _MASK
    tail = s.slot_tail[slot]
    if tail == NONE:
        s.ev_next[e] = NONE
        s.slot_head[slot] = s.slot_tail[slot] = e
        s.slot_bits[slot >> 6] |= np.uint64(1) << np.uint64(slot & 63)
    elif first:
        s.ev_next[e] = s.slot_head[slot]
        s.slot_head[slot] = e
    else:
        s.ev_next[e] = NONE
        s.ev_next[tail] = e
        s.slot_tail[slot] = e


@internal
def _late_before(s: State, i: int, j: int) -> bool:
    return s.late_time[i] < s.late_time[j] or (
        s.late_time[i] == s.late_time[j] and s.late_seq[i] < s.late_seq[j])


@internal
def _late_swap(s: State, i: int, j: int) -> None:
    s.late_time[i], s.late_time[j] = s.late_time[j], s.late_time[i]
    s.late_seq[i], s.late_seq[j] = s.late_seq[j], s.late_seq[i]
    s.late_what[i], s.late_what[j] = s.late_what[j], s.late_what[i]


@internal
def _late_push(s: State, time: int, seq: int, what: int) -> None:
    n = s.g[G_LATE]
    if n >= s.late_time.size:
        _full(s)
    s.late_time[n], s.late_seq[n], s.late_what[n] = time, seq, what
    s.g[G_LATE] = n + 1
    while n > 0:
        parent = (n - 1) >> 1
        if not _late_before(s, n, parent):
            break
        _late_swap(s, n, parent)
        n = parent


@internal
def _late_pop(s: State) -> None:
    n = s.g[G_LATE] - 1
    s.g[G_LATE] = n
    _late_swap(s, 0, n)
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and _late_before(s, child + 1, child):
            child += 1
        if not _late_before(s, child, i):
            break
        _late_swap(s, i, child)
        i = child


@internal
def schedule_event(s: State, time: int, kind: int, obj: int) -> None:
    """Schedule an event with the next sequence number (simpy's ``heappush`` with
    ``next(env._eid)``)."""
    seq = s.g[G_EID]
    s.g[G_EID] = seq + 1
    s.g[G_PENDING] += 1
    what = (obj << 2) | kind
    if time - s.g[G_NOW] < WHEEL:
        _into_slot(s, time, what, s.settings[F_LAST_FIRST] != 0)
    else:
        _late_push(s, time, seq, what)


@internal
def next_time(s: State) -> int:
    """The time of the next event (there is one)."""
    now = s.g[G_NOW]
    start = now & _MASK
    w = start >> 6
    low = np.uint64(start & 63)
    for k in range(_WORDS + 1):
        i = (w + k) & (_WORDS - 1)
        word = s.slot_bits[i]
        if k == 0:
            word &= _ALL << low
        elif k == _WORDS:
            word &= ~(_ALL << low)
        if word:
            slot = (i << 6) + trailing_zeros(word)
            return now + ((slot - start) & _MASK)
    return s.late_time[0]  # the wheel is empty


@internal
def pop_event(s: State, time: int) -> int:
    """Make ``time`` (from :func:`next_time`) the present and remove its first event;
    returns the event as ``obj << 2 | kind``."""
    if time != s.g[G_NOW]:
        s.g[G_NOW] = time
        first = s.settings[F_LAST_FIRST] != 0
        while s.g[G_LATE] and s.late_time[0] - time < WHEEL:
            _into_slot(s, s.late_time[0], s.late_what[0], first)
            _late_pop(s)
    slot = time & _MASK
    e = s.slot_head[slot]
    following = s.ev_next[e]
    s.slot_head[slot] = following
    if following == NONE:
        s.slot_tail[slot] = NONE
        s.slot_bits[slot >> 6] &= ~(np.uint64(1) << np.uint64(slot & 63))
    s.ev_next[e] = s.g[G_FREE]
    s.g[G_FREE] = e
    s.g[G_PENDING] -= 1
    return s.ev_what[e]


@compiled
def enqueue(s: State, times: np.ndarray, kinds: np.ndarray, objs: np.ndarray) -> None:
    """Schedule the run's first events in the order given (set-up: each is appended to
    its cycle's list, whatever ``F_LAST_FIRST`` says)."""
    for i in range(times.size):
        what = (objs[i] << 2) | kinds[i]
        s.g[G_EID] += 1
        s.g[G_PENDING] += 1
        if times[i] - s.g[G_NOW] < WHEEL:
            _into_slot(s, times[i], what, False)
        else:
            _late_push(s, times[i], s.g[G_EID] - 1, what)


__all__ = ["empty", "enqueue", "next_time", "pop_event", "schedule_event"]

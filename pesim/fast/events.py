"""The compiled engine's fabric: routers, links, core queues, sinks.

Each function mirrors the method of the simpy engine named in its docstring
(:mod:`pesim.routers`, :mod:`pesim.core`, :mod:`pesim.clock`), statement for statement,
because the order in which events are scheduled is the order in which simultaneous
events run, and that order decides contended cycles (``docs/pecode.md``, "Same-cycle
order"). An event is ``(time, priority, sequence number)``, the sequence number taken
where simpy takes one: when a timeout or callback is scheduled, when a signal fires.

Errors set ``state.error`` (a code from :mod:`pesim.fast.errors` and its arguments)
and raise :class:`FastError`; :mod:`pesim.fast.engine` turns them into the simpy
engine's messages.
"""

from __future__ import annotations

import numpy as np

from dtg.pesim.fast import f16
from dtg.pesim.fast.calendar import schedule_event
from dtg.pesim.fast.errors import (
    E_CYCLE_ROUTE,
    E_GROUP_SLOT,
    E_INTERNAL,
    E_ONCE_TWICE,
    E_SINK_AFTER_LAST,
    E_SINK_DENSE_INDEX,
    E_SINK_MARKS,
    E_SINK_NO_INDEX,
    E_SINK_TOO_MANY,
    E_SINK_UNKNOWN_INDEX,
    E_SPARSE_NO_INDEX,
    E_SPARSE_ORDER,
    FastError,
)
from dtg.pesim.fast.jit import internal
from dtg.pesim.fast.layout import (
    ARRAYS,
    B_CAP,
    B_ERROR,
    B_ERROR_ARG,
    B_HEAD,
    B_LEN,
    B_ON_CYCLE,
    B_SCHEDULED,
    B_START,
    B_TARGETS,
    B_WAITERS,
    EV_CORE,
    EV_FIRE,
    F_BUFFER,
    F_HOP,
    G_NOW,
    G_TRACING,
    K_IDLE,
    K_STALL,
    MAX_TARGETS,
    MAX_WAITERS,
    NO_INDEX,
    NONE,
    PROGRAM,
    Q_ARRIVAL,
    Q_BASE,
    Q_BATCHED,
    Q_CLOSED_TOTAL,
    Q_COLOR,
    Q_CONTROL,
    Q_CORE,
    Q_DATA,
    Q_END_WAITING,
    Q_FILL,
    Q_HAS_BASE,
    Q_LEN,
    Q_MARKS_AHEAD,
    Q_OPENED,
    Q_PENDING,
    Q_POS,
    Q_RING_AT,
    Q_WAITERS,
    RING_RECORD,
    SEQ,
    SIGNAL_FIRED,
    SIGNAL_PENDING,
    SK_COUNT,
    SK_DENSE,
    SK_DONE,
    SK_GROUP,
    SK_GROUP_START,
    SK_GROUPS,
    SK_ORDER,
    SK_SIZE,
    T_BUFFER,
    T_CORE,
    TRIGGER_CAP,
    TRIGGER_COUNT,
    TRIGGERS,
    WAKE,
    WAKE_KIND,
    Program,
    State,
)
from dtg.pesim.fast.record import hops


@internal
def fire_core(s: State, c: int) -> None:
    """``Wake.fire`` of the signal core ``c`` waits on: it resumes in this cycle,
    after the events already scheduled for it."""
    s.core[c, WAKE] = SIGNAL_FIRED
    schedule_event(s, s.g[G_NOW], EV_CORE, c)


@internal
def schedule(s: State, b: int, delay: int) -> None:
    """``Fabric.schedule``: the buffer tries to forward ``delay`` cycles from now."""
    s.buffer[b, B_SCHEDULED] = 1
    schedule_event(s, s.g[G_NOW] + delay, EV_FIRE, b)


@internal
def _release(s: State, waiters: np.ndarray, base: int, n: int) -> None:
    """``Fabric.release``: wake every buffer and core that waited for space (the list
    is emptied before anyone is woken; waking schedules events and adds no waiter, so
    the entries are read in place)."""
    for i in range(base, base + n):
        w = waiters[i]
        if w >= 0:
            if not s.buffer[w, B_SCHEDULED]:
                schedule(s, w, 0)
        else:
            c = -w - 1
            if s.core[c, WAKE_KIND] == K_STALL and s.core[c, WAKE] == SIGNAL_PENDING:
                fire_core(s, c)


@internal
def _take_waiters(s: State, table: np.ndarray, row: int, field: int, pool: np.ndarray) -> None:
    """Empty the waiter list of ``table[row]`` and wake its waiters."""
    n = table[row, field]
    if n:
        table[row, field] = 0
        _release(s, pool, row * MAX_WAITERS, n)


@internal
def _add_waiter(s: State, table: np.ndarray, row: int, field: int, pool: np.ndarray,
                waiter: int) -> None:
    """Append ``waiter`` to the waiter list of ``table[row]``."""
    n = table[row, field]
    if n >= MAX_WAITERS:
        s.error[0] = E_INTERNAL
        s.error[1] = 2
        raise FastError()
    pool[row * MAX_WAITERS + n] = waiter
    table[row, field] = n + 1


@internal
def release_buffer(s: State, b: int) -> None:
    _take_waiters(s, s.buffer, b, B_WAITERS, s.buffer_waiters)


@internal
def release_queue(s: State, q: int) -> None:
    _take_waiters(s, s.queue, q, Q_WAITERS, s.queue_waiters)


@internal
def wait_on_buffer(s: State, b: int, waiter: int) -> None:
    _add_waiter(s, s.buffer, b, B_WAITERS, s.buffer_waiters, waiter)


@internal
def _wait_on_queue(s: State, q: int, b: int) -> None:
    _add_waiter(s, s.queue, q, Q_WAITERS, s.queue_waiters, b)


# ------------------------------------------------------------ router buffers


@internal
def buffer_append(s: State, b: int, ready: int, value: float, index: int, end: int) -> None:
    """Append a wavelet to a router buffer's ring."""
    cap = s.buffer[b, B_CAP]
    k = s.buffer[b, B_START] + (s.buffer[b, B_HEAD] + s.buffer[b, B_LEN]) % cap
    s.q_ready[k] = ready
    s.q_value[k] = value
    s.q_index[k] = index
    s.q_end[k] = end
    s.buffer[b, B_LEN] += 1


@internal
def _has_space(s: State, kind: int, obj: int, end: int) -> bool:
    if kind == T_BUFFER:
        return s.buffer[obj, B_LEN] < s.buffer[obj, B_CAP]
    if kind == T_CORE:  # Core.can_accept
        if end and s.queue[obj, Q_CONTROL] == NONE and not s.queue[obj, Q_BATCHED]:
            return True  # discarded on arrival
        return s.queue[obj, Q_LEN] < s.settings[F_BUFFER]
    return True


@internal
def forward(s: State, p: Program, b: int) -> None:
    """``Fabric.forward``: move the head wavelet of ``b`` to all its targets if they can
    all take it, each link carrying one wavelet per cycle."""
    s.buffer[b, B_SCHEDULED] = 0
    if s.buffer[b, B_LEN] == 0:
        return
    k = s.buffer[b, B_START] + s.buffer[b, B_HEAD]
    ready = s.q_ready[k]
    now = s.g[G_NOW]
    if ready > now:
        schedule(s, b, ready - now)
        return
    if s.buffer[b, B_ERROR]:  # the route goes nowhere (Fabric.resolve)
        s.error[0] = s.buffer[b, B_ERROR]
        s.error[1] = b
        s.error[2] = s.buffer[b, B_ERROR_ARG]
        raise FastError()
    value, index, end = s.q_value[k], s.q_index[k], s.q_end[k]
    n = s.buffer[b, B_TARGETS]
    free = 0
    for t in range(b * MAX_TARGETS, b * MAX_TARGETS + n):
        kind, obj = s.target_kind[t], s.target_obj[t]
        if not _has_space(s, kind, obj, end):
            if kind == T_BUFFER:
                wait_on_buffer(s, obj, b)
            else:
                _wait_on_queue(s, obj, b)
            return
        link = s.target_link[t]
        if s.link_free[link] > free:
            free = s.link_free[link]
    if free > now:
        schedule(s, b, free - now)
        return
    # del q[0]
    if s.buffer[b, B_CAP] > 0:
        s.buffer[b, B_HEAD] = (s.buffer[b, B_HEAD] + 1) % s.buffer[b, B_CAP]
    else:  # a source: its stream is not a ring
        s.buffer[b, B_HEAD] += 1
    s.buffer[b, B_LEN] -= 1
    if s.g[G_TRACING]:  # wavelets over links (not down a ramp into a core)
        over = 0
        for t in range(b * MAX_TARGETS, b * MAX_TARGETS + n):
            over += s.target_kind[t] != T_CORE
        hops(s, now, over)
    for t in range(b * MAX_TARGETS, b * MAX_TARGETS + n):
        kind, obj, link = s.target_kind[t], s.target_obj[t], s.target_link[t]
        s.link_free[link] = now + 1
        s.link_count[link] += 1
        if kind == T_BUFFER:  # ToBuffer.accept
            if s.buffer[obj, B_ON_CYCLE]:
                s.error[0] = E_CYCLE_ROUTE
                s.error[1] = obj
                raise FastError()
            hop = s.settings[F_HOP]
            buffer_append(s, obj, now + hop, value, index, end)
            if s.buffer[obj, B_LEN] == 1 and not s.buffer[obj, B_SCHEDULED]:
                schedule(s, obj, hop)
        elif kind == T_CORE:
            deliver(s, p, obj, value, index, end, now)
        else:
            sink_receive(s, obj, value, index, end, now + s.settings[F_HOP])
    if s.buffer[b, B_WAITERS]:
        release_buffer(s, b)
    if s.buffer[b, B_LEN]:
        head = s.buffer[b, B_START] + s.buffer[b, B_HEAD]
        schedule(s, b, max(1, s.q_ready[head] - now))


# ----------------------------------------------------------------- core queues


@internal
def push_trigger(s: State, c: int, t: int, task: int, color: int) -> None:
    """``Core.push_trigger``: a task to run, ordered by (time, sequence); wakes an idle
    core."""
    n = s.core[c, TRIGGER_COUNT]
    if n >= s.core[c, TRIGGER_CAP]:
        s.error[0] = E_INTERNAL
        s.error[1] = 4
        s.error[2] = c
        raise FastError()
    base = s.core[c, TRIGGERS]
    seq = s.core[c, SEQ]
    s.core[c, SEQ] = seq + 1
    i = n
    s.trig_t[base + i] = t
    s.trig_seq[base + i] = seq
    s.trig_task[base + i] = task
    s.trig_color[base + i] = color
    s.core[c, TRIGGER_COUNT] = n + 1
    while i > 0:
        parent = (i - 1) >> 1
        if not _trigger_before(s, base + i, base + parent):
            break
        _trigger_swap(s, base + i, base + parent)
        i = parent
    if s.core[c, WAKE_KIND] == K_IDLE and s.core[c, WAKE] == SIGNAL_PENDING:
        fire_core(s, c)


@internal
def _trigger_before(s: State, a: int, b: int) -> bool:
    """Trigger ``a`` comes before ``b``: by time, then by sequence number."""
    return s.trig_t[a] < s.trig_t[b] or (s.trig_t[a] == s.trig_t[b]
                                         and s.trig_seq[a] < s.trig_seq[b])


@internal
def _trigger_swap(s: State, a: int, b: int) -> None:
    s.trig_t[a], s.trig_t[b] = s.trig_t[b], s.trig_t[a]
    s.trig_seq[a], s.trig_seq[b] = s.trig_seq[b], s.trig_seq[a]
    s.trig_task[a], s.trig_task[b] = s.trig_task[b], s.trig_task[a]
    s.trig_color[a], s.trig_color[b] = s.trig_color[b], s.trig_color[a]


@internal
def pop_trigger(s: State, c: int) -> tuple[int, int]:
    """The first trigger's task and color, removed (``heapq.heappop``)."""
    base = s.core[c, TRIGGERS]
    n = s.core[c, TRIGGER_COUNT] - 1
    task, color = s.trig_task[base], s.trig_color[base]
    s.core[c, TRIGGER_COUNT] = n
    if n > 0:
        s.trig_t[base] = s.trig_t[base + n]
        s.trig_seq[base] = s.trig_seq[base + n]
        s.trig_task[base] = s.trig_task[base + n]
        s.trig_color[base] = s.trig_color[base + n]
        i = 0
        while True:
            left = 2 * i + 1
            if left >= n:
                break
            child = left
            if left + 1 < n and _trigger_before(s, base + left + 1, base + left):
                child = left + 1
            if not _trigger_before(s, base + child, base + i):
                break
            _trigger_swap(s, base + child, base + i)
            i = child
    return task, color


@internal
def _fifo_append(s: State, q: int, value: float, index: int, end: int) -> None:
    k = q * s.settings[F_BUFFER] + s.queue[q, Q_LEN]
    s.fifo_value[k] = value
    s.fifo_index[k] = index
    s.fifo_end[k] = end
    s.queue[q, Q_LEN] += 1


@internal
def _fifo_remove(s: State, q: int, i: int) -> None:
    base = q * s.settings[F_BUFFER]
    n = s.queue[q, Q_LEN]
    for k in range(base + i, base + n - 1):
        s.fifo_value[k] = s.fifo_value[k + 1]
        s.fifo_index[k] = s.fifo_index[k + 1]
        s.fifo_end[k] = s.fifo_end[k + 1]
    s.queue[q, Q_LEN] = n - 1


@internal
def deliver(s: State, p: Program, q: int, value: float, index: int, end: int,
            now: int) -> None:
    """``Core.deliver``: a wavelet down the ramp into core queue ``q``."""
    c = s.queue[q, Q_CORE]
    if s.queue[q, Q_BATCHED]:
        _fifo_append(s, q, value, index, end)
        pump(s, p, q, now)
        return
    if end:
        control = s.queue[q, Q_CONTROL]
        if control != NONE:
            _fifo_append(s, q, value, index, end)
            push_trigger(s, c, now, control, s.queue[q, Q_COLOR])
        return  # an end mark with no control task is dropped
    _fifo_append(s, q, value, index, end)
    data = s.queue[q, Q_DATA]
    if data != NONE:
        push_trigger(s, c, now, data, s.queue[q, Q_COLOR])
        return
    if s.queue[q, Q_ARRIVAL]:
        s.queue[q, Q_ARRIVAL] = 0
        fire_core(s, c)


@internal
def take(s: State, q: int, mark: int) -> tuple[float, int]:
    """``Core.take``: remove the first value (or end mark) of a queue, free its slot."""
    base = q * s.settings[F_BUFFER]
    for i in range(s.queue[q, Q_LEN]):
        if s.fifo_end[base + i] == mark:
            value, index = s.fifo_value[base + i], s.fifo_index[base + i]
            _fifo_remove(s, q, i)
            if s.queue[q, Q_WAITERS]:
                release_queue(s, q)
            return value, index
    s.error[0] = E_INTERNAL
    s.error[1] = 5
    raise FastError()


@internal
def has_value(s: State, q: int) -> bool:
    base = q * s.settings[F_BUFFER]
    for i in range(s.queue[q, Q_LEN]):  # noqa: SIM110 (numba compiles loops, not any())
        if not s.fifo_end[base + i]:
            return True
    return False


@internal
def store_element(s: State, p: Program, c: int, array_row: int, slot: int, flat: int,
                  value: float) -> None:
    """``array.flat[flat] = value`` (numpy's assignment: rounded to the array's type)."""
    offset = s.arr_offset[slot]
    if p.arrays[array_row, 0] == 0:
        s.mem32[offset + flat] = np.float32(value)
    else:
        s.mem16[offset + flat] = f16.narrow(value)


@internal
def pump(s: State, p: Program, q: int, now: int) -> None:
    """``Core.pump``: land a batched color's queued wavelets in its array, in order,
    while a slot of its ring is free; close a batch when full, or when an end mark or
    (sparse) a wavelet beyond its window follows it, and trigger its task."""
    task = s.queue[q, Q_DATA]
    ring = p.tasks[task, 10]
    if s.queue[q, Q_PENDING] >= ring:
        return
    c = s.queue[q, Q_CORE]
    sparse, batch, land = p.tasks[task, 3], p.tasks[task, 4], p.tasks[task, 5]
    array_row = p.programs[s.core[c, PROGRAM], 2] + land
    land_slot = s.core[c, ARRAYS] + land
    base = q * s.settings[F_BUFFER]
    color = s.queue[q, Q_COLOR]
    if p.tasks[task, 9]:
        _pump_groups(s, p, q, c, task, land_slot, array_row, now)
        return
    while s.queue[q, Q_LEN] and s.queue[q, Q_PENDING] < ring:
        end = s.fifo_end[base]
        value, index = s.fifo_value[base], s.fifo_index[base]
        if end:
            if s.queue[q, Q_FILL]:
                _close(s, p, q, c, task, now)
                continue
            if s.queue[q, Q_END_WAITING]:
                return
            control = s.queue[q, Q_CONTROL]
            if control != NONE:
                if ring == 1 or s.queue[q, Q_MARKS_AHEAD] == ring:
                    # (its wavelets wait for the control task)
                    s.queue[q, Q_END_WAITING] = 1
                    push_trigger(s, c, now, control, color)
                    return
                s.queue[q, Q_MARKS_AHEAD] += 1  # (on a ring, up to N marks land ahead)
                push_trigger(s, c, now, control, color)
        elif sparse and not _window(s, p, c, q, task, index, land_slot, array_row):
            _close(s, p, q, c, task, now)  # beyond the window: it waits for the next one
            continue
        _fifo_remove(s, q, 0)
        if s.queue[q, Q_WAITERS]:
            release_queue(s, q)
        if end:
            continue
        at = index - s.queue[q, Q_BASE] if sparse else s.queue[q, Q_FILL]
        if not 0 <= at < batch:
            s.error[0] = E_INTERNAL
            s.error[1] = 6
            raise FastError()
        store_element(s, p, c, array_row, land_slot, _open_slot(s, p, q, task) + at, value)
        s.queue[q, Q_FILL] += 1
        if not sparse and s.queue[q, Q_FILL] == batch:
            _close(s, p, q, c, task, now)


@internal
def fail(s: State, code: int, a: int, b: int, c: int, d: int) -> None:
    """Fail with error ``code`` and its four arguments (for a batched task: its core,
    the task, its color, an argument; for a SIMD run: its core, the configuration, the
    variant, a value)."""
    s.error[0] = code
    s.error[1] = a
    s.error[2] = b
    s.error[3] = c
    s.error[4] = d
    raise FastError()


@internal
def _open_slot(s: State, p: Program, q: int, task: int) -> int:
    """``Core.open_slot``: where the open batch lands in the landing array."""
    return s.queue[q, Q_CLOSED_TOTAL] % p.tasks[task, 10] * p.tasks[task, 4] * max(
        1, p.tasks[task, 9])


@internal
def _close(s: State, p: Program, q: int, c: int, task: int, now: int) -> None:
    """``Core.close``: record the open batch (count, first index) in its ring slot and
    trigger its task."""
    rec = s.queue[q, Q_RING_AT] + RING_RECORD * (s.queue[q, Q_CLOSED_TOTAL] % p.tasks[task, 10])
    windows = p.tasks[task, 3] and not p.tasks[task, 9]
    s.ring_rec[rec] = p.tasks[task, 4] if windows else s.queue[q, Q_FILL]
    s.ring_rec[rec + 1] = s.queue[q, Q_BASE] if windows else 0
    s.queue[q, Q_CLOSED_TOTAL] += 1
    s.queue[q, Q_PENDING] += 1
    s.queue[q, Q_FILL] = 0
    s.queue[q, Q_HAS_BASE] = 0
    push_trigger(s, c, now, task, s.queue[q, Q_COLOR])


@internal
def _open_batch(s: State, p: Program, q: int, c: int, task: int, land_slot: int,
                array_row: int, index: int) -> None:
    """``Core.open_batch``: clear a sparse batch's slot, or check that a 'once' batch's
    slot opens for the first time (``index``: the window's first wavelet's, or -1)."""
    if not p.tasks[task, 3]:
        return
    if p.tasks[task, 6]:  # once
        if s.queue[q, Q_OPENED] >= p.tasks[task, 10]:
            fail(s, E_ONCE_TWICE, c, task, s.queue[q, Q_COLOR], index)
        s.queue[q, Q_OPENED] += 1
        return
    at = _open_slot(s, p, q, task)
    for k in range(p.tasks[task, 4] * max(1, p.tasks[task, 9])):
        store_element(s, p, c, array_row, land_slot, at + k, 0.0)


@internal
def _pump_groups(s: State, p: Program, q: int, c: int, task: int, land_slot: int,
                 array_row: int, now: int) -> None:
    """``Core.pump_groups``: the k-th wavelet (sparse: index k) of the batch's j-th group
    at ``land[slot + j * batch + k]``; the batch's G-th end mark closes it."""
    sparse, size, groups = p.tasks[task, 3], p.tasks[task, 4], p.tasks[task, 9]
    ring = p.tasks[task, 10]
    base = q * s.settings[F_BUFFER]
    while s.queue[q, Q_LEN] and s.queue[q, Q_PENDING] < ring:
        end = s.fifo_end[base]
        value, index = s.fifo_value[base], s.fifo_index[base]
        _fifo_remove(s, q, 0)
        if s.queue[q, Q_WAITERS]:
            release_queue(s, q)
        if not s.queue[q, Q_HAS_BASE]:  # the first wavelet or mark of a batch opens it
            _open_batch(s, p, q, c, task, land_slot, array_row, -1)
            s.queue[q, Q_HAS_BASE] = 1
            s.queue[q, Q_BASE] = 0
            s.queue[q, Q_POS] = 0
        if end:
            s.queue[q, Q_BASE] += 1
            s.queue[q, Q_POS] = 0
            if s.queue[q, Q_BASE] == groups:
                _close(s, p, q, c, task, now)
            continue
        if sparse:
            if index == NO_INDEX:
                fail(s, E_SPARSE_NO_INDEX, c, task, s.queue[q, Q_COLOR], 0)
            k = index
        else:
            k = s.queue[q, Q_POS]
        if not 0 <= k < size:
            fail(s, E_GROUP_SLOT, c, task, s.queue[q, Q_COLOR], k)
        store_element(s, p, c, array_row, land_slot,
                      _open_slot(s, p, q, task) + s.queue[q, Q_BASE] * size + k, value)
        s.queue[q, Q_POS] += 1
        s.queue[q, Q_FILL] += 1


@internal
def _window(s: State, p: Program, c: int, q: int, task: int, index: int, land_slot: int,
            array_row: int) -> bool:
    """``Core.window``: whether a sparse wavelet lands in the current window of
    ``batch`` indices (aligned to multiples of it), opening one if there is none."""
    batch = p.tasks[task, 4]
    if index == NO_INDEX:
        fail(s, E_SPARSE_NO_INDEX, c, task, s.queue[q, Q_COLOR], 0)
    if not s.queue[q, Q_HAS_BASE]:
        _open_batch(s, p, q, c, task, land_slot, array_row, index)
        s.queue[q, Q_BASE] = batch * (index // batch)
        s.queue[q, Q_HAS_BASE] = 1
        return True
    base = s.queue[q, Q_BASE]
    if index < base:
        fail(s, E_SPARSE_ORDER, c, task, s.queue[q, Q_COLOR], index)
    return index < base + batch


# ------------------------------------------------------------------------ sinks


@internal
def sink_receive(s: State, k: int, value: float, index: int, end: int, t: int) -> None:
    """``Sink.receive``: an output stream's wavelet reaches its external PE."""
    order, size = s.sink[k, SK_ORDER], s.sink[k, SK_SIZE]
    if s.sink[k, SK_DENSE]:
        if end:
            return
        if index != NO_INDEX:
            _sink_error(s, E_SINK_DENSE_INDEX, k, index)
        n = s.sink[k, SK_COUNT]
        if n >= size:
            _sink_error(s, E_SINK_TOO_MANY, k, size)
        s.sink_value[order + n] = value
        s.sink_got[order + n] = 1
        s.sink_time[order + n] = t
        s.sink[k, SK_COUNT] = n + 1
        if n + 1 == size:
            s.sink[k, SK_DONE] = t
        return
    groups = s.sink[k, SK_GROUPS]
    if end:
        s.sink[k, SK_GROUP] += 1
        if s.sink[k, SK_GROUP] > groups:
            _sink_error(s, E_SINK_MARKS, k, groups)
        if s.sink[k, SK_GROUP] == groups:
            s.sink[k, SK_DONE] = t
        return
    if index == NO_INDEX:
        _sink_error(s, E_SINK_NO_INDEX, k, 0)
    g = s.sink[k, SK_GROUP]
    if g >= groups:
        _sink_error(s, E_SINK_AFTER_LAST, k, 0)
    start = s.sink[k, SK_GROUP_START]
    lo, hi = s.sink_groups[start + g], s.sink_groups[start + g + 1]
    for pos in range(lo, hi):  # (a group's indices are few; listed in index order)
        if s.sink_index[order + pos] == index:
            s.sink_value[order + pos] = value
            s.sink_got[order + pos] = 1
            s.sink_time[order + pos] = t
            return
    s.error[3] = g
    _sink_error(s, E_SINK_UNKNOWN_INDEX, k, index)


@internal
def _sink_error(s: State, code: int, k: int, arg: int) -> None:
    s.error[0] = code
    s.error[1] = k
    s.error[2] = arg
    raise FastError()

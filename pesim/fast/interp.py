"""The compiled engine's cores: the instruction tables of :mod:`pesim.fast.lower` run
with an explicit program counter per core.

:func:`run_core` continues a core where it stopped until it waits again: for a timeout
(its clock ran ahead of simulated time), a signal (space in a router buffer, a wavelet
in its queue, a trigger while idle) or nothing more to do. An instruction that waits
keeps its progress in ``PHASE`` (and the ``S_``/``P_`` fields) and is executed again
when the core resumes. What each instruction does, and in which order it charges
cycles and touches the fabric, is :mod:`pesim.code`, :mod:`pesim.core` and
:mod:`pesim.simd_unit` line for line.

Values are ``float64`` holding a number of the type they are computed in: a float32
operation is done in float64 and rounded to float32, which is IEEE float32 arithmetic
(float64 holds the exact product, and a sum rounded twice through float64 rounds as
once); float16 likewise through :mod:`pesim.fast.f16`.
"""

from __future__ import annotations

import numpy as np

from dtg.pesim.fast.errors import (
    E_DATA_NO_INDEX,
    FastError,
)
from dtg.pesim.fast.events import (
    pop_trigger,
    pump,
    push_trigger,
    take,
)
from dtg.pesim.fast.jit import internal
from dtg.pesim.fast.layout import (
    ARRAYS,
    BEGAN,
    BUSY,
    BUSY_BEFORE,
    CLOCK,
    COLOR,
    END,
    ENV,
    F_DISPATCH,
    F_SCALAR_OP,
    FLOPS,
    G_NOW,
    G_TRACING,
    K_IDLE,
    NO_INDEX,
    NONE,
    P_BUF,
    P_INDEX,
    PC,
    PHASE,
    PROFILE,
    PROFILED,
    PROGRAM,
    Q_BATCHED,
    Q_CLOSED_TOTAL,
    Q_END_WAITING,
    Q_MARKS_AHEAD,
    Q_PENDING,
    Q_RING_AT,
    QUEUES,
    R_MAIN,
    R_TASK,
    RING_RECORD,
    SETUP,
    SIGNAL_PENDING,
    START,
    TASK,
    TASKS_RUN,
    TRIGGER_COUNT,
    W_RECV,
    W_SEND,
    W_SEND_END,
    WAKE,
    WAKE_KIND,
    Program,
    State,
)
from dtg.pesim.fast.lower import (
    ACTIVATE,
    CHARGE,
    CONTROL,
    DATA,
    DISPATCH,
    FBIN,
    FEVAL,
    FLOPS_ADD,
    FNEG,
    FOR_BEGIN,
    FOR_NEXT,
    FOR_STEP,
    IFNOT,
    JUMP,
    MAIN_END,
    PROLOGUE,
    RECV,
    RUN,
    SEND,
    SET,
    SETI,
    SLOT_COUNT,
    SLOT_INDEX,
    SLOT_SLOT,
    STORE,
    SYNC_END,
    TASK_END,
)
from dtg.pesim.fast.lower import ADD as STORE_ADD
from dtg.pesim.fast.record import record
from dtg.pesim.fast.simd import run_simd
from dtg.pesim.fast.steps import (
    address,
    await_value,
    binary,
    charge,
    check_limit,
    feval,
    ieval,
    maximum,
    peek_value,
    pop_value,
    push,
    push_value,
    ramp_buffer,
    read_element,
    rounded,
    sync,
    timeout,
    write_element,
)


@internal
def run_core(p: Program, s: State, c: int, istack: np.ndarray, fstack: np.ndarray) -> None:
    """Run core ``c`` from where it stopped until it waits again."""
    s.core[c, WAKE] = 0
    s.core[c, WAKE_KIND] = 0
    program = s.core[c, PROGRAM]
    env = s.core[c, ENV]
    while True:
        pc = s.core[c, PC]
        op = p.code[pc, 0]
        a, b, cc, d, e = p.code[pc, 1], p.code[pc, 2], p.code[pc, 3], p.code[pc, 4], p.code[pc, 5]
        if op == CHARGE:
            charge(s, c, a)
        elif op == FLOPS_ADD:
            s.core[c, FLOPS] += a
        elif op == SETI:
            v = ieval(p, s, env, b, istack)
            if cc:
                s.env[env + a] += v
            else:
                s.env[env + a] = v
        elif op == FEVAL:
            push_value(s, c, feval(p, s, c, a, b, istack, fstack))
        elif op == STORE:
            x = pop_value(s, c)
            flat = address(p, s, c, a, istack)
            slot = p.addresses[a, 0]
            row = p.programs[program, 2] + slot
            where = s.core[c, ARRAYS] + slot
            if b == SET:
                write_element(p, s, row, where, flat, x)
            else:
                old = read_element(p, s, row, where, flat)
                dtype = p.arrays[row, 0]
                new = rounded(old + x, dtype) if b == STORE_ADD else maximum(old, x, dtype)
                write_element(p, s, row, where, flat, new)
        elif op == FOR_BEGIN:
            first = ieval(p, s, env, b, istack)
            last = ieval(p, s, env, cc, istack)
            charge(s, c, e)
            s.env[env + a] = first
            s.env[env + a + 1] = last
            if first > last:
                s.core[c, PC] = d
                continue
        elif op == FOR_STEP:
            s.env[env + a] = s.env[env + b]
            charge(s, c, cc)
            check_limit(s, c)
        elif op == FOR_NEXT:
            s.env[env + a] += 1
            if s.env[env + a] <= s.env[env + a + 1]:
                s.core[c, PC] = b
                continue
        elif op == IFNOT:
            if not ieval(p, s, env, a, istack):
                s.core[c, PC] = b
                continue
        elif op == JUMP:
            s.core[c, PC] = a
            continue
        elif op == SEND:
            if _send(p, s, c, a, b, cc, d, istack):
                return
        elif op == RECV:
            if _recv(p, s, c, a, b, cc):
                return
        elif op == FNEG:
            push_value(s, c, -pop_value(s, c))
        elif op == FBIN:
            y = pop_value(s, c)
            x = pop_value(s, c)
            push_value(s, c, binary(a, x, y, b))
        elif op == ACTIVATE:
            push_trigger(s, c, s.core[c, CLOCK], p.programs[program, 0] + a, NONE)
        elif op == RUN:
            if run_simd(p, s, c, a, b, cc, d, istack, fstack):
                return
        elif op == PROLOGUE:
            main = p.programs[program, 5]
            setup = s.core[c, SETUP]
            if main != NONE or setup:
                s.core[c, START] = 0
                s.core[c, CLOCK] = setup
                s.core[c, BUSY] += setup
                if main != NONE:
                    s.core[c, TASK] = main
                else:
                    s.core[c, PC] = a
                    continue
            else:
                s.core[c, PC] = b
                continue
        elif op == MAIN_END:
            main = p.programs[program, 5]
            _profile(p, s, c, main, 1, s.core[c, BUSY])
            if s.g[G_TRACING]:
                record(s, R_MAIN, c, main, 0, s.core[c, CLOCK], NONE)
        elif op == SYNC_END:
            if s.core[c, PHASE] == 0 and sync(s, c):
                s.core[c, PHASE] = 1
                return
            s.core[c, PHASE] = 0
            s.core[c, END] = s.g[G_NOW]
        elif op == DISPATCH:
            if _dispatch(p, s, c, env):
                return
            continue  # (the task's first instruction is set)
        elif op == TASK_END:
            if _task_end(p, s, c):
                return
            continue
        s.core[c, PC] = pc + 1


@internal
def _profile(p: Program, s: State, c: int, task: int, runs: int, busy: int) -> None:
    """A task's profile; the order in which tasks first ran is kept (``per_task`` is a
    dict in insertion order)."""
    k = s.core[c, PROFILE] + task - p.programs[s.core[c, PROGRAM], 0]
    if s.prof_first[k] < 0:
        s.prof_first[k] = s.core[c, PROFILED]
        s.core[c, PROFILED] += 1
    s.prof_runs[k] += runs
    s.prof_busy[k] += busy


@internal
def _dispatch(p: Program, s: State, c: int, env: int) -> bool:
    """The top of ``Core.process``'s loop: wait idle, or start the first triggered task.
    True when the core waits."""
    if s.core[c, TRIGGER_COUNT] == 0:
        s.core[c, TASK] = NONE
        s.core[c, WAKE_KIND] = K_IDLE
        s.core[c, WAKE] = SIGNAL_PENDING
        return True
    task, color = pop_trigger(s, c)
    now = s.g[G_NOW]
    s.core[c, CLOCK] = max(s.core[c, CLOCK], now)
    if s.core[c, START] == NONE:
        s.core[c, START] = s.core[c, CLOCK]
    s.core[c, TASK] = task
    s.core[c, BUSY_BEFORE] = s.core[c, BUSY]
    s.core[c, BEGAN] = s.core[c, CLOCK]
    s.core[c, COLOR] = color
    kind, sparse, batch = p.tasks[task, 1], p.tasks[task, 3], p.tasks[task, 4]
    q = s.core[c, QUEUES] + p.tasks[task, 7]
    if batch:
        # the oldest closed batch: its ring slot and record
        ring = p.tasks[task, 10]
        k = (s.queue[q, Q_CLOSED_TOTAL] - s.queue[q, Q_PENDING]) % ring
        rec = s.queue[q, Q_RING_AT] + RING_RECORD * k
        s.env[env + SLOT_COUNT] = s.ring_rec[rec]
        s.env[env + SLOT_SLOT] = k * batch * max(1, p.tasks[task, 9])
        if sparse:
            if not p.tasks[task, 9]:  # (whole groups: no first index)
                s.env[env + SLOT_INDEX] = s.ring_rec[rec + 1]
            clear = p.tasks[task, 8]
            s.core[c, CLOCK] += clear
            s.core[c, BUSY] += clear
    elif kind == DATA:
        value, index = take(s, q, 0)
        s.value[c] = value
        if sparse:
            if index == NO_INDEX:
                s.error[0] = E_DATA_NO_INDEX
                s.error[1] = c
                s.error[2] = task
                s.error[3] = color
                raise FastError()
            s.env[env + SLOT_INDEX] = index
    elif kind == CONTROL:
        batched = s.queue[q, Q_BATCHED]
        if batched and s.queue[q, Q_MARKS_AHEAD]:
            # (a mark a ring took on landing: their tasks come first, in order)
            s.queue[q, Q_MARKS_AHEAD] -= 1
        else:
            take(s, q, 1)
            s.queue[q, Q_END_WAITING] = 0
        if batched:
            pump(s, p, q, s.core[c, CLOCK])
    dispatch = s.settings[F_DISPATCH]
    s.core[c, CLOCK] += dispatch
    s.core[c, BUSY] += dispatch
    s.core[c, TASKS_RUN] += 1
    s.core[c, PC] = p.tasks[task, 0]
    return False


@internal
def _task_end(p: Program, s: State, c: int) -> bool:
    """The end of a task in ``Core.process``: its profile, the core's clock caught up
    with, a batch's color reopened. True when the core waits."""
    task = s.core[c, TASK]
    if s.core[c, PHASE] == 0:
        _profile(p, s, c, task, 1, s.core[c, BUSY] - s.core[c, BUSY_BEFORE])
        if s.g[G_TRACING]:
            record(s, R_TASK, c, task, s.core[c, BEGAN], s.core[c, CLOCK], s.core[c, COLOR])
        check_limit(s, c)
        delay = s.core[c, CLOCK] - s.g[G_NOW]
        if delay > 0:
            timeout(s, c, delay)
            s.core[c, PHASE] = 1
            return True
        s.core[c, CLOCK] = s.g[G_NOW]
    s.core[c, PHASE] = 0
    now = s.g[G_NOW]
    s.core[c, END] = now
    if p.tasks[task, 4]:
        q = s.core[c, QUEUES] + p.tasks[task, 7]
        s.queue[q, Q_PENDING] -= 1
        pump(s, p, q, now)
    s.core[c, PC] = p.programs[s.core[c, PROGRAM], 4]
    return False


@internal
def _send(p: Program, s: State, c: int, color: int, index_expr: int, end: int, slot: int,
          istack: np.ndarray) -> bool:
    """code.send / core.send: ramp, sync, push, one operation. True while waiting."""
    phase = s.core[c, PHASE]
    if phase == 0:
        b = ramp_buffer(s, c, slot, color)
        s.core[c, P_BUF] = b
        s.core[c, P_INDEX] = (ieval(p, s, s.core[c, ENV], index_expr, istack)
                              if index_expr != NONE else NO_INDEX)
        if sync(s, c):
            s.core[c, PHASE] = 1
            return True
    b = s.core[c, P_BUF]
    value = 0.0 if end else peek_value(s, c, 0)
    what = W_SEND_END if end else W_SEND
    if push(s, p, c, b, value, s.core[c, P_INDEX], end, what, 0):
        s.core[c, PHASE] = 2
        return True
    s.core[c, PHASE] = 0
    s.core[c, CLOCK] = s.g[G_NOW]
    charge(s, c, s.settings[F_SCALAR_OP])
    if not end:
        pop_value(s, c)
    return False


@internal
def _recv(p: Program, s: State, c: int, color: int, dtype: int, slot: int) -> bool:
    """core.recv: sync, wait for a value, take it, one operation. True while waiting."""
    if s.core[c, PHASE] == 0 and sync(s, c):
        s.core[c, PHASE] = 1
        return True
    q = s.core[c, QUEUES] + slot
    if await_value(s, c, q, W_RECV, 0):
        s.core[c, PHASE] = 1
        return True
    s.core[c, PHASE] = 0
    value, _ = take(s, q, 0)
    s.core[c, CLOCK] = s.g[G_NOW]
    charge(s, c, s.settings[F_SCALAR_OP])
    push_value(s, c, rounded(value, dtype))
    return False


# ----------------------------------------------------------------------- SIMD

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

from dtg.pesim.fast import f16
from dtg.pesim.fast.calendar import schedule_event
from dtg.pesim.fast.errors import (
    E_CYCLE_LIMIT,
    E_DATA_NO_INDEX,
    E_NO_RAMP,
    E_OUT_OF_BOUNDS,
    E_SIMD_BOUNDS,
    E_VARIANT_RANGE,
    E_VARIANT_UNSET,
    FastError,
)
from dtg.pesim.fast.events import (
    buffer_append,
    forward,
    has_value,
    pop_trigger,
    pump,
    push_trigger,
    take,
    wait_on_buffer,
)
from dtg.pesim.fast.jit import compiled, internal
from dtg.pesim.fast.layout import (
    ARRAYS,
    B_CAP,
    B_COLOR,
    B_LEN,
    B_SCHEDULED,
    BEGAN,
    BUSY,
    BUSY_BEFORE,
    CLOCK,
    COLOR,
    CONFIGURED,
    DEPTH,
    END,
    ENV,
    EV_CORE,
    F_DISPATCH,
    F_LIMIT,
    F_SCALAR_OP,
    F_STARTUP,
    FLOPS,
    G_NOW,
    G_TRACING,
    K_ARRIVAL,
    K_IDLE,
    K_STALL,
    K_TIMEOUT,
    NO_INDEX,
    NONE,
    P_BUF,
    P_INDEX,
    PC,
    PHASE,
    PROFILE,
    PROFILED,
    PROGRAM,
    Q_ARRIVAL,
    Q_BASE,
    Q_BATCHED,
    Q_CLOSED,
    Q_COLOR,
    Q_END_WAITING,
    Q_FILL,
    Q_HAS_BASE,
    QUEUES,
    R_MAIN,
    R_SIMD,
    R_STALL,
    R_TASK,
    R_WAIT,
    RAMPS,
    S_BASE0,
    S_BEGAN,
    S_BUF,
    S_CONFIG,
    S_COST,
    S_E,
    S_FIRST,
    S_K,
    S_LAST,
    S_MARKS,
    S_SCALAR,
    S_VARIANT,
    SCALAR,
    SENT,
    SETUP,
    SIGNAL_PENDING,
    SIMD_FLOPS,
    SIMD_OPS,
    SIMD_RUNS,
    STACK,
    STALL,
    START,
    T0,
    TASK,
    TASKS_RUN,
    TRIGGER_COUNT,
    W_RECV,
    W_SEND,
    W_SEND_END,
    W_SIMD_IN,
    W_SIMD_OUT,
    WAIT,
    WAIT_COLOR,
    WAIT_WHAT,
    WAITING,
    WAITING_SINCE,
    WAKE,
    WAKE_KIND,
    Program,
    State,
)
from dtg.pesim.fast.lower import (
    ACTIVATE,
    C_AND,
    C_EQ,
    C_GE,
    C_GT,
    C_LE,
    C_LT,
    C_NE,
    C_NOT,
    CHARGE,
    CONTROL,
    DATA,
    DISPATCH,
    F16,
    F_ADD,
    F_CONST,
    F_LOAD,
    F_MUL,
    F_NEG,
    F_SUB,
    F_VALUE,
    FBIN,
    FEVAL,
    FLOPS_ADD,
    FNEG,
    FOR_BEGIN,
    FOR_NEXT,
    FOR_STEP,
    I_ADD,
    I_CONST,
    I_DIV,
    I_MAX,
    I_MIN,
    I_MOD,
    I_MUL,
    I_NEG,
    I_SEL,
    I_SUB,
    I_VAR,
    IFNOT,
    JUMP,
    K_ARRAY,
    K_IN,
    K_OUT,
    MAIN_END,
    OP_COPY,
    OP_FADD,
    OP_FILL,
    OP_FMAC,
    OP_FMAX,
    OP_FMUL,
    OP_FSUB,
    PROLOGUE,
    RECV,
    RUN,
    SEND,
    SET,
    SETI,
    SLOT_COUNT,
    SLOT_INDEX,
    STORE,
    SYNC_END,
    TASK_END,
)
from dtg.pesim.fast.lower import ADD as STORE_ADD
from dtg.pesim.fast.record import record

# ----------------------------------------------------------------- arithmetic


@internal
def rounded(x: float, dtype: int) -> float:
    """``x`` rounded to float32 or float16 (held in a float64)."""
    if dtype == F16:
        return f16.rounded(x)
    return np.float64(np.float32(x))


@compiled
def maximum(a: float, b: float, dtype: int) -> float:
    """``np.maximum``: a NaN wins (the first of two); of two equal numbers (+0 and -0)
    numpy's float32 loops give the second, its float16 loops the first."""
    if a != a:
        return a
    if b != b:
        return b
    if a == b:
        return a if dtype == F16 else b
    return a if a > b else b


@internal
def ieval(p: Program, s: State, base: int, k: int, stack: np.ndarray) -> int:
    """Integer expression (or condition) ``k`` over the variables at ``env[base:]``."""
    start, n = p.int_at[k, 0], p.int_at[k, 1]
    top = 0
    for i in range(start, start + n):
        op, arg = p.ints[i, 0], p.ints[i, 1]
        if op == I_CONST:
            stack[top] = arg
            top += 1
            continue
        if op == I_VAR:
            stack[top] = s.env[base + arg]
            top += 1
            continue
        if op == I_NEG:
            stack[top - 1] = -stack[top - 1]
            continue
        if op == C_NOT:
            stack[top - 1] = 0 if stack[top - 1] else 1
            continue
        if op == I_SEL:  # then, orelse, condition
            cond = stack[top - 1]
            top -= 3
            stack[top] = stack[top] if cond else stack[top + 1]
            top += 1
            continue
        b = stack[top - 1]
        a = stack[top - 2]
        top -= 1
        if op == I_ADD:
            r = a + b
        elif op == I_SUB:
            r = a - b
        elif op == I_MUL:
            r = a * b
        elif op == I_DIV:
            r = a // b
        elif op == I_MOD:
            r = a % b
        elif op == I_MIN:
            r = min(a, b)
        elif op == I_MAX:
            r = max(a, b)
        elif op == C_EQ:
            r = int(a == b)
        elif op == C_NE:
            r = int(a != b)
        elif op == C_LT:
            r = int(a < b)
        elif op == C_LE:
            r = int(a <= b)
        elif op == C_GT:
            r = int(a > b)
        elif op == C_GE:
            r = int(a >= b)
        elif op == C_AND:
            r = int(a != 0 and b != 0)
        else:  # C_OR
            r = int(a != 0 or b != 0)
        stack[top - 1] = r
    return stack[0]


# ------------------------------------------------------------------ memory


@internal
def read_element(p: Program, s: State, array_row: int, slot: int, flat: int) -> float:
    offset = s.arr_offset[slot]
    if p.arrays[array_row, 0] == F16:
        return f16.widen(s.mem16[offset + flat])
    return np.float64(s.mem32[offset + flat])


@internal
def write_element(p: Program, s: State, array_row: int, slot: int, flat: int,
                  value: float) -> None:
    """Store a value already of the array's type."""
    offset = s.arr_offset[slot]
    if p.arrays[array_row, 0] == F16:
        s.mem16[offset + flat] = f16.narrow(value)
    else:
        s.mem32[offset + flat] = np.float32(value)


@internal
def address(p: Program, s: State, c: int, a: int, stack: np.ndarray) -> int:
    """The flat index of address ``a`` in its array, bounds-checked (code.address)."""
    program = s.core[c, PROGRAM]
    slot = p.addresses[a, 0]
    row = p.programs[program, 2] + slot
    rank = p.addresses[a, 1]
    base = s.core[c, ENV]
    flat = 0
    bad = False
    for d in range(rank):
        i = ieval(p, s, base, p.addresses[a, 2 + d], stack)
        n = p.arrays[row, 3 + d]
        s.error[4 + d] = i
        if not 0 <= i < n:
            bad = True
        flat = flat * n + i
    if bad:
        s.error[0] = E_OUT_OF_BOUNDS
        s.error[1] = c
        s.error[2] = row
        s.error[3] = rank
        raise FastError()
    return flat


@internal
def feval(p: Program, s: State, c: int, k: int, dtype: int, istack: np.ndarray,
          fstack: np.ndarray) -> float:
    """Value expression ``k`` computed in ``dtype``, rounded after every operation."""
    start, n = p.float_at[k, 0], p.float_at[k, 1]
    top = 0
    for i in range(start, start + n):
        op, arg = p.floats[i, 0], p.floats[i, 1]
        if op == F_CONST:
            fstack[top] = p.consts[arg]
            top += 1
        elif op == F_VALUE:
            fstack[top] = rounded(s.value[c], dtype)
            top += 1
        elif op == F_LOAD:
            flat = address(p, s, c, arg, istack)
            slot = p.addresses[arg, 0]
            row = p.programs[s.core[c, PROGRAM], 2] + slot
            x = read_element(p, s, row, s.core[c, ARRAYS] + slot, flat)
            fstack[top] = x if p.arrays[row, 0] == dtype else rounded(x, dtype)
            top += 1
        elif op == F_NEG:
            fstack[top - 1] = -fstack[top - 1]
        else:
            b = fstack[top - 1]
            a = fstack[top - 2]
            top -= 1
            fstack[top - 1] = binary(op, a, b, dtype)
    return fstack[0]


@internal
def binary(op: int, a: float, b: float, dtype: int) -> float:
    if op == F_ADD:
        return rounded(a + b, dtype)
    if op == F_SUB:
        return rounded(a - b, dtype)
    if op == F_MUL:
        return rounded(a * b, dtype)
    return maximum(a, b, dtype)  # F_MAX


# ------------------------------------------------------------------- the core


@internal
def charge(s: State, c: int, cycles: int) -> None:
    s.core[c, CLOCK] += cycles
    s.core[c, BUSY] += cycles
    s.core[c, SCALAR] += cycles


@internal
def check_limit(s: State, c: int) -> None:
    if s.core[c, CLOCK] > s.settings[F_LIMIT]:
        s.error[0] = E_CYCLE_LIMIT
        s.error[1] = c
        raise FastError()


@internal
def timeout(s: State, c: int, delay: int) -> None:
    s.core[c, WAKE_KIND] = K_TIMEOUT
    schedule_event(s, s.g[G_NOW] + delay, EV_CORE, c)


@internal
def sync(s: State, c: int) -> bool:
    """``Core.sync``: let simulated time catch up with the core's clock; True when the
    core waits for it."""
    check_limit(s, c)
    delay = s.core[c, CLOCK] - s.g[G_NOW]
    if delay > 0:
        timeout(s, c, delay)
        return True
    s.core[c, CLOCK] = s.g[G_NOW]
    return False


@internal
def push_value(s: State, c: int, x: float) -> None:
    s.stack[s.core[c, STACK] + s.core[c, DEPTH]] = x
    s.core[c, DEPTH] += 1


@internal
def pop_value(s: State, c: int) -> float:
    s.core[c, DEPTH] -= 1
    return s.stack[s.core[c, STACK] + s.core[c, DEPTH]]


@internal
def peek_value(s: State, c: int, below: int) -> float:
    return s.stack[s.core[c, STACK] + s.core[c, DEPTH] - 1 - below]


@internal
def ramp_buffer(s: State, c: int, slot: int, color: int) -> int:
    """``Core.ramp``: the router buffer a send on ``color`` enters."""
    b = s.ramp[s.core[c, RAMPS] + slot] if slot != NONE else NONE
    if b == NONE:
        s.error[0] = E_NO_RAMP
        s.error[1] = c
        s.error[2] = color
        raise FastError()
    return b


@internal
def push(s: State, p: Program, c: int, b: int, value: float, index: int, end: int,
         what: int, detail: int) -> bool:
    """``Core.push``: a wavelet into the router's RAMP buffer; True while it stalls
    (then call again when the core resumes)."""
    if s.buffer[b, B_LEN] >= s.buffer[b, B_CAP]:
        if not s.core[c, WAITING]:
            s.core[c, T0] = s.core[c, WAITING_SINCE] = s.g[G_NOW]
            s.core[c, WAITING] = what
            s.core[c, WAIT_COLOR] = s.buffer[b, B_COLOR]
            s.core[c, WAIT_WHAT] = detail
        wait_on_buffer(s, b, -(c + 1))
        s.core[c, WAKE_KIND] = K_STALL
        s.core[c, WAKE] = SIGNAL_PENDING
        return True
    now = s.g[G_NOW]
    if s.core[c, WAITING]:
        s.core[c, WAITING] = 0
        s.core[c, STALL] += now - s.core[c, T0]
        if s.g[G_TRACING]:
            record(s, R_STALL, c, s.core[c, WAIT_COLOR], s.core[c, T0], now, 0)
    buffer_append(s, b, now, value, index, end)
    s.core[c, SENT] += 1
    if s.buffer[b, B_LEN] == 1 and not s.buffer[b, B_SCHEDULED]:
        forward(s, p, b)
    return False


@internal
def await_value(s: State, c: int, q: int, what: int, detail: int) -> bool:
    """``Core.await_value``: True while the queue has no value (call again on resume)."""
    if has_value(s, q):
        if s.core[c, WAITING]:
            s.core[c, WAITING] = 0
            s.core[c, WAIT] += s.g[G_NOW] - s.core[c, T0]
            if s.g[G_TRACING]:
                record(s, R_WAIT, c, s.core[c, WAIT_COLOR], s.core[c, T0], s.g[G_NOW], 0)
        return False
    if not s.core[c, WAITING]:
        s.core[c, T0] = s.core[c, WAITING_SINCE] = s.g[G_NOW]
        s.core[c, WAITING] = what
        s.core[c, WAIT_COLOR] = s.queue[q, Q_COLOR]
        s.core[c, WAIT_WHAT] = detail
    s.queue[q, Q_ARRIVAL] = 1
    s.core[c, WAKE_KIND] = K_ARRIVAL
    s.core[c, WAKE] = SIGNAL_PENDING
    return True


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
            if _run(p, s, c, a, b, cc, d, istack, fstack):
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
        if sparse:
            s.env[env + SLOT_INDEX] = s.queue[q, Q_BASE]
            s.env[env + SLOT_COUNT] = batch
            clear = p.tasks[task, 8]
            s.core[c, CLOCK] += clear
            s.core[c, BUSY] += clear
        else:
            s.env[env + SLOT_COUNT] = s.queue[q, Q_FILL]
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
        take(s, q, 1)
        if s.queue[q, Q_BATCHED]:
            s.queue[q, Q_END_WAITING] = 0
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
        s.queue[q, Q_FILL] = 0
        s.queue[q, Q_HAS_BASE] = 0
        s.queue[q, Q_CLOSED] = 0
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


@internal
def _prepare(p: Program, s: State, c: int, config: int, variant_expr: int, bases: int,
             istack: np.ndarray) -> int:
    """code.run's ``prepare``: the variant (checked) and the operands' bases."""
    env = s.core[c, ENV]
    v = ieval(p, s, env, variant_expr, istack) if variant_expr != NONE else 0
    if not 0 <= v < p.configs[config, 5]:
        s.error[0] = E_VARIANT_RANGE
        s.error[1] = c
        s.error[2] = config
        s.error[3] = v
        raise FastError()
    row = p.configs[config, 4] + v
    if s.core[c, CONFIGURED] != NONE and not s.configured[s.core[c, CONFIGURED] + row]:
        s.error[0] = E_VARIANT_UNSET
        s.error[1] = c
        s.error[2] = config
        s.error[3] = v
        raise FastError()
    for k in range(3):
        x = p.bases[bases, k]
        s.core[c, S_BASE0 + k] = ieval(p, s, env, x, istack) if x != NONE else 0
    return row


@internal
def _check(p: Program, s: State, c: int, config: int, row: int) -> int:
    """simd_unit.simd_check: the cost; every array operand within its array."""
    ops = p.variants[row, 0]
    width = p.configs[config, 2]
    cost = s.settings[F_STARTUP] + -(-ops // width)
    if s.core[c, CLOCK] + cost > s.settings[F_LIMIT]:
        s.core[c, CLOCK] += cost
        check_limit(s, c)
    program = s.core[c, PROGRAM]
    for k in range(3):
        if p.configs[config, 6 + k] != K_ARRAY:
            continue
        slot = p.configs[config, 9 + k]
        array_row = p.programs[program, 2] + slot
        size = p.arrays[array_row, 1]
        base = s.core[c, S_BASE0 + k]
        if base + p.variants[row, 5 + k] < 0 or base + p.variants[row, 8 + k] >= size:
            start = p.variants[row, 2 + k]
            for i in range(start, start + ops):
                flat = p.offsets[i] + base
                if flat < 0 or flat >= size:
                    s.error[0] = E_SIMD_BOUNDS
                    s.error[1] = c
                    s.error[2] = config
                    s.error[3] = row
                    s.error[4] = base
                    s.error[5] = array_row
                    s.error[6] = flat
                    raise FastError()
    return cost


@internal
def _operand(p: Program, s: State, c: int, config: int, row: int, k: int, e: int,
             dtype: int) -> float:
    """Element ``e`` of array operand ``k``, in the compute type."""
    slot = p.configs[config, 9 + k]
    array_row = p.programs[s.core[c, PROGRAM], 2] + slot
    flat = p.offsets[p.variants[row, 2 + k] + e] + s.core[c, S_BASE0 + k]
    x = read_element(p, s, array_row, s.core[c, ARRAYS] + slot, flat)
    return x if p.arrays[array_row, 0] == dtype else rounded(x, dtype)


@internal
def _compute(op: int, d: float, a: float, b: float, dtype: int) -> float:
    """One element of a SIMD operation (code.elementwise), in the compute type."""
    if op == OP_FMAC:
        return rounded(d + rounded(a * b, dtype), dtype)
    if op == OP_FMUL:
        return rounded(a * b, dtype)
    if op == OP_FADD:
        return rounded(a + b, dtype)
    if op == OP_FSUB:
        return rounded(a - b, dtype)
    if op == OP_FMAX:
        return maximum(a, b, dtype)
    return a  # copy, fill


@internal
def _simd_memory(p: Program, s: State, c: int, config: int, row: int, scalar: float) -> None:
    """simd_unit.run_simd: element by element in domain order (which is what numpy's
    whole-array form computes too where no element reads another's result, and what
    the simulator does where one does)."""
    cost = _check(p, s, c, config, row)
    ops = p.variants[row, 0]
    if s.g[G_TRACING]:
        record(s, R_SIMD, c, config, s.core[c, CLOCK], s.core[c, CLOCK] + cost, ops)
    s.core[c, CLOCK] += cost
    s.core[c, BUSY] += cost
    s.core[c, SIMD_OPS] += ops
    s.core[c, SIMD_FLOPS] += ops * p.configs[config, 17]
    s.core[c, SIMD_RUNS] += 1
    op, dtype = p.configs[config, 0], p.configs[config, 1]
    mem16, mem32, offsets = s.mem16, s.mem32, p.offsets
    # per array operand (0 the destination, 1 and 2 the sources): its type, where its
    # elements start (memory offset plus base) and where its element offsets start
    typ0, at0, first0 = _where(p, s, c, config, row, 0)
    typ1, at1, first1 = _where(p, s, c, config, row, 1)
    typ2, at2, first2 = _where(p, s, c, config, row, 2)
    for e in range(ops):
        x = scalar
        y = 0.0 if op == OP_COPY else scalar
        if op != OP_FILL:
            if typ1 >= 0:
                at = at1 + offsets[first1 + e]
                x = f16.widen(mem16[at]) if typ1 == F16 else np.float64(mem32[at])
                if typ1 != dtype:
                    x = rounded(x, dtype)
            if typ2 >= 0:
                at = at2 + offsets[first2 + e]
                y = f16.widen(mem16[at]) if typ2 == F16 else np.float64(mem32[at])
                if typ2 != dtype:
                    y = rounded(y, dtype)
        at = at0 + offsets[first0 + e]
        if op == OP_FMAC:  # the common case, written out
            d = f16.widen(mem16[at]) if typ0 == F16 else np.float64(mem32[at])
            if dtype == F16:
                result = f16.rounded(d + f16.rounded(x * y))
            else:
                result = np.float64(np.float32(d + np.float64(np.float32(x * y))))
        else:
            result = scalar if op == OP_FILL else _compute(op, 0.0, x, y, dtype)
        if typ0 == F16:
            mem16[at] = f16.narrow(result)
        else:
            mem32[at] = np.float32(result)


@internal
def _where(p: Program, s: State, c: int, config: int, row: int, k: int
           ) -> tuple[int, int, int]:
    """Operand ``k`` of a SIMD instruction: its array's type (-1: not an array), the
    memory offset of its element 0 at the instruction's base, its first element offset."""
    if p.configs[config, 6 + k] != K_ARRAY:
        return -1, 0, 0
    slot = p.configs[config, 9 + k]
    typ = p.arrays[p.programs[s.core[c, PROGRAM], 2] + slot, 0]
    at = s.arr_offset[s.core[c, ARRAYS] + slot] + s.core[c, S_BASE0 + k]
    return typ, at, p.variants[row, 2 + k]


@internal
def _run(p: Program, s: State, c: int, config: int, variant_expr: int, bases: int,
         scalar: int, istack: np.ndarray, fstack: np.ndarray) -> bool:
    """code.run: prepare, the scalar, the instruction. True while a fabric instruction
    waits."""
    if s.core[c, PHASE] == 0:
        row = _prepare(p, s, c, config, variant_expr, bases, istack)
        dtype = p.configs[config, 1]
        if scalar >= 0:
            push_value(s, c, feval(p, s, c, scalar, dtype, istack, fstack))
        elif scalar == NONE:
            push_value(s, c, 0.0)  # (no scalar: a placeholder, popped below)
        if not p.configs[config, 3]:
            _simd_memory(p, s, c, config, row, peek_value(s, c, 0))
            pop_value(s, c)
            return False
        s.core[c, S_CONFIG] = config
        s.core[c, S_VARIANT] = row
        s.core[c, S_COST] = _check(p, s, c, config, row)
        s.core[c, S_BUF] = NONE
        if p.configs[config, 6] == K_OUT:
            s.core[c, S_BUF] = ramp_buffer(s, c, p.configs[config, 18], p.configs[config, 12])
        s.core[c, PHASE] = 1
        if sync(s, c):
            return True
    return _simd_fabric(p, s, c)


@internal
def _simd_fabric(p: Program, s: State, c: int) -> bool:
    """simd_unit.run_simd_fabric: element ``e`` in cycle ``first + e // width + marks`` at
    the earliest and not before its ``in(c)`` wavelets arrived; results sent as they
    are computed. Phases: 1 set up, 2 an element's cycle, 3 its inputs, 4 its result
    sent, 5 a row's end mark sent, 6 the element done."""
    config, row = s.core[c, S_CONFIG], s.core[c, S_VARIANT]
    op, dtype, width = p.configs[config, 0], p.configs[config, 1], p.configs[config, 2]
    ops, inner = p.variants[row, 0], p.variants[row, 1]
    indexed, ends = p.configs[config, 15], p.configs[config, 16]
    dst_kind = p.configs[config, 6]
    now = s.g[G_NOW]
    phase = s.core[c, PHASE]
    if phase == 1:
        s.core[c, S_BEGAN] = now
        s.core[c, BUSY] += s.core[c, S_COST] + (ops // inner if ends else 0)
        s.core[c, SIMD_OPS] += ops
        s.core[c, SIMD_FLOPS] += ops * p.configs[config, 17]
        s.core[c, SIMD_RUNS] += 1
        s.core[c, S_FIRST] = now + s.settings[F_STARTUP]
        s.core[c, S_LAST] = s.core[c, S_FIRST]
        s.core[c, S_MARKS] = 0
        s.core[c, S_E] = 0
        phase = 2
    while True:
        e = s.core[c, S_E]
        if phase == 2:
            if e == ops:
                break
            cycle = max(s.core[c, S_LAST], s.core[c, S_FIRST] + e // width + s.core[c, S_MARKS])
            s.core[c, S_K] = 1
            s.core[c, S_SCALAR] = s.core[c, DEPTH]  # (the inputs go above this)
            phase = 3
            if cycle > s.g[G_NOW]:
                timeout(s, c, cycle - s.g[G_NOW])
                s.core[c, PHASE] = 3
                return True
        if phase == 3:
            while s.core[c, S_K] <= 2:
                k = s.core[c, S_K]
                if p.configs[config, 6 + k] == K_IN:
                    q = s.core[c, QUEUES] + p.configs[config, 18 + k]
                    if await_value(s, c, q, W_SIMD_IN, config):
                        s.core[c, PHASE] = 3
                        return True
                    value, _ = take(s, q, 0)
                    push_value(s, c, rounded(value, dtype))
                s.core[c, S_K] = k + 1
            result = _fabric_element(p, s, c, config, row, e, op, dtype)
            if dst_kind != K_OUT:
                phase = 6
            else:
                push_value(s, c, result)
                phase = 4
        if phase == 4:
            index = e % inner if indexed else NO_INDEX
            if push(s, p, c, s.core[c, S_BUF], peek_value(s, c, 0), index, 0, W_SIMD_OUT,
                    config):
                s.core[c, PHASE] = 4
                return True
            phase = 6
            if ends and (e + 1) % inner == 0:
                s.core[c, S_MARKS] += 1
                phase = 5
        if phase == 5:
            if push(s, p, c, s.core[c, S_BUF], 0.0, NO_INDEX, 1, W_SIMD_OUT, config):
                s.core[c, PHASE] = 5
                return True
            phase = 6
        # phase 6: the element is done
        s.core[c, DEPTH] = s.core[c, S_SCALAR]
        last = s.g[G_NOW]
        s.core[c, S_LAST] = last
        if last > s.settings[F_LIMIT]:
            s.core[c, CLOCK] = last
            check_limit(s, c)
        s.core[c, S_E] = e + 1
        phase = 2
    s.core[c, CLOCK] = s.core[c, S_LAST] + 1
    if s.g[G_TRACING]:
        record(s, R_SIMD, c, config, s.core[c, S_BEGAN], s.core[c, CLOCK], ops)
    s.core[c, PHASE] = 0
    pop_value(s, c)  # the scalar (or its placeholder)
    s.core[c, PC] += 1
    return False


@internal
def _fabric_element(p: Program, s: State, c: int, config: int, row: int, e: int, op: int,
                    dtype: int) -> float:
    """Element ``e`` of a fabric instruction: its sources (array elements, the in(c)
    values on the stack in operand order, the scalar below them), computed and written
    to the destination array if it has one."""
    base = s.core[c, S_SCALAR]
    scalar = s.stack[s.core[c, STACK] + base - 1]
    got = 0
    x = y = scalar
    for k in (1, 2):
        kind = p.configs[config, 6 + k]
        v = scalar
        if kind == K_ARRAY:
            v = _operand(p, s, c, config, row, k, e, dtype)
        elif kind == K_IN:
            v = s.stack[s.core[c, STACK] + base + got]
            got += 1
        if k == 1:
            x = v
        else:
            y = v
    if op == OP_FILL:
        x = scalar
    result = 0.0
    if p.configs[config, 6] == K_ARRAY:
        slot = p.configs[config, 9]
        array_row = p.programs[s.core[c, PROGRAM], 2] + slot
        where = s.core[c, ARRAYS] + slot
        flat = p.offsets[p.variants[row, 2] + e] + s.core[c, S_BASE0]
        d = read_element(p, s, array_row, where, flat) if op == OP_FMAC else 0.0
        result = _compute(op, d, x, y, dtype)
        write_element(p, s, array_row, where, flat, result)
    else:
        result = _compute(op, 0.0, x, y, dtype)
    return result

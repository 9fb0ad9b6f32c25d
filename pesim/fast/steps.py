"""The compiled engine's cores, their steps: expressions, local memory, the clock, the
value stack, and sending into and waiting on the fabric (``Core.push``,
``Core.await_value``), shared by the instructions of :mod:`pesim.fast.interp` and the
SIMD instructions of :mod:`pesim.fast.simd`.

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
    E_NO_RAMP,
    E_OUT_OF_BOUNDS,
    FastError,
)
from dtg.pesim.fast.events import (
    buffer_append,
    forward,
    has_value,
    wait_on_buffer,
)
from dtg.pesim.fast.jit import compiled, internal
from dtg.pesim.fast.layout import (
    ARRAYS,
    B_CAP,
    B_COLOR,
    B_LEN,
    B_SCHEDULED,
    BUSY,
    CLOCK,
    DEPTH,
    ENV,
    EV_CORE,
    F_LIMIT,
    G_NOW,
    G_TRACING,
    K_ARRIVAL,
    K_STALL,
    K_TIMEOUT,
    NONE,
    PROGRAM,
    Q_ARRIVAL,
    Q_COLOR,
    R_STALL,
    R_WAIT,
    RAMPS,
    SCALAR,
    SENT,
    SIGNAL_PENDING,
    STACK,
    STALL,
    T0,
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
    C_AND,
    C_EQ,
    C_GE,
    C_GT,
    C_LE,
    C_LT,
    C_NE,
    C_NOT,
    F16,
    F_ADD,
    F_CONST,
    F_LOAD,
    F_MUL,
    F_NEG,
    F_SUB,
    F_VALUE,
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
)
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

"""The compiled engine's SIMD instructions (``simd_unit.run_simd`` and
``run_simd_fabric``): a variant's checks and cost, its elements in domain order on
local memory, and fabric operands element by element with the waits they take."""

from __future__ import annotations

import numpy as np

from dtg.pesim.fast import f16
from dtg.pesim.fast.errors import (
    E_LENGTH_RANGE,
    E_SIMD_BOUNDS,
    E_VARIANT_RANGE,
    E_VARIANT_UNSET,
    FastError,
)
from dtg.pesim.fast.events import (
    fail,
    take,
)
from dtg.pesim.fast.jit import internal
from dtg.pesim.fast.layout import (
    ARRAYS,
    BUSY,
    CLOCK,
    CONFIGURED,
    DEPTH,
    ENV,
    F_LIMIT,
    F_STARTUP,
    G_NOW,
    G_TRACING,
    NO_INDEX,
    NONE,
    PC,
    PHASE,
    PROGRAM,
    QUEUES,
    R_SIMD,
    S_BASE0,
    S_BASES,
    S_BEGAN,
    S_BUF,
    S_CONFIG,
    S_COST,
    S_E,
    S_FIRST,
    S_INNER,
    S_K,
    S_LAST,
    S_MARKS,
    S_OPS,
    S_SCALAR,
    S_VARIANT,
    SIMD_FLOPS,
    SIMD_OPS,
    SIMD_RUNS,
    STACK,
    W_SIMD_IN,
    W_SIMD_OUT,
    Program,
    State,
)
from dtg.pesim.fast.lower import (
    F16,
    K_ARRAY,
    K_IN,
    K_OUT,
    OP_COPY,
    OP_FADD,
    OP_FILL,
    OP_FMAC,
    OP_FMAX,
    OP_FMUL,
    OP_FSUB,
)
from dtg.pesim.fast.record import record
from dtg.pesim.fast.steps import (
    await_value,
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
def _prepare(p: Program, s: State, c: int, config: int, variant_expr: int, bases: int,
             istack: np.ndarray) -> int:
    """code.run's ``prepare``: the variant (checked) and the operands' bases."""
    env = s.core[c, ENV]
    v = ieval(p, s, env, variant_expr, istack) if variant_expr != NONE else 0
    if not 0 <= v < p.configs[config, 5]:
        fail(s, E_VARIANT_RANGE, c, config, v, 0)
    row = p.configs[config, 4] + v
    if s.core[c, CONFIGURED] != NONE and not s.configured[s.core[c, CONFIGURED] + row]:
        fail(s, E_VARIANT_UNSET, c, config, v, 0)
    ops, inner = p.variants[row, 0], p.variants[row, 1]
    x = p.bases[bases, 3]
    if x != NONE:  # the dimension pe.ir.cut_dimension cut to a length
        n = ieval(p, s, env, x, istack)
        outer = p.variants[row, 11]
        if not 1 <= n <= outer:
            fail(s, E_LENGTH_RANGE, c, config, row, n)
        ops = n * (ops // outer)
        if p.variants[row, 12] == 1:
            inner = n
    s.core[c, S_OPS] = ops
    s.core[c, S_INNER] = inner
    s.core[c, S_BASES] = bases
    for k in range(3):
        x = p.bases[bases, k]
        s.core[c, S_BASE0 + k] = ieval(p, s, env, x, istack) if x != NONE else 0
    return row


@internal
def _slot(p: Program, s: State, c: int, config: int, k: int) -> int:
    """The array slot of operand ``k`` in the running instruction: the one its run binds,
    else the configuration's."""
    bound = p.bases[s.core[c, S_BASES], 4 + k]
    return bound if bound != NONE else p.configs[config, 9 + k]


@internal
def _check(p: Program, s: State, c: int, config: int, row: int) -> int:
    """simd_unit.simd_check: the cost; every array operand within its array."""
    ops = s.core[c, S_OPS]
    width = p.configs[config, 2]
    cost = s.settings[F_STARTUP] + -(-ops // width)
    if s.core[c, CLOCK] + cost > s.settings[F_LIMIT]:
        s.core[c, CLOCK] += cost
        check_limit(s, c)
    program = s.core[c, PROGRAM]
    for k in range(3):
        if p.configs[config, 6 + k] != K_ARRAY:
            continue
        slot = _slot(p, s, c, config, k)
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
                    full = p.variants[row, 0]
                    s.error[7] = ops // (full // p.variants[row, 11]) if ops != full else 0
                    raise FastError()
    return cost


@internal
def _operand(p: Program, s: State, c: int, config: int, row: int, k: int, e: int,
             dtype: int) -> float:
    """Element ``e`` of array operand ``k``, in the compute type."""
    slot = _slot(p, s, c, config, k)
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
    ops = s.core[c, S_OPS]
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
    slot = _slot(p, s, c, config, k)
    typ = p.arrays[p.programs[s.core[c, PROGRAM], 2] + slot, 0]
    at = s.arr_offset[s.core[c, ARRAYS] + slot] + s.core[c, S_BASE0 + k]
    return typ, at, p.variants[row, 2 + k]


@internal
def run_simd(p: Program, s: State, c: int, config: int, variant_expr: int, bases: int,
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
    ops, inner = s.core[c, S_OPS], s.core[c, S_INNER]
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
        slot = _slot(p, s, c, config, 0)
        array_row = p.programs[s.core[c, PROGRAM], 2] + slot
        where = s.core[c, ARRAYS] + slot
        flat = p.offsets[p.variants[row, 2] + e] + s.core[c, S_BASE0]
        d = read_element(p, s, array_row, where, flat) if op == OP_FMAC else 0.0
        result = _compute(op, d, x, y, dtype)
        write_element(p, s, array_row, where, flat, result)
    else:
        result = _compute(op, 0.0, x, y, dtype)
    return result

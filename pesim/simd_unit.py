"""SIMD instructions as the core executes them: on local memory as whole numpy
operations (strided views, reductions in order), with fabric operands element by element
at the cycles the cost table gives."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from dtg.lair.limits import counted
from dtg.pesim.code import END, NUMPY, SimdInfo, Variant, elementwise

if TYPE_CHECKING:
    from dtg.pesim.core import Core

Gen = Generator[Any, Any, Any]
MAX_SIMD_ELEMENTS = 1 << 24




# Floating-point operations per element of each SIMD operation.
FLOPS = {"fmac": 2, "fmul": 1, "fadd": 1, "fsub": 1, "fmax": 1, "copy": 0, "fill": 0}


def ins_ops(info: SimdInfo) -> list[tuple[int, Any]]:
    """The ``in(c)`` operands of an instruction with their positions."""
    return [(k, o) for k, o in enumerate(info.operands) if o.kind == "in"]


def simd_check(core: Core, info: SimdInfo, v: int, bases: Mapping[str, int],
               length: int | None = None) -> tuple[Variant, int]:
    """The variant (cut to ``length``) and cost of an instruction, its operands checked to
    lie within their arrays (and the cycle limit not to be passed)."""
    var = info.variant(v, MAX_SIMD_ELEMENTS, length)
    cost = core.config.simd_startup + -(-var.ops // info.width)
    if core.clock + cost > core.limit:
        core.clock += cost
        core.check_limit()
    for k, o in enumerate(info.operands):
        if o.kind != "array":
            continue
        assert o.array is not None
        base = bases[o.array]
        size = core.flat[o.array].size
        if base + var.low[k] < 0 or base + var.high[k] >= size:
            idx = var.offsets[k] + base
            bad = int(idx[(idx < 0) | (idx >= size)][0])
            shape = "".join(f"[{n}]" for n in core.arrays[o.array].shape)
            raise core.error(f"simd {info.config.name} {list(var.sizes)} with base {base} "
                             f"accesses {o.array} at flat index {bad}, outside the array "
                             f"{o.array}{shape} ({counted(size, 'element')})")
    return var, cost

def simd_index(info: SimdInfo, var: Variant, bases: Mapping[str, int]
               ) -> dict[int, np.ndarray]:
    """The flat element indices of every array operand, in domain order."""
    return {k: var.offsets[k] + bases[o.array]  # type: ignore[index]
            for k, o in enumerate(info.operands) if o.kind == "array"}

def run_simd(core: Core, info: SimdInfo, v: int, bases: Mapping[str, int], scalar: Any,
             length: int | None = None) -> None:
    """A SIMD instruction on local memory: one step of the clock, numpy for the work
    (operands as strided views where their elements are evenly spaced)."""
    var, cost = simd_check(core, info, v, bases, length)
    if core.trace is not None:
        core.trace.span(core.pe, f"simd {info.config.name}", "simd", core.clock,
                        core.clock + cost, {"ops": var.ops})
    core.clock += cost
    core.busy += cost
    core.simd_ops += var.ops
    core.simd_flops += var.ops * FLOPS[info.config.op]
    core.simd_runs += 1
    config = info.config
    dtype = NUMPY[info.dtype]
    dst = core.flat[config.dst.array]  # type: ignore[index]
    if not var.dst_unique or info.reads_its_destination:
        index = simd_index(info, var, bases)
        if not var.dst_unique and config.op == "fmac" and not info.reads_its_destination:
            simd_accumulate(core, info, index, scalar)
            return
        if not var.dst_unique or hazard(core, info, index):
            simd_sequential(core, info, var, index, scalar)
            return
    steps = var.steps

    def where(k: int) -> Any:
        o = info.operands[k]
        base = bases[o.array]  # type: ignore[index]
        return var.span(k, base) if k in steps else var.offsets[k] + base

    def operand(k: int) -> Any:
        o = info.operands[k]
        if o.kind == "array":
            x = core.flat[o.array][where(k)]  # type: ignore[index]
            return x if x.dtype == dtype else x.astype(dtype)
        return dtype(scalar)

    at = where(0)
    if config.op == "fill":
        dst[at] = dtype(scalar)
        return
    a = operand(1)
    b: Any = operand(2) if len(info.operands) > 2 else None
    match config.op:
        case "fmac":
            d = dst[at]
            d = d if d.dtype == dtype else d.astype(dtype)
            result = d + a * b
        case "fmul":
            result = a * b
        case "fadd":
            result = a + b
        case "fsub":
            result = a - b
        case "fmax":
            result = np.maximum(a, b)
        case _:
            result = a
    dst[at] = result

def simd_accumulate(core: Core, info: SimdInfo, index: dict[int, np.ndarray], scalar: Any
                    ) -> None:
    """A multiply-add into repeated destinations (a reduction) whose sources are
    other arrays: the products at once, then the additions in domain order, each
    rounded to the compute type (``np.add.at`` adds unbuffered, in index order), which
    is what element by element computes."""
    dtype = NUMPY[info.dtype]
    vals = []
    for k in (1, 2):
        o = info.operands[k]
        if o.kind == "array":
            x = core.flat[o.array][index[k]]  # type: ignore[index]
            vals.append(x if x.dtype == dtype else x.astype(dtype))
        else:
            vals.append(dtype(scalar))
    products = np.multiply(vals[0], vals[1], dtype=dtype)
    dst = core.flat[info.config.dst.array]  # type: ignore[index]
    assert dst.dtype == dtype  # the compute type is the destination's
    np.add.at(dst, index[0], np.broadcast_to(products, index[0].shape))

def hazard(core: Core, info: SimdInfo, index: dict[int, np.ndarray]) -> bool:
    """Does some element read what an earlier element of the same instruction wrote?"""
    dst_name = info.config.dst.array
    dst = index[0]
    for k, o in enumerate(info.operands[1:], start=1):
        if o.kind != "array" or o.array != dst_name:
            continue
        src = index[k]
        if np.array_equal(src, dst):
            continue
        order = np.argsort(dst, kind="stable")
        sorted_dst = dst[order]
        pos = np.clip(np.searchsorted(sorted_dst, src), 0, dst.size - 1)
        hit = sorted_dst[pos] == src
        writer = order[pos]
        if np.any(hit & (writer < np.arange(src.size))):
            return True
    return False

def simd_sequential(core: Core, info: SimdInfo, var: Variant, index: dict[int, np.ndarray],
                    scalar: Any) -> None:
    """Element by element in domain order, for instructions that read their own writes."""
    dtype = NUMPY[info.dtype]
    fn = elementwise(info.config.op)
    operands = info.operands
    dst = core.flat[info.config.dst.array]  # type: ignore[index]
    for e in range(var.ops):
        vals = []
        for k in range(1, len(operands)):
            o = operands[k]
            vals.append(dtype(core.flat[o.array][index[k][e]]) if o.kind == "array"  # type: ignore[index]
                        else dtype(scalar))
        if info.config.op == "fill":
            vals = [dtype(scalar)]
        a = vals[0]
        b = vals[1] if len(vals) > 1 else None
        d = dtype(dst[index[0][e]]) if info.config.op == "fmac" else None
        dst[index[0][e]] = fn(d, a, b)

def run_simd_fabric(core: Core, info: SimdInfo, v: int, bases: Mapping[str, int], scalar: Any,
                    length: int | None = None) -> Gen:
    """A SIMD instruction with fabric operands: element ``k`` is computed in cycle
    ``start + startup + k // width`` at the earliest, and not before its ``in(c)``
    wavelets arrived; ``out(c)`` results enter the router in that cycle. An
    ``out(c, index)`` result carries its innermost coordinate as the index; with
    ``end``, an end mark follows each innermost row, taking the next cycle's slot."""
    var, cost = simd_check(core, info, v, bases, length)
    index = simd_index(info, var, bases)
    config = info.config
    out = core.ramp(config.dst.color) if config.dst.kind == "out" else None  # type: ignore[arg-type]
    yield from core.sync()
    began = int(core.sim._now)
    dtype = NUMPY[info.dtype]
    fn = elementwise(config.op)
    operands = info.operands
    dst = core.flat[config.dst.array] if config.dst.kind == "array" else None  # type: ignore[index]
    indexed = config.dst.kind == "out" and config.dst.indexed
    ends = config.dst.kind == "out" and config.dst.ends
    row = var.sizes[-1] if var.sizes else 1
    core.busy += cost + (var.ops // row if ends else 0)  # (end marks take a slot)
    core.simd_ops += var.ops
    core.simd_flops += var.ops * FLOPS[config.op]
    core.simd_runs += 1
    first = core.now() + core.config.simd_startup
    last = first
    width = info.width
    marks = 0
    env = core.sim
    waits = [(k, o.color, f"in({o.color}) of simd {config.name}") for k, o in ins_ops(info)]
    what = f"out of simd {config.name}"
    scalar_value = dtype(scalar) if scalar is not None else None
    # per source: the array and its indices, or None for an in(c) or the scalar
    plan = [(core.flat[o.array], index[k]) if o.kind == "array" else None  # type: ignore[index]
            for k, o in enumerate(operands) if k > 0]
    fill, fmac = config.op == "fill", config.op == "fmac"
    dst_index = index.get(0)
    for e in range(var.ops):
        cycle = max(last, first + e // width + marks)
        now = int(env._now)
        if cycle > now:
            yield core.timer.timeout(cycle - now)
        got: dict[int, Any] = {}
        for k, color, waiting in waits:
            assert color is not None
            if not core.has_value(color):
                yield from core.await_value(color, waiting)
            w = core.take(color, mark=False)
            assert w is not None
            got[k] = dtype(w[0])
        vals = [dtype(src[0][src[1][e]]) if src is not None else
                got.get(k, scalar_value)
                for k, src in enumerate(plan, start=1)]
        if fill:
            vals = [scalar_value]
        d = dtype(dst[dst_index[e]]) if fmac and dst is not None else None  # type: ignore[index]
        result = fn(d, vals[0], vals[1] if len(vals) > 1 else None)
        if dst is not None:
            dst[dst_index[e]] = result  # type: ignore[index]
        elif indexed:
            assert out is not None
            yield from core.push(out, (float(result), e % row), what)
            if ends and (e + 1) % row == 0:
                marks += 1
                yield from core.push(out, END, what)
        else:
            assert out is not None
            yield from core.push(out, (float(result), None), what)
        last = int(env._now)
        check_limit_at(core, last)
    core.clock = last + 1
    if core.trace is not None:
        core.trace.span(core.pe, f"simd {config.name}", "simd", began, core.clock,
                        {"ops": var.ops})

def check_limit_at(core: Core, t: int) -> None:
    if t > core.limit:
        core.clock = t
        core.check_limit()

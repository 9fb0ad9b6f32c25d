"""PE code compiled to Python closures, once per program and shared by its PEs.

Scalar code is not simulated cycle by cycle: each statement adds its cost from the cost
table to the core's clock and does its work at once. Only fabric interactions (``send``,
``send_end``, ``recv``, SIMD instructions with ``in``/``out`` operands) must happen at the
right simulated time; statements that contain one become generator functions that the
core's simpy process drives (``yield from``), all others stay plain functions. So a task
without fabric interaction costs no simulation event at all until it ends.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from dtg.errors import SimulationError
from dtg.pe.fabric import FabricConfig
from dtg.pe.ir import (
    Activate,
    Array,
    FBin,
    FConst,
    FExpr,
    FNeg,
    For,
    FValue,
    If,
    Load,
    PeProgram,
    Recv,
    Run,
    Send,
    SendEnd,
    SetInt,
    SimdConfig,
    SimdOperand,
    Stmt,
    Store,
    Task,
    bind_config,
    cut_dimension,
)
from dtg.pe.walk import address_ops, cond_ops, iexpr_ops
from dtg.pesim.expr import compile_cond, compile_iexpr

if TYPE_CHECKING:
    from dtg.pesim.core import Core

Gen = Generator[Any, Any, Any]
Plain = Callable[["Core"], None]
GenFn = Callable[["Core"], Gen]
ValueFn = Callable[["Core"], Any]
NUMPY = {"float16": np.float16, "float32": np.float32}
END = None  # the end-of-sequence mark travels as ``None`` in place of a wavelet tuple


def arithmetic(e: FExpr) -> int:
    """Floating-point operations in a value expression (for the share done by SIMD)."""
    match e:
        case FBin(_, lhs, rhs):
            return 1 + arithmetic(lhs) + arithmetic(rhs)
        case FNeg(operand):
            return 1 + arithmetic(operand)
    return 0


class CycleLimitError(SimulationError):
    """The run went past the configured cycle limit."""


@dataclass(frozen=True)
class Code:
    """A compiled block: ``gen`` is None when the block never touches the fabric."""

    plain: Plain | None
    gen: GenFn | None

    def __post_init__(self) -> None:
        assert (self.plain is None) != (self.gen is None)


@dataclass(frozen=True)
class Variant:
    """One size variant of a SIMD configuration, with its operands' element offsets."""

    sizes: tuple[int, ...]
    ops: int
    offsets: dict[int, np.ndarray]  # operand position (0 = destination) -> offsets
    low: dict[int, int]
    high: dict[int, int]
    dst_unique: bool
    # operand position -> s when its offsets are low, low + s, low + 2 s, ... (s > 0): the
    # operand is then the slice [base + low : ... : s] of its array, a view, not a gather
    steps: dict[int, int] = field(default_factory=dict)

    def span(self, k: int, base: int) -> slice:
        """The elements of array operand ``k`` (which has a step) at ``base``."""
        start = base + self.low[k]
        step = self.steps[k]
        return slice(start, start + step * (self.ops - 1) + 1, step)


@dataclass(frozen=True)
class SimdInfo:
    config: SimdConfig
    dtype: str  # compute type
    width: int
    fabric: bool
    variants: dict[int, Variant] = field(default_factory=dict)
    cut: dict[tuple[int, int], Variant] = field(default_factory=dict)  # (variant, length)

    @property
    def reads_its_destination(self) -> bool:
        """Whether a source is the destination array (so an element may read an earlier
        element's result: pesim checks before computing all elements at once)."""
        dst = self.config.dst
        return dst.kind == "array" and any(
            o.kind == "array" and o.array == dst.array for o in self.config.srcs)

    @cached_property
    def operands(self) -> tuple[SimdOperand, ...]:
        return (self.config.dst, *self.config.srcs)

    def variant(self, v: int, limit_ops: int, length: int | None = None) -> Variant:
        """Variant ``v``, its :func:`cut_dimension` cut to ``length`` when given (the
        elements of the first ``length`` values of it: a prefix in domain order)."""
        found = self.variants.get(v)
        if found is None:
            sizes = self.config.variants[v]
            ops = math.prod(sizes)
            if ops > limit_ops:
                raise SimulationError(f"simd {self.config.name} {list(sizes)} has {ops} "
                                      f"elements, more than the {limit_ops} this simulator "
                                      "handles in one instruction")
            offsets: dict[int, np.ndarray] = {}
            for k, o in enumerate(self.operands):
                if o.kind != "array":
                    continue
                offs = np.zeros(1, dtype=np.int64)
                for n, stride in zip(sizes, o.strides, strict=True):
                    offs = (offs[:, None] + stride * np.arange(n, dtype=np.int64)[None, :]
                            ).ravel()
                offsets[k] = offs
            found = _variant(sizes, offsets)
            self.variants[v] = found
        d = cut_dimension(found.sizes)
        if length is None or length == found.sizes[d]:
            return found
        cut = self.cut.get((v, length))
        if cut is None:
            sizes = (*found.sizes[:d], length, *found.sizes[d + 1:])
            ops = math.prod(sizes)
            cut = _variant(sizes, {k: o[:ops] for k, o in found.offsets.items()})
            self.cut[(v, length)] = cut
        return cut


def _variant(sizes: tuple[int, ...], offsets: dict[int, np.ndarray]) -> Variant:
    ops = math.prod(sizes)
    low = {k: int(v.min()) for k, v in offsets.items()}
    high = {k: int(v.max()) for k, v in offsets.items()}
    unique = 0 not in offsets or np.unique(offsets[0]).size == ops
    steps = {}
    for k, offs in offsets.items():
        step = int(offs[1] - offs[0]) if ops > 1 else 1
        if step > 0 and (ops == 1 or np.array_equal(np.diff(offs), np.full(ops - 1, step))):
            steps[k] = step
    return Variant(sizes, ops, offsets, low, high, unique, steps)


def compute_dtype(config: SimdConfig, arrays: dict[str, Array]) -> str:
    """The type a SIMD instruction computes in: its destination array's, else the widest of
    its array sources (float32 when it has none: wavelets carry 32-bit values)."""
    if config.dst.kind == "array" and config.dst.array is not None:
        return arrays[config.dst.array].dtype
    types = {arrays[o.array].dtype for o in config.srcs if o.kind == "array" and o.array}
    return "float16" if types == {"float16"} else "float32"


def has_recv(e: FExpr) -> bool:
    match e:
        case Recv():
            return True
        case FBin(_, lhs, rhs):
            return has_recv(lhs) or has_recv(rhs)
        case FNeg(operand):
            return has_recv(operand)
    return False


def elementwise(op: str) -> Callable[[Any, Any, Any], Any]:
    """One element of a SIMD operation on numpy scalars of the compute type: (dst, a, b)."""
    return {
        "fmac": lambda d, a, b: d + a * b,
        "fmul": lambda d, a, b: a * b,
        "fadd": lambda d, a, b: a + b,
        "fsub": lambda d, a, b: a - b,
        "fmax": lambda d, a, b: np.maximum(a, b),
        "copy": lambda d, a, b: a,
        "fill": lambda d, a, b: a,
    }[op]


class ConfigSetup:
    """Which SIMD configuration variants a PE of a program sets up (their guards)."""

    def __init__(self, program: PeProgram):
        self.all = frozenset((c.name, k) for c in program.configs
                             for k in range(len(c.variants)))
        self.guarded = [((c.name, k), compile_cond(g)) for c in program.configs
                        for k, g in enumerate(c.guards) if g is not None]

    def variants(self, env: dict[str, int]) -> frozenset[tuple[str, int]]:
        """(configuration, variant) pairs set up on the PE with coordinates ``env``."""
        if not self.guarded:
            return self.all
        return self.all - {key for key, g in self.guarded if not g(env)}

    def count(self, env: dict[str, int]) -> int:
        return len(self.variants(env))


class ProgramCode:
    """Every task of one program, compiled; SIMD variants are prepared on first use."""

    def __init__(self, program: PeProgram, config: FabricConfig):
        self.program = program
        self.config = config
        self.arrays = {a.name: a for a in program.arrays}
        self.simd = {}
        for c in program.configs:
            dtype = compute_dtype(c, self.arrays)
            fabric = any(o.kind in ("in", "out") for o in (c.dst, *c.srcs))
            self.simd[c.name] = SimdInfo(c, dtype, config.simd_width(dtype, c.op), fabric)
        self.setup = ConfigSetup(program)
        self.tasks: dict[str, Code] = {t.name: self.block(t.body) for t in program.tasks}
        self.by_name: dict[str, Task] = {t.name: t for t in program.tasks}
        self.main = next((t for t in program.tasks if t.kind == "main"), None)
        self.data = {t.color: t for t in program.tasks if t.kind == "data"}
        self.batched = {c: t for c, t in self.data.items() if t.batch is not None}
        self.control = {t.color: t for t in program.tasks if t.kind == "control"}

    # --------------------------------------------------------------------- blocks

    def block(self, body: tuple[Stmt, ...]) -> Code:
        items = [self.stmt(s) for s in body]
        if all(c.plain is not None for c in items):
            plains = [c.plain for c in items]
            if len(plains) == 1:
                return Code(plains[0], None)

            def run_all(core: Core) -> None:
                for f in plains:
                    f(core)  # type: ignore[misc]
            return Code(run_all, None)

        def run_gen(core: Core) -> Gen:
            for c in items:
                if c.gen is not None:
                    yield from c.gen(core)
                else:
                    c.plain(core)  # type: ignore[misc]
        return Code(None, run_gen)

    def stmt(self, s: Stmt) -> Code:
        match s:
            case Store():
                return self.store(s)
            case SetInt():
                return self.set_int(s)
            case For():
                return self.loop(s)
            case If():
                return self.branch(s)
            case Send():
                return self.send(s)
            case SendEnd(color):
                def send_end(core: Core) -> Gen:
                    yield from core.send(color, END)
                return Code(None, send_end)
            case Activate(task):
                cost = self.config.scalar_op

                def activate(core: Core) -> None:
                    core.charge(cost)
                    core.activate(task)
                return Code(activate, None)
            case Run():
                return self.run(s)
        raise TypeError(s)

    # ----------------------------------------------------------------- statements

    def store(self, s: Store) -> Code:
        array = self.arrays[s.target.array]
        dtype = NUMPY[array.dtype]
        where, addr_cost = self.address(s.target)
        op = self.config.scalar_op
        cost = addr_cost + op * (1 if s.op == "=" else 3)  # store, or load + op + store
        name = array.name
        kind = s.op

        def write(core: Core, v: Any) -> None:
            a = core.arrays[name]
            i = where(core)
            if kind == "=":
                a[i] = v
            elif kind == "+=":
                a[i] = a[i] + v
            else:
                a[i] = np.maximum(a[i], v)

        flops = arithmetic(s.value) + (0 if kind == "=" else 1)
        if has_recv(s.value):
            value_gen = self.fexpr_gen(s.value, dtype)

            def store_gen(core: Core) -> Gen:
                v = yield from value_gen(core)
                core.charge(cost)
                core.flops += flops
                write(core, v)
            return Code(None, store_gen)
        value, value_cost = self.fexpr(s.value, dtype)
        total = cost + value_cost

        def store(core: Core) -> None:
            core.charge(total)
            core.flops += flops
            write(core, value(core))
        return Code(store, None)

    def set_int(self, s: SetInt) -> Code:
        fn = compile_iexpr(s.value)
        cost = self.config.scalar_op * (1 + iexpr_ops(s.value))
        name = s.name
        if s.op == "=":
            def assign(core: Core) -> None:
                core.charge(cost)
                core.env[name] = fn(core.env)
            return Code(assign, None)

        def add(core: Core) -> None:
            core.charge(cost)
            core.env[name] += fn(core.env)
        return Code(add, None)

    def loop(self, s: For) -> Code:
        lo, hi = compile_iexpr(s.lo), compile_iexpr(s.hi)
        setup = self.config.for_setup + self.config.scalar_op * (iexpr_ops(s.lo) + iexpr_ops(s.hi))
        step = self.config.for_iteration
        body = self.block(s.body)
        var = s.var
        if body.plain is not None:
            inner = body.plain

            def loop(core: Core) -> None:
                env = core.env
                first, last = lo(env), hi(env)
                core.charge(setup)
                for i in range(first, last + 1):
                    env[var] = i
                    core.charge(step)
                    core.check_limit()
                    inner(core)
            return Code(loop, None)
        inner_gen = body.gen
        assert inner_gen is not None

        def loop_gen(core: Core) -> Gen:
            env = core.env
            first, last = lo(env), hi(env)
            core.charge(setup)
            for i in range(first, last + 1):
                env[var] = i
                core.charge(step)
                core.check_limit()
                yield from inner_gen(core)
        return Code(None, loop_gen)

    def branch(self, s: If) -> Code:
        test = compile_cond(s.cond)
        cost = 0 if s.static else self.config.if_branch + self.config.scalar_op * cond_ops(
            s.cond)
        then, orelse = self.block(s.then), self.block(s.orelse)
        if then.plain is not None and orelse.plain is not None:
            t, o = then.plain, orelse.plain

            def branch(core: Core) -> None:
                core.charge(cost)
                (t if test(core.env) else o)(core)
            return Code(branch, None)

        def branch_gen(core: Core) -> Gen:
            core.charge(cost)
            code = then if test(core.env) else orelse
            if code.gen is not None:
                yield from code.gen(core)
            else:
                code.plain(core)  # type: ignore[misc]
        return Code(None, branch_gen)

    def send(self, s: Send) -> Code:
        color = s.color
        index = compile_iexpr(s.index) if s.index is not None else None
        index_cost = self.config.scalar_op * (iexpr_ops(s.index) if s.index is not None else 0)
        f32 = np.float32
        flops = arithmetic(s.value)
        if has_recv(s.value):
            value_gen = self.fexpr_gen(s.value, f32)

            def send_recv(core: Core) -> Gen:
                v = yield from value_gen(core)
                core.charge(index_cost)
                core.flops += flops
                i = index(core.env) if index is not None else None
                yield from core.send(color, (float(v), i))
            return Code(None, send_recv)
        value, value_cost = self.fexpr(s.value, f32)
        cost = value_cost + index_cost

        def send(core: Core) -> Gen:
            core.charge(cost)
            core.flops += flops
            i = index(core.env) if index is not None else None
            yield from core.send(color, (float(value(core)), i))
        return Code(None, send)

    def run(self, s: Run) -> Code:
        info = self.simd[s.config]
        if s.arrays:  # (the same variants and offsets, on the arrays the run binds)
            info = replace(info, config=bind_config(info.config, s))
        variant = compile_iexpr(s.variant) if s.variant is not None else None
        length = compile_iexpr(s.length) if s.length is not None else None
        bases = dict((s.array(name), compile_iexpr(e)) for name, e in s.bases)
        op_cost = sum(iexpr_ops(e) for _, e in s.bases) + len(s.arrays)
        for chosen in (s.variant, s.length):
            if chosen is not None:
                op_cost += iexpr_ops(chosen)
        cost = self.config.scalar_op * op_cost
        for chosen in (s.variant, s.length):
            if chosen is not None:
                cost += self.config.simd_variant_select
        dtype = NUMPY[info.dtype]
        scalar: ValueFn | None = None
        scalar_gen: GenFn | None = None
        if s.scalar is not None:
            if has_recv(s.scalar):
                scalar_gen = self.fexpr_gen(s.scalar, dtype)
            else:
                scalar, scalar_cost = self.fexpr(s.scalar, dtype)
                cost += scalar_cost
        name = s.config

        def prepare(core: Core) -> tuple[int, dict[str, int], int | None]:
            env = core.env
            v = variant(env) if variant is not None else 0
            if not 0 <= v < len(info.config.variants):
                raise core.error(f"run {name} selects variant {v}; simd {name} has variants "
                                 f"0..{len(info.config.variants) - 1}")
            if core.configured is not None and (name, v) not in core.configured:
                raise core.error(f"run {name} selects variant {v}, which this PE did not set "
                                 "up (its guard does not hold here)")
            n = length(env) if length is not None else None
            sizes = info.config.variants[v]
            if n is not None and not 1 <= n <= sizes[cut_dimension(sizes)]:
                raise core.error(f"run {name} sets length {n}; simd {name} "
                                 f"{list(sizes)} takes a length from 1 to "
                                 f"{sizes[cut_dimension(sizes)]}")
            return v, {a: f(env) for a, f in bases.items()}, n

        if not info.fabric and scalar_gen is None:
            def run(core: Core) -> None:
                core.charge(cost)
                v, b, n = prepare(core)
                core.simd(info, v, b, scalar(core) if scalar is not None else None, n)
            return Code(run, None)

        def run_gen(core: Core) -> Gen:
            sv = None
            if scalar_gen is not None:
                sv = yield from scalar_gen(core)
            core.charge(cost)
            v, b, n = prepare(core)
            if scalar is not None:
                sv = scalar(core)
            if info.fabric:
                yield from core.simd_fabric(info, v, b, sv, n)
            else:
                core.simd(info, v, b, sv, n)
        return Code(None, run_gen)

    # ---------------------------------------------------------------- expressions

    def address(self, ref: Load) -> tuple[Callable[[Core], Any], int]:
        """Index of an array element, bounds-checked; costs its index arithmetic and one
        multiply-add per extra dimension."""
        array = self.arrays[ref.array]
        fns = [compile_iexpr(e) for e in ref.index]
        cost = self.config.scalar_op * address_ops(ref)
        shape = array.shape
        name = array.name
        if len(fns) == 1:
            f0, n0 = fns[0], shape[0]

            def at1(core: Core) -> int:
                i = f0(core.env)
                if 0 <= i < n0:
                    return i
                raise core.out_of_bounds(name, (i,), shape)
            return at1, cost

        def at(core: Core) -> tuple[int, ...]:
            env = core.env
            idx = tuple(f(env) for f in fns)
            for i, n in zip(idx, shape, strict=True):
                if not 0 <= i < n:
                    raise core.out_of_bounds(name, idx, shape)
            return idx
        return at, cost

    def fexpr(self, e: FExpr, dtype: Any) -> tuple[ValueFn, int]:
        """A value computed in ``dtype``, rounded after every operation, and its cost."""
        op = self.config.scalar_op
        match e:
            case FConst(v):
                c = dtype(v)
                return (lambda core: c), 0
            case FValue():
                return (lambda core: dtype(core.value)), 0
            case Load():
                where, cost = self.address(e)
                name = e.array
                if NUMPY[self.arrays[name].dtype] is dtype:
                    return (lambda core: core.arrays[name][where(core)]), cost + op
                return (lambda core: dtype(core.arrays[name][where(core)])), cost + op
            case FNeg(operand):
                f, cost = self.fexpr(operand, dtype)
                return (lambda core: -f(core)), cost + op
            case FBin(kind, lhs, rhs):
                a, ca = self.fexpr(lhs, dtype)
                b, cb = self.fexpr(rhs, dtype)
                cost = ca + cb + op
                match kind:
                    case "+":
                        return (lambda core: a(core) + b(core)), cost
                    case "-":
                        return (lambda core: a(core) - b(core)), cost
                    case "*":
                        return (lambda core: a(core) * b(core)), cost
                return (lambda core: np.maximum(a(core), b(core))), cost
        raise TypeError(e)

    def fexpr_gen(self, e: FExpr, dtype: Any) -> GenFn:
        """Like :meth:`fexpr` for expressions that read the fabric with ``recv``."""
        op = self.config.scalar_op
        if not has_recv(e):
            f, cost = self.fexpr(e, dtype)

            def plain(core: Core) -> Gen:
                core.charge(cost)
                return f(core)
                yield  # pragma: no cover -- makes this a generator
            return plain
        match e:
            case Recv(color):
                def recv(core: Core) -> Gen:
                    v = yield from core.recv(color)
                    return dtype(v)
                return recv
            case FNeg(operand):
                g = self.fexpr_gen(operand, dtype)

                def neg(core: Core) -> Gen:
                    v = yield from g(core)
                    core.charge(op)
                    return -v
                return neg
            case FBin(kind, lhs, rhs):
                ga, gb = self.fexpr_gen(lhs, dtype), self.fexpr_gen(rhs, dtype)
                combine = elementwise({"+": "fadd", "-": "fsub", "*": "fmul",
                                       "max": "fmax"}[kind])

                def binary(core: Core) -> Gen:
                    a = yield from ga(core)
                    b = yield from gb(core)
                    core.charge(op)
                    return combine(None, a, b)
                return binary
        raise TypeError(e)



"""PE code lowered to instruction tables for the compiled engine.

The simpy engine runs a program's statements as Python closures and generators
(:mod:`pesim.code`); the compiled engine cannot, so each program is lowered once to
rows of integers that the kernel (:mod:`pesim.fast.kernel`) interprets with an explicit
program counter per PE. A statement that may wait for the fabric (``send``, ``recv``, a
SIMD instruction with fabric operands, a task's end) is one instruction that the kernel
can leave and re-enter; everything else runs without events, as in the simpy engine.

The lowering keeps the simpy engine's order of cost charges and side effects exactly:
a charge changes the core's clock, and the clock decides when the next fabric
interaction happens, which event is scheduled first, and so every figure. Each
``_stmt`` case below says which lines of :mod:`pesim.code` it mirrors.

Tables (all numpy ``int64`` unless said):

- ``code`` rows ``(op, a, b, c, d, e)``: instructions, every program's one after the
  other; a program's rows start with ``PROLOGUE`` and hold ``DISPATCH`` and every task.
- integer expressions in reverse Polish form, rows ``(op, arg)`` in ``ints``, expression
  ``k`` being ``ints[int_at[k, 0] : int_at[k, 0] + int_at[k, 1]]``; conditions too.
- value expressions likewise in ``floats``/``float_at``, constants in ``consts``
  (``float64``, each already rounded to the type it is computed in).
- ``addresses`` rows ``(array slot, rank, expression of each index ...)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dtg.pe.fabric import FabricConfig
from dtg.pe.ir import (
    Activate,
    BConst,
    BoolOp,
    Cmp,
    Cond,
    FBin,
    FConst,
    FExpr,
    FNeg,
    For,
    FValue,
    IBin,
    IConst,
    IExpr,
    If,
    INeg,
    ISel,
    IVar,
    Load,
    Not,
    PeModule,
    PeProgram,
    Recv,
    Run,
    Send,
    SendEnd,
    SetInt,
    SimdOperand,
    Stmt,
    Store,
    cut_dimension,
)
from dtg.pe.walk import cond_ops, iexpr_ops
from dtg.pesim.code import NUMPY, arithmetic, compute_dtype, has_recv
from dtg.pesim.simd_unit import FLOPS, MAX_SIMD_ELEMENTS

# ------------------------------------------------------------------------ opcodes

# instructions
CHARGE, FLOPS_ADD, SETI, FEVAL, STORE, FOR_BEGIN, FOR_STEP, FOR_NEXT, IFNOT, JUMP = range(10)
SEND, RECV, FNEG, FBIN, ACTIVATE, RUN, PROLOGUE, MAIN_END, SYNC_END, DISPATCH = range(10, 20)
TASK_END = 20
OPCODE_NAMES = ("CHARGE", "FLOPS_ADD", "SETI", "FEVAL", "STORE", "FOR_BEGIN", "FOR_STEP",
                "FOR_NEXT", "IFNOT", "JUMP", "SEND", "RECV", "FNEG", "FBIN", "ACTIVATE", "RUN",
                "PROLOGUE", "MAIN_END", "SYNC_END", "DISPATCH", "TASK_END")

# integer expressions and conditions (reverse Polish)
I_CONST, I_VAR, I_ADD, I_SUB, I_MUL, I_DIV, I_MOD, I_MIN, I_MAX, I_NEG, I_SEL = range(11)
C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE, C_AND, C_OR, C_NOT = range(11, 20)
_IBIN = {"+": I_ADD, "-": I_SUB, "*": I_MUL, "//": I_DIV, "%": I_MOD, "min": I_MIN,
         "max": I_MAX}
_CMP = {"==": C_EQ, "!=": C_NE, "<": C_LT, "<=": C_LE, ">": C_GT, ">=": C_GE}

# value expressions
F_CONST, F_VALUE, F_LOAD, F_NEG, F_ADD, F_SUB, F_MUL, F_MAX = range(8)
_FBIN = {"+": F_ADD, "-": F_SUB, "*": F_MUL, "max": F_MAX}

# types: how a value is rounded after every operation
F32, F16 = 0, 1
DTYPE_CODE = {"float32": F32, "float16": F16}

# store modes
SET, ADD, MAX = 0, 1, 2
_STORE = {"=": SET, "+=": ADD, "max=": MAX}

# task kinds
MAIN, DATA, CONTROL, LOCAL = range(4)
_KIND = {"main": MAIN, "data": DATA, "control": CONTROL, "local": LOCAL}

# SIMD operations and operand kinds
OP_FMAC, OP_FMUL, OP_FADD, OP_FSUB, OP_FMAX, OP_COPY, OP_FILL = range(7)
SIMD_OPS = {"fmac": OP_FMAC, "fmul": OP_FMUL, "fadd": OP_FADD, "fsub": OP_FSUB,
            "fmax": OP_FMAX, "copy": OP_COPY, "fill": OP_FILL}
K_ARRAY, K_SCALAR, K_IN, K_OUT, K_NONE = range(5)
_OPERAND = {"array": K_ARRAY, "scalar": K_SCALAR, "in": K_IN, "out": K_OUT}

# the fixed slots of every program's integer variables
SLOT_PE_X, SLOT_PE_Y, SLOT_INDEX, SLOT_COUNT, SLOT_SLOT = range(5)
FIXED_SLOTS = ("PE_X", "PE_Y", "index", "count", "slot")

MAX_RANK = 8  # of local arrays (addresses have this many index columns)
NO = -1


class Unsupported(Exception):
    """A module the compiled engine does not run (yet): the simpy engine runs it."""


@dataclass(frozen=True)
class ProgramInfo:
    """Where one program lives in the tables."""

    name: str
    prologue: int  # pc of its PROLOGUE
    dispatch: int  # pc of its DISPATCH
    slots: tuple[str, ...]  # its integer variables, by slot
    int_init: tuple[int, ...]  # initial values of its slots (PE_X, PE_Y set per PE)
    arrays: tuple[str, ...]  # its local arrays, by slot
    tasks: tuple[str, ...]  # its tasks by index (the program's order)
    stack: int  # the deepest its value stack gets
    colors: tuple[int, ...]  # colors that reach its core (queues), by queue slot
    sends: tuple[int, ...]  # colors it sends on from RAMP, by ramp slot


@dataclass(frozen=True)
class Tables:
    """Every program of a module, lowered (see the module docstring)."""

    code: np.ndarray
    ints: np.ndarray
    int_at: np.ndarray
    floats: np.ndarray
    float_at: np.ndarray
    consts: np.ndarray
    addresses: np.ndarray
    # per task (all programs): entry pc, kind, color, sparse, batch (0: none), landing
    # array slot, once, color's queue slot, cost of clearing a sparse batch's window,
    # groups per batch (0: a batch within a group), batches in the landing ring
    tasks: np.ndarray
    # per array (all programs): dtype code, size, rank, shape...
    arrays: np.ndarray
    # per program: first task row, number of tasks, first array row, number of arrays,
    # dispatch pc, main task row (-1), first queue color, number of queue colors
    programs: np.ndarray
    # per (program, color slot): color, data task row, control task row, batched (0/1)
    queues: np.ndarray
    # SIMD: per configuration (all programs): op, compute dtype, width, fabric, first
    # variant row, number of variants, operand kinds (3), operand arrays (3), operand
    # colors (3), out indexed, out ends, flops per element, operand queue or ramp slots (3)
    configs: np.ndarray
    # per variant: ops, innermost size, offsets start (3 operands), low (3), high (3),
    # the size of the dimension a length cuts (pe.ir.cut_dimension), the number of
    # dimensions from it on
    variants: np.ndarray
    offsets: np.ndarray  # element offsets of the variants' array operands
    # RUN bases: rows of (expression of the base of operand 0, 1, 2; of the length; the
    # array slot operand 0, 1, 2 is bound to in the run, or NO for the configuration's)
    bases: np.ndarray
    info: tuple[ProgramInfo, ...]


# -------------------------------------------------------------------------- lowering


class _Program:
    """Lowers one program's tasks into the shared tables of a :class:`_Module`."""

    def __init__(self, module: _Module, program: PeProgram, config: FabricConfig):
        self.m, self.p, self.config = module, program, config
        self.slots: dict[str, int] = {name: k for k, name in enumerate(FIXED_SLOTS)}
        for v in program.ints:
            self.slot(v.name)
        self.array_slot = {a.name: k for k, a in enumerate(program.arrays)}
        self.array_dtype = {a.name: a.dtype for a in program.arrays}
        self.task_index = {t.name: k for k, t in enumerate(program.tasks)}
        self.config_row = {c.name: module.config_base + k for k, c in enumerate(program.configs)}
        self.depth = 0  # the value stack's depth at this point of the code
        self.deepest = 0
        # colors that reach the core (a queue each) and colors it sends on (a RAMP buffer)
        into = {r.color for r in program.routes if "RAMP" in r.targets}
        into |= {t.color for t in program.tasks if t.color is not None}
        into |= {o.color for c in program.configs for o in (c.dst, *c.srcs)
                 if o.kind == "in" and o.color is not None}
        into |= set(_received(tuple(st for t in program.tasks for st in t.body)))
        self.colors = sorted(into)
        self.queue_slot = {c: k for k, c in enumerate(self.colors)}
        self.sends = sorted({r.color for r in program.routes if r.source == "RAMP"})
        self.ramp_slot = {c: k for k, c in enumerate(self.sends)}

    def slot(self, name: str) -> int:
        if name not in self.slots:
            self.slots[name] = len(self.slots)
        return self.slots[name]

    def hidden(self) -> int:
        """Two fresh slots (a loop's next value and its last)."""
        k = len(self.slots)
        self.slots[f" loop{k}"] = k
        self.slots[f" loop{k}+"] = k + 1
        return k

    def emit(self, op: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0, e: int = 0) -> int:
        self.m.code.append([op, a, b, c, d, e])
        return len(self.m.code) - 1

    def patch(self, pc: int, field: int, value: int) -> None:
        self.m.code[pc][field] = value

    def push(self, n: int = 1) -> None:
        self.depth += n
        self.deepest = max(self.deepest, self.depth)

    def charge(self, cost: int) -> None:
        if cost:
            self.emit(CHARGE, cost)

    # ------------------------------------------------------------------- blocks

    def block(self, body: tuple[Stmt, ...]) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: Stmt) -> None:
        op = self.config.scalar_op
        match s:
            case Store():
                self.store(s)
            case SetInt(name, mode, value):  # code.set_int
                self.charge(op * (1 + iexpr_ops(value)))
                self.emit(SETI, self.slot(name), self.m.iexpr(value, self), int(mode == "+="))
            case For(var, lo, hi, body):  # code.loop
                hid = self.hidden()
                setup = self.config.for_setup + op * (iexpr_ops(lo) + iexpr_ops(hi))
                begin = self.emit(FOR_BEGIN, hid, self.m.iexpr(lo, self), self.m.iexpr(hi, self),
                                  NO, setup)
                top = self.emit(FOR_STEP, self.slot(var), hid, self.config.for_iteration)
                self.block(body)
                self.emit(FOR_NEXT, hid, top)
                self.patch(begin, 4, len(self.m.code))
            case If(cond, then, orelse, static):  # code.branch
                if not static:
                    self.charge(self.config.if_branch + op * cond_ops(cond))
                test = self.emit(IFNOT, self.m.cond(cond, self), NO)
                self.block(then)
                if orelse:
                    skip = self.emit(JUMP, NO)
                    self.patch(test, 2, len(self.m.code))
                    self.block(orelse)
                    self.patch(skip, 1, len(self.m.code))
                else:
                    self.patch(test, 2, len(self.m.code))
            case Send():
                self.send(s)
            case SendEnd(color):  # core.send(color, END)
                self.emit(SEND, color, NO, 1, self.ramp_slot.get(color, NO))
            case Activate(task):  # charge, then a trigger at the core's clock
                self.charge(op)
                self.emit(ACTIVATE, self.task_index[task])
            case Run():
                self.run(s)
            case _:
                raise Unsupported(f"statement {type(s).__name__}")

    def store(self, s: Store) -> None:
        """code.store: the value (a generator's charges first when it receives), then the
        store's own cost, the flops, the write."""
        dtype = self.array_dtype[s.target.array]
        op = self.config.scalar_op
        address, address_cost = self.m.address(s.target, self)
        cost = address_cost + op * (1 if s.op == "=" else 3)
        flops = arithmetic(s.value) + (0 if s.op == "=" else 1)
        if has_recv(s.value):
            self.value_gen(s.value, dtype)
            self.charge(cost)
        else:
            expr, value_cost = self.m.fexpr(s.value, dtype, self)
            self.charge(cost + value_cost)
            self.emit(FEVAL, expr, DTYPE_CODE[dtype])
            self.push()
        if flops:
            self.emit(FLOPS_ADD, flops)
        self.emit(STORE, address, _STORE[s.op])
        self.depth -= 1

    def send(self, s: Send) -> None:
        """code.send: value, index cost, flops, then core.send (sync, push, one op)."""
        op = self.config.scalar_op
        index_cost = op * (iexpr_ops(s.index) if s.index is not None else 0)
        index = self.m.iexpr(s.index, self) if s.index is not None else NO
        flops = arithmetic(s.value)
        if has_recv(s.value):
            self.value_gen(s.value, "float32")
            self.charge(index_cost)
        else:
            expr, value_cost = self.m.fexpr(s.value, "float32", self)
            self.charge(value_cost + index_cost)
            self.emit(FEVAL, expr, F32)
            self.push()
        if flops:
            self.emit(FLOPS_ADD, flops)
        self.emit(SEND, s.color, index, 0, self.ramp_slot.get(s.color, NO))
        self.depth -= 1

    def value_gen(self, e: FExpr, dtype: str) -> None:
        """code.fexpr_gen: a value that receives; leaves it on the value stack."""
        op = self.config.scalar_op
        code = DTYPE_CODE[dtype]
        if not has_recv(e):
            expr, cost = self.m.fexpr(e, dtype, self)
            self.charge(cost)
            self.emit(FEVAL, expr, code)
            self.push()
            return
        match e:
            case Recv(color):
                self.emit(RECV, color, code, self.queue_slot[color])
                self.push()
            case FNeg(operand):
                self.value_gen(operand, dtype)
                self.charge(op)
                self.emit(FNEG, code)
            case FBin(kind, lhs, rhs):
                self.value_gen(lhs, dtype)
                self.value_gen(rhs, dtype)
                self.charge(op)
                self.emit(FBIN, _FBIN[kind], code)
                self.depth -= 1
            case _:
                raise Unsupported(f"value {type(e).__name__}")

    def run(self, s: Run) -> None:
        """code.run: a receiving scalar first, then the cost (bases, variant, a plain
        scalar), then the instruction (which evaluates a plain scalar after checking the
        variant, as ``prepare`` comes first there)."""
        config = next(c for c in self.p.configs if c.name == s.config)
        op = self.config.scalar_op
        cost = op * (sum(iexpr_ops(e) for _, e in s.bases) + len(s.arrays))
        for chosen in (s.variant, s.length):
            if chosen is not None:
                cost += op * iexpr_ops(chosen) + self.config.simd_variant_select
        dtype = compute_dtype(config, {a.name: a for a in self.p.arrays})
        scalar = NO  # no scalar
        if s.scalar is not None:
            if has_recv(s.scalar):
                self.value_gen(s.scalar, dtype)
                scalar = -2  # on the value stack
            else:
                expr, scalar_cost = self.m.fexpr(s.scalar, dtype, self)
                cost += scalar_cost
                scalar = expr
        self.charge(cost)
        bases = dict(s.bases)
        row, bound = [], []
        slot = {a.name: k for k, a in enumerate(self.p.arrays)}
        for o in (config.dst, *config.srcs, None, None)[:3]:
            array = o.array if o is not None and o.kind == "array" else None
            row.append(self.m.iexpr(bases[array], self) if array is not None else NO)
            bound.append(slot[s.array(array)] if array is not None and s.array(array) != array
                         else NO)
        row.append(self.m.iexpr(s.length, self) if s.length is not None else NO)
        self.m.bases.append([*row, *bound])
        variant = self.m.iexpr(s.variant, self) if s.variant is not None else NO
        self.emit(RUN, self.config_row[s.config], variant, len(self.m.bases) - 1, scalar)
        if scalar == -2:
            self.depth -= 1

    # ----------------------------------------------------------------- the process

    def lower(self) -> ProgramInfo:
        """PROLOGUE, main, DISPATCH and the tasks (``core.process``)."""
        p = self.p
        prologue = self.emit(PROLOGUE, NO, NO)
        main = next((t for t in p.tasks if t.kind == "main"), None)
        if main is not None:
            self.block(main.body)
            self.emit(MAIN_END)
        sync_end = self.emit(SYNC_END)
        dispatch = self.emit(DISPATCH)
        self.patch(prologue, 1, sync_end)
        self.patch(prologue, 2, dispatch)
        entries = {}
        for t in p.tasks:
            if t.kind == "main":
                continue
            entries[t.name] = len(self.m.code)
            self.block(t.body)
            self.emit(TASK_END)
        colors, queue_slot = self.colors, self.queue_slot
        task_base = len(self.m.tasks)
        for t in p.tasks:
            clear = 0  # a sparse batch's core clears the landing array for the next window
            if t.batch is not None and t.sparse and not t.once and t.land is not None:
                width = self.config.simd_width(self.array_dtype[t.land], "fill")
                clear = self.config.simd_startup + -(-(t.batch * (t.groups or 1)) // width)
            self.m.tasks.append([
                entries.get(t.name, NO), _KIND[t.kind], t.color if t.color is not None else NO,
                int(t.sparse), t.batch or 0,
                self.array_slot[t.land] if t.land is not None else NO, int(t.once),
                queue_slot[t.color] if t.color is not None else NO, clear, t.groups or 0,
                t.ring])
        array_base = len(self.m.arrays)
        for a in p.arrays:
            if len(a.shape) > MAX_RANK:
                raise Unsupported(f"array {a.name} of rank {len(a.shape)}")
            self.m.arrays.append([DTYPE_CODE[a.dtype], math.prod(a.shape), len(a.shape),
                                  *a.shape, *[0] * (MAX_RANK - len(a.shape))])
        queue_base = len(self.m.queues)
        data = {t.color: task_base + k for k, t in enumerate(p.tasks) if t.kind == "data"}
        control = {t.color: task_base + k for k, t in enumerate(p.tasks)
                   if t.kind == "control"}
        for c in colors:
            batched = c in data and p.tasks[data[c] - task_base].batch is not None
            self.m.queues.append([c, data.get(c, NO), control.get(c, NO), int(batched)])
        self.m.programs.append([task_base, len(p.tasks), array_base, len(p.arrays), dispatch,
                                task_base + p.tasks.index(main) if main is not None else NO,
                                queue_base, len(colors)])
        init = [0] * len(self.slots)
        for v in p.ints:
            init[self.slots[v.name]] = v.init
        return ProgramInfo(p.name, prologue, dispatch, tuple(self.slots), tuple(init),
                           tuple(a.name for a in p.arrays), tuple(t.name for t in p.tasks),
                           self.deepest, tuple(colors), tuple(self.sends))


def _received(body: tuple[Stmt, ...]) -> list[int]:
    """Colors that ``recv`` reads in ``body``."""
    found: list[int] = []

    def value(e: FExpr | None) -> None:
        match e:
            case Recv(color):
                found.append(color)
            case FBin(_, lhs, rhs):
                value(lhs)
                value(rhs)
            case FNeg(operand):
                value(operand)

    for st in body:
        match st:
            case Store(_, _, v) | Send(_, v, _):
                value(v)
            case Run(_, _, scalar, _):
                value(scalar)
            case For(_, _, _, inner):
                found += _received(inner)
            case If(_, then, orelse):
                found += _received(then) + _received(orelse)
    return found


class _Module:
    """The tables being built."""

    def __init__(self) -> None:
        self.code: list[list[int]] = []
        self.ints: list[tuple[int, int]] = []
        self.int_at: list[tuple[int, int]] = []
        self.floats: list[tuple[int, int]] = []
        self.float_at: list[tuple[int, int]] = []
        self.consts: list[float] = []
        self.addresses: list[list[int]] = []
        self.tasks: list[list[int]] = []
        self.arrays: list[list[int]] = []
        self.programs: list[list[int]] = []
        self.queues: list[list[int]] = []
        self.configs: list[list[int]] = []
        self.variants: list[list[int]] = []
        self.offsets: list[np.ndarray] = []
        self.offset_count = 0
        self.bases: list[list[int]] = []
        self.config_base = 0

    # --------------------------------------------------------- integer expressions

    def iexpr(self, e: IExpr, program: _Program) -> int:
        start = len(self.ints)
        self._int(e, program)
        self.int_at.append((start, len(self.ints) - start))
        return len(self.int_at) - 1

    def cond(self, c: Cond, program: _Program) -> int:
        start = len(self.ints)
        self._cond(c, program)
        self.int_at.append((start, len(self.ints) - start))
        return len(self.int_at) - 1

    def _int(self, e: IExpr, program: _Program) -> None:
        match e:
            case IConst(value):
                self.ints.append((I_CONST, value))
            case IVar(name):
                self.ints.append((I_VAR, program.slot(name)))
            case IBin(op, lhs, rhs):
                self._int(lhs, program)
                self._int(rhs, program)
                self.ints.append((_IBIN[op], 0))
            case INeg(operand):
                self._int(operand, program)
                self.ints.append((I_NEG, 0))
            case ISel(test, then, orelse):
                self._int(then, program)
                self._int(orelse, program)
                self._cond(test, program)
                self.ints.append((I_SEL, 0))
            case _:
                raise Unsupported(f"integer expression {type(e).__name__}")

    def _cond(self, c: Cond, program: _Program) -> None:
        match c:
            case BConst(value):
                self.ints.append((I_CONST, int(value)))
            case Cmp(op, lhs, rhs):
                self._int(lhs, program)
                self._int(rhs, program)
                self.ints.append((_CMP[op], 0))
            case BoolOp(op, lhs, rhs):
                self._cond(lhs, program)
                self._cond(rhs, program)
                self.ints.append((C_AND if op == "&&" else C_OR, 0))
            case Not(operand):
                self._cond(operand, program)
                self.ints.append((C_NOT, 0))
            case _:
                raise Unsupported(f"condition {type(c).__name__}")

    # ----------------------------------------------------------- value expressions

    def address(self, ref: Load, program: _Program) -> tuple[int, int]:
        """An address row and its cost (code.address)."""
        op = program.config.scalar_op
        row = [program.array_slot[ref.array], len(ref.index)]
        row += [self.iexpr(e, program) for e in ref.index]
        row += [NO] * (MAX_RANK - len(ref.index))
        self.addresses.append(row)
        cost = op * (sum(iexpr_ops(e) for e in ref.index) + len(ref.index) - 1)
        return len(self.addresses) - 1, cost

    def fexpr(self, e: FExpr, dtype: str, program: _Program) -> tuple[int, int]:
        """A value expression computed in ``dtype`` and its cost (code.fexpr)."""
        start = len(self.floats)
        cost = self._float(e, dtype, program)
        self.float_at.append((start, len(self.floats) - start))
        return len(self.float_at) - 1, cost

    def _float(self, e: FExpr, dtype: str, program: _Program) -> int:
        op = program.config.scalar_op
        match e:
            case FConst(v):
                self.consts.append(float(NUMPY[dtype](v)))  # type: ignore[arg-type]
                self.floats.append((F_CONST, len(self.consts) - 1))
                return 0
            case FValue():
                self.floats.append((F_VALUE, 0))
                return 0
            case Load():
                address, cost = self.address(e, program)
                self.floats.append((F_LOAD, address))
                return cost + op
            case FNeg(operand):
                cost = self._float(operand, dtype, program)
                self.floats.append((F_NEG, 0))
                return cost + op
            case FBin(kind, lhs, rhs):
                cost = self._float(lhs, dtype, program) + self._float(rhs, dtype, program)
                self.floats.append((_FBIN[kind], 0))
                return cost + op
        raise Unsupported(f"value {type(e).__name__}")

    # ------------------------------------------------------------------------ SIMD

    def simd_configs(self, program: PeProgram, config: FabricConfig,
                     lowering: _Program) -> None:
        arrays = {a.name: a for a in program.arrays}
        slot = {a.name: k for k, a in enumerate(program.arrays)}
        for c in program.configs:
            dtype = compute_dtype(c, arrays)
            operands = (c.dst, *c.srcs)
            kinds, names, colors, slots = [], [], [], []
            for k in range(3):
                o = operands[k] if k < len(operands) else None
                kinds.append(_OPERAND[o.kind] if o is not None else K_NONE)
                names.append(slot[o.array] if o is not None and o.array is not None else NO)
                colors.append(o.color if o is not None and o.color is not None else NO)
                slot_of = NO
                if o is not None and o.color is not None:
                    slot_of = (lowering.queue_slot[o.color] if o.kind == "in"
                               else lowering.ramp_slot.get(o.color, NO))
                slots.append(slot_of)
            fabric = any(o.kind in ("in", "out") for o in operands)
            self.configs.append([SIMD_OPS[c.op], DTYPE_CODE[dtype],
                                 config.simd_width(dtype, c.op), int(fabric),
                                 len(self.variants), len(c.variants), *kinds, *names, *colors,
                                 int(c.dst.indexed), int(c.dst.ends), FLOPS[c.op], *slots])
            for sizes in c.variants:
                self.variant(sizes, operands)

    def variant(self, sizes: tuple[int, ...], operands: tuple[SimdOperand, ...]) -> None:
        """code.SimdInfo.variant: every array operand's element offsets in domain order."""
        ops = math.prod(sizes)
        if ops > MAX_SIMD_ELEMENTS:  # (the simpy engine reports it when it runs)
            raise Unsupported(f"a SIMD variant of {ops} elements")
        row = [ops, sizes[-1] if sizes else 1]
        cut = cut_dimension(sizes)  # (the dimension a length cuts, and those from it on)
        outer = [sizes[cut] if sizes else 1, len(sizes) - cut]
        starts, lows, highs = [], [], []
        for k in range(3):
            o = operands[k] if k < len(operands) else None
            if o is None or o.kind != "array":
                starts.append(NO)
                lows.append(0)
                highs.append(0)
                continue
            offs = np.zeros(1, dtype=np.int64)
            for n, stride in zip(sizes, o.strides, strict=True):
                offs = (offs[:, None] + stride * np.arange(n, dtype=np.int64)[None, :]).ravel()
            starts.append(self.offset_count)
            self.offsets.append(offs)
            self.offset_count += offs.size
            lows.append(int(offs.min()))
            highs.append(int(offs.max()))
        self.variants.append(row + starts + lows + highs + outer)


def lower_module(module: PeModule, config: FabricConfig) -> Tables:
    """Every program of ``module`` as tables; :class:`Unsupported` for what the compiled
    engine does not run."""
    m = _Module()
    info = []
    for program in module.programs:
        m.config_base = len(m.configs)
        lowering = _Program(m, program, config)
        m.simd_configs(program, config, lowering)
        info.append(lowering.lower())

    def table(rows: list[Any], width: int, dtype: type = np.int64) -> np.ndarray:
        return np.array(rows, dtype=dtype).reshape(len(rows), width)

    offsets = (np.concatenate(m.offsets) if m.offsets else np.zeros(0, dtype=np.int64))
    return Tables(
        code=table(m.code, 6), ints=table(m.ints, 2), int_at=table(m.int_at, 2),
        floats=table(m.floats, 2), float_at=table(m.float_at, 2),
        consts=np.array(m.consts, dtype=np.float64), addresses=table(m.addresses, 2 + MAX_RANK),
        tasks=table(m.tasks, 11), arrays=table(m.arrays, 3 + MAX_RANK),
        programs=table(m.programs, 8), queues=table(m.queues, 4), configs=table(m.configs, 21),
        variants=table(m.variants, 13), offsets=offsets.astype(np.int64),
        bases=table(m.bases, 7), info=tuple(info))


def listing(tables: Tables) -> str:
    """The instruction table as text (for tests and debugging)."""
    lines = []
    for pc, row in enumerate(tables.code):
        args = " ".join(str(int(x)) for x in row[1:])
        lines.append(f"{pc:5d} {OPCODE_NAMES[row[0]]:<10} {args}")
    return "\n".join(lines)

"""Per-group invariants out of data tasks: computed once per group, not per wavelet.

A data task's base offsets and guards are quasi-affine in the PE coordinates, the
group counter of its stream and the arriving index. The parts that do not depend on
the arrival (``32 * (g_x // 8) + 3 * (g_x % 8) + 2 * PE_X + ...``) are the same for
every wavelet of a group; isl prints them whole, and a wavelet of the degenerate 2-D
convolution paid 25 cycles of such arithmetic for 2 multiply-adds. This pass gives each
such part (two operations or more) an ``int``, assigned at the end of ``main`` and of
the control task that advances the group, and reads the ``int`` in the data task.

A part is invariant when it reads only ``PE_X``, ``PE_Y`` and ``int``s that nothing
but ``main`` and the color's control task assigns (a part that reads no group counter
is computed in ``main`` only); sums are split into the invariant terms and the others
(``4 * index + h0_1``). The per-group assignments are split again: their terms that
depend on the PE only are computed once in ``main`` (``p0_0``), and what several of them
compute alike (``g_x % 8``) once per group (``s0_0``): the degenerate convolution's
control task went from 50 to 30 cycles per group. Of batched tasks, those of sparse
streams with several windows per PE are rewritten (the 2-D convolution's rows: 954 ->
925 cycles). Dense batches of a stream with several groups (the task reads the group
counter) get only their parts that depend on the PE alone computed in ``main`` (a
streamed 12 x 12 image, a batch per row: 596 -> 554 cycles); per group, the control
task would pay as much as the batches save (an MLP: 448 -> 508), and a single window
or a stream of one group runs too few batches to pay for ``main``'s extra work. Batches
of whole groups count their groups in their own task: alike, where it reads the count.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from dtg.codegen.cleanup import assigned, reads
from dtg.codegen.islast import linear_sum, linear_terms, normalize
from dtg.pe.ir import (
    BoolOp,
    Cmp,
    Cond,
    FBin,
    FExpr,
    FNeg,
    For,
    IBin,
    IConst,
    IExpr,
    If,
    INeg,
    IntVar,
    ISel,
    IVar,
    Load,
    Not,
    PeProgram,
    Run,
    Send,
    SetInt,
    Stmt,
    Store,
    Task,
)
from dtg.pe.walk import cond_names, cond_ops, iexpr_names, iexpr_ops

MIN_OPS = 2  # cheaper parts are left in place: an int read costs nothing, its update 1


def hoist_invariants(program: PeProgram) -> PeProgram:
    """The program with the group-invariant parts of its data tasks precomputed."""
    assigned_in: dict[str, set[str]] = {}
    for task in program.tasks:
        for name in assigned(task.body):
            assigned_in.setdefault(name, set()).add(task.name)
    ints = {v.name for v in program.ints}
    main = next((t for t in program.tasks if t.kind == "main"), None)
    tasks = list(program.tasks)
    new_ints: list[IntVar] = []
    at_main: list[Stmt] = []
    for k, task in enumerate(tasks):
        if task.kind != "data" or (task.batch is not None and task.once and task.ring == 1):
            continue  # (a single window runs once: main would pay more)
        control = next((t for t in tasks if t.kind == "control" and t.color == task.color),
                       None)
        # (what only main assigns, or nothing, needs computing once)
        constant = {"PE_X", "PE_Y"} | {v for v in ints if assigned_in.get(v, set()) <= {
            main.name if main else ""}}
        if task.batch is not None and not task.sparse:
            # Dense batches run once per group or a few times: only what depends on the
            # PE alone moves, to main (per group, the control task would pay as much),
            # and only where the stream has several groups (the task reads the group
            # counter its control task advances): a batch or two would not pay for
            # main's extra work.
            # (batches of whole groups count their groups themselves)
            counters = assigned(control.body) if control is not None else {
                n for n in assigned(task.body) if n.startswith("g_")} if task.groups \
                else set()
            if not counters & {n for st in task.body for n in reads(st)}:
                continue
            owners = {main.name if main else ""}
        else:
            owners = {main.name if main else "", control.name if control else ""}
        fixed = {"PE_X", "PE_Y"} | {v for v in ints if assigned_in.get(v, set()) <= owners}
        hoister = Hoister(f"h{task.color}_", fixed)
        body = hoister.block(task.body)
        if not hoister.found:
            continue
        tasks[k] = replace(task, body=body)
        sets = [SetInt(name, "=", e) for e, name in hoister.found.items()]
        new_ints.extend(IntVar(name) for name in hoister.found.values())
        per_group = [s for s in sets if not set(iexpr_names(s.value)) <= constant]
        if per_group:  # their parts that depend on the PE only: once, in main
            inner = Hoister(f"p{task.color}_", constant)
            sets = [replace(s, value=inner.iexpr(s.value)) if s in per_group else s
                    for s in sets]
            per_group = [s for s in sets if not set(iexpr_names(s.value)) <= constant]
            at_main.extend(SetInt(name, "=", e) for e, name in inner.found.items())
            new_ints.extend(IntVar(name) for name in inner.found.values())
            # what several of them compute alike (``g_x % 8``): once per group
            temps, sets = shared_parts(sets, f"s{task.color}_")
            new_ints.extend(IntVar(t.name) for t in temps)
            sets = [*temps, *sets]
            per_group = [s for s in sets if not set(iexpr_names(s.value)) <= constant]
        at_main.extend(sets)
        if control is not None and per_group:
            c = tasks.index(control)
            tasks[c] = replace(control, body=(*control.body, *per_group))
    if not new_ints:
        return program
    if main is None:
        tasks.insert(0, Task("main", "main", tuple(at_main)))
    else:
        m = next(i for i, t in enumerate(tasks) if t.kind == "main")
        tasks[m] = replace(tasks[m], body=(*tasks[m].body, *at_main))
    return replace(program, ints=(*program.ints, *new_ints), tasks=tuple(tasks))


def per_arrival_ops(e: IExpr, varying: frozenset[str]) -> int:
    """The operations of ``e`` left in a data task after this pass, when only the names
    in ``varying`` change from one wavelet to the next (for predicting cycles)."""
    return iexpr_ops(Hoister("t", set(iexpr_names(e)) - varying).iexpr(e))


def per_arrival_cond_ops(c: Cond, varying: frozenset[str]) -> int:
    """:func:`per_arrival_ops` for a condition."""
    return cond_ops(Hoister("t", set(cond_names(c)) - varying).cond(c))


class Hoister:
    """Rewrites statements so that their compound parts which read only invariant names
    are read from ``int``s (``found``: each part and its name, ``prefix`` + number)."""

    def __init__(self, prefix: str, fixed: set[str]):
        self.prefix, self.fixed = prefix, fixed
        self.found: dict[IExpr, str] = {}

    def invariant_names(self, names: set[str]) -> bool:
        return names <= self.fixed

    def name(self, e: IExpr) -> IExpr:
        if e not in self.found:
            self.found[e] = f"{self.prefix}{len(self.found)}"
        return IVar(self.found[e])

    def invariant(self, e: IExpr) -> bool:
        return self.invariant_names(set(iexpr_names(e)))

    def iexpr(self, e: IExpr) -> IExpr:
        if isinstance(e, IConst | IVar):
            return e
        if self.invariant(e):
            return self.name(normalize(e)) if iexpr_ops(e) >= MIN_OPS else e
        coeffs, constant = linear_terms(e)
        fixed = {a: c for a, c in coeffs.items() if self.invariant(a)}
        if len(coeffs) > 1 and fixed and iexpr_ops(linear_sum(fixed, constant)) >= MIN_OPS:
            rest = {a: c for a, c in coeffs.items() if a not in fixed}
            rest[self.name(linear_sum(fixed, constant))] = 1
            return linear_sum({self.iexpr(a): c for a, c in rest.items()}, 0)
        match e:
            case IBin(op, lhs, rhs):
                return IBin(op, self.iexpr(lhs), self.iexpr(rhs))
            case INeg(operand):
                return INeg(self.iexpr(operand))
            case ISel(test, then, orelse):
                return ISel(self.cond(test), self.iexpr(then), self.iexpr(orelse))
        return e

    def cond(self, c: Cond) -> Cond:
        if self.invariant_names(set(cond_names(c))) and cond_ops(c) >= MIN_OPS:
            flag = self.name(ISel(c, IConst(1), IConst(0)))
            return Cmp("!=", flag, IConst(0))
        match c:
            case Cmp(op, lhs, rhs):
                return Cmp(op, self.iexpr(lhs), self.iexpr(rhs))
            case BoolOp(op, lhs, rhs):
                return BoolOp(op, self.cond(lhs), self.cond(rhs))
            case Not(operand):
                return Not(self.cond(operand))
        return c

    def fexpr(self, e: FExpr) -> FExpr:
        match e:
            case Load(array, index):
                return Load(array, tuple(self.iexpr(i) for i in index))
            case FBin(op, lhs, rhs):
                return FBin(op, self.fexpr(lhs), self.fexpr(rhs))
            case FNeg(operand):
                return FNeg(self.fexpr(operand))
        return e

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        return tuple(self.stmt(s) for s in body)

    def stmt(self, s: Stmt) -> Stmt:
        match s:
            case Run(_, bases, scalar, variant, length):
                return replace(s, bases=tuple((a, self.iexpr(b)) for a, b in bases),
                               scalar=None if scalar is None else self.fexpr(scalar),
                               variant=None if variant is None else self.iexpr(variant),
                               length=None if length is None else self.iexpr(length))
            case If(cond, then, orelse, static):  # (a static test costs nothing: kept)
                return If(cond if static else self.cond(cond), self.block(then),
                          self.block(orelse), static)
            case For(var, lo, hi, body):
                return For(var, self.iexpr(lo), self.iexpr(hi), self.block(body))
            case Store(target, op, value):
                target_ = self.fexpr(target)
                assert isinstance(target_, Load)
                return Store(target_, op, self.fexpr(value))
            case SetInt(name, op, value):
                return SetInt(name, op, self.iexpr(value))
            case Send(color, value, index):
                return Send(color, self.fexpr(value), None if index is None else self.iexpr(
                    index))
        return s


def shared_parts(sets: list[SetInt], prefix: str) -> tuple[list[SetInt], list[SetInt]]:
    """Subexpressions computed more than once by ``sets``, each assigned to an ``int``
    (``prefix`` + number) first, in an order where each reads only earlier ones; and
    ``sets`` reading them."""
    temps: list[SetInt] = []
    while True:
        counts: Counter[IExpr] = Counter()
        for s in (*temps, *sets):
            counts.update(_parts(s.value))
        shared = [e for e, n in counts.items() if n > 1 and iexpr_ops(e) >= 1]
        if not shared:
            break
        best = max(shared, key=lambda e: (iexpr_ops(e) * (counts[e] - 1), str(e)))
        name = IVar(f"{prefix}{len(temps)}")
        temps = [replace(t, value=_swap(t.value, best, name)) for t in temps]
        sets = [replace(s, value=_swap(s.value, best, name)) for s in sets]
        temps.append(SetInt(name.name, "=", best))
    ordered: list[SetInt] = []
    pending = list(temps)
    while pending:  # each after the temporaries it reads
        ready = next(t for t in pending if not set(iexpr_names(t.value)) & {
            p.name for p in pending if p is not t})
        ordered.append(ready)
        pending.remove(ready)
    return ordered, sets


def _parts(e: IExpr) -> list[IExpr]:
    """Every compound subexpression of ``e`` (conditions of selects included)."""
    match e:
        case IBin(_, lhs, rhs):
            return [e, *_parts(lhs), *_parts(rhs)]
        case INeg(operand):
            return [e, *_parts(operand)]
        case ISel(test, then, orelse):
            return [e, *_cond_parts(test), *_parts(then), *_parts(orelse)]
    return []


def _cond_parts(c: Cond) -> list[IExpr]:
    match c:
        case Cmp(_, lhs, rhs):
            return [*_parts(lhs), *_parts(rhs)]
        case BoolOp(_, lhs, rhs):
            return [*_cond_parts(lhs), *_cond_parts(rhs)]
        case Not(operand):
            return _cond_parts(operand)
    return []


def _swap(e: IExpr, old: IExpr, new: IExpr) -> IExpr:
    if e == old:
        return new
    match e:
        case IBin(op, lhs, rhs):
            return IBin(op, _swap(lhs, old, new), _swap(rhs, old, new))
        case INeg(operand):
            return INeg(_swap(operand, old, new))
        case ISel(test, then, orelse):
            return ISel(_swap_cond(test, old, new), _swap(then, old, new),
                        _swap(orelse, old, new))
    return e


def _swap_cond(c: Cond, old: IExpr, new: IExpr) -> Cond:
    match c:
        case Cmp(op, lhs, rhs):
            return Cmp(op, _swap(lhs, old, new), _swap(rhs, old, new))
        case BoolOp(op, lhs, rhs):
            return BoolOp(op, _swap_cond(lhs, old, new), _swap_cond(rhs, old, new))
        case Not(operand):
            return Not(_swap_cond(operand, old, new))
    return c

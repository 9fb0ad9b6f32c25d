"""SIMD detection (paper §5): can the work of one task be one rectangular SIMD instruction?

The four conditions of §5: (1) the statement is a single operation with SIMD support,
(2) its instance set is a dense box of fixed size, (3) of dimension greater than zero
(and at most four), (4) every access is linear in the box coordinates. Variable
compression is applied first, indiscriminately, as the paper does (§5.2); the box comes
from the exact per-dimension minima and maxima (§5.1). When a condition fails the task
gets scalar loops and the decision records why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from itertools import permutations
from math import gcd, prod
from typing import Literal

import islpy as isl

from dtg.codegen.islast import normalize, pw_aff_expr
from dtg.codegen.scanorder import scan_keeps_conflicts
from dtg.errors import CodegenError
from dtg.lair.graph import Binary, Const, Read, Stmt, Unary, Value
from dtg.lair.lower import PolyStatement
from dtg.mapping import poly
from dtg.mapping.lifting import MAX_LIFTS, lift_blocks
from dtg.mapping.memory import LocalTensor, Memory
from dtg.pe.ir import (
    MAX_SIMD_CONFIGS,
    MAX_SIMD_DIMS,
    MAX_SIMD_SIZE,
    Cmp,
    IBin,
    IConst,
    IExpr,
    ISel,
)
from dtg.pe.walk import iexpr_ops

Case = Literal["base", "compressed", "box_hull", "enumerated"]
MAX_BASE_PIECES = 12
DECISION_EFFORT = 2_000_000  # isl operations per SIMD decision (about 2 s)
OPS = {"fmac", "fmul", "fadd", "fsub", "fmax", "copy", "fill"}
# A temporary: an operand standing for a scratch array the size of the instruction's box
# (row-major), where a value must be computed before it is accumulated (op_steps); the
# emitter gives each task its own array.
TEMP = "%temp"
# The largest temporary a decision takes (a sixth of a PE's memory in float32): a larger
# box takes outer loops instead, a row of it at a time.
MAX_TEMP_ELEMENTS = 2048
_TEMPORARIES: ContextVar[bool] = ContextVar("temporaries", default=True)


def temporaries_enabled() -> bool:
    return _TEMPORARIES.get()


@contextmanager
def without_temporaries() -> Iterator[None]:
    """Decisions made inside use no temporary (where theirs would not fit the PE)."""
    token = _TEMPORARIES.set(False)
    try:
        yield
    finally:
        _TEMPORARIES.reset(token)


@dataclass(frozen=True)
class Operand:
    """A SIMD operand: a local array with strides and a base offset, or the scalar."""

    kind: Literal["array", "scalar"]
    tensor: str | None = None
    array: str | None = None
    strides: tuple[int, ...] = ()
    base: IExpr | None = None
    base_isl: isl.PwAff | None = None


@dataclass(frozen=True)
class OpShape:
    """The statement as one SIMD operation: ``dst op= srcs``; ``scalar`` feeds 'scalar'."""

    op: str
    dst: str
    srcs: tuple[str | None, ...]  # tensor names; None stands for the scalar operand
    scalar: Value | None


@dataclass(frozen=True)
class Extension:
    """A local array grown so extra instances write outside the proper elements (§5.3)."""

    tensor: str
    size: tuple[int, ...]
    shift: tuple[int, ...]  # new local index = old local index - shift


@dataclass(frozen=True)
class SimdDecision:
    used: bool
    reason: str
    case: Case | None = None
    op: str | None = None
    compression: isl.Map | None = None
    compressed: isl.Set | None = None
    sizes: tuple[int, ...] | None = None
    offset: isl.MultiPwAff | isl.MultiAff | None = None
    extra_instances: isl.Set | None = None
    size_ids: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] | None = None
    dst: Operand | None = None
    srcs: tuple[Operand, ...] = ()
    scalar: Value | None = None
    variants: tuple[tuple[int, ...], ...] = ()
    variant: IExpr | None = None
    outer: isl.Set | None = None  # values of the outer loop variables o0, o1, ...
    outer_names: tuple[str, ...] = ()
    extensions: tuple[Extension, ...] = ()
    # Further operations over the same domain (a statement split into operations).
    more: tuple[tuple[str, Operand, tuple[Operand, ...], Value | None], ...] = ()
    # predicted cycles per PE of the ways considered (codegen.cost), e.g. simd, scalar
    predicted: tuple[tuple[str, int], ...] = ()
    # Enumerated sizes that differ in one dimension only, every dimension before it of
    # size 1 (pe.ir.cut_dimension): that dimension's extent, for one configuration of the
    # largest size cut to it at run time (``run ... length(e)``) where the variants do
    # not fit the PE (``by_length``).
    length: IExpr | None = None
    by_length: bool = False
    length_isl: isl.PwAff | None = None  # the same extent as a function of the parameters
    # Where the sizes differ in one dimension with larger ones before it: the same
    # instructions with that dimension scanned outermost (codegen.scanorder), whose
    # variants can be cut by a length, for when the budget binds.
    permuted: SimdDecision | None = None

    @property
    def configs(self) -> int:
        """SIMD configurations this decision needs."""
        return len(self.variants) * (1 + len(self.more)) if self.used else 0

    @property
    def cuttable(self) -> bool:
        """Whether :meth:`cut_to_length` would serve the variants by one configuration."""
        return self.used and not self.by_length and (
            self.length is not None or self.permuted is not None)

    def cut_to_length(self) -> SimdDecision:
        """One configuration of the largest size, the dimension its sizes differ in cut at
        run time (where the variants do not fit the PE)."""
        if self.length is None and self.permuted is not None:
            # (the same instructions in another order: the same predictions)
            return replace(self.permuted, predicted=self.predicted).cut_to_length()
        assert self.length is not None
        largest = max(self.variants, key=prod)
        return replace(self, variants=(largest,), variant=None, size_ids=None, by_length=True,
                       reason=self.reason.replace(
                           "one SIMD configuration per size, selected per invocation",
                           "one SIMD configuration of the largest size, its outermost "
                           "dimension cut to each invocation's extent"))

    def report(self) -> dict[str, object]:
        return {
            "used": self.used,
            "reason": self.reason,
            "case": self.case,
            "op": self.op,
            "compression": None if self.compression is None else str(self.compression),
            "sizes": None if self.sizes is None else list(self.sizes),
            "offset": None if self.offset is None else str(self.offset),
            "extra_instances": None if self.extra_instances is None else str(
                self.extra_instances),
            "size_ids": None if self.size_ids is None else [
                {"id": list(i), "size": list(s)} for i, s in self.size_ids],
            "outer_loops": list(self.outer_names) or None,
            "extensions": [{"tensor": e.tensor, "size": list(e.size), "shift": list(e.shift)}
                           for e in self.extensions] or None,
            "predicted_cycles": dict(self.predicted) or None,
        }


def no_simd(reason: str) -> SimdDecision:
    return SimdDecision(False, reason)


def op_shape(stmt: Stmt, trigger: str | None) -> OpShape | str:
    """The statement as a single SIMD operation, or why it is not one (condition 1)."""
    def operand(v: Value) -> str | bool | None:
        match v:
            case Read(tensor) if tensor == trigger:
                return None
            case Read(tensor):
                return tensor
            case Const():
                return None
        return False

    dst = stmt.target.tensor
    value = stmt.value
    scalar_values = [v for v in _leaves(value) if isinstance(v, Const) or (
        isinstance(v, Read) and v.tensor == trigger)]
    if len(scalar_values) > 1:
        return "more than one scalar operand (the arriving value and constants)"
    scalar = scalar_values[0] if scalar_values else None
    if stmt.op == "+=":
        match value:
            case Binary("*", a, b) if operand(a) is not False and operand(b) is not False:
                return OpShape("fmac", dst, (_src(operand(a)), _src(operand(b))), scalar)
            case Read() | Const():
                return OpShape("fadd", dst, (dst, _src(operand(value))), scalar)
    elif stmt.op == "max=":
        if isinstance(value, Read | Const):
            return OpShape("fmax", dst, (dst, _src(operand(value))), scalar)
    else:
        match value:
            case Binary(op, a, b) if operand(a) is not False and operand(b) is not False:
                name = {"*": "fmul", "+": "fadd", "-": "fsub", "max": "fmax"}[op]
                return OpShape(name, dst, (_src(operand(a)), _src(operand(b))), scalar)
            case Read() | Const():
                src = _src(operand(value))
                return OpShape("fill" if src is None else "copy", dst, (src,), scalar)
    return f"'{stmt}' is not a single operation with SIMD support"


def op_steps(stmt: Stmt, trigger: str | None) -> tuple[OpShape, ...] | str:
    """The statement as a sequence of SIMD operations over the same domain.

    One operation when it is one (the paper's condition 1). Otherwise a sum of terms,
    each an operand or a product of two, is accumulated in the target: ``t = a`` (or
    ``a * b``), then ``t += c * d``, ``t = t + e``, ``t = t - f``; a product is subtracted
    by negating its constant. LAIR never reads a statement's target, so the target can
    hold the partial sums."""
    single = op_shape(stmt, trigger)
    if not isinstance(single, str):
        return (single,)
    dst = stmt.target.tensor

    def leaf(v: Value) -> str | bool | None:
        if isinstance(v, Read):
            return None if v.tensor == trigger else v.tensor
        return None if isinstance(v, Const) else False

    if stmt.op == "max=":
        accumulated = _accumulated(stmt.op, stmt.value, dst, leaf)
        return single if accumulated is None else accumulated
    terms = _terms(stmt.value, 1)
    summed = None if terms is None else _summed(stmt.op, terms, dst, leaf)
    if summed is not None and len(summed) >= 2:
        return tuple(summed)
    if stmt.op == "=":
        chain = _chain(stmt.value, dst, leaf, TEMP if _TEMPORARIES.get() else None)
        return single if chain is None or len(chain) < 2 else tuple(chain)
    accumulated = _accumulated(stmt.op, stmt.value, dst, leaf)
    return single if accumulated is None else accumulated


def _summed(op: str, terms: list[tuple[int, Value]], dst: str,
            leaf: Callable[[Value], str | bool | None]) -> list[OpShape] | None:
    """A sum of signed terms (each an operand or a product of two) accumulated in the
    target, or None where a term cannot be (a subtracted product without a constant)."""
    if op == "=" and len(terms) == 2 and isinstance(terms[0][1], Binary) and \
            terms[1][0] > 0 and isinstance(leaf(terms[1][1]), str):
        # ``a * b + s`` as ``t = s; t += a * b``: the same rounding (one addition, which
        # commutes), and an update in place can then take the copy (codegen.inplace)
        terms = [terms[1], terms[0]]
    if op == "=" and len(terms) >= 2 and terms[0][0] < 0 and terms[1][0] > 0:
        # ``-d + e`` as ``e - d``: the first partial sum is the same (exactly), so is
        # every one after it
        terms = [terms[1], terms[0], *terms[2:]]
    steps: list[OpShape] = []
    for k, (sign, term) in enumerate(terms):
        first = k == 0 and op == "="
        if isinstance(term, Binary):  # a product of two leaves
            a, b = term.lhs, term.rhs
            if sign < 0:
                if isinstance(a, Const):
                    a = Const(-a.value)
                elif isinstance(b, Const):
                    b = Const(-b.value)
                elif op == "=" or not _TEMPORARIES.get():
                    return None  # (``=``: the product in the target first, _chain)
                else:  # (no constant to negate: the product apart, then subtracted)
                    product = _product(a, b, TEMP, leaf)
                    if product is None:
                        return None
                    steps += [product, OpShape("fsub", dst, (dst, TEMP), None)]
                    continue
            scalars = [v for v in (a, b) if leaf(v) is None]
            if len(scalars) > 1:
                return None
            srcs = (_src(leaf(a)), _src(leaf(b)))
            scalar = scalars[0] if scalars else None
            steps.append(OpShape("fmul" if first else "fmac", dst, srcs, scalar))
            continue
        src = leaf(term)
        if src is False:
            return None
        if isinstance(term, Const) and sign < 0:
            term, sign = Const(-term.value), 1
        scalar = term if src is None else None
        if first:
            if sign < 0:  # (``-d - e`` as ``t = 0; t -= d; t -= e``: 0 - d is -d exactly)
                steps.append(OpShape("fill", dst, (None,), Const(0.0)))
                steps.append(OpShape("fsub", dst, (dst, _src(src)), scalar))
                continue
            steps.append(OpShape("fill" if src is None else "copy", dst, (_src(src),), scalar))
        else:
            steps.append(OpShape("fadd" if sign > 0 else "fsub", dst, (dst, _src(src)), scalar))
    return steps


def _product(a: Value, b: Value, dst: str, leaf: Callable[[Value], str | bool | None]
             ) -> OpShape | None:
    """``dst = a * b`` of two leaves (one scalar at most), or None."""
    scalars = [v for v in (a, b) if leaf(v) is None]
    if len(scalars) > 1:
        return None
    return OpShape("fmul", dst, (_src(leaf(a)), _src(leaf(b))), scalars[0] if scalars else None)


def _chain(value: Value, dst: str, leaf: Callable[[Value], str | bool | None],
           spare: str | None = None) -> list[OpShape] | None:
    """Operations leaving ``value`` in ``dst``, or None: the value must be a spine of
    binary operations each with a leaf on its other side (for + and -, also a product of
    two leaves), negations allowed; ``max(h + b, 0)`` is ``dst = h + b; dst = max(dst,
    0)``. Every operation rounds to the target's type as the reference does; operands of
    +, * and max may swap sides (exact in IEEE arithmetic). With a ``spare`` temporary,
    two compound operands are one each: ``(a + b) * (a - b)`` is ``dst = a + b``,
    ``spare = a - b``, ``dst = dst * spare``."""
    def one(op: str, srcs: tuple[Value, ...]) -> OpShape | None:
        names = [leaf(v) for v in srcs]
        scalars = [v for v, n in zip(srcs, names, strict=True) if n is None]
        if False in names or len(scalars) > 1:
            return None
        return OpShape(op, dst, tuple(_src(n) for n in names), scalars[0] if scalars else None)

    def on_dst(op: str, other: tuple[Value, ...], *, dst_first: bool = True
               ) -> OpShape | None:
        """``dst = dst op other`` (or ``other op dst``) with ``dst`` as an operand."""
        shape = one(op, other)
        if shape is None:
            return None
        srcs = (dst, *shape.srcs) if dst_first else (*shape.srcs, dst)
        return OpShape(op, dst, srcs, shape.scalar)

    def product(v: Value) -> tuple[Value, Value] | None:
        if isinstance(v, Binary) and v.op == "*" and leaf(v.lhs) is not False \
                and leaf(v.rhs) is not False:
            return v.lhs, v.rhs
        return None

    src = leaf(value)
    if src is not False:
        first = one("fill" if src is None else "copy", (value,))
        return None if first is None else [first]
    if (pair := product(value)) is not None:
        first = one("fmul", pair)
        return None if first is None else [first]
    match value:
        case Unary(_, operand):
            inner = _chain(operand, dst, leaf, spare)
            negate = on_dst("fmul", (Const(-1.0),))
            return None if inner is None or negate is None else [*inner, negate]
        case Binary(op, lhs, rhs):
            name = {"+": "fadd", "-": "fsub", "*": "fmul", "max": "fmax"}[op]
            if leaf(lhs) is not False and leaf(rhs) is not False:
                first = one(name, (lhs, rhs))
                return None if first is None else [first]
            if lhs == rhs:  # (a square of a compound operand: ``(a - b) * (a - b)``)
                inner = _chain(lhs, dst, leaf, spare)
                return None if inner is None else [
                    *inner, OpShape(name, dst, (dst, dst), None)]
            for spine, side, swapped in ((lhs, rhs, False), (rhs, lhs, True)):
                if swapped and op == "-" and leaf(side) is False:
                    continue
                inner = _chain(spine, dst, leaf, spare) if leaf(spine) is False else None
                if inner is None:
                    continue
                last: OpShape | None
                if leaf(side) is not False:
                    last = on_dst(name, (side,), dst_first=not (swapped and op == "-"))
                elif op in "+-" and (pair := product(side)) is not None:
                    last = _negated_fmac(pair, one) if op == "-" else one("fmac", pair)
                else:
                    last = None
                if last is not None:
                    return [*inner, last]
            if spare is not None:
                left, right = _chain(lhs, dst, leaf, spare), _chain(rhs, spare, leaf)
                if left is not None and right is not None:
                    return [*left, *right, OpShape(name, dst, (dst, spare), None)]
    return None


def _accumulated(op: str, value: Value, dst: str,
                 leaf: Callable[[Value], str | bool | None]
                 ) -> tuple[OpShape, ...] | str | None:
    """``dst += value`` (or ``max=``) where ``value`` is not one operand or a product of
    two: the value computed into a temporary (:data:`TEMP`, by :func:`_chain`), then
    accumulated; a last multiplication is fused into the accumulation (``dst += t *
    c``, rounding the product as the reference does). None where the value is no such
    chain; why not where the temporary would not fit (:func:`without_temporaries`)."""
    chain = _chain(value, TEMP, leaf)
    if chain is None:
        return None
    if not _TEMPORARIES.get():
        return ("computing its value before accumulating it needs a temporary array, "
                "which would not fit the PE")
    last = chain[-1]
    if op == "+=" and last.op == "fmul" and TEMP in last.srcs:
        return (*chain[:-1], OpShape("fmac", dst, last.srcs, last.scalar))
    return (*chain, OpShape("fadd" if op == "+=" else "fmax", dst, (dst, TEMP), None))


def _negated_fmac(pair: tuple[Value, Value], one: Callable[[str, tuple[Value, ...]],
                  OpShape | None]) -> OpShape | None:
    """``dst -= a * b`` as ``dst += (-a) * b`` where ``a`` or ``b`` is a constant."""
    a, b = pair
    if isinstance(a, Const):
        return one("fmac", (Const(-a.value), b))
    if isinstance(b, Const):
        return one("fmac", (a, Const(-b.value)))
    return None


def _terms(value: Value, sign: int) -> list[tuple[int, Value]] | None:
    """``value`` as signed terms, each a leaf or a product of two leaves; None if not."""
    match value:
        case Binary("+", lhs, rhs):
            a, b = _terms(lhs, sign), _terms(rhs, sign)
            return None if a is None or b is None else a + b
        case Binary("-", lhs, rhs):
            a, b = _terms(lhs, sign), _terms(rhs, -sign)
            return None if a is None or b is None else a + b
        case Unary(_, operand):
            return _terms(operand, -sign)
        case Binary("*", lhs, rhs) if isinstance(lhs, Read | Const) and isinstance(
                rhs, Read | Const):
            return [(sign, value)]
        case Read() | Const():
            return [(sign, value)]
    return None


def _src(v: str | bool | None) -> str | None:
    assert v is not False
    return v if isinstance(v, str) else None


def _leaves(value: Value) -> list[Value]:
    match value:
        case Binary(_, a, b):
            return _leaves(a) + _leaves(b)
        case Unary(_, operand):
            return _leaves(operand)
    return [value]


def decide(pstmt: PolyStatement, instances: isl.Set, trigger: str | None, memory: Memory,
           context: isl.Set, *, box_hull: bool = True, varying: tuple[str, ...] = (),
           rank: Callable[[SimdDecision], int] | None = None) -> SimdDecision:
    """Decide whether the task running ``instances`` of ``pstmt`` is one SIMD instruction.

    Following the paper: compress (§5.2); try the fixed-size box hull first, accepting
    extra instances that write only outside the proper elements and read in bounds
    (§5.3); otherwise the exact box (§5.1), with one configuration per size when the
    size varies (§5.4). Beyond four dimensions the outer ones become scalar loops.
    ``box_hull=False`` forbids extra instances (their arrays would not fit the PE).
    ``varying`` names parameters besides the index constants that change between
    invocations (a batch's ``count``). ``rank`` predicts a decision's cycles: where the
    first decision needs scalar outer loops or size variants, the skewed bases are tried
    too and the cheapest kept (a skewed placement's band of instances is long along a
    diagonal and short along every axis).
    """
    steps = op_steps(pstmt.stmt, trigger)
    if isinstance(steps, str):
        return no_simd(steps)
    try:
        with poly.effort_limit(DECISION_EFFORT):
            return _decide(pstmt, instances, steps, memory, context, box_hull, varying, rank)
    except CodegenError as err:  # e.g. an expression PE code cannot hold
        return no_simd(err.message)
    except poly.TooComplex:
        gave_up = no_simd(f"the instance set is too complex to analyse for SIMD (isl gave "
                          f"up after {DECISION_EFFORT:,} operations)")
    # (the blocks of a placement mixing floors and mods, `(i//8 + j//8) mod 4`, lifted
    # first: as isl writes it the set explodes into cases, lifted it is a lattice of
    # blocks)
    try:
        with poly.effort_limit(DECISION_EFFORT):
            lifted = _blocks_lifted(pstmt, instances, steps, _every(pstmt, steps), memory,
                                    context, box_hull, varying, poly.compress(instances),
                                    gave_up, rank)
    except (CodegenError, poly.TooComplex):
        return gave_up
    return lifted


def _every(pstmt: PolyStatement, steps: tuple[OpShape, ...]) -> OpShape:
    """For the checks on extra instances: every operand of every step."""
    return OpShape(steps[0].op, pstmt.stmt.target.tensor, tuple(dict.fromkeys(
        src for step in steps for src in step.srcs if src != TEMP)), None)


def _decide(pstmt: PolyStatement, instances: isl.Set, steps: tuple[OpShape, ...],
            memory: Memory, context: isl.Set, box_hull: bool = True,
            varying: tuple[str, ...] = (),
            rank: Callable[[SimdDecision], int] | None = None) -> SimdDecision:
    shape = steps[0]
    every = _every(pstmt, steps)
    comp = poly.compress(instances)
    compressed_case: Case = "compressed" if comp.dim < instances.dim(isl.dim_type.set) \
        else "base"
    n = comp.dim
    if n == 0:
        return SimdDecision(False, "the instance set is zero-dimensional", compressed_case,
                            compression=comp.as_map(), compressed=comp.compressed,
                            op=shape.op)
    first = _decide_compressed(pstmt, instances, steps, every, memory, context, box_hull,
                               varying, comp, compressed_case)
    plain = first.used and not first.outer_names and first.case != "enumerated"
    if not plain or first.extra_instances is not None:
        first = _blocks_lifted(pstmt, instances, steps, every, memory, context, box_hull,
                               varying, comp, first, rank)
        plain = first.used and not first.outer_names and first.case != "enumerated"
    # (a compute task's skewed band is two-dimensional; trying every skew of deeper
    # sets, a 3-D convolution's, took seconds and found nothing cheaper)
    if plain or n > 3 or (not varying and (rank is None or not first.used or n > 2)):
        return first
    if comp.compressed.n_basic_set() != 1 or (comp.lifted and varying):
        # (a batch's set with lifted divisions, a stream in parity order: the skews took
        # a minute of isl and found nothing cheaper)
        return first
    # A batch of a sliding window's instances is a box along another lattice basis, and
    # a skewed placement's band is long along a diagonal: try the skews of the
    # compressed coordinates (of simple sets, where isl stays cheap). A batch takes the
    # first that is one instruction without scalar loops or variants; with ``rank``,
    # the cheapest is kept.
    best, best_cost = first, rank(first) if rank is not None and first.used else None
    for along in _skews(comp):
        if along.lifted > comp.lifted and not all(scan_keeps_conflicts(
                pstmt, instances, step.dst,
                tuple(s for s in step.srcs if s is not None and s != TEMP), comp, along,
                memory) for step in steps if step.dst != TEMP):
            continue
        found = _decide_compressed(pstmt, instances, steps, every, memory, context,
                                   box_hull, varying, along, "compressed")
        if not found.used:
            continue
        found = replace(found, reason=found.reason + " (along a skewed basis)")
        if rank is None:
            if not found.outer_names and found.case != "enumerated":
                return found
            continue
        cost = rank(found)
        if best_cost is None or cost < best_cost:
            best, best_cost = found, cost
    return best


def _skews(comp: poly.Compression) -> Iterator[poly.Compression]:
    """``comp`` skewed, ``c_a + s c_b``, for ``s`` 1 and -1 and the coefficients of
    ``c_b`` in the compression (a cyclic diagonal ``(i + j) mod 4`` steps by 4 in ``j``
    for each step of its other coordinate: skewed by 4, each row ``i`` is one run), and
    ``comp`` and each skew with residues lifted (:func:`_residue_lifts`)."""
    yield from _residue_lifts(comp)
    n = comp.dim
    for a, b in permutations(range(n), 2):
        for factor in sorted({1, *(abs(c_b) for _, c_b in _coefficients(comp, a, b))}):
            for sign in (factor, -factor):
                skew = poly.skewed(comp, a, b, sign)
                yield skew
                if factor > 1:
                    yield from _residue_lifts(skew)


def _residue_lifts(comp: poly.Compression) -> Iterator[poly.Compression]:
    """``comp`` with a coordinate ``c_a``'s residues modulo ``m`` lifted
    (:func:`mapping.poly.residues_lifted`), where an original coordinate reads
    ``x = u c_a + v c_b`` and ``m = |v| / gcd(u, v) > 1``: for ``c_a = m q + r``, ``x = u r
    + v (c_b - t q)``, the rows of one residue a box (``j = 2 i - 4 k``: ``i``'s residues
    modulo 2)."""
    seen = set()
    for a, b in permutations(range(comp.dim), 2):
        for u, v in _coefficients(comp, a, b):
            m = abs(v) // gcd(u, v)
            if m > 1 and (a, b, m) not in seen:
                seen.add((a, b, m))
                yield poly.residues_lifted(comp, a, b, m, -(u * m) // v)


def _coefficients(comp: poly.Compression, a: int, b: int) -> list[tuple[int, int]]:
    """The integer coefficients ``(u, v)`` of compressed coordinates ``a`` and ``b`` in
    each original coordinate that reads both."""
    found = []
    for k in range(comp.map.dim(isl.dim_type.out)):
        aff = comp.map.get_at(k)
        u, v = (aff.get_coefficient_val(isl.dim_type.in_, d) for d in (a, b))
        if u.is_int() and v.is_int() and not u.is_zero() and not v.is_zero():
            found.append((int(u.to_python()), int(v.to_python())))
    return found


def _blocks_lifted(pstmt: PolyStatement, instances: isl.Set, steps: tuple[OpShape, ...],
                   every: OpShape, memory: Memory, context: isl.Set, box_hull: bool,
                   varying: tuple[str, ...], comp: poly.Compression, first: SimdDecision,
                   rank: Callable[[SimdDecision], int] | None) -> SimdDecision:
    """``first``, or the decision on ``comp`` with the blocks of a block-cyclic placement
    lifted into coordinates of their own (:mod:`mapping.lifting`) where that does less
    work (``rank``'s prediction, else the elements the instructions run) and scans every
    conflicting pair of instances in the same order. Blocks within blocks are lifted in
    rounds; each round's decision is weighed (a skewed GEMM's first round gives one
    instruction per block, its second one per row)."""
    best = first
    previous: poly.Compression | None = None
    for rounds in range(1, MAX_LIFTS + 1):
        lifted = lift_blocks(comp, rounds=rounds)
        if lifted is None or (previous is not None and lifted.dim == previous.dim):
            break  # (nothing more to lift)
        previous = lifted
        if not all(scan_keeps_conflicts(
                pstmt, instances, step.dst,
                tuple(s for s in step.srcs if s is not None and s != TEMP), comp, lifted,
                memory) for step in steps if step.dst != TEMP):
            continue
        found = _decide_compressed(pstmt, instances, steps, every, memory, context, box_hull,
                                   varying, lifted, "compressed")
        if not found.used:
            continue
        found = replace(found, reason=found.reason + " (the blocks of a block-cyclic "
                                                     "placement as coordinates of their own)")
        if not best.used or (rank(found) < rank(best) if rank is not None
                             else _elements(found) < _elements(best)):
            best = found
    return best


def _elements(d: SimdDecision) -> int:
    """The element operations of a decision's instructions over one invocation (its
    largest variant, times the runs of its outer loops)."""
    assert d.sizes is not None
    runs = 1
    if d.outer is not None:
        box = poly.set_box_hull(d.outer)
        runs = prod(box.size) if box is not None else MAX_SIMD_SIZE ** len(d.outer_names)
    return runs * max(prod(v) for v in (d.variants or (d.sizes,)))


def _decide_compressed(pstmt: PolyStatement, instances: isl.Set, steps: tuple[OpShape, ...],
                       every: OpShape, memory: Memory, context: isl.Set, box_hull: bool,
                       varying: tuple[str, ...], comp: poly.Compression,
                       compressed_case: Case) -> SimdDecision:
    """The decision on the compressed coordinates ``comp``: the innermost dimensions (at
    most four) as one instruction; where they do not make one, fewer of them inside
    scalar loops over the others (a row at a time)."""
    n = comp.dim
    failures: list[str] = []
    for k in range(max(0, n - MAX_SIMD_DIMS), n):
        found = _decide_inner(pstmt, instances, steps, every, memory, context, box_hull,
                              varying, comp, compressed_case, k)
        if isinstance(found, SimdDecision):
            return found
        if not failures:
            failures.append(found)
    return SimdDecision(False, failures[0], compressed_case, compression=comp.as_map(),
                        compressed=comp.compressed, op=steps[0].op)


def _decide_inner(pstmt: PolyStatement, instances: isl.Set, steps: tuple[OpShape, ...],
                  every: OpShape, memory: Memory, context: isl.Set, box_hull: bool,
                  varying: tuple[str, ...], comp: poly.Compression, compressed_case: Case,
                  k: int) -> SimdDecision | str:
    """The decision with the first ``k`` compressed dimensions as scalar loops, or why
    the others are not one instruction."""
    shape = steps[0]
    outer_names = tuple(f"o{d}" for d in range(k))
    inner, outer = split_outer(comp.compressed, outer_names)
    index_like = (*poly.index_params(instances), *varying, *outer_names)
    ctx = context if outer is None else _with_outer(context, outer)

    def build(case: Case, origin: isl.MultiPwAff, sizes: tuple[int, ...],
              extra: isl.Set | None = None, extensions: tuple[Extension, ...] = (),
              variants: tuple[tuple[int, ...], ...] | None = None, variant: IExpr | None = None,
              size_ids: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] | None = None
              ) -> SimdDecision | str:
        if max(sizes) > MAX_SIMD_SIZE:
            return f"a box size exceeds {MAX_SIMD_SIZE}"
        by_tensor: dict[str, Operand] = {}
        for tensor in dict.fromkeys(t for step in steps for t in (step.dst, *step.srcs)):
            if tensor is None:
                continue
            if tensor == TEMP:  # (the box row-major, the largest variant's)
                largest = tuple(max(v[d] for v in (variants or (sizes,)))
                                for d in range(len(sizes)))
                if prod(largest) > MAX_TEMP_ELEMENTS:
                    return (f"its temporary would hold {prod(largest)} elements, more than "
                            f"{MAX_TEMP_ELEMENTS}")
                by_tensor[tensor] = Operand("array", None, TEMP, row_major(largest),
                                            IConst(0))
                continue
            local = memory.of(tensor)
            if local is None:
                return f"'{tensor}' has no local array"
            access = outer_to_params(poly.rewrite_access(pstmt.access_function(tensor), comp),
                                      outer_names)
            linear = linear_access(access, local.to_local_bound, local.size, origin, ctx)
            if isinstance(linear, str):
                return f"the access to '{tensor}' {linear}"
            strides, base_isl, base = linear
            by_tensor[tensor] = Operand("array", tensor, local.name, strides, base, base_isl)

        def operand(tensor: str | None) -> Operand:
            return Operand("scalar") if tensor is None else by_tensor[tensor]

        operands = [operand(t) for t in (shape.dst, *shape.srcs)]
        more = tuple((step.op, operand(step.dst), tuple(operand(t) for t in step.srcs),
                      step.scalar) for step in steps[1:])
        reason = {"base": "one SIMD instruction per invocation",
                  "compressed": "one SIMD instruction per invocation after variable "
                                "compression",
                  "box_hull": "the fixed-size box hull, with extra instances whose results "
                              "are discarded",
                  "enumerated": "one SIMD configuration per size, selected per invocation"}[case]
        if outer_names:
            reason += f", inside {len(outer_names)} scalar outer loop(s)"
        if more:
            reason += f"; the statement is split into {1 + len(more)} operations"
        return SimdDecision(True, reason, case, shape.op, comp.as_map(), comp.compressed,
                            sizes, origin, extra, size_ids, operands[0], tuple(operands[1:]),
                            shape.scalar, variants or (sizes,), variant, outer, outer_names,
                            extensions, more)

    failures: list[str] = []
    approx = poly.approximate_by_box(inner)
    if approx is None:
        failures.append("no fixed-size box hull")
    else:
        origin = _multi_pw(approx.box.offset)
        if approx.exact:
            result = build(compressed_case, origin, approx.box.size)
            if isinstance(result, SimdDecision):
                return result
            failures.append(result)
        elif not box_hull:
            failures.append("the local arrays grown for the box hull's extra instances "
                            "would not fit the PE's memory")
        else:
            extensions = _extras_allowed(pstmt, every, comp, outer_names, inner, approx.extra,
                                         memory, index_like)
            if isinstance(extensions, str):
                failures.append(extensions)
            else:
                result = build("box_hull", origin, approx.box.size, approx.extra, extensions)
                if isinstance(result, SimdDecision):
                    return result
                failures.append(result)
    rect = poly.rectangularity(inner, index=index_like)
    if not rect.dense:
        failures.append("the instance set is not a dense box")
    elif rect.fixed and rect.constant_size is not None:
        result = build(compressed_case, rect.minimum, rect.constant_size)
        if isinstance(result, SimdDecision):
            return result
        failures.append(result)
    else:  # the size varies between invocations, or between PEs: one variant per size
        enumerated = _enumerate(rect, index_like, ctx)
        found: SimdDecision | str
        if isinstance(enumerated, str):
            found = enumerated
        else:
            variants, variant, size_ids, length, over = enumerated
            found = build("enumerated", rect.minimum, variants[-1], None, (), variants,
                          variant, size_ids)
            if isinstance(found, SimdDecision):
                cut = next((k for k in range(len(variants[0]))
                            if len({v[k] for v in variants}) > 1), None)
                found = replace(found, length=length, length_isl=None if cut is None
                                or length is None else rect.extent.get_at(cut))
                if over and length is not None:
                    return found.cut_to_length()
        if not isinstance(found, SimdDecision) or found.length is None:
            outermost = _varying_outermost(pstmt, instances, steps, memory, rect, comp, k)
            if outermost is not None:
                alt = _decide_inner(pstmt, instances, steps, every, memory, context, box_hull,
                                    varying, outermost, compressed_case, k)
                if isinstance(alt, SimdDecision) and (alt.length is not None or alt.by_length):
                    alt = replace(alt, reason=alt.reason + " (its varying dimension outermost)")
                    if not isinstance(found, SimdDecision):
                        return alt
                    return replace(found, permuted=alt)
        if isinstance(found, SimdDecision):
            return found
        failures.append(found)
    return "; ".join(failures)


def _varying_outermost(pstmt: PolyStatement, instances: isl.Set,
                       steps: tuple[OpShape, ...], memory: Memory,
                       rect: poly.Rectangularity, comp: poly.Compression, k: int
                       ) -> poly.Compression | None:
    """Where the instruction's sizes (its dimensions after the ``k`` outer loops) differ
    in one dimension only and some before it are larger than 1: the compression with that
    dimension first after the outer loops, if scanning in that order keeps every
    conflicting pair of instances in order (in each of the statement's operations)."""
    sizes = [poly.constant_value(rect.size.get_at(d)) for d in range(rect.size.dim(
        isl.dim_type.out))]
    varying = [d for d, s in enumerate(sizes) if s is None]
    if len(varying) != 1 or all(sizes[d] == 1 for d in range(varying[0])):
        return None
    moved = poly.moved_outermost(comp, k + varying[0], k)
    if not all(scan_keeps_conflicts(pstmt, instances, step.dst,
                                    tuple(s for s in step.srcs if s is not None), comp, moved,
                                    memory) for step in steps):
        return None
    return moved


def _multi_pw(ma: isl.MultiAff) -> isl.MultiPwAff:
    return isl.MultiPwAff.from_multi_aff(ma)


def split_outer(s: isl.Set, names: tuple[str, ...]) -> tuple[isl.Set, isl.Set | None]:
    """Move the first ``len(names)`` dimensions of ``s`` to parameters named ``names``;
    also return the set of their values (over the other parameters)."""
    if not names:
        return s, None
    k = len(names)
    nparam = s.dim(isl.dim_type.param)
    inner = s.move_dims(isl.dim_type.param, nparam, isl.dim_type.set, 0, k)
    for d, name in enumerate(names):
        inner = inner.set_dim_name(isl.dim_type.param, nparam + d, name)
    outer = s.project_out(isl.dim_type.set, k, s.dim(isl.dim_type.set) - k)
    for d, name in enumerate(names):
        outer = outer.set_dim_name(isl.dim_type.set, d, name)
    return inner, outer.set_tuple_name("outer")


def outer_to_params(rel: isl.Map, names: tuple[str, ...]) -> isl.Map:
    if not names:
        return rel
    nparam = rel.dim(isl.dim_type.param)
    moved = rel.move_dims(isl.dim_type.param, nparam, isl.dim_type.in_, 0, len(names))
    for d, name in enumerate(names):
        moved = moved.set_dim_name(isl.dim_type.param, nparam + d, name)
    return moved


def _with_outer(context: isl.Set, outer: isl.Set) -> isl.Set:
    names = [str(outer.get_dim_name(isl.dim_type.set, d))
             for d in range(outer.dim(isl.dim_type.set))]
    bound = outer.bind(poly.multi_id(outer.get_space(), names)).params()
    context, bound = poly.align_params(context, bound)
    return context.intersect(bound)


def _extras_allowed(pstmt: PolyStatement, shape: OpShape, comp: poly.Compression,
                    outer_names: tuple[str, ...], inner: isl.Set, extra: isl.Set,
                    memory: Memory, index_like: tuple[str, ...]
                    ) -> tuple[Extension, ...] | str:
    """Extra instances may write only outside the proper elements and read in bounds (§5.3);
    the written array grows to hold their results."""
    extensions: list[Extension] = []
    local = memory.of(shape.dst)
    if local is None:
        return f"'{shape.dst}' has no local array"
    write = _local_access(pstmt, shape.dst, comp, outer_names, local)
    check = poly.check_extra_writes(inner, extra, write, index_like)
    if not check.disjoint:
        return "the box hull's extra instances would overwrite proper results"
    # Nor any element another statement (or an exchange, or an output chain) uses there.
    used = local.array.per_pe.bind_domain(poly.multi_id(
        local.array.per_pe.get_space().domain(), poly.PE_NAMES))
    used, to_local = poly.align_params(used, local.to_local_bound)
    used = used.apply(isl.Map.from_multi_aff(to_local))
    extra_written, used = poly.align_params(check.extra, used)
    if not extra_written.intersect(used).is_empty():
        return "the box hull's extra instances would overwrite elements used on the PE"
    for tensor in shape.srcs:
        if tensor is None or tensor == shape.dst:
            continue
        src = memory.of(tensor)
        if src is None:
            return f"'{tensor}' has no local array"
        read = _local_access(pstmt, tensor, comp, outer_names, src)
        reads = poly.accessed_elements(extra, read, index_like)
        bounds = zero_box(src.name, src.size)
        reads, bounds = poly.align_params(reads, bounds)
        if not reads.is_subset(bounds):
            return f"the box hull's extra instances would read outside the local '{tensor}'"
    written = check.proper.union(check.extra)
    box = poly.set_box_hull(written, affine=True)
    if box is None:
        return "the elements written with the extra instances have no fixed-size box"
    if box.offset.get_domain_space().dim(isl.dim_type.param) and any(
            box.offset.get_at(d).involves_dims(isl.dim_type.param, 0, box.offset.dim(
                isl.dim_type.param)) for d in range(box.offset.dim(isl.dim_type.out))):
        return "growing the local array for the extra instances would need a PE-dependent shift"
    shift = tuple(int(box.offset.get_at(d).get_constant_val().to_python())
                  for d in range(box.offset.dim(isl.dim_type.out)))
    lo = tuple(min(0, s) for s in shift)
    hi = tuple(max(old, s + n) for old, s, n in zip(local.size, shift, box.size, strict=True))
    size = tuple(h - lo_d for h, lo_d in zip(hi, lo, strict=True))
    if lo != (0,) * len(lo) or size != local.size:
        extensions.append(Extension(shape.dst, size, lo))
    return tuple(extensions)


def _local_access(pstmt: PolyStatement, tensor: str, comp: poly.Compression,
                  outer_names: tuple[str, ...], local: LocalTensor) -> isl.Map:
    """The access of ``tensor`` on the compressed instances (outer dimensions moved to
    parameters), in local coordinates of its array (e.g. eqs. (37), (39))."""
    access = outer_to_params(poly.rewrite_access(pstmt.access_function(tensor), comp), outer_names)
    access, to_local = poly.align_params(access, local.to_local_bound)
    return access.apply_range(isl.Map.from_multi_aff(to_local))


def zero_box(name: str, size: tuple[int, ...]) -> isl.Set:
    space = isl.Space.set_alloc(isl.DEFAULT_CONTEXT, 0, len(size)).set_tuple_name(
        isl.dim_type.set, name)
    box = isl.Set.universe(space)
    for d, n in enumerate(size):
        box = box.lower_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(
            isl.DEFAULT_CONTEXT, 0))
        box = box.upper_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(
            isl.DEFAULT_CONTEXT, n - 1))
    return box


MAX_SIZE_IDS = 1 << 10  # size identifiers listed before their variants are counted


def _enumerate(rect: poly.Rectangularity, index_like: tuple[str, ...], context: isl.Set
               ) -> tuple[tuple[tuple[int, ...], ...], IExpr,
                          tuple[tuple[tuple[int, ...], tuple[int, ...]], ...],
                          IExpr | None, bool] | str:
    """Size enumeration (§5.4): the variants, the expression selecting one, the ids,
    where only one dimension varies with size 1 before it, its extent (a run-time
    length), and
    whether some PE would need more variants than it has configurations."""
    try:
        enum = poly.enumerate_sizes(rect.sizes, index=index_like, limit=MAX_SIZE_IDS,
                                    context=context)
    except poly.TooManyPointsError:
        return f"more than {MAX_SIZE_IDS} sizes to enumerate"
    if enum is None:
        return "the sizes have no fixed-size box hull to enumerate"
    variants: list[tuple[int, ...]] = []
    ids: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    for identifier, size in enum.entries:
        if size.dim(isl.dim_type.param) and any(
                size.get_at(d).involves_dims(isl.dim_type.param, 0, size.dim(
                    isl.dim_type.param)) for d in range(size.dim(isl.dim_type.out))):
            return "a size identifier stands for a PE-dependent size"
        value = tuple(int(size.get_at(d).get_constant_val().to_python())
                      for d in range(size.dim(isl.dim_type.out)))
        if 0 in value:
            continue
        variants.append(value)
        ids.append((identifier, value))
    if not variants:
        return "no non-empty size to enumerate"
    dims = [d for d in range(len(variants[0])) if len({v[d] for v in variants}) > 1]
    over = False
    if len(variants) > MAX_SIMD_CONFIGS:
        # each PE sets up only the sizes it uses (codegen.configure)
        per_pe = poly.most_overlapping([
            enum.sizes.intersect(_point(enum.sizes.get_space(), v)).params()
            for v in variants])
        over = per_pe > MAX_SIMD_CONFIGS
        if over and (len(dims) != 1 or any(v[k] != 1 for v in variants
                                           for k in range(dims[0]))):
            return (f"{len(variants)} sizes, up to {per_pe} on one PE, more than the "
                    f"{MAX_SIMD_CONFIGS} configurations a PE has")
    ordered = sorted(variants, key=lambda v: tuple(v[d] for d in dims))
    # (the instruction's box is the last variant's: it must hold every other one)
    if any(v[d] > ordered[-1][d] for v in ordered for d in dims):
        return "no size variant holds all the others"
    extents = {d: _extent_expr(rect, d, context) for d in dims}
    variant = _variant_of_sizes(rect, ordered, dims, context)
    if len(dims) == 1:  # (the extent's arithmetic where it is cheaper than isl's tests)
        arithmetic = _variant_expr(ordered, dims, extents)
        if iexpr_ops(arithmetic) <= iexpr_ops(variant):
            variant = arithmetic
    length = None
    if len(dims) == 1:
        d = dims[0]
        # (the dimensions before d have one value: the largest size's cut dimension is d)
        if all(v[k] == 1 for v in variants for k in range(d)):
            length = extents[d]
    ids.sort(key=lambda e: tuple(e[1][d] for d in dims))
    return tuple(ordered), variant, tuple(ids), length, over


def _extent_expr(rect: poly.Rectangularity, d: int, context: isl.Set) -> IExpr:
    """The box's extent in dimension ``d`` as PE code: max - min + 1 (isl prints the
    extremes with min/max where it would print the piecewise size as a conditional)."""
    hi = pw_aff_expr(rect.maximum.get_at(d), context)
    lo = pw_aff_expr(rect.minimum.get_at(d), context)
    return normalize(IBin("+", IBin("-", hi, lo), IConst(1)))


def _variant_expr(ordered: list[tuple[int, ...]], dims: list[int],
                  extents: dict[int, IExpr]) -> IExpr:
    """The position among ``ordered`` (sorted by their one varying dimension) of the size
    the extent gives: ``extent - smallest`` where the sizes are consecutive, comparisons
    otherwise."""
    (d,) = dims
    values = [v[d] for v in ordered]
    if values == list(range(values[0], values[0] + len(values))):
        return normalize(IBin("-", extents[d], IConst(values[0])))
    variant: IExpr = IConst(len(ordered) - 1)
    for k in reversed(range(len(ordered) - 1)):
        variant = ISel(Cmp("==", extents[d], IConst(values[k])), IConst(k), variant)
    return variant


def _variant_of_sizes(rect: poly.Rectangularity, ordered: list[tuple[int, ...]],
                      dims: list[int], context: isl.Set) -> IExpr:
    """Where sizes vary in several dimensions: the position among ``ordered`` (sorted by
    their varying ``dims``) of the size of each invocation. Where the variants are every
    combination of their dimensions' sizes, the row-major position from one test per
    dimension; otherwise one test of every dimension per variant."""
    values = [sorted({v[d] for v in ordered}) for d in dims]
    if len(ordered) != prod(len(vs) for vs in values):
        return pw_aff_expr(_variant_function(
            rect, [{d: v[d] for d in dims} for v in ordered]), context)
    position: IExpr = IConst(0)
    for d, vs in zip(dims, values, strict=True):
        along = pw_aff_expr(_variant_function(rect, [{d: v} for v in vs]), context)
        position = IBin("+", IBin("*", position, IConst(len(vs))), along)
    return normalize(position)


def _variant_function(rect: poly.Rectangularity, choices: list[dict[int, int]]
                      ) -> isl.PwAff:
    """The position among ``choices`` (each the extents of some dimensions) of the one
    each invocation's box has, as a piecewise constant of the parameters (isl then
    writes the simplest test it knows, ``select(PE_X == 3, ...)``)."""
    extent = rect.extent
    params = extent.get_domain_space().params()
    variant: isl.PwAff | None = None
    pieces: list[isl.Set] = []
    for choice in choices:
        where = isl.Set.universe(params)
        for d, value in choice.items():
            e = extent.get_at(d)
            size = isl.PwAff.val_on_domain(isl.Set.universe(e.get_domain_space()),
                                           isl.Val.int_from_si(e.get_ctx(), value))
            where = where.intersect(e.eq_set(size).params())
        pieces.append(where)
    # (parameters the choice does not depend on are dropped from its tests: ``count``
    # where the rows vary by PE, so the test reads ``PE_Y == 3``)
    for d in reversed(range(params.dim(isl.dim_type.param))):
        fewer = [w.eliminate(isl.dim_type.param, d, 1) for w in pieces]
        if all(a.intersect(b).is_empty() for i, a in enumerate(fewer) for b in fewer[i + 1:]):
            pieces = fewer
    for k, where in enumerate(pieces):
        piece = isl.PwAff.val_on_domain(where, isl.Val.int_from_si(where.get_ctx(), k))
        variant = piece if variant is None else variant.union_add(piece)
    assert variant is not None
    return variant.gist_params(rect.context.params()).coalesce()



def _point(space: isl.Space, values: tuple[int, ...]) -> isl.Set:
    """The set holding the one point ``values`` (any parameters)."""
    point = isl.Set.universe(space)
    ls = isl.LocalSpace.from_space(space)
    for d, value in enumerate(values):
        var = isl.Aff.var_on_domain(ls, isl.dim_type.set, d)
        point = point.intersect(isl.Set.from_basic_set(isl.BasicSet.from_constraint(
            isl.Constraint.equality_from_aff(var.add_constant_val(
                isl.Val.int_from_si(space.get_ctx(), -value))))))
    return point


def flatten(ma: isl.MultiAff, shape: tuple[int, ...]) -> isl.Aff:
    """The row-major flat offset of the local element ``ma`` selects."""
    strides = row_major(shape)
    if not shape:  # a scalar: element 0
        return isl.Aff.zero_on_domain(isl.LocalSpace.from_space(ma.get_domain_space()))
    flat = ma.get_at(0).scale_val(isl.Val.int_from_si(ma.get_ctx(), strides[0]))
    for d in range(1, len(shape)):
        flat = flat.add(ma.get_at(d).scale_val(isl.Val.int_from_si(ma.get_ctx(), strides[d])))
    return flat


def flat_aff(space: isl.Space, strides: tuple[int, ...]) -> isl.Aff:
    """``sum(stride_d * x_d)`` on the set space ``space``: a flat (row-major) position."""
    ls = isl.LocalSpace.from_space(space)
    flat = isl.Aff.zero_on_domain(ls)
    for d, stride in enumerate(strides):
        flat = flat.add(isl.Aff.var_on_domain(ls, isl.dim_type.set, d).scale_val(
            isl.Val.int_from_si(space.get_ctx(), stride)))
    return flat


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(prod(shape[d + 1:]) for d in range(len(shape)))


def linear_access(access: isl.Map, to_local: isl.MultiAff, shape: tuple[int, ...],
                  origin: isl.MultiPwAff, context: isl.Set
                  ) -> tuple[tuple[int, ...], isl.PwAff, IExpr] | str:
    """Strides and base offset of an access ``[i] -> T[...]`` into the local array of T
    (condition 4), with the base taken at the box origin; or why it is not linear."""
    access, to_local = poly.align_params(access, to_local)
    local = access.apply_range(isl.Map.from_multi_aff(to_local))
    pma = local.as_pw_multi_aff()
    if pma.n_piece() != 1:
        return "is piecewise"
    pieces: list[isl.MultiAff] = []
    pma.foreach_piece(lambda _set, ma: pieces.append(ma))
    flat = flatten(pieces[0], shape)
    n = flat.dim(isl.dim_type.in_)
    if any(flat.get_div(d).involves_dims(isl.dim_type.in_, 0, n)
           for d in range(flat.dim(isl.dim_type.div))):
        return "is quasi-affine (involves integer division)"  # (of the parameters only: fine)
    strides = tuple(int(flat.get_coefficient_val(isl.dim_type.in_, k).to_python())
                    for k in range(n))
    base = isl.PwAff.from_aff(flat).pullback_multi_pw_aff(
        origin.align_params(flat.get_space()))
    if base.n_piece() > MAX_BASE_PIECES:
        return (f"has a base offset of {base.n_piece()} cases (at most {MAX_BASE_PIECES}: "
                "each invocation would spend longer choosing than computing)")
    # The base as (flat offset at i = 0) + sum(stride * origin): each origin coordinate
    # prints as a min/max where the composed piecewise base would need a conditional.
    zeroed = flat
    for k in range(n):
        zeroed = zeroed.set_coefficient_val(isl.dim_type.in_, k, isl.Val.int_from_si(
            flat.get_ctx(), 0))
    at_zero = isl.PwAff.from_aff(zeroed.drop_dims(isl.dim_type.in_, 0, n)
                                 ).project_domain_on_params()
    expr: IExpr = pw_aff_expr(at_zero, context)
    for k, stride in enumerate(strides):
        if stride:
            expr = IBin("+", expr, IBin("*", IConst(stride),
                                        pw_aff_expr(origin.get_at(k), context)))
    return strides, base, normalize(expr)

"""Predicted cycles of a task's work, with the costs of the fabric compiled for
(docs/pecode.md; the paper preset unless the driver sets another by :func:`fabric_costs`).

The compiler uses these estimates to choose between ways of running the same work: a
SIMD instruction or scalar loops for a compute task, one task per arriving wavelet or
batches of them. They count what the simulator charges (dispatch, start-up, operations
over the SIMD width, base and variant arithmetic, loop overhead, loads and stores) per
invocation, over the box around one invocation's instances; they are estimates for
choosing, not promises (the tests pin simulated cycles, not predictions).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from math import ceil, prod

import islpy as isl

from dtg.codegen.cleanup import PE_COORDINATES
from dtg.codegen.hoist import per_arrival_cond_ops, per_arrival_ops
from dtg.codegen.islast import substitute
from dtg.codegen.simd import SimdDecision
from dtg.codegen.stmtutil import simplify
from dtg.lair.graph import Binary, Const, Read, Stmt, Unary, Value
from dtg.mapping import poly
from dtg.pe.fabric import FabricConfig
from dtg.pe.ir import Cond, IBin, IExpr, If, INeg, ISel, Store
from dtg.pe.ir import Stmt as PeStmt
from dtg.pe.walk import cond_iexprs, cond_names, cond_ops, iexpr_names, iexpr_ops, store_ops

_PAPER = FabricConfig()
_FABRIC: ContextVar[FabricConfig | None] = ContextVar("fabric", default=None)


def costs() -> FabricConfig:
    """The cost table of the fabric being compiled for."""
    return _FABRIC.get() or _PAPER


@contextmanager
def fabric_costs(config: FabricConfig) -> Iterator[None]:
    """Compile for ``config`` within the block: every prediction uses its costs (one
    setting for the whole compilation, rather than an argument threaded through every
    pass that predicts)."""
    token = _FABRIC.set(config)
    try:
        yield
    finally:
        _FABRIC.reset(token)


def dispatch() -> int:
    return costs().task_dispatch


def simd_cycles(d: SimdDecision, dtype: str, *, varying: frozenset[str] | None = None,
                env: dict[str, IExpr] | None = None, outer_runs: float | None = None) -> int:
    """One invocation of a SIMD decision: every operation's start-up, element operations
    over the width, base and variant arithmetic; times its scalar outer loops. With
    ``varying`` (the names that change between invocations), base arithmetic counts
    what is left once the rest is computed once per group (codegen.hoist); ``env``
    rewrites names in the bases as emission does (a wavelet's index to the tensor's);
    ``outer_runs`` the mean iterations of the outer loops where they vary between
    invocations (else the box's)."""
    assert d.used and d.sizes is not None
    ops = prod(max(d.variants, key=prod)) if d.variants else prod(d.sizes)
    c = costs()
    elements = sum(-(-ops // c.simd_width(dtype, op or "fmac"))
                   for op in (d.op, *(m[0] for m in d.more)))
    bases = [o.base for o in (d.dst, *d.srcs) if o is not None and o.base is not None]
    if env:
        bases = [simplify(substitute(b, env)) for b in bases]
    chosen = d.length if d.by_length else d.variant
    once = 0
    if varying is None and d.outer is not None and d.outer_names:
        # (one invocation, scalar outer loops: what reads no loop variable is computed
        # once before the loops, codegen.licm, and only the rest in every run)
        loops = frozenset(d.outer_names)
        exprs = [*bases, *([chosen] if chosen is not None else [])]
        left = [per_arrival_ops(e, loops) for e in exprs]
        once = sum(expr_ops(e) - n for e, n in zip(exprs, left, strict=True))
        base_ops = sum(left[:len(bases)])
        select = c.simd_variant_select + left[-1] if chosen is not None else 0
    else:
        base_ops = sum(expr_ops(b) if varying is None else per_arrival_ops(b, varying)
                       for b in bases)
        select = c.simd_variant_select + (
            expr_ops(chosen) if varying is None else per_arrival_ops(chosen, varying)
        ) if chosen is not None else 0
    if varying is not None and d.outer_names:
        # (what is not linear in the innermost outer loop's variable is computed in every
        # run: ``(PE_X + o1) // 2`` of a lattice's parity, a variant chosen by it)
        inner = d.outer_names[-1]
        base_ops += sum(_nonlinear_ops(e, inner) for e in (*bases, *(
            [chosen] if chosen is not None else [])))
    per_run = (1 + len(d.more)) * (c.simd_startup + base_ops + select) + elements
    if d.outer is None:
        return per_run
    outer = box_volume(d.outer) if outer_runs is None else outer_runs
    return ceil(outer * (per_run + c.for_iteration)) + c.for_setup + once * c.scalar_op


def _nonlinear_ops(e: IExpr, name: str) -> int:
    """The operations of the parts of ``e`` that read ``name`` through a division, a
    remainder, a minimum or a maximum: what no loop-invariant motion or running sum
    takes out of a loop over ``name``. Choices count only their divisions: counted
    whole, a per-wavelet depthwise convolution's loop was predicted 43% high."""
    match e:
        case IBin(op, lhs, rhs):
            if op in ("//", "%", "min", "max") and name in iexpr_names(e):
                return iexpr_ops(e)
            return _nonlinear_ops(lhs, name) + _nonlinear_ops(rhs, name)
        case INeg(operand):
            return _nonlinear_ops(operand, name)
        case ISel(test, then, orelse):  # (its divisions only: see the docstring)
            return sum(_nonlinear_ops(part, name) for part in (*cond_iexprs(test), then,
                                                               orelse))
    return 0


def scalar_cycles(stmt: Stmt, instances: isl.Set, trigger: str | None, *,
                  count: int = 1, code: Sequence[PeStmt] | None = None,
                  varying: frozenset[str] | None = None) -> int:
    """One invocation of scalar loops over ``instances`` (``count`` times as many):
    per instance a loop iteration, the loads with their address arithmetic, the
    operations and the store; per innermost loop its set-up. With ``code`` (the
    statements emitted for one instance, codegen.scalarcode), those statements'
    cycles, what is left of them with only ``varying`` changing between invocations."""
    store = 1 if stmt.op == "=" else 3
    body = store + _address(len(stmt.target.index)) + _value_ops(stmt.value, stmt, trigger)
    if count == 1 and isl.Map.from_range(instances).is_single_valued():
        if code is not None:
            counted = code_cycles(code, varying)
            if counted is not None:
                return counted
        return body  # (one instance per invocation: no loop)
    volume = box_volume(instances) * count
    inner = _innermost_extent(instances)
    loops = max(1, volume // max(1, inner))
    return volume * (costs().for_iteration + body) + loops * costs().for_setup


def branch_cycles(cond: Cond, varying: frozenset[str] | None = None) -> int:
    """What a test costs per run: nothing where it reads the PE's coordinates alone
    (settled where the code is placed, ``codegen.cleanup.settle_pe_branches``); else the
    branch and the condition's operations (with ``varying``: those left per arrival)."""
    if set(cond_names(cond)) <= PE_COORDINATES:
        return 0
    test = cond_ops(cond) if varying is None else per_arrival_cond_ops(cond, varying)
    return costs().if_branch + costs().scalar_op * test


def code_cycles(code: Sequence[PeStmt], varying: frozenset[str] | None = None) -> int | None:
    """The cycles the simulator charges for straight-line stores under guards (the
    guarded branch taken), or None for anything else; with ``varying``, the integer
    arithmetic left once the parts that do not read it are computed once (codegen.hoist)."""
    def ops(e: IExpr) -> int:
        return expr_ops(e) if varying is None else per_arrival_ops(e, varying)

    c = costs()
    cycles = 0
    for s in code:
        match s:
            case Store():
                cycles += c.scalar_op * store_ops(s, ops)
            case If(cond, then, _):
                inner = code_cycles(then, varying)
                if inner is None:
                    return None
                cycles += branch_cycles(cond, varying) + inner
            case _:
                return None
    return cycles


def elementwise_simd_pays(sizes: tuple[int, ...], dtype: str, *, ops: int) -> bool:
    """Whether one SIMD instruction (configured for it alone) over the box ``sizes``
    beats scalar loops doing ``ops`` operations per element (arithmetic, sends and
    receives) besides one array access: for a single element the loop wins."""
    n = prod(sizes)
    simd = costs().simd_config + costs().simd_startup + -(-n // costs().simd_width(dtype)) + 1
    if n == 1:
        return simd < (ops + 1) * costs().scalar_op
    loops = prod(sizes[:-1]) + sum(prod(sizes[:d]) for d in range(len(sizes) - 1))
    scalar = n * (costs().for_iteration + (ops + 1) * costs().scalar_op + _address(
        len(sizes))) + loops * costs().for_setup
    return simd < scalar


def simd_setup(d: SimdDecision) -> int:
    """Configuring a decision's SIMD instructions, once per run in ``main``."""
    return costs().simd_config * d.configs


def box_volume(s: isl.Set) -> int:
    """Points of the fixed-size box around ``s`` for each parameter value (one
    invocation's instances when the parameters are the PE and the arrival)."""
    box = poly.set_box_hull(s)
    whole = max(1, prod(box.size)) if box is not None else 1
    pieces = s.get_basic_sets()
    if not 1 < len(pieces) <= MAX_PIECES:
        return whole
    # (pieces on different PEs, a halo's slivers: one box each, the largest counts)
    parts = []
    for piece in pieces:
        box = poly.set_box_hull(s.intersect_params(piece.params()))
        if box is None:
            return whole
        parts.append(max(1, prod(box.size)))
    return min(whole, max(parts))


MAX_PIECES = 16  # pieces of an instance set boxed one by one


def expr_ops(e: IExpr | None) -> int:
    """Operations the simulator charges for an integer expression."""
    return 0 if e is None else iexpr_ops(e)


def _innermost_extent(s: isl.Set) -> int:
    box = poly.set_box_hull(s)
    if box is None or not box.size:
        return 1
    return max(1, box.size[-1])


def _address(dims: int) -> int:
    """A load's extra cycles per dimension beyond the first, and about two operations
    per index (iterator times stride, minus the array's offset)."""
    return max(0, dims - 1) + 2 * dims


def _value_ops(value: Value, stmt: Stmt, trigger: str | None) -> int:
    match value:
        case Read(tensor) if tensor == trigger:
            return 0
        case Read(tensor):
            return 1 + _address(len(stmt.access(tensor).index))
        case Const():
            return 0
        case Unary(_, operand):
            return 1 + _value_ops(operand, stmt, trigger)
        case Binary(_, lhs, rhs):
            return 1 + _value_ops(lhs, stmt, trigger) + _value_ops(rhs, stmt, trigger)
    return 1

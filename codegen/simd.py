"""SIMD detection (paper §5): can the work of one task be one rectangular SIMD instruction?

The four conditions of §5: (1) the statement is a single operation with SIMD support,
(2) its instance set is a dense box of fixed size, (3) of dimension greater than zero
(and at most four), (4) every access is linear in the box coordinates. Variable
compression is applied first, indiscriminately, as the paper does (§5.2); the box comes
from the exact per-dimension minima and maxima (§5.1). When a condition fails the task
gets scalar loops and the decision records why.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Literal

import islpy as isl

from codegen.islast import pw_aff_expr
from codegen.peir import MAX_SIMD_DIMS, MAX_SIMD_SIZE, IExpr
from lair.graph import Binary, Const, Read, Stmt, Unary, Value
from lair.lower import PolyStatement
from mapping import poly
from mapping.memory import Memory

Case = Literal["base", "compressed", "box_hull", "enumerated"]
OPS = {"fmac", "fmul", "fadd", "fsub", "fmax", "copy", "fill"}


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
class SimdDecision:
    used: bool
    reason: str
    case: Case | None = None
    op: str | None = None
    compression: isl.Map | None = None
    compressed: isl.Set | None = None
    sizes: tuple[int, ...] | None = None
    offset: isl.MultiPwAff | None = None
    extra_instances: isl.Set | None = None
    size_ids: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] | None = None
    dst: Operand | None = None
    srcs: tuple[Operand, ...] = ()
    scalar: Value | None = None

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
           context: isl.Set) -> SimdDecision:
    """Decide whether the task running ``instances`` of ``pstmt`` is one SIMD instruction."""
    shape = op_shape(pstmt.stmt, trigger)
    if isinstance(shape, str):
        return no_simd(shape)
    comp = poly.compress(instances)
    case: Case = "compressed" if comp.dim < instances.dim(isl.dim_type.set) else "base"
    rect = poly.rectangularity(comp.compressed)

    def fail(reason: str) -> SimdDecision:
        return SimdDecision(False, reason, case, shape.op, comp.as_map(), comp.compressed)

    if not rect.dense:
        return fail("the instance set is not a dense box")
    if not rect.fixed:
        return fail("the size of the instance set depends on the index values")
    if rect.constant_size is None:
        return fail("the size depends on the PE coordinates (one program per size is not "
                    "implemented)")
    sizes = rect.constant_size
    if not sizes:
        return fail("the instance set is zero-dimensional")
    if len(sizes) > MAX_SIMD_DIMS:
        return fail(f"the box has {len(sizes)} dimensions, more than {MAX_SIMD_DIMS}")
    if max(sizes) > MAX_SIMD_SIZE:
        return fail(f"a box size exceeds {MAX_SIMD_SIZE}")
    operands: list[Operand] = []
    for tensor in (shape.dst, *shape.srcs):
        if tensor is None:
            operands.append(Operand("scalar"))
            continue
        local = memory.of(tensor)
        if local is None:
            return fail(f"'{tensor}' has no local array")
        access = poly.rewrite_access(pstmt.access(tensor), comp)
        linear = linear_access(access, local.array.to_local_bound, local.size, rect.minimum,
                               context)
        if isinstance(linear, str):
            return fail(f"the access to '{tensor}' {linear}")
        strides, base_isl, base = linear
        operands.append(Operand("array", tensor, local.name, strides, base, base_isl))
    return SimdDecision(True, "one SIMD instruction per invocation", case, shape.op,
                        comp.as_map(), comp.compressed, sizes, rect.minimum, None, None,
                        operands[0], tuple(operands[1:]), shape.scalar)


def flatten(ma: isl.MultiAff, shape: tuple[int, ...]) -> isl.Aff:
    """The row-major flat offset of the local element ``ma`` selects."""
    strides = row_major(shape)
    flat = ma.get_at(0).scale_val(isl.Val.int_from_si(ma.get_ctx(), strides[0]))
    for d in range(1, len(shape)):
        flat = flat.add(ma.get_at(d).scale_val(isl.Val.int_from_si(ma.get_ctx(), strides[d])))
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
    if flat.dim(isl.dim_type.div) > 0:
        return "is quasi-affine (involves integer division)"
    strides = tuple(int(flat.get_coefficient_val(isl.dim_type.in_, k).to_python())
                    for k in range(n))
    base = isl.PwAff.from_aff(flat).pullback_multi_pw_aff(
        origin.align_params(flat.get_space()))
    return strides, base, pw_aff_expr(base, context)

"""Index-set splitting of a SIMD instruction's scalar outer loop.

An instruction inside a scalar loop gets its bases (and its run-time length) as
piecewise quasi-affine functions of the loop variable: a diagonal of a skewed band
starts at ``max(0, c0 - 63)`` and has ``min(63, c0) - max(0, c0 - 63) + 1`` elements.
Printed as they are, the minima and maxima cost operations on every iteration. Split
into the pieces where each is one affine function, the loop runs once per piece, each
with affine bases: the same instructions in the same order, fewer operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import islpy as isl

from dtg.codegen.cost import box_volume, costs, expr_ops
from dtg.codegen.islast import pw_aff_expr
from dtg.codegen.scancheck import quasi_affine
from dtg.codegen.simd import Operand, SimdDecision
from dtg.errors import CompilerBug
from dtg.mapping import poly
from dtg.pe.ir import IExpr

MAX_PIECES = 4


@dataclass(frozen=True)
class Piece:
    """Values of the outer loop variable (a set like the decision's ``outer``) on which
    every base and the length is one affine function, with those functions as code."""

    outer: isl.Set
    bases: dict[str, IExpr]  # array -> base
    length: IExpr | None


def split_outer_loop(d: SimdDecision, context: isl.Set) -> list[Piece] | None:
    """The pieces of ``d``'s one scalar outer loop in the order the loop visits them, or
    ``None`` where splitting saves nothing (one piece, more than :data:`MAX_PIECES`,
    pieces that interleave, or fewer operations saved than the loops cost)."""
    if d.outer is None or len(d.outer_names) != 1 or d.variant is not None:
        return None
    (name,) = d.outer_names
    operands = _array_operands(d)
    funcs = {o.array: o.base_isl for o in operands
             if o.array is not None and o.base_isl is not None}
    if len(funcs) != len(operands):
        return None
    length = d.length_isl if d.by_length else None
    if d.by_length and length is None:
        return None
    outer = _to_params(d.outer, name)
    outer, context = poly.align_params(outer, context)
    scanned = outer.intersect(context)  # (the loop visits the outer values in the context)
    cells = [scanned]
    for f in (*funcs.values(), *([length] if length is not None else [])):
        pieces = f.get_pieces()
        if len(pieces) < 2:
            continue
        refined = []
        for cell in cells:
            for where, _ in pieces:
                cell, where = poly.align_params(cell, where)
                part = cell.intersect(where)
                if not part.is_empty():
                    refined.append(part)
        cells = refined
        if len(cells) > MAX_PIECES:
            return None
    if len(cells) < 2:
        return None
    ordered = _in_order([_to_set(c, name, d.outer) for c in cells])
    if ordered is None:
        return None
    _check_partition(ordered, _to_set(scanned, name, d.outer))
    result = []
    for outer_piece in ordered:
        where = _to_params(outer_piece, name)
        where, ctx = poly.align_params(where, context)
        where = where.intersect(ctx)
        bases = {a: _expr(f, where) for a, f in funcs.items()}
        result.append(Piece(outer_piece, bases,
                            None if length is None else _expr(length, where)))
    whole = sum(expr_ops(o.base) for o in operands) + (expr_ops(d.length) if d.by_length
                                                        else 0)
    split = max(sum(expr_ops(b) for b in p.bases.values()) + expr_ops(p.length)
                for p in result)
    loops = (len(result) - 1) * (costs().for_setup + 2 * costs().scalar_op)
    if (whole - split) * box_volume(d.outer) <= loops:
        return None
    return result


def _array_operands(d: SimdDecision) -> list[Operand]:
    """The array operands whose bases a run gives, one per array (as emission does)."""
    seen: dict[str, Operand] = {}
    steps = [(d.dst, d.srcs), *((dst, srcs) for _, dst, srcs, _ in d.more)]
    for dst, srcs in steps:
        for o in (dst, *srcs):
            if o is not None and o.kind == "array" and o.array is not None:
                seen.setdefault(o.array, o)
    return list(seen.values())


def _expr(f: isl.PwAff, where: isl.Set) -> IExpr:
    """``f`` on the piece ``where`` as PE code, read back and checked to be ``f`` there."""
    f, where = poly.align_params(f, where)
    f = f.intersect_params(where).coalesce()
    e = pw_aff_expr(f, where)
    back = quasi_affine(e, [], where.get_space())
    back, f = poly.align_params(back, f)
    if not back.intersect_params(where).is_equal(f):
        raise CompilerBug(f"splitting a SIMD loop: the base {f} printed as {e!r} on {where}")
    return e


def _check_partition(pieces: Sequence[isl.Set], whole: isl.Set) -> None:
    union = pieces[0]
    for k, piece in enumerate(pieces[1:], 1):
        for other in pieces[:k]:
            if not piece.intersect(other).is_empty():
                raise CompilerBug(f"splitting a SIMD loop: pieces {other} and {piece} overlap")
        union = union.union(piece)
    if not union.is_equal(whole):
        raise CompilerBug(f"splitting a SIMD loop: the pieces do not make up {whole}")


def _to_params(s: isl.Set, name: str) -> isl.Set:
    """A one-dimensional set as a condition on a parameter ``name``."""
    nparam = s.dim(isl.dim_type.param)
    moved = s.move_dims(isl.dim_type.param, nparam, isl.dim_type.set, 0, 1)
    return moved.set_dim_name(isl.dim_type.param, nparam, name).params()


def _to_set(cell: isl.Set, name: str, like: isl.Set) -> isl.Set:
    """A condition on the parameter ``name`` as a set in the space of ``like``."""
    pos = cell.get_space().find_dim_by_name(isl.dim_type.param, name)
    moved = cell.move_dims(isl.dim_type.set, 0, isl.dim_type.param, pos, 1)
    moved = moved.set_tuple_name(like.get_tuple_name()).set_dim_name(
        isl.dim_type.set, 0, like.get_dim_name(isl.dim_type.set, 0) or name)
    moved, like = poly.align_params(moved, like)
    return like.intersect(moved)


def _in_order(sets: Sequence[isl.Set]) -> list[isl.Set] | None:
    """``sets`` sorted so that, for every parameter value, each lies wholly before the
    next; ``None`` where they interleave."""
    def before(a: isl.Set, b: isl.Set) -> bool:
        a, b = poly.align_params(a, b)
        return a.lex_ge_set(b).is_empty()

    ordered: list[isl.Set] = []
    for s in sets:
        k = 0
        while k < len(ordered) and before(ordered[k], s):
            k += 1
        ordered.insert(k, s)
    for i, a in enumerate(ordered):
        if not all(before(a, b) for b in ordered[i + 1:]):
            return None
    return ordered

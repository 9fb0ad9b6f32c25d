"""Checking generated loops with isl: the points a loop nest visits, read back from the PE
code, must be exactly the set it was generated for, each visited once.

isl's AST generator is trusted for speed, not for truth (with a multi-dimensional band
it once dropped points of a set with equalities, and the code summed too little). Every
loop nest :func:`codegen.islast.scan` returns is read back here: each integer expression
of PE code is quasi-affine, so the loops and guards become isl sets and the coordinates
of each visited statement a piecewise quasi-affine function of the loop variables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import islpy as isl

from dtg.errors import CompilerBug
from dtg.pe.ir import (
    Activate,
    BConst,
    BoolOp,
    Cmp,
    Cond,
    For,
    IBin,
    IConst,
    IExpr,
    If,
    INeg,
    ISel,
    IVar,
    Not,
    SetInt,
    Stmt,
)

VISIT = "\0visit"  # the marker statements scan() places where an instance runs


class ScanError(CompilerBug):
    """A generated loop nest does not visit exactly its set."""


def visit_marker(_: str, coords: Sequence[IExpr]) -> list[Stmt]:
    """Where an instance runs, one marker per coordinate, as statements, so that rewriting
    the loops (strided loops are renumbered) rewrites the coordinates too."""
    if not coords:
        return [Activate(VISIT)]
    return [SetInt(VISIT, "=", c) for c in coords]


def with_body(stmts: Sequence[Stmt], name: str, n: int,
              body: Callable[[str, Sequence[IExpr]], Sequence[Stmt]]) -> tuple[Stmt, ...]:
    """``stmts`` (a nest of :func:`visit_marker`s for instances of ``n`` coordinates)
    with each instance's markers replaced by ``body(name, coordinates)``: the code run
    is then the very nest :func:`check_scan` checked."""
    out: list[Stmt] = []
    coords: list[IExpr] = []
    for stmt in stmts:
        match stmt:
            case SetInt(marker, _, value) if marker == VISIT:
                coords.append(value)
                if len(coords) == n:
                    out.extend(body(name, coords))
                    coords = []
            case Activate(marker) if marker == VISIT:
                out.extend(body(name, []))
            case For(var, lo, hi, inner):
                out.append(For(var, lo, hi, with_body(inner, name, n, body)))
            case If(test, then, orelse):
                out.append(If(test, with_body(then, name, n, body),
                              with_body(orelse, name, n, body)))
            case _:
                out.append(stmt)
    return tuple(out)


def check_scan(stmts: Sequence[Stmt], instances: isl.Set, context: isl.Set) -> None:
    """Raise :class:`ScanError` unless ``stmts`` (with :func:`visit_marker` where an
    instance runs) visit every point of ``instances`` in ``context`` exactly once."""
    where = isl.Set.from_params(context.params())  # no loop variables yet
    seen: list[isl.Set] = []
    _walk(stmts, [], where, seen, instances)
    expected = instances.intersect_params(context)
    got = isl.Set.empty(expected.get_space())
    for part in seen:
        part, got = part.align_params(got.get_space()), got.align_params(part.get_space())
        if not got.intersect(part).is_empty():
            raise ScanError(f"a generated loop nest visits a point twice "
                            f"({got.intersect(part)}) while scanning {instances}")
        got = got.union(part)
    got, expected = got.align_params(expected.get_space()), expected.align_params(
        got.get_space())
    if not got.is_equal(expected):
        raise ScanError(f"a generated loop nest visits {got} instead of {expected}")


def _walk(stmts: Sequence[Stmt], names: list[str], where: isl.Set, seen: list[isl.Set],
          instances: isl.Set) -> None:
    n = int(instances.dim(isl.dim_type.set))
    coords: list[IExpr] = []
    for stmt in stmts:
        match stmt:
            case SetInt(name, _, value) if name == VISIT:
                coords.append(value)
                if len(coords) == n:
                    seen.append(_image(coords, names, where, instances))
                    coords = []
            case Activate(name) if name == VISIT:
                seen.append(_image([], names, where, instances))
            case For(var, lo, hi, body):
                inner = where.add_dims(isl.dim_type.set, 1).set_dim_name(
                    isl.dim_type.set, len(names), var)
                at = [*names, var]
                current = quasi_affine(IVar(var), at, inner.get_space())
                bounds = current.ge_set(quasi_affine(lo, names, where.get_space()).insert_dims(
                    isl.dim_type.in_, len(names), 1)).intersect(current.le_set(
                        quasi_affine(hi, names, where.get_space()).insert_dims(
                            isl.dim_type.in_, len(names), 1)))
                _walk(body, at, inner.intersect(bounds), seen, instances)
            case If(test, then, orelse):
                holds = _cond(test, names, where.get_space())
                _walk(then, names, where.intersect(holds), seen, instances)
                _walk(orelse, names, where.subtract(holds), seen, instances)
            case _:
                raise ScanError(f"unexpected statement {stmt!r} in a generated loop nest")
    if coords:
        raise ScanError("a generated loop nest gives an instance too few coordinates")


def _image(coords: Sequence[IExpr], names: list[str], where: isl.Set,
           instances: isl.Set) -> isl.Set:
    """The instances one visiting statement runs: ``coords`` over ``where``; the
    statement must run a different instance in each iteration."""
    target = instances.get_space()
    if not coords:
        if names:
            raise ScanError("a generated loop nest repeats the only instance of a "
                            "zero-dimensional set")
        return isl.Set.universe(target).intersect_params(where)
    space = where.get_space()
    values = isl.PwAffList.alloc(space.get_ctx(), len(coords))
    for expr in coords:
        values = values.add(quasi_affine(expr, names, space))
    rel = isl.Map.from_multi_pw_aff(isl.MultiPwAff.from_pw_aff_list(
        isl.Space.map_from_domain_and_range(space, target), values)).intersect_domain(where)
    if not rel.is_injective():
        raise ScanError(f"a generated loop nest runs one instance in several iterations "
                        f"while scanning {instances}")
    return rel.range()


def quasi_affine(e: IExpr, names: list[str], space: isl.Space) -> isl.PwAff:
    """The quasi-affine function ``e`` of the loop variables ``names`` (the set dimensions
    of ``space``) and the parameters: PE code read back as isl."""
    ls = isl.LocalSpace.from_space(space)
    match e:
        case IConst(value):
            return isl.PwAff.from_aff(isl.Aff.zero_on_domain(ls).set_constant_val(
                isl.Val.int_from_si(space.get_ctx(), value)))
        case IVar(name) if name in names:
            return isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set,
                                                            names.index(name)))
        case IVar(name):
            pos = space.find_dim_by_name(isl.dim_type.param, name)
            if pos < 0:
                raise ScanError(f"a generated loop nest uses '{name}', which is neither a loop "
                                "variable nor a parameter")
            return isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.param, pos))
        case INeg(operand):
            return quasi_affine(operand, names, space).neg()
        case ISel(test, then, orelse):
            holds = _cond(test, names, space)
            a, b = quasi_affine(then, names, space), quasi_affine(orelse, names, space)
            return a.intersect_domain(holds).union_add(b.subtract_domain(holds))
        case IBin(op, lhs, rhs):
            a, b = quasi_affine(lhs, names, space), quasi_affine(rhs, names, space)
            if op in ("//", "%"):
                if not isinstance(rhs, IConst) or rhs.value <= 0:
                    raise ScanError(f"'{op}' by a non-constant in a generated loop nest")
                k = isl.Val.int_from_si(space.get_ctx(), rhs.value)
                return a.scale_down_val(k).floor() if op == "//" else a.mod_val(k)
            return {"+": a.add, "-": a.sub, "*": a.mul, "min": a.min, "max": a.max}[op](b)
    raise ScanError(f"unexpected expression {e!r} in a generated loop nest")


def cond_set(c: Cond, space: isl.Space) -> isl.Set:
    """The parameter values (``PE_X``, ``PE_Y``, ...: the parameters of ``space``) where
    the PE-code condition ``c`` holds."""
    return _cond(c, [], space)


def _cond(c: Cond, names: list[str], space: isl.Space) -> isl.Set:
    match c:
        case BConst(value):
            universe = isl.Set.universe(space)
            return universe if value else isl.Set.empty(space)
        case Cmp(op, lhs, rhs):
            a, b = quasi_affine(lhs, names, space), quasi_affine(rhs, names, space)
            return {"==": a.eq_set, "!=": a.ne_set, "<": a.lt_set, "<=": a.le_set,
                    ">": a.gt_set, ">=": a.ge_set}[op](b)
        case BoolOp("&&", lhs, rhs):
            return _cond(lhs, names, space).intersect(_cond(rhs, names, space))
        case BoolOp(_, lhs, rhs):
            return _cond(lhs, names, space).union(_cond(rhs, names, space))
        case Not(operand):
            return _cond(operand, names, space).complement()
    raise ScanError(f"unexpected condition {c!r} in a generated loop nest")

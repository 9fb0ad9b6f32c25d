"""From isl to PE code: isl's AST generator builds loops, guards and index expressions.

isl knows best how to scan a parametric set or print a quasi-affine function as
code; this module turns its ``ast_expr``/``ast_node`` trees into the PE IR's integer
expressions, conditions and ``for``/``if`` statements.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Literal

import islpy as isl

from dtg.codegen.scancheck import ScanError, check_scan, visit_marker, with_body
from dtg.errors import CodegenError
from dtg.mapping import poly
from dtg.pe.ir import (
    BConst,
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
    ISel,
    IVar,
    Load,
    Not,
    Run,
    Send,
    SetInt,
    Stmt,
    Store,
)

_op = isl.ast_expr_op_type

_ARITH: dict[Any, str] = {_op.add: "+", _op.sub: "-", _op.mul: "*", _op.min: "min", _op.max: "max",
          _op.fdiv_q: "//", _op.pdiv_q: "//", _op.div: "//", _op.pdiv_r: "%", _op.zdiv_r: "%"}
_CMP: dict[Any, str] = {_op.eq: "==", _op.le: "<=", _op.lt: "<", _op.ge: ">=", _op.gt: ">"}
_BOOL: dict[Any, str] = {
    _op.and_: "&&", _op.and_then: "&&", _op.or_: "||", _op.or_else: "||"}  # type: ignore[attr-defined]


def _args(expr: isl.AstExpr) -> list[isl.AstExpr]:
    return [expr.op_get_arg(k) for k in range(expr.op_get_n_arg())]


def to_iexpr(expr: isl.AstExpr) -> IExpr:
    """An isl integer expression as a PE-code expression (zdiv_r only occurs in == 0 tests,
    where floor modulo is equivalent)."""
    kind = expr.get_type()
    if kind == isl.ast_expr_type.int:
        text = expr.int_get_val().to_str()
        if text is None:  # (isl gave up: an enclosing effort limit was reached)
            raise isl.Error("maximal number of operations exceeded (an integer's text)")
        return IConst(int(text))
    if kind == isl.ast_expr_type.id:
        return IVar(expr.id_get_id().get_name())
    op = expr.op_get_type()
    if op in _CMP or op in _BOOL:  # a truth value used as a number
        return ISel(to_cond(expr), IConst(1), IConst(0))
    if op in (_op.cond, _op.select):
        test, then, orelse = _args(expr)
        return ISel(to_cond(test), to_iexpr(then), to_iexpr(orelse))
    args = [to_iexpr(a) for a in _args(expr)]
    if op == _op.minus:
        return INeg(args[0])
    if op in _ARITH:
        result = args[0]
        for arg in args[1:]:
            result = IBin(_ARITH[op], result, arg)  # type: ignore[arg-type]
        return result
    raise CodegenError(f"isl produced the expression '{expr.to_C_str()}', which PE code cannot "
                       "express (conditional or non-arithmetic)")


def to_cond(expr: isl.AstExpr) -> Cond:
    op = expr.op_get_type() if expr.get_type() == isl.ast_expr_type.op else None
    if op in _CMP:
        lhs, rhs = _args(expr)
        return Cmp(_CMP[op], to_iexpr(lhs), to_iexpr(rhs))  # type: ignore[arg-type]
    if op in _BOOL:
        args = [to_cond(a) for a in _args(expr)]
        result = args[0]
        for arg in args[1:]:
            result = BoolOp(_BOOL[op], result, arg)  # type: ignore[arg-type]
        return result
    if expr.get_type() == isl.ast_expr_type.int:
        return BConst(expr.int_get_val().to_python() != 0)
    raise CodegenError(f"isl produced the condition '{expr.to_C_str()}', which PE code cannot "
                       "express")


def build(context: isl.Set) -> isl.AstBuild:
    return isl.AstBuild.from_context(context)


def condition_of(params: isl.Set, context: isl.Set) -> Cond | None:
    """A condition on the parameters equivalent to ``params`` where ``context`` holds;
    ``None`` when it always holds there."""
    params, context = params.align_params(context.get_space()), context.align_params(
        params.get_space())
    if context.is_subset(params):
        return None
    if params.intersect(context).is_empty():
        return BConst(False)
    return to_cond(build(context).expr_from_set(params.gist(context).coalesce()))


def pw_aff_expr(value: isl.PwAff, context: isl.Set) -> IExpr:
    """A quasi-affine function of the parameters as a PE-code expression."""
    value, context = value.align_params(context.get_space()), context.align_params(
        value.get_space())
    # (nicer forms within a small effort each: isl can take minutes on some)
    single = poly.within_effort(NICER_FORM_EFFORT, lambda: _as_single(value, context))
    if single is not None:
        return single
    for candidate in (value, value.gist_params(context).coalesce()):
        extreme = poly.within_effort(NICER_FORM_EFFORT,
                                     lambda c=candidate: _as_extreme(c, context))  # type: ignore[misc]
        if extreme is not None:
            return extreme
    return normalize(to_iexpr(build(context).expr_from_pw_aff(
        value.gist_params(context).coalesce())))


_MAX_EXTREME_PIECES = 6
NICER_FORM_EFFORT = 20_000  # isl operations for a max/min or single-piece form
_MAX_SINGLE_PIECES = 12


def _as_single(value: isl.PwAff, context: isl.Set) -> IExpr | None:
    """A piecewise function whose pieces all agree with one of them (isl keeps pieces
    with the same value apart when their domains do not form a convex set) as that
    piece's expression, without a conditional."""
    if not 2 <= value.n_piece() <= _MAX_SINGLE_PIECES:
        return None
    pieces = _pieces(value)
    for _, aff in pieces:
        if all(_never(where, other, aff, "ne", context) for where, other in pieces):
            return normalize(to_iexpr(build(context).expr_from_pw_aff(isl.PwAff.from_aff(aff))))
    return None


def _pieces(value: isl.PwAff) -> list[tuple[isl.Set, isl.Aff]]:
    found: list[tuple[isl.Set, isl.Aff]] = []
    value.foreach_piece(lambda where, aff: found.append((where, aff)))
    return found


def _never(where: isl.Set, a: isl.Aff, b: isl.Aff, relation: str, context: isl.Set) -> bool:
    """Whether ``a relation b`` holds at no point of ``where`` within ``context``.

    Tested on sets rather than by comparing piecewise functions (``max``, ``is_equal``):
    cheaper, and isl's piecewise comparisons have crashed (a segmentation fault) when
    they ran out of operations under :func:`mapping.poly.within_effort`."""
    lhs = isl.PwAff.from_aff(a).intersect_domain(where)
    rhs = isl.PwAff.from_aff(b)
    found = lhs.lt_set(rhs) if relation == "lt" else lhs.gt_set(rhs) if relation == "gt" \
        else lhs.ne_set(rhs)
    return found.intersect_params(context).is_empty()


def _as_extreme(value: isl.PwAff, context: isl.Set) -> IExpr | None:
    """A piecewise function that is the maximum (or minimum) of its pieces, as ``max(...)``
    (``min(...)``): PE code has those, where isl would print a conditional expression.
    It is the maximum when on each piece's domain (within ``context``) its expression is
    at least every other piece's."""
    if not 2 <= value.n_piece() <= _MAX_EXTREME_PIECES:
        return None
    pieces = _pieces(value)
    ways: tuple[tuple[Literal["max", "min"], str], ...] = (("max", "lt"), ("min", "gt"))
    for op, beaten in ways:
        if all(_never(where, aff, other, beaten, context)
               for k, (where, aff) in enumerate(pieces)
               for j, (_, other) in enumerate(pieces) if j != k):
            exprs = [normalize(to_iexpr(build(context).expr_from_pw_aff(
                isl.PwAff.from_aff(a)))) for _, a in pieces]
            result = exprs[0]
            for e in exprs[1:]:
                result = IBin(op, result, e)
            return result
    return None


def aff_expr(value: isl.Aff, context: isl.Set) -> IExpr:
    return pw_aff_expr(isl.PwAff.from_aff(value), context)


UserBody = Callable[[str, Sequence[IExpr]], Sequence[Stmt]]


def scan(instances: isl.Set, context: isl.Set, body: UserBody) -> tuple[Stmt, ...]:
    """Loops visiting the points of ``instances`` in lexicographic order.

    ``body(statement, coordinates)`` gives the statements run for one instance, with its
    coordinates as PE-code expressions of the loop variables and the parameters.

    isl's AST generator sometimes drops points of sets with equalities (which ones
    depends on the shape of the schedule), so every loop nest is read back and checked
    (:mod:`codegen.scancheck`); when one is wrong, the next way of generating it is
    tried, and when none is right the compiler stops with an internal error.
    """
    instances, context = instances.align_params(context.get_space()), context.align_params(
        instances.get_space())
    if instances.intersect_params(context).is_empty():
        return ()
    failure: ScanError | None = None
    name = instances.get_tuple_name()
    n = int(instances.dim(isl.dim_type.set))
    for generate in (_scan_nested, _scan_compressed, _scan_one_band, _scan_bounded):
        nest = generate(instances, context, visit_marker)
        try:
            check_scan(nest, instances, context)
        except ScanError as err:
            failure = failure or err
            continue
        # the checked nest itself: isl may not generate the same AST a second time
        return with_body(nest, name, n, body)
    assert failure is not None
    raise failure


def _scan_nested(instances: isl.Set, context: isl.Set, body: UserBody) -> tuple[Stmt, ...]:
    return _node(build(context).node_from_schedule(_nested_bands(instances)), body)


def _scan_one_band(instances: isl.Set, context: isl.Set, body: UserBody
                   ) -> tuple[Stmt, ...]:
    identity = isl.Map.identity(instances.get_space().map_from_set()).intersect_domain(instances)
    schedule = isl.UnionMap.from_map(identity.reset_tuple_id(isl.dim_type.out))
    return _node(build(context).node_from_schedule_map(schedule), body)


def _scan_compressed(instances: isl.Set, context: isl.Set, body: UserBody
                     ) -> tuple[Stmt, ...]:
    """Scan the variable compression of ``instances`` (no equalities left for isl to
    get wrong) and give ``body`` the original coordinates."""
    comp = poly.compress(instances)
    names = [f"z{d}" for d in range(comp.dim)]
    inner = comp.compressed
    for d, name in enumerate(names):
        inner = inner.set_dim_name(isl.dim_type.set, d, name)
    originals = [aff_in_vars(comp.map.get_at(d), names, context)
                 for d in range(comp.map.dim(isl.dim_type.out))]

    def original(name: str, coords: Sequence[IExpr]) -> Sequence[Stmt]:
        env = dict(zip(names, coords, strict=True))
        return body(name, [substitute(e, env) for e in originals])

    return _node(build(context).node_from_schedule(_nested_bands(inner)), original)


def _scan_bounded(instances: isl.Set, context: isl.Set, body: UserBody
                  ) -> tuple[Stmt, ...]:
    """Loops of our own, for sets isl's AST generator gets wrong: dimension by dimension,
    from the least to the greatest value the projection allows given the outer loop
    variables, each level guarded by membership in that projection. Slower code, but
    built from isl's extremes and membership conditions only."""
    n = int(instances.dim(isl.dim_type.set))
    names = [f"c{d}" for d in range(n)]

    def level(d: int) -> tuple[Stmt, ...]:
        if d == n:
            return tuple(body(_tuple_name(instances), [IVar(v) for v in names]))
        prefix = instances.project_out(isl.dim_type.set, d + 1, n - d - 1)
        outer = _dims_to_params(prefix, names[:d])  # one dimension left: this loop's
        where = context.align_params(outer.get_space())
        loop = For(names[d], pw_aff_expr(outer.dim_min(0), where),
                   pw_aff_expr(outer.dim_max(0), where), level(d + 1))
        inside = _dims_to_params(prefix, names[:d + 1]).params()
        guard = condition_of(inside, context.align_params(inside.get_space()))
        return (loop,) if guard is None else (For(loop.var, loop.lo, loop.hi, (
            If(guard, loop.body),)),)

    outer_all = instances.params()
    guard = condition_of(outer_all, context)
    nest = level(0)
    return nest if guard is None else (If(guard, nest),)


def _tuple_name(s: isl.Set) -> str:
    return s.get_tuple_name() if s.has_tuple_name() else ""


def _dims_to_params(s: isl.Set, names: Sequence[str]) -> isl.Set:
    """Move the first ``len(names)`` set dimensions to parameters called ``names``."""
    k = len(names)
    if not k:
        return s
    nparam = s.dim(isl.dim_type.param)
    moved = s.move_dims(isl.dim_type.param, nparam, isl.dim_type.set, 0, k)
    for d, name in enumerate(names):
        moved = moved.set_dim_name(isl.dim_type.param, nparam + d, name)
    return moved


def aff_in_vars(aff: isl.Aff, names: Sequence[str], context: isl.Set) -> IExpr:
    """An affine function of set dimensions as an expression of variables ``names``."""
    n = aff.dim(isl.dim_type.in_)
    if n:
        ma = isl.MultiAff.from_aff(aff)
        aff = ma.bind_domain(poly.multi_id(ma.get_domain_space(), list(names)[:n])).get_at(0)
    pa = isl.PwAff.from_aff(aff)
    return pw_aff_expr(pa, context.align_params(pa.get_space()))


def _nested_bands(instances: isl.Set) -> isl.Schedule:
    """The lexicographic schedule of ``instances`` as one band per dimension. (A single
    multi-dimensional band makes isl 0.27's AST generator treat some loops over sets with
    equalities as degenerate and drop points: ``{ S[a, b, q] : b + 2q = index - 5a, ...}``
    visits one of the two points with ``index = 2``.)"""
    n = int(instances.dim(isl.dim_type.set))
    identity = isl.Map.identity(instances.get_space().map_from_set()).intersect_domain(
        instances)
    schedule = isl.Schedule.from_domain(isl.UnionSet.from_set(instances))
    for d in reversed(range(n)):
        one = identity.project_out(isl.dim_type.out, d + 1, n - d - 1).project_out(
            isl.dim_type.out, 0, d).reset_tuple_id(isl.dim_type.out)
        schedule = schedule.insert_partial_schedule(
            isl.MultiUnionPwAff.from_union_map(isl.UnionMap.from_map(one)))
    return schedule


def _node(node: isl.AstNode, body: UserBody) -> tuple[Stmt, ...]:
    kind = node.get_type()
    if kind == isl.ast_node_type.block:
        children = node.block_get_children()
        result: list[Stmt] = []
        for k in range(children.n_ast_node()):
            result.extend(_node(children.get_at(k), body))
        return tuple(result)
    if kind == isl.ast_node_type.if_:  # type: ignore[attr-defined]
        then = _node(node.if_get_then_node(), body)
        orelse = _node(node.if_get_else_node(), body) if node.if_has_else_node() else ()
        return (If(to_cond(node.if_get_cond()), then, orelse),)
    if kind == isl.ast_node_type.for_:  # type: ignore[attr-defined]
        return (_for(node, body),)
    if kind == isl.ast_node_type.user:
        call = node.user_get_expr()
        args = _args(call)
        name = args[0].id_get_id().get_name()
        return tuple(body(name, [to_iexpr(a) for a in args[1:]]))
    if kind == isl.ast_node_type.mark:
        return _node(node.mark_get_node(), body)
    raise CodegenError(f"unexpected isl AST node {node.to_C_str()}")


def _for(node: isl.AstNode, body: UserBody) -> For:
    var = node.for_get_iterator().id_get_id().get_name()
    lo = to_iexpr(node.for_get_init())
    step = node.for_get_inc().int_get_val().to_python()
    hi = _upper_bound(node.for_get_cond(), var)
    inner = _node(node.for_get_body(), body)
    if step == 1:
        return For(var, lo, hi, inner)
    # A strided loop: iterate over t with var = lo + step * t.
    t = f"{var}_t"
    value = IBin("+", lo, IBin("*", IConst(step), IVar(t)))
    return For(t, IConst(0), IBin("//", IBin("-", hi, lo), IConst(step)),
               substitute_stmts(inner, {var: value}))


def _upper_bound(cond: isl.AstExpr, var: str) -> IExpr:
    op = cond.op_get_type()
    if op in (_op.and_, _op.and_then):  # type: ignore[attr-defined]
        bounds = [_upper_bound(a, var) for a in _args(cond)]
        result = bounds[0]
        for b in bounds[1:]:
            result = IBin("min", result, b)
        return result
    lhs, rhs = _args(cond)
    if lhs.get_type() != isl.ast_expr_type.id or lhs.id_get_id().get_name() != var:
        raise CodegenError(f"unexpected loop condition {cond.to_C_str()}")
    if op == _op.le:
        return to_iexpr(rhs)
    if op == _op.lt:
        return IBin("-", to_iexpr(rhs), IConst(1))
    raise CodegenError(f"unexpected loop condition {cond.to_C_str()}")


# ------------------------------------------------------------------- substitution


def substitute(e: IExpr, env: dict[str, IExpr]) -> IExpr:
    """Replace variables (one pass: replacements are not substituted again)."""
    return normalize(_substitute(e, env)) if env else e


def _substitute(e: IExpr, env: dict[str, IExpr]) -> IExpr:
    match e:
        case IVar(name) if name in env:
            return env[name]
        case IBin(op, lhs, rhs):
            return IBin(op, _substitute(lhs, env), _substitute(rhs, env))
        case INeg(operand):
            return INeg(_substitute(operand, env))
        case ISel(test, then, orelse):
            return ISel(substitute_cond(test, env), _substitute(then, env),
                        _substitute(orelse, env))
    return e


def substitute_cond(c: Cond, env: dict[str, IExpr]) -> Cond:
    match c:
        case Cmp(op, lhs, rhs):
            return Cmp(op, substitute(lhs, env), substitute(rhs, env))
        case BoolOp(op, lhs, rhs):
            return BoolOp(op, substitute_cond(lhs, env), substitute_cond(rhs, env))
        case Not(operand):
            return Not(substitute_cond(operand, env))
    return c


def substitute_fexpr(e: FExpr, env: dict[str, IExpr]) -> FExpr:
    match e:
        case Load(array, index):
            return Load(array, tuple(substitute(i, env) for i in index))
        case FBin(op, lhs, rhs):
            return FBin(op, substitute_fexpr(lhs, env), substitute_fexpr(rhs, env))
        case FNeg(operand):
            return FNeg(substitute_fexpr(operand, env))
    return e


def substitute_stmt(s: Stmt, env: dict[str, IExpr]) -> Stmt:
    match s:
        case Store(target, op, value):
            load = substitute_fexpr(target, env)
            assert isinstance(load, Load)
            return Store(load, op, substitute_fexpr(value, env))
        case SetInt(name, op, value):
            return SetInt(name, op, substitute(value, env))
        case For(var, lo, hi, body):
            inner = {k: v for k, v in env.items() if k != var}
            return For(var, substitute(lo, env), substitute(hi, env),
                       substitute_stmts(body, inner))
        case If(c, then, orelse, static):
            return If(substitute_cond(c, env), substitute_stmts(then, env),
                      substitute_stmts(orelse, env), static)
        case Send(color, value, index):
            return Send(color, substitute_fexpr(value, env),
                        None if index is None else substitute(index, env))
        case Run(_, bases, scalar, variant, length):
            return replace(s, bases=tuple((a, substitute(b, env)) for a, b in bases),
                           scalar=None if scalar is None else substitute_fexpr(scalar, env),
                           variant=None if variant is None else substitute(variant, env),
                           length=None if length is None else substitute(length, env))
    return s


def substitute_stmts(stmts: tuple[Stmt, ...], env: dict[str, IExpr]) -> tuple[Stmt, ...]:
    return tuple(substitute_stmt(s, env) for s in stmts)


def normalize(e: IExpr) -> IExpr:
    """Collect the terms of sums (``-4 * PE_X + (index + 4 * PE_X)`` is ``index``), treating
    non-affine parts (``g % 8``, ``min(a, b)``) as atoms, so that substituted expressions
    read as a person would write them."""
    coeffs, constant = _terms(e)
    return linear_sum(coeffs, constant)


def linear_terms(e: IExpr) -> tuple[dict[IExpr, int], int]:
    """``e`` as ``sum(coeff * atom) + constant`` (atoms: variables and normalized
    non-affine subexpressions)."""
    return _terms(e)


def linear_sum(coeffs: dict[IExpr, int], constant: int) -> IExpr:
    """``sum(coeff * atom) + constant`` as an expression."""
    result: IExpr | None = None
    for atom, coeff in coeffs.items():
        if coeff == 0:
            continue
        term = atom if abs(coeff) == 1 else IBin("*", IConst(abs(coeff)), atom)
        if result is None:
            result = term if coeff > 0 else INeg(term)
        else:
            result = IBin("+" if coeff > 0 else "-", result, term)
    if result is None:
        return IConst(constant)
    if constant:
        result = IBin("+" if constant > 0 else "-", result, IConst(abs(constant)))
    return result


def _terms(e: IExpr) -> tuple[dict[IExpr, int], int]:
    """``e`` as ``sum(coeff * atom) + constant``; atoms are variables or normalized
    non-affine subexpressions."""
    match e:
        case IConst(v):
            return {}, v
        case IVar():
            return {e: 1}, 0
        case INeg(operand):
            inner, c = _terms(operand)
            return {k: -v for k, v in inner.items()}, -c
        case IBin("+" | "-" as op, lhs, rhs):
            (a, ca), (b, cb) = _terms(lhs), _terms(rhs)
            sign = 1 if op == "+" else -1
            coeffs = dict(a)
            for k, v in b.items():
                coeffs[k] = coeffs.get(k, 0) + sign * v
            return coeffs, ca + sign * cb
        case IBin("*", lhs, rhs):
            (a, ca), (b, cb) = _terms(lhs), _terms(rhs)
            if not a:
                return {k: ca * v for k, v in b.items()}, ca * cb
            if not b:
                return {k: cb * v for k, v in a.items()}, ca * cb
        case IBin(op, lhs, rhs):
            atom = IBin(op, normalize(lhs), normalize(rhs))
            if isinstance(atom.lhs, IConst) and isinstance(atom.rhs, IConst) and \
                    atom.rhs.value > 0 and op in ("//", "%"):
                num, den = atom.lhs.value, atom.rhs.value
                return {}, num // den if op == "//" else num % den
            return {atom: 1}, 0
    return {e: 1}, 0

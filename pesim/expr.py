"""Integer expressions and conditions of PE code: names, costs and compiled evaluators.

The simulator evaluates every expression many times on many PEs, so each one is turned
once into a Python closure over an environment dict (``PE_X``, ``PE_Y``, the program's
``int`` variables, loop variables, ``index``). ``//`` and ``%`` are Python's, which
round towards minus infinity as isl does.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping

from dtg.codegen.peir import BConst, BoolOp, Cmp, Cond, IBin, IConst, IExpr, INeg, ISel, IVar, Not

Env = dict[str, int]
IntFn = Callable[[Env], int]
BoolFn = Callable[[Env], bool]

_CMP: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


def iexpr_names(e: IExpr) -> Iterator[str]:
    match e:
        case IVar(name):
            yield name
        case IBin(_, lhs, rhs):
            yield from iexpr_names(lhs)
            yield from iexpr_names(rhs)
        case INeg(operand):
            yield from iexpr_names(operand)
        case ISel(test, then, orelse):
            yield from cond_names(test)
            yield from iexpr_names(then)
            yield from iexpr_names(orelse)


def cond_names(c: Cond) -> Iterator[str]:
    match c:
        case Cmp(_, lhs, rhs):
            yield from iexpr_names(lhs)
            yield from iexpr_names(rhs)
        case BoolOp(_, lhs, rhs):
            yield from cond_names(lhs)
            yield from cond_names(rhs)
        case Not(operand):
            yield from cond_names(operand)


def iexpr_divisions(e: IExpr) -> Iterator[IBin]:
    """Every ``//`` and ``%`` (their right-hand side must be a positive constant)."""
    match e:
        case IBin(op, lhs, rhs):
            if op in ("//", "%"):
                yield e
            yield from iexpr_divisions(lhs)
            yield from iexpr_divisions(rhs)
        case INeg(operand):
            yield from iexpr_divisions(operand)
        case ISel(test, then, orelse):
            for part in (*cond_iexprs(test), then, orelse):
                yield from iexpr_divisions(part)


def cond_iexprs(c: Cond) -> Iterator[IExpr]:
    match c:
        case Cmp(_, lhs, rhs):
            yield lhs
            yield rhs
        case BoolOp(_, lhs, rhs):
            yield from cond_iexprs(lhs)
            yield from cond_iexprs(rhs)
        case Not(operand):
            yield from cond_iexprs(operand)


def iexpr_ops(e: IExpr) -> int:
    """Scalar operations to evaluate ``e`` (constants and variables are free)."""
    match e:
        case IBin(_, lhs, rhs):
            return 1 + iexpr_ops(lhs) + iexpr_ops(rhs)
        case INeg(operand):
            return 1 + iexpr_ops(operand)
        case ISel(test, then, orelse):
            return 1 + cond_ops(test) + max(iexpr_ops(then), iexpr_ops(orelse))
    return 0


def cond_ops(c: Cond) -> int:
    """Comparisons and logical operations, each one scalar operation (no short-circuit cost)."""
    match c:
        case Cmp(_, lhs, rhs):
            return 1 + iexpr_ops(lhs) + iexpr_ops(rhs)
        case BoolOp(_, lhs, rhs):
            return 1 + cond_ops(lhs) + cond_ops(rhs)
        case Not(operand):
            return 1 + cond_ops(operand)
    return 0


def compile_iexpr(e: IExpr) -> IntFn:
    match e:
        case IConst(value):
            return lambda env: value
        case IVar(name):
            return lambda env: env[name]
        case INeg(operand):
            inner = compile_iexpr(operand)
            return lambda env: -inner(env)
        case ISel(test, then, orelse):
            p, a, b = compile_cond(test), compile_iexpr(then), compile_iexpr(orelse)
            return lambda env: a(env) if p(env) else b(env)
        case IBin(op, lhs, rhs):
            a, b = compile_iexpr(lhs), compile_iexpr(rhs)
            if isinstance(rhs, IConst):  # the common case: a constant right-hand side
                k = rhs.value
                return _const_rhs(op, a, k)
            return _binary(op, a, b)
    raise TypeError(e)


def _const_rhs(op: str, a: IntFn, k: int) -> IntFn:
    match op:
        case "+":
            return lambda env: a(env) + k
        case "-":
            return lambda env: a(env) - k
        case "*":
            return lambda env: a(env) * k
        case "//":
            return lambda env: a(env) // k
        case "%":
            return lambda env: a(env) % k
        case "min":
            return lambda env: min(a(env), k)
        case "max":
            return lambda env: max(a(env), k)
    raise TypeError(op)


def _binary(op: str, a: IntFn, b: IntFn) -> IntFn:
    match op:
        case "+":
            return lambda env: a(env) + b(env)
        case "-":
            return lambda env: a(env) - b(env)
        case "*":
            return lambda env: a(env) * b(env)
        case "//":
            return lambda env: a(env) // b(env)
        case "%":
            return lambda env: a(env) % b(env)
        case "min":
            return lambda env: min(a(env), b(env))
        case "max":
            return lambda env: max(a(env), b(env))
    raise TypeError(op)


def compile_cond(c: Cond) -> BoolFn:
    match c:
        case BConst(value):
            return lambda env: value
        case Cmp(op, lhs, rhs):
            a, b, test = compile_iexpr(lhs), compile_iexpr(rhs), _CMP[op]
            return lambda env: test(a(env), b(env))
        case BoolOp("&&", lhs, rhs):
            p, q = compile_cond(lhs), compile_cond(rhs)
            return lambda env: p(env) and q(env)
        case BoolOp("||", lhs, rhs):
            p, q = compile_cond(lhs), compile_cond(rhs)
            return lambda env: p(env) or q(env)
        case Not(operand):
            p = compile_cond(operand)
            return lambda env: not p(env)
    raise TypeError(c)


def evaluate(e: IExpr, env: Mapping[str, int]) -> int:
    return compile_iexpr(e)(dict(env))


def holds(c: Cond, env: Mapping[str, int]) -> bool:
    return compile_cond(c)(dict(env))

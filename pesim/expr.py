"""Integer expressions and conditions of PE code compiled to evaluators (their names
and costs are :mod:`pe.walk`).

The simulator evaluates every expression many times on many PEs, so each one is turned
once into a Python closure over an environment dict (``PE_X``, ``PE_Y``, the program's
``int`` variables, loop variables, ``index``). ``//`` and ``%`` are Python's, which
round towards minus infinity as isl does.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping

from dtg.pe.ir import BConst, BoolOp, Cmp, Cond, IBin, IConst, IExpr, INeg, ISel, IVar, Not

Env = dict[str, int]
IntFn = Callable[[Env], int]
BoolFn = Callable[[Env], bool]

_CMP: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


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

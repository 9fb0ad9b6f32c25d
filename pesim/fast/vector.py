"""Integer expressions and conditions of PE code evaluated for many PEs at once: the
same values as :mod:`pesim.expr`'s closures, over numpy arrays of PE coordinates (one
entry per PE), for the compiled engine's set-up in arrays."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dtg.codegen.peir import BConst, BoolOp, Cmp, Cond, IBin, IConst, IExpr, INeg, ISel, IVar, Not

Values = Mapping[str, np.ndarray]

_BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "min": np.minimum,
           "max": np.maximum, "//": np.floor_divide, "%": np.mod}  # (floor: as Python's)
_CMP = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
        ">": np.greater, ">=": np.greater_equal}


def ivalues(e: IExpr, env: Values, n: int) -> np.ndarray:
    """``e`` for each of ``n`` PEs (int64)."""
    match e:
        case IConst(value):
            return np.full(n, value, dtype=np.int64)
        case IVar(name):
            return np.broadcast_to(np.asarray(env[name], dtype=np.int64), (n,))
        case INeg(operand):
            return -ivalues(operand, env, n)
        case ISel(test, then, orelse):
            return np.where(cvalues(test, env, n), ivalues(then, env, n),
                            ivalues(orelse, env, n))
        case IBin(op, lhs, rhs):
            return _BINARY[op](ivalues(lhs, env, n), ivalues(rhs, env, n))
    raise TypeError(e)


def cvalues(c: Cond, env: Values, n: int) -> np.ndarray:
    """``c`` for each of ``n`` PEs (bool)."""
    match c:
        case BConst(value):
            return np.full(n, bool(value))
        case Cmp(op, lhs, rhs):
            return _CMP[op](ivalues(lhs, env, n), ivalues(rhs, env, n))
        case BoolOp("&&", lhs, rhs):
            return cvalues(lhs, env, n) & cvalues(rhs, env, n)
        case BoolOp("||", lhs, rhs):
            return cvalues(lhs, env, n) | cvalues(rhs, env, n)
        case Not(operand):
            return ~cvalues(operand, env, n)
    raise TypeError(c)


__all__ = ["cvalues", "ivalues"]

"""Integer expressions and conditions of PE code evaluated for many PEs at once: the
same values as :mod:`pesim.expr`'s closures, over numpy arrays of PE coordinates (one
entry per PE), for the compiled engine's set-up in arrays and for checks over all PEs
of a module."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dtg.pe.ir import (
    Array,
    BConst,
    BoolOp,
    Cmp,
    Cond,
    IBin,
    IConst,
    IExpr,
    INeg,
    ISel,
    IVar,
    Not,
)
from dtg.pesim.isltext import Halfspaces, check_array_set

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


def in_set(halfspaces: Halfspaces, env: Values, where: list[np.ndarray]) -> np.ndarray:
    """Which elements (global indices ``where``, arrays broadcast against one another and
    against PEs along the first axis) lie in a load or store set given by its
    constraints, on each PE (``env``: ``PE_X`` and ``PE_Y`` per PE)."""
    shape = np.broadcast_shapes(*(w.shape for w in where))
    count = shape[0]
    axes = (count,) + (1,) * (len(shape) - 1)
    x = np.broadcast_to(np.asarray(env["PE_X"]), (count,)).reshape(axes)
    y = np.broadcast_to(np.asarray(env["PE_Y"]), (count,)).reshape(axes)

    def value(row: list[int]) -> np.ndarray:
        total = row[0] * x + row[1] * y + row[-1]
        for a, w in zip(row[2:-1], where, strict=True):
            total = total + a * w
        return np.broadcast_to(total, shape)

    inside = np.ones(shape, dtype=bool)
    for row in halfspaces.inequality_rows:
        inside &= value(row) >= 0
    for row in halfspaces.equality_rows:
        inside &= value(row) == 0
    return inside


def halfspaces(text: str, tensor: str, rank: int) -> Halfspaces | None:
    """The constraints of a load or store set (None: a union, or with divisions)."""
    return Halfspaces.of(check_array_set(text, tensor, rank, "an array's set", None))


def box_elements(a: Array, tensor: str, text: str | None, shape: tuple[int, ...],
                 env: Values, count: int) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """The elements array ``a`` loads or stores on each of ``count`` PEs: its box at its
    offset, clipped to a tensor of ``shape`` and filtered by the set ``text`` when there
    is one. Returns whether each (PE, local index) is one ([count, *a.shape]) and its
    global index along each dimension (arrays broadcasting against that); None when the
    set is not one conjunction of affine constraints."""
    rank = len(a.shape)
    offset = ([ivalues(e, env, count) for e in a.offset]
              or [np.zeros(count, dtype=np.int64)] * rank)
    valid = np.ones((count, *a.shape), dtype=bool)
    where = []
    for d, (m, n) in enumerate(zip(a.shape, shape, strict=True)):
        along = [1] * (rank + 1)
        along[d + 1] = m
        g = offset[d].reshape([count] + [1] * rank) + np.arange(m).reshape(along)
        valid &= (g >= 0) & (g < n)
        where.append(g)
    if text is not None:
        constraints = halfspaces(text, tensor, rank)
        if constraints is None:
            return None
        valid &= in_set(constraints, env, where)
    return valid, where


__all__ = ["box_elements", "cvalues", "halfspaces", "in_set", "ivalues"]

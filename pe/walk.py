"""Walks over the integer expressions and conditions of PE code: the names they read,
their divisions and their cost in scalar operations (what the compiler and the
simulator both ask of an expression)."""

from __future__ import annotations

from collections.abc import Iterator

from dtg.pe.ir import BoolOp, Cmp, Cond, IBin, IExpr, INeg, ISel, IVar, Not


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


__all__ = ["cond_iexprs", "cond_names", "cond_ops", "iexpr_divisions", "iexpr_names",
           "iexpr_ops"]

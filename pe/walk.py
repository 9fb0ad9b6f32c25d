"""Walks over the integer expressions and conditions of PE code: the names they read,
their divisions and their cost in scalar operations (what the compiler and the
simulator both ask of an expression)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from dtg.pe.ir import (
    BoolOp,
    Cmp,
    Cond,
    FBin,
    FExpr,
    FNeg,
    For,
    IBin,
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


def stmt_names(stmts: Sequence[Stmt]) -> set[str]:
    """The integer names statements read (indices, conditions, bounds, bases)."""
    found: set[str] = set()

    def fnames(e: FExpr) -> None:
        match e:
            case Load(_, index):
                for i in index:
                    found.update(iexpr_names(i))
            case FNeg(operand):
                fnames(operand)
            case FBin(_, lhs, rhs):
                fnames(lhs)
                fnames(rhs)

    for s in stmts:
        match s:
            case Store(target, _, value):
                fnames(target)
                fnames(value)
            case SetInt(_, _, value):
                found.update(iexpr_names(value))
            case For(_, lo, hi, body):
                found.update(iexpr_names(lo))
                found.update(iexpr_names(hi))
                found.update(stmt_names(body))
            case If(cond, then, orelse):
                found.update(cond_names(cond))
                found.update(stmt_names(then))
                found.update(stmt_names(orelse))
            case Send(_, value, index):
                fnames(value)
                if index is not None:
                    found.update(iexpr_names(index))
            case Run(_, bases, scalar, variant, length):
                for _, b in bases:
                    found.update(iexpr_names(b))
                for e in (variant, length):
                    if e is not None:
                        found.update(iexpr_names(e))
                if scalar is not None:
                    fnames(scalar)
    return found


def address_ops(ref: Load, index_ops: Callable[[IExpr], int] = iexpr_ops) -> int:
    """Scalar operations to address an array element: its index arithmetic (by
    ``index_ops``) and one multiply-add per dimension beyond the first."""
    return sum(index_ops(e) for e in ref.index) + len(ref.index) - 1


def fexpr_ops(e: FExpr, index_ops: Callable[[IExpr], int] = iexpr_ops) -> int:
    """Scalar operations to evaluate ``e``: each load with its address, each operator
    (a ``recv`` is charged where it waits, not here)."""
    match e:
        case Load():
            return 1 + address_ops(e, index_ops)
        case FNeg(operand):
            return 1 + fexpr_ops(operand, index_ops)
        case FBin(_, lhs, rhs):
            return 1 + fexpr_ops(lhs, index_ops) + fexpr_ops(rhs, index_ops)
    return 0


def store_ops(s: Store, index_ops: Callable[[IExpr], int] = iexpr_ops) -> int:
    """Scalar operations of a store: the value, the address, and the store (``+=`` and
    ``max=``: load, operation and store)."""
    return (address_ops(s.target, index_ops) + (1 if s.op == "=" else 3)
            + fexpr_ops(s.value, index_ops))


__all__ = ["address_ops", "cond_iexprs", "cond_names", "cond_ops", "fexpr_ops",
           "iexpr_divisions", "iexpr_names", "iexpr_ops", "stmt_names", "store_ops"]

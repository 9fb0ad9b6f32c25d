"""Small builders of PE-code statements shared by the emitters."""

from __future__ import annotations

from collections.abc import Sequence

import islpy as isl

from dtg.codegen.islast import normalize
from dtg.mapping import poly
from dtg.pe.ir import BConst, BoolOp, Cond, IBin, IConst, IExpr, If, Stmt


def and_cond(a: Cond | None, b: Cond | None) -> Cond | None:
    """``a && b``, where None (and ``true``) is no condition."""
    a, b = (None if c == BConst(True) else c for c in (a, b))
    if a is None:
        return b
    if b is None:
        return a
    return BoolOp("&&", a, b)


def case_chain(cases: Sequence[tuple[Cond | None, Sequence[Stmt]]], *, exhaustive: bool
               ) -> tuple[Stmt, ...]:
    """Mutually exclusive cases as an if / else-if chain; when they cover every PE that
    gets here (``exhaustive``) the last needs no test."""
    cases = [(c, b) for c, b in cases if b]
    if not cases:
        return ()
    cond, body = cases[-1]
    tail: tuple[Stmt, ...] = tuple(body) if exhaustive or cond is None else (
        If(cond, tuple(body)),)
    for cond, body in reversed(cases[:-1]):
        if cond is None:
            return tuple(body)
        tail = (If(cond, tuple(body), tail),)
    return tail


def guarded(cond: Cond | None, body: Sequence[Stmt]) -> tuple[Stmt, ...]:
    if not body:
        return ()
    return tuple(body) if cond is None else (If(cond, tuple(body)),)


def pe_condition_set(pes: isl.Set) -> isl.Set:
    """A set of PEs as constraints on ``PE_X``/``PE_Y``."""
    return pes.bind(poly.multi_id(pes.get_space(), poly.PE_NAMES))


def simplify(e: IExpr) -> IExpr:
    """Fold constants and collect affine terms: generated code should read well."""
    return normalize(fold(e))


def fold(e: IExpr) -> IExpr:
    match e:
        case IBin(op, lhs, rhs):
            a, b = fold(lhs), fold(rhs)
            if isinstance(a, IConst) and isinstance(b, IConst) and op in ("+", "-", "*"):
                return IConst({"+": a.value + b.value, "-": a.value - b.value,
                               "*": a.value * b.value}[op])
            if op == "+" and isinstance(a, IConst) and a.value == 0:
                return b
            if op in ("+", "-") and isinstance(b, IConst) and b.value == 0:
                return a
            if op == "*" and isinstance(a, IConst) and a.value == 1:
                return b
            if op in ("*", "//") and isinstance(b, IConst) and b.value == 1:
                return a
            if op == "%" and isinstance(b, IConst) and b.value == 1:
                return IConst(0)
            return IBin(op, a, b)
    return e

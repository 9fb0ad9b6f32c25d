"""Scalar code for a statement's instances: loops over them with one store each, shared
by the emitter and the cost model (which costs the statements it would emit)."""

from __future__ import annotations

from collections.abc import Sequence

import islpy as isl

from dtg.codegen.islast import aff_expr, scan
from dtg.codegen.stmtutil import simplify
from dtg.errors import CompilerBug
from dtg.lair.graph import Binary, Const, Read, Unary, Value
from dtg.lair.lower import PolyStatement
from dtg.mapping.memory import Memory
from dtg.pe.ir import FBin, FConst, FExpr, FNeg, FValue, IBin, IConst, IExpr, Load, Stmt, Store


def scalar_code(pstmt: PolyStatement, instances: isl.Set, trigger: str | None,
                context: isl.Set, memory: Memory, region: isl.Set) -> tuple[Stmt, ...]:
    """Loops over ``instances`` (parameters within ``context``), each storing one
    instance's value; ``trigger``'s element is the arriving ``value``; ``region``: the
    constraints on the PE coordinates, for the local arrays' offsets."""
    stmt = pstmt.stmt
    offsets: dict[str, tuple[IExpr, ...]] = {}
    for local in memory.arrays:
        if local.tensor not in (stmt.target.tensor, *(r.tensor for r in stmt.reads)):
            continue
        off = local.offset_aff()
        offsets[local.tensor] = tuple(aff_expr(off.get_at(d), region)
                                      for d in range(off.dim(isl.dim_type.out)))

    def local_load(tensor: str, env: dict[str, IExpr]) -> Load:
        local = memory.of(tensor)
        if local is None:
            raise CompilerBug(f"'{tensor}' has no local array on the compute PEs")
        access = stmt.access(tensor)
        index = []
        for expr, off in zip(access.index, offsets[tensor], strict=True):
            value: IExpr = IConst(expr.constant)
            for var, coeff in expr.terms:
                value = IBin("+", value, IBin("*", IConst(coeff), env[var]))
            index.append(IBin("-", value, off))
        return Load(local.name, tuple(simplify(i) for i in index))

    def body(_: str, coords: Sequence[IExpr]) -> list[Stmt]:
        env = dict(zip(stmt.iterators, coords, strict=True))
        loads = {t.tensor: local_load(t.tensor, env) for t in stmt.reads
                 if t.tensor != trigger}
        value = value_expr(stmt.value, trigger, loads)
        return [Store(local_load(stmt.target.tensor, env), stmt.op, value)]

    return scan(instances, context, body)


def value_expr(value: Value, trigger: str | None, load: dict[str, Load]) -> FExpr:
    """A statement's value as a PE-code expression: ``trigger``'s element is the
    arriving ``value``, other reads the given loads."""
    match value:
        case Const(v):
            return FConst(v)
        case Read(tensor) if tensor == trigger:
            return FValue()
        case Read(tensor):
            return load[tensor]
        case Unary(_, operand):
            return FNeg(value_expr(operand, trigger, load))
        case Binary(op, lhs, rhs):
            return FBin(op, value_expr(lhs, trigger, load), value_expr(rhs, trigger, load))
    raise TypeError(value)

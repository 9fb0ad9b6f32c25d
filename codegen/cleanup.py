"""Counters nothing reads are not kept: their updates cost cycles on every arrival;
adjacent tests of one condition are one test; tests of the PE's coordinates alone are
settled where the code is placed.

The emitter keeps generic bookkeeping (a dense stream's arrival counter ``n_x``, a
group counter) whether or not the task's code ends up reading it: where the SIMD
instruction's bases do not depend on the arrival, ``n_x += count`` is dead. This pass
drops the ``int``s no expression reads, with their assignments, until none is left.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace

import islpy as isl

from dtg.codegen.configure import program_pes
from dtg.codegen.scancheck import ScanError, cond_set
from dtg.mapping import poly
from dtg.pe.ir import (
    FBin,
    FExpr,
    FNeg,
    For,
    If,
    Load,
    PeProgram,
    Run,
    Send,
    SetInt,
    Stmt,
    Store,
)
from dtg.pe.walk import cond_names, iexpr_names

PE_COORDINATES = frozenset({"PE_X", "PE_Y"})


def drop_unread_ints(program: PeProgram) -> PeProgram:
    """``program`` without the ``int``s that no expression reads, and without control
    tasks left with nothing to do (an end mark no task handles is discarded on arrival,
    or closes a batch: no dispatch)."""
    while True:
        read = {n for task in program.tasks for s in task.body for n in reads(s)}
        dead = {v.name for v in program.ints} - read
        if not dead:
            return replace(program, tasks=tuple(
                t for t in program.tasks if t.kind != "control" or t.body))
        program = replace(
            program, ints=tuple(v for v in program.ints if v.name not in dead),
            tasks=tuple(replace(t, body=_without(t.body, dead)) for t in program.tasks))


def drop_unrun_configs(program: PeProgram) -> PeProgram:
    """``program`` without the SIMD configurations no ``run`` names (their runs were on
    branches the PEs settled away): a PE sets up no configuration for nothing."""
    run = set(_run_configs(t.body for t in program.tasks))
    return replace(program, configs=tuple(c for c in program.configs if c.name in run))


def _run_configs(bodies: Iterable[tuple[Stmt, ...]]) -> Iterator[str]:
    for body in bodies:
        for s in body:
            match s:
                case Run(config, _, _, _, _):
                    yield config
                case If(_, then, orelse, _):
                    yield from _run_configs((then, orelse))
                case For(_, _, _, inner):
                    yield from _run_configs((inner,))


def _without(body: tuple[Stmt, ...], dead: set[str]) -> tuple[Stmt, ...]:
    kept: list[Stmt] = []
    for s in body:
        match s:
            case SetInt(name, _, _) if name in dead:
                continue
            case If(cond, then, orelse, static):
                then_, orelse_ = _without(then, dead), _without(orelse, dead)
                if then_ or orelse_:
                    kept.append(If(cond, then_, orelse_, static))
                continue
            case For(var, lo, hi, inner):
                inner_ = _without(inner, dead)
                if inner_:
                    kept.append(For(var, lo, hi, inner_))
                continue
        kept.append(s)
    return tuple(kept)


def reads(s: Stmt) -> Iterator[str]:
    match s:
        case SetInt(_, _, value):
            yield from iexpr_names(value)
        case If(cond, then, orelse):
            yield from cond_names(cond)
            for inner in (*then, *orelse):
                yield from reads(inner)
        case For(_, lo, hi, inner):
            yield from iexpr_names(lo)
            yield from iexpr_names(hi)
            for t in inner:
                yield from reads(t)
        case Store(target, _, value):
            yield from _fexpr_reads(target)
            yield from _fexpr_reads(value)
        case Send(_, value, index):
            yield from _fexpr_reads(value)
            if index is not None:
                yield from iexpr_names(index)
        case Run(_, bases, scalar, variant, length):
            for _, base in bases:
                yield from iexpr_names(base)
            if scalar is not None:
                yield from _fexpr_reads(scalar)
            if variant is not None:
                yield from iexpr_names(variant)
            if length is not None:
                yield from iexpr_names(length)


def _fexpr_reads(e: FExpr) -> Iterator[str]:
    match e:
        case Load(_, index):
            for i in index:
                yield from iexpr_names(i)
        case FBin(_, lhs, rhs):
            yield from _fexpr_reads(lhs)
            yield from _fexpr_reads(rhs)
        case FNeg(operand):
            yield from _fexpr_reads(operand)


def assigned(body: tuple[Stmt, ...]) -> set[str]:
    """The integers ``body`` assigns, loop variables included."""
    names: set[str] = set()
    for s in body:
        match s:
            case SetInt(name, _, _):
                names.add(name)
            case If(_, then, orelse):
                names |= assigned(then) | assigned(orelse)
            case For(var, _, _, inner):
                names |= {var} | assigned(inner)
    return names


def merge_adjacent_ifs(program: PeProgram) -> PeProgram:
    """``program`` with each run of adjacent ``if (c) {a} if (c) {b}`` (no ``else``, and
    ``a`` assigning nothing ``c`` reads) as ``if (c) {a b}``: the emitter writes each
    statement's or output's part under its own condition, which are often the same
    (the PEs at the end of a chain), and every test costs a branch and its
    operations."""
    return replace(program, tasks=tuple(replace(t, body=_merged(t.body))
                                        for t in program.tasks))


def _merged(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    out: list[Stmt] = []
    for s in body:
        match s:
            case If(cond, then, orelse, static):
                s = If(cond, _merged(then), _merged(orelse), static)
            case For(var, lo, hi, inner):
                s = For(var, lo, hi, _merged(inner))
        prev = out[-1] if out else None
        if isinstance(s, If) and isinstance(prev, If) and prev.cond == s.cond \
                and prev.static == s.static and not prev.orelse and not s.orelse \
                and not (set(cond_names(s.cond)) & assigned(prev.then)):
            out[-1] = If(s.cond, prev.then + s.then, (), s.static)
        else:
            out.append(s)
    return tuple(out)


def settle_pe_branches(program: PeProgram, *,
                       task_pes: Mapping[str, isl.Set] | None = None) -> PeProgram:
    """Mark the branches that test only ``PE_X`` and ``PE_Y`` ``static``: each PE gets
    the code of its own branch when the code is placed (docs/pecode.md), so telling the
    classes of PEs apart (a chain's first PE, a border's tile) costs nothing at run time.
    A branch no PE that gets there can take (by the tests around it, and ``task_pes``:
    the PEs a task can run on, where the emitter knows them) is dropped."""
    pes = program_pes(program)
    tasks = []
    for t in program.tasks:
        where = pes
        if task_pes is not None and t.name in task_pes:
            where, known = poly.align_params(pes, task_pes[t.name])
            where = where.intersect(known)
        tasks.append(replace(t, body=_settled(t.body, where)))
    return replace(program, tasks=tuple(tasks))


def _settled(body: tuple[Stmt, ...], known: isl.Set) -> tuple[Stmt, ...]:
    """``body`` settled on the PEs ``known`` (parameters ``PE_X``, ``PE_Y``)."""
    out: list[Stmt] = []
    for s in body:
        match s:
            case If(cond, then, orelse, static) if static or set(
                    cond_names(cond)) <= PE_COORDINATES:
                try:
                    where = cond_set(cond, known.get_space())
                except ScanError:  # (not quasi-affine: settled, but not narrowed)
                    out.append(If(cond, _settled(then, known), _settled(orelse, known), True))
                    continue
                inside, outside = known.intersect(where), known.subtract(where)
                if inside.is_empty():
                    out.extend(_settled(orelse, known))
                elif outside.is_empty():
                    out.extend(_settled(then, known))
                else:
                    out.append(If(cond, _settled(then, inside), _settled(orelse, outside),
                                  True))
                continue
            case If(cond, then, orelse, static):
                s = If(cond, _settled(then, known), _settled(orelse, known), static)
            case For(var, lo, hi, inner):
                s = For(var, lo, hi, _settled(inner, known))
        out.append(s)
    return tuple(out)

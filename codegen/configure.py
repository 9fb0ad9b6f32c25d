"""Set up each SIMD configuration only on the PEs whose code can run it (paper §5.4).

The paper: "each PE should ideally only perform SIMD configurations for sizes that it
needs". A program's code is shared by a class of PEs, but its instructions mostly run
under conditions on ``PE_X``/``PE_Y`` (the PEs holding a task's instances, the end of a
reduction chain, a border's size variant). This pass reads those conditions back as isl
sets and guards every size variant of every configuration with the PEs that can reach a
``run`` selecting it. The guard is a superset: conditions on anything but the PE
coordinates count as "maybe", and the simulator rejects a run of a variant its PE did not
set up, so a wrong guard cannot go unnoticed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import islpy as isl

from dtg.codegen.islast import condition_of
from dtg.codegen.scancheck import ScanError, cond_set, quasi_affine
from dtg.mapping import poly
from dtg.pe.ir import (
    Array,
    Cond,
    For,
    IExpr,
    If,
    IVar,
    PeProgram,
    Run,
    SimdConfig,
    SimdOperand,
    Stmt,
)
from dtg.pe.walk import cond_names, iexpr_names

PE_ONLY = frozenset(poly.PE_NAMES)


def guard_configurations(program: PeProgram, *,
                         task_pes: Mapping[str, isl.Set] | None = None) -> PeProgram:
    """``program`` with a guard on each size variant: the PEs that may run it.
    ``task_pes`` gives the PEs a task can run on where the emitter knows them (a data
    task runs only where its color is delivered)."""
    if not program.configs:
        return program
    pes = program_pes(program)
    reach: dict[tuple[str, int], isl.Set] = {}
    variants = {c.name: len(c.variants) for c in program.configs}
    for task in program.tasks:
        where = pes
        if task_pes is not None and task.name in task_pes:
            where, known = poly.align_params(pes, task_pes[task.name])
            where = where.intersect(known)
        _walk(task.body, where, variants, reach)
    configs = []
    for c in program.configs:
        guards = tuple(_guard(reach.get((c.name, k)), pes) for k in range(len(c.variants)))
        configs.append(replace(c, guards=() if all(g is None for g in guards) else guards))
    return replace(program, configs=tuple(configs))


def configurations_per_pe(program: PeProgram) -> int:
    """The most size variants any PE of ``program`` sets up."""
    pes = program_pes(program)
    return poly.most_overlapping([
        pes if (g := c.guard(k)) is None else cond_set(g, pes.get_space()).intersect(pes)
        for c in program.configs for k in range(len(c.variants))])


def program_pes(program: PeProgram) -> isl.Set:
    """The program's PEs as a set of parameter values ``PE_X``, ``PE_Y`` (relative)."""
    pes = isl.Set(program.pes)
    return pes.bind(poly.multi_id(pes.get_space(), poly.PE_NAMES))


def _guard(reached: isl.Set | None, pes: isl.Set) -> Cond | None:
    if reached is None:
        return condition_of(isl.Set.empty(pes.get_space()), pes)
    return condition_of(reached.coalesce(), pes)


def _walk(body: tuple[Stmt, ...], where: isl.Set, variants: dict[str, int],
          reach: dict[tuple[str, int], isl.Set]) -> None:
    """Record in ``reach`` where each variant may run. ``where`` is a set of parameter
    values: the PE coordinates and the enclosing loops' variables."""
    if where.is_empty():
        return
    for s in body:
        match s:
            case If(cond, then, orelse):
                holds = _known_set(cond, where)
                if holds is None:
                    _walk(then, where, variants, reach)
                    _walk(orelse, where, variants, reach)
                else:
                    _walk(then, where.intersect(holds), variants, reach)
                    _walk(orelse, where.subtract(holds), variants, reach)
            case For(var, lo, hi, inner):
                n = where.dim(isl.dim_type.param)
                inside = where.add_dims(isl.dim_type.param, 1).set_dim_name(
                    isl.dim_type.param, n, var)
                low, high = _known_value(lo, inside), _known_value(hi, inside)
                if low is not None and high is not None:
                    loop = _known_value(IVar(var), inside)
                    assert loop is not None
                    inside = inside.intersect(low.le_set(loop)).intersect(loop.le_set(high))
                _walk(inner, inside, variants, reach)
            case Run(config, _, _, variant):
                for k in range(variants.get(config, 0)):
                    at = where
                    if variant is not None:
                        value = _known_value(variant, where)
                        if value is not None:
                            at = where.intersect(value.eq_set(_constant(k, where)))
                    if at.is_empty():
                        continue
                    at = poly.project_out_params(at, [
                        str(at.get_dim_name(isl.dim_type.param, d))
                        for d in range(at.dim(isl.dim_type.param))
                        if at.get_dim_name(isl.dim_type.param, d) not in PE_ONLY])
                    key = (config, k)
                    reach[key] = at if key not in reach else reach[key].union(at)


def _names(where: isl.Set) -> set[str]:
    return {str(where.get_dim_name(isl.dim_type.param, d))
            for d in range(where.dim(isl.dim_type.param))}


def _known_set(cond: Cond, where: isl.Set) -> isl.Set | None:
    """Where ``cond`` holds, if it depends only on the PE and loop variables."""
    names = set(cond_names(cond))
    if not names <= _names(where):
        return None
    try:
        return cond_set(cond, where.get_space())
    except ScanError:  # not quasi-affine: count it as "maybe"
        return None


def _known_value(e: IExpr, where: isl.Set) -> isl.PwAff | None:
    if not set(iexpr_names(e)) <= _names(where):
        return None
    try:
        return quasi_affine(e, [], where.get_space())
    except ScanError:
        return None


def _constant(k: int, where: isl.Set) -> isl.PwAff:
    ls = isl.LocalSpace.from_space(where.get_space())
    return isl.PwAff.from_aff(isl.Aff.zero_on_domain(ls).set_constant_val(
        isl.Val.int_from_si(where.get_ctx(), k)))


def share_configurations(program: PeProgram) -> PeProgram:
    """``program`` with one configuration for instructions that differ only in the
    arrays they are on (the same operation, sizes, strides, colors and element types,
    and the same operands on one array): the others' runs bind its operands to their
    arrays, as a CSL program points one DSD at another base address. A PE sets up
    fewer configurations (a budget of 8 counts them) and spends fewer cycles on them."""
    arrays = {a.name: a for a in program.arrays}
    first: dict[tuple[object, ...], SimdConfig] = {}
    shared: dict[str, tuple[SimdConfig, SimdConfig]] = {}  # name -> (its, the shared one)
    for c in program.configs:
        one = first.setdefault(_shape(c, arrays), c)
        if one is not c:
            shared[c.name] = (c, one)
    if not shared:
        return program

    def run(s: Run) -> Run:
        if s.config not in shared:
            return s
        mine, one = shared[s.config]
        bases = dict(s.bases)
        pairs = [(o.array, m.array) for o, m in zip(_operands(one), _operands(mine),
                                                     strict=True)
                 if o.kind == "array" and o.array and m.array]
        names = dict.fromkeys(pairs)  # (one operand per array, in operand order)
        return replace(s, config=one.name,
                       bases=tuple((o, bases[m]) for o, m in names),
                       arrays=tuple((o, s.array(m)) for o, m in names if s.array(m) != o))

    tasks = tuple(replace(t, body=map_runs(t.body, run)) for t in program.tasks)
    return replace(program, configs=tuple(c for c in program.configs if c.name not in shared),
                   tasks=tasks)


def _operands(c: SimdConfig) -> tuple[SimdOperand, ...]:
    return (c.dst, *c.srcs)


def _shape(c: SimdConfig, arrays: Mapping[str, Array]) -> tuple[object, ...]:
    """What a configuration is but for the arrays it is on: two with the same shape can
    be one. Array operands are described by their element type and the first operand
    on the same array (so that a configuration's distinct arrays stay distinct)."""
    operands = _operands(c)
    described = []
    for o in operands:
        same = next(j for j, p in enumerate(operands) if p.array == o.array) if \
            o.kind == "array" else None
        array = arrays.get(o.array) if o.kind == "array" and o.array else None
        dtype = array.dtype if array is not None else None
        described.append((o.kind, o.strides, o.color, o.indexed, o.ends, dtype, same))
    return (c.op, c.variants, c.guards, tuple(described))


def map_runs(body: tuple[Stmt, ...], run: Callable[[Run], Run]) -> tuple[Stmt, ...]:
    """``body`` with every ``run`` statement replaced by ``run`` of it."""
    def stmt(s: Stmt) -> Stmt:
        match s:
            case Run():
                return run(s)
            case If(cond, then, orelse, static):
                return If(cond, map_runs(then, run), map_runs(orelse, run), static)
            case For(var, lo, hi, inner):
                return For(var, lo, hi, map_runs(inner, run))
        return s

    return tuple(stmt(s) for s in body)

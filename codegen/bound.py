"""The mapping's lower bound on cycles, from the program and the mapping alone.

Three terms (docs/pecode.md, "The bound"), each a number of cycles no code for this
mapping can beat on the fabric it is simulated on:

- **compute**: on the busiest PE, the element operations of its statement instances
  divided by the SIMD width of their type (a multiply-add counts once);
- **injection**: on the busiest external PE, the wavelets its stream sends or receives,
  one per cycle through its port;
- **latency**: the longest way any element travels, in hops, between its external PE
  and a PE that reads (or writes) it.

The bound is the largest term; reports give ``cycles / bound`` and the term that
dominates, so two code generators can be compared on the same mapping. Every element
and instance counts: a run whose sparse inputs have zeros skips some and may come in
under the bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import islpy as isl

from lair.graph import Binary, Read, Stmt, Unary, Value
from lair.lower import PolyModel
from mapping import poly
from mapping.flows import accessing_pes
from mapping.mesh import point
from mapping.validate import Mapping
from pesim.fabric import FabricConfig


@dataclass(frozen=True)
class Term:
    name: str  # compute, injection or latency
    cycles: int
    where: str  # the PE, port or path that sets it

    def as_dict(self) -> dict[str, Any]:
        return {"cycles": self.cycles, "where": self.where}


@dataclass(frozen=True)
class Bound:
    terms: tuple[Term, ...]

    @property
    def dominant(self) -> Term:
        return max(self.terms, key=lambda t: t.cycles)

    @property
    def cycles(self) -> int:
        return max(1, self.dominant.cycles)

    def as_dict(self) -> dict[str, Any]:
        return {"cycles": self.cycles, "dominant": self.dominant.name,
                **{t.name: t.as_dict() for t in self.terms}}

    def describe(self, cycles: int | None = None) -> str:
        text = (f"{self.cycles} cycles ({self.dominant.name}: {self.dominant.where}; "
                + ", ".join(f"{t.name} {t.cycles}" for t in self.terms) + ")")
        if cycles is not None:
            text = f"{cycles / self.cycles:.2f}x of " + text
        return text


def element_ops(stmt: Stmt) -> int:
    """Element operations every instance needs: the arithmetic of its value that depends
    on all of the statement's iterators (an operation on fewer, such as ``alpha * A[i][k]``
    in a GEMM over ``(i, j, k)``, can be hoisted and is not counted), plus the
    accumulation of ``+=``/``max=``, where an addition of a product counts once (a
    multiply-add); at least one (a copy moves an element)."""
    used = {read.tensor: {name for expr in read.index for name, _ in expr.terms}
            for read in stmt.reads}
    every = set(stmt.iterators)
    ops, _ = _operators(stmt.value, used, every)
    if stmt.op in ("+=", "max="):
        ops += 0 if stmt.op == "+=" and _is_product(stmt.value) else 1
    return max(1, ops)


def _operators(value: Value, used: dict[str, set[str]], every: set[str]
               ) -> tuple[int, set[str]]:
    """(operations counted per instance, iterators the value depends on)."""
    match value:
        case Read(tensor):
            return 0, used.get(tensor, set())
        case Binary(op, lhs, rhs):
            (a, left), (b, right) = _operators(lhs, used, every), _operators(rhs, used, every)
            depends = left | right
            fused = op in ("+", "-") and (_is_product(lhs) or _is_product(rhs))
            own = 0 if fused or depends != every else 1
            return a + b + own, depends
        case Unary(_, operand):
            count, depends = _operators(operand, used, every)
            return count + (1 if depends == every else 0), depends
    return 0, set()


def _is_product(value: Value) -> bool:
    return isinstance(value, Binary) and value.op == "*"


def mapping_bound(model: PolyModel, mapping: Mapping, config: FabricConfig | None = None
                  ) -> Bound:
    config = config or FabricConfig()
    return Bound((_compute(model, mapping, config), _injection(mapping),
                  _latency(model, mapping, config)))


def _compute(model: PolyModel, mapping: Mapping, config: FabricConfig) -> Term:
    """Busiest PE: its statements' element operations over the SIMD width of their type
    (counted PE by PE: a report-only cost, not part of compiling)."""
    per_pe: dict[tuple[int, ...], float] = {}
    for pstmt in model.statements:
        width = config.simd_width(model.graph.tensor(pstmt.stmt.target.tensor).dtype)
        ops = element_ops(pstmt.stmt)
        placed = mapping.placement_of(pstmt.name)
        placed, domain = poly.align_params(placed, pstmt.domain)
        placed = placed.intersect_domain(domain)
        for pe in poly.points(placed.range()):
            at = isl.Set.from_point(point(placed.range().get_space(), pe))
            count = int(placed.intersect_range(at).domain().count_val().to_python())
            per_pe[pe] = per_pe.get(pe, 0.0) + count * ops / width
    if not per_pe:
        return Term("compute", 0, "no instances")
    pe, work = max(per_pe.items(), key=lambda kv: (kv[1], [-c for c in kv[0]]))
    return Term("compute", math.ceil(work), f"PE[{pe[0]}, {pe[1]}]")


def _injection(mapping: Mapping) -> Term:
    """Busiest external PE: the elements its stream sends or receives, one per cycle."""
    best = Term("injection", 0, "no streams")
    for stream in mapping.streams:
        per_ext: dict[tuple[int, ...], int] = {}
        for pair in poly.points(stream.external_pes.wrap()):
            ext = pair[-2:]
            per_ext[ext] = per_ext.get(ext, 0) + 1
        for ext, count in per_ext.items():
            if count > best.cycles:
                best = Term("injection", count, f"{stream.direction} {stream.tensor} at "
                                                f"PE[{ext[0]}, {ext[1]}]")
    return best


def _latency(model: PolyModel, mapping: Mapping, config: FabricConfig) -> Term:
    """Longest hop count between a stream's external PE and a PE that reads (writes)
    one of its elements: max |dx| + |dy| over the pairs, by four isl maximizations."""
    best = Term("latency", 0, "no streams")
    for stream in mapping.streams:
        users = accessing_pes(model, mapping, stream.tensor,
                              write=stream.direction == "output")
        pairs = stream.external_pes.reverse().apply_range(users)  # ext -> PE
        if pairs.is_empty():
            continue
        deltas = pairs.deltas()
        hops = 0
        for sx, sy in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
            objective = _linear(deltas.get_space(), sx, sy)
            value = deltas.max_val(objective)
            if value.is_int():
                hops = max(hops, int(value.to_python()))
        if hops * config.hop_cycles > best.cycles:
            best = Term("latency", hops * config.hop_cycles,
                        f"{stream.direction} {stream.tensor}: {hops} hops")
    return best


def _linear(space: isl.Space, sx: int, sy: int) -> isl.Aff:
    ls = isl.LocalSpace.from_space(space)
    x = isl.Aff.var_on_domain(ls, isl.dim_type.set, 0).scale_val(
        isl.Val.int_from_si(space.get_ctx(), sx))
    y = isl.Aff.var_on_domain(ls, isl.dim_type.set, 1).scale_val(
        isl.Val.int_from_si(space.get_ctx(), sy))
    return x.add(y)



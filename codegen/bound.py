"""The mapping's lower bound on cycles, from the program and the mapping alone.

Four terms (docs/pecode.md, "The bound"), each a number of cycles no code for this
mapping can beat on the fabric it is simulated on:

- **compute**: on the busiest PE, the element operations of its statement instances
  divided by the SIMD width of their type (a multiply-add counts once);
- **injection**: on the busiest external PE, the wavelets its stream sends or receives,
  one per cycle through its port;
- **latency**: the longest way any element travels, in hops, between its external PE
  and a PE that reads (or writes) it;
- **path**: on any PE, the hops before its first streamed input can arrive, plus its
  compute, plus the hops its last result still travels to a streamed output's sink.

The bound is the largest term; reports give ``cycles / bound`` and the term that
dominates, so two code generators can be compared on the same mapping. Given the values
of the tensors (``data``: a simulated run's inputs and expected outputs), a sparse
stream counts only its nonzero elements, and an instance that a zero element of a
sparse input makes vanish (``lair.graph.vanishes_with``) counts no work, as the code
may skip it; without them every element and instance counts (the compile report).
"""

from __future__ import annotations

import math
from collections.abc import Mapping as Values
from dataclasses import dataclass
from typing import Any

import islpy as isl
import numpy as np

from dtg.lair.graph import Binary, Read, Stmt, Unary, Value, vanishes_with
from dtg.lair.lower import PolyModel, PolyStatement
from dtg.mapping import poly
from dtg.mapping.flows import accessing_pes
from dtg.mapping.mesh import point
from dtg.mapping.validate import Mapping
from dtg.pesim.fabric import FabricConfig


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
    return sum(_operation_kinds(stmt))


def element_cycles(stmt: Stmt, dtype: str, config: FabricConfig) -> float:
    """SIMD cycles of one instance's element operations at the widest the fabric allows:
    operations with a multiplication run at the multiply width, the others at the
    width of additions (they may differ, as on WSE-2 and WSE-3 for float32)."""
    multiplying, other = _operation_kinds(stmt)
    return multiplying / config.simd_width(dtype, "fmac") + other / config.widest(dtype)


def _operation_kinds(stmt: Stmt) -> tuple[int, int]:
    """(operations with a multiplication, other operations) of :func:`element_ops`."""
    used = {read.tensor: {name for expr in read.index for name, _ in expr.terms}
            for read in stmt.reads}
    every = set(stmt.iterators)
    ops, multiplying, _ = _operators(stmt.value, used, every)
    if stmt.op in ("+=", "max="):
        ops += 0 if stmt.op == "+=" and _is_product(stmt.value) else 1
    if ops == 0:
        return 0, 1  # a copy
    return multiplying, ops - multiplying


def _operators(value: Value, used: dict[str, set[str]], every: set[str]
               ) -> tuple[int, int, set[str]]:
    """(operations counted per instance, those multiplying, iterators the value depends
    on)."""
    match value:
        case Read(tensor):
            return 0, 0, used.get(tensor, set())
        case Binary(op, lhs, rhs):
            (a, am, left), (b, bm, right) = (_operators(lhs, used, every),
                                             _operators(rhs, used, every))
            depends = left | right
            fused = op in ("+", "-") and (_is_product(lhs) or _is_product(rhs))
            own = 0 if fused or depends != every else 1
            return a + b + own, am + bm + (own if op == "*" else 0), depends
        case Unary(_, operand):
            count, mult, depends = _operators(operand, used, every)
            return count + (1 if depends == every else 0), mult, depends
    return 0, 0, set()


def _is_product(value: Value) -> bool:
    return isinstance(value, Binary) and value.op == "*"


def mapping_bound(model: PolyModel, mapping: Mapping, config: FabricConfig | None = None,
                  *, data: Values[str, np.ndarray] | None = None) -> Bound:
    """The bound; with ``data`` (tensor values), for those values (see the module)."""
    config = config or FabricConfig()
    data = data or {}
    work = _work(model, mapping, config, data)
    return Bound((_compute(work), _injection(mapping, data),
                  _latency(model, mapping, config), _path(model, mapping, config, work)))


def _work(model: PolyModel, mapping: Mapping, config: FabricConfig,
          data: Values[str, np.ndarray]) -> dict[tuple[int, ...], dict[str, float]]:
    """Per PE and statement: element operations over the SIMD width of their type
    (counted PE by PE: a report-only cost, not part of compiling)."""
    per_pe: dict[tuple[int, ...], dict[str, float]] = {}
    for pstmt in model.statements:
        cycles = element_cycles(pstmt.stmt, model.graph.tensor(pstmt.stmt.target.tensor).dtype,
                                config)
        placed = mapping.placement_of(pstmt.name)
        placed, domain = poly.align_params(placed, pstmt.domain)
        placed = placed.intersect_domain(domain)
        skippable = _skippable(pstmt, mapping, data)
        counts = _nonvanishing(pstmt, placed, skippable) if skippable else None
        for pe in poly.points(placed.range()):
            if counts is not None:
                count = counts.get(pe, 0)
            else:
                at = isl.Set.from_point(point(placed.range().get_space(), pe))
                count = int(placed.intersect_range(at).domain().count_val().to_python())
            per_pe.setdefault(pe, {})[pstmt.name] = count * cycles
    return per_pe


def _skippable(pstmt: PolyStatement, mapping: Mapping, data: Values[str, np.ndarray]
               ) -> list[tuple[isl.Map, np.ndarray]]:
    """The sparse input streams whose zero elements (present in ``data``) make an
    instance of ``pstmt`` vanish: its access and the tensor's values for each."""
    stmt = pstmt.stmt
    if stmt.op not in ("+=", "="):
        return []
    sparse = {s.tensor for s in mapping.streams if s.direction == "input" and
              s.kind == "sparse"}
    return [(pstmt.read(t), np.asarray(data[t])) for t in sorted({r.tensor for r in stmt.reads})
            if t in sparse and t in data and vanishes_with(stmt.value, t) and
            not np.all(np.asarray(data[t]) != 0)]


def _nonvanishing(pstmt: PolyStatement, placed: isl.Map,
                  skippable: list[tuple[isl.Map, np.ndarray]]) -> dict[tuple[int, ...], int]:
    """Per PE, the instances of ``pstmt`` whose every skippable read is nonzero: the
    instances listed with their PE and elements (a report-only cost, linear in them)."""
    relation = placed
    for access, _ in skippable:
        access, relation = poly.align_params(access, relation)
        relation = relation.range_product(access.intersect_domain(pstmt.domain))
    rows = np.array(poly.points(relation.wrap()), dtype=np.int64)
    if rows.size == 0:
        return {}
    column = int(relation.dim(isl.dim_type.in_))
    keep = np.ones(len(rows), dtype=bool)
    pe_at = column
    column += 2
    for access, values in skippable:
        dims = int(access.dim(isl.dim_type.out))
        keep &= values[tuple(rows[:, column + d] for d in range(dims))] != 0
        column += dims
    pes, counts = np.unique(rows[keep][:, pe_at:pe_at + 2], axis=0, return_counts=True)
    return {(int(x), int(y)): int(n) for (x, y), n in zip(pes, counts, strict=True)}


def _compute(work: dict[tuple[int, ...], dict[str, float]]) -> Term:
    """Busiest PE: its statements' element operations over the SIMD width."""
    if not work:
        return Term("compute", 0, "no instances")
    pe, total = max(((pe, sum(w.values())) for pe, w in work.items()),
                    key=lambda kv: (kv[1], [-c for c in kv[0]]))
    return Term("compute", math.ceil(total), f"PE[{pe[0]}, {pe[1]}]")


def _path(model: PolyModel, mapping: Mapping, config: FabricConfig,
          work: dict[tuple[int, ...], dict[str, float]]) -> Term:
    """Per PE: its work cannot start before an element it reads can arrive (the nearest
    source of each streamed input an instance reads, the latest of those, the earliest
    over its statements; 0 for a statement with no streamed input), and its last result
    still has to reach a sink (the nearest sink of a streamed output a statement writes,
    the nearest over its statements; 0 if one writes none). The longest such path."""
    streams = {s.tensor: s for s in mapping.streams}
    ends: dict[str, list[tuple[int, int]]] = {
        t: sorted({(pair[-2], pair[-1]) for pair in poly.points(s.external_pes.wrap())})
        for t, s in streams.items()}

    def hops(pe: tuple[int, ...], tensor: str) -> int:
        return min(abs(pe[0] - x) + abs(pe[1] - y) for x, y in ends[tensor]) * \
            config.hop_cycles

    best = Term("path", 0, "no instances")
    for pe, per_stmt in work.items():
        starts, finishes = [], []
        for name in per_stmt:
            stmt = model.statement(name).stmt
            inputs = [r.tensor for r in stmt.reads if r.tensor in streams and
                      streams[r.tensor].direction == "input" and ends[r.tensor]]
            starts.append(max((hops(pe, t) for t in inputs), default=0))
            target = stmt.target.tensor
            out = streams.get(target)
            finishes.append(hops(pe, target) if out is not None and out.direction == "output"
                            and ends[target] else 0)
        first, last = min(starts, default=0), min(finishes, default=0)
        cycles = first + math.ceil(sum(per_stmt.values())) + last
        if cycles > best.cycles:
            best = Term("path", cycles, f"PE[{pe[0]}, {pe[1]}]: {first} cycles for the first "
                                        f"input, then its compute, {last} for the last result")
    return best


def _injection(mapping: Mapping, data: Values[str, np.ndarray]) -> Term:
    """Busiest external PE: the elements its stream sends or receives, one per cycle (a
    sparse stream's nonzero ones, where ``data`` has the tensor's values)."""
    best = Term("injection", 0, "no streams")
    for stream in mapping.streams:
        per_ext: dict[tuple[int, ...], int] = {}
        values = data.get(stream.tensor) if stream.kind == "sparse" else None
        for pair in poly.points(stream.external_pes.wrap()):
            ext = pair[-2:]
            if values is not None and np.asarray(values)[pair[:-2]] == 0:
                continue
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



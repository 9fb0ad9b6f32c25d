"""The mapping's lower bound on cycles, from the program and the mapping alone.

Six terms (docs/pecode.md, "The bound"), each a number of cycles no code for this
mapping can beat on the fabric it is simulated on:

- **compute**: on the busiest PE, the element operations of its statement instances
  divided by the SIMD width of their type (a multiply-add counts once), plus one SIMD
  configuration and start-up for its work, or that work scalar where less (copies
  that need no core work count nothing);
- **injection**: on the busiest link between an external PE and the rectangle, the
  wavelets all the streams through it send or receive, one per cycle;
- **ramp**: on the busiest PE, the streamed-input elements its instances read (but for
  copies to a streamed output), which reach its core down one ramp, one wavelet per
  cycle;
- **latency**: the longest way any element travels, in hops, between its external PE
  and a PE that reads (or writes) it;
- **path**: on any PE, the hops before its first streamed input can arrive, plus its
  compute, plus the hops its last result still travels to a streamed output's sink;
- **cut**: on the busiest line between two columns (rows), the elements of tensors
  computed in the rectangle that must cross it (all writers on one side, a reader on
  the other), one wavelet per cycle on each of its links.

The bound is the largest term; reports give ``cycles / bound`` and the term that
dominates, so two code generators can be compared on the same mapping. Given the values
of the tensors (``data``: a simulated run's inputs and expected outputs), a sparse
stream counts only its nonzero elements, and an instance that a zero element of a
sparse input makes vanish (``lair.graph.vanishes_with``) counts no work, as the code
may skip it; without them every element and instance counts (the compile report).

Like the compiler, the bound is parametric in the PE coordinates: where the instances
of a PE (the elements of an external PE) form a box whose size is piecewise constant,
as under any tiling, isl gives the sets of PEs with equal work and the longest hops
within each, so the cost does not grow with the rectangle. Other placements, and
counts for ``data``, go PE by PE (at most :data:`MAX_LISTED_PES` for a placement).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Mapping as Values
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import islpy as isl
import numpy as np

from dtg.lair.graph import Binary, Const, Read, Stmt, Unary, Value, vanishes_with
from dtg.lair.limits import counted
from dtg.lair.lower import PolyModel, PolyStatement
from dtg.mapping import poly
from dtg.mapping.flows import accessing_pes
from dtg.mapping.mesh import point
from dtg.mapping.validate import Mapping
from dtg.pe.fabric import FabricConfig


@dataclass(frozen=True)
class Term:
    name: str  # compute, injection, ramp, latency, path or cut
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
        text = (f"{counted(self.cycles, 'cycle')} ({self.dominant.name}: {self.dominant.where}; "
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
    return float(element_fraction(stmt, dtype, config))


def element_fraction(stmt: Stmt, dtype: str, config: FabricConfig) -> Fraction:
    """:func:`element_cycles`, exactly (sums of them are rounded up once)."""
    multiplying, other = _operation_kinds(stmt)
    return (Fraction(multiplying, config.simd_width(dtype, "fmac"))
            + Fraction(other, config.widest(dtype)))


def _operation_kinds(stmt: Stmt) -> tuple[int, int]:
    """(operations with a multiplication, other operations) of :func:`element_ops`."""
    used = {read.tensor: {name for expr in read.index for name, _ in expr.terms}
            for read in stmt.reads}
    every = set(stmt.iterators)
    ops, multiplying, _ = _operators(stmt.value, used, every)
    if stmt.op in ("+=", "max="):
        ops += 0 if stmt.op == "+=" and _is_product(stmt.value) else 1
    if stmt.op == "+=" and (terms := _simple_terms(stmt.value)) is not None and \
            terms[0] < ops:
        # a sum of terms accumulated one at a time: each product's multiply-add carries an
        # addition, so the accumulation's is one of them (``y += a * x + b * z`` is two
        # multiply-adds, not two and an addition)
        ops, multiplying = terms
    if ops == 0:
        return 0, 1  # a copy
    return multiplying, ops - multiplying


def _simple_terms(value: Value, sign: int = 1) -> tuple[int, int] | None:
    """(operations, those multiplying) of accumulating ``value``, a signed sum of terms
    each a leaf or a product of two leaves, one term at a time: one each, but a
    subtracted product with no constant to negate (a product, then a subtraction);
    None where it is no such sum."""
    match value:
        case Binary("+" | "-" as op, lhs, rhs):
            a, b = _simple_terms(lhs, sign), _simple_terms(rhs, -sign if op == "-" else sign)
            return None if a is None or b is None else (a[0] + b[0], a[1] + b[1])
        case Unary("neg", operand):
            return _simple_terms(operand, -sign)
        case Binary("*", Read() | Const() as a, Read() | Const() as b):
            negated = sign < 0 and not isinstance(a, Const) and not isinstance(b, Const)
            return (2 if negated else 1), 1
        case Read() | Const():
            return 1, 0
    return None


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
    return Bound((_compute(work, _least_compute(model, mapping, config)),
                  _injection(mapping, data), _ramp(model, mapping, data),
                  _latency(model, mapping, config),
                  _path(model, mapping, config, work,
                        _least_compute(model, mapping, config, fixed=False)),
                  _cut(model, mapping)))


def statements_compute(model: PolyModel, mapping: Mapping, statements: set[str],
                       config: FabricConfig | None = None) -> int:
    """The compute term for some of the statements only (one layer of a network): the
    least cycles the busiest PE spends on their element operations."""
    config = config or FabricConfig()
    least = _least_compute(model, mapping, config)
    work = _work(model, mapping, config, {})
    return math.ceil(max((least({n: c for n, c in piece.per_stmt.items() if n in statements})
                          for piece in work), default=0))


def _least_compute(model: PolyModel, mapping: Mapping, config: FabricConfig, *,
                   fixed: bool = True) -> Callable[[dict[str, Fraction]], Fraction]:
    """The least cycles any code spends on a PE's element operations, from its
    statements' SIMD cycles at the widest widths (``per_stmt``): with SIMD, at least one
    configuration and one instruction's start-up besides those cycles (``fixed``; the
    path term leaves them out, since they may pass while the first input travels);
    without, one scalar operation per element operation; whichever is less (mixing the
    two costs more than the cheaper alone). Copies that need no core work count
    nothing (:func:`_free_copy`)."""
    widths: dict[str, Fraction] = {}
    for pstmt in model.statements:
        if _free_copy(pstmt.stmt, mapping):
            continue
        dtype = model.graph.tensor(pstmt.stmt.target.tensor).dtype
        widths[pstmt.name] = Fraction(element_ops(pstmt.stmt)) / element_fraction(
            pstmt.stmt, dtype, config)
    overhead = config.simd_config + config.simd_startup if fixed else 0

    def least(per_stmt: dict[str, Fraction]) -> Fraction:
        simd = sum((c for n, c in per_stmt.items() if n in widths), Fraction(0))
        if simd == 0:
            return simd
        scalar = config.scalar_op * sum((c * widths[n] for n, c in per_stmt.items()
                                         if n in widths), Fraction(0))
        return min(scalar, overhead + simd)

    return least


def _free_copy(stmt: Stmt, mapping: Mapping) -> bool:
    """A copy (``y[...] = x[...]``) that code may do without the core: from a streamed
    input (the stream may land where the copy goes), to a streamed output (the router may
    pass the element on), or at the same index (the copy may share its source's array)."""
    if stmt.op != "=" or not isinstance(stmt.value, Read):
        return False
    directions = {s.tensor: s.direction for s in mapping.streams}
    return (directions.get(stmt.value.tensor) == "input"
            or directions.get(stmt.target.tensor) == "output"
            or stmt.access(stmt.value.tensor).index == stmt.target.index)


MAX_LISTED_PES = 1 << 16
"""Most PEs whose work is counted one by one, for a statement whose instances on a PE
are not a box of piecewise-constant size (a skewed placement): beyond, those of the
first columns that fit (a sample of the PEs still gives a lower bound)."""


@dataclass(frozen=True)
class Piece:
    """PEs that do the same work: the set (``pe`` when it is one PE) and, per statement
    placed there, its cycles."""

    pes: isl.Set
    per_stmt: dict[str, Fraction]
    pe: tuple[int, ...] | None = None

    @property
    def cycles(self) -> Fraction:
        return sum(self.per_stmt.values(), Fraction(0))


def _work(model: PolyModel, mapping: Mapping, config: FabricConfig,
          data: Values[str, np.ndarray]) -> list[Piece]:
    """Per set of PEs with equal work and statement: element operations over the SIMD
    width of their type. Tiled placements give a few sets whatever the rectangle's size
    (:func:`count_pieces`); other placements, and instances counted for ``data``, are
    counted PE by PE (a report-only cost, linear in the PEs and the instances)."""
    counted_sets: list[tuple[str, Fraction, list[tuple[isl.Set, int]]]] = []
    per_pe: dict[tuple[int, ...], dict[str, Fraction]] | None = None
    for pstmt in model.statements:
        cycles = element_fraction(pstmt.stmt,
                                  model.graph.tensor(pstmt.stmt.target.tensor).dtype, config)
        placed = mapping.placement_of(pstmt.name)
        placed, domain = poly.align_params(placed, pstmt.domain)
        placed = placed.intersect_domain(domain)
        skippable = _skippable(pstmt, mapping, data)
        pieces = None if skippable else count_pieces(placed.reverse())
        if pieces is not None:
            counted_sets.append((pstmt.name, cycles, pieces))
            continue
        per_pe = per_pe if per_pe is not None else {}
        if skippable:
            counts = _nonvanishing(pstmt, placed, skippable)
            for pe in poly.points(placed.range()):
                per_pe.setdefault(pe, {})[pstmt.name] = counts.get(pe, 0) * cycles
        else:
            for pe, count in _counted_one_by_one(placed):
                per_pe.setdefault(pe, {})[pstmt.name] = count * cycles
    if per_pe is None:
        work: list[Piece] = []
        for name, cycles, pieces in counted_sets:
            for pes, count in pieces:
                work = _overlay(work, pes, name, count * cycles)
        return work
    for name, cycles, pieces in counted_sets:  # PE by PE, since the others are
        for pes, count in pieces:
            for pe in _listed(pes):
                per_pe.setdefault(pe, {})[name] = count * cycles
    space = mapping.rectangle().get_space()
    return [Piece(isl.Set.from_point(point(space, pe)), per_stmt, pe)
            for pe, per_stmt in sorted(per_pe.items())]


def count_pieces(rel: isl.Map) -> list[tuple[isl.Set, int]] | None:
    """The sets of the domain of ``rel`` on which ``rel(a)`` has one constant number of
    points, and that number, when every ``rel(a)`` is a box whose extents are piecewise
    constant (the instances of a PE under a tiling, even or uneven; the elements of an
    external PE); else None. Independent of the number of points: isl gives each
    dimension's least and greatest value as functions of ``a``."""
    rel = rel.coalesce()
    domain = rel.domain()
    n_in, n_out = rel.dim(isl.dim_type.in_), rel.dim(isl.dim_type.out)
    pairs = rel.wrap()
    space = pairs.get_space()
    to_domain = isl.MultiAff.domain_map(rel.get_space())
    box = isl.Set.universe(space) if n_out else pairs
    pieces = [(domain, 1)]
    for k in range(n_out):
        low, high = rel.dim_min(k), rel.dim_max(k)
        var = isl.PwAff.from_aff(isl.Aff.var_on_domain(isl.LocalSpace.from_space(space),
                                                       isl.dim_type.set, n_in + k))
        box = box.intersect(var.ge_set(low.pullback_multi_aff(to_domain))).intersect(
            var.le_set(high.pullback_multi_aff(to_domain)))
        split = []
        for part, count in pieces:
            for where, extent in high.sub(low).intersect_domain(part).get_pieces():
                if where.is_empty():
                    continue
                if not extent.is_cst():
                    return None
                split.append((where, count * (int(extent.get_constant_val().to_python()) + 1)))
        pieces = split
    if not box.is_subset(pairs):
        return None
    return pieces


def _counted_one_by_one(placed: isl.Map) -> list[tuple[tuple[int, ...], int]]:
    """Instances per PE, PE by PE (at most :data:`MAX_LISTED_PES` of them)."""
    pes = placed.range()
    return [(pe, int(placed.intersect_range(isl.Set.from_point(point(pes.get_space(), pe)))
                     .domain().count_val().to_python()))
            for pe in _listed(pes)]


def _listed(pes: isl.Set) -> list[tuple[int, ...]]:
    """The points of ``pes`` in lexicographic order; beyond :data:`MAX_LISTED_PES`, those
    of its first columns (and rows) that fit the budget."""
    if pes.is_empty() or pes.count_val().to_python() <= MAX_LISTED_PES:
        return poly.points(pes)
    for dim in range(pes.dim(isl.dim_type.set)):
        low = pes.dim_min_val(dim)
        span = pes.dim_max_val(dim).sub(low).to_python() + 1
        later = 1
        for after in range(dim + 1, pes.dim(isl.dim_type.set)):
            later *= pes.dim_max_val(after).sub(pes.dim_min_val(after)).to_python() + 1
        keep = max(1, min(span, MAX_LISTED_PES // max(1, later)))
        pes = pes.upper_bound_val(isl.dim_type.set, dim, low.add(
            isl.Val.int_from_si(pes.get_ctx(), keep - 1)))
        if pes.count_val().to_python() <= MAX_LISTED_PES:
            break
    return poly.points(pes)


def _overlay(work: list[Piece], pes: isl.Set, name: str, cycles: Fraction) -> list[Piece]:
    """``work`` with ``cycles`` of statement ``name`` added on ``pes``: the sets are split
    where ``pes`` cuts them."""
    result: list[Piece] = []
    rest = pes
    for piece in work:
        both = piece.pes.intersect(pes)
        if not both.is_empty():
            result.append(Piece(both, {**piece.per_stmt, name: cycles}))
            rest = rest.subtract(piece.pes)
        alone = piece.pes.subtract(pes)
        if not alone.is_empty():
            result.append(Piece(alone, piece.per_stmt))
    if not rest.is_empty():
        result.append(Piece(rest, {name: cycles}))
    return result


def _first_pe(piece: Piece | isl.Set) -> tuple[int, ...]:
    """The lexicographically least PE of a set (ties of the terms go to it)."""
    if isinstance(piece, Piece):
        if piece.pe is not None:
            return piece.pe
        piece = piece.pes
    least = piece.lexmin()
    return tuple(int(least.dim_max_val(d).to_python())
                 for d in range(least.dim(isl.dim_type.set)))


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


NONVANISHING_LIMIT = 1 << 20  # instances listed to count those a zero skips (each a
# Python tuple: about 14 seconds and 450 MB for 2^20 on this machine)


def _nonvanishing(pstmt: PolyStatement, placed: isl.Map,
                  skippable: list[tuple[isl.Map, np.ndarray]]) -> dict[tuple[int, ...], int]:
    """Per PE, the instances of ``pstmt`` whose every skippable read is nonzero: the
    instances listed with their PE and elements (a report-only cost, linear in them)."""
    relation = placed
    for access, _ in skippable:
        access, relation = poly.align_params(access, relation)
        relation = relation.range_product(access.intersect_domain(pstmt.domain))
    try:
        rows = np.array(poly.function_points(relation, limit=NONVANISHING_LIMIT),
                        dtype=np.int64)
    except poly.TooManyPointsError:
        return {}  # (too many to list: no work counted, so the bound stays a lower bound)
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


def _compute(work: list[Piece], least: Callable[[dict[str, Fraction]], Fraction]) -> Term:
    """Busiest PE: its statements' element operations over the SIMD width, with one
    SIMD configuration and start-up (or scalar, where that is less)."""
    if not work:
        return Term("compute", 0, "no instances")
    total = max(least(piece.per_stmt) for piece in work)
    busiest = [piece for piece in work if least(piece.per_stmt) == total]
    pe = min(_first_pe(piece) for piece in busiest)
    return Term("compute", math.ceil(total), f"PE[{pe[0]}, {pe[1]}]")


def _path(model: PolyModel, mapping: Mapping, config: FabricConfig, work: list[Piece],
          least: Callable[[dict[str, Fraction]], Fraction]) -> Term:
    """Per PE: its work cannot start before an element it reads can arrive (the nearest
    source of each streamed input an instance reads, the latest of those, the earliest
    over its statements; 0 for a statement with no streamed input), and its last result
    still has to reach a sink (the nearest sink of a streamed output a statement writes,
    the nearest over its statements; 0 if one writes none). The longest such path: for
    each set of PEs with equal work, the largest first + last hops, which isl finds."""
    streams = {s.tensor: s for s in mapping.streams}
    pes = mapping.rectangle()
    zero = isl.PwAff.from_aff(isl.Aff.zero_on_domain(isl.LocalSpace.from_space(
        pes.get_space()))).intersect_domain(pes)
    hops = {t: _hops(s.external_pes.range(), pes, config.hop_cycles)
            for t, s in streams.items() if not s.external_pes.is_empty()}
    first_of: dict[str, isl.PwAff] = {}
    last_of: dict[str, isl.PwAff] = {}
    for pstmt in model.statements:
        stmt = pstmt.stmt
        first = zero
        for tensor in sorted({r.tensor for r in stmt.reads}):
            if tensor in hops and streams[tensor].direction == "input":
                first = hops[tensor] if first is zero else first.max(hops[tensor])
        first_of[pstmt.name] = first
        out = streams.get(stmt.target.tensor)
        last_of[pstmt.name] = (hops[stmt.target.tensor] if out is not None and
                               out.direction == "output" and stmt.target.tensor in hops
                               else zero)
    best: tuple[int, tuple[int, ...], int, int] | None = None  # cycles, PE, first, last
    for piece in work:
        names = sorted(piece.per_stmt)
        first, last = first_of[names[0]], last_of[names[0]]
        for name in names[1:]:
            first, last = first.min(first_of[name]), last.min(last_of[name])
        compute = math.ceil(least(piece.per_stmt))
        if piece.pe is not None:  # one PE: its values
            there = isl.Point.zero(pes.get_space())
            for d, c in enumerate(piece.pe):
                there = there.set_coordinate_val(isl.dim_type.set, d,
                                                 isl.Val.int_from_si(pes.get_ctx(), c))
            pe, hops_in, hops_out = piece.pe, _eval(first, there), _eval(last, there)
        else:  # the PE of the set with the longest first + last hops
            around = first.add(last).intersect_domain(piece.pes)
            longest = poly.greatest(around)
            pe = _first_pe(piece.pes.intersect(
                around.eq_set(isl.PwAff.val_on_domain(piece.pes, longest))))
            at = isl.Set.from_point(point(pes.get_space(), pe))
            hops_in, hops_out = _value_at(first, at), _value_at(last, at)
        cycles = hops_in + compute + hops_out
        if best is None or (cycles, [-c for c in best[1]]) > (best[0], [-c for c in pe]):
            best = (cycles, pe, hops_in, hops_out)
    if best is None or best[0] <= 0:
        return Term("path", 0, "no instances")
    cycles, pe, first_hops, last_hops = best
    return Term("path", cycles, f"PE[{pe[0]}, {pe[1]}]: {counted(first_hops, 'cycle')} for "
                                f"the first input, then its compute, {last_hops} for the "
                                "last result")


def _hops(ends: isl.Set, pes: isl.Set, hop_cycles: int) -> isl.PwAff:
    """Cycles from each PE of ``pes`` to the nearest of ``ends``: the least ``d`` with
    ``d >= +-dx +-dy`` for some end, as a function isl gives (whatever the number of
    PEs)."""
    pairs = isl.Map.from_domain_and_range(pes, ends)
    distance = isl.Map(
        "{ [PE[px, py] -> PE[ex, ey]] -> [d] : d >= ex - px + ey - py and "
        "d >= px - ex + ey - py and d >= ex - px + py - ey and d >= px - ex + py - ey }",
        context=pes.get_ctx())
    nearest = pairs.domain_map().reverse().apply_range(distance).dim_min(0)
    return nearest.scale_val(isl.Val.int_from_si(pes.get_ctx(), hop_cycles))


def _value_at(value: isl.PwAff, at: isl.Set) -> int:
    return int(poly.greatest(value.intersect_domain(at)).to_python())


def _eval(value: isl.PwAff, at: isl.Point) -> int:
    return int(value.eval(at).to_python())


def _injection(mapping: Mapping, data: Values[str, np.ndarray]) -> Term:
    """Busiest link between an external PE and the rectangle: the elements every stream
    through it sends or receives (a sparse stream's nonzero ones, where ``data`` has the
    tensor's values), one wavelet per cycle. Streams that share an external PE share its
    link (inputs in, outputs out: the two directions are separate links). Counted per
    set of external PEs with equal counts (:func:`count_pieces`) where the elements of
    each form boxes, else element by element."""
    per_link: dict[str, list[Piece]] = {}
    listed: dict[str, dict[tuple[int, ...], dict[str, Fraction]]] = {}
    for stream in mapping.streams:
        values = data.get(stream.tensor) if stream.kind == "sparse" else None
        pieces = None if values is not None else count_pieces(stream.external_pes.reverse())
        if pieces is not None:
            links = per_link.setdefault(stream.direction, [])
            for ends, count in pieces:
                links[:] = _overlay(links, ends, stream.tensor, Fraction(count))
            continue
        one_by_one = listed.setdefault(stream.direction, {})
        for pair in poly.points(stream.external_pes.wrap()):
            if values is None or np.asarray(values)[pair[:-2]] != 0:
                tensors = one_by_one.setdefault(pair[-2:], {})
                tensors[stream.tensor] = tensors.get(stream.tensor, Fraction(0)) + 1
    space = mapping.rectangle().get_space()
    for direction, one_by_one in listed.items():  # then the others PE by PE too
        for link in per_link.pop(direction, []):
            for ext in _listed(link.pes):
                one_by_one.setdefault(ext, {}).update(link.per_stmt)
        per_link[direction] = [Piece(isl.Set.from_point(point(space, ext)), tensors, ext)
                               for ext, tensors in sorted(one_by_one.items())]
    best: tuple[int, tuple[int, ...], str] | None = None  # count, PE, what
    for direction, links in sorted(per_link.items()):
        for link in links:
            tensors = link.per_stmt
            count = int(link.cycles)
            ext = _first_pe(link)
            if best is None or (count, [-c for c in best[1]]) > (best[0], [-c for c in ext]):
                names = " + ".join(f"{t} {int(n)}" for t, n in sorted(tensors.items())) \
                    if len(tensors) > 1 else next(iter(tensors))
                best = (count, ext, f"{direction} {names}")
    if best is None or best[0] == 0:
        return Term("injection", 0, "no streams")
    count, ext, what = best
    return Term("injection", count, f"{what} at PE[{ext[0]}, {ext[1]}]")


def _ramp(model: PolyModel, mapping: Mapping, data: Values[str, np.ndarray]) -> Term:
    """Busiest core: every element of a streamed input that a PE's instances read
    reaches its core down the ramp from its router, one wavelet per cycle (a sparse
    stream's nonzero ones, where ``data`` has the tensor's values), whatever routes and
    tasks the code uses; elements the PE only passes on do not count. Per set of PEs
    with equal counts where each PE reads a box of every stream (:func:`count_pieces`),
    else PE by PE."""
    pieces: list[Piece] = []
    listed: dict[tuple[int, ...], dict[str, Fraction]] = {}
    for stream in mapping.streams:
        if stream.direction != "input":
            continue
        read = _read_by_arithmetic(model, mapping, stream.tensor)
        if read is None:
            continue
        values = data.get(stream.tensor) if stream.kind == "sparse" else None
        counts = None if values is not None else count_pieces(read)
        if counts is not None:
            for pes, count in counts:
                pieces = _overlay(pieces, pes, stream.tensor, Fraction(count))
            continue
        for pe in _listed(read.domain()):
            at = read.intersect_domain(isl.Set.from_point(point(read.get_space().domain(), pe)))
            if values is None:
                count = int(at.range().count_val().to_python())
            else:
                try:
                    elements = poly.points(at.range(), limit=NONVANISHING_LIMIT)
                except poly.TooManyPointsError:
                    continue  # (not counted: the bound stays a lower bound)
                count = sum(1 for e in elements if np.asarray(values)[e] != 0)
            listed.setdefault(pe, {})[stream.tensor] = Fraction(count)
    if listed:  # then the others PE by PE too
        for piece in pieces:
            for pe in _listed(piece.pes):
                listed.setdefault(pe, {}).update(piece.per_stmt)
        space = mapping.rectangle().get_space()
        pieces = [Piece(isl.Set.from_point(point(space, pe)), tensors, pe)
                  for pe, tensors in sorted(listed.items())]
    best: tuple[int, tuple[int, ...], str] | None = None  # count, PE, what
    for piece in pieces:
        count, pe = int(piece.cycles), _first_pe(piece)
        if best is None or (count, [-c for c in best[1]]) > (best[0], [-c for c in pe]):
            tensors = piece.per_stmt
            names = " + ".join(f"{t} {int(n)}" for t, n in sorted(tensors.items())) \
                if len(tensors) > 1 else next(iter(tensors))
            best = (count, pe, names)
    if best is None or best[0] == 0:
        return Term("ramp", 0, "no streamed inputs")
    count, pe, what = best
    return Term("ramp", count, f"{what} into PE[{pe[0]}, {pe[1]}]")


def _cut(model: PolyModel, mapping: Mapping) -> Term:
    """Busiest cut: every element of a tensor computed in the rectangle whose writers
    all lie on one side of a line between two columns (or rows) and one of whose
    readers (a statement's PE, or a streamed output's external PE) lies on the other
    side crosses that line at least once, one wavelet each, over as many links as the
    line has rows (columns). Elements with writers on both sides (partial results) are
    not counted (the bound stays a lower bound); meshes with more lines than
    :data:`MAX_CUT_LINES` are left out."""
    if max(mapping.width, mapping.height) > MAX_CUT_LINES:
        return Term("cut", 0, "not counted on meshes this large")
    moves: list[tuple[isl.Map, isl.Map, str]] = []  # writers, readers, tensor
    for tensor in model.graph.tensors:
        if model.graph.definer(tensor.name) is None:
            continue
        writers = accessing_pes(model, mapping, tensor.name, write=True)
        readers = accessing_pes(model, mapping, tensor.name, write=False)
        stream = next((st for st in mapping.streams if st.tensor == tensor.name
                       and st.direction == "output"), None)
        if stream is not None:
            readers = readers.union(stream.external_pes.align_params(readers.get_space()))
        if not readers.is_empty():
            moves.append((writers, readers, tensor.name))
    best = Term("cut", 0, "no tensor crosses the mesh")
    for axis, lines, links in ((0, mapping.width, mapping.height),
                               (1, mapping.height, mapping.width)):
        name = "column" if axis == 0 else "row"
        for line in range(lines - 1):
            sides = _sides(axis, line)
            for (_src, dst), way in zip((sides, sides[::-1]), (f"{name} {line + 1}",
                                                             f"{name} {line}"),
                                       strict=True):
                count = 0
                for writers, readers, _ in moves:
                    written = writers.domain()
                    alone = written.subtract(writers.intersect_range(dst).domain())
                    crossing = alone.intersect(readers.intersect_range(dst).domain())
                    if crossing.is_empty() or poly.set_box_hull(crossing) is None:
                        continue  # (unbounded or no box: not counted)
                    count += int(crossing.count_val().to_python())
                cycles = -(-count // links)
                if cycles > best.cycles:
                    best = Term("cut", cycles, f"{counted(count, 'element')} across the "
                                f"line between {name}s {line} and {line + 1} toward {way}, "
                                f"over {counted(links, 'link')}")
    return best


MAX_CUT_LINES = 64  # a mesh's columns (rows) up to which the cut term is counted


def _sides(axis: int, line: int) -> tuple[isl.Set, isl.Set]:
    """The PEs (inside the rectangle or beyond it) up to ``line`` along ``axis``, and
    those after it."""
    space = isl.Space.set_alloc(isl.DEFAULT_CONTEXT, 0, 2).set_tuple_name(
        isl.dim_type.set, "PE")
    universe = isl.Set.universe(space)
    up_to = universe.upper_bound_val(isl.dim_type.set, axis,
                                     isl.Val.int_from_si(isl.DEFAULT_CONTEXT, line))
    after = universe.lower_bound_val(isl.dim_type.set, axis,
                                     isl.Val.int_from_si(isl.DEFAULT_CONTEXT, line + 1))
    return up_to, after


def _read_by_arithmetic(model: PolyModel, mapping: Mapping, tensor: str) -> isl.Map | None:
    """``PE -> element``: the elements of ``tensor`` that statements read on each PE, but
    for copies to a streamed output (the element may pass the core by)."""
    outputs = {s.tensor for s in mapping.streams if s.direction == "output"}
    result: isl.Map | None = None
    for pstmt in model.statements:
        stmt = pstmt.stmt
        if tensor not in dict(pstmt.reads) or (
                stmt.op == "=" and isinstance(stmt.value, Read)
                and stmt.target.tensor in outputs):
            continue
        placed = mapping.placement_of(pstmt.name)
        access = pstmt.access(tensor)
        access, domain = poly.align_params(access, pstmt.domain)
        rel = access.intersect_domain(domain).reverse().apply_range(placed).reverse()
        result = rel if result is None else result.union(rel)
    return None if result is None else result.coalesce()


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
                        f"{stream.direction} {stream.tensor}: {counted(hops, 'hop')}")
    return best


def _linear(space: isl.Space, sx: int, sy: int) -> isl.Aff:
    ls = isl.LocalSpace.from_space(space)
    x = isl.Aff.var_on_domain(ls, isl.dim_type.set, 0).scale_val(
        isl.Val.int_from_si(space.get_ctx(), sx))
    y = isl.Aff.var_on_domain(ls, isl.dim_type.set, 1).scale_val(
        isl.Val.int_from_si(space.get_ctx(), sy))
    return x.add(y)



"""Partial results combined along segments of rows and columns (resident outputs and
internal tensors read after their reduction)."""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from dtg.lair.lower import CTX, PolyModel
from dtg.mapping import poly
from dtg.mapping.flows import (
    Colors,
    Exchange,
    Region,
    ResidentReduction,
    accessing_pes,
    exchange_axis,
)
from dtg.mapping.mesh import (
    Side,
    pe_map_space,
    pe_space,
    same_line,
)
from dtg.mapping.validate import Mapping


def resident_reduction(tensor: str, model: PolyModel, mapping: Mapping, compute: Region,
                       colors: Colors) -> tuple[list[ResidentReduction], Exchange | None]:
    """How the partial results of ``tensor`` are combined: not at all when every element
    has one writer; by chains along segments of one row or column, or along rows and
    then along the column of the row totals (or columns, then the row), for a sum over
    a 2-D grid of tiles; otherwise (writers anywhere) by sending every partial result
    to the least of its element's writers, which adds them up (a reducing exchange)."""
    writers = accessing_pes(model, mapping, tensor, write=True).apply_range(compute.to_relative())
    if writers.is_single_valued():
        return [], None
    for plan in ((None,), ("E", "S"), ("S", "E")):
        chains: list[ResidentReduction] = []
        held = writers
        for side in plan:
            red = _chain(tensor, held, side)
            if red is None:
                break
            chains.append(red)
            held = red.elements.intersect_domain(poly.pe_set(red.last)).reverse()
        else:
            if held.is_single_valued():
                return [_colored(red, tensor, colors) for red in chains], None
    return [], _reduce_to_keepers(tensor, writers, colors)


def _reduce_to_keepers(tensor: str, writers: isl.Map, colors: Colors) -> Exchange:
    """Every writer but the least sends its partial results of elements with several
    writers; the least keeps the total."""
    several = writers.lexmax().subtract(writers.lexmin()).domain()
    keeper = writers.intersect_domain(several).lexmin()  # element -> PE
    others = writers.intersect_domain(several).subtract(keeper)
    axis = exchange_axis(others.reverse().apply_range(keeper).deltas())
    return Exchange(tensor, axis, colors.take(f"partial results of '{tensor}'", tensor),
                    others.reverse().coalesce(), keeper.reverse().coalesce(), reduce=True)


def _colored(red: ResidentReduction, tensor: str, colors: Colors) -> ResidentReduction:
    first = colors.take(f"partial results of '{tensor}'", tensor)
    second = colors.take(f"partial results of '{tensor}'", tensor)
    return replace(red, tensor=tensor, colors=(first, second))


def _chain(tensor: str, writers: isl.Map, side: Side | None) -> ResidentReduction | None:
    """The chain combining the partial results ``writers`` (element -> PEs) along
    segments of rows (``side`` "E") or columns ("S"), or of whichever one line all
    sharing PEs lie on (``None``); ``None`` when they do not form such segments."""
    elements = writers.reverse()
    sharing = elements.apply_range(writers)  # PE -> PEs holding partials of its elements
    zero = isl.Val.int_from_si(CTX, 0)
    if side is not None:
        sharing = sharing.intersect(same_line(side))
    deltas = sharing.deltas()
    keep_x = deltas.is_subset(isl.Set.universe(deltas.get_space()).fix_val(
        isl.dim_type.set, 0, zero))
    keep_y = deltas.is_subset(isl.Set.universe(deltas.get_space()).fix_val(
        isl.dim_type.set, 1, zero))
    if side is None:
        if not (keep_x or keep_y):
            return None
        side = "S" if keep_x else "E"
    first, last = sharing.lexmin(), sharing.lexmax()
    along = 1 if side == "S" else 0
    consistent = elements.is_equal(first.apply_range(elements))
    contiguous = sharing.is_equal(_between(first, last, along))
    if not consistent or not contiguous:
        banded = _banded(writers, side, along)
        if banded is None:
            return None
        first, last, elements = banded
    bound = first.bind_domain(poly.multi_id(first.get_space().domain(), poly.PE_NAMES))
    start = bound.as_pw_multi_aff().get_pw_aff(along)
    here = _param_aff(start, poly.PE_NAMES[along])
    position = here.sub(start).coalesce()
    is_last = isl.Map.identity(pe_map_space()).intersect(last)
    last_set = is_last.domain().bind(poly.multi_id(pe_space(), poly.PE_NAMES)).params()
    return ResidentReduction(tensor, side, (0, 0), elements, position, last_set)


def _banded(writers: isl.Map, side: Side, along: int
            ) -> tuple[isl.Map, isl.Map, isl.Map] | None:
    """A chain over every writer of a line, where the PEs sharing elements overlap
    without holding the same ones (a skewed placement's band of partial sums): each PE
    passes on the elements of its whole line, those it computes no part of holding the
    neutral value, so that the last PE keeps every total. ``None`` unless the writers of
    each line are contiguous (a PE between them that computes nothing has no array to
    pass the sums through)."""
    pes = writers.range()
    line = same_line(side).intersect_domain(pes).intersect_range(pes)
    first, last = line.lexmin(), line.lexmax()
    if not line.is_equal(_between(first, last, along).intersect_range(pes)) or \
            not _between(first, last, along).range().is_subset(pes):
        return None
    return first, last, line.apply_range(writers.reverse()).coalesce()


def _param_aff(like: isl.PwAff, name: str) -> isl.PwAff:
    """The parameter ``name`` as a function on the (parameter) domain of ``like``."""
    space = like.get_domain_space()
    pos = space.find_dim_by_name(isl.dim_type.param, name)
    ls = isl.LocalSpace.from_space(space)
    return isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.param, pos))


def _between(first: isl.Map, last: isl.Map, along: int) -> isl.Map:
    """``PE -> PE'`` for every PE' of the line segment from ``first(PE)`` to ``last(PE)``."""
    line = isl.Map.universe(pe_map_space()).equate(isl.dim_type.in_, 1 - along,
                                                    isl.dim_type.out, 1 - along)
    lower = first.apply_range(_at_least(along))
    upper = last.apply_range(_at_least(along).reverse())
    return line.intersect(lower).intersect(upper)


def _at_least(along: int) -> isl.Map:
    """``PE[a] -> PE[b]`` with ``b >= a`` in coordinate ``along`` (others free)."""
    return isl.Map.universe(pe_map_space()).order_le(isl.dim_type.in_, along,
                                                      isl.dim_type.out, along)


def combine_partials(tensor: str, produced: isl.Map, needed: isl.Map, model: PolyModel,
                     mapping: Mapping, compute: Region, colors: Colors
                     ) -> tuple[list[ResidentReduction], Exchange | None, isl.Map]:
    """A statement may read an internal element only once it is complete. When elements
    have partial results on several PEs (an FC layer's ``y = W x`` split along a row) and
    some PE needs them, they are combined first (:func:`resident_reduction`). Returns the
    chains, the reducing exchange, and ``PE -> element`` of the complete elements: those
    with one writer where it computes them, the others where their totals are kept."""
    writers = produced.reverse()
    several = writers.lexmax().subtract(writers.lexmin()).domain()
    partial = needed.intersect_range(several)
    single = produced.subtract_range(several)
    if partial.is_empty():
        return [], None, single
    chains, gather = resident_reduction(tensor, model, mapping, compute, colors)
    if gather is not None:
        kept = gather.needed
    else:
        final = chains[-1]  # some element has several writers, so there is a chain
        kept = final.elements.intersect_domain(poly.pe_set(final.last))
    kept, single = poly.align_params(kept, single)
    return chains, gather, single.union(kept.intersect_range(several)).coalesce()

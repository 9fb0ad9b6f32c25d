"""Partial results combined along segments of rows and columns, in phases over a halo,
or by a reducing exchange (resident outputs, outputs, and internal tensors read after
their reduction), ending where the totals are wanted where a plan can."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from math import prod

import islpy as isl

from dtg.lair.lower import CTX, PolyModel
from dtg.mapping import poly
from dtg.mapping.flows import (
    Axis,
    Colors,
    Exchange,
    Region,
    ResidentReduction,
    accessing_pes,
    exchange_axis,
)
from dtg.mapping.mesh import (
    OPPOSITE_SIDE,
    Side,
    direct_entries,
    linear_map,
    pe_map_space,
    pe_space,
    same_line,
)
from dtg.mapping.validate import Mapping


def resident_reduction(tensor: str, model: PolyModel, mapping: Mapping, compute: Region,
                       colors: Colors, *, wanted: Sequence[isl.Map] = ()
                       ) -> tuple[list[ResidentReduction], list[Exchange]]:
    """How the partial results of ``tensor`` are combined: not at all when every element
    has one writer; by chains along segments of one row or column, or along rows and
    then along the column of the row totals (or columns, then the row), for a sum over
    a 2-D grid of tiles; in phases (rows, then columns: reducing exchanges to the
    westmost and northmost holders) where tiles overlap by a halo and the PEs so move
    :data:`HALO_ADVANTAGE` times fewer elements than along the chains; otherwise
    (writers anywhere) by sending every partial result to the PE where its element's
    sum starts, which adds them up (a reducing exchange).

    Chains flow east or south unless ``wanted`` (``PE -> element`` maps, the most
    wanted first: where the totals are read, or the lines they leave the rectangle
    along) says where the totals should end: then the first plan, in either direction
    along each line, that leaves every total some PE of a map wants on such a PE (a
    max-pool whose output leaves the west PE of each pair combines westwards, not
    eastwards and back)."""
    writers = accessing_pes(model, mapping, tensor, write=True).apply_range(compute.to_relative())
    if writers.is_single_valued():
        return [], []
    valid = [chains for plan in _plans(bool(wanted))
             if (chains := _planned(tensor, writers, plan)) is not None]
    phases = _keeper_phases(writers)
    if phases is not None and (not valid or _phases_volume(phases) * HALO_ADVANTAGE
                               < _chains_volume(valid[0])):
        # (overlapping tiles, a transposed convolution's: each PE sends the few
        # elements it shares to a neighbour, where a chain passes its whole line)
        return [], [_phase_exchange(tensor, *phase, colors, k)
                    for k, phase in enumerate(phases)]
    if not valid:
        path = _path_chain(writers, wanted)
        if path is not None:
            return [_colored(replace(path, tensor=tensor), tensor, colors)], []
        first = _first_writers(tensor, model, mapping, compute)
        return [], [_reduce_to_keepers(tensor, writers, first, colors)]
    if wanted:
        several = writers.lexmax().subtract(writers.lexmin()).domain()
        level = [next((k for k, want in enumerate(wanted)
                       if _misplaced(chains[-1], several, want) is None), len(wanted))
                 for chains in valid]
        valid = [chains for chains, lv in zip(valid, level, strict=True) if lv == min(level)]
        # (of those, one leaving the fewest totals off the most wanted PEs: no other
        # leaves a strict subset of its elements off them)
        off = [_misplaced(chains[-1], several, wanted[0]) for chains in valid]
        valid = [chains for chains, mine in zip(valid, off, strict=True)
                 if mine is None or not any(other is not None and other.is_strict_subset(mine)
                                            for other in off)] or valid
    return [_colored(red, tensor, colors) for red in valid[0]], []


# How many times fewer elements the PEs of a phased reduction must move than those of
# the chains, for the phases to be taken (the chains pipeline along their lines; the
# phases' blocks go one after the other).
HALO_ADVANTAGE = 4

Phase = tuple[isl.Map, isl.Map, Axis]  # senders, keepers (element -> PE), their lines


def _keeper_phases(writers: isl.Map) -> list[Phase] | None:
    """Partial results combined in place, first along rows and then along columns:
    in each line, the westmost (northmost) PE holding an element keeps its total and
    the others holding it send it theirs. None where some element is then still held
    on two PEs (its writers on neither one row nor one column of a holder)."""
    held = writers
    phases: list[Phase] = []
    lines: tuple[tuple[Side, Axis], ...] = (("E", "row"), ("S", "column"))
    for side, axis in lines:
        holder = held.range_map()  # [element -> PE] -> PE
        others = held.domain_map().apply_range(held)  # [element -> PE] -> its holders
        keeper = others.intersect(holder.apply_range(same_line(side))).lexmin()
        sending = keeper.subtract(holder)  # [element -> PE] -> the keeper, another PE
        if sending.is_empty():
            continue
        senders = sending.domain().unwrap()
        keepers = sending.domain_factor_domain()
        phases.append((senders.coalesce(), keepers.coalesce(), axis))
        held = held.subtract(senders)
    return phases if phases and held.is_single_valued() else None


def _phase_exchange(tensor: str, senders: isl.Map, keepers: isl.Map, axis: Axis,
                    colors: Colors, phase: int) -> Exchange:
    return Exchange(tensor, axis, colors.take(f"partial results of '{tensor}'", tensor),
                    senders.reverse(), keepers.reverse(), reduce=True, phase=phase)


def _phases_volume(phases: list[Phase]) -> int:
    """Elements a PE sends and keeps in the phases, at most (by their boxes)."""
    return sum(_per_pe_volume(senders.reverse()) + _per_pe_volume(keepers.reverse())
               for senders, keepers, _ in phases)


def _chains_volume(chains: list[ResidentReduction]) -> int:
    """Elements a PE passes on along the chains, at most (by their boxes)."""
    return sum(_per_pe_volume(red.elements) for red in chains)


def _per_pe_volume(rel: isl.Map) -> int:
    """The size of the box hull of ``rel``'s range per PE (``PE -> elements``); a
    large number where there is none."""
    box = poly.range_box_hull(rel)
    return prod(box.size) if box is not None else 1 << 40


Plan = tuple[tuple[Side | None, bool], ...]  # (side or None: either line, backwards)


def _plans(both_ways: bool) -> list[Plan]:
    """The chain plans in the order they are tried: along one line, then rows and then
    columns, then columns and then rows; eastwards and southwards first, and with
    ``both_ways`` the other directions after each."""
    shapes: list[tuple[Side | None, ...]] = [(None,), ("E", "S"), ("S", "E")]
    plans: list[Plan] = []
    for shape in shapes:
        ways = [(False,) * len(shape)]
        if both_ways:
            ways = [tuple(bool(b >> k & 1) for k in range(len(shape)))
                    for b in range(2 ** len(shape))]
        plans.extend(tuple(zip(shape, way, strict=True)) for way in ways)
    return plans


def _planned(tensor: str, writers: isl.Map, plan: Plan) -> list[ResidentReduction] | None:
    """The chains of ``plan``, each combining what the one before left; None unless
    they leave every total on one PE."""
    chains: list[ResidentReduction] = []
    held = writers
    for side, backwards in plan:
        red = _chain(tensor, held, side, backwards=backwards)
        if red is None:
            return None
        chains.append(red)
        held = red.elements.intersect_domain(poly.pe_set(red.last)).reverse()
    return chains if held.is_single_valued() else None


def _misplaced(last: ResidentReduction, several: isl.Set, wanted: isl.Map) -> isl.Set | None:
    """The elements with several writers that some PE of ``wanted`` (``PE -> element``)
    wants but that the chain ``last`` leaves on no such PE; None if there are none."""
    kept = last.elements.intersect_domain(poly.pe_set(last.last))
    want, several = poly.align_params(wanted, several)
    want = want.intersect_range(several)
    want, kept = poly.align_params(want, kept)
    off = kept.intersect_range(want.range()).subtract(want).range()
    return None if off.is_empty() else off


def _reduce_to_keepers(tensor: str, writers: isl.Map, first: isl.Map,
                       colors: Colors) -> Exchange:
    """Every writer of an element with several but its first (``first``: the PE of the
    instance that starts its sum) sends its partial results there, which keeps the
    total. (A rotated 3-D GEMM's partial blocks each go to the PE of the block's first
    ``k``: one block kept per PE, where the least writer kept them all.)"""
    several = writers.lexmax().subtract(writers.lexmin()).domain()
    first, several = poly.align_params(first, several)
    keeper = first.intersect_domain(several)  # element -> PE
    writers, keeper = poly.align_params(writers, keeper)
    others = writers.intersect_domain(several).subtract(keeper)
    axis = exchange_axis(others.reverse().apply_range(keeper).deltas())
    return Exchange(tensor, axis, colors.take(f"partial results of '{tensor}'", tensor),
                    others.reverse().coalesce(), keeper.reverse().coalesce(), reduce=True)


def _first_writers(tensor: str, model: PolyModel, mapping: Mapping, compute: Region
                   ) -> isl.Map:
    """``element -> PE`` (relative): where the first instance writing each element
    runs, the statements in program order and each one's instances in theirs."""
    result: isl.Map | None = None
    for stmt in model.statements:
        if stmt.stmt.target.tensor != tensor:
            continue
        first = stmt.access(tensor).reverse().lexmin().apply_range(
            mapping.placement_of(stmt.name)).apply_range(compute.to_relative())
        if result is None:
            result = first
        else:
            result, first = poly.align_params(result, first)
            result = result.union(first.subtract_domain(result.domain()))
    assert result is not None  # (the tensor has partial results, so writers)
    return result.coalesce()


def _colored(red: ResidentReduction, tensor: str, colors: Colors) -> ResidentReduction:
    first = colors.take(f"partial results of '{tensor}'", tensor)
    second = colors.take(f"partial results of '{tensor}'", tensor)
    return replace(red, tensor=tensor, colors=(first, second))


def _chain(tensor: str, writers: isl.Map, side: Side | None, *, backwards: bool = False
           ) -> ResidentReduction | None:
    """The chain combining the partial results ``writers`` (element -> PEs) along
    segments of rows (``side`` "E" or "W") or columns ("S" or "N"), or of whichever one
    line all sharing PEs lie on (``None``: eastwards or southwards, or with
    ``backwards`` westwards or northwards); ``None`` when they do not form such
    segments."""
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
        side = ("N" if backwards else "S") if keep_x else ("W" if backwards else "E")
    elif backwards:
        side = OPPOSITE_SIDE[side]
    reverse = side in ("N", "W")
    low, high = sharing.lexmin(), sharing.lexmax()
    along = 1 if side in ("S", "N") else 0
    first, last = (high, low) if reverse else (low, high)
    consistent = elements.is_equal(first.apply_range(elements))
    contiguous = sharing.is_equal(_between(low, high, along))
    if not consistent or not contiguous:
        banded = _banded(writers, side, along)
        if banded is None:
            return None
        low, high, elements = banded
        first, last = (high, low) if reverse else (low, high)
    bound = first.bind_domain(poly.multi_id(first.get_space().domain(), poly.PE_NAMES))
    start = bound.as_pw_multi_aff().get_pw_aff(along)
    here = _param_aff(start, poly.PE_NAMES[along])
    position = (start.sub(here) if reverse else here.sub(start)).coalesce()
    is_last = isl.Map.identity(pe_map_space()).intersect(last)
    last_set = is_last.domain().bind(poly.multi_id(pe_space(), poly.PE_NAMES)).params()
    return ResidentReduction(tensor, side, (0, 0), elements, position, last_set)


def _banded(writers: isl.Map, side: Side, along: int
            ) -> tuple[isl.Map, isl.Map, isl.Map] | None:
    """A chain over every writer of a line, where the PEs sharing elements overlap
    without holding the same ones (a skewed placement's band of partial sums): each PE
    passes on the elements of its whole line, those it computes no part of holding the
    neutral value, so that the last PE keeps every total. Returns the line's least and
    greatest PEs and what each PE holds; ``None`` unless the writers of each line are
    contiguous (a PE between them that computes nothing has no array to pass the sums
    through)."""
    pes = writers.range()
    line = same_line(side).intersect_domain(pes).intersect_range(pes)
    first, last = line.lexmin(), line.lexmax()
    if not line.is_equal(_between(first, last, along).intersect_range(pes)) or \
            not _between(first, last, along).range().is_subset(pes):
        return None
    return first, last, line.apply_range(writers.reverse()).coalesce()


def _path_chain(writers: isl.Map, wanted: Sequence[isl.Map]) -> ResidentReduction | None:
    """A chain through PEs on no one line: where the PEs holding partial results of the
    same elements all hold the same ones, one box, one per column over a contiguous range of
    columns (a GEMV on ``PE[j//32, (i//32 + j//32) mod 8]``: each block of ``y`` on a
    wrapped diagonal), each passes its block to the holder in the column before it (or
    after it), along its row and then that column, on the chain's two colors by parity
    (:func:`mesh.direct_entries` checks that the wavelets of one color never mix); or
    likewise one per row, to the row before or after. Of the directions, the first
    leaving every total on a PE of ``wanted``, if any, else westwards (northwards). None
    where that does not hold (then a reducing exchange sends each partial block to its
    keeper)."""
    elements = writers.reverse()
    sharing = elements.apply_range(writers)
    holders = sharing.domain()
    identity = isl.Map.identity(pe_map_space())
    sharing, identity = poly.align_params(sharing, identity)
    if not elements.is_equal(sharing.apply_range(elements)):
        return None  # (holders of different blocks overlapping)
    if not poly.rectangularity(poly.bind_pe(elements), index=()).rectangular:
        # (several blocks per PE, a rotated 3-D GEMM's diagonal: every PE of a chain
        # would pass them all and its last keep them all, where a reducing exchange
        # sends each to a keeper of its own)
        return None
    chains = []
    lines: tuple[tuple[int, tuple[Side, Side]], ...] = ((0, ("W", "E")), (1, ("N", "S")))
    for axis, sides in lines:
        line = same_line("S" if axis == 0 else "E")  # (the same column, the same row)
        if not sharing.intersect(line.align_params(sharing.get_space())).is_subset(identity):
            continue  # (two holders in one column, or row)
        for side in sides:
            chain = _path_along(sharing, elements, holders, axis, side)
            if chain is not None:
                chains.append(chain)
    if not chains:
        return None
    several = writers.lexmax().subtract(writers.lexmin()).domain()
    for want in wanted:
        for chain in chains:
            if _misplaced(chain, several, want) is None:
                return chain
    return chains[0]


def _path_along(sharing: isl.Map, elements: isl.Map, holders: isl.Set, axis: int,
                side: Side) -> ResidentReduction | None:
    """The path chain along coordinate ``axis`` flowing towards ``side``, or None where
    the holders of a block skip a column (row) or the routes of a color would mix."""
    sign = -1 if side in ("W", "N") else 1
    space = sharing.get_space()
    step = sharing.intersect(_next_along(axis, sign).align_params(space)).coalesce()
    ahead = sharing.intersect(_beyond(axis, sign).align_params(space))
    last = holders.subtract(ahead.domain())
    # (contiguous: each holder but the last passes to the very next column)
    if not step.domain().is_equal(holders.subtract(last)):
        return None
    # (each chain starts at its holder furthest from where it flows)
    coordinate = sharing.project_out(isl.dim_type.out, 1 - axis, 1)
    first = coordinate.lexmax() if sign < 0 else coordinate.lexmin()
    bound = first.bind_domain(poly.multi_id(first.get_space().domain(), poly.PE_NAMES))
    start = bound.as_pw_multi_aff().get_pw_aff(0)
    here = _param_aff(start, poly.PE_NAMES[axis])
    position = (start.sub(here) if sign < 0 else here.sub(start)).coalesce()
    even = position.mod_val(isl.Val.int_from_si(CTX, 2)).zero_set()
    senders = holders.subtract(last)
    even_pe, senders = poly.align_params(poly.pe_set(even), senders)
    if any(direct_entries(step.intersect_domain(part)) is None
           for part in (senders.intersect(even_pe), senders.subtract(even_pe))
           if not part.is_empty()):
        return None
    last_set = last.bind(poly.multi_id(pe_space(), poly.PE_NAMES))
    return ResidentReduction("", side, (0, 0), elements.intersect_domain(holders), position,
                             last_set, step)


def _next_along(axis: int, sign: int) -> isl.Map:
    """``PE -> PE'`` one step along coordinate ``axis`` (``sign`` 1: east or south), the
    other coordinate free."""
    return linear_map(pe_map_space(), eqs=[{("out", axis): 1, ("in", axis): -1, 1: -sign}])


def _beyond(axis: int, sign: int) -> isl.Map:
    """``PE -> PE'`` with ``PE'`` beyond ``PE`` along coordinate ``axis`` (``sign`` 1:
    east or south of it)."""
    return linear_map(pe_map_space(), ineqs=[{("out", axis): sign, ("in", axis): -sign,
                                              1: -1}])


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
                     mapping: Mapping, compute: Region, colors: Colors, *,
                     also: Sequence[isl.Map] = ()
                     ) -> tuple[list[ResidentReduction], list[Exchange], isl.Map]:
    """A statement may read an internal element only once it is complete. When elements
    have partial results on several PEs (an FC layer's ``y = W x`` split along a row) and
    some PE needs them, they are combined first (:func:`resident_reduction`), where
    they are needed if a plan of chains can leave them there, else on a PE of ``also``
    (``PE -> element``, the next best places) if one can. Returns the
    chains, the reducing exchanges, and ``PE -> element`` of the complete elements: those
    with one writer where it computes them, the others where their totals are kept."""
    writers = produced.reverse()
    several = writers.lexmax().subtract(writers.lexmin()).domain()
    partial = needed.intersect_range(several)
    single = produced.subtract_range(several)
    if partial.is_empty():
        return [], [], single
    chains, gathers = resident_reduction(tensor, model, mapping, compute, colors,
                                         wanted=[partial, *also])
    if gathers:  # (each sender's partial results gone to a keeper: the others hold totals)
        held = writers
        for ex in gathers:
            held, sent = poly.align_params(held, ex.produced.reverse())
            held = held.subtract(sent)
        kept = held.reverse()
    else:
        final = chains[-1]  # some element has several writers, so there is a chain
        kept = final.elements.intersect_domain(poly.pe_set(final.last))
    kept, single = poly.align_params(kept, single)
    return chains, gathers, single.union(kept.intersect_range(several)).coalesce()

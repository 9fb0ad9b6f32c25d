"""Streamed outputs: finished elements sent towards the external PE, directly or along a
reduction chain of the line (paper eq. (6))."""

from __future__ import annotations

import islpy as isl

from dtg.lair.lower import PolyModel
from dtg.mapping import poly
from dtg.mapping.exchanges import share
from dtg.mapping.flows import (
    Colors,
    Exchange,
    OutputFlow,
    Region,
    ResidentReduction,
    accessing_pes,
    chain_length,
    exchange_axis,
    shift_relation,
    to_line_position,
)
from dtg.mapping.inputs import entry_coordinate
from dtg.mapping.mesh import (
    VERTICAL,
    Side,
    inward,
    pe_map_space,
    same_line,
    translate,
)
from dtg.mapping.reductions import combine_partials
from dtg.mapping.validate import Mapping, Stream


def output_flow(stream: Stream, side: Side, model: PolyModel, mapping: Mapping,
                compute: Region, colors: Colors
                ) -> tuple[OutputFlow, list[Exchange], list[ResidentReduction]]:
    """How ``stream`` leaves: along a chain of the line of its external PE (partial
    results added on the way, PEs computing nothing adding the neutral value), or
    directly from the PE next to the side. Elements computed outside that line are
    first completed where they are computed (partial results combined along their
    segments) and then sent to the PE next to the side (an exchange); that PE sends them
    out. Returns the flow, the exchanges (partial results to their keepers, complete
    elements to the side) and the chains that combine partial results."""
    tensor = stream.tensor
    to_rel = compute.to_relative()
    writers = accessing_pes(model, mapping, tensor, write=True).apply_range(to_rel)
    relation = shift_relation(stream.relation, to_rel)
    dst = stream.external_pes.apply_range(to_rel)
    line = dst.apply_range(same_line(side)).intersect_range(compute.pes())
    # The compute PE next to the side in each element's line (an adapter line of the
    # same side, if any, passes the stream on).
    edge = dst.apply_range(to_line_position(side, entry_coordinate(side, compute))).apply_range(
        translate(*inward(side))).intersect_range(compute.pes())
    if not writers.is_subset(line):
        produced = writers.reverse()
        chains, gathers, complete = combine_partials(tensor, produced, edge.reverse(), model,
                                                    mapping, compute, colors,
                                                    also=[line.reverse()])
        if not gathers and _totals_in_lines(tensor, complete, writers, line, model):
            # (the totals lie in the exit lines: a chain along each passes them on, the
            # PEs holding none adding the neutral value, where an exchange would gather
            # them on one PE first)
            first = colors.take(f"output '{tensor}'", tensor)
            second = colors.take(f"output '{tensor}'", tensor)
            return (OutputFlow(tensor, stream.kind, side,
                               _last_color(side, compute, (first, second)), (first, second),
                               relation, True, line.range()), [], chains)
        target = _crossing(complete, edge, side, compute) or edge
        exchange = share(tensor, complete, target.reverse(), colors)
        color = colors.take(f"output '{tensor}'", tensor)
        exchanges = [*gathers, *([exchange] if exchange is not None else [])]
        return (OutputFlow(tensor, stream.kind, side, color, (color, color), relation, False,
                           target.range()), exchanges, chains)
    # Computed only next to the side: sent from there. Otherwise every PE of the line
    # takes part in a chain towards the side; PEs that compute no part of an element
    # add the neutral value their local array holds.
    chain = not writers.is_equal(edge)
    first = colors.take(f"output '{tensor}'", tensor)
    second = colors.take(f"output '{tensor}'", tensor) if chain else first
    senders = line.range() if chain else writers.range()
    last = _last_color(side, compute, (first, second)) if chain else first
    return (OutputFlow(tensor, stream.kind, side, last, (first, second), relation, chain,
                       senders), [], [])


def _totals_in_lines(tensor: str, complete: isl.Map, writers: isl.Map, line: isl.Map,
                     model: PolyModel) -> bool:
    """Whether each element's total, once partial results are combined, lies on one PE
    of its exit line, and no other PE of that line writes it (it holds the neutral value
    there), so that a chain along the line sends each total once: the GEMV whose row
    totals end in the column of its one exit PE. Not for a tensor another statement reads
    (an exchange could bring its elements to other PEs of the line)."""
    if any(tensor in dict(p.reads) for p in model.statements):
        return False
    holders = complete.reverse()  # element -> PE
    holders, line = poly.align_params(holders, line)
    if not holders.is_single_valued() or not holders.domain().is_equal(line.domain()) or \
            not holders.is_subset(line):
        return False
    writers, holders = poly.align_params(writers, holders)
    return bool(writers.intersect(line).is_subset(holders))


def _crossing(complete: isl.Map, edge: isl.Map, side: Side, compute: Region
              ) -> isl.Map | None:
    """``element -> PE`` where each element of an exit line is gathered instead of the PE
    next to the side: the PE of that line in the line, across it, of the PEs holding the
    elements complete, where that is one line per exit line (a transpose whose blocks
    for an east exit row are computed down one column). The gathering then runs along
    those lines, not over the whole region, and that PE sends the elements out through
    the PEs beyond it, which pass them on. None where the gathering would not be along
    lines, or where the PEs next to the side each gather from one holder (straight, by
    an exchange without turns: no slower)."""
    holder = complete.reverse()
    across: Side = "E" if side in VERTICAL else "N"
    target = holder.apply_range(same_line(across)).intersect(
        edge.apply_range(same_line(side))).coalesce()
    target, edge = poly.align_params(target, edge)
    if not target.is_single_valued() or not target.domain().is_equal(edge.domain()):
        return None
    pes = target.range()
    if not pes.is_subset(compute.pes()) or pes.is_equal(edge.range()):
        return None
    identity = isl.Map.identity(pe_map_space())
    pes, identity = poly.align_params(pes, identity)
    if not same_line(side).intersect_domain(pes).intersect_range(pes).subtract(
            identity).is_empty():
        return None  # (two PEs would send along one exit line)
    to_target = holder.reverse().apply_range(target)  # holder -> where it sends
    to_edge = holder.reverse().apply_range(edge)
    identity = identity.intersect_domain(to_edge.domain()).intersect_range(to_edge.range())
    if exchange_axis(to_target.deltas()) == "region" or \
            exchange_axis(to_edge.deltas()) != "region" or \
            to_edge.subtract(identity).reverse().is_single_valued():
        return None  # (also where each PE next to the side has one holder to land
        # straight from, by an exchange without turns)
    return target


def _last_color(side: Side, region: Region, colors: tuple[int, int]) -> int:
    return colors[(chain_length(side, region) - 1) % 2]

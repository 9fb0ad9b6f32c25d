"""Streamed outputs: finished elements sent towards the external PE, directly or along a
reduction chain of the line (paper eq. (6))."""

from __future__ import annotations

from dtg.lair.lower import PolyModel
from dtg.mapping.exchanges import share
from dtg.mapping.flows import (
    Colors,
    Exchange,
    OutputFlow,
    Region,
    ResidentReduction,
    accessing_pes,
    chain_length,
    shift_relation,
    to_line_position,
)
from dtg.mapping.inputs import entry_coordinate
from dtg.mapping.mesh import (
    Side,
    inward,
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
        chains, gather, complete = combine_partials(tensor, produced, edge.reverse(), model,
                                                    mapping, compute, colors)
        exchange = share(tensor, complete, edge.reverse(), colors)
        color = colors.take(f"output '{tensor}'", tensor)
        exchanges = [e for e in (gather, exchange) if e is not None]
        return (OutputFlow(tensor, stream.kind, side, color, (color, color), relation, False,
                           edge.range()), exchanges, chains)
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


def _last_color(side: Side, region: Region, colors: tuple[int, int]) -> int:
    return colors[(chain_length(side, region) - 1) % 2]

"""Streamed outputs: finished elements sent towards the external PE, directly or along a
reduction chain of the line (paper eq. (6))."""

from __future__ import annotations

from lair.lower import PolyModel
from mapping.flows import (
    Colors,
    OutputFlow,
    Region,
    accessing_pes,
    chain_length,
    shift_relation,
    unsupported,
)
from mapping.mesh import (
    SIDE_NAMES,
    VERTICAL,
    Side,
    fmt,
    inward,
    same_line,
    translate,
    witness,
)
from mapping.validate import Mapping, Stream


def output_flow(stream: Stream, side: Side, model: PolyModel, mapping: Mapping,
                 compute: Region, colors: Colors) -> OutputFlow:
    tensor = stream.tensor
    to_rel = compute.to_relative()
    writers = accessing_pes(model, mapping, tensor, write=True).apply_range(to_rel)
    relation = shift_relation(stream.relation, to_rel)
    dst = stream.external_pes.apply_range(to_rel)
    line = dst.apply_range(same_line(side)).intersect_range(compute.pes())
    if not writers.is_subset(line):
        off = writers.subtract(line).domain()
        e = witness(off)
        raise unsupported(tensor,
            f"output '{tensor}': element {fmt(tensor, e)} is computed outside the "
            f"{'row' if side not in VERTICAL else 'column'} of the external PE it leaves to; "
            f"it would need a flow across lines towards the {SIDE_NAMES[side]} side")
    edge = dst.apply_range(translate(*inward(side))).intersect_range(compute.pes())
    # Computed only next to the side: sent from there. Otherwise every PE of the line
    # takes part in a chain towards the side; PEs that compute no part of an element
    # add the neutral value their local array holds.
    chain = not writers.is_equal(edge)
    first = colors.take(f"output '{tensor}'")
    second = colors.take(f"output '{tensor}'") if chain else first
    senders = line.range() if chain else writers.range()
    last = _last_color(side, compute, (first, second)) if chain else first
    return OutputFlow(tensor, stream.kind, side, last, (first, second), relation, chain, senders)


def _last_color(side: Side, region: Region, colors: tuple[int, int]) -> int:
    return colors[(chain_length(side, region) - 1) % 2]

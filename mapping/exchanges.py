"""Internal tensors that PEs of a line share: each PE in turn sends what it computed."""

from __future__ import annotations

import islpy as isl

from dtg.lair.lower import PolyModel
from dtg.mapping import poly
from dtg.mapping.flows import (
    Colors,
    Exchange,
    Region,
    ResidentReduction,
    exchange_axis,
)
from dtg.mapping.reductions import combine_partials
from dtg.mapping.validate import Mapping


def plan_exchanges(model: PolyModel, mapping: Mapping, placement: dict[str, isl.Map],
                   compute: Region, colors: Colors
                   ) -> tuple[list[Exchange], list[ResidentReduction]]:
    """Internal tensors read on PEs that do not hold them complete, and how they move:
    partial results are first combined where their segments end (mapping.reductions);
    then, if some PE reads an element held complete on another, the holders share them
    along their rows, their columns, or over the whole region (each PE in turn)."""
    result = []
    combines = []
    for tensor in model.graph.tensors:
        if tensor.role != "internal":
            continue
        produced: isl.Map | None = None
        needed: isl.Map | None = None
        for pstmt in model.statements:
            if pstmt.stmt.target.tensor == tensor.name:
                rel = poly.elements_per_pe(placement[pstmt.name], pstmt.write, pstmt.domain)
                produced = rel if produced is None else produced.union(rel)
            if tensor.name in dict(pstmt.reads):
                rel = poly.elements_per_pe(placement[pstmt.name], pstmt.read(tensor.name),
                                           pstmt.domain)
                needed = rel if needed is None else needed.union(rel)
        assert produced is not None and needed is not None
        chains, gathers, complete = combine_partials(tensor.name, produced, needed, model,
                                                    mapping, compute, colors)
        combines.extend(chains)
        result.extend(gathers)
        exchange = share(tensor.name, complete, needed, colors)
        if exchange is not None:
            result.append(exchange)
    return result, combines


def share(tensor: str, complete: isl.Map, needed: isl.Map, colors: Colors) -> Exchange | None:
    """The exchange that brings PEs the elements they need (``PE -> element``) from those
    holding them complete; None when every PE holds what it needs (or what no PE
    holds: elements no statement writes)."""
    complete, needed = poly.align_params(complete, needed)
    # (elements no statement writes, a padding's border, are the tensor's initial
    # value on every PE: nothing to bring)
    missing = needed.subtract(complete).intersect_range(complete.range())
    if missing.is_empty():
        return None
    axis = exchange_axis(missing.apply_range(complete.reverse()).deltas())
    return Exchange(tensor, axis, colors.take(f"tensor '{tensor}' shared between PEs", tensor),
                    complete, needed)

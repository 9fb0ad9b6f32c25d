"""Internal tensors that PEs of a line share: each PE in turn sends what it computed."""

from __future__ import annotations

import islpy as isl

from lair.lower import CTX, PolyModel
from mapping import poly
from mapping.flows import (
    Axis,
    Colors,
    Exchange,
    Region,
    ResidentReduction,
)
from mapping.reductions import combine_partials
from mapping.validate import Mapping


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
        chains, complete = combine_partials(tensor.name, produced, needed, model, mapping,
                                            compute, colors)
        combines.extend(chains)
        exchange = share(tensor.name, complete, needed, colors)
        if exchange is not None:
            result.append(exchange)
    return result, combines


def share(tensor: str, complete: isl.Map, needed: isl.Map, colors: Colors) -> Exchange | None:
    """The exchange that brings PEs the elements they need (``PE -> element``) from those
    holding them complete; None when every PE holds what it needs."""
    complete, needed = poly.align_params(complete, needed)
    missing = needed.subtract(complete)
    if missing.is_empty():
        return None
    holder = complete.reverse()
    deltas = missing.apply_range(holder).deltas()
    zero = isl.Val.int_from_si(CTX, 0)
    along_row = deltas.is_subset(isl.Set.universe(deltas.get_space()).fix_val(
        isl.dim_type.set, 1, zero))
    along_column = deltas.is_subset(isl.Set.universe(deltas.get_space()).fix_val(
        isl.dim_type.set, 0, zero))
    axis: Axis = "row" if along_row else "column" if along_column else "region"
    return Exchange(tensor, axis, colors.take(f"tensor '{tensor}' shared between PEs"),
                    complete, needed)

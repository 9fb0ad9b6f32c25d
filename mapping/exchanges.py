"""Internal tensors that PEs of a line share: each PE in turn sends what it computed."""

from __future__ import annotations

import islpy as isl

from lair.lower import CTX, PolyModel
from mapping import poly
from mapping.flows import (
    Colors,
    Exchange,
    Region,
    ResidentReduction,
    unsupported,
)
from mapping.mesh import (
    fmt,
    witness,
)
from mapping.reductions import combine_partials
from mapping.validate import PE, Mapping


def plan_exchanges(model: PolyModel, mapping: Mapping, placement: dict[str, isl.Map],
               compute: Region, colors: Colors
               ) -> tuple[list[Exchange], list[ResidentReduction]]:
    """Internal tensors read on PEs that do not compute them (and how they move)."""
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
        combines.extend(combine_partials(tensor.name, produced, needed, model, mapping,
                                          compute, colors))
        missing = needed.subtract(produced)
        if missing.is_empty():
            continue
        where = witness(missing.wrap())
        what = (f"internal tensor '{tensor.name}': {fmt(PE, where[:2])} reads "
                f"{fmt(tensor.name, where[2:])}, which another PE computes")
        writer = produced.reverse()
        if not writer.is_single_valued():
            raise unsupported(tensor.name, f"{what}, and its elements are computed on several "
                              "PEs (partial results); combining them before sharing is not "
                              "supported yet")
        if not produced.domain().is_equal(compute.pes()):
            raise unsupported(tensor.name, f"{what}; sharing it needs every PE of the region "
                              f"{compute.describe()} to compute part of it")
        deltas = missing.apply_range(writer).deltas()
        zero = isl.Val.int_from_si(CTX, 0)
        along_row = deltas.is_subset(isl.Set.universe(deltas.get_space()).fix_val(
            isl.dim_type.set, 1, zero))
        along_column = deltas.is_subset(isl.Set.universe(deltas.get_space()).fix_val(
            isl.dim_type.set, 0, zero))
        if not (along_row or along_column):
            raise unsupported(tensor.name, f"{what} in another row and column; sharing "
                              "internal tensors across both is not supported yet")
        result.append(Exchange(tensor.name, "row" if along_row else "column",
                               colors.take(f"internal tensor '{tensor.name}'"), produced,
                               needed))
    return result, combines

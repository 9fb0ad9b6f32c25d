"""Streamed inputs: how each element reaches the PEs that read it.

Straight along the line of its source (direct), through a line of adapter PEs peeled off
the side (paper eq. (5)), or along multicast trees (mapping.multicast)."""

from __future__ import annotations

from math import prod

import islpy as isl

from lair.lower import CTX, PolyModel
from mapping import poly
from mapping.flows import (
    Adapter,
    Colors,
    InputFlow,
    Region,
    absolute,
    absolute_pes,
    accessing_pes,
    shift_relation,
    to_line_position,
    unsupported,
)
from mapping.mesh import (
    SIDE_NAMES,
    VERTICAL,
    Side,
    fmt,
    inward,
    pe_box,
    pe_space,
    point,
    same_line,
    translate,
    witness,
)
from mapping.validate import PE, Mapping, Stream, border_ring


def side_of(stream: Stream, width: int, height: int) -> Side:
    ext = stream.external_pes.range()
    lines: dict[Side, isl.Set] = {
        "N": pe_box(0, width - 1, -1, -1), "S": pe_box(0, width - 1, height, height),
        "W": pe_box(-1, -1, 0, height - 1), "E": pe_box(width, width, 0, height - 1),
    }
    for side, line in lines.items():
        if ext.is_subset(line):
            return side
    assert ext.is_subset(border_ring(width, height))
    raise unsupported(
        stream.tensor, f"{stream.direction} '{stream.tensor}' uses external PEs on several "
        f"sides of the rectangle ({ext}); each stream must use one side")


def require_entry(stream: Stream, side: Side, compute: Region,
                   adapters: dict[Side, Region], peeled: dict[Side, Region]) -> None:
    """A stream enters (or leaves) the rectangle through the compute region or the adapter
    line of its own side; a PE of another side's adapter line has no route for it."""
    entering = stream.external_pes.range().apply(translate(*inward(side)))
    own = absolute_pes(compute)
    if side in adapters:
        own = own.union(absolute_pes(adapters[side]))
    stray = entering.subtract(own)
    if stray.is_empty():
        return
    pe = witness(stray)
    at = isl.Set.from_point(point(stray.get_space(), pe))
    other = [s for s, r in peeled.items() if s != side and not absolute_pes(
        r).intersect(at).is_empty()]
    owner = (f"the adapter line peeled off the {SIDE_NAMES[other[0]]} side" if other else
             "a corner between adapter lines")
    raise unsupported(
        stream.tensor, f"{stream.direction} '{stream.tensor}' crosses the {SIDE_NAMES[side]} "
        f"border at {fmt(PE, pe)}, which belongs to {owner}; streams can cross only their "
        f"own side's adapter line: move its external PEs along the {SIDE_NAMES[side]} "
        "side, away from that corner")


def beside(line: Region, compute: Region, side: Side) -> Region:
    """The part of an adapter line beside the compute region."""
    if side in VERTICAL:
        return Region(line.name, compute.x0, line.y0, compute.width, 1)
    return Region(line.name, line.x0, compute.y0, 1, compute.height)


def peel_line(region: Region, side: Side, tensor: str) -> tuple[Region, Region]:
    """Split off the line of ``region`` along ``side``: (adapter line, rest)."""
    r = region
    if (side in VERTICAL and r.height < 2) or (side not in VERTICAL and r.width < 2):
        raise unsupported(tensor, f"input '{tensor}' needs adapter PEs on the "
                          f"{SIDE_NAMES[side]} border of {r.describe()} to spread its elements "
                          "to the lines that need them, but the rectangle has no line to spare "
                          "there; add a free line on that side")
    if side == "N":
        return Region("adapter_N", r.x0, r.y0, r.width, 1), Region(
            r.name, r.x0, r.y0 + 1, r.width, r.height - 1)
    if side == "S":
        return Region("adapter_S", r.x0, r.y0 + r.height - 1, r.width, 1), Region(
            r.name, r.x0, r.y0, r.width, r.height - 1)
    if side == "W":
        return Region("adapter_W", r.x0, r.y0, 1, r.height), Region(
            r.name, r.x0 + 1, r.y0, r.width - 1, r.height)
    return Region("adapter_E", r.x0 + r.width - 1, r.y0, 1, r.height), Region(
        r.name, r.x0, r.y0, r.width - 1, r.height)


def entry_coordinate(side: Side, region: Region) -> int:
    """Relative coordinate, across the region, of the external PEs on ``side``."""
    return {"N": -1, "W": -1, "S": region.height, "E": region.width}[side]


def _groups(order: isl.Map, sources: isl.Map) -> isl.Map:
    """``{ PE -> [outer index] }``: the outer index values each source sends."""
    n = int(order.dim(isl.dim_type.out))
    outer = order.project_out(isl.dim_type.out, n - 1, 1)
    return sources.reverse().apply_range(outer)


def _count_groups(order: isl.Map, sources: isl.Map, what: str, tensor: str) -> int:
    """End marks a receiver gets: the number of outer index tuples its source sends.

    Computed parametrically (the tuples per source must form a box of fixed size), so
    the work does not depend on how many sources there are."""
    if order.dim(isl.dim_type.out) == 1:
        return 1
    per_source = _groups(order, sources)
    bound = per_source.bind_domain(poly.multi_id(per_source.get_space().domain(),
                                                 poly.PE_NAMES))
    rect = poly.rectangularity(bound, index=())
    if not rect.rectangular or rect.constant_size is None:
        raise unsupported(
            tensor, f"{what}: the outer index values sent by an external PE do not form a box of "
            "one fixed size, so receivers cannot count them from end marks")
    return prod(rect.constant_size)


def input_flow(stream: Stream, side: Side, model: PolyModel, mapping: Mapping,
                compute: Region, adapter_line: Region | None, colors: Colors) -> InputFlow:
    tensor = stream.tensor
    to_rel = compute.to_relative()
    external_color = colors.take(f"input '{tensor}'")
    need = accessing_pes(model, mapping, tensor, write=False).apply_range(to_rel)
    sources_rel = stream.external_pes.apply_range(to_rel)
    groups = _count_groups(stream.order, stream.external_pes, f"input '{tensor}'", tensor)
    if stream.kind == "dense":
        require_consecutive(stream, tensor)
    if adapter_line is None:
        lines = sources_rel.apply_range(to_line_position(side, 0)).range()
        reach = lines.apply(same_line(side)).intersect(compute.pes())
        return InputFlow(tensor, stream.kind, side, external_color, external_color,
                         shift_relation(stream.relation, to_rel), stream.order, reach, None,
                         groups)
    # Adapters: each element goes down every line (column or row) that needs it.
    keep = 0 if side in VERTICAL else 1
    line_of = need.project_out(isl.dim_type.out, 1 - keep, 1)
    entry = entry_coordinate(side, compute)
    new_source = need.apply_range(to_line_position(side, entry))
    per_source = new_source.reverse().apply_range(stream.order)
    if stream.kind == "dense" and not poly.index_gaps(per_source).is_empty():
        point = witness(poly.index_gaps(per_source))
        line = "column" if side in VERTICAL else "row"
        raise unsupported(
            tensor, f"dense input '{tensor}' needs adapters, and the indices of the elements "
            f"that go down the {line} of {fmt(PE, absolute(compute, point[:2]))} skip "
            f"{fmt('index', point[2:])}; a dense wavelet carries no index, so its receivers "
            "count them: give the elements each line needs consecutive indices, or make the "
            "stream sparse")
    box = poly.range_box_hull(per_source)
    if box is None:
        raise unsupported(tensor,
            f"input '{tensor}': the indices sent down each line have no fixed-size box, so "
            "the adapters cannot re-index them")
    # [element -> line's source] -> index - offset(line), then element -> [source -> index].
    shifted = new_source.domain_map().apply_range(stream.order).sum(
        new_source.range_map().apply_range(isl.Map.from_multi_aff(box.offset)).neg())
    relation = shifted.curry().coalesce()
    if not relation.is_injective():
        raise unsupported(tensor,
            f"input '{tensor}': after re-indexing per line two elements share a (PE, index) "
            "pair; the adapters cannot spread this stream")
    sources = stream.external_pes.range()
    if not sources.is_singleton():
        raise unsupported(tensor,
            f"input '{tensor}' arrives from several external PEs ({sources}) and needs "
            "adapters; adapters spread a stream that enters at one PE")
    line_rel = adapter_line.to_relative()
    src_rel = witness(sources.apply(line_rel))
    source_pos = src_rel[keep]
    targets = line_of.range()
    span = (int(targets.dim_min_val(0).to_python()), int(targets.dim_max_val(0).to_python()))
    # Target test and new index at the adapters: functions of the arriving index.
    at_index = poly.bind_order(stream.order)
    target_set = at_index.apply(line_of).bind(
        poly.multi_id(isl.Space.set_alloc(CTX, 0, 1), [poly.PE_NAMES[keep]]))
    base: tuple[int, ...] = ()
    if stream.kind == "dense":
        base = _dense_base(stream.order, tensor)
    adapter = Adapter(adapter_line, side, external_color, source_pos, span, target_set, base)
    color = colors.take(f"input '{tensor}' below its adapters")
    # Every adapter of the span forwards the stream's end marks, so every line of the span
    # receives the stream (some lines may get no element).
    keep_box = (span, (0, compute.height - 1)) if side in VERTICAL else (
        (0, compute.width - 1), span)
    reach = pe_box(keep_box[0][0], keep_box[0][1], keep_box[1][0], keep_box[1][1])
    at_pe = isl.Map.from_multi_aff(box.offset).intersect_domain(
        _entry_pe(side, entry)).range().as_pw_multi_aff()
    wire_offset = tuple(at_pe.get_pw_aff(k) for k in range(at_pe.dim(isl.dim_type.out)))
    return InputFlow(tensor, stream.kind, side, external_color, color, relation, stream.order,
                     reach, adapter, groups, wire_offset)


def require_consecutive(stream: Stream, tensor: str) -> None:
    """A dense wavelet carries no index: receivers number the elements of each external
    PE (within a group of outer index values) by counting, so those indices must be
    consecutive."""
    sent = stream.external_pes.reverse().apply_range(stream.order)  # PE -> index
    gaps = poly.index_gaps(sent)
    if gaps.is_empty():
        return
    point = witness(gaps)
    pe, index = point[:2], point[2:]
    raise unsupported(
        tensor, f"dense input '{tensor}': the indices {fmt(PE, pe)} sends skip "
        f"{fmt('index', index)}; a dense wavelet carries no index, so its receivers number "
        "the elements of each external PE by counting: give them consecutive indices "
        "(in the innermost index dimension), or make the stream sparse")


def _entry_pe(side: Side, entry: int) -> isl.Set:
    """``[PE_X, PE_Y] -> { PE[PE_X, entry] }`` (or ``PE[entry, PE_Y]``): the external PE
    feeding the line of the PE with those coordinates."""
    keep = 0 if side in VERTICAL else 1
    pe = isl.Set.universe(pe_space()).fix_val(
        isl.dim_type.set, 1 - keep, isl.Val.int_from_si(CTX, entry))
    coordinate = isl.Map.identity(pe_space().map_from_set()).project_out(
        isl.dim_type.out, 1 - keep, 1)
    bound = coordinate.bind_range(poly.multi_id(coordinate.get_space().range(),
                                                [poly.PE_NAMES[keep]]))
    return pe.intersect(bound)


def _dense_base(order: isl.Map, tensor: str) -> tuple[int, ...]:
    indices = order.range()
    if order.dim(isl.dim_type.out) != 1:
        raise unsupported(tensor,
            f"dense input '{tensor}' with a multi-dimensional index needs adapters; only "
            "one-dimensional dense streams can be spread")
    rect = poly.rectangularity(indices)
    if not rect.rectangular:
        raise unsupported(tensor,
            f"dense input '{tensor}': its indices do not form an interval")
    lo = indices.dim_min_val(0).to_python()
    return (int(lo),)

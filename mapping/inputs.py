"""Streamed inputs: how each element reaches the PEs that read it.

Straight along the line of its source (direct), through a line of adapter PEs peeled off
the side (paper eq. (5)), or along multicast trees (mapping.multicast)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from math import prod

import islpy as isl

from dtg.errors import UnsupportedMappingError
from dtg.lair.lower import CTX, PolyModel
from dtg.mapping import affine, multicast, poly
from dtg.mapping.flows import (
    Adapter,
    Colors,
    InputFlow,
    Region,
    absolute,
    absolute_pes,
    accessing_pes,
    placed_pes,
    shift_relation,
    to_line_position,
    unsupported,
)
from dtg.mapping.mesh import (
    SIDE_NAMES,
    VERTICAL,
    Side,
    fmt,
    inward,
    lines_before,
    pe_box,
    pe_space,
    point,
    same_line,
    translate,
    upstream_of,
    witness,
)
from dtg.mapping.multicast import Tree, plan_multicast
from dtg.mapping.validate import PE, Mapping, Stream, border_ring

MAX_SEGMENTS = 8  # colors one straight stream's lines are cut into, at most
MIN_RAMP_SAVING = 64  # wavelets a PE's ramp must be spared to cut lines into segments
RAMP_MARGIN = 0.25  # ... and that share of the busiest link's wavelets


@dataclass(frozen=True)
class InputPlan:
    """Where every streamed input goes, and what that leaves for computing."""

    compute: Region
    adapters: tuple[Adapter, ...]
    flows: tuple[InputFlow, ...]
    adapter_regions: dict[Side, Region]  # beside the compute region
    peeled: dict[Side, Region]  # the whole lines peeled off


def plan_inputs(model: PolyModel, mapping: Mapping, colors: Colors, *,
                split: bool = True, segments: int = MAX_SEGMENTS,
                halos: bool = True) -> InputPlan:
    """Choose for every part of every input stream (one part per side it enters by) how
    its elements reach the PEs that read them:

    - *direct*: every element is read only in the line of its source;
    - *adapters* (the paper's eq. (5)): a border line free of instances is peeled off the
      side, and its PEs send each element down the lines that need it, re-indexed;
    - *multicast trees* otherwise: routers carry each source's elements along its row,
      then down the columns (or the reverse) to every PE that reads some of them, and
      those PEs keep what their instances read.
    """
    compute = Region("compute", 0, 0, mapping.width, mapping.height)
    placed = placed_pes(mapping)
    parts: list[tuple[str, Side, Stream]] = []
    for stream in mapping.streams:
        if stream.direction != "input":
            continue
        need = accessing_pes(model, mapping, stream.tensor, write=False)
        if need.is_empty():
            raise unsupported(stream.tensor,
                f"input '{stream.tensor}' is streamed in but no statement reads it")
        pieces = split_by_side(stream, mapping.width, mapping.height)
        for side, part in pieces:
            key = stream.tensor if len(pieces) == 1 else f"{stream.tensor}_{side}"
            parts.append((key, side, part))
    how: dict[str, str] = {}
    regions: dict[Side, Region] = {}
    for key, side, part in parts:
        need = accessing_pes(model, mapping, part.tensor, write=False).intersect_domain(
            part.relation.domain())
        if need.is_subset(part.external_pes.apply_range(same_line(side))):
            how[key] = "direct"
            continue
        if side not in regions:
            peeled = _peel_if_free(compute, side, placed, _entries_besides(mapping, side),
                                   mapping)
            if peeled is not None and _adapters_fit(part, side, model, mapping, *peeled):
                regions[side], compute = peeled
        fits = side in regions and _adapters_fit(
            part, side, model, mapping, regions[side], compute)
        how[key] = "adapters" if fits else "tree"
    # A line peeled before another side's spans that side's line too; its PEs along the
    # line are numbered like the compute region's, so it keeps only the part beside it.
    beside_regions = {side: beside(region, compute, side) for side, region in regions.items()}
    for stream in mapping.streams:
        for side, part in split_by_side(stream, mapping.width, mapping.height):
            require_entry(part, side, compute, beside_regions, regions)
    flows: list[InputFlow] = []
    ramp_binds = split and any(how[key] == "direct" for key, _, _ in parts) and \
        _ramp_binds(parts, model, mapping, compute)
    def plan(key: str, side: Side, part: Stream, way: str, colors: Colors
             ) -> list[InputFlow]:
        if way == "tree":
            cut = halo_split(part, side, model, mapping, compute) if split and halos \
                else None
            trees = [flow for piece in (cut or [part])
                     for flow in tree_flows(piece, side, model, mapping, compute, colors,
                                            split=split)]
            return [replace(flow, key=key if len(trees) == 1 else f"{key}_{k}",
                            halo=cut is not None) for k, flow in enumerate(trees)]
        if way == "direct" and split and ramp_binds:
            segmented = segment_flows(key, part, side, model, mapping, compute, colors,
                                      limit=segments)
            if segmented is not None:
                return segmented
        line = beside_regions[side] if way == "adapters" else None
        flow = input_flow(part, side, model, mapping, compute, line, colors)
        return [replace(flow, key=key, stream_relation=part.relation)]

    for key, side, part in parts:
        by_order = _order_parts(part) if split and how[key] != "adapters" else [part]
        runs = _wrapped_runs(part) if len(by_order) == 1 and split and \
            how[key] != "adapters" else None
        if runs is not None:
            # (a position in its group that wraps, which batches cannot use: a Cannon
            # skew's rotated rows, `(k - 8 (i // 8)) mod 32`, in their two runs, each
            # affine, where each is)
            trial = plan(key, side, part, how[key], Colors())
            ways = [_how_direct(run, side, model, mapping) for run in runs]
            if all(f.order_on_pe() is not None for f in trial) and \
                    not all(f.position_affine() for f in trial) and all(
                        f.position_affine() for k, run in enumerate(runs)
                        for f in plan(f"{key}_o{k}", side, run, ways[k], Colors())):
                for k, run in enumerate(runs):
                    flows.extend(plan(f"{key}_o{k}", side, run, ways[k], colors))
                continue
        if len(by_order) == 1 and split and how[key] != "adapters":
            classes = _residue_parts(part, accessing_pes(model, mapping, part.tensor,
                                                         write=False))
            if len(classes) > 1:
                # (an order affine on residue classes only: apart where each class's
                # flows then have a position a landing array can use and the whole's not)
                trial = plan(key, side, part, how[key], Colors())
                ways = [_how_direct(c, side, model, mapping) for c in classes]
                if not all(f.position_affine() for f in trial) and all(
                        f.position_affine() for k, c in enumerate(classes)
                        for f in plan(f"{key}_o{k}", side, c, ways[k], Colors())):
                    for k, c in enumerate(classes):
                        flows.extend(plan(f"{key}_o{k}", side, c, ways[k], colors))
                    continue
        if len(by_order) > 1:
            # (sources sending elements of several by_order of the order: apart where a
            # PE would otherwise count its position by a function written by cases, and
            # each piece then has one)
            trial = plan(key, side, part, how[key], Colors())
            ways = [_how_direct(piece, side, model, mapping) for piece in by_order]
            if any(f.order_on_pe() is None for f in trial) and all(
                    f.order_on_pe() is not None for k, piece in enumerate(by_order)
                    for f in plan(f"{key}_o{k}", side, piece, ways[k], Colors())):
                for k, piece in enumerate(by_order):
                    flows.extend(plan(f"{key}_o{k}", side, piece, ways[k], colors))
                continue
        flows.extend(plan(key, side, part, how[key], colors))
    flows = [replace(f, order=plain_order(f.order)) for f in flows]
    flows = _unique_names(flows, [t.name for t in model.graph.tensors])
    adapters = tuple(f.adapter for f in flows if f.adapter is not None)
    return InputPlan(compute, adapters, tuple(flows), beside_regions, regions)


def plain_order(order: isl.Map) -> isl.Map:
    """``order`` written as one function on its coalesced domain, with no division that is
    fixed there, where one such function gives all of it (``a mod 16`` on the rows
    ``48 .. 63`` and a trailing row's ``16`` are both ``a - 48``); ``order`` otherwise.
    The same relation: the sets built from it (a task's instances, a batch's window) then
    have no existential variables and no cases for isl to carry along."""
    domain = order.domain().coalesce()
    pieces: list[isl.MultiAff] = []
    order.as_pw_multi_aff().foreach_piece(lambda _s, ma: pieces.append(ma))
    for ma in pieces:
        plain = ma
        for d in range(ma.dim(isl.dim_type.out)):
            made = affine.affine_on(ma.get_at(d), domain)
            if made is not None:
                plain = plain.set_at(d, made)
        candidate = isl.Map.from_multi_aff(plain).intersect_domain(domain)
        if candidate.is_equal(order):
            return candidate.coalesce()
    return order


def _unique_names(flows: list[InputFlow], tensors: list[str]) -> list[InputFlow]:
    """The flows with names that no other flow and no tensor has: a flow name names its
    tasks and landing arrays, and a part's generated name (``a_1``, the second segment of
    ``a``) may be another tensor's (``a_1``, streamed whole). Generated names that clash
    take a trailing ``_`` until they do not."""
    used = set(tensors)
    named: list[InputFlow] = []
    for flow in flows:
        if flow.name == flow.tensor:
            named.append(flow)
            continue
        key = flow.name
        while key in used:
            key += "_"
        used.add(key)
        named.append(flow if key == flow.name else replace(flow, key=key))
    return named


def line_segments(stream: Stream, side: Side, model: PolyModel, mapping: Mapping,
                  compute: Region, *, limit: int = MAX_SEGMENTS) -> list[Stream]:
    """``stream``'s elements by how far down their line a reader is, nearest first.

    Static routes give a color to a PE's core whole or not at all: on one color, every
    PE of a line takes every wavelet of the line's stream, even where it reads a quarter
    of them. Elements whose farthest reader lies at the same place along the line form
    a segment (consecutive places merged down to ``limit``); on a color of
    its own, a segment's line ends at that reader, and a PE takes only the segments it
    reads from. Elements no PE reads go with the nearest segment."""
    to_rel = compute.to_relative()
    need = accessing_pes(model, mapping, stream.tensor, write=False).apply_range(
        to_rel).intersect_domain(stream.relation.domain())
    across = 0 if side in VERTICAL else 1
    place = need.project_out(isl.dim_type.out, across, 1)
    farthest = place.lexmax() if side in ("N", "W") else place.lexmin()
    reached = farthest.range()
    if reached.dim(isl.dim_type.param) or not reached.is_bounded():
        return [stream]
    values = sorted((v for (v,) in poly.points(reached)), reverse=side in ("S", "E"))
    if len(values) < 2:
        return [stream]
    per = -(-len(values) // max(1, limit))
    groups = [values[k:k + per] for k in range(0, len(values), per)]
    unread = stream.relation.domain().subtract(need.domain())
    segments = []
    for k, group in enumerate(groups):
        lo, hi = min(group), max(group)
        places = isl.Set.universe(reached.get_space()).lower_bound_val(
            isl.dim_type.set, 0, isl.Val.int_from_si(CTX, lo)).upper_bound_val(
            isl.dim_type.set, 0, isl.Val.int_from_si(CTX, hi))
        elements = farthest.intersect_range(places).domain()
        if k == 0:
            elements = elements.union(unread)
        segments.append(replace(stream, relation=stream.relation.intersect_domain(elements)))
    return segments


def halo_split(stream: Stream, side: Side, model: PolyModel, mapping: Mapping,
               compute: Region) -> list[Stream] | None:
    """``stream``'s elements that a PE off their source's line reads (a neighbour's halo),
    then the others (the last part); None where either part is empty, or either could
    not be a flow.

    A multicast tree carries every wavelet of its source to every PE it reaches: a row
    band's tree brings the whole band down the neighbouring row for the four rows of
    halo that row reads, on its links and down the ramps of its PEs. On colors of their
    own, the halo goes by a tree and the rest straight along the source's line, so the
    neighbours take only what they read: where that spares each of them, on average over
    the sources, :data:`MIN_RAMP_SAVING` wavelets and :data:`RAMP_MARGIN` of the stream.
    Where one halo part cannot be a flow (a row band's first rows read by the row above
    and its last rows by the row below: not one box of outer index values), the halo
    goes in two parts, what lines before the source's read and the rest of it. Dense
    streams only."""
    if stream.kind != "dense":
        # (a sparse stream's cut parts with quasi-affine orders, `index[e mod 10]` from
        # two sources, took isl minutes to plan in random tests: not cut)
        return None
    to_rel = compute.to_relative()
    elements = stream.relation.domain()
    need = accessing_pes(model, mapping, stream.tensor, write=False).apply_range(
        to_rel).intersect_domain(elements)
    own_line = stream.external_pes.apply_range(to_rel).apply_range(same_line(side))
    need, own_line = poly.align_params(need, own_line)
    halo = need.subtract(own_line).domain()
    if halo.is_empty():
        return None
    sources = max(1, int(stream.external_pes.range().count_val().to_python()))
    # Every source cut at the same places of its order first (the box around them, then
    # those places): each part then arrives alike on every PE, where a source sends no
    # halo; else each source's own halo (a dense part's indices must be consecutive).
    order, exact = poly.align_params(stream.order, halo)
    places = exact.apply(order)
    cuts: list[list[isl.Set]] = [
        [order.intersect_range(places).domain().intersect(elements)], [exact]]
    box = _bounding_box(places)
    if box is not None and not box.is_equal(places):
        # (first the box around those places: the rest is then a box on every source,
        # a few more elements going by the halo's trees)
        cuts.insert(0, [order.intersect_range(box).domain().intersect(elements)])
    before = need.intersect(stream.external_pes.apply_range(to_rel).apply_range(
        lines_before(side))).domain()
    before, exact = poly.align_params(before, exact)
    before = before.intersect(exact)
    # (two parts only for orders of up to two dimensions: with channels outermost, a
    # helper's conv -> relu -> pool chain was predicted faster cut and ran 2.5x slower)
    if not before.is_empty() and not before.is_equal(exact) and \
            int(stream.order.dim(isl.dim_type.out)) <= 2:
        cuts.append([before, exact.subtract(before)])
    for halos in cuts:
        cut = halos[0] if len(halos) == 1 else halos[0].union(halos[1])
        rest = elements.subtract(cut)
        if rest.is_empty():
            continue
        whole = int(elements.count_val().to_python()) / sources
        spared = whole - int(cut.count_val().to_python()) / sources
        if spared < max(MIN_RAMP_SAVING, RAMP_MARGIN * whole):
            continue  # (the neighbours read most of it: the colors and tasks would not pay)
        pieces = [replace(stream, relation=stream.relation.intersect_domain(part))
                  for part in (*halos, rest)]
        def plan(parts: list[Stream] = pieces) -> list[list[InputFlow]]:
            return [tree_flows(piece, side, model, mapping, compute, Colors())
                    for piece in parts]
        try:  # (where planning a cut's parts needs too many isl operations: not that cut)
            planned = poly.within_effort(HALO_EFFORT, plan)
        except UnsupportedMappingError:
            continue
        if planned is not None:
            return pieces
    return None


HALO_EFFORT = 2_000_000  # isl operations to plan the parts of a cut


def _bounding_box(s: isl.Set) -> isl.Set | None:
    """The smallest box around a bounded set without parameters, or None."""
    if s.is_empty() or s.dim(isl.dim_type.param) or not s.is_bounded():
        return None
    box = isl.Set.universe(s.get_space())
    for d in range(int(s.dim(isl.dim_type.set))):
        box = box.lower_bound_val(isl.dim_type.set, d, s.dim_min_val(d)).upper_bound_val(
            isl.dim_type.set, d, s.dim_max_val(d))
    return box


def _per_source(stream: Stream) -> float:
    """The wavelets an external PE of ``stream`` sends, on average."""
    elements = stream.relation.domain().count_val().to_python()
    sources = stream.external_pes.range().count_val().to_python()
    return float(elements) / max(1, int(sources))


def _ramp_binds(parts: list[tuple[str, Side, Stream]], model: PolyModel, mapping: Mapping,
                compute: Region) -> bool:
    """Whether a PE takes markedly more wavelets down its ramp (every part whose lines
    pass it, whole) than the busiest link into the rectangle carries (parts from one
    external PE share its link): by :data:`RAMP_MARGIN` of that link's load and by
    :data:`MIN_RAMP_SAVING` wavelets at least. Only then is cutting lines into segments
    worth their colors and the tasks each segment adds; otherwise the PEs take the
    streams as fast as they come."""
    if len(parts) < 2:
        return False
    sent = [_per_source(stream) for _, _, stream in parts]
    sources = [stream.external_pes.range() for _, _, stream in parts]
    lines = [_line_reach(stream, side, model, mapping, compute) for _, side, stream in parts]
    n = len(parts)
    link = max(sum(sent[j] for j in range(n) if not sources[j].intersect(sources[k]).is_empty())
               for k in range(n))
    ramp = max(sum(sent[j] for j in range(n) if not lines[j].intersect(lines[k]).is_empty())
               for k in range(n))
    return ramp - link >= max(MIN_RAMP_SAVING, link * RAMP_MARGIN)


def _line_reach(stream: Stream, side: Side, model: PolyModel, mapping: Mapping,
                compute: Region) -> isl.Set:
    """The compute PEs (relative) a straight stream's lines pass, each line as far as its
    farthest PE that needs an element (at least its first PE, where the stream enters):
    the PEs beyond it would only receive wavelets."""
    to_rel = compute.to_relative()
    need = accessing_pes(model, mapping, stream.tensor, write=False).apply_range(
        to_rel).intersect_domain(stream.relation.domain())
    sources_rel = stream.external_pes.apply_range(to_rel)
    lines = sources_rel.apply_range(to_line_position(side, 0)).range()
    reach = lines.apply(same_line(side)).intersect(compute.pes())
    first = {"N": 0, "W": 0, "S": compute.height - 1, "E": compute.width - 1}[side]
    entries = sources_rel.apply_range(to_line_position(side, first)).range()
    return reach.intersect(need.range().union(entries).apply(upstream_of(side)))


def segment_flows(key: str, stream: Stream, side: Side, model: PolyModel, mapping: Mapping,
                  compute: Region, colors: Colors, *, limit: int = MAX_SEGMENTS
                  ) -> list[InputFlow] | None:
    """A direct stream as one flow per segment of its lines (:func:`line_segments`), or
    None where it has one segment, or a segment could not be a flow of its own."""
    segments = line_segments(stream, side, model, mapping, compute, limit=limit)
    if len(segments) < 2:
        return None
    try:
        for segment in segments:
            tree_flows(segment, side, model, mapping, compute, Colors())
    except UnsupportedMappingError:
        return None
    flows = []
    for segment in segments:
        # (a straight tree: its routers pass the segment on, only its readers take it)
        flows += tree_flows(segment, side, model, mapping, compute, colors)
    return [replace(flow, key=f"{key}_{k}", apart=True, segmented=True)
            for k, flow in enumerate(flows)]


def _how_direct(stream: Stream, side: Side, model: PolyModel, mapping: Mapping) -> str:
    """``direct`` where every element of ``stream`` is read only in its source's line,
    else ``tree`` (as :func:`plan_inputs` chooses, adapters aside)."""
    need = accessing_pes(model, mapping, stream.tensor, write=False).intersect_domain(
        stream.relation.domain())
    return "direct" if need.is_subset(stream.external_pes.apply_range(same_line(side))) \
        else "tree"


def _order_parts(stream: Stream) -> list[Stream]:
    """``stream`` in parts, one per piece of its order, where an external PE sends
    elements of several pieces (a block, then a trailing element written apart: its PEs
    would count their position by a function written by cases, which neither batches
    nor cheap per-wavelet code can use); on colors of their own each part has one
    order. ``[stream]`` otherwise, or beyond :data:`MAX_ORDER_PARTS` pieces."""
    elements = stream.relation.domain()
    order = stream.order.intersect_domain(elements)
    pieces: list[tuple[isl.Set, isl.MultiAff]] = []
    order.as_pw_multi_aff().foreach_piece(lambda where, ma: pieces.append((where, ma)))
    if not 1 < len(pieces) <= MAX_ORDER_PARTS or any(
            isl.Map.from_multi_aff(ma).intersect_domain(elements).is_equal(order)
            for _, ma in pieces):
        return [stream]  # (one function serves: isl keeps equal ones apart at times)
    sources = stream.external_pes
    sent = [sources.intersect_domain(piece).range() for piece, _ in pieces]
    if all(a.intersect(b).is_empty() for k, a in enumerate(sent) for b in sent[k + 1:]):
        return [stream]  # (each source sends one piece: taken apart by source, if need be)
    return [replace(stream, relation=stream.relation.intersect_domain(piece))
            for piece, _ in pieces]


def _wrapped_runs(stream: Stream) -> list[Stream] | None:
    """``stream`` in parts, one per value of a division in the position within a group
    (an order of groups) that takes a few values over each external PE's elements: a
    rotated row, ``(k - 8 (i // 8)) mod 32``, is two runs (``k >= 8 (i // 8)``, then the
    rest), each affine in ``k``. None where there is no such division."""
    elements = stream.relation.domain()
    pieces: list[isl.MultiAff] = []
    stream.order.intersect_domain(elements).as_pw_multi_aff().foreach_piece(
        lambda _s, ma: pieces.append(ma))
    if len(pieces) != 1:
        return None
    order = pieces[0]
    sources = stream.external_pes
    n = order.dim(isl.dim_type.out)
    if n < 2:
        return None  # (one group per source: its batches take the order as it is)
    inner = order.get_at(n - 1)
    for div in (inner.get_div(d) for d in range(inner.dim(isl.dim_type.div))):
        if not div.involves_dims(isl.dim_type.in_, 0, div.dim(isl.dim_type.in_)):
            continue
        value = isl.PwAff.from_aff(div.floor()).intersect_domain(elements)
        by_source = sources.reverse().apply_range(isl.Map.from_pw_aff(value))
        if by_source.is_single_valued():
            continue  # (one value per source: its PEs see one function already)
        values = isl.Map.from_pw_aff(value).range()
        try:
            taken = poly.points(values, limit=MAX_ORDER_PARTS)
        except poly.TooManyPointsError:
            continue
        parts = []
        for (v,) in taken:
            constant = value.sub(value).add_constant_val(isl.Val.int_from_si(CTX, v))
            piece = value.eq_set(constant)  # (the elements where the division is v)
            parts.append(replace(stream, relation=stream.relation.intersect_domain(
                elements.intersect(piece))))
        return parts if len(parts) > 1 else None
    return None


def _residue_parts(stream: Stream, need: isl.Map) -> list[Stream]:
    """``stream`` in parts, one per piece of its order and residue class of the divisions
    of that piece that a reading PE (``need``: element -> PE) sees take several values,
    where there are up to :data:`MAX_RESIDUE_PARTS`: an order such as the odd positions
    first, then the even ones (``128 - 128 (i mod 2) + i // 2``), or a stride-4
    permutation, is affine on each class's lattice, so each part can land in batches.
    ``[stream]`` otherwise."""
    elements = stream.relation.domain()
    order = stream.order.intersect_domain(elements)
    pieces: list[tuple[isl.Set, isl.MultiAff]] = []
    order.as_pw_multi_aff().foreach_piece(lambda where, ma: pieces.append((where, ma)))
    need = need.intersect_domain(elements)
    parts: list[isl.Set] = []
    for where, ma in pieces:
        inner = ma.get_at(ma.dim(isl.dim_type.out) - 1)
        n = inner.dim(isl.dim_type.in_)
        classes = [where]
        for d in range(inner.dim(isl.dim_type.div)):
            division = inner.get_div(d)
            if not division.involves_dims(isl.dim_type.in_, 0, n):
                continue
            value = isl.Map.from_aff(division.floor()).intersect_domain(where)
            if need.reverse().apply_range(value.align_params(need.get_space())
                                          ).is_single_valued():
                continue  # (one value per reading PE: affine on each PE already)
            denominator = division.get_denominator_val()
            modulus = int(denominator.to_python())
            if len(parts) + len(classes) * modulus > MAX_RESIDUE_PARTS:
                return [stream]
            # (the numerator less the denominator times the floor: the residue)
            residue = division.scale_val(denominator).sub(
                division.floor().scale_val(denominator))
            classes = [c.intersect(residue.add_constant_val(isl.Val.int_from_si(
                residue.get_ctx(), -r)).zero_basic_set().to_set().align_params(c.get_space()))
                for c in classes for r in range(modulus)]
        parts.extend(c for c in classes if not c.is_empty())
    if len(parts) <= len(pieces):
        return [stream]
    return [replace(stream, relation=stream.relation.intersect_domain(c)) for c in parts]


MAX_RESIDUE_PARTS = 8  # parts of an order by its pieces' residue classes, at most
MAX_ORDER_PARTS = 4  # pieces of an order taken apart onto colors of their own, at most


def split_by_side(stream: Stream, width: int, height: int) -> list[tuple[Side, Stream]]:
    """The parts of ``stream`` whose external PEs lie on one side each."""
    ext = stream.external_pes
    parts = []
    for side, line in _side_lines(width, height).items():
        on_side = ext.intersect_range(line).domain()
        if on_side.is_empty():
            continue
        parts.append((side, replace(stream, relation=stream.relation.intersect_domain(
            on_side))))
    if len(parts) == 1:
        return [(parts[0][0], stream)]
    return parts


def _side_lines(width: int, height: int) -> dict[Side, isl.Set]:
    return {"N": pe_box(0, width - 1, -1, -1), "S": pe_box(0, width - 1, height, height),
            "W": pe_box(-1, -1, 0, height - 1), "E": pe_box(width, width, 0, height - 1)}


def _peel_if_free(compute: Region, side: Side, placed: isl.Set, entries: isl.Set,
                  mapping: Mapping) -> tuple[Region, Region] | None:
    """The border line of ``side`` and what remains, if the line runs no instances and
    no stream of another side enters or leaves through it (``entries``), nor through
    the part of another adapter line beside it (which peeling this line cuts off)."""
    peeled = peel_line(compute, side)
    if peeled is None:
        return None
    line, rest = peeled
    if not placed.intersect(absolute_pes(line)).is_empty():
        return None
    strip = (pe_box(0, mapping.width - 1, line.y0, line.y0) if side in VERTICAL else
             pe_box(line.x0, line.x0, 0, mapping.height - 1))
    if not entries.intersect(strip).is_empty():
        return None
    return line, rest


def _entries_besides(mapping: Mapping, side: Side) -> isl.Set:
    """The PEs where streams of the other sides enter or leave the rectangle."""
    result = isl.Set.empty(pe_space())
    for stream in mapping.streams:
        for other, part in split_by_side(stream, mapping.width, mapping.height):
            if other != side:
                result = result.union(part.external_pes.range().apply(
                    translate(*inward(other))))
    return result


def _adapters_fit(part: Stream, side: Side, model: PolyModel, mapping: Mapping,
                  line: Region, compute: Region) -> bool:
    """Whether adapters on ``line`` can spread ``part`` (one source, a box of indices per
    line, ...): planned once on the side, with colors that are not kept."""
    try:
        input_flow(part, side, model, mapping, compute, beside(line, compute, side), Colors())
    except UnsupportedMappingError:
        return False
    return True


def tree_flows(stream: Stream, side: Side, model: PolyModel, mapping: Mapping,
               compute: Region, colors: Colors, *, split: bool = True) -> list[InputFlow]:
    """One flow per color of the multicast trees that carry ``stream`` to its readers
    (``split``: sources of one color apart where their orders differ on the PEs they
    reach, :func:`_single_orders`)."""
    tensor = stream.tensor
    to_rel = compute.to_relative()
    need = accessing_pes(model, mapping, tensor, write=False).apply_range(to_rel)
    need = need.intersect_domain(stream.relation.domain())
    # A tree starts at the compute region's border: an adapter line of the same side
    # passes the stream straight through, so the tree's source is the PE beside it.
    sources = stream.external_pes.apply_range(to_rel).apply_range(
        to_line_position(side, entry_coordinate(side, compute)))
    if stream.kind == "dense":
        require_consecutive(stream, tensor)
    plan = plan_multicast(sources.reverse().apply_range(need).coalesce(), side)

    def flow_of(tree: Tree, color: int, note: str = "") -> InputFlow:
        elements = sources.intersect_range(tree.sources).domain()
        part = replace(stream, relation=stream.relation.intersect_domain(elements))
        groups = _count_groups(part.order, part.external_pes, f"input '{tensor}'", tensor)
        relation = sources.intersect_domain(elements).range_product(part.order)
        return _with_groups(InputFlow(
            tensor, stream.kind, side, color, color, relation, part.order, tree.ramp, None,
            groups or 0, stream_relation=part.relation, members=tree.members,
            parent=tree.parent, plan=plan.describe() + note, apart=bool(note)), groups)

    flows = []
    for tree in plan.trees:
        parts = [tree]
        if split and flow_of(tree, -1).order_on_pe() is None:
            parts = _single_orders(tree, lambda t: flow_of(t, -1).order_on_pe() is not None)
        note = "" if len(parts) == 1 else (
            f"; the sources of one of them apart on {len(parts)} colors, since they send "
            "different indices for their elements")
        for part in parts:
            color = colors.take(f"input '{tensor}' (multicast trees)", tensor)
            flows.append(flow_of(part, color, note))
    return flows


MAX_SPLIT = multicast.MAX_SPLIT  # sources of one color taken apart for their orders, at most


def _single_orders(tree: Tree, one_order: Callable[[Tree], bool]) -> list[Tree]:
    """``tree``'s sources in groups on whose PEs the stream's order is one function
    (``one_order``), each to take its own color: consecutive sources merged while their
    orders agree; ``tree`` itself where it has more than :data:`MAX_SPLIT` sources. A PE
    receiving one source's stream on a color whose sources send different indices for
    their elements (each PE's block of a stencil's input from the external PE beside
    it, the halo from its neighbour's) counts its position in the stream by a function
    of its coordinates that isl writes by piece, which neither batches nor cheap
    per-wavelet code can use."""
    if int(tree.sources.count_val().to_python()) > MAX_SPLIT:
        return [tree]
    groups: list[Tree] = []
    for src in poly.points(tree.sources):
        single = tree.restricted(isl.Set.from_point(point(tree.sources.get_space(), src)))
        if groups:
            merged = tree.restricted(groups[-1].sources.union(single.sources))
            if one_order(merged):
                groups[-1] = merged
                continue
        groups.append(single)
    return groups


def side_of(stream: Stream, width: int, height: int) -> Side:
    """The side an output stream leaves by (outputs use one side)."""
    ext = stream.external_pes.range()
    for side, line in _side_lines(width, height).items():
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


def peel_line(region: Region, side: Side) -> tuple[Region, Region] | None:
    """Split off the line of ``region`` along ``side``: (adapter line, rest); None when
    the region has no line to spare there."""
    r = region
    if (side in VERTICAL and r.height < 2) or (side not in VERTICAL and r.width < 2):
        return None
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


def _count_groups(order: isl.Map, sources: isl.Map, what: str, tensor: str) -> int | None:
    """End marks a receiver gets: the number of outer index tuples its source sends;
    None when that number differs between sources (uneven tiles: see
    :func:`receiver_groups`).

    Computed parametrically (the tuples per source must form a box), so the work does
    not depend on how many sources there are."""
    if order.dim(isl.dim_type.out) == 1:
        return 1
    per_source = _groups(order, sources)
    bound = per_source.bind_domain(poly.multi_id(per_source.get_space().domain(),
                                                 poly.PE_NAMES))
    rect = poly.rectangularity(bound, index=())
    if rect.dense and rect.constant_size is not None:
        return prod(rect.constant_size)
    if rect.dense:  # (a box whose size depends on the source: counted per receiver)
        return None
    raise unsupported(
        tensor, f"{what}: the outer index values sent by an external PE do not form a box, "
        "so receivers cannot count them from end marks (send each external PE's elements "
        "in an order whose outer index values are all the tuples of a box)")


def receiver_groups(flow: InputFlow) -> isl.PwAff:
    """The number of end marks each receiving PE gets, as a function of ``PE_X``,
    ``PE_Y``: the outer index tuples of its source, a box whose sizes vary with it."""
    arrivals = flow.arrivals()
    outer = arrivals.project_out(isl.dim_type.out, flow.index_dims - 1, 1)
    rect = poly.rectangularity(poly.bind_pe(outer), index=())
    if not rect.dense:
        raise unsupported(flow.tensor, f"input '{flow.tensor}': the outer index values reaching "
                          "a PE do not form a box, so they cannot be counted from end marks")
    count = rect.size.get_at(0)
    for d in range(1, rect.size.dim(isl.dim_type.out)):
        count = count.mul(rect.size.get_at(d))
    return count.coalesce()


def _with_groups(flow: InputFlow, groups: int | None) -> InputFlow:
    return flow if groups is not None else replace(flow, groups=receiver_groups(flow))


def input_flow(stream: Stream, side: Side, model: PolyModel, mapping: Mapping,
                compute: Region, adapter_line: Region | None, colors: Colors) -> InputFlow:
    tensor = stream.tensor
    to_rel = compute.to_relative()
    external_color = colors.take(f"input '{tensor}'", tensor)
    need = accessing_pes(model, mapping, tensor, write=False).apply_range(
        to_rel).intersect_domain(stream.relation.domain())
    groups = _count_groups(stream.order, stream.external_pes, f"input '{tensor}'", tensor)
    if stream.kind == "dense":
        require_consecutive(stream, tensor)
    if adapter_line is not None and (stream.index_dims != 1 or groups is None):
        raise unsupported(tensor, f"input '{tensor}' has a {stream.index_dims}-dimensional "
                          "index; adapters spread streams with a one-dimensional index only")
    if adapter_line is None:
        reach = _line_reach(stream, side, model, mapping, compute)
        return _with_groups(InputFlow(
            tensor, stream.kind, side, external_color, external_color,
            shift_relation(stream.relation, to_rel), stream.order, reach, None, groups or 0),
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
    box = poly.range_box_hull(per_source, affine=True)
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
    color = colors.take(f"input '{tensor}' below its adapters", tensor)
    # Every adapter of the span forwards the stream's end marks, so every line of the span
    # receives the stream (some lines may get no element).
    keep_box = (span, (0, compute.height - 1)) if side in VERTICAL else (
        (0, compute.width - 1), span)
    reach = pe_box(keep_box[0][0], keep_box[0][1], keep_box[1][0], keep_box[1][1])
    at_pe = isl.Map.from_multi_aff(box.offset).intersect_domain(
        _entry_pe(side, entry)).range().as_pw_multi_aff()
    wire_offset = tuple(at_pe.get_pw_aff(k) for k in range(at_pe.dim(isl.dim_type.out)))
    return InputFlow(tensor, stream.kind, side, external_color, color, relation, stream.order,
                     reach, adapter, 1, wire_offset)


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

"""Task graph construction (paper §4.2): regions, data flows, and the tasks that run them.

The mapping says where instances run and where tensors enter and leave the rectangle.
This module decides how data gets there: streamed inputs flow straight along a column
(or row) from the side they enter, or, when an element is needed in another column,
through a line of *adapter* PEs peeled off that side, which spread each element to the
column that needs it and re-index it (eq. (5)); reduction results flow along a row (or
column) towards the side they leave by (a reduction chain), or leave directly from the
PE next to that side. Everything is computed once with isl, parametric in the PE
coordinates, so the work does not grow with the rectangle.

A mapping that needs another pattern raises :class:`UnsupportedMappingError` naming the
tensor, the PEs and the flow it would need.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from math import prod
from typing import Literal

import islpy as isl
import networkx as nx

from lair.diagnostics import UnsupportedMappingError
from lair.graph import Stmt, vanishes_with
from lair.lower import CTX, PolyModel
from mapping import poly
from mapping.mesh import (
    FLOW_PORT,
    SIDE_NAMES,
    VERTICAL,
    Side,
    fmt,
    inward,
    pe_box,
    pe_map_space,
    pe_space,
    point,
    same_line,
    translate,
    witness,
)
from mapping.validate import PE, Mapping, Stream, border_ring


@dataclass(frozen=True)
class Region:
    """A rectangle of PEs; code inside it sees coordinates relative to its origin."""

    name: str
    x0: int
    y0: int
    width: int
    height: int

    def pes(self) -> isl.Set:
        """``{ PE[x, y] }`` in relative coordinates."""
        return pe_box(0, self.width - 1, 0, self.height - 1)

    def context(self) -> isl.Set:
        """The known constraints on ``PE_X``, ``PE_Y`` for PEs of this region."""
        return _region_context(self.width, self.height)

    def to_relative(self) -> isl.Map:
        """``{ PE[x, y] -> PE[x - x0, y - y0] }`` on absolute coordinates."""
        return translate(-self.x0, -self.y0)

    def describe(self) -> str:
        return (f"PE[{self.x0}:{self.x0 + self.width - 1}, {self.y0}:{self.y0 + self.height - 1}]")


@dataclass(frozen=True)
class Adapter:
    """A line of PEs peeled off a side that spreads a stream to the lines that need it."""

    region: Region
    side: Side
    in_color: int
    source: int  # position of the external source along the line (relative)
    span: tuple[int, int]  # first and last line position that receives elements
    target: isl.Set  # params PE_X or PE_Y (position in the line) and index: forward here
    index_base: tuple[int, ...]  # dense only: the index of the first arriving element


@dataclass(frozen=True)
class InputFlow:
    """How a streamed input reaches the compute PEs."""

    tensor: str
    kind: Literal["sparse", "dense"]
    side: Side
    external_color: int
    color: int  # the color compute PEs receive it on
    relation: isl.Map  # as the compute region receives it (relative coordinates), eq. (5)
    order: isl.Map  # the mapping's order, in which task instance sets are expressed (§5.1)
    lines: isl.Set  # compute PEs (relative) that receive it: the lines with a source
    adapter: Adapter | None
    groups: int  # end-of-sequence marks each receiving compute PE gets
    # original index = received index + wire_offset(PE_X, PE_Y), when adapters re-index
    wire_offset: tuple[isl.PwAff, ...] | None = None

    @property
    def index_dims(self) -> int:
        return int(self.order.dim(isl.dim_type.out))

    def reaching(self) -> isl.Map:
        """``{ t[e] -> PE[x, y] }``: the compute PEs each element passes (its line)."""
        ext = self.relation.range_factor_domain()
        return ext.apply_range(same_line(self.side)).intersect_range(self.lines)

    def arrivals(self) -> isl.Map:
        """``{ PE[x, y] -> index[...] }``: original index values arriving at compute PEs."""
        return self.reaching().reverse().apply_range(self.order).coalesce()

    def arrival_context(self) -> isl.Set:
        """The (PE_X, PE_Y, index...) combinations that occur: the context of task code."""
        arrivals = self.arrivals()
        bound = arrivals.bind_range(poly.multi_id(arrivals.get_space().range(),
                                                  poly.index_names(self.index_dims)))
        return bound.bind(poly.multi_id(bound.get_space(), poly.PE_NAMES)).params()


@dataclass(frozen=True)
class OutputFlow:
    """How a streamed output leaves the compute region."""

    tensor: str
    kind: Literal["sparse", "dense"]
    side: Side
    color: int  # color of the last hop into the external PE
    chain_colors: tuple[int, int]  # alternating colors of a reduction chain (same if none)
    relation: isl.Map  # relative coordinates, eq. (6)
    chain: bool  # partial results of every PE in the line are combined on the way
    senders: isl.Set  # compute PEs (relative) that take part

    def sent_by(self) -> isl.Map:
        """``{ PE[x, y] -> t[e] }``: the elements whose line each sending PE is in."""
        dst = self.relation.range_factor_domain()
        return dst.apply_range(same_line(self.side)).intersect_range(self.senders).reverse()


@dataclass(frozen=True)
class Task:
    """One entry of the task graph, as the compile report shows it."""

    name: str
    kind: Literal["compute", "communication", "init"]
    region: str
    pes: isl.Set
    statement: str | None = None
    trigger: str | None = None
    instances: isl.Set | None = None
    detail: str = ""


@dataclass(frozen=True)
class TaskGraph:
    model: PolyModel
    mapping: Mapping
    compute: Region
    adapters: tuple[Adapter, ...]
    inputs: tuple[InputFlow, ...]
    outputs: tuple[OutputFlow, ...]
    reductions: tuple[ResidentReduction, ...]
    placement: tuple[tuple[str, isl.Map], ...]  # relative to the compute region, eq. (10)
    tasks: tuple[Task, ...]
    graph: nx.DiGraph = field(compare=False)
    buffered: tuple[str, ...] = ()  # streamed inputs also kept in local memory
    exchanges: tuple[Exchange, ...] = ()  # internal tensors shared along lines
    # internal tensors whose partial results are combined before a statement reads them
    combines: tuple[ResidentReduction, ...] = ()

    def placement_of(self, statement: str) -> isl.Map:
        return dict(self.placement)[statement]

    def input_flow(self, tensor: str) -> InputFlow | None:
        return next((f for f in self.inputs if f.tensor == tensor), None)

    def output_flow(self, tensor: str) -> OutputFlow | None:
        return next((f for f in self.outputs if f.tensor == tensor), None)

    def format(self) -> str:
        lines = [f"compute region {self.compute.describe()}"]
        for a in self.adapters:
            lines.append(f"adapter region {a.region.describe()} ({a.side} side)")
        for name, rel in self.placement:
            lines.append(f"placement {name}: {rel}")
        for f in self.inputs:
            lines.append(f"input {f.tensor} {f.kind} color {f.color}: {f.relation}")
        for o in self.outputs:
            lines.append(f"output {o.tensor} {o.kind} color {o.color}: {o.relation}")
        for t in self.tasks:
            head = f"task {t.name} ({t.kind}, {t.region}"
            head += f", statement {t.statement}" if t.statement else ""
            head += f", trigger {t.trigger}" if t.trigger else ""
            lines.append(head + f"): pes {t.pes}")
            if t.instances is not None:
                lines.append(f"  instances {t.instances}")
            if t.detail:
                lines.append(f"  {t.detail}")
        return "\n".join(lines) + "\n"


@cache
def _region_context(width: int, height: int) -> isl.Set:
    """``[PE_X, PE_Y]`` inside a ``width`` x ``height`` region (asked for very often)."""
    pes = pe_box(0, width - 1, 0, height - 1)
    return poly.bind_range(isl.Map.from_range(pes), poly.PE_NAMES).params()


def unsupported(subject: str, message: str) -> UnsupportedMappingError:
    """The error for a flow the compiler cannot realize, about tensor or statement
    ``subject``."""
    return UnsupportedMappingError(message, subject=subject)


# ---------------------------------------------------------------- small isl helpers


def _to_line_position(side: Side, fixed: int) -> isl.Map:
    """``{ PE[a, b] -> PE[a, fixed] }`` (vertical flow) or ``PE[fixed, b]`` (horizontal)."""
    keep = 0 if side in VERTICAL else 1
    other = 1 - keep
    rel = isl.Map.universe(pe_map_space()).equate(isl.dim_type.in_, keep, isl.dim_type.out, keep)
    return rel.fix_val(isl.dim_type.out, other, isl.Val.int_from_si(CTX, fixed))


def _side_of(stream: Stream, width: int, height: int) -> Side:
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


def _need(model: PolyModel, mapping: Mapping, tensor: str, write: bool) -> isl.Map:
    """``{ t[e] -> PE[x, y] }``: PEs that read (or write) each element (absolute)."""
    result: isl.Map | None = None
    for stmt in model.statements:
        if write and stmt.stmt.target.tensor != tensor:
            continue
        if not write and tensor not in dict(stmt.reads):
            continue
        rel = stmt.access(tensor).reverse().apply_range(mapping.placement_of(stmt.name))
        result = rel if result is None else result.union(rel)
    if result is None:
        space = isl.Space.map_from_domain_and_range(
            model.tensor_set(tensor).get_space(), pe_space())
        return isl.Map.empty(space)
    return result.coalesce()


# ------------------------------------------------------------------------ colors


class _Colors:
    def __init__(self, limit: int = 24):
        self.next, self.limit = 0, limit

    def take(self, what: str) -> int:
        if self.next >= self.limit:
            raise UnsupportedMappingError(f"out of colors ({self.limit}) while routing {what}")
        self.next += 1
        return self.next - 1


# ---------------------------------------------------------------------- building


def build_task_graph(model: PolyModel, mapping: Mapping) -> TaskGraph:
    """Plan every data flow and task of ``mapping`` for ``model`` (paper §4.2)."""
    _require_defined_outputs(model)
    colors = _Colors()
    compute = Region("compute", 0, 0, mapping.width, mapping.height)
    placed = _placed_pes(mapping)
    streams_in = [s for s in mapping.streams if s.direction == "input"]
    sides = {s.tensor: _side_of(s, mapping.width, mapping.height) for s in mapping.streams}

    # Peel adapter lines first: they shrink the compute region for everyone.
    peel: dict[str, Side] = {}
    for stream in streams_in:
        side = sides[stream.tensor]
        need = _need(model, mapping, stream.tensor, write=False)
        if need.is_empty():
            raise unsupported(stream.tensor,
                f"input '{stream.tensor}' is streamed in but no statement reads it")
        direct = need.is_subset(stream.external_pes.apply_range(same_line(side)))
        if not direct:
            peel[stream.tensor] = side
    adapter_regions: dict[Side, Region] = {}
    for tensor, side in peel.items():
        if side in adapter_regions:
            continue
        peeled, compute = _peel(compute, side, tensor)
        busy = placed.intersect(_absolute_pes(peeled))
        if not busy.is_empty():
            raise unsupported(tensor,
                f"input '{tensor}' needs adapter PEs on the {SIDE_NAMES[side]} border "
                f"{peeled.describe()} to spread its elements to the lines that need them, but "
                f"{fmt(PE, witness(busy))} runs statement instances; leave that border "
                "line free of instances")
        adapter_regions[side] = peeled
    # A line peeled before another side's spans that side's line too; its PEs along the
    # line are numbered like the compute region's, so it keeps only the part beside it.
    peeled_lines = adapter_regions
    adapter_regions = {side: _beside(region, compute, side)
                       for side, region in adapter_regions.items()}
    for stream in mapping.streams:
        _require_entry(stream, sides[stream.tensor], compute, adapter_regions, peeled_lines)

    to_rel = compute.to_relative()
    placement = tuple((name, rel.apply_range(to_rel)) for name, rel in mapping.placement)
    inputs: list[InputFlow] = []
    adapters: list[Adapter] = []
    for stream in streams_in:
        line = adapter_regions[peel[stream.tensor]] if stream.tensor in peel else None
        flow = _input_flow(stream, sides[stream.tensor], model, mapping, compute, line, colors)
        inputs.append(flow)
        if flow.adapter is not None:
            adapters.append(flow.adapter)
    outputs = [
        _output_flow(s, sides[s.tensor], model, mapping, compute, colors)
        for s in mapping.streams if s.direction == "output"
    ]
    reductions = [r for tensor, direction in mapping.resident if direction == "output"
                  for r in _resident_reduction(tensor, model, mapping, compute, colors)]
    exchanges, combines = _exchanges(model, mapping, dict(placement), compute, colors)
    tasks, graph, buffered = _tasks(model, compute, placement, inputs, outputs,
                                    reductions + combines, mapping)
    for ex in exchanges:
        tasks.append(Task(f"exchange_{ex.tensor}", "communication", compute.name,
                          compute.pes(),
                          detail=f"each PE in turn sends the elements of {ex.tensor} it "
                                 f"computed along its {ex.axis}; the others keep those they "
                                 "read"))
    return TaskGraph(model, mapping, compute, tuple(adapters), tuple(inputs), tuple(outputs),
                     tuple(reductions), placement, tuple(tasks), graph, buffered,
                     tuple(exchanges), tuple(combines))


def _require_defined_outputs(model: PolyModel) -> None:
    """Every output element must be defined by some instance: the PEs produce only what
    the statements compute, so an element the program leaves at its initial value would
    be missing from the results."""
    for tensor in model.graph.outputs:
        pstmt = next(p for p in model.statements if p.stmt.target.tensor == tensor.name)
        shape = model.tensor_set(tensor.name)
        written = pstmt.write.range()
        shape, written = poly.align_params(shape, written)
        missing = shape.subtract(written)
        if missing.is_empty():
            continue
        raise UnsupportedMappingError(
            f"output '{tensor.name}': no instance of {pstmt.name} defines "
            f"{fmt(tensor.name, witness(missing))}; outputs the program defines only in "
            f"part are not supported (the PEs produce only computed elements): make the "
            f"statement define every element of '{tensor.name}', or declare the shape it "
            "defines",
            pstmt.stmt.loc, subject=tensor.name)


def _require_entry(stream: Stream, side: Side, compute: Region,
                   adapters: dict[Side, Region], peeled: dict[Side, Region]) -> None:
    """A stream enters (or leaves) the rectangle through the compute region or the adapter
    line of its own side; a PE of another side's adapter line has no route for it."""
    entering = stream.external_pes.range().apply(translate(*inward(side)))
    own = _absolute_pes(compute)
    if side in adapters:
        own = own.union(_absolute_pes(adapters[side]))
    stray = entering.subtract(own)
    if stray.is_empty():
        return
    pe = witness(stray)
    at = isl.Set.from_point(point(stray.get_space(), pe))
    other = [s for s, r in peeled.items() if s != side and not _absolute_pes(
        r).intersect(at).is_empty()]
    owner = (f"the adapter line peeled off the {SIDE_NAMES[other[0]]} side" if other else
             "a corner between adapter lines")
    raise unsupported(
        stream.tensor, f"{stream.direction} '{stream.tensor}' crosses the {SIDE_NAMES[side]} "
        f"border at {fmt(PE, pe)}, which belongs to {owner}; streams can cross only their "
        f"own side's adapter line: move its external PEs along the {SIDE_NAMES[side]} "
        "side, away from that corner")


def _beside(line: Region, compute: Region, side: Side) -> Region:
    """The part of an adapter line beside the compute region."""
    if side in VERTICAL:
        return Region(line.name, compute.x0, line.y0, compute.width, 1)
    return Region(line.name, line.x0, compute.y0, 1, compute.height)



def _placed_pes(mapping: Mapping) -> isl.Set:
    result = isl.Set.empty(pe_space())
    for _, rel in mapping.placement:
        result = result.union(rel.range())
    return result


def _absolute_pes(region: Region) -> isl.Set:
    return pe_box(region.x0, region.x0 + region.width - 1,
                   region.y0, region.y0 + region.height - 1)


def _peel(region: Region, side: Side, tensor: str) -> tuple[Region, Region]:
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


def _entry_coordinate(side: Side, region: Region) -> int:
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


def _input_flow(stream: Stream, side: Side, model: PolyModel, mapping: Mapping,
                compute: Region, adapter_line: Region | None, colors: _Colors) -> InputFlow:
    tensor = stream.tensor
    to_rel = compute.to_relative()
    external_color = colors.take(f"input '{tensor}'")
    need = _need(model, mapping, tensor, write=False).apply_range(to_rel)
    sources_rel = stream.external_pes.apply_range(to_rel)
    groups = _count_groups(stream.order, stream.external_pes, f"input '{tensor}'", tensor)
    if stream.kind == "dense":
        _require_consecutive(stream, tensor)
    if adapter_line is None:
        lines = sources_rel.apply_range(_to_line_position(side, 0)).range()
        reach = lines.apply(same_line(side)).intersect(compute.pes())
        return InputFlow(tensor, stream.kind, side, external_color, external_color,
                         _shift_relation(stream.relation, to_rel), stream.order, reach, None,
                         groups)
    # Adapters: each element goes down every line (column or row) that needs it.
    keep = 0 if side in VERTICAL else 1
    line_of = need.project_out(isl.dim_type.out, 1 - keep, 1)
    entry = _entry_coordinate(side, compute)
    new_source = need.apply_range(_to_line_position(side, entry))
    per_source = new_source.reverse().apply_range(stream.order)
    if stream.kind == "dense" and not poly.index_gaps(per_source).is_empty():
        point = witness(poly.index_gaps(per_source))
        line = "column" if side in VERTICAL else "row"
        raise unsupported(
            tensor, f"dense input '{tensor}' needs adapters, and the indices of the elements "
            f"that go down the {line} of {fmt(PE, _absolute(compute, point[:2]))} skip "
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


def _absolute(region: Region, pe: tuple[int, ...]) -> tuple[int, ...]:
    return (pe[0] + region.x0, pe[1] + region.y0)


def _require_consecutive(stream: Stream, tensor: str) -> None:
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


def _shift_relation(relation: isl.Map, to_rel: isl.Map) -> isl.Map:
    """Apply ``to_rel`` to the PE inside ``t -> [PE -> index]``."""
    ident = isl.Map.identity(relation.range().unwrap().range().get_space().map_from_set())
    return relation.apply_range(to_rel.product(ident))


def _output_flow(stream: Stream, side: Side, model: PolyModel, mapping: Mapping,
                 compute: Region, colors: _Colors) -> OutputFlow:
    tensor = stream.tensor
    to_rel = compute.to_relative()
    writers = _need(model, mapping, tensor, write=True).apply_range(to_rel)
    relation = _shift_relation(stream.relation, to_rel)
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


def chain_length(side: Side, region: Region) -> int:
    """Number of PEs in a line that flows towards ``side``."""
    return region.height if side in VERTICAL else region.width


def _last_color(side: Side, region: Region, colors: tuple[int, int]) -> int:
    return colors[(chain_length(side, region) - 1) % 2]


@dataclass(frozen=True)
class ResidentReduction:
    """Partial results of a resident output combined along segments of a line: each group
    of PEs holding partial sums of the same elements passes them towards its last PE
    (south or east), which keeps the total."""

    tensor: str
    side: Side  # the direction the partial results flow ("S" or "E")
    colors: tuple[int, int]
    elements: isl.Map  # PE -> elements it holds partial results of (relative coordinates)
    position: isl.PwAff  # over PE_X, PE_Y: place of the PE in its segment, from 0
    last: isl.Set  # over PE_X, PE_Y: the PEs that keep the totals


def _resident_reduction(tensor: str, model: PolyModel, mapping: Mapping, compute: Region,
                        colors: _Colors, *, what: str = "resident output"
                        ) -> list[ResidentReduction]:
    """No chain when every element has one writer; otherwise the chains that combine the
    partial results: along segments of one row or column, or, for partial results spread
    over rows and columns (a sum over a 2-D grid of tiles), along rows and then along the
    column of the row totals (or columns, then the row)."""
    writers = _need(model, mapping, tensor, write=True).apply_range(compute.to_relative())
    if writers.is_single_valued():
        return []
    for plan in ((None,), ("E", "S"), ("S", "E")):
        chains: list[ResidentReduction] = []
        held = writers
        for side in plan:
            red = _chain(tensor, held, side)
            if red is None:
                break
            chains.append(red)
            held = held.intersect_range(poly.pe_set(red.last))
        else:
            if held.is_single_valued():
                return [_colored(red, tensor, colors) for red in chains]
    several = writers.lexmax().subtract(writers.lexmin()).domain()
    e = witness(several)
    at = writers.intersect_domain(isl.Set.from_point(point(several.get_space(), e)))
    pes = [witness(at.lexmin().range()), witness(at.lexmax().range())]
    raise unsupported(
        tensor,
        f"{what} '{tensor}': element {fmt(tensor, e)} is computed on "
        f"{fmt(PE, pes[0])} and {fmt(PE, pes[1])}, and the PEs sharing elements do not "
        "form segments of rows or columns holding the same elements; combining those "
        "partial results is not supported yet")


def _colored(red: ResidentReduction, tensor: str, colors: _Colors) -> ResidentReduction:
    first = colors.take(f"partial results of '{tensor}'")
    second = colors.take(f"partial results of '{tensor}'")
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
        return None
    bound = first.bind_domain(poly.multi_id(first.get_space().domain(), poly.PE_NAMES))
    start = bound.as_pw_multi_aff().get_pw_aff(along)
    here = _param_aff(start, poly.PE_NAMES[along])
    position = here.sub(start).coalesce()
    is_last = isl.Map.identity(pe_map_space()).intersect(last)
    last_set = is_last.domain().bind(poly.multi_id(pe_space(), poly.PE_NAMES)).params()
    return ResidentReduction(tensor, side, (0, 0), elements, position, last_set)


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


# ------------------------------------------------------------------------- tasks


def _tasks(model: PolyModel, compute: Region, placement: tuple[tuple[str, isl.Map], ...],
           inputs: list[InputFlow], outputs: list[OutputFlow],
           reductions: list[ResidentReduction], mapping: Mapping
           ) -> tuple[list[Task], nx.DiGraph, tuple[str, ...]]:
    """The tasks and their dependences; also which streamed tensors are kept in memory.

    A statement that reads one streamed tensor and otherwise only resident inputs runs
    per arriving element (a data task, §5.1). Every other statement runs over its local
    instances once its inputs are on the PE: streamed tensors it reads are stored as
    they arrive, internal tensors come from statements that ran before it on that PE.
    """
    tasks: list[Task] = []
    streamed = {f.tensor: f for f in inputs}
    place = dict(placement)
    buffered: list[str] = []
    for flow in inputs:
        if flow.adapter is not None:
            a = flow.adapter
            tasks.append(Task(f"spread_{flow.tensor}", "communication", a.region.name,
                              a.region.pes(), trigger=flow.tensor,
                              detail=f"adapters send each element of {flow.tensor} down the "
                                     "line that needs it, re-indexed (eq. (5))"))
        tasks.append(Task(f"broadcast_{flow.tensor}", "communication", compute.name, flow.lines,
                          trigger=flow.tensor,
                          detail=f"{flow.tensor} flows {FLOW_PORT[flow.side]}wards along "
                                 f"each line with a source, to every PE of it"))
    compute_tasks: list[Task] = []
    for pstmt in model.statements:
        stmt = pstmt.stmt
        triggers = [t for t, _ in pstmt.reads if t in streamed]
        others = [t for t, _ in pstmt.reads if t not in streamed]
        pes = place[stmt.name].range()
        if stmt.is_reduction:
            tasks.append(Task(f"init_{stmt.target.tensor}", "init", compute.name, pes,
                              statement=stmt.name,
                              detail=f"fill the local {stmt.target.tensor} with "
                                     f"{'0' if stmt.op == '+=' else '-inf'}"))
        if (len(triggers) == 1 and all(mapping.is_resident(t) for t in others)
                and _runs_per_element(stmt, streamed[triggers[0]])):
            flow = streamed[triggers[0]]
            instances = poly.task_instances(pstmt.domain, place[stmt.name], flow.order,
                                            pstmt.read(flow.tensor))
            compute_tasks.append(Task(f"{stmt.name}_on_{flow.tensor}", "compute", compute.name,
                                      pes, statement=stmt.name, trigger=flow.tensor,
                                      instances=instances))
            continue
        buffered.extend(t for t in triggers if t not in buffered)
        waits = ", ".join(triggers + [t for t in others if not mapping.is_resident(t)])
        instances = poly.bind_placement(place[stmt.name], pstmt.domain)
        compute_tasks.append(Task(
            f"{stmt.name}_local", "compute", compute.name, pes, statement=stmt.name,
            instances=instances,
            detail=f"runs once {waits} are complete on the PE" if waits else
                   "runs on resident data at start"))
    for tensor in buffered:
        tasks.append(Task(f"store_{tensor}", "communication", compute.name,
                          streamed[tensor].lines, trigger=tensor,
                          detail=f"arriving elements of {tensor} are kept in local memory for "
                                 "the statements that need all of them"))
    tasks.extend(compute_tasks)
    for out in outputs:
        detail = ("partial results combined along each line towards the "
                  f"{SIDE_NAMES[out.side]} side (reduction chain)" if out.chain else
                  f"sent from the PEs next to the {SIDE_NAMES[out.side]} side")
        tasks.append(Task(f"out_{out.tensor}", "communication", compute.name, out.senders,
                          trigger=None, detail=detail + ", in the order of eq. (6)"))
    for red in reductions:
        tasks.append(Task(f"combine_{red.tensor}", "communication", compute.name,
                          red.elements.domain(),
                          detail=f"partial results of {red.tensor} flow "
                                 f"{SIDE_NAMES[red.side]}wards along each group of PEs "
                                 "holding the same elements; the last PE keeps the total"))
    return tasks, _dependences(model, tasks), tuple(buffered)


def _runs_per_element(stmt: Stmt, flow: InputFlow) -> bool:
    """Whether ``stmt`` can run as each element of ``flow`` arrives. A sparse stream does
    not send zeros, so only statements for which a zero element contributes nothing (a sum
    or a definition whose value vanishes with it) may skip them; the others wait for the
    whole tensor in local memory, where the unsent elements are 0."""
    if flow.kind == "dense":
        return True
    return stmt.op in ("+=", "=") and vanishes_with(stmt.value, flow.tensor)


def _dependences(model: PolyModel, tasks: list[Task]) -> nx.DiGraph:
    """Edges from each task to the tasks that need what it produces."""
    graph: nx.DiGraph = nx.DiGraph()
    for t in tasks:
        graph.add_node(t.name, task=t)
    producer = {model.statement(t.statement).stmt.target.tensor: t.name
                for t in tasks if t.kind == "compute" and t.statement}
    for t in tasks:
        if t.kind == "compute" and t.statement:
            stmt = model.statement(t.statement).stmt
            for other in tasks:
                if other.kind == "init" and other.statement == t.statement:
                    graph.add_edge(other.name, t.name)
                if other.kind == "communication" and other.trigger is not None and (
                        other.trigger == t.trigger or (t.trigger is None and any(
                            r.tensor == other.trigger for r in stmt.reads))):
                    graph.add_edge(other.name, t.name)
            for read in stmt.reads:
                if read.tensor in producer:
                    graph.add_edge(producer[read.tensor], t.name)
        if t.name.startswith(("out_", "combine_")):
            tensor = t.name.split("_", 1)[1]
            if tensor in producer:
                graph.add_edge(producer[tensor], t.name)
    return graph


@dataclass(frozen=True)
class Exchange:
    """An internal tensor that PEs of a line must share: every PE of the compute region
    computes some elements, and PEs need elements computed by others in their row (or
    column). Each PE in turn, west to east (north to south), sends the elements it
    computed along the line as (value, flat element index) pairs and an end mark."""

    tensor: str
    axis: Literal["row", "column"]
    color: int
    produced: isl.Map  # PE -> elements it computes (relative coordinates)
    needed: isl.Map  # PE -> elements it reads


def _exchanges(model: PolyModel, mapping: Mapping, placement: dict[str, isl.Map],
               compute: Region, colors: _Colors
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
        combines.extend(_combine_partials(tensor.name, produced, needed, model, mapping,
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


def _combine_partials(tensor: str, produced: isl.Map, needed: isl.Map, model: PolyModel,
                      mapping: Mapping, compute: Region, colors: _Colors
                      ) -> list[ResidentReduction]:
    """A statement may read an internal element only once it is complete. When elements
    have partial results on several PEs (an FC layer's ``y = W x`` split along a row),
    they are combined along each segment of PEs holding them, as for resident outputs,
    and the segment's last PE (east or south end) keeps the totals: statements reading
    them must run there."""
    writers = produced.reverse()
    several = writers.lexmax().subtract(writers.lexmin()).domain()
    partial = needed.intersect_range(several)
    if partial.is_empty():
        return []
    chains = _resident_reduction(tensor, model, mapping, compute, colors,
                                 what="internal tensor")
    final = chains[-1]  # some element has several writers, so there is a chain
    kept = final.elements.intersect_domain(poly.pe_set(final.last))
    kept, partial = poly.align_params(kept, partial)
    if partial.is_subset(kept):
        return chains
    _reject_partial_reads(tensor, partial.subtract(kept), writers, compute)
    return []


def _reject_partial_reads(tensor: str, partial: isl.Map, writers: isl.Map,
                          compute: Region) -> None:
    """Partial results read where no combination delivers the totals."""
    several = partial.range()
    where = witness(partial.wrap())
    pe, element = (where[0] + compute.x0, where[1] + compute.y0), where[2:]
    on = writers.intersect_domain(isl.Set.from_point(point(several.get_space(), element)))
    first, last = witness(on.lexmin().range()), witness(on.lexmax().range())
    first = (first[0] + compute.x0, first[1] + compute.y0)
    last = (last[0] + compute.x0, last[1] + compute.y0)
    raise unsupported(
        tensor, f"internal tensor '{tensor}': {fmt(PE, pe)} reads {fmt(tensor, element)}, "
        f"whose partial results are computed on several PEs ({fmt(PE, first)} to "
        f"{fmt(PE, last)}); combining the partial results of an internal tensor before "
        "another statement reads them is supported only on the last PE (east or south "
        "end) of each row or column segment holding them: place the reading statement "
        "there, or the instances that contribute to each element on one PE")

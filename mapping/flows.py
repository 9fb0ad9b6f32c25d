"""The task graph's vocabulary (paper §4.2): regions, the flows that move data, tasks,
and the graph that holds them; with the helpers every planner module shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Literal

import islpy as isl
import networkx as nx

from dtg.errors import UnsupportedMappingError
from dtg.lair.lower import CTX, PolyModel
from dtg.mapping import affine, poly
from dtg.mapping.mesh import (
    VERTICAL,
    Side,
    pe_box,
    pe_map_space,
    pe_space,
    same_line,
    translate,
)
from dtg.mapping.validate import Mapping


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
    # end-of-sequence marks each receiving compute PE gets (a function of PE_X, PE_Y
    # where sources send different numbers of groups)
    groups: int | isl.PwAff
    # original index = received index + wire_offset(PE_X, PE_Y), when adapters re-index
    wire_offset: tuple[isl.PwAff, ...] | None = None
    # Unique among the flows: the tensor's name, with a suffix when a stream is carried by
    # several flows (parts on several sides, multicast trees on several colors).
    key: str = ""
    stream_relation: isl.Map | None = None  # the part of the stream carried (absolute)
    # Multicast trees: each source's tree (source -> PEs it passes), and for each PE of
    # the trees the PE it receives from (neighbour or source).
    members: isl.Map | None = None
    parent: isl.Map | None = None
    plan: str = ""  # how the flow was chosen, for the compile report
    # part of a color's sources taken apart for their orders (mapping.inputs.tree_flows)
    apart: bool = False
    segmented: bool = False  # one segment of a straight stream's lines (line_segments)
    halo: bool = False  # one part of a tree stream cut by what off-line PEs read (halo_split)

    @property
    def name(self) -> str:
        return self.key or self.tensor

    @property
    def index_dims(self) -> int:
        return int(self.order.dim(isl.dim_type.out))

    def reaching(self) -> isl.Map:
        """``{ t[e] -> PE[x, y] }``: the compute PEs whose core receives each element (its
        line, or the receiving PEs of its multicast tree)."""
        ext = self.relation.range_factor_domain()
        spread = same_line(self.side) if self.members is None else self.members
        return ext.apply_range(spread).intersect_range(self.lines)

    def order_on_pe(self) -> isl.MultiAff | None:
        """The stream's order on the elements reaching a PE as one quasi-affine function
        of the element (parameters: the PE), or None where it takes several (a PE of one
        class receives one source's elements, another PE another's)."""
        reaching = poly.bind_pe(self.reaching().reverse())
        order = self.order.intersect_domain(reaching.align_params(self.order.get_space()))
        pieces: list[isl.MultiAff] = []
        order.as_pw_multi_aff().foreach_piece(lambda _s, ma: pieces.append(ma))
        if not pieces:
            return None
        # (isl may keep equal functions apart, as where a mapping gives one source's
        # elements by two clauses: one function serves if it gives the whole order)
        first = pieces[0]
        if len(pieces) > 1 and not isl.Map.from_multi_aff(first).intersect_domain(
                order.domain()).is_equal(order):
            return None
        return first

    def position_affine(self) -> bool:
        """Whether an element's position in its group is, on a PE, an affine function of
        the element, or of the coordinates of the lattice the PE's elements lie on (an
        order's residue class: the odd positions first, then the even ones): what a
        landing array needs."""
        order = self.order_on_pe()
        if order is None:
            return False
        reaching = poly.bind_pe(self.reaching().reverse())
        inner = order.get_at(self.index_dims - 1)
        return affine.affine_on(inner, reaching) is not None or \
            affine.affine_on_lattice(inner, reaching)

    def arrivals(self) -> isl.Map:
        """``{ PE[x, y] -> index[...] }``: original index values arriving at compute PEs."""
        return poly.simplified(self.reaching().reverse().apply_range(self.order).coalesce())

    def arrival_context(self) -> isl.Set:
        """The (PE_X, PE_Y, index...) combinations that occur: the context of task code."""
        arrivals = self.arrivals()
        bound = arrivals.bind_range(poly.multi_id(arrivals.get_space().range(),
                                                  poly.index_names(self.index_dims)))
        return poly.simplified(
            bound.bind(poly.multi_id(bound.get_space(), poly.PE_NAMES)).params())


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
class ResidentReduction:
    """Partial results of a resident output combined along segments of a line: each group
    of PEs holding partial sums of the same elements passes them towards its last PE
    (along ``side``), which keeps the total."""

    tensor: str
    side: Side  # the direction the partial results flow
    colors: tuple[int, int]
    elements: isl.Map  # PE -> elements it holds partial results of (relative coordinates)
    position: isl.PwAff  # over PE_X, PE_Y: place of the PE in its segment, from 0
    last: isl.Set  # over PE_X, PE_Y: the PEs that keep the totals
    # PE -> the next PE of its chain where the chain is no segment of a line (partial
    # blocks on a wrapped diagonal, one per column, each passed to the column before):
    # routed along the row, then the column; None along a line (``side``)
    step: isl.Map | None = None


@dataclass(frozen=True)
class Exchange:
    """An internal tensor that PEs must share: PEs read elements held complete by others
    in their row, their column (``axis``), or anywhere in the region. Each PE in turn
    (west to east, north to south; row by row over the region) sends the elements it
    holds along its line, or along its row and from there along every column, as
    (value, flat element index) pairs and an end mark; the others keep what they read."""

    tensor: str
    axis: Axis
    color: int
    produced: isl.Map  # PE -> elements it sends (relative coordinates)
    needed: isl.Map  # PE -> elements it keeps (reads, or totals it keeps)
    # Partial results sent to the one PE that keeps each total, which adds them up
    # (the others ignore them); otherwise complete elements, kept where read.
    reduce: bool = False
    phase: int = 0  # partial results summed in phases (rows, then columns): which


Axis = Literal["row", "column", "region"]


def exchange_axis(deltas: isl.Set) -> Axis:
    """The lines an exchange needs for the steps ``deltas`` (receiver - sender): rows if
    every step stays in its row, columns likewise, else the whole region."""
    zero = isl.Val.int_from_si(CTX, 0)
    for axis, across in (("row", 1), ("column", 0)):
        if deltas.is_subset(isl.Set.universe(deltas.get_space()).fix_val(
                isl.dim_type.set, across, zero)):
            return axis  # type: ignore[return-value]
    return "region"


def axis_line(axis: Axis) -> isl.Map:
    """``PE -> PE`` of one line of an exchange's ``axis``: its row, its column, or the
    whole region."""
    if axis == "row":
        return same_line("E")
    if axis == "column":
        return same_line("S")
    return isl.Map.universe(pe_map_space())


@dataclass(frozen=True)
class Task:
    """One entry of the task graph, as the compile report shows it."""

    name: str
    kind: Literal["compute", "communication", "init"]
    region: str
    pes: isl.Set
    statement: str | None = None
    trigger: str | None = None  # the streamed tensor whose arriving element runs it
    instances: isl.Set | None = None
    detail: str = ""
    flow: str | None = None  # the name of the input flow that triggers it


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
    color_uses: tuple[tuple[str, str], ...] = ()  # (what, tensor) of each color

    def placement_of(self, statement: str) -> isl.Map:
        return dict(self.placement)[statement]

    def input_flow(self, name: str) -> InputFlow | None:
        """The input flow called ``name`` (a tensor's name when one flow carries it)."""
        return next((f for f in self.inputs if f.name == name), None)

    def input_flows(self, tensor: str) -> tuple[InputFlow, ...]:
        """Every flow that carries part of the streamed ``tensor``."""
        return tuple(f for f in self.inputs if f.tensor == tensor)

    def flow_of(self, task: Task) -> InputFlow | None:
        """The input flow whose arrivals run ``task`` (None for tasks that run once)."""
        return None if task.flow is None else self.input_flow(task.flow)

    def output_flow(self, tensor: str) -> OutputFlow | None:
        return next((f for f in self.outputs if f.tensor == tensor), None)

    def format(self) -> str:
        lines = [f"compute region {self.compute.describe()}"]
        for a in self.adapters:
            lines.append(f"adapter region {a.region.describe()} ({a.side} side)")
        for name, rel in self.placement:
            lines.append(f"placement {name}: {rel}")
        for f in self.inputs:
            lines.append(f"input {f.name} {f.kind} color {f.color}: {f.relation}")
            if f.plan:
                lines.append(f"  {f.plan}")
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


def accessing_pes(model: PolyModel, mapping: Mapping, tensor: str, write: bool) -> isl.Map:
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


FABRIC_COLORS = 24


class Colors:
    """The colors of the routes, one per route in the order flows are planned; routes
    that never meet share colors later, when the fabric's are not enough
    (``codegen.colors``)."""

    def __init__(self) -> None:
        self.taken: list[tuple[str, str]] = []  # (what, subject) per color

    def take(self, what: str, subject: str) -> int:
        """A new color for ``what``, a flow of tensor ``subject``."""
        self.taken.append((what, subject))
        return len(self.taken) - 1


def out_of_colors(uses: tuple[tuple[str, str], ...], needed: int,
                  limit: int = FABRIC_COLORS) -> UnsupportedMappingError:
    """The error for routes that need more colors than the fabric has even where routes
    that never meet share them; located at the tensor whose routes take the most."""
    counts: dict[str, int] = {}
    per_tensor: dict[str, int] = {}
    for what, tensor in uses:
        counts[what] = counts.get(what, 0) + 1
        per_tensor[tensor] = per_tensor.get(tensor, 0) + 1
    listing = ", ".join(f"{w} {n}" if n > 1 else w for w, n in counts.items())
    subject = max(per_tensor, key=per_tensor.__getitem__)
    return unsupported(subject, f"the routes need {needed} colors, more than the fabric's "
                       f"{limit}, even where routes that never meet share one (routed: "
                       f"{listing}); multicast trees that overlap take one color each, so "
                       "fewer entry PEs per stream, or entry PEs whose readers do not "
                       "overlap, need fewer")


def placed_pes(mapping: Mapping) -> isl.Set:
    result = isl.Set.empty(pe_space())
    for _, rel in mapping.placement:
        result = result.union(rel.range())
    return result


def absolute_pes(region: Region) -> isl.Set:
    return pe_box(region.x0, region.x0 + region.width - 1,
                   region.y0, region.y0 + region.height - 1)


def absolute(region: Region, pe: tuple[int, ...]) -> tuple[int, ...]:
    return (pe[0] + region.x0, pe[1] + region.y0)


def shift_relation(relation: isl.Map, to_rel: isl.Map) -> isl.Map:
    """Apply ``to_rel`` to the PE inside ``t -> [PE -> index]``."""
    ident = isl.Map.identity(relation.range().unwrap().range().get_space().map_from_set())
    return relation.apply_range(to_rel.product(ident))


def to_line_position(side: Side, fixed: int) -> isl.Map:
    """``{ PE[a, b] -> PE[a, fixed] }`` (vertical flow) or ``PE[fixed, b]`` (horizontal)."""
    keep = 0 if side in VERTICAL else 1
    other = 1 - keep
    rel = isl.Map.universe(pe_map_space()).equate(isl.dim_type.in_, keep, isl.dim_type.out, keep)
    return rel.fix_val(isl.dim_type.out, other, isl.Val.int_from_si(CTX, fixed))


def chain_length(side: Side, region: Region) -> int:
    """Number of PEs in a line that flows towards ``side``."""
    return region.height if side in VERTICAL else region.width

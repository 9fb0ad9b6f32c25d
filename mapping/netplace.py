"""Regions for a network's layers, and the one mapping that links them.

A network's layers are its contractions (a matrix product, a convolution: statements
that sum over an iterator their target does not have), each with the elementwise
nodes after it (bias, ReLU). :func:`place` lays them out as a staircase: the first
layer's input enters from the west and its output leaves south, the next takes it from
the north and sends its own east, and so on, so each layer's output side faces the
next layer's input side and the feature dimension they share is tiled alike on both
(the activations then run straight from one region into the next). Every layer gets
the same work per PE per sample (its input and output tiles multiply to the same
number), the smallest that fits the wafer: the slowest layer sets a pipeline's pace.

:func:`network_mapping` turns a plan (automatic or written) into one mapping over the
layers' bounding box: each statement placed inside its layer's region, tiled along the
axes the layer's sides give (the input feature along the input side, the output feature
along the output side), the streamed inputs entering at the first layer and the outputs
leaving at the last. The compiler then builds the whole network as one module: it
routes each layer's activations into the next region, allocates colors over all of it
and proves the data flow, joints included, before any code is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from dtg.lair.graph import Graph, Stmt
from dtg.mapping.network import Layer, NetworkError, NetworkPlan, Region, Side

MAX_TILE = 64  # the largest tile tried per dimension


@dataclass(frozen=True)
class Shape:
    """What placing a layer needs: its main statement, the iterators it sums over (the
    input feature) and the one its result is indexed by last (the output feature)."""

    main: Stmt
    reduce: str | None  # None: an elementwise layer
    feature: str

    def extent(self, iterator: str) -> int:
        return self.main.extents[self.main.iterators.index(iterator)]

    @property
    def inputs(self) -> int:
        return self.extent(self.reduce if self.reduce is not None else self.feature)

    @property
    def outputs(self) -> int:
        return self.extent(self.feature)


def feature_of(stmt: Stmt) -> str:
    """The iterator that indexes the last dimension of the statement's target (the
    feature a layer's output is tiled by), or its last iterator that indexes any."""
    for aff in reversed(stmt.target.index):
        names = [n for n, c in aff.terms if c]
        if len(names) == 1:
            return names[0]
    return stmt.iterators[-1]


def reduction_of(stmt: Stmt) -> str | None:
    """The iterator of largest extent a statement sums over (not in its target)."""
    used = {n for aff in stmt.target.index for n, c in aff.terms if c}
    summed = [(e, it) for it, e in zip(stmt.iterators, stmt.extents, strict=True)
              if it not in used]
    return max(summed)[1] if summed and stmt.is_reduction else None


def layers_of(graph: Graph) -> list[tuple[str, tuple[str, ...]]]:
    """The network's layers: each contraction node with the elementwise nodes after it
    (those before the first contraction join it); names after the contraction."""
    nodes = list(dict.fromkeys(s.node for s in graph.statements))
    contracting = {s.node for s in graph.statements if reduction_of(s) is not None}
    layers: list[tuple[str, list[str]]] = []
    pending: list[str] = []
    for node in nodes:
        if node in contracting:
            layers.append((node, [*pending, node]))
            pending = []
        elif layers:
            layers[-1][1].append(node)
        else:
            pending.append(node)
    if pending:  # (no contraction at all)
        layers.append((pending[0], pending))
    return [(name, tuple(members)) for name, members in layers]


def shape_of(graph: Graph, nodes: tuple[str, ...]) -> Shape:
    stmts = [s for s in graph.statements if s.node in nodes]
    summing = [s for s in stmts if reduction_of(s) is not None]
    main = max(summing or stmts, key=lambda s: _volume(s))
    return Shape(main, reduction_of(main), feature_of(main))


def _volume(stmt: Stmt) -> int:
    n = 1
    for e in stmt.extents:
        n *= e
    return n


# ------------------------------------------------------------------ automatic plan

STAIRCASE: tuple[tuple[Side, Side], tuple[Side, Side]] = (("west", "south"), ("north", "east"))


def place(graph: Graph, wafer: tuple[int, int], streams: tuple[str, ...]) -> NetworkPlan:
    """A staircase of the layers with the least work per PE that fits ``wafer``."""
    layers = layers_of(graph)
    shapes = [shape_of(graph, nodes) for _, nodes in layers]
    best: tuple[tuple[int, int, int], list[Region]] | None = None
    for a in range(1, MAX_TILE + 1):
        for b in range(1, MAX_TILE + 1):
            regions = _staircase(shapes, a, b)
            box_w = max(r.x1 for r in regions)
            box_h = max(r.y1 for r in regions)
            if box_w > wafer[0] or box_h > wafer[1]:
                continue
            work = max(ceil(s.inputs / (r.height if k % 2 == 0 else r.width)) *
                       ceil(s.outputs / (r.width if k % 2 == 0 else r.height))
                       for k, (s, r) in enumerate(zip(shapes, regions, strict=True)))
            uneven = sum(s.inputs % t != 0 or s.outputs % u != 0 for s, (t, u) in zip(
                shapes, _tiles(len(shapes), a, b), strict=True))
            score = (work, uneven, sum(r.pes for r in regions))
            if best is None or score < best[0]:
                best = (score, regions)
    if best is None:
        raise NetworkError(f"the network's layers do not fit the wafer PE[{wafer[0]}, "
                           f"{wafer[1]}] even with tiles of {MAX_TILE} elements")
    plan_layers = tuple(
        Layer(name, nodes, region, *STAIRCASE[k % 2])
        for k, ((name, nodes), region) in enumerate(zip(layers, best[1], strict=True)))
    # (streams enter at the first layer: an input only later layers read is resident)
    first = {r.tensor for s in graph.statements if s.node in layers[0][1] for r in s.reads}
    return NetworkPlan(wafer, tuple(n for n in streams if n in first), plan_layers)


def _tiles(n: int, a: int, b: int) -> list[tuple[int, int]]:
    """Input and output tiles per layer: the output tile of one is the input tile of
    the next (their shared feature, tiled alike), alternating ``a`` and ``b``."""
    return [(a, b) if k % 2 == 0 else (b, a) for k in range(n)]


def _staircase(shapes: list[Shape], a: int, b: int) -> list[Region]:
    regions: list[Region] = []
    x = y = 0
    for k, (shape, (t_in, t_out)) in enumerate(zip(shapes, _tiles(len(shapes), a, b),
                                                   strict=True)):
        if k % 2 == 0:  # in west (rows: input feature), out south (columns: output)
            height, width = ceil(shape.inputs / t_in), ceil(shape.outputs / t_out)
            if k > 0:  # to the right of the layer before, on its rows
                prev = regions[-1]
                x, y, height = prev.x1, prev.y0, prev.height
        else:  # in north (columns), out east (rows), below the layer before
            prev = regions[-1]
            x, y, width = prev.x0, prev.y1, prev.width
            height = ceil(shape.outputs / t_out)
        regions.append(Region(x, y, width, height))
    return regions


# ------------------------------------------------------------------ the linked mapping


def _axis_in(side: Side) -> str:
    """The axis along which a side's lines run: a west or east input enters by rows."""
    return "Y" if side in ("west", "east") else "X"


def network_mapping(graph: Graph, plan: NetworkPlan) -> str:
    """The mapping of the whole network over the layers' bounding box (see the module)."""
    plan.verify(graph)
    box = plan.bounding_box()
    lines = [f"rectangle {{ PE[{box.width}, {box.height}] }}"]
    placements: list[str] = []
    tiles: dict[str, dict[str, int]] = {}  # layer -> axis -> tile of its main statement
    for lay in plan.layers:
        region = lay.region.shifted(-box.x0, -box.y0)
        shape = shape_of(graph, lay.nodes)
        axis_in, axis_out = _axis_in(lay.side_in), _axis_in(lay.side_out)
        if shape.reduce is not None and axis_in == axis_out:
            raise NetworkError(
                f"layer '{lay.name}' takes its input from the {lay.side_in} and sends its "
                f"output {lay.side_out}: both features would run along {axis_in}, but "
                f"'{shape.main.name}' sums over its input feature; send the output "
                + ("north or south" if axis_in == "Y" else "east or west"), lay.loc)
        size = {"X": region.width, "Y": region.height}
        tile = {axis_out: ceil(shape.outputs / size[axis_out])}
        if shape.reduce is not None:
            tile[axis_in] = ceil(shape.inputs / size[axis_in])
        tiles[lay.name] = tile
        for stmt in (s for s in graph.statements if s.node in lay.nodes):
            placements.append(_placement(stmt, shape, region, lay, tile))
    lines.append("placement {\n  " + ";\n  ".join(placements) + "\n}")
    first, last = plan.layers[0], plan.layers[-1]
    streamed = set(plan.streams)
    for tensor in graph.inputs:
        if tensor.name not in streamed:
            lines.append(f"input {tensor.name} resident")
            continue
        lines.append(_stream("input", graph, tensor.name, first, box,
                             tiles[first.name], first.side_in))
    for tensor in graph.outputs:
        definer = graph.definer(tensor.name)
        if definer is None or definer.node not in last.nodes:  # (kept where computed)
            lines.append(f"output {tensor.name} resident")
            continue
        lines.append(_stream("output", graph, tensor.name, last, box, tiles[last.name],
                             last.side_out))
    return "\n".join(lines) + "\n"


def _placement(stmt: Stmt, shape: Shape, region: Region, lay: Layer,
               tile: dict[str, int]) -> str:
    """``S[its] -> PE[x, y]`` inside the region: the input feature (the summed iterator)
    along the input side's axis, the output feature along the output side's; statements
    that sum over nothing sit on the line at the output side."""
    its = ", ".join(stmt.iterators)
    axis_in, axis_out = _axis_in(lay.side_in), _axis_in(lay.side_out)
    feature = feature_of(stmt)
    reduce = reduction_of(stmt)
    coord: dict[str, str] = {}
    origin = {"X": region.x0, "Y": region.y0}
    size = {"X": region.width, "Y": region.height}

    def tiled(iterator: str, axis: str) -> str:
        """As the main statement is tiled, or coarser where this one spans more."""
        extent = stmt.extents[stmt.iterators.index(iterator)]
        return f"{origin[axis]} + {iterator}//{max(tile[axis], ceil(extent / size[axis]))}"

    coord[axis_out] = tiled(feature, axis_out)
    other = "Y" if axis_out == "X" else "X"
    if reduce is not None and axis_in in tile and axis_in == other:
        coord[other] = tiled(reduce, axis_in)
    else:  # on the output side's line
        last = {"X": region.x1 - 1, "Y": region.y1 - 1}
        toward_end = lay.side_out in ("south", "east")
        coord[other] = str(last[other] if toward_end else origin[other])
    return f"{stmt.name}[{its}] -> PE[{coord['X']}, {coord['Y']}]"


def _stream(direction: str, graph: Graph, tensor: str, lay: Layer, box: Region,
            tile: dict[str, int], side: Side) -> str:
    """A streamed tensor at a side of the layer: its feature dimension (the one the
    layer's main statement tiles along that side) picks the line, the rest its order."""
    shape = shape_of(graph, lay.nodes)
    t = graph.tensor(tensor)
    stmts = [s for s in graph.statements if s.node in lay.nodes]
    users = [s for s in stmts if tensor in {r.tensor for r in s.reads}] if \
        direction == "input" else [s for s in stmts if s.target.tensor == tensor]
    if not users:
        verb, way = ("read", "enter") if direction == "input" else ("computed", "leave")
        raise NetworkError(f"{direction} '{tensor}' is not {verb} by layer '{lay.name}', "
                           f"where the network's {direction}s {way}", lay.loc)
    stmt = next((s for s in users if s.name == shape.main.name), users[0])
    access = stmt.access(tensor)
    wanted = shape.reduce if direction == "input" and shape.reduce is not None else \
        feature_of(stmt)
    dim = next((d for d, aff in enumerate(access.index)
                if [n for n, c in aff.terms if c] == [wanted]), None)
    axis = _axis_in(side)
    region = lay.region.shifted(-box.x0, -box.y0)
    if dim is not None and (stmt is shape.main or direction == "output"):
        size = tile.get(axis, 1)  # (as the layer's main statement is tiled)
    else:  # read by a copy first (a padding): the last dimension over the side's lines
        dim = len(t.shape) - 1
        size = ceil(t.shape[dim] / (region.height if axis == "Y" else region.width))
    elems = [f"e{d}" for d in range(len(t.shape))]
    line = {"X": f"{region.x0} + e{dim}//{size}", "Y": f"{region.y0} + e{dim}//{size}"}[axis]
    outside = {"west": -1, "north": -1, "east": box.width, "south": box.height}[side]
    pe = f"PE[{outside}, {line}]" if axis == "Y" else f"PE[{line}, {outside}]"
    index = [e for d, e in enumerate(elems) if d != dim] + [f"e{dim} mod {size}"]
    bounds = " and ".join(f"0 <= e{d} < {n}" for d, n in enumerate(t.shape))
    return (f"{direction} {tensor} dense {{ {tensor}[{', '.join(elems)}] -> [{pe} -> "
            f"index[{', '.join(index)}]] : {bounds} }}")

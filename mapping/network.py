"""Network plans: each layer of a network on its own rectangle of the wafer.

The paper's ``dtg_codegen`` compiles one part of a network onto one rectangle; "a
different part of the compilation flow" breaks the network up and selects the PEs of
each part. A plan (``NAME.net``) says that part: the wafer's size, the input tensors
that stream in (the rest are resident, like weights), and for each layer (one or more
consecutive LAIR nodes) its rectangle and the sides its input enters and its output
leaves::

    wafer PE[632, 632]
    stream x
    layer fc1: fc1, relu1 at PE[0:16, 0:8] in west out south
    layer fc2: fc2 at PE[0:16, 8:12] in north out east

Ranges are half-open (``0:16`` is columns 0 to 15). :meth:`NetworkPlan.verify` checks
a plan against its program before anything is built: regions inside the wafer and
disjoint, every node in exactly one layer and layers in data-flow order, each layer's
output side facing the next layer's input side with nothing between them (the route of
its activations), the first input and the last output on the border of the layers'
bounding box (where the network's streams enter and leave).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from lark import Lark, Token, Transformer, UnexpectedInput, v_args

from dtg.errors import LimitError, MappingError, SourceLoc
from dtg.lair.graph import Graph
from dtg.lair.limits import MAX_INPUT_BYTES, MAX_PES
from dtg.lair.parser import read_source, syntax_error

Side = Literal["north", "south", "east", "west"]
SIDES: dict[str, Side] = {"N": "north", "S": "south", "E": "east", "W": "west",
                          "north": "north", "south": "south", "east": "east", "west": "west"}
FACING: dict[Side, Side] = {"south": "north", "north": "south", "east": "west",
                            "west": "east"}
TERMINALS = {
    "NAME": "a layer, node or tensor name",
    "INT": "a non-negative integer",
    "SIDE": "a side: north, south, east or west (N, S, E, W)",
    "$END": "end of file",
}


class NetworkError(MappingError):
    """A network plan that is malformed or does not fit its program or wafer."""


@dataclass(frozen=True)
class Region:
    """Columns ``x0 .. x0 + width - 1`` and rows ``y0 .. y0 + height - 1`` of the wafer."""

    x0: int
    y0: int
    width: int
    height: int

    @property
    def x1(self) -> int:
        return self.x0 + self.width

    @property
    def y1(self) -> int:
        return self.y0 + self.height

    @property
    def pes(self) -> int:
        return self.width * self.height

    def overlaps(self, other: Region) -> bool:
        return self.x0 < other.x1 and other.x0 < self.x1 and \
            self.y0 < other.y1 and other.y0 < self.y1

    def shifted(self, dx: int, dy: int) -> Region:
        return Region(self.x0 + dx, self.y0 + dy, self.width, self.height)

    def __str__(self) -> str:
        return f"PE[{self.x0}:{self.x1}, {self.y0}:{self.y1}]"


@dataclass(frozen=True)
class Layer:
    name: str
    nodes: tuple[str, ...]
    region: Region
    side_in: Side
    side_out: Side
    loc: SourceLoc | None = field(default=None, compare=False, repr=False)  # None: chosen


@dataclass(frozen=True)
class NetworkPlan:
    wafer: tuple[int, int]
    streams: tuple[str, ...]
    layers: tuple[Layer, ...]
    file: str = field(default="<plan>", compare=False)
    loc: SourceLoc | None = field(default=None, compare=False, repr=False)
    stream_locs: tuple[SourceLoc, ...] = field(default=(), compare=False, repr=False)

    def bounding_box(self) -> Region:
        """The rectangle the layers span: the linked module's mesh."""
        x0 = min(lay.region.x0 for lay in self.layers)
        y0 = min(lay.region.y0 for lay in self.layers)
        x1 = max(lay.region.x1 for lay in self.layers)
        y1 = max(lay.region.y1 for lay in self.layers)
        return Region(x0, y0, x1 - x0, y1 - y0)

    def layer_of(self, node: str) -> Layer:
        return next(lay for lay in self.layers if node in lay.nodes)

    def verify(self, graph: Graph | None = None) -> None:
        """Raise :class:`NetworkError` at the first rule the plan breaks."""
        width, height = self.wafer
        if width < 1 or height < 1:
            raise NetworkError(f"the wafer PE[{width}, {height}] has no PEs", self.loc)
        if width * height > MAX_PES:
            raise NetworkError(f"the wafer PE[{width}, {height}] has more than {MAX_PES} PEs "
                               "(dtg's limit, docs/limits.md)", self.loc)
        if not self.layers:
            raise NetworkError("the plan has no layers; expected e.g. 'layer fc1: fc1 at "
                               "PE[0:8, 0:8] in west out south'", self.loc)
        seen: dict[str, Layer] = {}
        for lay in self.layers:
            _check_region(lay, width, height)
            if lay.name in seen:
                raise NetworkError(f"layer '{lay.name}' is declared twice (first at "
                                   f"{seen[lay.name].loc})", lay.loc)
            for other in seen.values():
                if lay.region.overlaps(other.region):
                    raise NetworkError(
                        f"layer '{lay.name}' at {lay.region} overlaps layer '{other.name}' "
                        f"at {other.region}; regions must be disjoint", lay.loc)
            seen[lay.name] = lay
        for before, after in zip(self.layers, self.layers[1:], strict=False):
            _check_joint(self, before, after)
        box = self.bounding_box()
        first, last = self.layers[0], self.layers[-1]
        if not _on_border(first.region, first.side_in, box):
            raise NetworkError(f"the first layer '{first.name}' takes its input from the "
                               f"{first.side_in}, but its region {first.region} is not on that "
                               f"side of the layers' bounding box {box}, where the network's "
                               "input streams enter", first.loc)
        if not _on_border(last.region, last.side_out, box):
            raise NetworkError(f"the last layer '{last.name}' sends its output {last.side_out}, "
                               f"but its region {last.region} is not on that side of the "
                               f"layers' bounding box {box}, where the network's outputs leave",
                               last.loc)
        if graph is not None:
            _check_program(self, graph)

    def describe(self) -> str:
        return "\n".join(f"{lay.name}: {', '.join(lay.nodes)} on {lay.region} "
                         f"({lay.region.pes} PEs), in {lay.side_in}, out {lay.side_out}"
                         for lay in self.layers)


def _check_region(lay: Layer, width: int, height: int) -> None:
    r = lay.region
    if r.width < 1 or r.height < 1:
        raise NetworkError(f"layer '{lay.name}' has an empty region {r}; a range a:b holds "
                           "a .. b - 1, so b must exceed a", lay.loc)
    if r.x1 > width or r.y1 > height:
        raise NetworkError(f"layer '{lay.name}' at {r} reaches beyond the wafer "
                           f"PE[{width}, {height}] (columns 0:{width}, rows 0:{height})",
                           lay.loc)


def _check_joint(plan: NetworkPlan, before: Layer, after: Layer) -> None:
    """``before``'s output side faces ``after``'s input side, the regions overlap across
    that direction, and no other region lies between them."""
    if FACING[before.side_out] != after.side_in:
        raise NetworkError(
            f"layer '{before.name}' sends its output {before.side_out}, so layer "
            f"'{after.name}' after it must take its input from the {FACING[before.side_out]}, "
            f"not the {after.side_in}", after.loc)
    a, b = before.region, after.region
    side = before.side_out
    beyond = {"south": b.y0 >= a.y1, "north": b.y1 <= a.y0, "east": b.x0 >= a.x1,
              "west": b.x1 <= a.x0}[side]
    across = (a.x0 < b.x1 and b.x0 < a.x1) if side in ("south", "north") else \
        (a.y0 < b.y1 and b.y0 < a.y1)
    if not beyond or not across:
        raise NetworkError(
            f"layer '{after.name}' at {b} does not lie {side} of layer '{before.name}' at "
            f"{a} facing it: its activations would have no straight route", after.loc)
    if side in ("south", "north"):
        lo, hi = max(a.x0, b.x0), min(a.x1, b.x1)
        gap = Region(lo, min(a.y1, b.y1), hi - lo, max(a.y0, b.y0) - min(a.y1, b.y1)) \
            if side == "south" else Region(lo, b.y1, hi - lo, a.y0 - b.y1)
    else:
        lo, hi = max(a.y0, b.y0), min(a.y1, b.y1)
        gap = Region(a.x1, lo, b.x0 - a.x1, hi - lo) if side == "east" else \
            Region(b.x1, lo, a.x0 - b.x1, hi - lo)
    if gap.pes:
        for other in plan.layers:
            if other.region.overlaps(gap):
                raise NetworkError(
                    f"layer '{other.name}' at {other.region} lies between layers "
                    f"'{before.name}' and '{after.name}', in the way of their activations "
                    f"({gap})", other.loc)


def _on_border(region: Region, side: Side, box: Region) -> bool:
    return {"north": region.y0 == box.y0, "south": region.y1 == box.y1,
            "west": region.x0 == box.x0, "east": region.x1 == box.x1}[side]


def _check_program(plan: NetworkPlan, graph: Graph) -> None:
    """Every node in exactly one layer, layers in data-flow order, streams are inputs."""
    nodes = list(dict.fromkeys(s.node for s in graph.statements))
    owner: dict[str, Layer] = {}
    for lay in plan.layers:
        for node in lay.nodes:
            if node not in nodes:
                raise NetworkError(f"layer '{lay.name}' names node '{node}', which the program "
                                   f"does not have (its nodes: {', '.join(nodes)})", lay.loc)
            if node in owner:
                raise NetworkError(f"node '{node}' is in layer '{owner[node].name}' and in "
                                   f"layer '{lay.name}'; each node is on one region", lay.loc)
            owner[node] = lay
    missing = [n for n in nodes if n not in owner]
    if missing:
        raise NetworkError(f"node '{missing[0]}' is in no layer; every node of the program "
                           "needs a region", plan.loc)
    order = {lay.name: k for k, lay in enumerate(plan.layers)}
    defined_in = {s.target.tensor: owner[s.node] for s in graph.statements}
    for stmt in graph.statements:
        lay = owner[stmt.node]
        for read in stmt.reads:
            source = defined_in.get(read.tensor)
            if source is not None and order[source.name] > order[lay.name]:
                raise NetworkError(
                    f"layer '{lay.name}' reads '{read.tensor}', which layer '{source.name}' "
                    "after it computes; list layers in the order data flows", lay.loc)
    inputs = {t.name for t in graph.inputs}
    first = {r.tensor for s in graph.statements if s.node in plan.layers[0].nodes
             for r in s.reads}
    for k, name in enumerate(plan.streams):
        loc = plan.stream_locs[k] if k < len(plan.stream_locs) else plan.loc
        if name not in inputs:
            raise NetworkError(f"'{name}' is streamed in, but it is not an input of the "
                               f"program (its inputs: {', '.join(sorted(inputs))})", loc)
        if name not in first:
            raise NetworkError(f"'{name}' is streamed in, but the first layer "
                               f"'{plan.layers[0].name}', where streams enter, does not read "
                               f"it; stream only what the first layer reads (the rest is "
                               "resident)", loc)


# ------------------------------------------------------------------ text


@cache
def _parser() -> Lark:
    grammar = (Path(__file__).parent / "network.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True)


def parse_plan_file(path: str | Path) -> NetworkPlan:
    return parse_plan(read_source(path), str(path))


def parse_plan(text: str, file: str = "<string>") -> NetworkPlan:
    """Parse a plan; its rules are checked by :meth:`NetworkPlan.verify`."""
    if len(text) > MAX_INPUT_BYTES:
        raise LimitError(f"the plan has {len(text)} characters, more than the limit of "
                         f"{MAX_INPUT_BYTES}", SourceLoc(file, 1, 1))
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise syntax_error(err, text, file, "network plan", _parser(), TERMINALS) from None
    plan: NetworkPlan = _ToPlan(file).transform(tree)
    return plan


@v_args(inline=True)
class _ToPlan(Transformer[Token, Any]):
    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def _loc(self, token: Token) -> SourceLoc:
        return SourceLoc(self.file, token.line or 1, token.column or 1)

    def start(self, wafer: tuple[tuple[int, int], SourceLoc], *rest: Any) -> NetworkPlan:
        named = [pair for item in rest if isinstance(item, list) for pair in item]
        layers = tuple(item for item in rest if isinstance(item, Layer))
        return NetworkPlan(wafer[0], tuple(n for n, _ in named), layers, self.file, wafer[1],
                           tuple(loc for _, loc in named))

    def wafer(self, width: Token, height: Token) -> tuple[tuple[int, int], SourceLoc]:
        return (int(width), int(height)), self._loc(width)

    def stream(self, *names: Token) -> list[tuple[str, SourceLoc]]:
        return [(str(n), self._loc(n)) for n in names]

    def range(self, lo: Token, hi: Token) -> tuple[int, int]:
        return int(lo), int(hi)

    def layer(self, name: Token, *rest: Any) -> Layer:
        *nodes, xs, ys, side_in, side_out = rest
        region = Region(xs[0], ys[0], xs[1] - xs[0], ys[1] - ys[0])
        return Layer(str(name), tuple(str(n) for n in nodes), region, SIDES[str(side_in)],
                     SIDES[str(side_out)], self._loc(name))


def print_plan(plan: NetworkPlan, *, header: str = "") -> str:
    """The plan as text :func:`parse_plan` reads back."""
    lines = [f"# {line}" for line in header.splitlines()]
    lines.append(f"wafer PE[{plan.wafer[0]}, {plan.wafer[1]}]")
    if plan.streams:
        lines.append(f"stream {', '.join(plan.streams)}")
    for lay in plan.layers:
        r = lay.region
        lines.append(f"layer {lay.name}: {', '.join(lay.nodes)} at "
                     f"PE[{r.x0}:{r.x1}, {r.y0}:{r.y1}] in {lay.side_in} out {lay.side_out}")
    return "\n".join(lines) + "\n"

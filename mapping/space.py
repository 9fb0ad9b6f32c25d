"""The space ``dtg search`` explores: mappings written as direction-only placements.

A candidate aligns every statement with two dimensions of one tensor (a *reference*),
one along X and one along Y, or one of them only. Each statement takes the index
expressions of its access to that tensor, or to another of the same shape, or else to
one whose aligned dimensions have the same extents (2mm's ``D[i][l]`` follows
``tmp[i][j]`` by its rows), as its direction. One more alignment puts every statement
along its own target's dimensions (3mm's three products, each by its output's blocks).
The direction ((``mapping/direction.py`` then chooses tiles and offsets). Each input and
output tensor is resident, or streams through one external PE (the index is the
element's position), or streams along the side its aligned dimension runs to, one
external PE per tile (as GEMV's ``x`` from the north, one chunk per column). Inputs
stream sparse or dense, outputs dense; a tensor of several dimensions streams with an
index of as many (the outer ones are outer index values, as conv2d's ``x[w, h]``).

A candidate's text leaves the tiles to ``TX``, ``TY``, ``OX``, ``OY``;
``Candidate.written`` gives the mapping for a tiling as a person writes it
(``gemv[i, j] -> PE[i//8, j//4]``, ``y[i = 0:31] -> [PE[4, i//8] -> index[i mod 8]]``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial

from dtg.lair.graph import AffineExpr, Graph, Stmt, Tensor
from dtg.lair.lower import PolyModel
from dtg.mapping.direction import Tiling

AXES = ("X", "Y")


@dataclass(frozen=True)
class Alignment:
    """Each statement's direction: the index expressions along X and Y (None: constant)."""

    reference: str
    dims: tuple[int | None, int | None]
    directions: tuple[tuple[str, tuple[AffineExpr | None, AffineExpr | None]], ...]

    def label(self) -> str:
        parts = [f"{self.reference} dim {d} along {axis}"
                 for axis, d in zip(AXES, self.dims, strict=True) if d is not None]
        return ", ".join(parts)

    def placement(self, model: PolyModel) -> str:
        pieces = []
        for name, (ex, ey) in self.directions:
            its = ", ".join(model.graph.statement(name).iterators)
            pieces.append(f"{name}[{its}] -> [{ex if ex is not None else 0}, "
                          f"{ey if ey is not None else 0}]")
        return "placement direction { " + "; ".join(pieces) + " }"

    def axis_of(self, stmt: str, expr: AffineExpr) -> str | None:
        """Which axis the index expression ``expr`` of ``stmt`` runs along, if any."""
        ex, ey = dict(self.directions)[stmt]
        if ex is not None and expr == ex:
            return "X"
        if ey is not None and expr == ey:
            return "Y"
        return None


def _access(stmt: Stmt, tensor: Tensor, graph: Graph, dims: tuple[int | None, int | None]
            ) -> tuple[AffineExpr, ...] | None:
    """The index of ``stmt``'s access to ``tensor``, else to a tensor of the same shape,
    else to one (its target first) whose aligned dimensions have the same extents."""
    accesses = [stmt.target, *stmt.reads]
    for access in accesses:
        if access.tensor == tensor.name:
            return access.index
    shapes = [(a, graph.tensor(a.tensor).shape) for a in accesses]
    for access, shape in shapes:
        if shape == tensor.shape:
            return access.index
    wanted = [(d, tensor.shape[d]) for d in dims if d is not None]
    for access, shape in shapes:
        if all(d < len(shape) and shape[d] == extent for d, extent in wanted):
            return access.index
    return None


def _dims(rank: int) -> list[tuple[int | None, int | None]]:
    """Pairs of dimensions along (X, Y), then single ones."""
    pairs: list[tuple[int | None, int | None]] = [
        (a, b) for a in range(rank) for b in range(rank) if a != b]
    return pairs + [(a, None) for a in range(rank)] + [(None, b) for b in range(rank)]


def alignments(model: PolyModel) -> Iterator[Alignment]:
    """Every way of aligning the statements with a tensor's dimensions (no repeats)."""
    graph = model.graph
    seen: set[tuple[tuple[str, tuple[str, str]], ...]] = set()

    def fresh(directions: list[tuple[str, tuple[AffineExpr | None, ...]]]) -> bool:
        key = tuple((n, (str(x), str(y))) for n, (x, y) in directions)
        if key in seen or all(x is None and y is None for _, (x, y) in directions):
            return False
        seen.add(key)
        return True

    for tensor in sorted(graph.tensors, key=lambda t: (-len(t.shape), t.name)):
        for dims in _dims(len(tensor.shape)):
            directions = []
            for stmt in graph.statements:
                index = _access(stmt, tensor, graph, dims)
                if index is None:
                    break
                directions.append((stmt.name, tuple(None if d is None else index[d]
                                                    for d in dims)))
            else:
                if fresh(directions):
                    yield Alignment(tensor.name, dims, tuple(directions))  # type: ignore[arg-type]
    rank = min(len(s.target.index) for s in graph.statements)
    for dims in _dims(rank):
        directions = [(s.name, tuple(None if d is None else s.target.index[d] for d in dims))
                      for s in graph.statements]
        if fresh(directions):
            yield Alignment("each target", dims, tuple(directions))  # type: ignore[arg-type]


def _extents(model: PolyModel, alignment: Alignment) -> tuple[int, int]:
    """The smallest value of the X and Y directions over all instances (0 for none)."""
    lows = []
    for axis in (0, 1):
        low = None
        for name, pair in alignment.directions:
            expr = pair[axis]
            if expr is None:
                continue
            stmt = model.graph.statement(name)
            value = expr.constant + sum(min(0, c * (e - 1)) for (it, c), e in
                                        ((t, stmt.extents[stmt.iterators.index(t[0])])
                                         for t in expr.terms))
            low = value if low is None else min(low, value)
        lows.append(low or 0)
    return lows[0], lows[1]


Values = Mapping[str, int | str]
"""What the tile parameters stand for: their names (the template that is validated) or
the numbers a tiling chose (the mapping written out)."""


@dataclass(frozen=True)
class Option:
    """One way a tensor enters or leaves: a label and its spec line for given tiles."""

    label: str
    line: Callable[[Values], str]


def _shift(var: str, delta: int) -> str:
    """``var + delta`` as a person writes it."""
    if delta == 0:
        return var
    return f"{var} + {delta}" if delta > 0 else f"{var} - {-delta}"


def _grouped(text: str) -> str:
    return text if text.isidentifier() or text.lstrip("-").isdigit() else f"({text})"


def tile_index(var: str, low: int, tile: int | str, offset: int | str) -> str:
    """``offset + (var - low)//tile``, simplified: no ``+ 0``, no ``//1``."""
    if tile == 1 and isinstance(offset, int):
        return _shift(var, offset - low)
    inner = _shift(var, -low)
    quotient = inner if tile == 1 else f"{_grouped(inner)}//{tile}"
    return quotient if offset == 0 else f"{offset} + {quotient}"


def tile_position(var: str, low: int, tile: int | str) -> str:
    """``(var - low) mod tile``, simplified (0 for tiles of one)."""
    if tile == 1:
        return "0"
    return f"{_grouped(_shift(var, -low))} mod {tile}"


RESERVED = frozenset({"TX", "TY", "OX", "OY", "PE", "index", "mod", "floor", "ceil",
                      "and", "or", "not", "min", "max", "exists"})


def _dim_names(tensor: Tensor, user: Stmt | None) -> list[str]:
    """Names of the tensor's dimensions in its spec: the iterators its first user indexes
    it by (``y[i = 0:31]``), else ``d0``, ``d1``, ..."""
    plain = [f"d{k}" for k in range(len(tensor.shape))]
    if user is None:
        return plain
    names = []
    for expr in user.access(tensor.name).index:
        if len(expr.terms) != 1 or expr.terms[0][1] != 1 or expr.constant:
            return plain
        names.append(expr.terms[0][0])
    if len(set(names)) != len(names) or RESERVED & set(names):
        return plain
    return names


def tensor_options(model: PolyModel, alignment: Alignment, tensor: Tensor, width: int,
                   height: int) -> list[Option]:
    """Each way ``tensor`` may enter or leave."""
    graph = model.graph
    name, role, rank = tensor.name, tensor.role, len(tensor.shape)
    found = [Option(f"{name} resident", partial(_constant, f"{role} {name} resident"))]
    user = next((s for s in graph.statements
                 if name in (s.target.tensor, *(r.tensor for r in s.reads))), None)
    dims = _dim_names(tensor, user)
    ranges = ", ".join(f"{d} = 0:{n - 1}" for d, n in zip(dims, tensor.shape, strict=True))
    kinds = ("sparse", "dense") if role == "input" else ("dense",)

    def spec(kind: str, pe: str, index: list[str]) -> str:
        return (f"{role} {name} {kind} {{ {name}[{ranges}] -> [{pe} -> "
                f"index[{', '.join(index)}]] }}")

    if rank >= 1:  # (a multi-dimensional index: outer dimensions are outer index values)
        ends = ([("north", "PE[0, -1]"), ("west", "PE[-1, 0]")] if role == "input"
                else [("east", f"PE[{width}, 0]"), ("south", f"PE[0, {height}]")])
        for kind, (side, pe) in itertools.product(kinds, ends):
            found.append(Option(f"{name} {kind} through one PE {side}",
                                partial(_constant, spec(kind, pe, dims))))
    if user is None:
        return found
    index = user.access(name).index
    a0, b0 = _extents(model, alignment)
    for k, expr in enumerate(index):
        axis = alignment.axis_of(user.name, expr)
        if axis is None:
            continue
        low, tile, offset = (a0, "TX", "OX") if axis == "X" else (b0, "TY", "OY")
        if axis == "X":
            side = "north" if role == "input" else "south"
            edge = "-1" if role == "input" else str(height)
        else:
            side = "west" if role == "input" else "east"
            edge = "-1" if role == "input" else str(width)

        def line(v: Values, kind: str, k: int, low: int, tile: str, offset: str, axis: str,
                 edge: str) -> str:
            where = tile_index(dims[k], low, v[tile], v[offset])
            pe = f"PE[{where}, {edge}]" if axis == "X" else f"PE[{edge}, {where}]"
            inner = [tile_position(dims[k], low, v[tile])]
            return spec(kind, pe, inner + [d for j, d in enumerate(dims) if j != k])

        for kind in kinds:
            found.append(Option(f"{name} {kind} from the {side}, a tile per line",
                                partial(line, kind=kind, k=k, low=low, tile=tile,
                                        offset=offset, axis=axis, edge=edge)))
    return found


def _constant(text: str, values: Values) -> str:
    """A spec line that does not depend on the tiling."""
    return text


PARAMETER_NAMES: dict[str, int | str] = {p: p for p in ("TX", "TY", "OX", "OY")}


@dataclass(frozen=True)
class Candidate:
    """A mapping to try: what it is, in words, and its ``.map`` text (a direction-only
    placement whose streams use the tiles and offsets ``TX``, ``TY``, ``OX``, ``OY``)."""

    label: str
    text: str
    alignment: Alignment | None = None
    options: tuple[Option, ...] = ()

    def written(self, model: PolyModel, tiling: Tiling, origin: tuple[int, int]) -> str:
        """The mapping as a person writes it, for a ``tiling`` of the direction whose
        smallest X and Y values are ``origin``: the placement by the program's iterators
        (``gemv[i, j] -> PE[i//8, j//4]``), the tiles and offsets written in."""
        assert self.alignment is not None
        values: dict[str, int | str] = dict(tiling.values())
        rectangle, _, _ = self.text.partition("\n")
        pieces = []
        for k, (name, pair) in enumerate(self.alignment.directions):
            tx, ty, x0, y0 = tiling.per[k] if tiling.per else (tiling.tx, tiling.ty, *origin)
            coords = [_coordinate(expr, low, tile, offset) for expr, low, tile, offset in
                      ((pair[0], x0, tx, tiling.ox), (pair[1], y0, ty, tiling.oy))]
            its = ", ".join(model.graph.statement(name).iterators)
            pieces.append(f"{name}[{its}] -> PE[{coords[0]}, {coords[1]}]")
        return "\n".join([rectangle, "placement { " + "; ".join(pieces) + " }",
                          *(o.line(values) for o in self.options)]) + "\n"


def _coordinate(expr: AffineExpr | None, low: int, tile: int, offset: int) -> str:
    """``offset + (expr - low)//tile`` for a statement's direction (None: 0)."""
    if expr is None:
        return str(offset + (0 - low) // tile)
    if tile == 1:
        return str(AffineExpr(expr.terms, expr.constant - low + offset))
    return tile_index(str(AffineExpr(expr.terms, expr.constant - low)), 0, tile, offset)


def candidates(model: PolyModel, width: int, height: int,
               kinds: dict[str, bool] | None = None) -> Iterator[Candidate]:
    """Every candidate mapping for the rectangle, alignment by alignment. ``kinds``
    keeps a tensor resident (True) or streamed (False), as another mapping has it."""
    tensors = [t for t in model.graph.tensors if t.role != "internal"]
    kinds = kinds or {}
    for alignment in alignments(model):
        options = []
        for t in tensors:
            found = tensor_options(model, alignment, t, width, height)
            if t.name in kinds:
                found = [o for o in found if o.label.endswith(" resident") == kinds[t.name]]
            options.append(found)
        for combo in itertools.product(*options):
            label = alignment.label() + "; " + "; ".join(o.label for o in combo)
            text = "\n".join([f"rectangle {{ PE[{width}, {height}] }}",
                              alignment.placement(model),
                              *(o.line(PARAMETER_NAMES) for o in combo)]) + "\n"
            yield Candidate(label, text, alignment, combo)

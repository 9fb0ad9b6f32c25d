"""Placement by direction only (paper §4.1.2): the mapping names which statement
dimensions run along X and Y, and dtg chooses tile sizes and offsets.

``placement direction { ff[i, j] -> [j, i] }`` says that ``j`` runs along X and ``i``
along Y. Every statement of the placement is tiled the same way, so that statements
over the same elements land on the same PEs (Listing 2's four nodes):

    S[...] -> PE[OX + (a - a0) // TX, OY + (b - b0) // TY]

where ``(a, b)`` is the statement's direction and ``a0``, ``b0`` the smallest values
over all statements. The choice: offsets 0 or 1 (a border line left free, for adapters
or streams), and tiles that use the lines left or divide the extent evenly. Each
candidate is validated like a written mapping (its streams may use ``TX``, ``TY``,
``OX`` and ``OY``). Tiles that divide the extents come first (uneven tiles give PEs work
of different shapes, which costs SIMD regularity: on Listing 2, 7-row tiles have the
lower bound, 40 against 44, but run 252 cycles against 178), then the lowest bound on
cycles, fewer PEs and smaller offsets. The bound does not see what a free border line
buys (adapters that spread a stream), so the compiler simulates the candidates that tie
with the best on both and keeps the fastest (``codegen.driver.compile_choices``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import islpy as isl

from dtg.errors import DtgError, MappingError
from dtg.lair.lower import PolyModel
from dtg.mapping.spec import IslText, MappingSpec, bind_mapping
from dtg.mapping.validate import Mapping, rectangle_size, statement_pieces, validate_mapping

TILE_PARAMETERS = ("TX", "TY", "OX", "OY")
"""What a direction-only mapping's streams may use: the tiles and offsets chosen."""


@dataclass(frozen=True)
class Tiling:
    """Tiles and offsets. With ``per`` (a grid), each statement has its own tiles and
    origin ``(tx, ty, a0, b0)``, so that statements of different extents span the same
    PEs; ``tx``, ``ty`` are then the largest (what streams see as TX, TY)."""

    tx: int
    ty: int
    ox: int
    oy: int
    per: tuple[tuple[int, int, int, int], ...] | None = None

    def describe(self) -> str:
        shape = (f"a grid of {len({p[0] for p in self.per})} tile sizes" if self.per
                 else f"tiles {self.tx} x {self.ty}")
        return f"{shape} at +{self.ox},+{self.oy}"

    def even(self, along_x: int, along_y: int) -> bool:
        """Whether the tiles divide the extents: every PE gets the same shape of work."""
        return along_x % self.tx == 0 and along_y % self.ty == 0

    def values(self) -> dict[str, int]:
        return dict(zip(TILE_PARAMETERS, (self.tx, self.ty, self.ox, self.oy), strict=True))


@dataclass(frozen=True)
class Choice:
    """A validated candidate: its tiling, mapping and cycle bound."""

    tiling: Tiling
    mapping: Mapping
    bound: int
    pes: int
    even: bool = True
    spec: MappingSpec | None = None  # the written form: placement and streams filled in
    origin: tuple[int, int] = (0, 0)  # the smallest X and Y values of the direction

    @property
    def rank(self) -> tuple[bool, int]:
        """What orders candidates before the tie-breaks: even tiles, then the bound."""
        return (not self.even, self.bound)


def _directions(text: IslText, model: PolyModel) -> list[tuple[str, isl.Map]]:
    """Each statement's ``S[...] -> [a, b]``, restricted to its instances."""
    try:
        union = isl.UnionMap(text.text)
    except isl.Error:
        raise MappingError("isl cannot read the placement direction; expected e.g. "
                           "{ ff[i, j] -> [j, i] }", text.loc) from None
    found = statement_pieces(
        union, model, text, "placement direction",
        lambda space: space.dim(isl.dim_type.set) == 2 and not space.has_tuple_name(
            isl.dim_type.set), "must be a pair [x, y] of its dimensions, e.g. ff[i, j] -> [j, i]")
    result = []
    for stmt in model.statements:
        rel = found[stmt.name].intersect_domain(stmt.domain)
        if not rel.range().is_bounded():
            raise MappingError(f"the placement direction of '{stmt.name}' is unbounded: give "
                               "each instance a pair of its own dimensions", text.loc)
        result.append((stmt.name, rel))
    return result


def _extent(ranges: isl.Set, dim: int) -> tuple[int, int]:
    """Smallest and largest value of dimension ``dim`` (the directions are bounded)."""
    other = 1 - dim
    line = ranges.project_out(isl.dim_type.set, other, 1)
    low = line.lexmin().sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
    high = line.lexmax().sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
    return int(low), int(high)


def _tiles(extent: int, lines: int) -> list[int]:
    """Tile sizes worth trying for ``extent`` values on ``lines`` lines: the smallest that
    fits, and the even divisors that use at least half the lines."""
    if lines < 1:
        return []
    sizes = {math.ceil(extent / lines)}
    # (by the number of tiles, not the tile size: the work does not grow with the extent)
    sizes |= {extent // n for n in range(max(1, (lines + 1) // 2), min(lines, extent) + 1)
              if extent % n == 0}
    return sorted(sizes)


def candidates(spec: MappingSpec, model: PolyModel, bound_of: Callable[[Mapping], int],
               stop: Callable[[], bool] | None = None) -> list[Choice]:
    """Every tiling of a direction-only ``spec`` (its other parameters bound) that
    validates, best first (``bound_of`` ranks them). ``stop`` is asked before each
    tiling is validated: when it says so, the tilings validated so far (a search out of
    time)."""
    assert spec.direction
    taken = [p.name for p in spec.params if p.name in TILE_PARAMETERS]
    if taken:
        raise MappingError(f"'{taken[0]}' names the tiling dtg chooses for a direction-only "
                           f"placement ({', '.join(TILE_PARAMETERS)}); use another name",
                           spec.params[0].loc)
    width, height = rectangle_size(spec.rectangle)
    directions = _directions(spec.placement, model)
    ranges = None
    for _, rel in directions:
        r = rel.range()
        ranges = r if ranges is None else ranges.union(r)
    assert ranges is not None
    (a0, a1), (b0, b1) = _extent(ranges, 0), _extent(ranges, 1)
    found: list[Choice] = []
    first_error: DtgError | None = None
    own = [(_extent(rel.range(), 0), _extent(rel.range(), 1)) for _, rel in directions]
    extents = [(x1 - x0 + 1, y1 - y0 + 1) for (x0, x1), (y0, y1) in own]
    tilings: list[Tiling] = []
    for ox in (0, 1):
        for oy in (0, 1):
            tilings += [Tiling(tx, ty, ox, oy) for tx in _tiles(a1 - a0 + 1, width - ox)
                        for ty in _tiles(b1 - b0 + 1, height - oy)]
            if len(set(extents)) > 1:  # statements of different extents: grids too
                for nx in _lines([e[0] for e in extents], width - ox):
                    for ny in _lines([e[1] for e in extents], height - oy):
                        per = tuple((math.ceil(ex / nx), math.ceil(ey / ny), x0, y0)
                                    for (ex, ey), ((x0, _), (y0, _)) in zip(
                                        extents, own, strict=True))
                        tilings.append(Tiling(max(p[0] for p in per), max(p[1] for p in per),
                                              ox, oy, per))
    for tiling in tilings:
        if stop is not None and stop():
            break
        placement = _placement(directions, tiling, a0, b0, spec.placement)
        concrete = replace(spec, placement=placement, direction=False)
        concrete = bind_mapping(concrete, tiling.values())
        try:
            mapping = validate_mapping(concrete, model)
        except DtgError as err:
            first_error = first_error or err
            continue
        used = None
        for _, rel in mapping.placement:
            used = rel.range() if used is None else used.union(rel.range())
        pes = int(used.count_val().to_python()) if used is not None else 0
        found.append(Choice(tiling, mapping, bound_of(mapping), pes,
                            _even(tiling, extents, (a1 - a0 + 1, b1 - b0 + 1)), concrete,
                            (a0, b0)))
    if not found and first_error is not None:
        raise MappingError(
            f"no tiling of the placement direction fits the rectangle PE[{width}, {height}] "
            f"with these streams; the first tried failed with: {first_error.message}",
            spec.placement.loc)
    found.sort(key=lambda c: (*c.rank, c.pes, c.tiling.ox + c.tiling.oy, c.tiling.tx,
                              c.tiling.ty))
    return found


def _lines(extents: list[int], lines: int) -> list[int]:
    """Numbers of lines for a grid: all of them, and those every extent divides into
    evenly that use at least half of them."""
    found = {lines} if lines >= 1 else set()
    found |= {n for n in range(1, lines + 1)
              if 2 * n >= lines and all(e % n == 0 for e in extents)}
    return sorted(found)


def _even(tiling: Tiling, extents: list[tuple[int, int]], overall: tuple[int, int]) -> bool:
    if tiling.per is None:
        return tiling.even(*overall)
    return all(ex % p[0] == 0 and ey % p[1] == 0
               for (ex, ey), p in zip(extents, tiling.per, strict=True))


def _placement(directions: list[tuple[str, isl.Map]], tiling: Tiling, a0: int, b0: int,
               where: IslText) -> IslText:
    """The placement of ``tiling`` as isl text (printed by isl, validated as written)."""
    pieces = []
    for k, (_, rel) in enumerate(directions):
        tx, ty, x0, y0 = tiling.per[k] if tiling.per else (tiling.tx, tiling.ty, a0, b0)
        tile = isl.Map(f"{{ [a, b] -> PE[{tiling.ox} + floor((a - ({x0}))/{tx}), "
                       f"{tiling.oy} + floor((b - ({y0}))/{ty})] }}")
        pieces.append(str(rel.apply_range(tile)))
    return IslText("{ " + "; ".join(p.strip("{} ") for p in pieces) + " }", where.loc)

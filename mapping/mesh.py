"""The mesh as isl sees it: PE spaces, boxes of PEs, translations, lines and sides.

Every planner module (streams, multicast trees, reductions, exchanges) speaks about PEs
through these helpers, so no module builds PE spaces or constraints by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import islpy as isl

from dtg.lair.lower import CTX, least_point, point_coordinates
from dtg.mapping.validate import PE

Side = Literal["N", "S", "W", "E"]
VERTICAL = ("N", "S")
SIDE_NAMES = {"N": "north", "S": "south", "W": "west", "E": "east"}
OPPOSITE_SIDE: dict[Side, Side] = {"N": "S", "S": "N", "E": "W", "W": "E"}
# The port through which data from a side enters a PE, and the direction it then flows.
ENTRY_PORT: dict[str, str] = {"N": "N", "S": "S", "W": "W", "E": "E"}
FLOW_PORT: dict[str, str] = {"N": "S", "S": "N", "W": "E", "E": "W"}
# The port of a PE facing its neighbour at (dx, dy).
PORT_TOWARDS: dict[tuple[int, int], str] = {(0, -1): "N", (0, 1): "S", (-1, 0): "W",
                                            (1, 0): "E"}


def pe_space() -> isl.Space:
    return isl.Space.set_alloc(CTX, 0, 2).set_tuple_name(isl.dim_type.set, PE)


def pe_map_space() -> isl.Space:
    return isl.Space.map_from_domain_and_range(pe_space(), pe_space())


def pe_box(x0: int, x1: int, y0: int, y1: int) -> isl.Set:
    """``{ PE[x, y] : x0 <= x <= x1 and y0 <= y <= y1 }``."""
    box = isl.Set.universe(pe_space())
    for dim, (lo, hi) in enumerate([(x0, x1), (y0, y1)]):
        box = box.lower_bound_val(isl.dim_type.set, dim, isl.Val.int_from_si(CTX, lo))
        box = box.upper_bound_val(isl.dim_type.set, dim, isl.Val.int_from_si(CTX, hi))
    return box


def translate(dx: int, dy: int) -> isl.Map:
    """``{ PE[x, y] -> PE[x + dx, y + dy] }``."""
    return linear_map(pe_map_space(), eqs=[{("out", 0): 1, ("in", 0): -1, 1: -dx},
                                           {("out", 1): 1, ("in", 1): -1, 1: -dy}])


def inward(side: Side) -> tuple[int, int]:
    """The step from an external PE on ``side`` into the mesh."""
    return {"N": (0, 1), "S": (0, -1), "W": (1, 0), "E": (-1, 0)}[side]


def same_line(side: Side) -> isl.Map:
    """``{ PE[a, b] -> PE[c, d] }`` with the coordinate across the flow equal."""
    keep = 0 if side in VERTICAL else 1
    return isl.Map.universe(pe_map_space()).equate(isl.dim_type.in_, keep, isl.dim_type.out,
                                                   keep)


def upstream_of(side: Side) -> isl.Map:
    """``{ PE[a] -> PE[b] }``: ``b`` on the line of ``a`` and not farther than ``a`` from
    ``side`` (a stream entering from ``side`` passes ``b`` on its way to ``a``)."""
    keep = 0 if side in VERTICAL else 1
    along = 1 - keep
    sign = 1 if side in ("N", "W") else -1  # (towards larger coordinates from N and W)
    return same_line(side).intersect(linear_map(pe_map_space(), ineqs=[
        {("in", along): sign, ("out", along): -sign}]))


def lines_before(side: Side) -> isl.Map:
    """``{ PE[a] -> PE[b] }``: ``b`` on a line of ``side``'s streams that comes before
    ``a``'s (its coordinate across the lines is smaller)."""
    across = 0 if side in VERTICAL else 1
    return linear_map(pe_map_space(), ineqs=[{("in", across): 1, ("out", across): -1,
                                              1: -1}])


def point(space: isl.Space, coords: Sequence[int]) -> isl.Point:
    p = isl.Point.zero(space)
    for k, value in enumerate(coords):
        p = p.set_coordinate_val(isl.dim_type.set, k, isl.Val.int_from_si(CTX, value))
    return p


def witness(s: isl.Set) -> tuple[int, ...]:
    """Some point of ``s`` (the least where isl can say), for messages."""
    return point_coordinates(least_point(s), int(s.dim(isl.dim_type.set)))


def fmt(name: str, coords: Sequence[int]) -> str:
    return f"{name}[{', '.join(map(str, coords))}]"


Term = tuple[str, int] | int  # ("in"/"out"/"set", position) or 1 for the constant


def linear_map(space: isl.Space, *, eqs: Sequence[Mapping[Term, int]] = (),
               ineqs: Sequence[Mapping[Term, int]] = ()) -> isl.Map:
    """The map on ``space`` with the constraints ``sum(coef * term) == 0`` for each of
    ``eqs`` and ``>= 0`` for each of ``ineqs`` (terms name input and output dimensions by
    position; the key ``1`` is the constant)."""
    ls = isl.LocalSpace.from_space(space)
    result = isl.BasicMap.universe(space)
    kinds = {"in": isl.dim_type.in_, "out": isl.dim_type.out}
    for rows, make in ((eqs, isl.Constraint.equality_alloc),
                       (ineqs, isl.Constraint.inequality_alloc)):
        for row in rows:
            c = make(ls)
            for term, coef in row.items():
                if term == 1:
                    c = c.set_constant_val(isl.Val.int_from_si(CTX, coef))
                else:
                    assert isinstance(term, tuple)
                    c = c.set_coefficient_val(kinds[term[0]], term[1],
                                              isl.Val.int_from_si(CTX, coef))
            result = result.add_constraint(c)
    return isl.Map.from_basic_map(result)

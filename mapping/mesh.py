"""The mesh as isl sees it: PE spaces, boxes of PEs, translations, lines and sides.

Every planner module (streams, multicast trees, reductions, exchanges) speaks about PEs
through these helpers, so no module builds PE spaces or constraints by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import islpy as isl

from dtg.lair.lower import CTX, least_point, point_coordinates
from dtg.mapping import poly
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


def direct_tree_edges(pairs: isl.Map) -> isl.Map:
    """``{ PE[sender] -> [PE[x] -> PE[parent of x]] }`` over the senders' trees: from
    the sender along its row to each receiver's column, then along that column."""
    space = isl.Space.map_from_domain_and_range(pairs.get_space().wrap(),
                                                pe_map_space().wrap())
    sx, sy, rx, ry = (("in", k) for k in range(4))
    x, y, px, py = (("out", k) for k in range(4))
    pieces = []
    for sign in (1, -1):  # along the row east (1) or west (-1), parent one step back
        pieces.append(linear_map(space, eqs=[{y: 1, sy: -1}, {px: 1, x: -1, 1: sign},
                                             {py: 1, y: -1}],
                                 ineqs=[{x: sign, sx: -sign, 1: -1}, {rx: sign, x: -sign}]))
        # along the receiver's column south (1) or north (-1)
        pieces.append(linear_map(space, eqs=[{x: 1, rx: -1}, {px: 1, x: -1},
                                             {py: 1, y: -1, 1: sign}],
                                 ineqs=[{y: sign, sy: -sign, 1: -1}, {ry: sign, y: -sign}]))
    edges = pieces[0]
    for piece in pieces[1:]:
        edges = edges.union(piece)
    pairs_w, edges = poly.align_params(pairs.wrap(), edges)
    return edges.intersect_domain(pairs_w).domain_factor_domain().coalesce()


def direct_entries(pairs: isl.Map) -> tuple[isl.Map, dict[str, isl.Map]] | None:
    """The trees carrying each sender's wavelets to its receivers, ``pairs`` ``{ PE[sender]
    -> PE[receiver] }``, all on one color (:func:`direct_tree_edges`), and for each port
    ``{ sender -> PE its tree enters by that port }``; None where two senders' trees would
    enter a PE by the same port (their wavelets would mix) or a receiver has several
    senders."""
    if not pairs.reverse().is_single_valued():
        return None
    edges = direct_tree_edges(pairs)
    entering: dict[str, isl.Map] = {}
    for step, port in PORT_TOWARDS.items():
        entered = edges.intersect_range(translate(*step).wrap()).range_factor_domain()
        if not entered.reverse().is_single_valued():
            return None
        entering[port] = entered
    return edges, entering


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

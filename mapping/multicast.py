"""Multicast trees: one stream from an entry PE to every PE that needs its elements.

A tree is dimension ordered: from the PE where the stream enters, along its row to the
columns that need elements, then along each column to the PEs that need them ("row
first"), or along the column first and then the rows. Routers forward every wavelet of
the tree's color to the tree's children and, where the PE needs elements of the stream,
to its core, which keeps what its instances read. Trees are computed once with isl for
all sources together, parametric in the source, so the work does not grow with the mesh.

Sources whose trees share a PE cannot share a color (the PE could not tell their
wavelets apart, and the routes would differ), so the sources are split into color groups
by greedy coloring of their conflict graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import islpy as isl
import networkx as nx

from dtg.lair.limits import counted
from dtg.mapping import poly
from dtg.mapping.mesh import Side, inward, linear_map, pe_map_space, pe_space, point, translate

First = Literal["row", "column"]
Row = dict[tuple[str, int] | int, int]  # a constraint for mesh.linear_map


@dataclass(frozen=True)
class Tree:
    """The trees of a group of sources that share a color (pairwise disjoint)."""

    sources: isl.Set  # external PEs (relative coordinates)
    members: isl.Map  # source -> every PE of its tree
    parent: isl.Map  # PE -> the PE it receives the stream from (a source for entry PEs)
    ramp: isl.Set  # PEs whose core receives the stream: those that need its elements

    def restricted(self, sources: isl.Set) -> Tree:
        """The part that carries the streams of ``sources`` (some of this tree's; trees
        of one color share no PE, so each PE's parent and ramp stay as they were)."""
        members = self.members.intersect_domain(sources)
        parent = self.parent.intersect_domain(members.range())
        ramp = self.ramp.intersect(members.range())
        return Tree(sources, members, parent, ramp)


@dataclass(frozen=True)
class Multicast:
    """The trees chosen for one stream, with what the choice was measured by."""

    first: First
    trees: tuple[Tree, ...]
    nodes: int  # PEs the trees pass, summed over sources
    alternative: int  # the same for the other dimension order

    def describe(self) -> str:
        other = "column" if self.first == "row" else "row"
        return (f"multicast trees along the {self.first} first, then the {other}s: "
                f"{self.nodes} PE visits ({self.alternative} {other} first), "
                f"{counted(len(self.trees), 'color')}")


def plan_multicast(need: isl.Map, side: Side) -> Multicast:
    """Trees carrying each source's stream to the PEs in ``need`` (``{ source -> PE }``,
    relative coordinates; sources are external PEs on ``side``), in the cheaper order."""
    shapes = {first: _members(need, side, first) for first in ("row", "column")}
    nodes = {first: int(m.wrap().count_val().to_python()) for first, m in shapes.items()}
    groups = {first: _color_groups(m) for first, m in shapes.items()}
    # Fewer colors first, then fewer PEs on the way; on a tie, along the side first (as
    # the paper's adapters do).
    along_side: First = "row" if side in ("N", "S") else "column"
    first: First = min(("row", "column"), key=lambda f: (
        len(groups[f]), nodes[f], f != along_side))
    members = shapes[first]
    trees = []
    for sources in groups[first]:
        m = members.intersect_domain(sources)
        parent = _parents(m, side, first)
        assert parent.is_single_valued(), "trees of one color overlap"
        trees.append(Tree(sources, m, parent, need.intersect_domain(sources).range()))
    other: First = "column" if first == "row" else "row"
    return Multicast(first, tuple(trees), nodes[first], nodes[other])


def _pair_space() -> isl.Space:
    """``[PE -> PE] -> PE``."""
    return isl.Space.map_from_domain_and_range(pe_map_space().wrap(), pe_space())


def _between(lo: tuple[str, int], x: tuple[str, int], hi: tuple[str, int]) -> list[Row]:
    return [{x: 1, lo: -1}, {hi: 1, x: -1}]


def _members(need: isl.Map, side: Side, first: First) -> isl.Map:
    """``{ source -> PE }``: the PEs of each source's tree."""
    a = 0 if first == "row" else 1  # the coordinate travelled first
    b = 1 - a
    dx, dy = inward(side)
    need0 = translate(-dx, -dy).apply_range(need)  # entry PE -> PE needing elements
    space = _pair_space()
    p0a, p0b, qa, qb = ("in", a), ("in", b), ("in", 2 + a), ("in", 2 + b)
    pa, pb = ("out", a), ("out", b)
    # Along the first coordinate, level with the entry PE, up to the needing PE's line...
    first_leg = isl.Map.empty(space)
    for lo, hi in ((p0a, qa), (qa, p0a)):
        first_leg = first_leg.union(linear_map(space, eqs=[{pb: 1, p0b: -1}],
                                               ineqs=_between(lo, pa, hi)))
    # ...then along that line, from the entry PE's level to the needing PE.
    second_leg = isl.Map.empty(space)
    for lo, hi in ((p0b, qb), (qb, p0b)):
        second_leg = second_leg.union(linear_map(space, eqs=[{pa: 1, qa: -1}],
                                                 ineqs=_between(lo, pb, hi)))
    legs = first_leg.union(second_leg).intersect_domain(need0.wrap())
    members0 = legs.domain_factor_domain()  # entry PE -> PE
    return translate(dx, dy).apply_range(members0).coalesce()


def _parents(members: isl.Map, side: Side, first: First) -> isl.Map:
    """``{ PE -> PE }``: where each PE of a tree receives from (the source for the entry
    PE; otherwise the neighbour one step back towards the entry PE)."""
    a = 0 if first == "row" else 1
    b = 1 - a
    dx, dy = inward(side)
    space = _pair_space()  # [source -> p] -> r
    s, p, r = (("in", 0), ("in", 1)), (("in", 2), ("in", 3)), (("out", 0), ("out", 1))
    entry: list[Row] = [{p[0]: 1, s[0]: -1, 1: -dx}, {p[1]: 1, s[1]: -1, 1: -dy}]
    pieces = [linear_map(space, eqs=[*entry, {r[0]: 1, s[0]: -1}, {r[1]: 1, s[1]: -1}])]
    # p0 = source + (dx, dy); level with it along the first coordinate: step back along a.
    delta = (dx, dy)

    def from_p0(c: int, scale: int, const: int) -> Row:
        """``scale * (p[c] - p0[c]) + const``."""
        return {p[c]: scale, s[c]: -scale, 1: const - scale * delta[c]}

    for sign in (1, -1):
        pieces.append(linear_map(space, eqs=[from_p0(b, 1, 0), {r[a]: 1, p[a]: -1, 1: sign},
                                             {r[b]: 1, p[b]: -1}],
                                 ineqs=[from_p0(a, sign, -1)]))
        pieces.append(linear_map(space, eqs=[{r[b]: 1, p[b]: -1, 1: sign},
                                             {r[a]: 1, p[a]: -1}],
                                 ineqs=[from_p0(b, sign, -1)]))
    step = pieces[0]
    for piece in pieces[1:]:
        step = step.union(piece)
    return step.intersect_domain(members.wrap()).domain_factor_range().coalesce()


def _color_groups(members: isl.Map) -> list[isl.Set]:
    """Sources split so that the trees of one group share no PE."""
    sources = members.domain()
    shared = members.apply_range(members.reverse())
    conflicts = shared.subtract(isl.Map.identity(shared.get_space()))
    if conflicts.is_empty():
        return [sources]
    graph: nx.Graph = nx.Graph()
    for src in poly.points(sources):
        graph.add_node(src)
    for pair in poly.points(conflicts.wrap()):
        graph.add_edge(pair[:2], pair[2:])
    coloring = nx.greedy_color(graph, strategy="largest_first")
    groups: dict[int, isl.Set] = {}
    space = sources.get_space()
    for src, color in sorted(coloring.items()):
        single = isl.Set.from_point(point(space, src))
        groups[color] = groups[color].union(single) if color in groups else single
    # (a group too large to take apart, source by source, onto colors of its own:
    # written as a residue class where it is one)
    return [residue_class(g, sources) if int(g.count_val().to_python()) > MAX_SPLIT else g
            for g in (groups[c].coalesce() for c in sorted(groups))]


# Sources of one color taken apart onto colors of their own at most (mapping.inputs),
# where their orders differ; a larger group is written as a residue class instead.
MAX_SPLIT = 8


def residue_class(group: isl.Set, sources: isl.Set) -> isl.Set:
    """``group`` as the sources in one residue class of a coordinate, or of their sum or
    difference, modulo 2 to 4 (every other source of a line: ``x mod 2 = 1``), where it
    is one: a set with one constraint instead of a point per source, which keeps the
    flows' relations, and the code derived from them, one piece (a point per source made
    a keep expression of 16 pieces on a line of 32); ``group`` itself otherwise."""
    if group.n_basic_set() <= 1 or int(sources.dim(isl.dim_type.set)) != 2:
        return group
    ls = isl.LocalSpace.from_space(sources.get_space())
    x, y = (isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, d))
            for d in (0, 1))
    for f in (x, y, x.add(y), x.sub(y)):
        for k in (2, 3, 4):
            residue = f.mod_val(isl.Val.int_from_si(sources.get_ctx(), k))
            for r in range(k):
                value = isl.PwAff.val_on_domain(sources, isl.Val.int_from_si(
                    sources.get_ctx(), r))
                candidate = sources.intersect(residue.eq_set(value))
                if candidate.is_equal(group):
                    return candidate
    return group


"""Router configuration for a multicast tree, read off its parent relation.

A tree is given by ``{ PE -> PE }``: where each of its PEs receives the color from (a
neighbour, or the external source for the entry PE). A PE's input port faces its parent;
its output ports face the neighbours that have it as parent, plus ``RAMP`` where its
core reads the stream. Each distinct (input port, outputs) combination becomes one
guarded route, so the routes of a color partition the tree's PEs.
"""

from __future__ import annotations

import islpy as isl

from dtg.codegen.islast import condition_of
from dtg.errors import CompilerBug
from dtg.mapping import poly
from dtg.mapping.mesh import (
    PORT_TOWARDS,
    direct_entries,
    pe_box,
    translate,
)
from dtg.pe.ir import Route


def tree_routes(color: int, parent: isl.Map, ramp: isl.Set, context: isl.Set) -> list[Route]:
    """The routes of ``color`` on the PEs of the tree with ``parent`` (relative
    coordinates); ``ramp`` is the PEs whose core receives the stream."""
    children = parent.reverse()
    has_child = {port: children.intersect(translate(*step)).domain()
                 for step, port in PORT_TOWARDS.items()}
    outputs = [*has_child.items(), ("RAMP", ramp)]
    routes: list[Route] = []
    for step, port in PORT_TOWARDS.items():
        receiving = parent.intersect(translate(*step)).domain()
        for pes, targets in _split(receiving, outputs):
            if not targets:
                raise CompilerBug(f"multicast tree of color {color}: PEs {pes} receive the "
                                  "stream but neither use nor forward it")
            routes.append(_route(color, port, pes, targets, context))
    return routes


def broadcast_routes(color: int, width: int, height: int, context: isl.Set) -> list[Route]:
    """Routes that carry a wavelet any PE of a ``width`` x ``height`` region sends to
    every other PE: along the sender's row both ways, and from each PE of that row along
    its column both ways (one fixed configuration serves every sender)."""
    pes = pe_box(0, width - 1, 0, height - 1)
    has = {port: pes.intersect(pe_box(0, width - 1, 0, height - 1).apply(translate(
        *(-d for d in step)))) for step, port in PORT_TOWARDS.items()}
    # A wavelet moving along the row keeps going and turns into the column; one moving
    # along a column keeps going; the sender's own wavelet starts all four ways.
    onward = {"RAMP": ("W", "E", "N", "S"), "W": ("E", "N", "S"), "E": ("W", "N", "S"),
              "N": ("S",), "S": ("N",)}
    routes: list[Route] = []
    for port, ahead in onward.items():
        receiving = pes if port == "RAMP" else has[port]
        outputs = [(p, has[p]) for p in ahead] + ([] if port == "RAMP" else [("RAMP", pes)])
        routes.extend(_route(color, port, part, targets, context)
                      for part, targets in _split(receiving, outputs) if targets)
    return routes


def direct_routes(color: int, pairs: isl.Map, context: isl.Set) -> list[Route] | None:
    """Routes carrying each sender's wavelets to its receivers only, all senders at once
    on one color: ``pairs`` is ``{ PE[sender] -> PE[receiver] }`` (relative). Each
    wavelet goes along the sender's row to the receiver's column, then along the column
    (a multicast tree per sender). None where two senders' trees would enter a PE by
    the same port (their wavelets would mix), or a receiver has several senders."""
    found = direct_entries(pairs)
    if found is None:
        return None
    edges, entering = found
    children = {port: edges.intersect_range(translate(*(-d for d in step)).wrap())
                .range_factor_range() for step, port in PORT_TOWARDS.items()}
    senders = pairs.domain()
    own = isl.Map.identity(isl.Space.map_from_set(senders.get_space())).intersect_domain(
        senders)
    routes: list[Route] = []
    for port, entered in [("RAMP", own), *entering.items()]:
        outputs = [(q, entered.intersect(has).range()) for q, has in children.items()]
        if port != "RAMP":
            outputs.append(("RAMP", entered.intersect(pairs).range()))
        for pes, targets in _split(entered.range(), outputs):
            if not targets:
                raise CompilerBug(f"direct routes of color {color}: PEs {pes} receive "
                                  "wavelets but neither use nor forward them")
            routes.append(_route(color, port, pes, targets, context))
    return routes


def _split(pes: isl.Set, outputs: list[tuple[str, isl.Set]]
           ) -> list[tuple[isl.Set, tuple[str, ...]]]:
    """``pes`` split by which of the ``outputs`` (port, PEs having it) apply."""
    pieces: list[tuple[isl.Set, tuple[str, ...]]] = [(pes, ())] if not pes.is_empty() else []
    for name, where in outputs:
        split = []
        for part, targets in pieces:
            for piece, extra in ((part.intersect(where), (name,)),
                                 (part.subtract(where), ())):
                if not piece.is_empty():
                    split.append((piece, targets + extra))
        pieces = split
    return pieces


def _route(color: int, port: str, pes: isl.Set, targets: tuple[str, ...],
           context: isl.Set) -> Route:
    bound = pes.bind(poly.multi_id(pes.get_space(), poly.PE_NAMES))
    return Route(color, port, _ordered(targets), condition_of(bound, context))


def _ordered(targets: tuple[str, ...]) -> tuple[str, ...]:
    """``RAMP`` first, then the compass ports, as the other routes list them."""
    rank = {"RAMP": 0, "N": 1, "S": 2, "W": 3, "E": 4}
    return tuple(sorted(targets, key=rank.__getitem__))
